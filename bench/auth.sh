#!/usr/bin/env bash
# Auth benchmarks against a release build on loopback (needs wrk). Prints the figures recorded in
# docs/performance.md. Usage: bash bench/auth.sh [postgres://user@host:5432/postgres]
# With a PostgreSQL URL it also benches PostgreSQL, in a scratch database it creates and drops.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v wrk >/dev/null || { echo "wrk is needed (apt-get install wrk)" >&2; exit 1; }
cargo build --release -p keel --example bare_json
cargo build --release -p keel
target=${CARGO_TARGET_DIR:-target}
keel="$target/release/keel"
port=8181
duration=${BENCH_SECONDS:-15}
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

start_keel() { # $1 = DATABASE_URL
  DATABASE_URL="$1" PORT=$port BCRYPT_COST=12 SECRET_KEY=bench-secret-bench-secret-bench-secret \
    RUST_LOG=warn "$keel" serve >"$work/keel.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$port/health/live" >/dev/null && return; sleep 0.1; done
  echo "keel did not start" >&2; cat "$work/keel.log" >&2; exit 1
}

summary() { # wrk output on stdin -> "req/s p50 p99"
  awk '/Requests\/sec/ {rps=$2} /^ +50%/ {p50=$2} /^ +99%/ {p99=$2} END {printf "%s req/s, p50 %s, p99 %s\n", rps, p50, p99}'
}

bench_backend() { # $1 = label, $2 = DATABASE_URL
  start_keel "$2"
  base="http://127.0.0.1:$port"
  curl -sf -X POST "$base/auth/register" -H 'content-type: application/json' \
    -d '{"email":"bench@example.com","password":"bench-password-1"}' >/dev/null || true
  token=$(curl -sf -X POST "$base/auth/token" -d 'username=bench%40example.com&password=bench-password-1' \
    | sed -E 's/.*"access_token":"([^"]+)".*/\1/')
  echo "[$1] GET /auth/me, 64 connections, ${duration}s:"
  wrk -t2 -c64 -d"${duration}s" --latency -H "Authorization: Bearer $token" "$base/auth/me" | summary
  echo "[$1] POST /auth/token (bcrypt cost 12), 8 connections, ${duration}s:"
  wrk -t1 -c8 -d"${duration}s" --latency -s bench/login.lua "$base/auth/token" | summary
  echo "[$1] GET /auth/me, 64 connections, during a login storm (16 connections):"
  wrk -t1 -c16 -d"$((duration + 4))s" -s bench/login.lua "$base/auth/token" >/dev/null &
  storm=$!
  sleep 2
  wrk -t1 -c64 -d"${duration}s" --latency -H "Authorization: Bearer $token" "$base/auth/me" | summary
  wait $storm || true
  kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
}

echo "bcrypt ceiling:"
cargo run -q --release -p auth-core --example bcrypt_rate -- 12

"$target/release/examples/bare_json" 127.0.0.1:8099 >/dev/null 2>&1 &
pids+=($!)
sleep 0.5
echo "[baseline] bare actix-web JSON handler, 64 connections, ${duration}s:"
wrk -t2 -c64 -d"${duration}s" --latency http://127.0.0.1:8099/ | summary

bench_backend sqlite "sqlite://$work/bench.db"
if [ -n "${1:-}" ]; then
  scratch="keel_bench_$$"
  psql "$1" -qc "CREATE DATABASE $scratch"
  bench_backend postgresql "${1%/*}/$scratch"
  psql "$1" -qc "DROP DATABASE $scratch WITH (FORCE)"
fi

#!/usr/bin/env bash
# The hot reads beside a bare actix-web handler that answers the same body from memory, with the
# read cache on and off, on SQLite and (given a URL) PostgreSQL; plus the time from start to ready
# and the idle RSS. Prints the tables recorded in docs/performance.md.
# Usage: bash bench/reads.sh [postgres://user@host:5432/postgres]   (needs wrk)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v wrk >/dev/null || { echo "wrk is needed (apt-get install wrk)" >&2; exit 1; }
cargo build --release -p keel --example bare_json
cargo build --release -p keel
target=${CARGO_TARGET_DIR:-target}
keel="$target/release/keel"
bare="$target/release/examples/bare_json"
port=8183
bare_port=8097
duration=${BENCH_SECONDS:-8}
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
base="http://127.0.0.1:$port"
list_path="/api/v1/blog/posts?page=1&page_size=20"
slug_path="/api/v1/blog/posts/post-500"

# 1,000 published posts with 3 of 10 tags each.
python3 - "$work/seed.json" <<'PY'
import json, sys
tags = [f"topic-{i}" for i in range(10)]
posts = [{
    "title": f"Post number {i}",
    "slug": f"post-{i}",
    "content": "Some **markdown** body text. " * 40,
    "excerpt": f"Excerpt {i}",
    "status": "published",
    "published_at": f"2026-01-01T00:{i // 60 % 60:02d}:{i % 60:02d}Z",
    "tags": [tags[i % 10], tags[(i + 3) % 10], tags[(i + 7) % 10]],
} for i in range(1000)]
json.dump(posts, open(sys.argv[1], "w"))
PY

load() { # URL [token] -> "req/s p50 p99"
  local auth=()
  [ -n "${2:-}" ] && auth=(-H "Authorization: Bearer $2")
  wrk -t2 -c64 -d"${duration}s" --latency "${auth[@]}" "$1" |
    awk '/Requests\/sec/ {rps=$2} /^ +50%/ {p50=$2} /^ +99%/ {p99=$2} END {printf "%d %s %s\n", rps, p50, p99}'
}

start_keel() { # DATABASE_URL READ_CACHE; sets $keel_pid and $ready_ms
  local t0
  t0=$(date +%s%N)
  DATABASE_URL="$1" READ_CACHE="$2" KEEL_MODULES=auth,blog PORT=$port HTTP_WORKERS=2 BCRYPT_COST=4 \
    SECRET_KEY=bench-secret-bench-secret-bench-secret RUST_LOG=warn "$keel" serve >"$work/keel.log" 2>&1 &
  keel_pid=$!
  pids+=("$keel_pid")
  for _ in $(seq 1 500); do
    curl -sf "$base/health/ready" >/dev/null && break
    sleep 0.005
  done
  ready_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
}

stop_keel() { kill "$keel_pid"; wait "$keel_pid" 2>/dev/null || true; }

bench_backend() { # label DATABASE_URL
  local label=$1 url=$2 token rss
  DATABASE_URL="$url" KEEL_MODULES=auth,blog RUST_LOG=warn "$keel" migrate >/dev/null
  DATABASE_URL="$url" KEEL_MODULES=auth,blog RUST_LOG=warn "$keel" blog import "$work/seed.json" >/dev/null
  declare -A result
  for cache in on off; do
    start_keel "$url" "$cache"
    if [ "$cache" = on ]; then
      rss=$(awk '/VmRSS/ {printf "%.0f MiB", $2 / 1024}' "/proc/$keel_pid/status")
      echo "[$label] start to ready: ${ready_ms} ms, idle RSS after start: $rss"
      curl -sf -X POST "$base/auth/register" -H 'content-type: application/json' \
        -d '{"email":"bench@example.com","password":"bench-password-1"}' >/dev/null
    fi
    token=$(curl -sf -X POST "$base/auth/token" -d 'username=bench%40example.com&password=bench-password-1' |
      sed -E 's/.*"access_token":"([^"]+)".*/\1/')
    curl -sf "$base$list_path" -o "$work/list.json"
    curl -sf "$base$slug_path" -o "$work/slug.json"
    curl -sf -H "Authorization: Bearer $token" "$base/auth/me" -o "$work/me.json"
    result[list_$cache]=$(load "$base$list_path")
    result[me_$cache]=$(load "$base/auth/me" "$token")
    result[slug_$cache]=$(load "$base$slug_path")
    stop_keel
  done
  for what in list me slug; do
    "$bare" "127.0.0.1:$bare_port" "$work/$what.json" >/dev/null 2>&1 &
    pids+=($!)
    sleep 0.3
    result[${what}_bare]=$(load "http://127.0.0.1:$bare_port/")
    kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
  done
  echo "[$label] wrk -t2 -c64 -d${duration}s; share = req/s of the bare handler serving the same body"
  printf '| %-34s | %8s | %8s | %8s | %6s |\n' what req/s p50 p99 share
  for what in list me slug; do
    local size name
    size=$(wc -c <"$work/$what.json")
    case $what in
      list) name="list page ($size B)" ;;
      me) name="/auth/me ($size B)" ;;
      slug) name="post by slug ($size B)" ;;
    esac
    read -r bare_rps bare_p50 bare_p99 <<<"${result[${what}_bare]}"
    printf '| %-34s | %8s | %8s | %8s | %6s |\n' "$name, bare handler" "$bare_rps" "$bare_p50" "$bare_p99" "100 %"
    for cache in on off; do
      read -r rps p50 p99 <<<"${result[${what}_$cache]}"
      printf '| %-34s | %8s | %8s | %8s | %5s%% |\n' "$name, READ_CACHE=$cache" "$rps" "$p50" "$p99" \
        "$(awk -v a="$rps" -v b="$bare_rps" 'BEGIN {printf "%.1f", 100 * a / b}')"
    done
  done
}

bench_backend sqlite "sqlite://$work/reads.db"
if [ -n "${1:-}" ]; then
  scratch="keel_bench_reads_$$"
  psql "$1" -qc "CREATE DATABASE $scratch"
  bench_backend postgresql "${1%/*}/$scratch"
  psql "$1" -qc "DROP DATABASE $scratch WITH (FORCE)"
fi

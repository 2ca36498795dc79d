#!/usr/bin/env bash
# Payment benchmarks against a release build with the payment module, on SQLite and (given a URL)
# PostgreSQL: signed Stripe webhook events processed per second from 16 concurrent senders, then
# the transaction list those events produced beside a bare actix-web handler that answers the same
# body from memory. Prints the figures recorded in docs/performance.md.
# Usage: bash bench/payment.sh [postgres://user@host:5432/postgres]   (needs wrk and python3)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v wrk >/dev/null || { echo "wrk is needed (apt-get install wrk)" >&2; exit 1; }
cargo build --release -p keel --features payment --bin keel --example bare_json
target=${CARGO_TARGET_DIR:-target}
keel="$target/release/keel"
bare="$target/release/examples/bare_json"
port=8187
bare_port=8098
duration=${BENCH_SECONDS:-10}
events=${PAYMENT_EVENTS:-20000}
secret=whsec_bench
pg=${1:-}
work=$(mktemp -d)
pids=()
scratch=""
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  [ -n "$scratch" ] && psql "$pg" -qc "DROP DATABASE IF EXISTS $scratch WITH (FORCE)"
  rm -rf "$work"
}
trap cleanup EXIT
base="http://127.0.0.1:$port"
list_path="/api/v1/payment/transactions?page=1&page_size=20"

load() { # URL -> "req/s p50 p99 non-2xx"
  wrk -t2 -c64 -d"${duration}s" --latency "$1" |
    awk '/Requests\/sec/ {rps=$2} /^ +50%/ {p50=$2} /^ +99%/ {p99=$2} /Non-2xx/ {bad=$4}
         END {printf "%d %s %s %d\n", rps, p50, p99, bad + 0}'
}

bench_backend() { # label DATABASE_URL
  local label=$1 url=$2 keel_pid
  # Only the payment module is mounted, so the list needs no token.
  DATABASE_URL="$url" KEEL_MODULES=payment STRIPE_WEBHOOK_SECRET=$secret STRIPE_SECRET_KEY=sk_test_bench \
    PORT=$port HTTP_WORKERS=2 RUST_LOG=warn "$keel" serve >"$work/keel.log" 2>&1 &
  keel_pid=$!
  pids+=("$keel_pid")
  for _ in $(seq 1 200); do curl -sf "$base/health/ready" >/dev/null && break; sleep 0.05; done
  curl -sf "$base/health/ready" >/dev/null || { cat "$work/keel.log" >&2; exit 1; }

  echo "[$label] POST /api/v1/payment/webhook, $events signed events, 16 senders:"
  if ! python3 bench/payment_webhooks.py 127.0.0.1 "$port" "$secret" "$events" 16 | sed 's/^/  /'; then
    grep -m5 'request failed' "$work/keel.log" >&2; exit 1
  fi

  curl -sf "$base$list_path" -o "$work/list.json"
  read -r rps p50 p99 bad <<<"$(load "$base$list_path")"
  kill "$keel_pid"; wait "$keel_pid" 2>/dev/null || true
  "$bare" "127.0.0.1:$bare_port" "$work/list.json" >/dev/null 2>&1 &
  pids+=($!)
  sleep 0.3
  read -r bare_rps bare_p50 bare_p99 _ <<<"$(load "http://127.0.0.1:$bare_port/")"
  kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true

  echo "[$label] GET $list_path ($(wc -c <"$work/list.json") B), wrk -t2 -c64 -d${duration}s:"
  echo "  bare handler, same body: $bare_rps req/s, p50 $bare_p50, p99 $bare_p99"
  echo "  keel: $rps req/s, p50 $p50, p99 $p99, non-2xx $bad, share" \
    "$(awk -v a="$rps" -v b="$bare_rps" 'BEGIN {printf "%.1f", 100 * a / b}') %"
}

bench_backend sqlite "sqlite://$work/pay.db"
if [ -n "$pg" ]; then
  psql "$pg" -qc "CREATE DATABASE keel_bench_payment_$$"
  scratch="keel_bench_payment_$$"   # dropped on exit
  bench_backend postgresql "${pg%/*}/$scratch"
fi

#!/usr/bin/env bash
# Communications benchmarks against a release build and the provider simulator on loopback (needs
# wrk): email sends per second at 64 connections, then the p99 of GET /comms/health while every
# email send waits 2 s on the provider. Prints the figures recorded in docs/performance.md.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v wrk >/dev/null || { echo "wrk is needed (apt-get install wrk)" >&2; exit 1; }
cargo build --release -p keel -p provider-sim-bin
target=${CARGO_TARGET_DIR:-target}
port=8184
sim_port=9931
duration=${BENCH_SECONDS:-10}
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

summary() {
  awk '/Requests\/sec/ {rps=$2} /^ +50%/ {p50=$2} /^ +99%/ {p99=$2} /Non-2xx/ {bad=$4} END {printf "%s req/s, p50 %s, p99 %s, non-2xx %s\n", rps, p50, p99, bad + 0}'
}

"$target/release/provider-sim" --addr "127.0.0.1:$sim_port" \
  --resend-webhook-url "http://127.0.0.1:$port/api/v1/comms/webhooks/resend" >"$work/sim.env" 2>/dev/null &
pids+=($!)
for _ in $(seq 1 100); do [ -s "$work/sim.env" ] && break; sleep 0.1; done
set -a; . "$work/sim.env"; set +a   # values are quoted where a shell needs it
KEEL_MODULES=comms DATABASE_URL="sqlite://$work/comms.db" PORT=$port HTTP_WORKERS=2 RUST_LOG=warn \
  PUBLIC_BASE_URL="http://127.0.0.1:$port" COMMS_TIMEOUT_SECONDS=15 "$target/release/keel" serve >"$work/keel.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$port/health/ready" >/dev/null && break; sleep 0.1; done
base="http://127.0.0.1:$port/api/v1/comms"

echo "[sqlite] POST /comms/email/send against provider-sim, 64 connections, ${duration}s:"
wrk -t2 -c64 -d"${duration}s" --latency -s bench/email.lua "$base/email/send" | summary
echo "[sqlite] GET /comms/health, quiet, 64 connections, ${duration}s:"
wrk -t2 -c64 -d"${duration}s" --latency "$base/health" | summary

# Every email send now waits 2 s on the provider.
curl -sf -X POST "http://127.0.0.1:$sim_port/_sim/faults/resend" -H 'content-type: application/json' \
  -d '{"delay_ms": 2000, "times": 1000000}' >/dev/null
wrk -t1 -c64 -d"$((duration + 4))s" --timeout 10s --latency -s bench/email.lua "$base/email/send" >"$work/slow.txt" &
slow=$!
sleep 2
echo "[sqlite] GET /comms/health, 64 connections, while 64 email sends wait 2 s each on the provider:"
wrk -t1 -c64 -d"${duration}s" --latency "$base/health" | summary
wait $slow || true
echo "[sqlite] the slow email sends meanwhile:"
summary <"$work/slow.txt"

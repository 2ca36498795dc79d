#!/usr/bin/env bash
# AI stream benchmarks against a release build and the provider simulator on loopback: how many
# streams one server holds open at once while the provider answers slowly, the memory per open
# stream, and the time to first chunk the server adds over the simulator's own.
# Usage: bash bench/ai.sh [STREAMS]   (default 10000; needs python3)
set -euo pipefail
cd "$(dirname "$0")/.."
streams=${1:-10000}
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
cargo build --release -p keel -p provider-sim-bin
target=${CARGO_TARGET_DIR:-target}
port=8186
sim_port=9932
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

start_sim() { # chunk delay in ms
  "$target/release/provider-sim" --addr "127.0.0.1:$sim_port" --chunk-delay-ms "$1" >"$work/sim.env" 2>/dev/null &
  sim_pid=$!
  pids+=("$sim_pid")
  for _ in $(seq 1 100); do [ -s "$work/sim.env" ] && break; sleep 0.1; done
}
start_keel() {
  (set -a; . "$work/sim.env"; set +a
   KEEL_MODULES=ai AI_PROVIDER=openai DATABASE_URL="sqlite://$work/ai.db" PORT=$port HTTP_WORKERS=2 \
     RUST_LOG=warn exec "$target/release/keel" serve) >"$work/keel.log" 2>&1 &
  keel_pid=$!
  pids+=("$keel_pid")
  for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$port/health/ready" >/dev/null && break; sleep 0.1; done
}
stop() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

# Time to first chunk, one stream at a time: through keel, then straight from the simulator.
start_sim 0
start_keel
echo "time to first chunk, 200 streams one after another (simulator without delay):"
python3 - "$port" "$sim_port" <<'PY'
import http.client, json, statistics, sys, time
keel, sim = int(sys.argv[1]), int(sys.argv[2])
def first_chunk(port, path, body, headers):
    start = time.monotonic()
    c = http.client.HTTPConnection("127.0.0.1", port)
    c.request("POST", path, body=json.dumps(body), headers=headers)
    r = c.getresponse()
    buf = b""
    while True:
        line = r.fp.readline()
        buf += line
        if (b"event: chunk" in buf) or (b'"content"' in line and b"delta" in line) or not line:
            break
    c.close()
    return time.monotonic() - start
msg = "word " * 20
keel_times = [first_chunk(keel, "/ai/chat/stream", {"message": msg}, {"Content-Type": "application/json"}) for _ in range(200)]
sim_times = [first_chunk(sim, "/openai/v1/chat/completions",
             {"model": "gpt-4o-mini", "stream": True, "messages": [{"role": "user", "content": msg}]},
             {"Content-Type": "application/json", "Authorization": "Bearer sim-ai-key"}) for _ in range(200)]
k, s = statistics.median(keel_times) * 1000, statistics.median(sim_times) * 1000
print(f"{k:.2f} ms median (the simulator alone: {s:.2f} ms): {k - s:.2f} ms added")
PY
stop "$keel_pid"; stop "$sim_pid"

# Many streams at once, the provider writing one word every 2 s.
start_sim 2000
start_keel
echo "$streams streams opened at once (the simulator writes one word every 2 s):"
python3 bench/ai_streams.py 127.0.0.1 $port /ai/chat/stream "$streams" 60 "$keel_pid" | sed 's/^/  /'

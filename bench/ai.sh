#!/usr/bin/env bash
# AI streams against the provider simulator (as OpenAI) on loopback: whole streams per second
# from 64 clients (a 20-word message, echoed word by word: about 25 server-sent events), beside the
# same clients reading the same stream straight from the simulator; the time to first chunk keel
# adds over the simulator's own; and how many streams one server holds open at once while the
# provider writes one word every 2 s, with the memory per open stream. keel serves only the AI
# module (open: no token), conversations in the database (AI_CONVERSATION_STORE=database).
# Usage: bash bench/ai.sh [postgres://user@host:5432/postgres]   (needs python3)
# SQLite always; with a PostgreSQL URL, PostgreSQL too, in a scratch database.
# BENCH_AI_HOLD: streams held open at once (default 10,000; 0 skips that part). It needs about
# two file descriptors per stream in keel: the script raises `ulimit -n` as far as it may, and
# holds fewer streams, said in its line, where the limit cannot reach that. The held streams' server
# runs without the circuit breaker (AI_CIRCUIT_FAILURES=0): a few local connections refused in
# the burst would otherwise close every later stream with the breaker's error, which measures the
# breaker, not how many streams the server holds.
source "$(dirname "$0")/lib.sh"
build_release
port=8186
sim_port=9932
hold=${BENCH_AI_HOLD:-10000}
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

# Waits (at most 65 s: TIME_WAIT lasts 60) until COUNT local ports are free beside the sockets
# that earlier runs left in TIME_WAIT: each held stream takes two loopback connections.
wait_for_ports() { # COUNT
  local low high range waiting deadline=$(( $(date +%s) + 65 ))
  read -r low high </proc/sys/net/ipv4/ip_local_port_range
  range=$(( high - low + 1 ))
  while :; do
    waiting=$(ss -Htan state time-wait | wc -l)
    [ $(( range - waiting )) -ge "$1" ] && return
    [ "$(date +%s)" -ge $deadline ] && {
      say "only $(( range - waiting )) of $range local ports free ($waiting in TIME_WAIT) for $1: streams may fail to connect"
      return
    }
    sleep 5
  done
}

bench_backend() { # label DATABASE_URL
  local url=$2 figures stream_rate stream_p50 stream_p99 sim_env lines
  start_sim $sim_port --chunk-delay-ms 0
  mapfile -t sim_env < <(sim_settings)
  start_keel $port DATABASE_URL="$url" KEEL_MODULES=ai AI_PROVIDER=openai \
    AI_CONVERSATION_STORE=database "${sim_env[@]}"

  say "POST /ai/chat/stream, $conns clients"
  figures=$(python3 bench/closed_loop.py stream 127.0.0.1 $port "$duration" "$conns") ||
    die "the AI streams failed"
  read -r stream_rate stream_p50 stream_p99 _ <<<"$figures"
  say "the same stream straight from provider-sim"
  figures=$(python3 bench/closed_loop.py openai 127.0.0.1 $sim_port "$duration" "$conns") ||
    die "the streams straight from provider-sim failed"
  row "\`POST /ai/chat/stream\` (20 words streamed back, provider-sim as OpenAI)" \
    "Python asyncio, $conns clients" "$stream_rate" streams/s "$stream_p50" "$stream_p99" \
    "${figures%% *}" "provider-sim's own stream, same client"

  say "time to first chunk, one stream at a time"
  lines=$(python3 - $port $sim_port <<'PY'
import http.client, json, statistics, sys, time
keel, sim = int(sys.argv[1]), int(sys.argv[2])
def first_chunk(port, path, body, headers):
    start = time.monotonic()
    c = http.client.HTTPConnection("127.0.0.1", port)
    c.request("POST", path, body=json.dumps(body), headers=headers)
    r = c.getresponse()
    if r.status != 200:
        sys.exit(f"{path}: HTTP {r.status}")
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
print(f"{k:.2f} ms median through keel, {s:.2f} ms straight from provider-sim: {k - s:.2f} ms added")
PY
) || die "the time to first chunk failed"
  note "time to first chunk, 200 streams one after another: $lines"

  if [ "$hold" -gt 0 ]; then
    # A fresh server, so that its RSS before is that of an idle one.
    stop "$keel_pid"
    curl -sf -X POST "$sim_base/_sim/llm/chunk-delay" -H 'content-type: application/json' -d '{"ms": 2000}' >/dev/null
    start_keel $port DATABASE_URL="$url" KEEL_MODULES=ai AI_PROVIDER=openai \
      AI_CONVERSATION_STORE=database AI_CIRCUIT_FAILURES=0 "${sim_env[@]}"
    # Two descriptors per held stream: the client's socket and the connection to the provider
    # (a server without the tasks module keeps no duplicate of the client's, kernel::peer).
    local held=$hold fits=$(( ($(ulimit -n) - 1000) / 2 / 500 * 500 ))
    if [ "$held" -gt "$fits" ]; then
      held=$fits
      note "(open files are limited to $(ulimit -n) here, and keel needs two per held stream: $(fmt_rate "$held") held instead of $(fmt_rate "$hold"))"
    fi
    wait_for_ports $((2 * held))
    say "$(fmt_rate "$held") streams opened at once, the provider writing one word every 2 s"
    lines=$(python3 bench/ai_streams.py 127.0.0.1 $port /ai/chat/stream "$held" 60 "$keel_pid") ||
      die "the held streams failed"
    note "$(fmt_rate "$held") streams opened at once while provider-sim writes one word every 2 s: $(echo "$lines" | paste -sd ';' | sed 's/;/; /g')"
  fi
  stop "$keel_pid"
  stop "$sim_pid"
}

for_each_backend "${1:-}"

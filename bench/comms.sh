#!/usr/bin/env bash
# Communications against the provider simulator (as Resend and Twilio) on loopback: email sends
# (validate, the suppression check, the Resend call, the log row; emails sent at the same time
# share one batch call, and a note says how many a call carried), then the same sends while the
# simulator posts two signed delivery events back per email (which keel verifies and applies), then
# GET /comms/health while 64 email sends each wait 2 s on the provider. The send's ceiling is the
# simulator's own rate for the very call Keel makes for an email sent alone (bench/sim_call.py
# repeats it with wrk), one email a call; in
# both runs the simulator posts no delivery events (started with an empty --resend-webhook-url),
# so that each measures one call; the events' cost is the note beside it. The health's ceiling is
# the bare actix-web handler answering the same body to the same requests. keel serves only the
# comms module (open: no token).
# Usage: bash bench/comms.sh [postgres://user@host:5432/postgres]   (needs wrk and python3)
# SQLite always; with a PostgreSQL URL, PostgreSQL too, in a scratch database.
source "$(dirname "$0")/lib.sh"
build_release
port=8184
sim_port=9931

bench_backend() { # label DATABASE_URL
  local url=$2 send_rate send_p50 send_p99 slow sim_env slow_rate slow_p50 slow_p99
  start_sim $sim_port --resend-webhook-url ''
  mapfile -t sim_env < <(sim_settings)
  start_keel $port DATABASE_URL="$url" KEEL_MODULES=comms "${sim_env[@]}" \
    PUBLIC_BASE_URL="http://127.0.0.1:$port" COMMS_TIMEOUT_SECONDS=15
  local base="$keel_base/api/v1/comms"
  curl -sf -X POST "$base/email/send" -H 'content-type: application/json' \
    -d '{"to": ["reader@example.com"], "subject": "Bench", "text": "Hello from the benchmark"}' -o "$work/send.json"
  curl -sf "$base/health" -o "$work/health.json"
  curl -sf "$sim_base/_sim/journal?provider=resend" -o "$work/journal.json"
  local call_path
  call_path=$(python3 bench/sim_call.py "$work/journal.json" "$work/provider.lua")

  say "POST /comms/email/send, $conns connections"
  wrk_load "$conns" -s bench/email.lua "$base/email/send"
  send_rate=$rate send_p50=$p50 send_p99=$p99
  curl -sf "$sim_base/_sim/journal?provider=resend" -o "$work/sends.json"
  local emails calls batch_calls
  read -r emails calls batch_calls < <(python3 bench/resend_calls.py "$work/sends.json")
  note "the email sends' $(fmt_rate "$emails") emails reached Resend in $(fmt_rate "$calls") calls, $(fmt_rate "$batch_calls") of them batch calls: $(awk -v e="$emails" -v c="$calls" 'BEGIN {printf "%.1f", e / c}') emails a call (the ceiling's call carries one)"

  # The same, while the simulator posts each email's delivery events back to keel.
  curl -sf -X POST "$sim_base/_sim/callbacks" -H 'content-type: application/json' \
    -d "{\"url\": \"$keel_base/api/v1/comms/webhooks/resend\"}" >/dev/null
  say "POST /comms/email/send, $conns connections, two delivery events posted back per email"
  wrk_load "$conns" -s bench/email.lua "$base/email/send"
  note "the email sends while the simulator posts two signed delivery events back per email: $(fmt_rate "$rate") req/s, p50 $(fmt_ms "$p50"), p99 $(fmt_ms "$p99")"
  curl -sf -X POST "$sim_base/_sim/callbacks" -H 'content-type: application/json' -d '{}' >/dev/null

  # Every email send now waits 2 s on the provider.
  curl -sf -X POST "$sim_base/_sim/faults/resend" -H 'content-type: application/json' \
    -d '{"delay_ms": 2000, "times": 1000000}' >/dev/null
  say "GET /comms/health while $conns email sends wait 2 s each on the provider"
  wrk -t1 -c"$conns" -d"$((duration + 4))s" --timeout 10s --latency -s bench/email.lua "$base/email/send" \
    >"$work/slow.txt" 2>&1 &
  slow=$!
  pids+=("$slow")
  sleep 2
  wrk_load "$conns" "$base/health"
  wait "$slow" || die "the slow sends failed: $(cat "$work/slow.txt")"
  read -r slow_rate slow_p50 slow_p99 _ <<<"$(wrk_figures "$work/slow.txt")"
  note "the slow email sends meanwhile: $(fmt_rate "$slow_rate") req/s, p50 $(fmt_ms "$slow_p50"), p99 $(fmt_ms "$slow_p99") ($conns at a time, 2 s each)"
  local health_rate=$rate health_p50=$p50 health_p99=$p99
  stop "$keel_pid"
  stop "$sim_pid"

  say "the provider call alone, against the simulator"
  start_sim $sim_port --resend-webhook-url ''
  wrk_load "$conns" -s "$work/provider.lua" "$sim_base$call_path"
  stop "$sim_pid"
  row "\`POST /api/v1/comms/email/send\` (provider-sim as Resend)" "wrk, $conns conn." \
    "$send_rate" req/s "$send_p50" "$send_p99" "$rate" "provider-sim, the same Resend call"

  say "the same against the bare handler"
  bare_load "$work/health.json" "$conns" /api/v1/comms/health
  row "\`GET /api/v1/comms/health\` while $conns email sends wait 2 s each on the provider" "wrk, $conns conn." \
    "$health_rate" req/s "$health_p50" "$health_p99" "$ceiling" "bare handler, same body"
}

for_each_backend "${1:-}"

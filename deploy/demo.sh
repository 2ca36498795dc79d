#!/usr/bin/env bash
# Every module of Keel on one machine, offline: the provider simulator stands in for Stripe,
# Resend, Twilio and the LLM APIs, and a `keel serve` is pointed at it. Nothing is read from or
# written to the checkout (no `.env` is touched): both run in a scratch folder.
#
#   bash deploy/demo.sh          # start both, take the tour below, stop both
#   bash deploy/demo.sh --keep   # the same, then keep both running until Ctrl-C
#
# The tour: an account and a token, an AI chat (AI_PROVIDER=openai, on the simulator: it answers
# with an echo of the message), an email and an SMS (on the simulator's outbox page), a Stripe
# checkout paid on the simulator with its signed webhook recorded as a transaction, and a
# background task. Any step that fails stops the demo with status 1.
#
# DEMO_BIN_DIR names a folder holding `keel` and `provider-sim` (default: the debug build of
# CARGO_TARGET_DIR, built when missing). KEEL_PORT and SIM_PORT choose the ports (default 8000
# and 9900).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
keep=""
[ "${1:-}" = "--keep" ] && keep=1

keel_port="${KEEL_PORT:-8000}"
sim_port="${SIM_PORT:-9900}"
base="http://127.0.0.1:$keel_port"
sim="http://127.0.0.1:$sim_port"

bin="${DEMO_BIN_DIR:-}"
if [ -z "$bin" ]; then
  target="${CARGO_TARGET_DIR:-$root/target}"
  case "$target" in /*) ;; *) target="$root/$target" ;; esac
  bin="$target/debug"
  if [ ! -x "$bin/keel" ] || [ ! -x "$bin/provider-sim" ]; then
    (cd "$root" && cargo build -q -p keel -p provider-sim-bin)
  fi
fi

work=$(mktemp -d)
pids=()
stop() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap stop EXIT
fail() {
  printf '\nFAILED: %s\n' "$*" >&2
  [ -f "$work/keel.log" ] && tail -20 "$work/keel.log" >&2
  exit 1
}
step() { printf '\n== %s\n' "$*"; }
json() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1], {}, {"d": d}))' "$1"; }

for port in "$keel_port" "$sim_port"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    fail "port $port is taken (set KEEL_PORT / SIM_PORT)"
  fi
done

step "Provider simulator on $sim"
# It prints the settings that point Keel at it: they become the scratch folder's .env.
"$bin/provider-sim" --addr "127.0.0.1:$sim_port" \
  --webhook-url "$base/api/v1/payment/webhook" \
  --resend-webhook-url "$base/api/v1/comms/webhooks/resend" \
  --twilio-sms-url "$base/api/v1/comms/webhooks/twilio/inbound" \
  >"$work/.env" 2>"$work/sim.log" &
pids+=($!)
for _ in $(seq 1 100); do grep -q STRIPE_WEBHOOK_SECRET "$work/.env" 2>/dev/null && break; sleep 0.1; done
grep -q STRIPE_WEBHOOK_SECRET "$work/.env" || fail "provider-sim did not start: $(cat "$work/sim.log")"
cat >>"$work/.env" <<EOF
# The demo's own settings: the AI module on the simulator (the default provider, public, is on the
# internet), a database in this scratch folder, the simulator's callbacks to this server.
AI_PROVIDER=openai
DATABASE_URL=sqlite://$work/keel.db
PORT=$keel_port
PUBLIC_BASE_URL=$base
TASKS_BACKEND=memory
EOF

step "keel serve on $base (settings in $work/.env)"
(cd "$work" && exec "$bin/keel" serve) >"$work/keel.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 300); do curl -sf "$base/health/ready" >/dev/null 2>&1 && break; sleep 0.1; done
curl -sf "$base/health/ready" >/dev/null || fail "keel did not start"

step "An account and a token"
curl -sf -X POST "$base/api/v1/auth/register" -H 'content-type: application/json' \
  -d '{"email": "ada@example.com", "password": "correct-horse-battery", "full_name": "Ada"}' >/dev/null \
  || fail "register"
token=$(curl -sf -X POST "$base/api/v1/auth/token" \
  -d 'username=ada@example.com&password=correct-horse-battery' | json 'd["access_token"]') || fail "login"
auth=(-H "Authorization: Bearer $token")
echo "registered ada@example.com, token ${token:0:16}..."

step "AI chat (provider: the simulator's OpenAI)"
provider=$(curl -sf "$base/ai/health" | json 'd["provider"]')
[ "$provider" = openai ] || fail "the AI module uses '$provider', not the simulator's openai"
reply=$(curl -sf -X POST "$base/ai/chat" "${auth[@]}" -H 'content-type: application/json' \
  -d '{"message": "What is a keel?"}' | json 'd["content"]') || fail "AI chat"
echo "reply: $reply"
case "$reply" in *"What is a keel?"*) ;; *) fail "the reply is not the simulator's echo" ;; esac

step "Email and SMS (the simulator's outbox: $sim/outbox)"
curl -sf -X POST "$base/api/v1/comms/email/send" "${auth[@]}" -H 'content-type: application/json' \
  -d '{"to": ["you@example.com"], "subject": "Hello", "text": "First email"}' | json 'd["status"]' \
  || fail "email"
curl -sf -X POST "$base/api/v1/comms/sms/send" "${auth[@]}" -H 'content-type: application/json' \
  -d '{"to": "+15005550010", "body": "First SMS"}' | json 'd["status"]' || fail "SMS"
sent=$(curl -sf "$sim/_sim/outbox" | json 'len(d["emails"]) + len(d["sms"])')
[ "$sent" -ge 2 ] || fail "the outbox holds $sent messages"

step "A Stripe checkout, paid on the simulator"
session=$(curl -sf -X POST "$base/api/v1/payment/checkout" "${auth[@]}" -H 'content-type: application/json' \
  -d '{"price_id": "price_one_time", "mode": "payment"}' | json 'd["session_id"]') || fail "checkout"
curl -sf -X POST "$sim/_sim/stripe/checkout/$session/pay" -H 'content-type: application/json' -d '{}' >/dev/null \
  || fail "paying $session"
amount=""
for _ in $(seq 1 50); do
  amount=$(curl -sf "$base/api/v1/payment/transactions" "${auth[@]}" \
    | json 'd["transactions"][0]["amount"] if d["transactions"] else ""')
  [ -n "$amount" ] && break
  sleep 0.1
done
[ -n "$amount" ] || fail "the signed webhook did not record the payment"
echo "session $session paid: a transaction of $amount cents"

step "A background task"
task=$(curl -sf -X POST "$base/api/v1/tasks/enqueue" "${auth[@]}" -H 'content-type: application/json' \
  -d '{"task_name": "system_health_check"}' | json 'd["task_id"]') || fail "enqueue"
status=""
for _ in $(seq 1 50); do
  status=$(curl -s "$base/api/v1/tasks/result/$task" "${auth[@]}" | json 'd["status"]')
  [ "$status" = completed ] && break
  sleep 0.1
done
[ "$status" = completed ] || fail "task $task is $status"
echo "task $task completed"

if [ -z "$keep" ]; then
  step "The tour passed; stopping both"
  exit 0
fi
step "Running: API $base (docs at $base/docs), simulator $sim (outbox at $sim/outbox). Ctrl-C stops both."
wait

# Shared by the Python-driven checks (tests/fuzz/run.sh, tests/clients/run.sh): starts provider-sim
# and a `keel serve` in front of it on free ports, with an admin account, and stops both on exit.
# Source it after setting `root` (the repository) and `bin` (where `keel` and `provider-sim` are),
# then call `start_stack DATABASE_URL` (empty: a fresh SQLite file). It sets `work` (a scratch
# folder holding the server's .env and logs), `base` (the server's URL) and `sim_base`.

pids=()
work=$(mktemp -d)
stop_stack() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap stop_stack EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

start_stack() {
  local database_url="${1:-}"
  local keel_port sim_port
  keel_port=$(free_port)
  sim_port=$(free_port)
  base="http://127.0.0.1:$keel_port"
  sim_base="http://127.0.0.1:$sim_port"

  # provider-sim prints the settings that point Keel at it: they become the server's .env.
  "$bin/provider-sim" --addr "127.0.0.1:$sim_port" \
    --webhook-url "$base/api/v1/payment/webhook" \
    --resend-webhook-url "$base/api/v1/comms/webhooks/resend" \
    --twilio-sms-url "$base/api/v1/comms/webhooks/twilio/inbound" \
    >"$work/.env" 2>"$work/sim.log" &
  pids+=($!)
  for _ in $(seq 1 100); do grep -q STRIPE_WEBHOOK_SECRET "$work/.env" 2>/dev/null && break; sleep 0.1; done
  grep -q STRIPE_WEBHOOK_SECRET "$work/.env" || { cat "$work/sim.log"; echo "provider-sim did not start" >&2; exit 1; }

  export DATABASE_URL="${database_url:-sqlite://$work/keel.db}"
  export PORT="$keel_port" PUBLIC_BASE_URL="$base" BCRYPT_COST=4 TASKS_BACKEND=memory
  export LOG_FORMAT=json RUST_LOG="${RUST_LOG:-warn}" AI_PROVIDER=anthropic AI_CONVERSATION_STORE=database
  export SECRET_KEY="test-secret-key-test-secret-key-0123"

  (cd "$work" && "$bin/keel" migrate >/dev/null)
  (cd "$work" && "$bin/keel" users create --email admin@example.com --password password123 --role admin >/dev/null)
  (cd "$work" && exec "$bin/keel" serve) 2>"$work/keel.log" &
  pids+=($!)
  for _ in $(seq 1 200); do curl -sf "$base/health/ready" >/dev/null && break; sleep 0.1; done
  curl -sf "$base/health/ready" >/dev/null || { cat "$work/keel.log"; echo "keel did not start" >&2; exit 1; }
}

# Fails (returns 1) when the server's log shows a panic, printing its first lines.
server_panicked() {
  if grep -i 'panic' "$work/keel.log" >/dev/null; then
    printf '\n== The server panicked\n'
    grep -i 'panic' "$work/keel.log" | head -20
    return 0
  fi
  return 1
}

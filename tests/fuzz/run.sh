#!/usr/bin/env bash
# Fuzzes the composed server's HTTP API with schemathesis: every module mounted, provider-sim
# behind it, once anonymously, once as a user and once as an admin. Fails on any 5xx, any answer
# the OpenAPI document does not describe (status, content type, headers, body schema) and any
# 4xx without a JSON `detail`.
#
#   bash tests/fuzz/run.sh [DATABASE_URL]     (default: a fresh SQLite file)
#
# FUZZ_MAX_EXAMPLES (default 20) sets the cases per operation. schemathesis is installed from PyPI
# into a virtual environment under the cargo target directory. The server and provider-sim are the
# debug binaries of `cargo build --workspace --all-features --all-targets` (what the test command
# builds), built first when missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)

target="${CARGO_TARGET_DIR:-target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac
schemathesis_version="4.32.5"
venv="$target/fuzz-venv"
max_examples="${FUZZ_MAX_EXAMPLES:-20}"

log() { printf '\n== %s\n' "$*"; }

if [ "$("$venv/bin/schemathesis" --version 2>/dev/null | awk '{print $NF}')" != "$schemathesis_version" ]; then
  log "Installing schemathesis $schemathesis_version"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "schemathesis==$schemathesis_version"
fi

bin="${FUZZ_BIN_DIR:-}"
if [ -z "$bin" ]; then
  log "Building keel and provider-sim"
  cargo build --workspace --all-features --all-targets
  bin="$target/debug"
fi

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
keel_port=$(free_port)
sim_port=$(free_port)
base="http://127.0.0.1:$keel_port"

# provider-sim prints the settings that point Keel at it: they become the server's .env.
"$bin/provider-sim" --addr "127.0.0.1:$sim_port" \
  --webhook-url "$base/api/v1/payment/webhook" \
  --resend-webhook-url "$base/api/v1/comms/webhooks/resend" \
  >"$work/.env" 2>"$work/sim.log" &
pids+=($!)
for _ in $(seq 1 100); do grep -q STRIPE_WEBHOOK_SECRET "$work/.env" 2>/dev/null && break; sleep 0.1; done
grep -q STRIPE_WEBHOOK_SECRET "$work/.env" || { cat "$work/sim.log"; echo "provider-sim did not start" >&2; exit 1; }

export DATABASE_URL="${1:-sqlite://$work/keel.db}"
export PORT="$keel_port" PUBLIC_BASE_URL="$base" BCRYPT_COST=4 TASKS_BACKEND=memory
export LOG_FORMAT=json RUST_LOG="${RUST_LOG:-warn}" AI_PROVIDER=anthropic AI_CONVERSATION_STORE=database
export SECRET_KEY="fuzz-secret-key-fuzz-secret-key-0123"

(cd "$work" && "$bin/keel" migrate >/dev/null)
(cd "$work" && "$bin/keel" users create --email admin@example.com --password password123 --role admin >/dev/null)
(cd "$work" && exec "$bin/keel" serve) 2>"$work/keel.log" &
pids+=($!)
for _ in $(seq 1 200); do curl -sf "$base/health/ready" >/dev/null && break; sleep 0.1; done
curl -sf "$base/health/ready" >/dev/null || { cat "$work/keel.log"; echo "keel did not start" >&2; exit 1; }

token() {
  curl -sf "$base/auth/token" -d "username=$1&password=password123" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["access_token"])'
}
curl -sf "$base/auth/register" -H 'Content-Type: application/json' \
  -d '{"email": "user@example.com", "password": "password123"}' >/dev/null
user_token=$(token user@example.com)
admin_token=$(token admin@example.com)

failed=0
run() {
  local who="$1"; shift
  log "schemathesis: $who"
  # From the scratch folder, where schemathesis leaves its cache.
  (cd "$work" && SCHEMATHESIS_HOOKS=hooks PYTHONPATH="$root/tests/fuzz" \
    "$venv/bin/schemathesis" run "$base/openapi.json" \
    --checks all --exclude-checks positive_data_acceptance \
    --max-examples "$max_examples" --phases examples,coverage,fuzzing \
    --seed 1 --suppress-health-check all --no-color \
    "$@") || failed=1
}
run anonymous
run user -H "Authorization: Bearer $user_token"
run admin -H "Authorization: Bearer $admin_token"

if grep -i 'panic' "$work/keel.log" >/dev/null; then
  log "The server panicked"
  grep -i 'panic' "$work/keel.log" | head -20
  failed=1
fi
exit "$failed"

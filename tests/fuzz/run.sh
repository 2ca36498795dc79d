#!/usr/bin/env bash
# Fuzzes the composed server's HTTP API with schemathesis: every module mounted, provider-sim
# behind it, once anonymously, once as a user and once as an admin. Fails on any 5xx, any answer
# the OpenAPI document does not describe (status, content type, headers, body schema) and any
# 4xx without a JSON `detail`.
#
#   bash tests/fuzz/run.sh [DATABASE_URL]     (default: a fresh SQLite file)
#
# FUZZ_MAX_EXAMPLES (default 20) sets the cases per operation. schemathesis is installed from PyPI
# (tests/requirements.txt) into a virtual environment under the cargo target directory.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
max_examples="${FUZZ_MAX_EXAMPLES:-20}"

log() { printf '\n== %s\n' "$*"; }

source "$root/tests/support/python.sh"
source "$root/tests/support/stack.sh"
ensure_venv
ensure_binaries
start_stack "${1:-}"

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
# With a bearer token and no refresh token, POST /auth/logout signs the user out everywhere: the
# rest of the run would see only 401s. It is fuzzed anonymously (the refresh-token form).
run user -H "Authorization: Bearer $user_token" --exclude-operation-id logout
run admin -H "Authorization: Bearer $admin_token" --exclude-operation-id logout

server_panicked && failed=1
exit "$failed"

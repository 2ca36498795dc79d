#!/usr/bin/env bash
# Drives the composed server with the client libraries its users use (tests/clients/test_*.py,
# run by pytest): an OAuth 2.0 client, an OpenAPI validator and a client generated from the
# document, Twilio's own request signing, a browser's EventSource. provider-sim stands behind the
# server as in the fuzz run.
#
#   bash tests/clients/run.sh [DATABASE_URL]     (default: a fresh SQLite file)
#
# The tools come from PyPI (tests/requirements.txt) into the virtual environment under the cargo
# target directory; the browser tests need Debian's chromium (.ci/run installs it).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)

source "$root/tests/support/python.sh"
source "$root/tests/support/stack.sh"
ensure_venv
ensure_binaries
start_stack "${1:-}"

printf '\n== pytest tests/clients (%s)\n' "${DATABASE_URL%%:*}"
failed=0
# The tests read the server's URL and the settings provider-sim printed (its .env).
KEEL_BASE_URL="$base" SIM_BASE_URL="$sim_base" KEEL_ENV_FILE="$work/.env" KEEL_WORK_DIR="$work" \
  "$venv/bin/python" -m pytest -q -p no:cacheprovider "$root/tests/clients" || failed=1

server_panicked && failed=1
exit "$failed"

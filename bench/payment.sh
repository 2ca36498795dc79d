#!/usr/bin/env bash
# Payment: signed Stripe webhook events processed per second from 64 concurrent senders
# (bench/payment_webhooks.py: each event has its own id, four in five a new payment, every fifth
# from event 1,002 on a partial refund of an earlier one), then the first page of the transaction
# list those events produced, with the read cache on and off; each beside the bare actix-web handler answering the same body to
# the same requests. keel serves only the payment module (open: no token).
# Usage: bash bench/payment.sh [postgres://user@host:5432/postgres]   (needs wrk and python3)
# SQLite always; with a PostgreSQL URL, PostgreSQL too, in a scratch database.
# PAYMENT_EVENTS: events per run (default 2,000 per BENCH_SECONDS, 20,000 at the default 10 s).
source "$(dirname "$0")/lib.sh"
build_release
port=8187
secret=whsec_bench
events=${PAYMENT_EVENTS:-$((2000 * duration))}
list_path="/api/v1/payment/transactions?page=1&page_size=20"

bench_backend() { # label DATABASE_URL
  local url=$2 figures hook_rate hook_p50 hook_p99 size
  start_keel $port DATABASE_URL="$url" KEEL_MODULES=payment STRIPE_WEBHOOK_SECRET=$secret \
    STRIPE_SECRET_KEY=sk_test_bench
  say "POST /api/v1/payment/webhook, $events signed events, $conns senders"
  figures=$(python3 bench/payment_webhooks.py 127.0.0.1 $port $secret "$events" "$conns" 0 "$work/hook.json") || {
    keel_errors
    die "the webhook events failed"
  }
  read -r hook_rate hook_p50 hook_p99 <<<"$figures"
  # The list is measured on the tables as the events left them, settled: without this, whether
  # autovacuum has yet cleared the counts' dead rows (each event replaces one) would depend on the
  # moment, and keel's runs and pgbench's come at different moments.
  if [ "$1" = postgresql ]; then psql "$url" -qc "VACUUM ANALYZE" >/dev/null; fi

  curl -sf "$keel_base$list_path" -o "$work/list.json"
  say "GET $list_path, $conns connections, READ_CACHE=on"
  wrk_load "$conns" "$keel_base$list_path"
  local list_on="$rate $p50 $p99"
  stop "$keel_pid"
  start_keel $port DATABASE_URL="$url" KEEL_MODULES=payment READ_CACHE=off
  say "GET $list_path, $conns connections, READ_CACHE=off"
  wrk_load "$conns" "$keel_base$list_path"
  local list_off="$rate $p50 $p99"
  stop "$keel_pid"

  local hook_pg="" list_pg=""
  if [ "$1" = postgresql ]; then
    say "the statements of each, captured, then run by pgbench"
    start_capture "$url"
    start_keel $port DATABASE_URL="$capture_url" KEEL_MODULES=payment READ_CACHE=off STRIPE_WEBHOOK_SECRET=$secret \
      STRIPE_SECRET_KEY=sk_test_bench
    pg_ceiling "$url" "" "$keel_base$list_path"
    list_pg="$pg_ceiling $pg_statements"
    # One new payment's event (numbered past the measured ones); its ids vary in pgbench.
    python3 bench/payment_webhooks.py 127.0.0.1 $port $secret 2 1 $((events + 1000000)) >/dev/null || die "the warm-up events failed"
    capture_begin
    python3 bench/payment_webhooks.py 127.0.0.1 $port $secret 1 1 $((events + 2000000)) >/dev/null || die "the captured event failed"
    capture_end "$url" 'evt_[0-9]+|pi_[0-9]+|ch_[0-9]+'
    hook_pg="$pg_ceiling $pg_statements"
    stop "$keel_pid"
  fi

  say "the same against the bare handler"
  start_bare "$work/hook.json"
  figures=$(python3 bench/payment_webhooks.py 127.0.0.1 $bare_port $secret "$events" "$conns") ||
    die "the bare handler's run failed"
  stop "$bare_pid"
  row "\`POST /api/v1/payment/webhook\` ($(fmt_rate "$events") signed events)" "Python asyncio, $conns senders" \
    "$hook_rate" events/s "$hook_p50" "$hook_p99" "${figures%% *}" "bare handler, same body" $hook_pg
  size=$(fmt_size "$(wc -c <"$work/list.json")")
  bare_load "$work/list.json" "$conns" "$list_path"
  read -r rate p50 p99 <<<"$list_on"
  row "\`GET $list_path\` ($size, after those events), \`READ_CACHE=on\`" "wrk, $conns conn." \
    "$rate" req/s "$p50" "$p99" "$ceiling" "bare handler, same body"
  read -r rate p50 p99 <<<"$list_off"
  row "\`GET $list_path\` ($size, after those events), \`READ_CACHE=off\`" "wrk, $conns conn." \
    "$rate" req/s "$p50" "$p99" "$ceiling" "bare handler, same body" $list_pg
}

for_each_backend "${1:-}"

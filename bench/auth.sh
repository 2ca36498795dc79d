#!/usr/bin/env bash
# Login (POST /auth/token, one bcrypt verification at BCRYPT_COST=12) beside its ceiling, bcrypt
# alone (verifications per second on one core, times the cores logins may use); and GET /auth/me
# while a storm of logins runs, beside the bare actix-web handler answering the same body to the
# same requests. keel serves the auth module.
# Usage: bash bench/auth.sh [postgres://user@host:5432/postgres]   (needs wrk and python3)
# SQLite always; with a PostgreSQL URL, PostgreSQL too, in a scratch database.
#
# Logins run at 8 connections, not 64: each one costs a verification of about 0.3 s on a core and
# at most BCRYPT_CONCURRENCY (cores less one) run at once, so more connections only queue longer
# (64 would wait about 20 s each on two cores and never reach a steady state within a run).
source "$(dirname "$0")/lib.sh"
build_release
port=8181
login_conns=${BENCH_LOGIN_CONNECTIONS:-8}
storm_conns=16

# The ceiling of logins is bcrypt's, not HTTP's: one core's verifications per second times the
# cores logins may use (BCRYPT_CONCURRENCY, by default cores less one, at least one).
bcrypt=$("$target/release/examples/bcrypt_rate" 12) || die "bcrypt_rate failed"
note "bcrypt alone: $bcrypt"
per_core=$(echo "$bcrypt" | awk '{for (i = 1; i < NF; i++) if ($(i + 1) == "verifications/s") print $i}')
bcrypt_slots=$(( cores > 1 ? cores - 1 : 1 ))
login_ceiling=$(awk -v a="$per_core" -v n="$bcrypt_slots" 'BEGIN {print a * n}')

bench_backend() { # label DATABASE_URL
  local url=$2 token storm login_rate login_p50 login_p99 me_rate me_p50 me_p99
  start_keel $port DATABASE_URL="$url" KEEL_MODULES=auth BCRYPT_COST=12
  curl -sf -X POST "$keel_base/auth/register" -H 'content-type: application/json' \
    -d '{"email":"bench@example.com","password":"bench-password-1"}' >/dev/null
  curl -sf -X POST "$keel_base/auth/token" -d 'username=bench%40example.com&password=bench-password-1' \
    -o "$work/token.json"
  token=$(python3 bench/json_field.py access_token <"$work/token.json")
  curl -sf -H "Authorization: Bearer $token" "$keel_base/auth/me" -o "$work/me.json"

  say "POST /auth/token, $login_conns connections"
  wrk_load "$login_conns" -s bench/login.lua "$keel_base/auth/token"
  login_rate=$rate login_p50=$p50 login_p99=$p99

  say "GET /auth/me during a storm of $storm_conns login connections"
  wrk -t1 -c$storm_conns -d"$((duration + 4))s" --timeout 30s -s bench/login.lua "$keel_base/auth/token" \
    >"$work/storm.txt" 2>&1 &
  storm=$!
  pids+=("$storm")
  sleep 2
  wrk_load "$conns" -H "Authorization: Bearer $token" "$keel_base/auth/me"
  me_rate=$rate me_p50=$p50 me_p99=$p99
  wait "$storm" || die "the login storm failed"
  stop "$keel_pid"

  say "the same against the bare handler"
  row "\`POST /auth/token\` (bcrypt cost 12)" "wrk, $login_conns conn." "$login_rate" logins/s \
    "$login_p50" "$login_p99" "$login_ceiling" "bcrypt alone on $bcrypt_slots core$([ "$bcrypt_slots" = 1 ] || echo s)"
  bare_load "$work/me.json" "$conns" -H "Authorization: Bearer $token" /auth/me
  row "\`GET /auth/me\` during a storm of $storm_conns login connections" "wrk, $conns conn." \
    "$me_rate" req/s "$me_p50" "$me_p99" "$ceiling" "bare handler, same body, no storm"
}

for_each_backend "${1:-}"

# Shared pieces of the benchmark scripts, sourced by each of them (not run on its own): the release
# build, starting and stopping keel, the bare handler and the provider simulator, wrk and its
# figures, scratch PostgreSQL databases, and the table rows every scenario prints.
#
# A scenario script sources this file, defines `bench_backend LABEL DATABASE_URL`, and ends with
# `for_each_backend "${1:-}"`: the scenario runs on SQLite (a file in a temporary folder), then,
# given a PostgreSQL URL, on PostgreSQL in a scratch database created for it and dropped after.
#
# Settings (environment):
#   BENCH_SECONDS      duration of each measured run (default 10)
#   BENCH_CONNECTIONS  concurrent connections of each load (default 64)
#   BENCH_HTTP_WORKERS HTTP_WORKERS of keel (default: one per core, as the bare handler uses)
#   BENCH_THREADS      the load tools' thread counts tried, the best run kept (default "1 2")
#   BENCH_SKIP_BUILD   1: use the release binaries already built (bench/run.sh builds them once)
#   BENCH_OUT          a folder: rows and notes are also appended to BENCH_OUT/<backend>.rows and
#                      BENCH_OUT/<backend>.notes (bench/run.sh collects them into the doc)
#   BENCH_SQL_DIR      a folder: each pgbench script of captured statements is kept there, as
#                      SCENARIO-N.sql (the PostgreSQL ceiling, see pg_ceiling)
#   CARGO_TARGET_DIR   where cargo puts the binaries (default target)

set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "${BASH_SOURCE[0]}")/.."

duration=${BENCH_SECONDS:-10}
conns=${BENCH_CONNECTIONS:-64}
cores=$(nproc)
http_workers=${BENCH_HTTP_WORKERS:-$cores}
wrk_threads=${BENCH_THREADS:-1 2}
target=${CARGO_TARGET_DIR:-target}
mkdir -p "$target"
target=$(cd "$target" && pwd)
keel_bin="$target/release/keel"
bare_bin="$target/release/examples/bare_json"
sim_bin="$target/release/provider-sim"
bare_port=8097
secret_key=bench-secret-bench-secret-bench-secret
backend=common   # the backend being measured; rows and notes are filed under it

work=$(mktemp -d)
pids=()
scratch_dbs=()   # "SERVER_URL DBNAME", dropped on exit
cleanup() {
  local p entry
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  for entry in "${scratch_dbs[@]}"; do
    psql "${entry% *}" -qc "DROP DATABASE IF EXISTS ${entry#* } WITH (FORCE)" >/dev/null 2>&1 || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

die() { echo "bench: $*" >&2; exit 1; }
say() { echo "[$backend] $*" >&2; }   # progress, on stderr
need() { # command, how to get it
  command -v "$1" >/dev/null || die "$1 is needed ($2)"
}
need wrk "apt-get install wrk"
need curl "apt-get install curl"
need python3 "apt-get install python3"

# ---------------------------------------------------------------- build

build_release() {
  [ "${BENCH_SKIP_BUILD:-0}" = 1 ] && return
  cargo build --release -p keel -p provider-sim-bin -p auth-core \
    --bin keel --bin provider-sim --example bare_json --example bcrypt_rate
}

# ---------------------------------------------------------------- processes

# Waits until URL answers 200 (at most SECONDS, default 20), failing if process PID exits first.
wait_ready() { # URL PID [SECONDS]
  local deadline=$(( $(date +%s) + ${3:-20} ))
  until curl -sf -o /dev/null "$1"; do
    kill -0 "$2" 2>/dev/null || return 1
    [ "$(date +%s)" -lt "$deadline" ] || return 1
    sleep 0.005
  done
}

port_free() { ! curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$1/"; }

# Starts `keel serve` on PORT with the given settings (NAME=VALUE ...) on top of the defaults below,
# from the work folder (so no .env file is read). Sets keel_pid, keel_base and ready_ms (the time
# from start to the first 200 from /health/ready).
start_keel() { # PORT [NAME=VALUE ...]
  local port=$1 t0
  shift
  port_free "$port" || die "port $port is already in use"
  keel_base="http://127.0.0.1:$port"
  t0=$(date +%s%N)
  (cd "$work" && exec env PORT="$port" HTTP_WORKERS="$http_workers" RUST_LOG=warn \
     SECRET_KEY="$secret_key" REDIS_DB="${BENCH_REDIS_DB:-9}" "$@" "$keel_bin" serve) \
    >>"$work/keel.log" 2>&1 &
  keel_pid=$!
  pids+=("$keel_pid")
  wait_ready "$keel_base/health/ready" "$keel_pid" || {
    tail -n 30 "$work/keel.log" >&2
    die "keel did not become ready on port $port"
  }
  ready_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
}

# Runs a keel command (migrate, blog import, ...) with the given settings, from the work folder.
keel_cli() { # NAME=VALUE ... -- ARGS...
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  (cd "$work" && exec env RUST_LOG=warn SECRET_KEY="$secret_key" "${envs[@]}" "$keel_bin" "$@") \
    >/dev/null 2>>"$work/keel.log" || { tail -n 30 "$work/keel.log" >&2; die "keel $* failed"; }
}

stop() { # PID
  kill "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}

rss_mib() { awk '/VmRSS/ {printf "%.0f", $2 / 1024}' "/proc/$1/status"; }

# The bare actix-web handler answering every request with the bytes of FILE. Sets bare_pid.
start_bare() { # FILE
  port_free "$bare_port" || die "port $bare_port is already in use"
  "$bare_bin" "127.0.0.1:$bare_port" "$1" >/dev/null 2>&1 &
  bare_pid=$!
  pids+=("$bare_pid")
  wait_ready "http://127.0.0.1:$bare_port/" "$bare_pid" 10 || die "the bare handler did not start"
}

# The provider simulator on PORT with extra arguments; its settings for keel go to $work/sim.env.
# Sets sim_pid and sim_base.
start_sim() { # PORT [ARGS...]
  local port=$1
  shift
  port_free "$port" || die "port $port is already in use"
  : >"$work/sim.env"
  "$sim_bin" --addr "127.0.0.1:$port" "$@" >"$work/sim.env" 2>"$work/sim.log" &
  sim_pid=$!
  pids+=("$sim_pid")
  sim_base="http://127.0.0.1:$port"
  for _ in $(seq 1 200); do [ -s "$work/sim.env" ] && break; sleep 0.05; done
  [ -s "$work/sim.env" ] || { cat "$work/sim.log" >&2; die "provider-sim did not start"; }
  sleep 0.1   # the whole settings block
}

# The simulator's settings as NAME=VALUE words for start_keel (values unquoted).
sim_settings() {
  python3 - "$work/sim.env" <<'PY'
import shlex, sys
for line in open(sys.argv[1]):
    line = line.strip()
    if line and not line.startswith("#") and "=" in line:
        name, _, value = line.partition("=")
        print(f"{name}={shlex.split(value)[0] if value else ''}")
PY
}

# ---------------------------------------------------------------- load and figures

# wrk against URL with CONNECTIONS connections for the bench duration, extra wrk arguments
# before the URL. Sets rate, p50 and p99 (ms), and keeps the better run's output in
# $work/wrk-best.txt (what a script printed). Fails on any non-2xx answer or socket error.
wrk_load() { # CONNECTIONS [WRK ARGS...] URL
  local c=$1 threads out="$work/wrk.txt" best=0 figures bad errors
  shift
  # wrk with one thread and with two, the better of the two: on a few cores the load tool's own
  # threads compete with the server and the database, and which count serves a server best
  # depends on it (pgbench's threads are chosen the same way: pg_ceiling).
  for threads in $wrk_threads; do
    [ "$threads" -gt "$c" ] && continue
    wrk -t"$threads" -c"$c" -d"${duration}s" --timeout 10s --latency "$@" >"$out" 2>&1 ||
      { cat "$out" >&2; die "wrk failed"; }
    read -r rate p50 p99 bad errors < <(wrk_figures "$out")
    if [ "$bad" != 0 ] || [ "$errors" != 0 ]; then
      cat "$out" >&2
      keel_errors
      die "wrk saw $bad non-2xx answers and $errors socket errors (${*: -1})"
    fi
    if awk -v a="$rate" -v b="$best" 'BEGIN {exit !(a > b)}'; then
      best=$rate figures="$rate $p50 $p99"
      cp "$out" "$work/wrk-best.txt"
    fi
  done
  read -r rate p50 p99 <<<"$figures"
}

# The first errors and warnings keel logged in this scenario (on stderr), if any: what a failed
# load's non-2xx answers were.
keel_errors() {
  grep -m8 -E 'ERROR|WARN' "$work/keel.log" 2>/dev/null | grep -v 'open to anyone' >&2 || true
}

# wrk's output -> "req/s p50_ms p99_ms non2xx socket_errors".
wrk_figures() { # FILE
  awk '
    function ms(v) {
      if (v ~ /us$/) return v / 1000
      if (v ~ /ms$/) return v + 0
      if (v ~ /m$/) return v * 60000
      if (v ~ /s$/) return v * 1000
      return v + 0
    }
    /Requests\/sec/ {rps = $2}
    /^ +50%/ {p50 = ms($2)}
    /^ +99%/ {p99 = ms($2)}
    /Non-2xx/ {bad = $NF}
    /Socket errors/ {gsub(",", ""); errs = $4 + $6 + $8 + $10}
    END {printf "%s %s %s %d %d\n", rps, p50, p99, bad, errs}' "$1"
}

# The same load against the bare handler serving FILE, same path and wrk arguments. Sets
# ceiling (req/s).
bare_load() { # FILE CONNECTIONS [WRK ARGS...] PATH
  local file=$1 c=$2 args=("${@:3}") path rate p50 p99
  path=${args[-1]}
  unset 'args[-1]'
  start_bare "$file"
  wrk_load "$c" "${args[@]}" "http://127.0.0.1:$bare_port$path"
  ceiling=$rate
  stop "$bare_pid"
}

# ---------------------------------------------------------------- rows and notes

# 12345.6 -> 12,346; under 100 with two decimals.
fmt_rate() {
  awk -v v="$1" 'BEGIN {
    if (v < 100) { printf "%.2f", v; exit }
    s = sprintf("%.0f", v); out = ""
    while (length(s) > 3) { out = "," substr(s, length(s) - 2) out; s = substr(s, 1, length(s) - 3) }
    print s out }'
}
# milliseconds -> "0.77 ms" / "12.3 ms" / "1.22 s"
fmt_ms() {
  awk -v v="$1" 'BEGIN {
    if (v >= 1000) printf "%.2f s", v / 1000
    else if (v >= 100) printf "%.0f ms", v
    else if (v >= 10) printf "%.1f ms", v
    else printf "%.2f ms", v }'
}
fmt_size() { # bytes -> "173 B" / "3.5 KB" / "2.5 MB"
  awk -v v="$1" 'BEGIN {
    if (v < 1000) printf "%d B", v
    else if (v < 1000000) printf "%.1f KB", v / 1000
    else printf "%.1f MB", v / 1000000 }'
}

# One table row: | Endpoint | Load | Rate | p50 | p99 | Ceiling | Share |, and on PostgreSQL two more
# cells: | PostgreSQL ceiling | Share |. CEILING is the same load's rate against the ceiling (empty:
# none), CEILING_KIND what it is; PG_CEILING pgbench's rate for the request's statements (empty:
# not measured) and PG_STATEMENTS how many statements a request sends.
row() { # ENDPOINT LOAD RATE UNIT P50_MS P99_MS CEILING CEILING_KIND [PG_CEILING PG_STATEMENTS]
  local line ceiling_cell="—" share="—" pg_cell="—" pg_share="—"
  if [ -n "$7" ]; then
    ceiling_cell="$(fmt_rate "$7") $4 ($8)"
    share=$(percent "$3" "$7")
  fi
  line="| $1 | $2 | $(fmt_rate "$3") $4 | $(fmt_ms "$5") | $(fmt_ms "$6") | $ceiling_cell | $share |"
  if [ "$backend" = postgresql ]; then
    if [ -n "${9:-}" ]; then
      pg_cell="$(fmt_rate "$9") $4 (pgbench, ${10} statement$([ "${10}" = 1 ] || echo s))"
      pg_share=$(percent "$3" "$9")
    fi
    line+=" $pg_cell | $pg_share |"
  fi
  echo "$line"
  [ -n "${BENCH_OUT:-}" ] && echo "$line" >>"$BENCH_OUT/$backend.rows"
  return 0
}
percent() { # PART WHOLE
  awk -v a="$1" -v b="$2" 'BEGIN {s = 100 * a / b; printf (s < 1 ? "%.2f %%" : "%.1f %%"), s}'
}

# A figure that is not a load (start to ready, memory, a ceiling of another kind): a bullet.
note() { # TEXT
  echo "- $1"
  [ -n "${BENCH_OUT:-}" ] && echo "- $1" >>"$BENCH_OUT/$backend.notes"
  return 0
}

# ---------------------------------------------------------------- the PostgreSQL ceiling

# The capture proxy (bench/pg_capture.py) in front of the PostgreSQL server of URL, for the whole
# scenario. Sets capture_url: URL's database through the proxy, for a keel whose statements are
# captured (never the one measured: the proxy slows it).
start_capture() { # URL
  local host port parts
  need pgbench "apt-get install postgresql-contrib"
  read -r host port < <(python3 -c 'import sys, urllib.parse as u; p = u.urlsplit(sys.argv[1]); print(p.hostname or "127.0.0.1", p.port or 5432)' "$1")
  port_free "$capture_port" || die "port $capture_port is already in use"
  : >"$work/statements.jsonl"
  python3 bench/pg_capture.py proxy "$capture_port" "$host" "$port" "$work/statements.jsonl" \
    2>>"$work/capture.log" &
  pids+=("$!")
  for _ in $(seq 1 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$capture_port") 2>/dev/null && break
    sleep 0.05
  done
  parts=$(python3 -c 'import sys, urllib.parse as u; p = u.urlsplit(sys.argv[1]); print(u.urlunsplit(p._replace(netloc=(p.username + "@" if p.username else "") + "127.0.0.1:" + sys.argv[2])))' "$1" "$capture_port")
  capture_url=$parts
}
capture_port=8099

# The statements one request sends, run by pgbench (prepared, for the HTTP load's duration; see
# capture_end for the connections) against DATABASE_URL. The request (curl arguments) goes to a keel started on
# capture_url; it is sent twice first, so that connections and prepared statements are warm, then
# once more, captured. Literals matching VARY (a regular expression, may be empty) get a fresh
# value in each pgbench transaction, so that a write makes new rows as the request did. Sets
# pg_ceiling (requests/s: pgbench's transactions, each one request's statements) and
# pg_statements (how many a request sends).
pg_ceiling() { # DATABASE_URL VARY CURL_ARGS...
  local url=$1 vary=$2
  shift 2
  curl -sf -o /dev/null "$@" && curl -sf -o /dev/null "$@" || die "the captured request failed: $*"
  capture_begin
  curl -sf -o /dev/null "$@" || die "the captured request failed: $*"
  capture_end "$url" "$vary"
}

# The same in two halves, around requests a scenario sends its own way (warm them up first):
# capture_begin, then the requests, then capture_end with how many requests were sent.
capture_begin() {
  sleep 0.2   # statements of earlier requests still on their way
  capture_offset=$(stat -c %s "$work/statements.jsonl")
}
capture_end() { # DATABASE_URL VARY [REQUESTS]
  local url=$1 vary=$2 requests=${3:-1} count out="$work/pgbench.txt"
  sleep 0.2
  count=$(python3 bench/pg_capture.py script "$work/statements.jsonl" "$capture_offset" \
    "$work/request.sql" $vary)
  [ "$count" -gt 0 ] || die "no statement was captured"
  # At the HTTP load's connections, and at keel's pool size (its own concurrency on the database):
  # on a few cores PostgreSQL may do better with fewer backends; each with pgbench's threads as
  # wrk's (wrk_load). The ceiling is the best run.
  local clients threads best=0 tps
  for clients in "$conns" "$pg_pool_size"; do
    for threads in $wrk_threads; do
      pgbench -n -M prepared -c "$clients" -j "$threads" -T "$duration" -f "$work/request.sql" "$url" >"$out" 2>&1 ||
        { cat "$out" "$work/request.sql" >&2; die "pgbench failed"; }
      grep -q '^number of failed transactions: 0 ' "$out" || { cat "$out" >&2; die "pgbench saw failures"; }
      tps=$(awk '/^tps = / {print $3; exit}' "$out")
      best=$(awk -v a="$best" -v b="$tps" 'BEGIN {print (b > a ? b : a)}')
    done
  done
  pg_ceiling=$(awk -v n="$requests" -v t="$best" 'BEGIN {print t * n}')
  pg_statements=$(awk -v c="$count" -v n="$requests" 'BEGIN {printf "%g", c / n}')
  if [ -n "${BENCH_SQL_DIR:-}" ]; then
    captures=$((captures + 1))
    mkdir -p "$BENCH_SQL_DIR"
    cp "$work/request.sql" "$BENCH_SQL_DIR/$(basename "$0" .sh)-$captures.sql"
  fi
}
captures=0
pg_pool_size=10   # keel's DATABASE_POOL_SIZE default on PostgreSQL

# ---------------------------------------------------------------- backends

# The URL of database DB on the server of URL.
pg_url_with_db() { # URL DB
  python3 -c 'import sys, urllib.parse as u; p = u.urlsplit(sys.argv[1]); print(u.urlunsplit(p._replace(path="/" + sys.argv[2])))' "$1" "$2"
}

# Runs bench_backend on SQLite, then on PostgreSQL when PG_URL (a server to create a scratch
# database on) is given.
for_each_backend() { # [PG_URL]
  local pg=${1:-} name scratch
  name=$(basename "$0" .sh)
  backend=sqlite
  echo "[sqlite]"
  bench_backend sqlite "sqlite://$work/$name.db"
  if [ -n "$pg" ]; then
    need psql "apt-get install postgresql-client"
    scratch="keel_bench_${name}_$$"
    psql "$pg" -qc "CREATE DATABASE $scratch" >/dev/null || die "cannot create a database at $pg"
    scratch_dbs+=("$pg $scratch")
    backend=postgresql
    echo "[postgresql]"
    bench_backend postgresql "$(pg_url_with_db "$pg" "$scratch")"
    psql "$pg" -qc "DROP DATABASE $scratch WITH (FORCE)" >/dev/null
    unset 'scratch_dbs[-1]'
  fi
  backend=common
}

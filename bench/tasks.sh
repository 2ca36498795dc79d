#!/usr/bin/env bash
# Background tasks through HTTP, enqueue to result: wrk at 64 connections (bench/task_loop.lua)
# enqueues io_simulation_task (latency_scale 0: the queue's own cost) and asks for each task's
# result with ?wait=30, which keel holds until the job ends: two requests a task. The Redis queue,
# with the worker embedded in keel serve running as many jobs at a time as there are connections
# (WORKER_THREADS; with the default 8, at most 8 of the 64 tasks in flight run at once and the
# rate is the jobs' slots, not the queue's cost); beside the bare actix-web handler
# answering the same two requests with the result's body. keel serves only the tasks module
# (open: no token).
# Usage: bash bench/tasks.sh [postgres://user@host:5432/postgres]   (needs wrk)
# SQLite always; with a PostgreSQL URL, PostgreSQL too, in a scratch database (the tasks live in
# Redis either way). Redis: BENCH_REDIS_URL (default redis://127.0.0.1:6379), database
# BENCH_REDIS_DB (default 9), emptied (FLUSHDB) before and after; without an answering Redis the
# in-memory queue is measured instead, and the row says so.
source "$(dirname "$0")/lib.sh"
build_release
port=8188
redis_url=${BENCH_REDIS_URL:-redis://127.0.0.1:6379}
redis_db=${BENCH_REDIS_DB:-9}

redis() { redis-cli -u "$redis_url" -n "$redis_db" "$@"; }
if command -v redis-cli >/dev/null && [ "$(redis ping 2>/dev/null)" = PONG ]; then
  queue=redis
  queue_name="Redis queue"
  flush_redis() { redis flushdb >/dev/null; }
  trap 'flush_redis || true; cleanup' EXIT
else
  echo "bench: no Redis answered at $redis_url (or no redis-cli): measuring the in-memory queue" >&2
  queue=memory
  queue_name="in-memory queue, no Redis"
  flush_redis() { :; }
fi

# Tasks enqueue to result against the server on PORT, by wrk_load (each task two requests, so
# its better run in requests is its better run in tasks): sets rate (tasks/s), p50 and p99 (of one
# request) and per (requests a task).
task_load() { # PORT
  local tasks requests
  wrk_load "$conns" -s bench/task_loop.lua "http://127.0.0.1:$1/"
  read -r tasks requests < <(awk '/^tasks / {print $2, $4}' "$work/wrk-best.txt")
  [ "${tasks:-0}" -gt 0 ] || { cat "$work/wrk-best.txt" >&2; die "no task completed"; }
  rate=$(awk -v t="$tasks" -v d="$duration" 'BEGIN {printf "%.1f", t / d}')
  per=$(awk -v q="$requests" -v t="$tasks" 'BEGIN {printf "%.2f", q / t}')
}

bench_backend() { # label DATABASE_URL
  local url=$2 task_id
  flush_redis
  start_keel $port DATABASE_URL="$url" KEEL_MODULES=tasks TASKS_BACKEND=$queue \
    REDIS_URL="$redis_url" REDIS_DB="$redis_db" WORKER_EMBEDDED=true WORKER_THREADS="$conns"
  # One task by hand, for the body the bare handler will answer with.
  task_id=$(curl -sf -X POST "$keel_base/api/v1/tasks/enqueue" -H 'content-type: application/json' \
    -d '{"task_name": "io_simulation_task", "kwargs": {"latency_scale": 0}}' | python3 bench/json_field.py task_id)
  for _ in $(seq 1 100); do
    [ "$(curl -s -o "$work/result.json" -w '%{http_code}' "$keel_base/api/v1/tasks/result/$task_id")" = 200 ] && break
    sleep 0.05
  done
  grep -q '"completed"' "$work/result.json" || die "the first task did not complete: $(cat "$work/result.json")"

  say "task enqueue -> result, $conns connections"
  task_load $port
  local keel_figures="$rate $p50 $p99 $per"
  stop "$keel_pid"
  flush_redis

  say "the same against the bare handler"
  start_bare "$work/result.json"
  task_load $bare_port
  local ceiling=$rate
  stop "$bare_pid"
  read -r rate p50 p99 per <<<"$keel_figures"
  row "\`POST /api/v1/tasks/enqueue\` → \`GET /api/v1/tasks/result/{id}?wait=30\`, held until the job ends ($queue_name; $per requests a task; latency of one request)" \
    "wrk, $conns conn." "$rate" tasks/s "$p50" "$p99" "$ceiling" "bare handler, the result's body"
}

for_each_backend "${1:-}"

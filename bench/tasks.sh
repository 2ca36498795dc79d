#!/usr/bin/env bash
# Background tasks through HTTP, enqueue to result: 64 clients each enqueue io_simulation_task
# (latency_scale 0: the queue's own cost) and ask for its result every 5 ms (BENCH_TASK_POLL_MS)
# until it is there, on the Redis queue with the worker embedded in keel serve (WORKER_THREADS=8); beside the
# bare actix-web handler answering the same two requests with the result's body. keel serves only
# the tasks module (open: no token).
# Usage: bash bench/tasks.sh [postgres://user@host:5432/postgres]   (needs wrk and python3)
# SQLite always; with a PostgreSQL URL, PostgreSQL too, in a scratch database (the tasks live in
# Redis either way). Redis: BENCH_REDIS_URL (default redis://127.0.0.1:6379), database
# BENCH_REDIS_DB (default 9), emptied (FLUSHDB) before and after; without an answering Redis the
# in-memory queue is measured instead, and the row says so.
source "$(dirname "$0")/lib.sh"
build_release
port=8188
redis_url=${BENCH_REDIS_URL:-redis://127.0.0.1:6379}
redis_db=${BENCH_REDIS_DB:-9}
poll_ms=${BENCH_TASK_POLL_MS:-5}

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

bench_backend() { # label DATABASE_URL
  local url=$2 task_id figures count per
  flush_redis
  start_keel $port DATABASE_URL="$url" KEEL_MODULES=tasks TASKS_BACKEND=$queue \
    REDIS_URL="$redis_url" REDIS_DB="$redis_db" WORKER_EMBEDDED=true WORKER_THREADS=8
  # One task by hand, for the body the bare handler will answer with.
  task_id=$(curl -sf -X POST "$keel_base/api/v1/tasks/enqueue" -H 'content-type: application/json' \
    -d '{"task_name": "io_simulation_task", "kwargs": {"latency_scale": 0}}' | python3 bench/json_field.py task_id)
  for _ in $(seq 1 100); do
    [ "$(curl -s -o "$work/result.json" -w '%{http_code}' "$keel_base/api/v1/tasks/result/$task_id")" = 200 ] && break
    sleep 0.05
  done
  grep -q '"completed"' "$work/result.json" || die "the first task did not complete: $(cat "$work/result.json")"

  say "task enqueue -> result, $conns clients"
  figures=$(python3 bench/closed_loop.py task 127.0.0.1 $port "$duration" "$conns" "$poll_ms") ||
    die "task enqueue -> result failed"
  read -r rate p50 p99 count per <<<"$figures"
  stop "$keel_pid"
  flush_redis

  start_bare "$work/result.json"
  figures=$(python3 bench/closed_loop.py task 127.0.0.1 $bare_port "$duration" "$conns" "$poll_ms") ||
    die "the bare handler's run failed"
  read -r ceiling _ <<<"$figures"
  stop "$bare_pid"
  row "\`POST /api/v1/tasks/enqueue\` → \`GET /api/v1/tasks/result/{id}?wait=30\`, held until the job ends ($queue_name; $per requests a task)" \
    "Python asyncio, $conns clients" "$rate" tasks/s "$p50" "$p99" "$ceiling" "bare handler, the result's body"
}

for_each_backend "${1:-}"

#!/usr/bin/env bash
# The container image, proven: builds the Containerfile's `prebuilt` target around a keel binary
# built beforehand (CI's own build, so nothing compiles twice), then runs it with podman on the
# host network.
#
#   bash deploy/check.sh POSTGRES_URL [REDIS_URL]
#
# 1. On PostgreSQL and Redis, with APP_ENV=production: `keel migrate` in a one-shot container, a
#    `serve` and a `worker` container; /health/ready answers 200, the image's HEALTHCHECK passes,
#    a registration, a login and a task round trip (run by the worker container: the server's
#    embedded worker is off) work, both ran as a non-root user, and `podman stop` ends each
#    within the shutdown timeout with exit status 0 (drained, not killed).
# 2. On the embedded SQLite default with a named volume: data written, `keel backup` inside the
#    container, `podman restart`, and the data is still there.
#
# KEEL_BIN names the binary (default: target/debug/keel of CARGO_TARGET_DIR, built when missing).
# When no registry answers, the runtime stage's base (debian:bookworm-slim) is made locally from
# Debian's packages with mmdebstrap, under the name the registry would serve.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pg_url="${1:?usage: deploy/check.sh POSTGRES_URL [REDIS_URL]}"
redis_url="${2:-redis://127.0.0.1:6379}"
redis_db=7
base_image=docker.io/library/debian:bookworm-slim
image=localhost/keel:check
shutdown_timeout=10

log() { printf '\n== %s\n' "$*"; }
fail() { printf 'FAILED: %s\n' "$*" >&2; exit 1; }
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# Tools: podman, buildah, runc (crun refuses this kind of machine's ulimits and hybrid cgroups),
# mmdebstrap for the local base image.
missing=()
for tool in podman buildah runc mmdebstrap curl; do command -v "$tool" >/dev/null 2>&1 || missing+=("$tool"); done
if [ "${#missing[@]}" -gt 0 ]; then
  log "Installing ${missing[*]}"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${missing[@]}" uidmap >/dev/null
fi

work=$(mktemp -d)
run_id="keel-check-$$"
containers=()
volume="$run_id-data"
cleanup() {
  for c in "${containers[@]}"; do podman rm -f -t 0 "$c" >/dev/null 2>&1 || true; done
  podman volume rm -f "$volume" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# podman's settings for this run only (the machine's containers.conf is left alone): runc, no
# default ulimits, cgroupfs (no systemd needed), events to a file.
cat >"$work/containers.conf" <<'EOF'
[containers]
default_ulimits = []
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
export CONTAINERS_CONF="$work/containers.conf"
# Without systemd, podman logs an error about its health-check timers on every start and stop
# even with them disabled; the lines say nothing about the check.
podman() { command podman "$@" 2> >(grep -v 'unable to get systemd connection' >&2); }

log "Base image $base_image"
if podman image exists "$base_image"; then
  echo "present"
elif timeout 120 podman pull -q "$base_image" >/dev/null 2>&1; then
  echo "pulled"
else
  echo "no registry answers: making it from Debian's packages (mmdebstrap, variant minbase)"
  timeout 600 mmdebstrap --quiet --variant=minbase --mode=root \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*' \
    bookworm "$work/base.tar"
  podman import -q --change 'CMD ["bash"]' "$work/base.tar" "$base_image" >/dev/null
  rm -f "$work/base.tar"
fi

log "Image $image (target prebuilt)"
bin="${KEEL_BIN:-}"
if [ -z "$bin" ]; then
  target="${CARGO_TARGET_DIR:-$root/target}"
  bin="$target/debug/keel"
  [ -x "$bin" ] || (cd "$root" && cargo build -p keel)
fi
[ -x "$bin" ] || fail "no keel binary at $bin"
mkdir "$work/context"
# Only the binary goes into the build context; its symbols stay behind.
strip -o "$work/context/keel" "$bin" 2>/dev/null || cp "$bin" "$work/context/keel"
started=$(date +%s)
buildah bud --quiet --isolation chroot --format docker --layers --target prebuilt \
  -f "$root/Containerfile" -t "$image" "$work/context" >/dev/null
echo "built in $(( $(date +%s) - started )) s; $(podman image inspect --format '{{.Size}}' "$image") bytes"
user=$(podman image inspect --format '{{.Config.User}}' "$image")
[ "$user" = "10001:10001" ] || fail "the image's user is '$user', not 10001:10001"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_ready() { # URL NAME
  for _ in $(seq 1 120); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$1/health/ready")" = 200 ] && return 0
    sleep 0.5
  done
  podman logs "$2" 2>&1 | tail -30
  fail "$2 did not answer 200 on /health/ready"
}
# The UID a container's main process runs as on the host (rootful podman, no user namespace).
host_uid() { stat -c %u "/proc/$(podman inspect --format '{{.State.Pid}}' "$1")"; }
# Stops a container with SIGTERM and checks it drained: exit status 0 within the timeout.
stop_drained() { # NAME
  local t0 elapsed code
  t0=$(date +%s)
  podman stop -t "$((shutdown_timeout + 5))" "$1" >/dev/null
  elapsed=$(( $(date +%s) - t0 ))
  code=$(podman inspect --format '{{.State.ExitCode}}' "$1")
  [ "$code" = 0 ] || { podman logs "$1" 2>&1 | tail -20; fail "$1 exited with $code after SIGTERM"; }
  [ "$elapsed" -le "$shutdown_timeout" ] || fail "$1 took ${elapsed}s to stop (SHUTDOWN_TIMEOUT_SECONDS=$shutdown_timeout)"
  echo "$1 stopped cleanly in ${elapsed}s"
}
json_field() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }

secret=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
port=$(free_port)
base="http://127.0.0.1:$port"
env_file="$work/keel.env"
cat >"$env_file" <<EOF
APP_ENV=production
SECRET_KEY=$secret
BCRYPT_COST=10
DATABASE_URL=$pg_url
REDIS_URL=$redis_url
REDIS_DB=$redis_db
TASKS_BACKEND=redis
WORKER_EMBEDDED=false
PORT=$port
SHUTDOWN_TIMEOUT_SECONDS=$shutdown_timeout
WORKER_SHUTDOWN_TIMEOUT_SECONDS=5
RUST_LOG=info
EOF
# The image's HEALTHCHECK is run on demand below (`podman healthcheck run`): podman's periodic
# runs need systemd timers, which a CI machine may not have.
run() { podman run --health-interval disable --network host --env-file "$env_file" "$@"; }

log "PostgreSQL and Redis: migrate, serve, worker"
run --rm --name "$run_id-migrate" "$image" migrate
containers+=("$run_id-serve" "$run_id-worker")
run -d --name "$run_id-serve" "$image" >/dev/null
run -d --name "$run_id-worker" "$image" worker >/dev/null
wait_ready "$base" "$run_id-serve"
echo "/health/ready: 200"
podman healthcheck run "$run_id-serve" >/dev/null || fail "the image's HEALTHCHECK failed"
echo "HEALTHCHECK (keel healthcheck): healthy"
for c in "$run_id-serve" "$run_id-worker"; do
  uid=$(host_uid "$c")
  [ "$uid" = 10001 ] || fail "$c runs as uid $uid"
  echo "$c runs as uid $uid (non-root)"
done

email="check-$$-$(date +%s)@example.com"
code=$(curl -s -o "$work/user.json" -w '%{http_code}' -X POST "$base/api/v1/auth/register" \
  -H 'content-type: application/json' -d "{\"email\":\"$email\",\"password\":\"correct-horse-battery\"}")
[ "$code" = 201 ] || fail "register answered $code: $(cat "$work/user.json")"
token=$(curl -sf -X POST "$base/api/v1/auth/token" --data-urlencode "username=$email" \
  --data-urlencode 'password=correct-horse-battery' | json_field access_token)
echo "registered and logged in $email"
task_id=$(curl -sf -X POST "$base/api/v1/tasks/enqueue" -H "Authorization: Bearer $token" \
  -H 'content-type: application/json' -d '{"task_name":"system_health_check"}' | json_field task_id)
status=""
for _ in $(seq 1 60); do
  status=$(curl -s "$base/api/v1/tasks/result/$task_id" -H "Authorization: Bearer $token" | json_field status || true)
  [ "$status" = completed ] && break
  sleep 0.5
done
[ "$status" = completed ] || { podman logs "$run_id-worker" 2>&1 | tail -20; fail "task $task_id is '$status', not completed"; }
echo "task $task_id completed by the worker container"

# Requests in flight when SIGTERM arrives are answered, not cut: logins queue for bcrypt (cost 10),
# so several are still running when the stop begins.
for i in 1 2 3 4 5 6; do
  curl -s -o /dev/null -w '%{http_code}' -X POST "$base/api/v1/auth/token" --data-urlencode "username=$email" \
    --data-urlencode 'password=correct-horse-battery' >"$work/inflight.$i" 2>/dev/null &
done
sleep 0.3
stop_drained "$run_id-serve"
wait
for i in 1 2 3 4 5 6; do
  [ "$(cat "$work/inflight.$i")" = 200 ] || fail "a login in flight at SIGTERM got '$(cat "$work/inflight.$i")', not 200"
done
echo "6 logins in flight at SIGTERM all answered 200"
podman logs "$run_id-serve" 2>&1 | grep -q 'Keel stopped' || fail "the server did not log its clean stop"
stop_drained "$run_id-worker"

log "Embedded SQLite on a volume: write, back up, restart, read"
port=$(free_port)
base="http://127.0.0.1:$port"
podman volume create "$volume" >/dev/null
containers+=("$run_id-sqlite")
podman run -d --name "$run_id-sqlite" --health-interval disable --network host -v "$volume:/data" \
  -e SECRET_KEY="$secret" -e PORT="$port" -e BCRYPT_COST=4 -e TASKS_BACKEND=memory \
  "$image" >/dev/null
wait_ready "$base" "$run_id-sqlite"
uid=$(host_uid "$run_id-sqlite")
[ "$uid" = 10001 ] || fail "the SQLite container runs as uid $uid"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$base/api/v1/auth/register" \
  -H 'content-type: application/json' -d '{"email":"kept@example.com","password":"correct-horse-battery"}')
[ "$code" = 201 ] || fail "register on SQLite answered $code"
podman exec "$run_id-sqlite" keel backup /data/backup.db || fail "keel backup inside the container failed"
podman restart -t "$shutdown_timeout" "$run_id-sqlite" >/dev/null
wait_ready "$base" "$run_id-sqlite"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$base/api/v1/auth/token" \
  -d 'username=kept@example.com&password=correct-horse-battery')
[ "$code" = 200 ] || fail "after the restart the user is gone (login answered $code)"
echo "the user registered before the restart logs in after it; /data/backup.db written by keel backup"
podman exec "$run_id-sqlite" keel restore /data/backup.db >/dev/null 2>&1 \
  && fail "keel restore replaced the database under the running server"
echo "keel restore refused while the server holds the database"

log "Container check passed"

#!/usr/bin/env bash
# Blog benchmarks against a release build on loopback (needs wrk and GNU time). Prints the figures
# recorded in docs/performance.md. Usage: bash bench/blog.sh [postgres://user@host:5432/postgres]
# With a PostgreSQL URL it also benches PostgreSQL, in a scratch database it creates and drops.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v wrk >/dev/null || { echo "wrk is needed (apt-get install wrk)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "GNU time is needed (apt-get install time)" >&2; exit 1; }
cargo build --release -p keel --example bare_json
cargo build --release -p keel
target=${CARGO_TARGET_DIR:-target}
keel="$target/release/keel"
port=8182
duration=${BENCH_SECONDS:-15}
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

summary() {
  awk '/Requests\/sec/ {rps=$2} /^ +50%/ {p50=$2} /^ +99%/ {p99=$2} END {printf "%s req/s, p50 %s, p99 %s\n", rps, p50, p99}'
}

# 1,000 published posts with 3 of 10 tags each, as one JSON import.
python3 - "$work/seed.json" <<'PY'
import json, sys
tags = [f"topic-{i}" for i in range(10)]
posts = [{
    "title": f"Post number {i}",
    "slug": f"post-{i}",
    "content": "Some **markdown** body text. " * 40,
    "excerpt": f"Excerpt {i}",
    "status": "published",
    "published_at": f"2026-01-01T00:{i // 60 % 60:02d}:{i % 60:02d}Z",
    "tags": [tags[i % 10], tags[(i + 3) % 10], tags[(i + 7) % 10]],
} for i in range(1000)]
json.dump(posts, open(sys.argv[1], "w"))
PY

bench_list() { # $1 = label, $2 = DATABASE_URL (READ_CACHE from the environment: on by default)
  KEEL_MODULES=blog DATABASE_URL="$2" PORT=$port RUST_LOG=warn "$keel" serve >"$work/keel.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$port/health/live" >/dev/null && break; sleep 0.1; done
  curl -sf -F "file=@$work/seed.json" "http://127.0.0.1:$port/api/v1/blog/import" >/dev/null
  local url="http://127.0.0.1:$port/api/v1/blog/posts?page=3&page_size=20"
  curl -sf "$url" -o "$work/page.json"
  echo "[$1] GET /api/v1/blog/posts (20 per page, 3 tags each, 1,000 published, $(wc -c < "$work/page.json") bytes), 64 connections, ${duration}s:"
  wrk -t2 -c64 -d"${duration}s" --latency "$url" | summary
  kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
  # The same body from memory, with nothing else in the way: the ceiling of this endpoint.
  "$target/release/examples/bare_json" 127.0.0.1:8098 "$work/page.json" >/dev/null 2>&1 &
  pids+=($!)
  sleep 0.5
  echo "[$1] bare actix-web handler serving the same body:"
  wrk -t2 -c64 -d"${duration}s" --latency http://127.0.0.1:8098/ | summary
  kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
}

"$target/release/examples/bare_json" 127.0.0.1:8099 >/dev/null 2>&1 &
pids+=($!)
sleep 0.5
echo "[baseline] bare actix-web JSON handler, 64 connections, ${duration}s:"
wrk -t2 -c64 -d"${duration}s" --latency http://127.0.0.1:8099/ | summary

bench_list sqlite "sqlite://$work/list.db"
if [ -n "${1:-}" ]; then
  scratch="keel_bench_blog_$$"
  psql "$1" -qc "CREATE DATABASE $scratch"
  bench_list postgresql "${1%/*}/$scratch"
  psql "$1" -qc "DROP DATABASE $scratch WITH (FORCE)"
fi

# A 10,000-post zip of Markdown files in nested folders (SQLite, through the CLI's service code).
python3 - "$work/big.zip" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED) as z:
    for i in range(10000):
        body = f"---\ntitle: Imported post {i}\ndate: 2025-{i % 12 + 1:02d}-{i % 28 + 1:02d}\ntags: [alpha, beta, t{i % 50}]\n---\n\n" + ("Paragraph of text. " * 60 + "\n\n") * 3
        z.writestr(f"content/posts/{i % 100}/post-{i}.md", body)
PY
echo "10,000-post zip: $(du -h "$work/big.zip" | cut -f1)"
export DATABASE_URL="sqlite://$work/big.db" KEEL_MODULES=blog RUST_LOG=warn
"$keel" migrate >/dev/null
measure() { # label, command...
  local label=$1; shift
  /usr/bin/time -f "%e s, peak RSS %M KiB" -o "$work/time" "$@" >/dev/null
  echo "$label: $(cat "$work/time")"
}
measure "import 10,000-post zip" "$keel" blog import "$work/big.zip"
measure "export 10,000 posts as markdown zip" "$keel" blog export --format markdown --out "$work/out.zip"
measure "export 10,000 posts as json" "$keel" blog export --format json --out "$work/out.json"

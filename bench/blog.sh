#!/usr/bin/env bash
# Blog bulk work through the CLI (the same service code as the HTTP endpoints): importing a zip of
# 10,000 Markdown posts in nested folders (YAML front matter, 3 tags each), then exporting them as
# a Markdown zip and as JSON; the time and the process's peak RSS of each, from GNU time. The blog
# reads under load are in bench/reads.sh.
# Usage: bash bench/blog.sh [postgres://user@host:5432/postgres]   (needs GNU time and python3)
# SQLite always; with a PostgreSQL URL, PostgreSQL too, in a scratch database.
source "$(dirname "$0")/lib.sh"
[ -x /usr/bin/time ] || die "GNU time is needed (apt-get install time)"
build_release
posts=${BLOG_POSTS:-10000}

python3 bench/blog_seed.py zip "$posts" "$work/big.zip"
zip_size=$(fmt_size "$(wc -c <"$work/big.zip")")

measure() { # label, keel arguments...
  local label=$1
  shift
  (cd "$work" && exec env DATABASE_URL="$url" KEEL_MODULES=blog RUST_LOG=warn \
     /usr/bin/time -f "%e %M" -o "$work/time" "$keel_bin" "$@") >/dev/null 2>>"$work/keel.log" ||
    { tail -n 30 "$work/keel.log" >&2; die "keel $* failed"; }
  read -r seconds kib <"$work/time"
  note "$label: $seconds s, peak RSS $((kib / 1024)) MiB"
}

bench_backend() { # label DATABASE_URL
  local url=$2 seconds kib
  keel_cli DATABASE_URL="$url" KEEL_MODULES=blog -- migrate
  say "import and export of $(fmt_rate "$posts") posts"
  measure "\`keel blog import\` of a $(fmt_rate "$posts")-post zip ($zip_size)" blog import "$work/big.zip"
  measure "\`keel blog export --format markdown\` of those posts" blog export --format markdown --out "$work/out.zip"
  measure "\`keel blog export --format json\` of those posts" blog export --format json --out "$work/out.json"
  rm -f "$work/out.zip" "$work/out.json"
}

for_each_backend "${1:-}"

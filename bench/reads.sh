#!/usr/bin/env bash
# The hot reads: the public blog list (page 1, 20 posts of 1,000 published, 3 tags each), a post by
# slug, the tag list (10 tags) and GET /auth/me, each with the read cache on and off (and the post
# revalidated with its ETag, answered 304 without a body, with the cache on), beside the bare
# actix-web handler answering the very bytes the endpoint answered, from memory; plus the time
# from start to ready and the idle RSS. keel serves the auth and blog modules.
# Usage: bash bench/reads.sh [postgres://user@host:5432/postgres]   (needs wrk and python3)
# SQLite always; with a PostgreSQL URL, PostgreSQL too, in a scratch database.
source "$(dirname "$0")/lib.sh"
build_release
port=8183
list_path="/api/v1/blog/posts?page=1&page_size=20"
slug_path="/api/v1/blog/posts/post-500"
tags_path="/api/v1/blog/tags"

python3 bench/blog_seed.py json 1000 "$work/seed.json"

bench_backend() { # label DATABASE_URL
  local url=$2 cache what token size name pg_rate pg_count etag slug_ceiling
  local settings=(DATABASE_URL="$url" KEEL_MODULES=auth,blog BCRYPT_COST=4)
  keel_cli "${settings[@]}" -- migrate
  keel_cli "${settings[@]}" -- blog import "$work/seed.json"
  declare -A result
  for cache in on off; do
    start_keel $port "${settings[@]}" READ_CACHE=$cache
    if [ $cache = on ]; then
      note "start to ready (\`/health/ready\` answers 200; auth and blog, migrated database): ${ready_ms} ms"
      note "idle RSS after start: $(rss_mib "$keel_pid") MiB"
      curl -sf -X POST "$keel_base/auth/register" -H 'content-type: application/json' \
        -d '{"email":"bench@example.com","password":"bench-password-1"}' >/dev/null
    fi
    token=$(curl -sf -X POST "$keel_base/auth/token" \
      -d 'username=bench%40example.com&password=bench-password-1' | python3 bench/json_field.py access_token)
    curl -sf "$keel_base$list_path" -o "$work/list.json"
    curl -sf "$keel_base$slug_path" -o "$work/slug.json"
    curl -sf "$keel_base$tags_path" -o "$work/tags.json"
    curl -sf -H "Authorization: Bearer $token" "$keel_base/auth/me" -o "$work/me.json"
    say "reads, READ_CACHE=$cache"
    wrk_load "$conns" "$keel_base$list_path"
    result[list_$cache]="$rate $p50 $p99"
    wrk_load "$conns" -H "Authorization: Bearer $token" "$keel_base/auth/me"
    result[me_$cache]="$rate $p50 $p99"
    wrk_load "$conns" "$keel_base$slug_path"
    result[slug_$cache]="$rate $p50 $p99"
    wrk_load "$conns" "$keel_base$tags_path"
    result[tags_$cache]="$rate $p50 $p99"
    if [ $cache = on ]; then
      etag=$(curl -sf -D - -o /dev/null "$keel_base$slug_path" | tr -d '\r' | awk -F': ' 'tolower($1) == "etag" {print $2}')
      [ -n "$etag" ] || die "the post answered no ETag"
      wrk_load "$conns" -H "If-None-Match: $etag" "$keel_base$slug_path"
      result[slug304]="$rate $p50 $p99"
    fi
    stop "$keel_pid"
  done
  declare -A pg=()
  if [ "$1" = postgresql ]; then
    say "reads: the statements of each, captured, then run by pgbench"
    start_capture "$url"
    start_keel $port "${settings[@]}" DATABASE_URL="$capture_url" READ_CACHE=off
    pg_ceiling "$url" "" "$keel_base$list_path"
    pg[list]="$pg_ceiling $pg_statements"
    pg_ceiling "$url" "" "$keel_base$slug_path"
    pg[slug]="$pg_ceiling $pg_statements"
    pg_ceiling "$url" "" "$keel_base$tags_path"
    pg[tags]="$pg_ceiling $pg_statements"
    pg_ceiling "$url" "" -H "Authorization: Bearer $token" "$keel_base/auth/me"
    pg[me]="$pg_ceiling $pg_statements"
    stop "$keel_pid"
  fi
  say "reads, bare handler"
  for what in list slug tags me; do
    size=$(fmt_size "$(wc -c <"$work/$what.json")")
    case $what in
      list) name="\`GET $list_path\` ($size)" ;;
      slug) name="\`GET $slug_path\` ($size)" ;;
      tags) name="\`GET $tags_path\` ($size)" ;;
      me) name="\`GET /auth/me\` ($size)" ;;
    esac
    bare_load "$work/$what.json" "$conns" /
    for cache in on off; do
      read -r rate p50 p99 <<<"${result[${what}_$cache]}"
      # The cached reads hardly reach the database: PostgreSQL's ceiling is the uncached one's.
      [ "$cache" = off ] && read -r pg_rate pg_count <<<"${pg[$what]:-}" || pg_rate="" pg_count=""
      row "$name, \`READ_CACHE=$cache\`" "wrk, $conns conn." "$rate" req/s "$p50" "$p99" \
        "$ceiling" "bare handler, same body" "$pg_rate" "$pg_count"
    done
    if [ $what = slug ]; then slug_ceiling=$ceiling; fi
  done
  read -r rate p50 p99 <<<"${result[slug304]}"
  row "\`GET $slug_path\` with its \`If-None-Match\` (304, no body), \`READ_CACHE=on\`" \
    "wrk, $conns conn." "$rate" req/s "$p50" "$p99" "$slug_ceiling" "bare handler, the 200 with its body"
}

for_each_backend "${1:-}"

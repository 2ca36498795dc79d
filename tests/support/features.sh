#!/usr/bin/env bash
# Each module crate alone, as an embedder builds it: one database backend, no command line.
# Lints every such build and checks that it compiles none of what it left out (the other
# backend, clap, and Redis where the module has no use for it).
set -euo pipefail
cd "$(dirname "$0")/../.."

modules="auth-core blog-core comms-core ai-core payment-core tasks-core"
failed=0

# `cargo tree`'s distinct packages of a build of $1 with features $2.
packages() {
  cargo tree -p "$1" --no-default-features --features "$2" -e normal --prefix none |
    awk '{print $1}' | sort -u
}

refuse() { # crate features package...
  local crate=$1 features=$2; shift 2
  local tree
  tree=$(packages "$crate" "$features")
  for package in "$@"; do
    if grep -qx "$package" <<<"$tree"; then
      echo "$crate with only [$features] still builds $package" >&2
      failed=1
    fi
  done
}

for crate in $modules; do
  for backend in postgres sqlite; do
    echo "-- $crate [$backend]"
    cargo clippy -q -p "$crate" --no-default-features --features "$backend" -- -D warnings
    other=$([ "$backend" = postgres ] && echo libsqlite3-sys || echo tokio-postgres)
    # tasks-core's queue is Redis (always built); the others reach Redis only through features.
    redis=$([ "$crate" = tasks-core ] || echo "redis deadpool-redis")
    refuse "$crate" "$backend" "$other" clap indicatif $redis
  done
done

# A kernel without SQLite refuses an SQLite URL, naming the feature (its own unit tests).
cargo test -q -p kernel --no-default-features --features postgres --lib

# The HTTP client only where providers are called.
for crate in auth-core blog-core tasks-core; do
  refuse "$crate" postgres reqwest rustls
done
# And the kernel's recorder facade only where the server asks for it.
for crate in $modules; do
  refuse "$crate" postgres metrics
done

exit $failed

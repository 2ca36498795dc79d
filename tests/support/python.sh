# Shared by the Python-driven checks: `ensure_venv` makes (or reuses) the virtual environment
# under the cargo target directory and installs tests/requirements.txt into it, once per change of
# that file. Source it after setting `root` (the repository); it sets `target` and `venv`.

target="${CARGO_TARGET_DIR:-target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac
venv="$target/fuzz-venv"

ensure_venv() {
  local requirements="$root/tests/requirements.txt" stamp="$venv/.requirements"
  if ! cmp -s "$requirements" "$stamp" 2>/dev/null; then
    printf '\n== Installing the Python test tools (tests/requirements.txt)\n'
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check -r "$requirements"
    cp "$requirements" "$stamp"
  fi
}

# `bin`: the debug binaries of `cargo build --workspace --all-features --all-targets` (what the
# test command builds; a no-op after it); FUZZ_BIN_DIR names a folder of binaries to use instead.
ensure_binaries() {
  bin="${FUZZ_BIN_DIR:-}"
  if [ -z "$bin" ]; then
    printf '\n== Building keel and provider-sim\n'
    (cd "$root" && cargo build --workspace --all-features --all-targets)
    bin="$target/debug"
  fi
}

#!/usr/bin/env bash
# Static checks of the deployment files, offline:
# - the Containerfile against hadolint;
# - compose.yaml rendered by podman-compose with .env.example filled in, and refused while a
#   required secret is missing;
# - every Kubernetes manifest against the Kubernetes schemas (kubernetes-validate, strict) and the
#   kustomization's resource list against the folder;
# - the manifests against checkov (each skipped rule carries its reason in the manifest).
# The tools come from deploy/requirements.txt, in a virtual environment under the cargo target
# directory, installed once per change of that file; podman (which podman-compose runs) from
# Debian's packages when it is missing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
target="${CARGO_TARGET_DIR:-target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac
venv="$target/deploy-venv"
requirements="$root/deploy/requirements.txt"
kubernetes_version=1.30.0

log() { printf '\n== %s\n' "$*"; }
fail() { printf 'FAILED: %s\n' "$*" >&2; exit 1; }
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# podman-compose renders through podman itself (`podman version` first): Debian's package.
if ! command -v podman >/dev/null 2>&1; then
  log "Installing podman"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq podman uidmap >/dev/null
fi

if ! cmp -s "$requirements" "$venv/.requirements" 2>/dev/null; then
  log "Installing the deployment lint tools (deploy/requirements.txt)"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$requirements"
  cp "$requirements" "$venv/.requirements"
fi

log "hadolint Containerfile"
"$venv/bin/hadolint" "$root/Containerfile"
echo "clean"

log "compose.yaml (podman-compose config)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
compose=("$venv/bin/podman-compose" -f "$root/deploy/compose.yaml")
# .env.example with its required values filled in renders; the rendering is checked for the
# services a deployment needs and the database URL built from the secrets.
sed -e 's/^SECRET_KEY=$/SECRET_KEY=lint-secret-lint-secret-lint-secret-0/' \
    -e 's/^POSTGRES_PASSWORD=$/POSTGRES_PASSWORD=lint-password/' \
    -e 's/^KEEL_DOMAIN=$/KEEL_DOMAIN=keel.example.com/' \
    -e 's|^PUBLIC_BASE_URL=$|PUBLIC_BASE_URL=https://keel.example.com|' \
    "$root/deploy/.env.example" >"$work/filled.env"
"${compose[@]}" --env-file "$work/filled.env" config >"$work/rendered.yaml"
"$venv/bin/python" - "$work/rendered.yaml" <<'PY'
import sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
services = doc["services"]
want = {"postgres", "redis", "migrate", "keel-1", "keel-2", "worker", "proxy"}
missing = want - set(services)
assert not missing, f"services missing: {missing}"
for name in ("keel-1", "keel-2", "worker"):
    deps = services[name]["depends_on"]
    assert deps["migrate"]["condition"] == "service_completed_successfully", name
    assert services[name]["environment"]["DATABASE_URL"] == "postgres://keel:lint-password@postgres:5432/keel", name
for name in ("postgres", "redis", "keel-1", "keel-2"):
    assert "healthcheck" in services[name], f"{name} has no health check"
print(f"renders: {', '.join(sorted(services))}")
PY
# An .env.example copied without filling it in is refused, naming what is missing.
if "${compose[@]}" --env-file "$root/deploy/.env.example" config >/dev/null 2>"$work/err"; then
  fail "compose.yaml rendered with the unfilled .env.example"
fi
grep -q 'POSTGRES_PASSWORD' "$work/err" || { cat "$work/err"; fail "the refusal does not name POSTGRES_PASSWORD"; }
echo "an unfilled .env is refused (POSTGRES_PASSWORD)"

log "Kubernetes manifests (kubernetes-validate $kubernetes_version, strict)"
manifests=()
for file in "$root"/deploy/kubernetes/*.yaml; do
  [ "$(basename "$file")" = kustomization.yaml ] || manifests+=("$file")
done
"$venv/bin/kubernetes-validate" --quiet --strict -k "$kubernetes_version" "${manifests[@]}"
echo "${#manifests[@]} manifests valid"
# Every manifest is listed in the kustomization, and every listed file exists.
listed=$(sed -n 's/^  - \([a-z-]*\.yaml\)$/\1/p' "$root/deploy/kubernetes/kustomization.yaml" | sort)
present=$(for f in "${manifests[@]}"; do basename "$f"; done | sort)
[ "$listed" = "$present" ] || fail "kustomization.yaml resources differ from the folder: $(diff <(echo "$listed") <(echo "$present") || true)"
echo "kustomization.yaml lists every manifest"

log "checkov (Kubernetes)"
"$venv/bin/checkov" --quiet --compact --skip-download --framework kubernetes \
  -d "$root/deploy/kubernetes"

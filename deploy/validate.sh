#!/usr/bin/env bash
# Checks the deployment files without a cluster or Docker: the Kubernetes
# manifests against the API schemas of the npm package kubernetes-models, and the
# Dockerfiles with dockerfile-utils' linter. Installs both (with js-yaml) once
# from the npm registry into ${DOWNPOUR_K8S_VALIDATOR_DIR:-~/.cache/downpour/k8s-validate}.
# (The systemd units are checked by systemd-analyze in tests/deploy_manifests_test.)
#
#   ./deploy/validate.sh                 # install if needed, then validate
#   ./deploy/validate.sh --install-only  # just install (then pass the folder to
#                                        # bazel test as DOWNPOUR_K8S_VALIDATOR_DIR)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dir="${DOWNPOUR_K8S_VALIDATOR_DIR:-$HOME/.cache/downpour/k8s-validate}"
need=(kubernetes-models@4.5.1 js-yaml@4.1.0 dockerfile-utils@0.16.3)
if [[ ! -d "$dir/node_modules/kubernetes-models" || ! -d "$dir/node_modules/js-yaml" ||
      ! -x "$dir/node_modules/.bin/dockerfile-utils" ]]; then
  command -v npm >/dev/null 2>&1 || {
    echo "validate: npm is needed (apt-get install -y npm)" >&2
    exit 1
  }
  mkdir -p "$dir"
  echo "validate: installing ${need[*]} into $dir"
  (cd "$dir" && npm install --silent --no-audit --no-fund --prefix "$dir" "${need[@]}" >/dev/null)
fi
[[ "${1:-}" == "--install-only" ]] && exit 0
command -v node >/dev/null 2>&1 || {
  echo "validate: node is needed (apt-get install -y nodejs)" >&2
  exit 1
}
NODE_PATH="$dir/node_modules" node "$here/k8s/validate.js" "$here"/k8s/*.yaml
for f in "$here"/docker/*.Dockerfile; do
  node "$dir/node_modules/.bin/dockerfile-utils" lint "$f"
  echo "ok   $f"
done

#!/usr/bin/env bash
# One command: install what is missing, fetch MNIST, build, and train on a local
# cluster (1 coordinator, 2 ps, 2 workers) with progress shown.
#
#   ./deploy/quickstart.sh                         # deploy/configs/mnist_local.yaml
#   ./deploy/quickstart.sh path/to/other.yaml      # another config
#   ./deploy/quickstart.sh --config other.yaml --run_dir /tmp/run   # launcher flags
#   ./deploy/quickstart.sh --secure    # TLS + tokens: deploy/configs/mnist_secure.yaml,
#                                      # certificates made in run/certs
set -euo pipefail
cd "$(dirname "$0")/.."
args=()
config="deploy/configs/mnist_local.yaml"
if [[ "${1:-}" == "--secure" ]]; then
  shift
  config="deploy/configs/mnist_secure.yaml"
  args+=(--config "$config")
  ./deploy/make_certs.sh --out run/certs --ps 2 --standby 0 --workers 2
elif [[ $# -ge 1 && "$1" != -* ]]; then
  config="$1"
  args+=(--config "$1")
  shift
fi
./deploy/install_deps.sh
./deploy/fetch_mnist.sh
echo "quickstart: building (the first build takes a few minutes) ..."
mkdir -p run
if ! bazel build //deploy:launcher //tools:psctl >run/build.log 2>&1; then
  tail -n 30 run/build.log >&2
  echo "quickstart: the build failed (full log: run/build.log)" >&2
  exit 1
fi
echo "quickstart: watch it from another terminal with: bazel-bin/tools/psctl status --config $config"
exec bazel-bin/deploy/launcher "${args[@]}" "$@"

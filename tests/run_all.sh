#!/usr/bin/env bash
# Runs every test: installs what is missing, fetches MNIST, builds, runs all tests
# with Bazel, and ends with a line "N passed, N failed" (test targets).
set -uo pipefail
cd "$(dirname "$0")/.."
./deploy/install_deps.sh || { echo "0 passed, 1 failed"; exit 1; }
# --tests: also what only tests use (Debian's prometheus for
# tests:prometheus_test, which skips, saying so, without it).
./deploy/install_deps.sh --tests ||
  echo "run_all: Debian's prometheus not installed; tests:prometheus_test will skip"
./deploy/fetch_mnist.sh || echo "run_all: MNIST not fetched; the cluster test falls back to synthetic data"
# heart_scale (Debian's liblinear-tools): tests:serve_test trains and serves a
# real job on it; without it that test uses synthetic LIBSVM rows and says so.
./deploy/fetch_data.sh heart_scale ||
  echo "run_all: heart_scale not fetched; tests:serve_test uses synthetic data"
mnist_dir="$PWD/data/mnist"
# Schema checks of the Kubernetes manifests need npm packages; without them
# (no registry) tests/deploy_manifests_test skips just those checks.
k8s_dir="${DOWNPOUR_K8S_VALIDATOR_DIR:-$HOME/.cache/downpour/k8s-validate}"
DOWNPOUR_K8S_VALIDATOR_DIR="$k8s_dir" ./deploy/validate.sh --install-only ||
  echo "run_all: manifest validators not installed; their checks will skip"
log="$(mktemp)"
bazel test //... --test_summary=short --test_env=DOWNPOUR_MNIST_DIR="$mnist_dir" \
  --test_env=DOWNPOUR_K8S_VALIDATOR_DIR="$k8s_dir" "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
passed=$(grep -cE '^//[^ ]+ +(\(cached\) )?PASSED' "$log")
failed=$(grep -cE '^//[^ ]+ +(\(cached\) )?(FAILED|TIMEOUT|NO STATUS|FLAKY|INCOMPLETE)' "$log")
built=1
if [[ $rc -ne 0 && $failed -eq 0 ]]; then
  # The build itself failed: no test could run.
  failed=1
  built=0
fi
rm -f "$log"
# The docs' shell blocks, as a new user would paste them (tests/docs_test.py),
# once everything they run is built. DOWNPOUR_DOCS_TEST=0 leaves them out.
if [[ "${DOWNPOUR_DOCS_TEST:-1}" != 0 ]] && [[ $built == 1 ]]; then
  if DOCS_TEST_CALLER_PATH="$PATH" python3 tests/docs_test.py; then
    passed=$((passed + 1))
    echo "tests/docs_test.py PASSED"
  else
    failed=$((failed + 1))
    echo "tests/docs_test.py FAILED"
  fi
fi
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]

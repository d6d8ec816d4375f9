#!/usr/bin/env bash
# The fast half of tests/docs_test.py, inside `bazel test //...`: every fenced
# block of README.md and docs/*.md names its language, every docs_test marker
# parses, and at least 80 % of the shell blocks are run (not marked skip).
# The blocks themselves run after the suite, from tests/run_all.sh. Reads the
# workspace it was built from (hence the "external" tag: never cached).
set -uo pipefail
self="$(readlink -f "${BASH_SOURCE[0]}")"
exec python3 "$(dirname "$self")/docs_test.py" --list

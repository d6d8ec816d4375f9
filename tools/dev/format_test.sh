#!/usr/bin/env bash
# The house rules a formatter can check, as a test: every C++ source is
# formatted with the checked-in .clang-format (tools/dev/format.sh --check) and
# every BUILD file's deps are sorted and match the sources' system includes
# (tools/dev/fix_deps.py --check), and no function is over 100 lines, at most
# 30 over 60 (tools/dev/function_lengths.py --check). Reads the workspace it was
# built from, hence the "external" tag. The fix for the first two: run the named
# script without --check; for the lengths: split the function it names.
set -uo pipefail
self="$(readlink -f "${BASH_SOURCE[0]}")"
dev="$(dirname "$self")"
rc=0
"$dev/format.sh" --check || rc=1
if ! python3 "$dev/fix_deps.py" --check; then
  echo "fix: tools/dev/fix_deps.py   (sorts deps, and points system-library deps at the includes)"
  rc=1
fi
python3 "$dev/function_lengths.py" --check || rc=1
exit $rc

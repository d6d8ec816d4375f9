#!/usr/bin/env bash
# Formats every C++ source of the project in place with the checked-in
# .clang-format (Debian's clang-format; deploy/install_deps.sh --tests installs it).
#   tools/dev/format.sh            # rewrite what is not formatted
#   tools/dev/format.sh --check    # list what is not formatted; exit 1 if any
# //tools/dev:format_test runs the check in the test suite.
set -uo pipefail

DIRS=(bench common coordinator data deploy membership model proto rpc serve server tests tools
      worker)

self="$(readlink -f "${BASH_SOURCE[0]}")"
root="$(cd "$(dirname "$self")/../.." && pwd)"
check=0
case "${1:-}" in
  "") ;;
  --check) check=1 ;;
  -h|--help) sed -n '2,6p' "$self" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "format: unknown argument $1 (try --help)" >&2; exit 2 ;;
esac
clang_format="${CLANG_FORMAT:-clang-format}"
if ! command -v "$clang_format" >/dev/null 2>&1; then
  echo "format: $clang_format not found; install Debian's clang-format" \
       "(deploy/install_deps.sh --tests does)" >&2
  exit 1
fi
cd "$root" || exit 1
if [[ ! -f .clang-format ]]; then
  echo "format: no .clang-format in $root" >&2; exit 1
fi
mapfile -t files < <(find "${DIRS[@]}" -type f \( -name '*.h' -o -name '*.cc' -o -name '*.cu' \) \
                       -not -path 'bench/pslite/*' 2>/dev/null | LC_ALL=C sort)
if [[ ${#files[@]} -eq 0 ]]; then
  echo "format: no sources found under $root" >&2; exit 1
fi
if [[ $check -eq 0 ]]; then
  "$clang_format" -i --style=file "${files[@]}"
  echo "format: ${#files[@]} files formatted"
  exit 0
fi
# One clang-format for all files (a process per file takes minutes on 2
# cores); its warnings name each file that would change.
mapfile -t bad < <("$clang_format" --style=file --dry-run "${files[@]}" 2>&1 |
                   sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: warning:.*/\1/p' | LC_ALL=C sort -u)
if [[ ${#bad[@]} -gt 0 ]]; then
  echo "format: ${#bad[@]} of ${#files[@]} files are not formatted with .clang-format:"
  printf '  %s\n' "${bad[@]}"
  echo "fix: tools/dev/format.sh   (or: clang-format -i --style=file FILE)"
  exit 1
fi
echo "format: all ${#files[@]} files formatted"

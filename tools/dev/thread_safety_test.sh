#!/usr/bin/env bash
# Checks the lock annotations (ABSL_GUARDED_BY, ABSL_EXCLUSIVE_LOCKS_REQUIRED, ...)
# with clang's -Wthread-safety over every C++ source of the project: gcc, which
# builds everything else, ignores them (docs/BUILDING.md). A thread-safety warning,
# or a file clang cannot compile, fails the test.
#
# As a Bazel test (//tools/dev:thread_safety_test, part of `bazel test //...`)
# it reads the sources from the workspace it was built from and the generated
# *.pb.h from its runfiles; it is tagged "external" so that Bazel reruns it
# every time instead of caching a result for sources it does not track.
# By hand, after `bazel build //proto:all`:  tools/dev/thread_safety_test.sh
#
# Options: --root DIR (the sources; default: the workspace holding this script),
#          --gen DIR (holds proto/*.pb.h; default: runfiles, else DIR/bazel-bin),
#          --cuda_include DIR (CUDA headers; files that include CUDA headers are
#          skipped without it), --jobs N (parallel clang runs; default: nproc).
# Env: CLANGXX (default clang++), THREAD_SAFETY_FLAGS (added to clang's flags).
#
# Every .cc under the directories below is compiled with -fsyntax-only; the
# headers are checked through the .cc files that include them. Third-party
# headers and the generated protos come from a precompiled header (prelude.h
# below), which more than halves the time; a source that #defines something
# those headers read must not rely on its own #define order.
set -uo pipefail

DIRS=(common rpc membership data model server worker coordinator serve tools deploy tests bench)

# Warnings known today, each "path|extended regex of the warning text". Remove
# an entry once its code is fixed; the test says when one no longer occurs.
ALLOWED=()

self="$(readlink -f "${BASH_SOURCE[0]}")"
root="$(cd "$(dirname "$self")/../.." && pwd)"
gen=""
cuda_include=""
jobs="$(nproc 2>/dev/null || echo 2)"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --root) root="$2"; shift 2 ;;
    --root=*) root="${1#*=}"; shift ;;
    --gen) gen="$2"; shift 2 ;;
    --gen=*) gen="${1#*=}"; shift ;;
    --cuda_include) cuda_include="$2"; shift 2 ;;
    --cuda_include=*) cuda_include="${1#*=}"; shift ;;
    --jobs) jobs="$2"; shift 2 ;;
    --jobs=*) jobs="${1#*=}"; shift ;;
    *) echo "thread_safety_test: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [[ -z "$gen" ]]; then
  if [[ -n "${TEST_SRCDIR:-}" ]]; then
    gen="$TEST_SRCDIR/${TEST_WORKSPACE:-downpour}"
  else
    gen="$root/bazel-bin"
  fi
fi
if [[ ! -f "$root/WORKSPACE" ]]; then
  echo "thread_safety_test: no WORKSPACE in $root" >&2; exit 1
fi
protos=("$gen"/proto/*.pb.h)
if [[ ! -f "${protos[0]}" ]]; then
  echo "thread_safety_test: no generated proto/*.pb.h under $gen (run: bazel build //proto:all)" >&2
  exit 1
fi
clangxx="${CLANGXX:-clang++}"
if ! command -v "$clangxx" >/dev/null 2>&1; then
  echo "thread_safety_test: $clangxx not found; install clang (deploy/install_deps.sh does)" >&2
  exit 1
fi

work="$(mktemp -d "${TEST_TMPDIR:-/tmp}/thread_safety.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cd "$root"

# Flags as the Bazel build has them (pkg-config defines; openblas's include dir),
# sources against the workspace root, generated headers against $gen.
flags=(-std=c++17 -DNDEBUG -I"$root" -I"$gen"
       $(pkg-config --cflags spdlog grpc++ protobuf gtest openblas)
       -Wno-everything -Wthread-safety -Wthread-safety-beta ${THREAD_SAFETY_FLAGS:-})
[[ -n "$cuda_include" ]] && flags+=(-isystem "$cuda_include")

# Without CUDA headers: the files that include them, directly or through our
# headers (to a fixed point), are skipped.
: >"$work/needs_cuda"
if [[ -z "$cuda_include" ]]; then
  pattern='#include <(cuda|cublas)[a-z_0-9]*\.h>'
  while :; do
    grep -rlE "$pattern" "${DIRS[@]}" --include='*.h' --include='*.cc' 2>/dev/null |
      LC_ALL=C sort >"$work/needs_cuda.new"
    cmp -s "$work/needs_cuda" "$work/needs_cuda.new" && break
    mv "$work/needs_cuda.new" "$work/needs_cuda"
    pattern="#include (<(cuda|cublas)[a-z_0-9]*\.h>|\"($(sed 's/[.]/\\./g' "$work/needs_cuda" | paste -sd'|'))\")"
  done
fi
# The sources: every .cc (not the nvcc-only .cu).
: >"$work/files"
skipped=()
peers=()
while IFS= read -r f; do
  if [[ "$f" == bench/pslite/* ]]; then
    # Built against a ps-lite snapshot by bench/pslite/run.sh, not by Bazel.
    peers+=("$f")
  elif grep -qxF "$f" "$work/needs_cuda"; then
    skipped+=("$f")
  else
    echo "$f" >>"$work/files"
  fi
done < <(find "${DIRS[@]}" -name '*.cc' -type f 2>/dev/null | LC_ALL=C sort)
count=$(wc -l <"$work/files")
if [[ $count -eq 0 ]]; then
  echo "thread_safety_test: no sources found under $root" >&2; exit 1
fi

{
  for h in algorithm atomic chrono cmath cstdint filesystem fstream functional map \
           memory random string thread vector; do
    echo "#include <$h>"
  done
  for h in absl/status/statusor.h absl/strings/str_cat.h absl/strings/str_format.h \
           absl/synchronization/mutex.h absl/time/time.h google/protobuf/message.h \
           grpcpp/grpcpp.h gmock/gmock.h gtest/gtest.h spdlog/spdlog.h yaml-cpp/yaml.h \
           benchmark/benchmark.h; do
    echo "#include \"$h\""
  done
  for p in "${protos[@]}"; do echo "#include \"proto/$(basename "$p")\""; done
} >"$work/prelude.h"
pch=()
if "$clangxx" "${flags[@]}" -x c++-header -fpch-instantiate-templates \
    "$work/prelude.h" -o "$work/prelude.pch" 2>"$work/pch.err"; then
  pch=(-include-pch "$work/prelude.pch")
else
  echo "thread_safety_test: no precompiled header (slower):"
  head -5 "$work/pch.err"
fi

# One clang per file, $jobs at a time; each leaves out/FILE.out, and
# out/FILE.failed when clang itself failed (a compile error: as bad as a warning).
mkdir -p "$work/out"
{
  echo '#!/usr/bin/env bash'
  declare -p clangxx work flags pch
  echo 'out="$work/out/${1//\//_}"'
  echo '"$clangxx" "${flags[@]}" "${pch[@]}" -fsyntax-only "$1" >"$out.out" 2>&1 || touch "$out.failed"'
} >"$work/check_one.sh"
chmod +x "$work/check_one.sh"
tr '\n' '\0' <"$work/files" | xargs -0 -P "$jobs" -n 1 "$work/check_one.sh"

status=0
failed=$(find "$work/out" -name '*.failed' | wc -l)
if [[ $failed -gt 0 ]]; then
  echo "thread_safety_test: clang could not compile $failed file(s):"
  for f in "$work"/out/*.failed; do
    grep -E 'error:' "${f%.failed}.out" | head -5
  done
  status=1
fi
cat "$work"/out/*.out | grep -E '^[^ ]+:[0-9]+:[0-9]+: warning: .*\[-Wthread-safety' |
  LC_ALL=C sort -u >"$work/warnings"
: >"$work/new"
: >"$work/allowed"
while IFS= read -r w; do
  ok=0
  for a in "${ALLOWED[@]}"; do
    if [[ "$w" == "${a%%|*}:"* ]] && grep -qE -- "${a#*|}" <<<"$w"; then ok=1; fi
  done
  if [[ $ok -eq 1 ]]; then echo "$w" >>"$work/allowed"; else echo "$w" >>"$work/new"; fi
done <"$work/warnings"
for a in "${ALLOWED[@]}"; do
  if ! grep -F -- "${a%%|*}:" "$work/allowed" | grep -qE -- "${a#*|}"; then
    echo "thread_safety_test: allowed warning no longer occurs; remove it from ALLOWED in tools/dev/thread_safety_test.sh: $a"
  fi
done

echo "thread_safety_test: $count files checked with -Wthread-safety -Wthread-safety-beta${THREAD_SAFETY_FLAGS:+ $THREAD_SAFETY_FLAGS}${pch:+ (precompiled prelude)}"
for f in "${skipped[@]}"; do echo "  skipped (needs CUDA headers): $f"; done
for f in "${peers[@]}"; do echo "  skipped (a peer's harness, needs ps-lite): $f"; done
if [[ -s "$work/allowed" ]]; then
  echo "allowed for now (see ALLOWED):"
  sed 's/^/  /' "$work/allowed"
fi
if [[ -s "$work/new" ]]; then
  echo "thread-safety warnings (fix the code or its annotations):"
  cat "$work/new"
  # The context clang printed with each warning.
  for f in "$work"/out/*.out; do
    grep -qFf "$work/new" "$f" && grep -A3 -Ff "$work/new" "$f" | grep -v '^--$' | head -40
  done
  status=1
fi
[[ $status -eq 0 ]] && echo "PASS" || echo "FAIL"
exit $status

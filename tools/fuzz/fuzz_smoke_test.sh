#!/usr/bin/env bash
# CI's bounded fuzzing: builds every target of tools/fuzz (build.sh) and runs
# each for FUZZ_SMOKE_SECONDS (default 20) from its checked-in seed corpus;
# any crash, sanitizer report, broken invariant, out-of-memory or timeout
# fails the test, and its log and input are printed.
# Skips (exit 0, "SKIPPED") only when clang's fuzzer runtime is missing
# (Debian: libclang-rt-14-dev; deploy/install_deps.sh installs it).
#
# As //tools/fuzz:fuzz_smoke_test it reads the sources from the workspace it
# was built from and the generated protos from its runfiles; tagged
# "external", so Bazel runs it every time. Long runs: tools/fuzz/run.sh.
set -uo pipefail

self="$(readlink -f "${BASH_SOURCE[0]}")"
here="$(dirname "$self")"
seconds="${FUZZ_SMOKE_SECONDS:-20}"
work="$(mktemp -d "${TEST_TMPDIR:-/tmp}/fuzz_smoke.XXXXXX")"
trap 'rm -rf "$work"' EXIT

start=$SECONDS
"$here/build.sh" --out "$work" --jobs "$(nproc 2>/dev/null || echo 2)"
built=$?
if [[ $built -eq 3 ]]; then
  echo "fuzz_smoke_test: SKIPPED: clang's libFuzzer runtime is missing (apt-get install libclang-rt-14-dev)"
  exit 0
fi
if [[ $built -ne 0 ]]; then
  echo "fuzz_smoke_test: FAIL: the fuzz targets do not build"
  exit 1
fi
echo "fuzz_smoke_test: built in $((SECONDS - start))s"

status=0
for bin in "$work"/*_fuzzer; do
  t="$(basename "$bin")"
  mkdir -p "$work/corpus/$t" "$work/crashes/$t"
  cp "$here/corpus/$t"/* "$work/corpus/$t"/
  "$bin" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 -artifact_prefix="$work/crashes/$t/" \
    "$work/corpus/$t" >"$work/$t.log" 2>&1
  rc=$?
  runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$t.log")"
  cov="$(grep -E '^#[0-9]+' "$work/$t.log" | tail -1 | grep -oE 'cov: [0-9]+ ft: [0-9]+')"
  if [[ $rc -ne 0 ]]; then
    echo "fuzz_smoke_test: $t FAILED (exit $rc) after ${runs:-?} runs:"
    grep -vE '^#[0-9]+|Uses: ' "$work/$t.log" | tail -40
    for f in "$work/crashes/$t"/*; do
      [[ -f "$f" ]] && echo "input ($(basename "$f")), base64: $(base64 -w0 "$f")"
    done
    status=1
  else
    echo "fuzz_smoke_test: $t: ${runs:-?} runs in ${seconds}s, $cov, no crash"
  fi
done
echo "fuzz_smoke_test: $((SECONDS - start))s in all"
[[ $status -eq 0 ]] && echo "PASS" || echo "FAIL"
exit $status

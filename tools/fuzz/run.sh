#!/usr/bin/env bash
# Runs the libFuzzer targets of tools/fuzz, one after another, each on one
# core, for a fixed time: the long local runs that docs/FUZZING.md reports.
#
# Usage: tools/fuzz/run.sh [--seconds N] [--out DIR] [target...]
#   --seconds: per target (default 600)
#   --out:     work folder (default ROOT/.fuzz-build): the binaries, a
#              growing corpus per target (corpus/<target>, started from the
#              checked-in seeds in tools/fuzz/corpus/<target>), crash inputs
#              in crashes/<target>/ and each run's log in logs/<target>.log
#   targets:   config_fuzzer, ps_fuzzer, coordinator_fuzzer, reader_fuzzer
#              (default: all)
# Extra libFuzzer flags: FUZZ_FLAGS (e.g. "-max_len=8192 -dict=...").
# Prints, per target: runs, execs/s, coverage (cov: edges, ft: features),
# corpus size and crashes. Exit 0 when no target crashed, 1 otherwise, 3
# when clang's fuzzer runtime is missing (build.sh).
#
# Reproduce a crash: .fuzz-build/ps_fuzzer .fuzz-build/crashes/ps_fuzzer/crash-...
set -uo pipefail

self="$(readlink -f "${BASH_SOURCE[0]}")"
here="$(dirname "$self")"
root="$(cd "$here/../.." && pwd)"
seconds=600
out="$root/.fuzz-build"
build_args=()
targets=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --seconds=*) seconds="${1#*=}"; shift ;;
    --out) out="$2"; shift 2 ;;
    --out=*) out="${1#*=}"; shift ;;
    --gen|--jobs) build_args+=("$1" "$2"); shift 2 ;;
    --gen=*|--jobs=*) build_args+=("$1"); shift ;;
    -*) echo "fuzz run: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if [[ ${#targets[@]} -eq 0 ]]; then
  for f in "$here"/*_fuzzer.cc; do targets+=("$(basename "$f" .cc)"); done
fi

"$here/build.sh" --out "$out" "${build_args[@]}" "${targets[@]}"
built=$?
[[ $built -eq 0 ]] || exit $built

status=0
summary=()
for t in "${targets[@]}"; do
  mkdir -p "$out/corpus/$t" "$out/crashes/$t" "$out/logs"
  cp -n "$here/corpus/$t"/* "$out/corpus/$t"/ 2>/dev/null || true
  log="$out/logs/$t.log"
  echo "fuzz run: $t for ${seconds}s (log: $log)"
  # -rss_limit_mb / -malloc_limit_mb: a single input that makes the code
  # allocate over 2 GB is a finding (memory must stay bounded), as is one
  # slower than -timeout.
  "$out/$t" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 -artifact_prefix="$out/crashes/$t/" \
    ${FUZZ_FLAGS:-} "$out/corpus/$t" >"$log" 2>&1
  rc=$?
  last="$(grep -E '^#[0-9]+' "$log" | tail -1)"
  runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")"
  speed="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")"
  cov="$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[0-9]+[a-zA-Z]*' <<<"$last")"
  crashes=$(find "$out/crashes/$t" -type f | wc -l)
  line="$t: ${runs:-?} runs in ${seconds}s (${speed:-?} exec/s), ${cov:-no coverage line}, crash files: $crashes"
  if [[ $rc -ne 0 ]]; then
    line+=" -- FAILED (exit $rc):"
    status=1
    grep -E 'SUMMARY|invariant broken|ERROR: libFuzzer' "$log" | head -3 | sed 's/^/    /' >&2
  fi
  summary+=("$line")
done
echo "fuzz run summary:"
printf '  %s\n' "${summary[@]}"
exit $status

#!/usr/bin/env bash
# Vowpal Wabbit on a Criteo-format log (gen_criteo's, or Criteo's own): the
# single-machine baseline for Downpour's sparse logistic regression.
#
#   bench/criteo/vw_compare.sh [--work DIR] [--bits 24] TRAIN TEST [VW OPTIONS]
#
# Converts TRAIN and TEST to VW text with the features the Downpour Criteo
# reader makes (bench/criteo/vw_tools.py: "I3_5", "C7_68fd1e64", value 1, VW's
# own bias; kept in DIR and reused while newer than their source), trains
#   vw -d train.vw --loss_function logistic -b BITS [VW OPTIONS] -f model
# (VW OPTIONS default: --ftrl --ftrl_alpha 0.1 --ftrl_beta 1 --l1 0 --l2 0;
# one pass unless they say --passes, which this adds -c -k --holdout_off to),
# predicts TEST with -t -i model -p preds --link logistic, and prints the
# command lines, "vw_auc <value>" (exact, ties half), the test log loss and
# "vw_examples_per_s" (train rows x passes / wall seconds of the training
# command, text parsing included).
# The vw binary: $VW, default /work/vw-build/build/vowpalwabbit/cli/vw (build
# it with /work/shared/peers/vw/build.sh). Needs /usr/bin/python3 with numpy.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
vw="${VW:-/work/vw-build/build/vowpalwabbit/cli/vw}"
work=""
bits=24
while [ $# -gt 0 ]; do
  case "$1" in
    --work) work="$2"; shift 2 ;;
    --bits) bits="$2"; shift 2 ;;
    *) break ;;
  esac
done
if [ $# -lt 2 ]; then
  echo "usage: $0 [--work DIR] [--bits 24] TRAIN TEST [VW OPTIONS]" >&2
  exit 2
fi
train="$1"; test="$2"; shift 2
opts=("$@")
[ ${#opts[@]} -gt 0 ] ||
  opts=(--ftrl --ftrl_alpha 0.1 --ftrl_beta 1 --l1 0 --l2 0)
[ -x "$vw" ] || { echo "$0: no vw binary at $vw (set VW=...)" >&2; exit 2; }
[ -n "$work" ] || work="$(mktemp -d /tmp/vw-criteo-XXXXXX)"
mkdir -p "$work"

# to_vw SRC DST: converts unless DST is newer than SRC.
to_vw() {
  if [ ! "$2" -nt "$1" ]; then
    local t0=$(date +%s.%N)
    /usr/bin/python3 "$here/vw_tools.py" convert "$1" "$2.tmp"
    mv "$2.tmp" "$2"
    echo "converted $1 -> $2 in $(awk "BEGIN{print $(date +%s.%N) - $t0}") s"
  fi
}
to_vw "$train" "$work/train.vw"
to_vw "$test" "$work/test.vw"

extra=()
passes=1
for ((k = 0; k < ${#opts[@]}; k++)); do
  case "${opts[k]}" in
    --passes) passes="${opts[k + 1]:-1}"; extra=(-c -k --holdout_off) ;;
    --passes=*) passes="${opts[k]#--passes=}"; extra=(-c -k --holdout_off) ;;
  esac
done
train_cmd=("$vw" -d "$work/train.vw" --loss_function logistic -b "$bits"
  "${opts[@]}" "${extra[@]}" -f "$work/model" --quiet)
test_cmd=("$vw" -t -i "$work/model" -d "$work/test.vw" -p "$work/preds"
  --link logistic --quiet)
echo "vw $("$vw" --version 2>/dev/null | head -n 1) bits $bits"
echo "train: ${train_cmd[*]}"
t0=$(date +%s.%N)
"${train_cmd[@]}"
t1=$(date +%s.%N)
echo "test: ${test_cmd[*]}"
"${test_cmd[@]}"
rows=$(wc -l < "$train")
secs=$(awk "BEGIN{print $t1 - $t0}")
/usr/bin/python3 "$here/vw_tools.py" auc "$test" "$work/preds"
printf 'vw_train_rows %d passes %d vw_train_seconds %.2f vw_examples_per_s %.0f\n' \
  "$rows" "$passes" "$secs" "$(awk "BEGIN{print $rows * $passes / $secs}")"

#!/usr/bin/env bash
# One machine, one run: sparse_linear on a generated click log with 1 ps and 2
# workers (bench/criteo/stream_bench.sh, deploy/configs/criteo_stream.yaml)
# against one Vowpal Wabbit process on the same files with the same features
# and FTRL settings, one pass (bench/criteo/vw_compare.sh). Prints both rates
# and test AUCs and the ratio of the rates.
#
#   VW=/path/to/vw bench/criteo/vs_vw.sh [--bytes 400M] [--work DIR]
#                                         [--set KEY=VALUE ...]
#
# Default: training.fetch overlap (docs/SPARSE.md, "Overlap"); --set
# training.fetch=after_push for the waiting worker. VW's rate includes its own
# text parsing of the converted file; Downpour's includes parsing the Criteo
# text. The conversion to VW text is not timed.
set -euo pipefail
cd "$(dirname "$0")/../.."
bytes=400M work=/tmp/downpour-criteo sets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --bytes) bytes=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --set) sets+=(--set "$2"); shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "vs_vw.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
downpour=$(bench/criteo/stream_bench.sh --bytes "$bytes" --work "$work" \
  --set "cluster.ps=[127.0.0.1:0]" --set training.fetch=overlap \
  ${sets[@]+"${sets[@]}"})
echo "$downpour"
vw=$(bench/criteo/vw_compare.sh --work "$work/vw-$bytes" "$work/train-$bytes.txt" \
  "$work/test.txt")
echo "$vw"
rate=$(echo "$downpour" | awk '/examples_per_s/ {print $4}')
auc=$(echo "$downpour" | awk '/examples_per_s/ {print $6}')
vw_rate=$(echo "$vw" | awk '/vw_examples_per_s/ {print $NF}')
vw_auc=$(echo "$vw" | awk '/^vw_auc/ {print $2}')
printf 'downpour_examples_per_s %s auc %s | vw_examples_per_s %s auc %s | ratio %.2f\n' \
  "$rate" "$auc" "$vw_rate" "$vw_auc" "$(awk "BEGIN{print $rate / $vw_rate}")"

#!/usr/bin/env bash
# Streamed training on a generated Criteo-format log: a worker's memory against
# the log's size, the time the training thread waited for the reader, the
# rate, and the test AUC beside the generator's Bayes AUC.
#
#   bench/criteo/stream_bench.sh [--bytes 400M] [--work DIR] [--workers 2]
#                                [--set KEY=VALUE ...]
#
# Generates DIR/train-<bytes>.txt (seed 1) and DIR/test.txt (100,000 rows)
# unless they are there, trains deploy/configs/criteo_stream.yaml on them
# (1 epoch, 2 ps) with the launcher, samples every daemon's resident memory
# (VmRSS, and the kernel's peak VmHWM) from /proc twice a second, and prints:
#   input_bytes rows bayes_auc | wall_s examples_per_s auc logloss |
#   worker_peak_rss_mb (the largest of the workers) ps_peak_rss_mb |
#   wait_data_pct (the training thread's share of time waiting for the reader)
# Run it for two sizes to see that a worker's memory does not follow the
# input: `--bytes 400M` and `--bytes 4G` (docs/BENCHMARKS.md, "Streaming").
set -euo pipefail
cd "$(dirname "$0")/../.."
bytes=400M work=/tmp/downpour-criteo workers=2 sets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --bytes) bytes=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --set) sets+=(--set "$2"); shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "stream_bench.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
bazel build //bench/criteo:gen_criteo //deploy:launcher //worker:ps_worker \
  //server:ps_server //coordinator:coordinator >/dev/null 2>&1 ||
  bazel build //bench/criteo:gen_criteo //deploy:launcher
mkdir -p "$work"
train=$work/train-$bytes.txt test=$work/test.txt
if [ ! -s "$train" ] || [ ! -s "$test" ]; then
  bazel-bin/bench/criteo/gen_criteo --out "$train" --bytes "$bytes" \
    --test_out "$test" --test_rows 100000 --seed 1 | tee "$work/gen-$bytes.txt"
fi
bayes=$(awk '/^bayes_auc/ {print $2}' "$work/gen-$bytes.txt" 2>/dev/null || echo "?")
rows=$(awk '/^train rows/ {print $3}' "$work/gen-$bytes.txt" 2>/dev/null || echo "?")
ws=$(for i in $(seq "$workers"); do printf '127.0.0.1:0,'; done)
run=$work/run-$bytes
rm -rf "$run"
start=$(date +%s.%N)
bazel-bin/deploy/launcher --config deploy/configs/criteo_stream.yaml --run_dir "$run" \
  --set cluster.coordinator=127.0.0.1:0 --set "cluster.ps=[127.0.0.1:0,127.0.0.1:0]" \
  --set "cluster.workers=[${ws%,}]" --set "data.path=$train" --set "data.test_path=$test" \
  --set training.eval_every_steps=0 ${sets[@]+"${sets[@]}"} >"$work/launcher-$bytes.log" 2>&1 &
launcher=$!
declare -A peak
while kill -0 "$launcher" 2>/dev/null; do
  if [ -f "$run/launcher.pids" ]; then
    while read -r pid _ name; do
      hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
      [ -n "$hwm" ] || continue
      role=${name%% *}
      [ "${peak[$role]:-0}" -ge "$hwm" ] || peak[$role]=$hwm
    done <"$run/launcher.pids"
  fi
  sleep 0.5
done
wait "$launcher" || { tail -20 "$work/launcher-$bytes.log"; exit 1; }
wall=$(echo "$(date +%s.%N) - $start" | bc)
summary=$run/summary.json
figure() { /usr/bin/python3 -c "import json,sys; s=json.load(open('$summary')); print($1)"; }
wait_data=$(grep -ho 'wait data [0-9.]*%' "$run"/logs/worker-*.log | tail -n "$workers" |
  awk '{gsub("%","",$3); if ($3 > m) m = $3} END {print m + 0}')
printf 'input_bytes %s rows %s bayes_auc %s\n' "$(stat -c %s "$train")" "$rows" "$bayes"
printf 'wall_s %.1f examples_per_s %.0f auc %s logloss %s examples_per_epoch %s\n' "$wall" \
  "$(figure 's["examples_per_sec"]')" "$(figure 's["metrics"]["auc"]')" \
  "$(figure 's["metrics"]["logloss"]')" "$(figure 's.get("examples_per_epoch")')"
printf 'worker_peak_rss_mb %.1f ps_peak_rss_mb %.1f wait_data_pct %s\n' \
  "$(echo "${peak[worker]:-0} / 1024" | bc -l)" "$(echo "${peak[ps]:-0} / 1024" | bc -l)" "$wait_data"

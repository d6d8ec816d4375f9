#!/bin/bash
# The second-fault check of docs/OPERATIONS.md ("A second fault"): runs the
# replicated quick start with the launcher, kill -9s the ps serving shard 1
# once training is under way and every shard is backed up, then, GAP seconds
# later, kill -9s whichever daemon serves shard 1 then (its successor). The
# launcher restarts both, as it would any dead daemon. Prints, per run, what
# the job's summary.json says was lost and how long each shard waited for a
# new in-sync backup; and a last line "N runs: M lost nothing".
#
#   bench/double_kill.sh [--gap 2.5] [--runs 10] [--config FILE] [--out DIR]
#
# The second kill's target is shard 1's backup as the coordinator names it
# before the first kill (psctl status), so a short GAP really is short: with
# --gap 0.3 the backup dies before or just as it takes over, and shard 1 comes
# back from its checkpoint, losing what was acknowledged since.
#
# Build first (bazel build //deploy:launcher //tools:psctl //server:ps_server
# //worker:ps_worker //coordinator). The config's fixed ports (7000-7202 for
# the shipped one) must be free; nothing leaves 127.0.0.1.
set -euo pipefail

cd "$(dirname "$0")/.."
GAP=2.5
RUNS=10
CONFIG=deploy/configs/mnist_replicated.yaml
OUT=/tmp/downpour-double-kill
while [ $# -gt 0 ]; do
  case "$1" in
    --gap) GAP=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --config) CONFIG=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "double_kill.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
BIN=bazel-bin
for b in deploy/launcher tools/psctl server/ps_server worker/ps_worker coordinator/coordinator; do
  [ -x "$BIN/$b" ] || { echo "double_kill.sh: $BIN/$b is missing: build it first" >&2; exit 2; }
done
COORDINATOR=$(python3 -c '
import sys, yaml
print(yaml.safe_load(open(sys.argv[1]))["cluster"]["coordinator"])' "$CONFIG")

# The launcher's name for the daemon listening at address $2 ("ps 1",
# "standby 0"): from the config's lists; a spare listens at its ps address.
slot_of() {
  python3 -c '
import sys, yaml
c = yaml.safe_load(open(sys.argv[1]))["cluster"]
for role, key in (("ps", "ps"), ("standby", "standby_ps")):
  for i, a in enumerate(c.get(key) or []):
    if a == sys.argv[2]: print(role, i)' "$CONFIG" "$1"
}
pid_of() {  # the launcher's pid file: "pid start_time name"
  awk -v n="$2" '{nm=$3; for(i=4;i<=NF;i++) nm=nm" "$i; if (nm==n) print $1}' \
    "$1/launcher.pids" 2>/dev/null | tail -1
}
status_json() {
  "$BIN/tools/psctl" status --json --coordinator "$COORDINATOR" 2>/dev/null || true
}
# `psctl status` without --json asks only the coordinator (fast).
status_table() {
  "$BIN/tools/psctl" status --coordinator "$COORDINATOR" 2>/dev/null || true
}
shard1_address() {
  status_table | awk '$1 == "ps" && $2 == 1 {print $3}'
}
shard1_backup() {  # "  shard 1: standby 1 at 127.0.0.1:7202, in sync; ..."
  status_table | awk '$1 == "shard" && $2 == "1:" && $3 == "standby" {sub(",", "", $6); print $6}'
}
ready() {  # every worker past step 300 and every shard in sync with a backup
  status_table | awk '
    $1 == "worker" { workers++; if ($6 + 0 >= 300) stepped++ }
    $1 == "shard" && /in sync/ { synced++ }
    $1 == "shard" && $2 ~ /^[0-9]+:$/ { shards++ }
    END { print (workers > 0 && stepped == workers && shards > 0 && synced == shards) ? "yes" : "no" }'
}

clean=0
for run in $(seq 1 "$RUNS"); do
  dir="$OUT/run-$run"
  rm -rf "$dir"; mkdir -p "$dir"
  "$BIN/deploy/launcher" --config "$CONFIG" --run_dir "$dir" > "$dir/launcher.out" 2>&1 &
  launcher=$!
  for _ in $(seq 1 600); do [ "$(ready)" = yes ] && break; sleep 0.2; done
  first=$(shard1_address)
  second=$(shard1_backup)
  first_pid=$(pid_of "$dir" "$(slot_of "$first")")
  second_pid=$(pid_of "$dir" "$(slot_of "$second")")
  if [ -z "$first_pid" ] || [ -z "$second_pid" ]; then
    echo "run $run: harness: the cluster never got ready (shard 1 at '$first', backup '$second'); see $dir"
    kill "$launcher" 2>/dev/null || true; wait "$launcher" || true
    continue
  fi
  t0=$(date +%s.%N)
  kill -9 "$first_pid"
  python3 -c "import time; time.sleep(max(0.0, $t0 + $GAP - time.time()))"
  t1=$(date +%s.%N)
  kill -9 "$second_pid" 2>/dev/null || true
  rc=0; wait "$launcher" || rc=$?
  python3 - "$dir/summary.json" "$run" "$rc" "$(python3 -c "print('%.2f s apart' % ($t1 - $t0))")" <<'PY' && clean=$((clean + 1)) || true
import json, sys
s = json.load(open(sys.argv[1]))
lost = s["acked_pushes_lost"]
hops = ["%s %s->%s lost %d%s backup after %s s" % (
          r["source"], r["from"], r["to"], r["acked_pushes_lost"],
          "" if r["loss_exact"] else "+",
          "%.2f" % r["seconds_to_backup"] if r["seconds_to_backup"] is not None else "never")
        for r in s["shard_recoveries"]]
unrep = ", ".join("shard %d %.1f s" % (r["shard"], r["unreplicated_s"]) for r in s["shard_replication"])
print("run %s: kills %s, launcher exit %s, outcome '%s', acked pushes lost %d%s, "
      "accuracy %.4f; %s; unreplicated: %s" % (
      sys.argv[2], sys.argv[4], sys.argv[3], s["outcome"], lost,
      "" if s["acked_loss_exact"] else " (at least)", s["accuracy"] or 0, "; ".join(hops), unrep))
sys.exit(0 if lost == 0 and s["outcome"] == "succeeded" else 1)
PY
done
echo "$RUNS runs: $clean lost nothing"

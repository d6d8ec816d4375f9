#!/bin/bash
# Issue 43's headline figure with real daemons: while WORKERS workers train
# sparse_linear (FTRL) on generated LIBSVM data, a new ps joins the job
# (ps_server --join, psctl add-ps) and half of the one ps's rows move to it.
# Prints the rows each shard held, the move's time, the examples/s the
# workers reported before the move, during it and after the switch (as ratios
# of the rate before, and the seconds after the switch until the rate was
# back to 90 %), whether any worker step failed, and the row updates the two
# shards hold against those the workers had acknowledged.
#
#   bench/move_under_load.sh [--features 12000000] [--examples 3000000]
#                            [--workers 4] [--epochs 12] [--ps 1] [--out DIR]
#
# Each example has 3 keys of 999 informative ones (its label depends on
# them) and 10 of --features keys drawn uniformly, so the table grows to about
# features x (1 - exp(-10 x examples / features)) rows (11 M for the
# defaults) in the first epoch. The move starts once the --ps shards hold 90 %
# of them; add-ps then evens the buckets over --ps + 1 shards (half of the one
# ps's with the default --ps 1).
# The rates come from the coordinator's metrics history (history.json, a
# sample a second). The row updates the workers had acknowledged (their final
# reports) are set against those the two shards' final checkpoints hold
# (bench/row_updates), which the joined ps writes when it is stopped after
# the job.
#
# Build first: bazel build -c opt //deploy:launcher //tools:psctl
# //server:ps_server //worker:ps_worker //coordinator //bench:row_updates
# (or without -c opt, slower). Nothing leaves 127.0.0.1; every port is ephemeral. Needs about
# 6 GB of memory and 0.6 GB of disk under --out for the defaults.
set -euo pipefail

cd "$(dirname "$0")/.."
FEATURES=12000000
EXAMPLES=3000000
WORKERS=4
EPOCHS=12
PS=1
OUT=/tmp/downpour-move-under-load
while [ $# -gt 0 ]; do
  case "$1" in
    --features) FEATURES=$2; shift 2 ;;
    --examples) EXAMPLES=$2; shift 2 ;;
    --workers) WORKERS=$2; shift 2 ;;
    --epochs) EPOCHS=$2; shift 2 ;;
    --ps) PS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "move_under_load.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
BIN=bazel-bin
for b in deploy/launcher tools/psctl server/ps_server worker/ps_worker coordinator/coordinator bench/row_updates; do
  [ -x "$BIN/$b" ] || { echo "move_under_load.sh: $BIN/$b is missing: build it first" >&2; exit 2; }
done
PY=/usr/bin/python3
mkdir -p "$OUT"

# The data: written once per size.
data="$OUT/data-$FEATURES-$EXAMPLES"
if [ ! -s "$data/test.svm" ]; then
  mkdir -p "$data"
  echo "writing $EXAMPLES training examples ($FEATURES keys) to $data"
  "$PY" - "$FEATURES" "$EXAMPLES" "$data" <<'PY'
import sys
import numpy as np
features, examples, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
rng = np.random.default_rng(43)
weights = rng.normal(size=999)
# Each key from its own range, so that an example's keys are distinct and
# ascending: 3 informative ones (1-999), 10 uniform ones above them.
span = features // 10
line = "%d" + " %d:1" * 13 + "\n"
def write(path, n):
    with open(path, "w") as f:
        for start in range(0, n, 200000):
            m = min(200000, n - start)
            head = rng.integers(0, 333, (m, 3)) + np.array([1, 334, 667])
            tail = rng.integers(0, span, (m, 10)) + 1000 + span * np.arange(10)
            score = weights[head - 1].sum(1) + rng.normal(scale=0.5, size=m)
            labels = np.where(score > 0, 1, -1)
            rows = np.concatenate([labels[:, None], head, tail], 1)
            f.write("".join(line % tuple(r) for r in rows.tolist()))
write(out + "/train.svm", examples)
write(out + "/test.svm", 20000)
PY
fi

run="$OUT/run"
rm -rf "$run"; mkdir -p "$run"
workers=$("$PY" -c "print(', '.join(['127.0.0.1:0'] * $WORKERS))")
servers=$("$PY" -c "print(', '.join(['127.0.0.1:0'] * $PS))")
cat > "$run/job.yaml" <<EOF
cluster:
  coordinator: 127.0.0.1:0
  ps: [$servers]
  workers: [$workers]
  replication: 1
model:
  task: binary
  type: sparse_linear
  sparse_buckets: 1024
optimizer:
  type: ftrl
  learning_rate: 0.1
training:
  batch_size: 512
  consistency: async
  epochs: $EPOCHS
  eval_every_steps: 0
data:
  source: libsvm
  classes: [-1, +1]
  stream: true
  path: $data/train.svm
  test_path: $data/test.svm
  shuffle_window: 10000
checkpoint:
  dir: $run/checkpoints
  interval_s: 600
EOF
"$BIN/deploy/launcher" --config "$run/job.yaml" --run_dir "$run/launch" \
  --progress_s 5 > "$run/launcher.out" 2>&1 &
launcher=$!
trap 'kill $launcher 2>/dev/null || true; [ -n "${joined:-}" ] && kill $joined 2>/dev/null || true' EXIT
for _ in $(seq 1 300); do [ -s "$run/launch/coordinator.port" ] && break; sleep 0.2; done
COORDINATOR="127.0.0.1:$(tr -d '[:space:]' < "$run/launch/coordinator.port")"

# The rows the ps hold now (the coordinator's view of their last reports).
rows_held() {
  "$BIN/tools/psctl" status --json --coordinator "$COORDINATOR" 2>/dev/null |
    "$PY" -c '
import json, sys
try:
    s = json.load(sys.stdin)
except ValueError:
    s = {}
print(sum(int(m["report"].get("sparse_rows", 0))
          for m in s.get("cluster", {}).get("members", [])
          if m["role"] == "ps" and m["alive"]))'
}
expected=$("$PY" -c "import math; print(int($FEATURES * (1 - math.exp(-10.0 * $EXAMPLES / $FEATURES)) * 0.9))")
echo "waiting for the ps to hold $expected rows (90 % of those expected)"
while kill -0 $launcher 2>/dev/null; do
  [ "$(rows_held)" -ge "$expected" ] && break
  sleep 1
done
if ! kill -0 $launcher 2>/dev/null; then
  echo "move_under_load.sh: the job ended before the ps held $expected rows:" >&2
  tail -5 "$run/launcher.out" >&2
  exit 1
fi
sleep 5  # the rate before the move

port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$BIN/server/ps_server" --config "$run/job.yaml" --coordinator "$COORDINATOR" \
  --join --listen "127.0.0.1:$port" > "$run/ps-joined.log" 2>&1 &
joined=$!
start=$(date +%s.%N)
rc=0
"$BIN/tools/psctl" add-ps "127.0.0.1:$port" --coordinator "$COORDINATOR" \
  > "$run/add-ps.out" 2>&1 || rc=$?
done_at=$(date +%s.%N)
"$BIN/tools/psctl" moves --coordinator "$COORDINATOR" > "$run/moves.txt" 2>&1 || true
launched=0; wait $launcher || launched=$?
# The joined ps is not the launcher's: stopped, it writes its final checkpoint.
kill -TERM $joined 2>/dev/null || true
wait $joined || true
trap - EXIT
"$BIN/bench/row_updates" --checkpoint_dir "$run/checkpoints" --shards $((PS + 1)) \
  > "$run/row_updates.txt" 2>&1 || true

"$PY" - "$run" "$start" "$done_at" "$rc" "$launched" <<'PY'
import json, sys
run, start, done_at = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
rc, launched = int(sys.argv[4]), int(sys.argv[5])
history = json.load(open(run + "/launch/history.json"))["samples"]
points, acked, rows = [], {}, {}
for s in history:
    t = float(s["unix_seconds"])
    examples = 0
    for m in s["members"]:
        r = m.get("report", {})
        if m["role"] == "worker":
            examples += int(r.get("examples", 0))
            if int(r.get("step", 0)) > 0 or r.get("finished"):
                acked[m["index"]] = int(r.get("sparse_row_updates", 0))
        elif m["role"] == "ps" and m.get("alive"):
            rows.setdefault(t, {})[m["index"]] = int(r.get("sparse_rows", 0))
    points.append((t, examples))
def rate(a, b):
    pts = [p for p in points if a <= p[0] <= b]
    if len(pts) < 2 or pts[-1][0] == pts[0][0]:
        return float("nan")
    return (pts[-1][1] - pts[0][1]) / (pts[-1][0] - pts[0][0])
def rows_at(t):
    times = [x for x in sorted(rows) if x <= t]
    return rows[times[-1]] if times else {}
add = open(run + "/add-ps.out").read().strip().splitlines()
print("psctl add-ps: exit %d after %.1f s: %s" % (rc, done_at - start, add[-1] if add else "(nothing)"))
end_rows = rows_at(points[-1][0])
print("rows per shard: before the move %s; at the job's end %s" % (
    rows_at(start), end_rows))
if len(end_rows) > 1:
    mean = sum(end_rows.values()) / len(end_rows)
    print("rows spread over the %d shards: %.3f %% (largest - smallest, over the mean)" % (
        len(end_rows), 100.0 * (max(end_rows.values()) - min(end_rows.values())) / mean))
before = rate(start - 5.5, start)
during = rate(start, done_at)
after = rate(done_at, done_at + 15)
print("examples/s: before %.0f, during the move %.0f (%.2fx), in the 15 s after it %.0f (%.2fx)" % (
    before, during, during / before, after, after / before))
back = None
for i, (t, e) in enumerate(points):
    if t < done_at:
        continue
    j = next((k for k in range(i + 1, len(points)) if points[k][0] >= t + 3), None)
    if j is None:
        break
    if (points[j][1] - e) / (points[j][0] - t) >= 0.9 * before:
        back = t - done_at
        break
print("back to 90 %% of the rate before (3 s windows): %s" % (
    "%.1f s after add-ps ended" % back if back is not None else "not before the job ended"))
summary = json.load(open(run + "/launch/summary.json"))
faults = "; ".join("%s %s, %s" % (f["daemon"], f["what"], f["action"]) for f in summary["faults"])
print("launcher: exit %d, outcome '%s', worker faults: %s; steps refused %d" % (
    launched, summary["outcome"], faults or "none", summary["refused_steps"]))
held = None
for line in open(run + "/row_updates.txt"):
    if line.startswith("total: "):
        held = int(line.split()[1])
print("row updates: acknowledged by the workers %d, held by the final checkpoints %s%s" % (
    sum(acked.values()), held if held is not None else "(unread: see row_updates.txt)",
    "" if held is None else ", lost %d" % max(0, sum(acked.values()) - held)))
PY
echo "logs, history and summary: $run"

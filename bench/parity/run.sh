#!/usr/bin/env bash
# The parity benchmark: Downpour against scikit-learn, liblinear and PyTorch on
# the same rows of real data sets. Not part of the test suite.
#
#   bench/parity/run.sh [NAME...] [--out DIR] [--seed 42] [--workers "1 4"]
#                       [--no-downpour] [--no-refs] [--torch_epochs 10]
#
# NAME: iris wine diabetes heart_scale fashion_mnist (default: all). For each:
#   1. deploy/fetch_data.sh NAME (skipped when the data is in place);
#   2. bench/parity/split.py: a fixed 80/20 split (seed --seed) into
#      DIR/NAME/split/{train,test}.{csv,libsvm} (fashion_mnist: its own files);
#   3. bench/parity/reference.py: scikit-learn and liblinear on those files
#      (fashion_mnist also bench/parity/torch_fashion.py, 1 thread);
#   4. Downpour: bazel-bin/deploy/launcher with deploy/configs/NAME.yaml on the
#      same files, once per worker count (--workers, default "1 4"), every daemon
#      on an ephemeral 127.0.0.1 port, run dir DIR/NAME/downpour_<W>w; the row
#      comes from its summary.json ("metrics", "seconds": the wall time).
# Every result is a JSON line in DIR/results.jsonl (DIR defaults to
# <repo>/run/parity); at the end one markdown table of them all is printed.
# Needs bench/parity/install_refs.sh's packages for 2-3, and a built launcher
# (bazel build //deploy:launcher //coordinator //server:ps_server
# //worker:ps_worker) for 4; without a launcher the Downpour rows are left out
# with a note. Environment: PYTHON (default /usr/bin/python3, where Debian's
# packages are), LAUNCHER (default bazel-bin/deploy/launcher),
# DOWNPOUR_TIMEOUT_S (per run, default 1800), PROGRESS_S (the launcher's
# --progress_s, default 3600: today's launcher refuses 0, so a period longer
# than the run keeps the progress lines out of the log).
set -euo pipefail

repo="$(cd "$(dirname "$0")/../.." && pwd)"
here="$repo/bench/parity"
all_names=(iris wine diabetes heart_scale fashion_mnist)
out="$repo/run/parity"
seed=42
workers_list="1 4"
do_downpour=1
do_refs=1
torch_epochs=10
names=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --workers) workers_list="$2"; shift 2 ;;
    --no-downpour) do_downpour=0; shift ;;
    --no-refs) do_refs=0; shift ;;
    --torch_epochs) torch_epochs="$2"; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    -*) echo "parity: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) case " ${all_names[*]} " in
         *" $1 "*) names+=("$1") ;;
         *) echo "parity: unknown data set '$1'; choose from ${all_names[*]}" >&2; exit 2 ;;
       esac
       shift ;;
  esac
done
[[ ${#names[@]} -gt 0 ]] || names=("${all_names[@]}")
cd "$repo"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
results="$out/results.jsonl"
: >"$results"

# Debian's interpreter: the packages install_refs.sh adds are for /usr/bin/python3,
# and a python3 earlier on PATH (pyenv, a venv) would not see them.
py="${PYTHON:-/usr/bin/python3}"
[[ -x "$py" ]] || py=python3
launcher="${LAUNCHER:-$repo/bazel-bin/deploy/launcher}"
timeout_s="${DOWNPOUR_TIMEOUT_S:-1800}"
progress_s="${PROGRESS_S:-3600}"
if [[ $do_refs -eq 1 ]]; then
  "$py" -c 'import numpy, sklearn' 2>/dev/null || {
    echo "parity: numpy/scikit-learn missing: run bench/parity/install_refs.sh" >&2; exit 1; }
fi
if [[ $do_downpour -eq 1 && ! -x "$launcher" ]]; then
  echo "parity: no launcher at $launcher (bazel build //deploy:launcher //coordinator" \
       "//server:ps_server //worker:ps_worker): the Downpour rows are left out" >&2
  do_downpour=0
fi

"$repo/deploy/fetch_data.sh" "${names[@]}"

# A JSON line for the table when a run produced nothing usable.
note_row() {  # dataset learner note
  "$py" -c 'import json, sys; print(json.dumps({"dataset": sys.argv[1], "learner": sys.argv[2],
    "metrics": {}, "seconds": None, "note": sys.argv[3]}))' "$1" "$2" "$3" >>"$results"
}

# Comma-separated list of N ephemeral addresses.
ephemeral() {
  local n="$1" list="" i
  for ((i = 0; i < n; i++)); do list+="${list:+, }127.0.0.1:0"; done
  echo "$list"
}

# Runs Downpour on NAME with W workers and appends its row.
downpour() {
  local name="$1" w="$2" train="$3" test="$4" nps=1
  local dir="$out/$name/downpour_${w}w"
  [[ "$name" == fashion_mnist ]] && nps=2  # 235k parameters: two shards, as in its config
  rm -rf "$dir"
  mkdir -p "$dir"
  local sets=(--set "data.path=$train"
              --set "cluster.workers=[$(ephemeral "$w")]"
              --set "cluster.ps=[$(ephemeral "$nps")]"
              --set "cluster.coordinator=127.0.0.1:0"
              --set "training.stop_at_target=false")  # every epoch, as the references
  [[ -n "$test" ]] && sets+=(--set "data.test_path=$test")
  echo "== $name: Downpour, $w worker(s) -> $dir"
  local rc=0
  timeout "$timeout_s" "$launcher" --config "deploy/configs/$name.yaml" --run_dir "$dir" \
    "${sets[@]}" --progress_s "$progress_s" >"$dir/launcher.log" 2>&1 || rc=$?
  if [[ ! -f "$dir/summary.json" ]]; then
    note_row "$name" "downpour_${w}w" "no summary.json (launcher exit $rc; see $dir/launcher.log)"
    tail -n 5 "$dir/launcher.log" >&2 || true
    return
  fi
  "$py" - "$dir/summary.json" "$name" "downpour_${w}w" "$rc" >>"$results" <<'EOF'
import json, sys
path, name, learner, rc = sys.argv[1:5]
s = json.load(open(path))
m = s.get("metrics")
if not m and s.get("accuracy") is not None:  # a launcher from before "metrics"
    m = {"accuracy": s["accuracy"]}
row = {"dataset": name, "learner": learner, "metrics": m or {},
       "seconds": s.get("seconds"), "task": s.get("task")}
notes = []
if rc != "0":
    notes.append(f"launcher exit {rc}")
if s.get("outcome") not in (None, "succeeded"):
    notes.append(f"outcome {s.get('outcome')}: {s.get('failure', '')}".strip(": "))
if notes:
    row["note"] = "; ".join(notes)
print(json.dumps(row))
EOF
}

for name in "${names[@]}"; do
  split_dir="$out/$name/split"
  if [[ "$name" == fashion_mnist ]]; then
    train="$repo/data/fashion_mnist"; test="$repo/data/fashion_mnist"; dp_test=""
  else
    echo "== $name: split"
    "$py" "$here/split.py" "$name" --out "$split_dir" --seed "$seed"
    ext=csv; [[ "$name" == heart_scale ]] && ext=libsvm
    train="$split_dir/train.$ext"; test="$split_dir/test.$ext"; dp_test="$test"
  fi
  if [[ $do_refs -eq 1 ]]; then
    echo "== $name: references"
    if ! "$py" "$here/reference.py" "$name" --train "$train" --test "$test" --seed "$seed" \
        | tee -a "$results"; then
      note_row "$name" references "reference.py failed (its error is above)"
    fi
    if [[ "$name" == fashion_mnist ]]; then
      if "$py" -c 'import torch' 2>/dev/null; then
        echo "== $name: PyTorch, 1 thread, $torch_epochs epochs"
        "$py" "$here/torch_fashion.py" --data "$train" --epochs "$torch_epochs" \
          --threads 1 2>&1 | tee "$out/$name/torch.log" | grep -v '^{' || true
        if tail -n 1 "$out/$name/torch.log" | grep -q '^{'; then
          tail -n 1 "$out/$name/torch.log" >>"$results"
        else
          note_row "$name" torch_mlp "torch_fashion.py failed: see $out/$name/torch.log"
        fi
      else
        note_row "$name" torch_mlp "python3-torch missing (bench/parity/install_refs.sh)"
      fi
    fi
  fi
  if [[ $do_downpour -eq 1 ]]; then
    for w in $workers_list; do
      downpour "$name" "$w" "$train" "$dp_test"
    done
  fi
done

echo
"$py" - "$results" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
cols = ["accuracy", "logloss", "auc", "rmse", "mae", "r2"]
used = [c for c in cols if any(c in (r.get("metrics") or {}) for r in rows)]
def cell(v, digits=4):
    return "" if v is None else f"{v:.{digits}f}"
def secs(v):
    return "" if v is None else f"{v:.2f}" if v < 10 else f"{v:.1f}"
print("| dataset | learner | " + " | ".join(used) + " | seconds | note |")
print("|" + "---|" * (len(used) + 4))
for r in rows:
    m = r.get("metrics") or {}
    print(f"| {r['dataset']} | {r['learner']} | "
          + " | ".join(cell(m.get(c)) for c in used)
          + f" | {secs(r.get('seconds'))} | {r.get('note', '')} |")
EOF
echo
echo "parity: rows in $results"

#!/usr/bin/env bash
# The parity benchmark: Downpour against scikit-learn, liblinear and PyTorch on
# the same rows of real data sets. Not part of the test suite.
#
#   bench/parity/run.sh [NAME...] [--out DIR] [--seed 42] [--workers "1 4"]
#                       [--no-downpour] [--no-refs] [--torch_epochs 10]
#
# NAME: iris wine diabetes heart_scale fashion_mnist (dense), heart_scale_sparse
# reuters_corn lending_club (sparse, below) (default: all). For each dense set:
#   1. deploy/fetch_data.sh NAME (skipped when the data is in place);
#   2. bench/parity/split.py: a fixed 80/20 split (seed --seed) into
#      DIR/NAME/split/{train,test}.{csv,libsvm} (fashion_mnist: its own files);
#   3. bench/parity/reference.py: scikit-learn and liblinear on those files
#      (fashion_mnist also bench/parity/torch_fashion.py, 1 thread);
#   4. Downpour: bazel-bin/deploy/launcher with deploy/configs/NAME.yaml on the
#      same files, once per worker count (--workers, default "1 4"), every daemon
#      on an ephemeral 127.0.0.1 port, run dir DIR/NAME/downpour_<W>w; the row
#      comes from its summary.json ("metrics", "seconds": the wall time).
# For each sparse set (issue 21, docs/BENCHMARKS.md "Sparse parity"):
#   1. deploy/fetch_data.sh (heart_scale for heart_scale_sparse);
#   2. bench/parity/sparse_split.py: one fixed split into DIR/NAME/split
#      (reuters_corn its own train/test files, the others a stratified 80/20
#      split, seed --seed), the rows as Downpour reads them plus LIBSVM files of
#      the keys Downpour computes from them (the hash re-done in Python), and
#      DIR/NAME/split/val/, a validation split of the training rows;
#   3. bench/parity/sparse_reference.py: liblinear -s 0 (L2) and -s 6 (L1) on
#      those keys, C = 1 and C tuned on the validation split;
#   4. Downpour sparse_linear with deploy/configs/NAME.yaml (FTRL) and with
#      Adagrad (the overrides in `adagrad_sets` below), fm (`fm_sets`) and
#      wide_deep (`wide_deep_sets`),
#      each at every worker
#      count, 2 ps, run dir DIR/NAME/downpour_<opt>_<W>w; the row's metrics are
#      the final model's, read from the ps checkpoints by
#      bench/parity/sparse_eval.py (with its rows and non-zero weights),
#      "seconds" the launcher's wall time.
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
all_names=(iris wine diabetes heart_scale fashion_mnist heart_scale_sparse reuters_corn lending_club)
sparse_names=" heart_scale_sparse reuters_corn lending_club "
# Adagrad rows of the sparse sets: deploy/configs/NAME.yaml holds the FTRL
# settings; these replace them (chosen on the validation split as FTRL's were,
# docs/BENCHMARKS.md "Sparse parity").
declare -A adagrad_sets=(
  [heart_scale_sparse]="optimizer.learning_rate=0.3 optimizer.weight_decay=0.1 training.epochs=3"
  [reuters_corn]="optimizer.learning_rate=1 optimizer.weight_decay=1 training.epochs=30"
  [lending_club]="optimizer.learning_rate=0.03 optimizer.weight_decay=0 training.epochs=3"
)
# fm rows (issue 22): model.type fm with the FTRL settings of
# deploy/configs/NAME.yaml for the weights and these for the embeddings
# (docs/SPARSE.md "Factorization machines"). Their metrics are the job's final
# evaluation (summary.json): sparse_eval.py reads table 0 only.
declare -A fm_sets=(
  [heart_scale_sparse]="fm.dim=8 fm.l2=100"
  [reuters_corn]="fm.dim=8 fm.learning_rate=0.01"
  [lending_club]="fm.dim=8 fm.l2=100"
)
# wide_deep rows (issue 22): model.type wide_deep, the same FTRL settings for
# the wide part, these for the deep part (docs/SPARSE.md "Wide & deep").
declare -A wide_deep_sets=(
  [heart_scale_sparse]="wide_deep.dim=8"
  [reuters_corn]="wide_deep.dim=8"
  [lending_club]="wide_deep.dim=8 training.epochs=5"
)
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

fetch=()
for name in "${names[@]}"; do
  case "$name" in
    heart_scale_sparse) fetch+=(heart_scale) ;;
    *) fetch+=("$name") ;;
  esac
done
"$repo/deploy/fetch_data.sh" "${fetch[@]}"

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

# Runs the launcher on deploy/configs/NAME.yaml into DIR with the --set
# arguments that follow, its exit status in launch_rc; returns 1, after a row
# for LEARNER saying why, when no summary.json came out.
launch() {  # name learner dir set-arguments...
  local name="$1" learner="$2" dir="$3"
  shift 3
  launch_rc=0
  timeout "$timeout_s" "$launcher" --config "deploy/configs/$name.yaml" --run_dir "$dir" \
    "$@" --progress_s "$progress_s" >"$dir/launcher.log" 2>&1 || launch_rc=$?
  if [[ ! -f "$dir/summary.json" ]]; then
    note_row "$name" "$learner" "no summary.json (launcher exit $launch_rc; see $dir/launcher.log)"
    tail -n 5 "$dir/launcher.log" >&2 || true
    return 1
  fi
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
  launch "$name" "downpour_${w}w" "$dir" "${sets[@]}" || return 0
  local rc="$launch_rc"
  "$py" "$here/downpour_row.py" dense "$dir/summary.json" "$name" "downpour_${w}w" "$rc" \
    >>"$results"
}

# Runs Downpour sparse_linear on NAME with optimizer OPT (ftrl: the config as
# is; adagrad: adagrad_sets) and W workers on 2 ps, and appends its row: the
# final model's metrics from the ps checkpoints (bench/parity/sparse_eval.py).
downpour_sparse() {
  local name="$1" opt="$2" w="$3" split="$4" ext="$5"
  local dir="$out/$name/downpour_${opt}_${w}w"
  rm -rf "$dir"
  mkdir -p "$dir"
  local sets=(--set "data.path=$split/train.$ext"
              --set "data.test_path=$split/test.$ext"
              --set "cluster.workers=[$(ephemeral "$w")]"
              --set "cluster.ps=[$(ephemeral 2)]"
              --set "cluster.coordinator=127.0.0.1:0"
              --set "training.stop_at_target=false")
  local kv
  if [[ "$opt" == adagrad ]]; then
    sets+=(--set optimizer.type=adagrad --set optimizer.l1=0 --set optimizer.l2=0)
    for kv in ${adagrad_sets[$name]}; do sets+=(--set "$kv"); done
  fi
  if [[ "$opt" == fm ]]; then
    sets+=(--set model.type=fm)
    for kv in ${fm_sets[$name]}; do sets+=(--set "$kv"); done
  fi
  if [[ "$opt" == wide_deep ]]; then
    sets+=(--set model.type=wide_deep)
    for kv in ${wide_deep_sets[$name]}; do sets+=(--set "$kv"); done
  fi
  local model=sparse_linear
  [[ $opt == fm || $opt == wide_deep ]] && model=$opt
  echo "== $name: Downpour $model, $opt, $w worker(s) -> $dir"
  launch "$name" "downpour_${opt}_${w}w" "$dir" "${sets[@]}" || return 0
  local rc="$launch_rc"
  if [[ "$model" == sparse_linear ]]; then
    "$py" "$here/sparse_eval.py" "$dir" --test "$split/test.k64" --train "$split/train.k64" \
      >"$dir/final_model.json" || true
  fi
  "$py" "$here/downpour_row.py" sparse "$dir/summary.json" "$dir/final_model.json" "$name" \
    "downpour_${opt}_${w}w" "$rc" >>"$results"
}

for name in "${names[@]}"; do
  split_dir="$out/$name/split"
  if [[ "$sparse_names" == *" $name "* ]]; then
    echo "== $name: split and keys"
    "$py" "$here/sparse_split.py" "$name" --out "$split_dir" --seed "$seed"
    ext=csv; [[ "$name" == heart_scale_sparse ]] && ext=libsvm
    if [[ $do_refs -eq 1 ]]; then
      echo "== $name: liblinear"
      if ! "$py" "$here/sparse_reference.py" "$name" --dir "$split_dir" --tune | tee -a "$results"; then
        note_row "$name" liblinear "sparse_reference.py failed (its error is above)"
      fi
    fi
    if [[ $do_downpour -eq 1 ]]; then
      for opt in ftrl adagrad fm wide_deep; do
        for w in $workers_list; do
          downpour_sparse "$name" "$opt" "$w" "$split_dir" "$ext"
        done
      done
    fi
    continue
  fi
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
def count(v):
    return "" if v is None else str(v)
def secs(v):
    return "" if v is None else f"{v:.2f}" if v < 10 else f"{v:.1f}"
nz = any("nonzero" in r for r in rows)
print("| dataset | learner | " + " | ".join(used) + (" | non-zeros" if nz else "")
      + " | seconds | note |")
print("|" + "---|" * (len(used) + 4 + nz))
for r in rows:
    m = r.get("metrics") or {}
    print(f"| {r['dataset']} | {r['learner']} | "
          + " | ".join(cell(m.get(c)) for c in used)
          + (f" | {count(r.get('nonzero'))}" if nz else "")
          + f" | {secs(r.get('seconds'))} | {r.get('note', '')} |")
EOF
echo
echo "parity: rows in $results"

#!/usr/bin/python3
"""Grid search of Downpour's sparse_linear hyper-parameters on a validation split.

    bench/parity/sparse_tune.py NAME --dir DIR --config deploy/configs/NAME.yaml \
        --grid optimizer.learning_rate=0.03,0.1,0.3 --grid optimizer.l1=0,1 ... \
        [--set KEY=VALUE ...] [--out FILE.jsonl] [--jobs 1]

Runs bazel-bin/deploy/launcher (LAUNCHER) once per point of the grid (the
cartesian product of every --grid), each on DIR/val/train.F with DIR/val/test.F
as its test file (bench/parity/sparse_split.py: the training rows split again;
the test rows are never read), 1 worker and 2 ps on ephemeral ports, every
epoch run (training.stop_at_target false), evaluation only at the end. Each
point's validation metrics (summary.json: the worker's evaluation of the final
parameters) are appended to --out as a JSON line; at the end the points are
printed best first by validation logloss (a proper score, steadier than AUC on
a few dozen positives), AUC beside it. A run whose summary.json lacks the
metrics (seen on a loaded machine: see docs/BENCHMARKS.md) is run once more.
"""
import argparse
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def complete(metrics):
    return all(isinstance(metrics.get(k), (int, float)) for k in ("auc", "logloss"))


def run_point(a, point):
    """The row of one point; a run whose summary lacks the metrics is kept
    (--keep_failed) and run once more."""
    row = run_once(a, point)
    if not complete(row["metrics"]):
        first = row
        row = run_once(a, point)
        row["retried_after"] = {"metrics": first["metrics"], "outcome": first.get("outcome"),
                                "kept": first.get("kept")}
    return row


def run_once(a, point):
    ext = "libsvm" if a.name == "heart_scale_sparse" else "csv"
    val = os.path.join(a.dir, "val")
    sets = [f"data.path={val}/train.{ext}", f"data.test_path={val}/test.{ext}",
            "cluster.workers=[127.0.0.1:0]", "cluster.ps=[127.0.0.1:0, 127.0.0.1:0]",
            "cluster.coordinator=127.0.0.1:0", "training.stop_at_target=false",
            "training.eval_every_steps=0"] + a.set + [f"{k}={v}" for k, v in point]
    with tempfile.TemporaryDirectory(prefix="sparse_tune_") as run_dir:
        argv = [a.launcher, "--config", a.config, "--run_dir", run_dir, "--progress_s", "3600"]
        for s in sets:
            argv += ["--set", s]
        p = subprocess.run(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
        row = {"dataset": a.name, "point": dict(point)}
        try:
            with open(os.path.join(run_dir, "summary.json")) as f:
                s = json.load(f)
            row.update(metrics=s.get("metrics") or {}, seconds=s.get("seconds"),
                       outcome=s.get("outcome"))
        except (OSError, ValueError):
            row.update(metrics={}, outcome=f"no summary (exit {p.returncode}): "
                       + p.stdout[-300:])
        if not complete(row["metrics"]) and a.keep_failed:
            os.makedirs(a.keep_failed, exist_ok=True)
            kept = tempfile.mkdtemp(prefix="run_", dir=a.keep_failed)
            shutil.copytree(run_dir, kept, dirs_exist_ok=True)
            row["kept"] = kept
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("name")
    ap.add_argument("--dir", required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--grid", action="append", default=[], help="KEY=V1,V2,...")
    ap.add_argument("--set", action="append", default=[], help="KEY=VALUE for every point")
    ap.add_argument("--out", default="")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--top", type=int, default=8)
    ap.add_argument("--keep_failed", default="",
                    help="copy the run dir of a run without metrics here")
    a = ap.parse_args()
    a.launcher = os.environ.get("LAUNCHER", os.path.join(REPO, "bazel-bin/deploy/launcher"))
    axes = []
    for g in a.grid:
        k, _, vs = g.partition("=")
        axes.append([(k, v) for v in vs.split(",")])
    points = [list(p) for p in itertools.product(*axes)]
    print(f"sparse_tune: {a.name}: {len(points)} points", file=sys.stderr, flush=True)
    out = open(a.out, "a") if a.out else None
    rows = []
    with ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        for row in pool.map(lambda p: run_point(a, p), points):
            rows.append(row)
            line = json.dumps(row)
            if out:
                out.write(line + "\n")
                out.flush()
            m = {k: v if isinstance(v, (int, float)) else float("nan")
                 for k, v in row["metrics"].items()}
            print(f"  {row['point']}: logloss {m.get('logloss', float('nan')):.4f} "
                  f"auc {m.get('auc', float('nan')):.4f} ({row.get('seconds') or 0:.1f} s)"
                  + (" (retried)" if "retried_after" in row else ""),
                  file=sys.stderr, flush=True)
    good = [r for r in rows if complete(r["metrics"])]
    good.sort(key=lambda r: r["metrics"]["logloss"])
    print(f"best of {len(good)} by validation logloss ({len(rows) - len(good)} failed):")
    for r in good[:a.top]:
        m = r["metrics"]
        print(f"  logloss {m['logloss']:.4f} auc {m['auc']:.4f}  {r['point']}")


if __name__ == "__main__":
    main()

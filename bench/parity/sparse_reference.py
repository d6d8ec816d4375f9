#!/usr/bin/python3
"""liblinear on the sparse parity rows (issue 21): the references Downpour's
sparse_linear is compared with, on the same keys.

    bench/parity/sparse_reference.py NAME --dir DIR [--tune]

DIR is bench/parity/sparse_split.py's output: DIR/train.ll and DIR/test.ll (the
keys Downpour computes, renumbered 1..K), DIR/val/ the validation split carved
from the training rows. Learners (names as printed):
  liblinear_s0   `liblinear-train -s 0 -c C -B 1`: L2-regularized logistic
                 regression (primal trust-region Newton)
  liblinear_s6   `liblinear-train -s 6 -c C -B 1`: L1-regularized logistic
                 regression; "nonzero" counts its weights that are not 0
Both with liblinear's default C = 1; with --tune also liblinear_s0_tuned and
liblinear_s6_tuned, C chosen from 2^-6 .. 2^6 by the logloss on DIR/val (trained
on val/train.ll, scored on val/test.ll; the test rows are not looked at), then
trained on DIR/train.ll. -B 1 adds a constant feature, so the bias is
regularized too (Downpour's is not). Scores: `liblinear-predict -b 1`
probabilities of the positive class (label 1) on DIR/test.ll: AUC, logloss,
accuracy (threshold 0.5). "nonzero" leaves out the bias; "seconds" is the
liblinear-train process.
Prints one JSON line per learner:
  {"dataset", "learner", "metrics", "nonzero", "seconds", "note"}
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sparse_common as sc  # noqa: E402

C_GRID = [2.0**k for k in range(-6, 7)]


def need_tools():
    for tool in ("liblinear-train", "liblinear-predict"):
        if not any(os.access(os.path.join(p, tool), os.X_OK)
                   for p in os.environ.get("PATH", "").split(os.pathsep)):
            sys.exit(f"sparse_reference: {tool} not found: run bench/parity/install_refs.sh "
                     "(Debian package liblinear-tools)")


def nonzero_weights(model_path):
    """Weights that are not 0 in a two-class liblinear model, bias left out."""
    with open(model_path) as f:
        lines = f.read().split("\n")
    head = {}
    i = 0
    while lines[i] != "w":
        k, _, v = lines[i].partition(" ")
        head[k] = v
        i += 1
    w = [float(x.split()[0]) for x in lines[i + 1:] if x.strip()]
    n = int(head["nr_feature"])
    return sum(1 for x in w[:n] if x != 0.0)


def run(solver, c, train, test):
    """(metrics, nonzero, seconds) of one liblinear fit and prediction."""
    with tempfile.TemporaryDirectory() as tmp:
        model, out = os.path.join(tmp, "model"), os.path.join(tmp, "out")
        t0 = time.perf_counter()
        subprocess.run(["liblinear-train", "-s", str(solver), "-c", repr(c), "-B", "1", "-q",
                        train, model], check=True)
        secs = time.perf_counter() - t0
        subprocess.run(["liblinear-predict", "-b", "1", "-q", test, model, out], check=True)
        with open(out) as f:
            header = f.readline().split()
            if header[0] != "labels":
                sys.exit(f"sparse_reference: unexpected liblinear-predict output {header}")
            col = [int(v) for v in header[1:]].index(1)
            p = [float(line.split()[1 + col]) for line in f]
        nz = nonzero_weights(model)
    y = [1 if lbl > 0 else 0 for lbl, _ in sc.read_libsvm(test)]
    return sc.binary_metrics(y, p), nz, secs


def emit(name, learner, m, nz, secs, note):
    print(json.dumps({"dataset": name, "learner": learner,
                      "metrics": {k: round(v, 6) for k, v in m.items()},
                      "nonzero": nz, "seconds": round(secs, 3), "note": note}), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("name")
    ap.add_argument("--dir", required=True)
    ap.add_argument("--tune", action="store_true",
                    help="also C chosen on DIR/val by logloss (rows *_tuned)")
    a = ap.parse_args()
    need_tools()
    train, test = os.path.join(a.dir, "train.ll"), os.path.join(a.dir, "test.ll")
    vtrain, vtest = os.path.join(a.dir, "val", "train.ll"), os.path.join(a.dir, "val", "test.ll")
    for solver in (0, 6):
        m, nz, secs = run(solver, 1.0, train, test)
        emit(a.name, f"liblinear_s{solver}", m, nz, secs, "C=1")
        if not a.tune:
            continue
        scores = []
        for c in C_GRID:
            vm, _, _ = run(solver, c, vtrain, vtest)
            scores.append((vm["logloss"], c, vm))
        best = min(scores)
        m, nz, secs = run(solver, best[1], train, test)
        emit(a.name, f"liblinear_s{solver}_tuned", m, nz, secs,
             f"C={best[1]:g} (validation logloss {best[0]:.4f}, auc {best[2]['auc']:.4f})")


if __name__ == "__main__":
    main()

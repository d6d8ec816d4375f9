#!/usr/bin/python3
"""Reference learners for the parity benchmark: scikit-learn and liblinear.

    bench/parity/reference.py DATASET --train F --test F [--only NAME,...]

DATASET and its task:
  iris, wine       multiclass  CSV from bench/parity/split.py (first line skipped, label last)
  heart_scale      binary      LIBSVM (+1 = positive class), 13 features
  diabetes         regression  CSV with a header, target last
  fashion_mnist    multiclass  --train/--test: the folder with the four *-ubyte.gz
                               files (train-* and t10k-* are taken from it)

Every learner sees the features standardized with the train split's mean and std
(StandardScaler, fit on train only), as Downpour's `data.normalize: true` does.
Learners (names as printed):
  classification: sklearn_logreg (LogisticRegression, lbfgs, C=1, multinomial for
      multiclass, max_iter 10000) and liblinear_s0 (`liblinear-train -s 0 -B 1`,
      L2-regularized logistic regression, C=1, one-vs-rest for multiclass, on the
      standardized data written as LIBSVM; `liblinear-predict -b 1` probabilities;
      for fashion_mnist that is ~830 MB of temporary text, as standardizing makes
      every pixel non-zero, and minutes of liblinear-train);
      fashion_mnist also sklearn_mlp (MLPClassifier (256, 128), ReLU, adam 0.001,
      batch 64, --mlp_epochs epochs, the Downpour fashion_mnist config's network).
  regression: sklearn_linreg (LinearRegression, least squares) and sklearn_ridge
      (Ridge, alpha 1). liblinear has no least-squares solver (-s 11..13 are SVR),
      so none for diabetes.
Prints one JSON line per learner:
  {"dataset", "learner", "metrics": {...}, "seconds", "note"?}
metrics on the test file with sklearn.metrics: accuracy and logloss (and auc for
binary), or rmse, mae and r2; seconds is the fit time (liblinear: the
liblinear-train process, not writing its input). A "note" says where a learner
was capped (e.g. fashion_mnist's lbfgs iterations).
"""
import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np
from sklearn import metrics
from sklearn.datasets import load_svmlight_file
from sklearn.exceptions import ConvergenceWarning
from sklearn.preprocessing import StandardScaler

TASKS = {"iris": "multiclass", "wine": "multiclass", "fashion_mnist": "multiclass",
         "heart_scale": "binary", "diabetes": "regression"}


# ---- reading -----------------------------------------------------------------

def load_csv(path, skip):
    a = np.loadtxt(path, delimiter=",", skiprows=skip, ndmin=2)
    return a[:, :-1], a[:, -1]


def load_idx_gz(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    magic = int.from_bytes(raw[0:4], "big")
    ndim = magic & 0xFF
    if magic >> 8 != 0x08:
        sys.exit(f"reference: {path}: not an unsigned-byte IDX file (magic {magic:#x})")
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    return data.reshape(dims)


def load_fashion(folder, prefix):
    x = load_idx_gz(os.path.join(folder, f"{prefix}-images-idx3-ubyte.gz"))
    y = load_idx_gz(os.path.join(folder, f"{prefix}-labels-idx1-ubyte.gz"))
    return x.reshape(len(x), -1).astype(np.float64), y.astype(np.int64)


def load(dataset, path, part):
    if not os.path.exists(path):
        sys.exit(f"reference: {path} not found (bench/parity/split.py writes the "
                 "train/test files; deploy/fetch_data.sh fetches the data)")
    if dataset == "fashion_mnist":
        return load_fashion(path, "train" if part == "train" else "t10k")
    if dataset == "heart_scale":
        x, y = load_svmlight_file(path, n_features=13)
        return x.toarray(), (y > 0).astype(np.int64)
    if dataset == "diabetes":
        return load_csv(path, skip=1)
    x, y = load_csv(path, skip=1)  # iris, wine: scikit-learn's `n,d,classes` line
    return x, y.astype(np.int64)


# ---- metrics -------------------------------------------------------------------

def class_metrics(task, y, proba, classes):
    pred = classes[np.argmax(proba, axis=1)]
    m = {"accuracy": metrics.accuracy_score(y, pred),
         "logloss": metrics.log_loss(y, proba, labels=classes)}
    if task == "binary":
        m["auc"] = metrics.roc_auc_score(y, proba[:, list(classes).index(1)])
    return m


def reg_metrics(y, pred):
    return {"rmse": float(np.sqrt(metrics.mean_squared_error(y, pred))),
            "mae": metrics.mean_absolute_error(y, pred),
            "r2": metrics.r2_score(y, pred)}


def emit(dataset, learner, m, seconds, note=None):
    out = {"dataset": dataset, "learner": learner,
           "metrics": {k: round(float(v), 6) for k, v in m.items()},
           "seconds": round(seconds, 3)}
    if note:
        out["note"] = note
    print(json.dumps(out), flush=True)


# ---- learners -------------------------------------------------------------------

def sklearn_logreg(a, task, xtr, ytr, xte, yte):
    from sklearn.linear_model import LogisticRegression
    big = len(xtr) > 10000
    max_iter = a.lbfgs_iter_large if big else 10000
    model = LogisticRegression(solver="lbfgs", C=1.0, max_iter=max_iter)
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        model.fit(xtr, ytr)
    secs = time.perf_counter() - t0
    note = None
    if any(issubclass(w.category, ConvergenceWarning) for w in caught):
        note = f"lbfgs stopped at max_iter {max_iter} before converging"
    m = class_metrics(task, yte, model.predict_proba(xte), model.classes_)
    emit(a.dataset, "sklearn_logreg", m, secs, note)


def write_libsvm(path, x, y):
    with open(path, "w") as f:
        for row, label in zip(x, y):
            nz = np.flatnonzero(row)
            f.write(f"{int(label)} " + " ".join(f"{j + 1}:{row[j]:.8g}" for j in nz) + "\n")


def liblinear_s0(a, task, xtr, ytr, xte, yte):
    for tool in ("liblinear-train", "liblinear-predict"):
        if not any(os.access(os.path.join(p, tool), os.X_OK)
                   for p in os.environ.get("PATH", "").split(os.pathsep)):
            sys.exit(f"reference: {tool} not found: run bench/parity/install_refs.sh "
                     "(Debian package liblinear-tools)")
    with tempfile.TemporaryDirectory() as tmp:
        tr, te = os.path.join(tmp, "train"), os.path.join(tmp, "test")
        model, out = os.path.join(tmp, "model"), os.path.join(tmp, "out")
        write_libsvm(tr, xtr, ytr)
        write_libsvm(te, xte, yte)
        t0 = time.perf_counter()
        subprocess.run(["liblinear-train", "-s", "0", "-c", "1", "-B", "1", "-q", tr, model],
                       check=True)
        secs = time.perf_counter() - t0
        subprocess.run(["liblinear-predict", "-b", "1", "-q", te, model, out], check=True)
        with open(out) as f:
            header = f.readline().split()
            if header[0] != "labels":
                sys.exit(f"reference: unexpected liblinear-predict output '{' '.join(header)}'")
            labels = np.array([int(v) for v in header[1:]])
            proba = np.array([[float(v) for v in line.split()[1:]] for line in f])
    order = np.argsort(labels)  # columns in class order
    m = class_metrics(task, yte, proba[:, order], labels[order])
    emit(a.dataset, "liblinear_s0", m, secs)


def sklearn_mlp(a, task, xtr, ytr, xte, yte):
    from sklearn.neural_network import MLPClassifier
    note = f"{a.mlp_epochs} epochs"
    if a.mlp_subsample and a.mlp_subsample < len(xtr):
        pick = np.random.default_rng(a.seed).choice(len(xtr), a.mlp_subsample, replace=False)
        xtr, ytr = xtr[pick], ytr[pick]
        note += f", trained on a random {a.mlp_subsample} of the train rows"
    model = MLPClassifier(hidden_layer_sizes=(256, 128), activation="relu", solver="adam",
                          learning_rate_init=0.001, batch_size=64, max_iter=a.mlp_epochs,
                          shuffle=True, random_state=a.seed, early_stopping=False)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # max_iter is the epoch budget
        model.fit(xtr, ytr)
    secs = time.perf_counter() - t0
    m = class_metrics(task, yte, model.predict_proba(xte), model.classes_)
    emit(a.dataset, "sklearn_mlp", m, secs, note)


def sklearn_linreg(a, task, xtr, ytr, xte, yte):
    from sklearn.linear_model import LinearRegression
    t0 = time.perf_counter()
    model = LinearRegression().fit(xtr, ytr)
    emit(a.dataset, "sklearn_linreg", reg_metrics(yte, model.predict(xte)),
         time.perf_counter() - t0)


def sklearn_ridge(a, task, xtr, ytr, xte, yte):
    from sklearn.linear_model import Ridge
    t0 = time.perf_counter()
    model = Ridge(alpha=1.0).fit(xtr, ytr)
    emit(a.dataset, "sklearn_ridge", reg_metrics(yte, model.predict(xte)),
         time.perf_counter() - t0)


def learners_for(dataset, task):
    if task == "regression":
        return {"sklearn_linreg": sklearn_linreg, "sklearn_ridge": sklearn_ridge}
    out = {"sklearn_logreg": sklearn_logreg, "liblinear_s0": liblinear_s0}
    if dataset == "fashion_mnist":
        out["sklearn_mlp"] = sklearn_mlp
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dataset", choices=sorted(TASKS))
    ap.add_argument("--train", required=True, help="train file (fashion_mnist: the folder)")
    ap.add_argument("--test", required=True, help="test file (fashion_mnist: the folder)")
    ap.add_argument("--only", default="", help="comma-separated learner names to run")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--mlp_epochs", type=int, default=10,
                    help="fashion_mnist sklearn_mlp: epochs (default 10)")
    ap.add_argument("--mlp_subsample", type=int, default=0,
                    help="fashion_mnist sklearn_mlp: train on this many rows (0 = all)")
    ap.add_argument("--lbfgs_iter_large", type=int, default=300,
                    help="sklearn_logreg max_iter on more than 10000 rows (default 300)")
    a = ap.parse_args()
    task = TASKS[a.dataset]
    xtr, ytr = load(a.dataset, a.train, "train")
    xte, yte = load(a.dataset, a.test, "test")
    scaler = StandardScaler().fit(xtr)
    xtr, xte = scaler.transform(xtr), scaler.transform(xte)
    learners = learners_for(a.dataset, task)
    wanted = [n for n in a.only.split(",") if n] or list(learners)
    for name in wanted:
        if name not in learners:
            sys.exit(f"reference: no learner '{name}' for {a.dataset}; "
                     f"choose from {', '.join(learners)}")
        learners[name](a, task, xtr, ytr, xte, yte)


if __name__ == "__main__":
    main()

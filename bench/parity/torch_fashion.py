#!/usr/bin/python3
"""The Fashion-MNIST parity job in one PyTorch process: the reference for
deploy/configs/fashion_mnist.yaml.

    bench/parity/torch_fashion.py [--data data/fashion_mnist] [--epochs 10]
        [--threads 1] [--batch 64] [--lr 0.001] [--seed 0] [--marks 0.80,0.85,0.88]
        [--eval_every_steps 200]

Reads the four gzipped IDX files as shipped (gzip + numpy), trains the MLP
784-256-128-10 (ReLU, softmax cross-entropy) with Adam on the 60,000 train
images and tests on the 10,000 t10k images. Pixels are standardized per feature
with the train images' mean and std (`--norm global` uses one mean and std for
all pixels instead). Test accuracy is measured every --eval_every_steps steps
(as the Downpour config's training.eval_every_steps) and at each epoch's end.
Prints the test accuracy after every epoch, the seconds of training (evaluation
excluded) to each mark the first time a measurement reached it, and a final JSON
line in reference.py's format (learner "torch_mlp").
"""
import argparse
import gzip
import json
import os
import sys
import time

import numpy as np
import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def read_idx_gz(path):
    try:
        with gzip.open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        sys.exit(f"torch_fashion: {path} not found: run deploy/fetch_data.sh fashion_mnist")
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(folder, prefix):
    x = read_idx_gz(os.path.join(folder, f"{prefix}-images-idx3-ubyte.gz"))
    y = read_idx_gz(os.path.join(folder, f"{prefix}-labels-idx1-ubyte.gz"))
    return x.reshape(len(x), -1).astype(np.float32), y.astype(np.int64)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.path.join(REPO, "data", "fashion_mnist"))
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.001)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--norm", choices=["feature", "global"], default="feature")
    ap.add_argument("--marks", default="0.80,0.85,0.88")
    ap.add_argument("--eval_every_steps", type=int, default=200, help="0 = epoch ends only")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)

    xtr, ytr = load(a.data, "train")
    xte, yte = load(a.data, "t10k")
    if a.norm == "feature":
        mu, sd = xtr.mean(0), xtr.std(0)
        sd[sd == 0] = 1.0  # constant pixels keep their scale
    else:
        mu, sd = xtr.mean(), xtr.std()
    xtr, xte = (xtr - mu) / sd, (xte - mu) / sd
    xtr, ytr = torch.from_numpy(xtr), torch.from_numpy(ytr)
    xte, yte = torch.from_numpy(xte), torch.from_numpy(yte)

    net = torch.nn.Sequential(
        torch.nn.Linear(784, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 128), torch.nn.ReLU(),
        torch.nn.Linear(128, 10))
    opt = torch.optim.Adam(net.parameters(), lr=a.lr)
    marks = sorted(float(m) for m in a.marks.split(",") if m)
    reached = {}
    n = len(xtr)
    print(f"torch_fashion: {n} train, {len(xte)} test images, MLP 784-256-128-10, "
          f"Adam {a.lr}, batch {a.batch}, {a.threads} thread(s), torch {torch.__version__}",
          flush=True)

    def evaluate():
        with torch.no_grad():
            logits = net(xte)
            loss = torch.nn.functional.cross_entropy(logits, yte).item()
            acc = (logits.argmax(1) == yte).float().mean().item()
        return acc, loss

    def mark(acc, train_s):
        for m in marks:
            if m not in reached and acc >= m:
                reached[m] = train_s

    train_s, step = 0.0, 0
    acc = loss = float("nan")
    for epoch in range(1, a.epochs + 1):
        t0 = time.perf_counter()
        for idx in torch.randperm(n).split(a.batch):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(xtr[idx]), ytr[idx]).backward()
            opt.step()
            step += 1
            if a.eval_every_steps and step % a.eval_every_steps == 0:
                train_s += time.perf_counter() - t0  # the clock stops while evaluating
                mark(evaluate()[0], train_s)
                t0 = time.perf_counter()
        train_s += time.perf_counter() - t0
        acc, loss = evaluate()
        mark(acc, train_s)
        print(f"epoch {epoch:3d}  test accuracy {acc:.4f}  test logloss {loss:.4f}  "
              f"train seconds {train_s:.1f}", flush=True)
    for m in marks:
        when = f"{reached[m]:.1f} s of training" if m in reached else "never"
        print(f"reached {m:.2f} after {when}")
    print(json.dumps({"dataset": "fashion_mnist", "learner": "torch_mlp",
                      "metrics": {"accuracy": round(acc, 6), "logloss": round(loss, 6)},
                      "seconds": round(train_s, 3),
                      "seconds_to": {f"{m:.2f}": round(reached[m], 3) if m in reached else None
                                     for m in marks},
                      "note": f"{a.epochs} epochs, {a.threads} thread(s)"}))


if __name__ == "__main__":
    main()

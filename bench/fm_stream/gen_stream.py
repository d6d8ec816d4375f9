#!/usr/bin/python3
"""Writes a deterministic LIBSVM stream of examples with ~300 hashed keys each.

Each example draws about `--keys` distinct tokens from a Zipf-ish vocabulary
(rank r has probability proportional to 1 / (r + 10)), hashes each token to a
key in [1, 2^20] (a fixed random permutation, so keys are spread as a hashed
mail corpus's are) with value 1, and takes its label from a known sparse
logistic model: 200 mid-frequency tokens carry weights N(0, 0.5^2), the rest
none, plus a bias that makes about 30 % of the labels positive. The labels are
drawn from the model's probability (not thresholded), so the best achievable
test logloss is the model's own (printed to stderr as "oracle logloss").

  /usr/bin/python3 bench/fm_stream/gen_stream.py --out /tmp/fm/stream   # train, test
  # then: --set data.path=/tmp/fm/stream/train --set data.test_path=/tmp/fm/stream/test

Same arguments, same files (numpy's seeded generator; numpy >= 1.17).
"""
import argparse
import math
import os
import sys

import numpy as np


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="folder for train and test")
    p.add_argument("--train", type=int, default=4000, help="training examples")
    p.add_argument("--test", type=int, default=1000, help="test examples")
    p.add_argument("--keys", type=int, default=360, help="draws an example (about 300 distinct keys)")
    p.add_argument("--vocab", type=int, default=50000, help="distinct tokens")
    p.add_argument("--informative", type=int, default=200,
                   help="tokens with a non-zero weight")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()

    rng = np.random.default_rng(a.seed)
    ranks = np.arange(a.vocab)
    prob = 1.0 / (ranks + 10.0)
    prob /= prob.sum()
    # Token -> key in [1, 2^20], distinct keys (a hash without collisions).
    keys = rng.choice(np.arange(1, (1 << 20) + 1), size=a.vocab, replace=False)
    weights = np.zeros(a.vocab)
    # Informative tokens among ranks 50..5000: frequent enough to be learnt.
    informative = rng.choice(np.arange(50, 5000), size=a.informative,
                             replace=False)
    weights[informative] = rng.normal(0.0, 0.5, size=a.informative)

    def draw(n):
        rows, margins = [], []
        for _ in range(n):
            k = max(10, int(rng.poisson(a.keys)))
            tokens = np.unique(rng.choice(a.vocab, size=k, p=prob))
            rows.append(tokens)
            margins.append(weights[tokens].sum())
        return rows, np.array(margins)

    train_rows, train_m = draw(a.train)
    # The bias that makes ~30 % of the training labels positive.
    lo, hi = -20.0, 20.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if (1 / (1 + np.exp(-(train_m + mid)))).mean() > 0.3:
            hi = mid
        else:
            lo = mid
    bias = (lo + hi) / 2
    test_rows, test_m = draw(a.test)

    os.makedirs(a.out, exist_ok=True)
    summary = []
    for name, rows, m in (("train", train_rows, train_m),
                          ("test", test_rows, test_m)):
        pr = 1 / (1 + np.exp(-(m + bias)))
        y = (rng.random(len(pr)) < pr).astype(int)
        eps = 1e-15
        ll = -np.mean(y * np.log(pr + eps) + (1 - y) * np.log(1 - pr + eps))
        with open(os.path.join(a.out, name), "w") as f:
            for tokens, label in zip(rows, y):
                ks = np.sort(keys[tokens])
                f.write(("+1" if label else "-1") + " " +
                        " ".join("%d:1" % k for k in ks) + "\n")
        summary.append("%s: %d examples, %.1f keys an example, %.3f positive, "
                       "oracle logloss %.4f" % (name, len(rows),
                                                np.mean([len(r) for r in rows]),
                                                y.mean(), ll))
    for line in summary:
        print(line, file=sys.stderr)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""The final model of a Downpour sparse_linear run, read from its ps checkpoints.

    bench/parity/sparse_eval.py RUN_DIR --test DIR/test.k64 [--train DIR/train.k64]

Reads the newest checkpoint of every ps under RUN_DIR/checkpoints (server/
checkpoint.h, format 4: each ps writes one at shutdown, after the last push):
the bias (dense block 0) and every sparse row (key, weight). Prints one JSON
object: the test metrics of that model on --test (LIBSVM of Downpour's 64-bit
keys, labels 1/0, from bench/parity/sparse_split.py), the rows the ps hold and
how many weights are not 0 (FTRL's l1 makes weights exactly 0). With --train it
also checks that the rows are exactly the training keys (every training key is
pushed once an epoch, and no pull creates a row): a key computed differently
in Python than in Downpour shows up there.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sparse_common as sc  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run_dir")
    ap.add_argument("--test", required=True)
    ap.add_argument("--train", default="")
    a = ap.parse_args()
    bias, weights = sc.final_model(a.run_dir)
    out = {"metrics": {k: round(v, 6) for k, v in
                       sc.evaluate(bias, weights, sc.read_libsvm(a.test)).items()},
           "rows": len(weights),
           "nonzero": sum(1 for w in weights.values() if w != 0.0),
           "bias": bias}
    if a.train:
        train_keys = {k for _, f in sc.read_libsvm(a.train) for k in f}
        rows = set(weights)
        out["rows_match_train_keys"] = rows == train_keys
        if rows != train_keys:
            out["rows_not_train_keys"] = len(rows - train_keys)
            out["train_keys_without_row"] = len(train_keys - rows)
    print(json.dumps(out))


if __name__ == "__main__":
    main()

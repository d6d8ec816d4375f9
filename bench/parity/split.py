#!/usr/bin/python3
"""Fixed 80/20 train/test split of a fetched data set, for the parity benchmark.

    bench/parity/split.py DATASET --out DIR [--seed 42] [--data DATA_DIR]

DATASET: iris wine diabetes heart_scale (fashion_mnist ships its own train/test
files: nothing to split, it says so and exits 0). Reads what
deploy/fetch_data.sh put in DATA_DIR (default <repo>/data) and writes
DIR/train.csv and DIR/test.csv (DIR/train.libsvm and DIR/test.libsvm for
heart_scale) in the format deploy/configs/DATASET.yaml reads, with each data
row copied byte for byte, so Downpour and the references see identical rows:

  iris, wine: scikit-learn's layout, a first line `n_rows,n_features,classes...`
      (n_rows rewritten for the part; the config skips it) then the rows,
      label last. Stratified by class.
  diabetes: the header line, then the rows, target last. Plain shuffle.
  heart_scale: LIBSVM lines as shipped. Stratified by label.

The split is sklearn.model_selection.train_test_split(test_size=0.2,
random_state=SEED), so it is the same on every machine for a given seed.
Prints one line: dataset, rows in each part, the files written.
"""
import argparse
import os
import sys

from sklearn.model_selection import train_test_split

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FILES = {
    "iris": "iris/iris.csv",
    "wine": "wine/wine.csv",
    "diabetes": "diabetes/diabetes.csv",
    "heart_scale": "heart_scale/heart_scale",
}


def read_lines(path):
    try:
        with open(path) as f:
            return [line.rstrip("\r\n") for line in f]
    except FileNotFoundError:
        sys.exit(f"split: {path} not found: run deploy/fetch_data.sh first")


def data_rows(lines):
    """The non-empty lines."""
    return [line for line in lines if line.strip()]


def split(rows, labels, seed, stratify):
    idx = list(range(len(rows)))
    train, test = train_test_split(idx, test_size=0.2, random_state=seed,
                                   stratify=labels if stratify else None)
    return [rows[i] for i in train], [rows[i] for i in test]


def write(path, first_line, rows):
    with open(path, "w") as f:
        if first_line is not None:
            f.write(first_line + "\n")
        for r in rows:
            f.write(r + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dataset", choices=sorted(FILES) + ["fashion_mnist"])
    ap.add_argument("--out", required=True, help="folder for train/test files")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--data", default=os.path.join(REPO, "data"),
                    help="folder deploy/fetch_data.sh filled (default <repo>/data)")
    a = ap.parse_args()
    if a.dataset == "fashion_mnist":
        print("fashion_mnist: ships its own train (60000) and test (10000) files; "
              "nothing to split (use data/fashion_mnist as it is)")
        return
    path = os.path.join(a.data, FILES[a.dataset])
    lines = read_lines(path)
    os.makedirs(a.out, exist_ok=True)

    if a.dataset == "heart_scale":
        rows = data_rows(lines)
        labels = [r.split()[0] for r in rows]
        train, test = split(rows, labels, a.seed, stratify=True)
        names = ("train.libsvm", "test.libsvm")
        firsts = (None, None)
    elif a.dataset == "diabetes":
        header, rows = lines[0], data_rows(lines[1:])
        train, test = split(rows, None, a.seed, stratify=False)
        names = ("train.csv", "test.csv")
        firsts = (header, header)
    else:  # iris, wine: `n_rows,n_features,class names` first
        meta, rows = lines[0].split(","), data_rows(lines[1:])
        if int(meta[0]) != len(rows):
            sys.exit(f"split: {path} says {meta[0]} rows but holds {len(rows)}")
        labels = [r.rsplit(",", 1)[1] for r in rows]
        train, test = split(rows, labels, a.seed, stratify=True)
        names = ("train.csv", "test.csv")
        firsts = tuple(",".join([str(len(part))] + meta[1:]) for part in (train, test))

    for name, first, part in zip(names, firsts, (train, test)):
        write(os.path.join(a.out, name), first, part)
    print(f"{a.dataset}: {len(train)} train, {len(test)} test rows (seed {a.seed}) -> "
          f"{os.path.join(a.out, names[0])}, {os.path.join(a.out, names[1])}")


if __name__ == "__main__":
    main()

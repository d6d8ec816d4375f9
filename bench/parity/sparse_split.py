#!/usr/bin/python3
"""Fixed splits and key files of the sparse parity rows (issue 21).

    bench/parity/sparse_split.py NAME --out DIR [--seed 42] [--data DATA_DIR]
                                [--quantile_buckets 10]

NAME: heart_scale_sparse, reuters_corn, lending_club. Writes, for Downpour:
  DIR/train.F and DIR/test.F      the rows as shipped, copied byte for byte
                                  (F: libsvm for heart_scale_sparse, csv else)
  heart_scale_sparse: LIBSVM, a stratified 80/20 split (the same rows as
      bench/parity/split.py heart_scale); reuters_corn: its own train.csv and
      test.csv; lending_club: the header, then a stratified 80/20 split of the
      rows (sklearn train_test_split(test_size=0.2, random_state=SEED)).
and for the references and the checkpoint evaluation, the same examples as the
keys Downpour computes from them (docs/DATA.md; the hash re-done in Python and
checked against its golden values; for lending_club the quantile buckets come
from DIR/train.csv, as Downpour's reader computes them from data.path):
  DIR/train.k64, DIR/test.k64     LIBSVM whose indices are Downpour's 64-bit
                                  keys (Downpour itself reads these too)
  DIR/train.ll, DIR/test.ll       the same with each key renumbered 1..K
                                  (liblinear's indices are 32-bit): train keys
                                  ascending first, test-only keys after them
                                  (liblinear-predict ignores those, as an
                                  untrained key weighs 0 in Downpour)
  DIR/keys.tsv                    index, key (hex), feature, for the .ll files
Labels in the key files are 1 (positive: heart_scale +1, corn, bad) and 0.
DIR/val/ holds the same files for tuning: the training rows alone, split again
stratified 80/20 (seed SEED) into val/train.* and val/test.*: no test row is
ever seen while hyper-parameters are chosen.
"""
import argparse
import os
import sys

from sklearn.model_selection import train_test_split

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sparse_common as sc  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Column kinds of the CSV sets: what deploy/configs/NAME.yaml declares.
LENDING_CATEGORICAL = ["term", "sub_grade", "addr_state", "verification_status",
                       "emp_length"]
LENDING_LABEL, LENDING_POSITIVE = "Class", "bad"
REUTERS_LABEL, REUTERS_POSITIVE = "class", "1"


def kinds_of(name, header):
    if name == "reuters_corn":
        return {"text": "text", "class": "label"}
    kinds = {}
    for col in header:
        if col == LENDING_LABEL:
            kinds[col] = "label"
        elif col in LENDING_CATEGORICAL:
            kinds[col] = "categorical"
        else:
            kinds[col] = "bucketize"
    return kinds


def read_lines(path):
    try:
        with open(path, newline="") as f:
            return [line.rstrip("\r\n") for line in f]
    except FileNotFoundError:
        sys.exit(f"sparse_split: {path} not found: run deploy/fetch_data.sh first")


def split_rows(rows, labels, seed):
    idx = list(range(len(rows)))
    tr, te = train_test_split(idx, test_size=0.2, random_state=seed, stratify=labels)
    return [rows[i] for i in tr], [rows[i] for i in te]


def write_lines(path, lines):
    with open(path, "w", newline="") as f:
        for line in lines:
            f.write(line + "\n")


def keyed(name, header, train_lines, test_lines, qb):
    """[(label, {key: value})] of the train and test lines, and key descriptions."""
    desc = {}
    if name == "heart_scale_sparse":
        conv = []
        for lines in (train_lines, test_lines):
            ex = sc.read_libsvm_lines(lines)
            conv.append([(1 if y > 0 else 0, f) for y, f in ex])
            for _, f in ex:
                for k in f:
                    desc[k] = f"index {k}"
        return conv[0], conv[1], desc
    import csv
    kinds = kinds_of(name, header)
    label = REUTERS_LABEL if name == "reuters_corn" else LENDING_LABEL
    positive = REUTERS_POSITIVE if name == "reuters_corn" else LENDING_POSITIVE
    li = header.index(label)
    parsed = [list(csv.reader(lines)) for lines in (train_lines, test_lines)]
    bounds = sc.csv_plan(header, parsed[0], kinds, qb)
    for col, b in bounds.items():
        for i in range(len(b) + 1):
            desc[sc.feature_key(col, f"b{i}")] = f"{col} bucket b{i} (bounds {b})"
    conv = []
    for rows in parsed:
        ex = []
        for r in rows:
            feats = sc.csv_row_keys(header, r, kinds, bounds)
            for c, col in enumerate(header):
                if kinds[col] == "categorical":
                    desc.setdefault(sc.feature_key(col, r[c].strip()), f"{col}={r[c].strip()}")
                elif kinds[col] == "text":
                    for t in sc.tokens(r[c]):
                        desc.setdefault(sc.hash_bytes(col.encode() + sc.FIELD_SEP + t),
                                        f"{col} token {t.decode()}")
            ex.append((1 if r[li].strip() == positive else 0, feats))
        conv.append(ex)
    return conv[0], conv[1], desc


def write_part(out, name, header, train_lines, test_lines, qb):
    os.makedirs(out, exist_ok=True)
    ext = "libsvm" if name == "heart_scale_sparse" else "csv"
    first = [] if header is None else [",".join(header)]
    write_lines(os.path.join(out, f"train.{ext}"), first + train_lines)
    write_lines(os.path.join(out, f"test.{ext}"), first + test_lines)
    tr, te, desc = keyed(name, header, train_lines, test_lines, qb)
    sc.write_libsvm(os.path.join(out, "train.k64"), tr)
    sc.write_libsvm(os.path.join(out, "test.k64"), te)
    train_keys = sorted({k for _, f in tr for k in f})
    test_only = sorted({k for _, f in te for k in f} - set(train_keys))
    index = {k: i + 1 for i, k in enumerate(train_keys + test_only)}
    if name == "heart_scale_sparse":
        index = {k: k for k in index}  # LIBSVM as is: the indices are the keys
    for part, ex in (("train", tr), ("test", te)):
        sc.write_libsvm(os.path.join(out, f"{part}.ll"),
                        [(y, {index[k]: v for k, v in f.items()}) for y, f in ex])
    with open(os.path.join(out, "keys.tsv"), "w") as f:
        f.write("index\tkey\tfeature\n")
        for k, i in sorted(index.items(), key=lambda kv: kv[1]):
            f.write(f"{i}\t{k:#018x}\t{desc.get(k, '?')}\n")
    pos = sum(y for y, _ in tr), sum(y for y, _ in te)
    return (f"{len(tr)} train ({pos[0]} positive), {len(te)} test ({pos[1]} positive), "
            f"{len(train_keys)} train keys, {len(test_only)} test-only keys")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("name", choices=["heart_scale_sparse", "reuters_corn", "lending_club"])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--data", default=os.path.join(REPO, "data"))
    ap.add_argument("--quantile_buckets", type=int, default=10,
                    help="lending_club: data.quantile_buckets of its config (default 10)")
    a = ap.parse_args()
    sc.check_golden()
    import csv
    header = None
    if a.name == "heart_scale_sparse":
        rows = [l for l in read_lines(os.path.join(a.data, "heart_scale/heart_scale")) if l.strip()]
        labels = [r.split()[0] for r in rows]
        train, test = split_rows(rows, labels, a.seed)
        label_of = lambda r: r.split()[0]  # noqa: E731
    elif a.name == "reuters_corn":
        tr_lines = read_lines(os.path.join(a.data, "reuters_corn/train.csv"))
        te_lines = read_lines(os.path.join(a.data, "reuters_corn/test.csv"))
        header = next(csv.reader([tr_lines[0]]))
        train = [l for l in tr_lines[1:] if l.strip()]
        test = [l for l in te_lines[1:] if l.strip()]
        li = header.index(REUTERS_LABEL)
        label_of = lambda r: next(csv.reader([r]))[li]  # noqa: E731
    else:
        lines = read_lines(os.path.join(a.data, "lending_club/lending_club.csv"))
        header = next(csv.reader([lines[0]]))
        rows = [l for l in lines[1:] if l.strip()]
        li = header.index(LENDING_LABEL)
        label_of = lambda r: next(csv.reader([r]))[li]  # noqa: E731
        train, test = split_rows(rows, [label_of(r) for r in rows], a.seed)
    msg = write_part(a.out, a.name, header, train, test, a.quantile_buckets)
    print(f"{a.name}: {msg} -> {a.out}")
    vtrain, vtest = split_rows(train, [label_of(r) for r in train], a.seed)
    msg = write_part(os.path.join(a.out, "val"), a.name, header, vtrain, vtest,
                     a.quantile_buckets)
    print(f"{a.name} validation (train rows only): {msg} -> {os.path.join(a.out, 'val')}")


if __name__ == "__main__":
    main()

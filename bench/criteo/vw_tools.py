#!/usr/bin/python3
"""Criteo text <-> Vowpal Wabbit helpers for bench/criteo/vw_compare.sh.

  vw_tools.py convert train.txt train.vw   # Criteo lines -> VW lines
  vw_tools.py auc test.txt preds.txt       # prints "vw_auc <value> ..."

convert gives each line the features the Downpour Criteo reader makes, named
as VW sees them, in one namespace "f": integer field Ii with value v becomes
"Ii_t" with t = v if v <= 2 else floor(ln(v)^2); categorical field Cj with
value s becomes "Cj_s"; an empty field gives nothing; every value is 1 (VW's
default) and VW adds the bias (its constant feature) itself. Label 0/1
becomes -1/+1 (--loss_function logistic).

auc reads the labels (first field) of the Criteo test file and the first
number of each line of VW's predictions (-p, with --link logistic) and prints
the exact AUC (ties count half) and the log loss.
"""
import math
import sys


def int_token(text):
    v = int(text)
    if v <= 2:
        return v
    lv = math.log(v)
    return int(math.floor(lv * lv))


def convert(src, dst):
    names_i = ["I%d_" % (i + 1) for i in range(13)]
    names_c = ["C%d_" % (j + 1) for j in range(26)]
    tokens = {}  # (field, text) -> feature name: the ln^2 done once per value
    with open(src) as f, open(dst, "w") as out:
        for line in f:
            fields = line.rstrip("\n").split("\t")
            feats = ["1 |f" if fields[0] == "1" else "-1 |f"]
            for i in range(13):
                v = fields[1 + i]
                if v:
                    name = tokens.get((i, v))
                    if name is None:
                        name = names_i[i] + str(int_token(v))
                        tokens[(i, v)] = name
                    feats.append(name)
            for j in range(26):
                s = fields[14 + j]
                if s:
                    feats.append(names_c[j] + s)
            out.write(" ".join(feats) + "\n")


def auc(labels, scores):
    """Exact AUC: mid-ranks of the scores (ties half), Mann-Whitney U."""
    import numpy as np  # here: convert runs without numpy
    order = np.argsort(scores, kind="mergesort")
    s = scores[order]
    y = labels[order]
    _, first, counts = np.unique(s, return_index=True, return_counts=True)
    mid = first + (counts + 1) / 2.0  # 1-based mid-rank of each tie group
    ranks = np.repeat(mid, counts)
    pos = y.sum()
    neg = len(y) - pos
    if pos == 0 or neg == 0:
        return 0.5
    return (ranks[y == 1].sum() - pos * (pos + 1) / 2.0) / (pos * neg)


def report_auc(test, preds):
    import numpy as np
    with open(test) as f:
        labels = np.array([1 if line[:1] == "1" else 0 for line in f])
    with open(preds) as f:
        scores = np.array([float(line.split()[0]) for line in f])
    if len(labels) != len(scores):
        sys.exit("vw_tools.py: %d test labels but %d predictions"
                 % (len(labels), len(scores)))
    p = np.clip(scores, 1e-15, 1 - 1e-15)
    logloss = -np.mean(labels * np.log(p) + (1 - labels) * np.log(1 - p))
    print("vw_auc %.4f logloss %.4f test_rows %d"
          % (auc(labels, scores), logloss, len(labels)))


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("convert", "auc"):
        sys.exit("usage: vw_tools.py convert CRITEO_TXT OUT_VW | "
                 "auc CRITEO_TEST_TXT VW_PREDS")
    if sys.argv[1] == "convert":
        convert(sys.argv[2], sys.argv[3])
    else:
        report_auc(sys.argv[2], sys.argv[3])


if __name__ == "__main__":
    main()

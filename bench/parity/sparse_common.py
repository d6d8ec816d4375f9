"""Shared pieces of the sparse parity benchmark (issue 21): Downpour's feature
hash and CSV-to-keys rules re-done in Python (docs/DATA.md, "Sparse (hashed)
features"), LIBSVM files of those keys, the metrics, and a reader of the ps
checkpoints (server/checkpoint.h, format 4) that gives the final model.

Standard library and numpy only (sklearn.metrics for AUC and logloss).
"""
import csv
import glob
import math
import os
import struct

import numpy as np

M64 = 2**64 - 1
FIELD_SEP = b"\x1f"
MISSING = {"", "?", "na", "nan", "n/a"}  # compared lower-cased (IsMissingMarker)


# ---- the hash (data/feature_hash.h) --------------------------------------------

def fnv_update(h, data):
    for c in data:
        h = ((h ^ c) * 0x100000001B3) & M64
    return h


FNV_BASIS = 0xCBF29CE484222325


def fmix64(h):
    h ^= h >> 33
    h = (h * 0xFF51AFD7ED558CCD) & M64
    h ^= h >> 33
    h = (h * 0xC4CEB9FE1A85EC53) & M64
    return h ^ (h >> 33)


def hash_bytes(b):
    return fmix64(fnv_update(FNV_BASIS, b))


def feature_key(field, value):
    return hash_bytes(field.encode() + FIELD_SEP + value.encode())


def field_key(field):
    return hash_bytes(field.encode())


def check_golden():
    """The golden values docs/DATA.md and data/feature_hash_test.cc pin."""
    got = (hash_bytes(b""), hash_bytes(b"a"), feature_key("color", "red"),
           field_key("loan_amnt"))
    want = (0xEFD01F60BA992926, 0x82A2A958A9BECE5B, 0xD81372F21CAC90C2,
            0x8E2A2B982B4E8EDE)
    if got != want:
        raise SystemExit(f"sparse_common: the Python hash differs from Downpour's "
                         f"golden values: {[hex(g) for g in got]}")


def tokens(text):
    """Runs of [a-z0-9] after ASCII lower-casing; any other byte separates."""
    out, cur = [], bytearray()
    for c in text.encode():
        if 48 <= c <= 57 or 97 <= c <= 122:
            cur.append(c)
        elif 65 <= c <= 90:
            cur.append(c + 32)
        elif cur:
            out.append(bytes(cur))
            cur = bytearray()
    if cur:
        out.append(bytes(cur))
    return out


def f32(x):
    return float(np.float32(x))


# ---- CSV rows to keys (data/sparse_csv_reader.cc) ----------------------------

def read_csv(path):
    """Header and rows (lists of fields) of a CSV file."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], [r for r in rows[1:] if r]


def quantile_bounds(values, buckets):
    """v[floor(j n / B)] for j = 1..B-1 over the sorted float32 values, repeats removed."""
    v = sorted(values)
    n = len(v)
    bounds = []
    for j in range(1, buckets):
        b = v[j * n // buckets]
        if not bounds or b > bounds[-1]:
            bounds.append(b)
    return bounds


def csv_plan(header, rows, kinds, quantile_buckets):
    """kinds: column -> categorical|text|numeric|bucketize|ignore|label.
    Bucket boundaries come from `rows` (the training file's, as Downpour does)."""
    bounds = {}
    for c, name in enumerate(header):
        if kinds[name] == "bucketize":
            vals = [f32(r[c]) for r in rows if r[c].strip().lower() not in MISSING]
            bounds[name] = quantile_bounds(vals, quantile_buckets)
    return bounds


def csv_row_keys(header, row, kinds, bounds):
    """{key: value} of one CSV row, with float32 values, zero sums dropped."""
    out = {}
    for name, field in zip(header, row):
        kind = kinds[name]
        if kind in ("label", "ignore"):
            continue
        tok = field.strip()
        if tok.lower() in MISSING:
            continue
        if kind == "categorical":
            pairs = [(feature_key(name, tok), 1.0)]
        elif kind == "text":
            pairs = [(hash_bytes(name.encode() + FIELD_SEP + t), 1.0) for t in tokens(field)]
        elif kind == "numeric":
            pairs = [(field_key(name), f32(tok))]
        elif kind == "bucketize":
            v = f32(tok)
            i = sum(1 for b in bounds[name] if b <= v)
            pairs = [(feature_key(name, f"b{i}"), 1.0)]
        else:
            raise ValueError(f"column {name}: unknown kind {kind}")
        for k, v in pairs:
            out[k] = f32(out.get(k, 0.0) + v)
    return {k: v for k, v in out.items() if v != 0.0}


# ---- LIBSVM files -------------------------------------------------------------

def read_libsvm(path):
    """[(label, {index: float32 value})] of a LIBSVM file (64-bit indices kept)."""
    with open(path) as f:
        return read_libsvm_lines(f)


def read_libsvm_lines(lines):
    """As read_libsvm, of an iterable of lines."""
    out = []
    for line in lines:
        parts = line.split("#", 1)[0].split()
        if not parts:
            continue
        feats = {}
        for p in parts[1:]:
            k, v = p.split(":", 1)
            if k == "qid":
                continue
            k = int(k)
            feats[k] = f32(feats.get(k, 0.0) + f32(float(v)))
        out.append((float(parts[0]), {k: v for k, v in feats.items() if v != 0.0}))
    return out


def write_libsvm(path, examples):
    """examples: [(label int, {index: value})], indices ascending on write."""
    with open(path, "w") as f:
        for label, feats in examples:
            items = " ".join(f"{k}:{v:.9g}" for k, v in sorted(feats.items()))
            f.write(f"{label} {items}".rstrip() + "\n")


# ---- metrics --------------------------------------------------------------------

def binary_metrics(y, p):
    from sklearn import metrics
    y = np.asarray(y, dtype=np.int64)
    p = np.clip(np.asarray(p, dtype=np.float64), 1e-15, 1 - 1e-15)
    return {"auc": float(metrics.roc_auc_score(y, p)),
            "logloss": float(metrics.log_loss(y, p, labels=[0, 1])),
            "accuracy": float(np.mean((p >= 0.5) == (y == 1)))}


def sigmoid(m):
    return 1.0 / (1.0 + math.exp(-m)) if m >= 0 else math.exp(m) / (1.0 + math.exp(m))


# ---- ps checkpoints (server/checkpoint.h) ------------------------------------

def read_checkpoint(path):
    """{"blocks": {id: values}, "tables": {id: (keys, values)}} of one file."""
    raw = open(path, "rb").read()
    if raw[:8] != b"DPNCKPT\0":
        raise ValueError(f"{path}: not a Downpour checkpoint")
    fmt, = struct.unpack_from("<I", raw, 8)
    if fmt != 4:
        raise ValueError(f"{path}: format {fmt}; this reader knows format 4")
    off = 48
    k, = struct.unpack_from("<I", raw, off)
    off += 4 + k
    s, = struct.unpack_from("<I", raw, off)
    off += 4 + s * (4 + 8 + 8)
    b, = struct.unpack_from("<I", raw, off)
    off += 4
    blocks = {}
    for _ in range(b):
        bid, _ver, n, m = struct.unpack_from("<IQQQ", raw, off)
        off += 28
        blocks[bid] = np.frombuffer(raw, "<f4", n, off).copy()
        off += 4 * (n + m)
    t, = struct.unpack_from("<I", raw, off)
    off += 4
    tables = {}
    for _ in range(t):
        tid, dim, slots, _opt, r = struct.unpack_from("<IIIIQ", raw, off)
        off += 24
        keys = np.frombuffer(raw, "<u8", r, off).copy()
        off += 8 * r + 4 * r  # keys, versions
        data = np.frombuffer(raw, "<f4", r * dim * (1 + slots), off).reshape(r, dim * (1 + slots))
        off += 4 * r * dim * (1 + slots)
        tables[tid] = (keys, data[:, :dim].copy())
    if off != len(raw) - 4:
        raise ValueError(f"{path}: {len(raw) - 4 - off} bytes left over after the tables")
    return {"blocks": blocks, "tables": tables}


def final_model(run_dir):
    """(bias, {key: weight}) from the newest checkpoint of every ps in run_dir."""
    bias, weights = None, {}
    shards = sorted(glob.glob(os.path.join(run_dir, "checkpoints", "ps-*")))
    if not shards:
        raise FileNotFoundError(f"{run_dir}/checkpoints: no ps-* folders")
    for shard in shards:
        files = sorted(glob.glob(os.path.join(shard, "*.ckpt")))
        if not files:
            raise FileNotFoundError(f"{shard}: no checkpoint")
        c = read_checkpoint(files[-1])
        if 0 in c["blocks"]:
            bias = float(c["blocks"][0][0])
        for keys, vals in c["tables"].values():
            for key, v in zip(keys.tolist(), vals[:, 0].tolist()):
                weights[key] = v
    if bias is None:
        raise ValueError(f"{run_dir}: no checkpoint holds the bias block")
    return bias, weights


def evaluate(bias, weights, examples):
    """Metrics of the model on [(label, {key: value})] (label > 0: positive)."""
    y, p = [], []
    for label, feats in examples:
        m = bias + sum(float(np.float64(weights.get(k, 0.0))) * v for k, v in feats.items())
        y.append(1 if label > 0 else 0)
        p.append(sigmoid(m))
    return binary_metrics(y, p)

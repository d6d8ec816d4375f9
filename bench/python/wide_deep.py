#!/usr/bin/python3
"""Wide & deep on lending_club three ways (issue 47, targets 1 and 3).

    bench/python/wide_deep.py [--bin_dir bazel-bin] [--data data]
        [--out run/wide_deep] [--rows cpp,ps,local]
        [--config deploy/configs/lending_club_wide_deep.yaml]
        [--set section.key=value ...]   (more overrides, for every row)

Needs ./deploy/fetch_data.sh lending_club, the daemons in --bin_dir (bazel
build //deploy:launcher //coordinator //server:ps_server //worker:ps_worker
//tools:psctl), protoc, and Debian's python3-torch, -numpy, -grpcio,
-protobuf, -yaml and -sklearn. Run it from the repository root.

One fixed split (bench/parity/sparse_split.py lending_club: stratified 80/20,
seed 42) into OUT/split, then the same model (the YAML's wide_deep: FTRL
weights of dim 1 and embeddings of dim 8 on the ps, an MLP [176, 32, 16, 1]
on their per-field pooling, margin = the weights' sum + the MLP's output)
trained three ways with the YAML's batch size, epochs and rates:

  cpp    the C++ wide_deep worker: the launcher, 2 workers, 2 ps, every
         address 127.0.0.1:0, data.path/test_path the split's csv files.
  ps     WideDeep below, a torch nn.Module whose tables are
         downpour.torch.EmbeddingBag and whose MLP is bound by DenseOnPs, in
         2 Python worker processes (Client index 0 and 1, each on the data
         part the coordinator gives it, 1 torch thread each) against a
         coordinator and 2 ps_server started from --bin_dir with the same
         YAML and overrides (so the ps applies the same rules: FTRL on the
         rows, adagrad on the MLP). A step pulls each table's rows and
         pushes once (downpour.torch.step: both tables' rows and the MLP's
         gradient in one request per ps), as the C++ worker does.
  local  the same nn.Module in one process, its tables torch.nn.EmbeddingBag
         (sparse gradients), trained with the ps's rules written in torch
         (FTRL-Proximal per touched row, as server/ftrl_math.h) and
         torch.optim.Adagrad for the MLP, from the ps's initial values
         (common/model_spec.cc, common/sparse_keys.h): once with 1 thread,
         once with as many threads as the machine has cores (torch's
         default may be 1: it is on a 2-core VM).

Gradients as the C++ worker's (worker/sparse_loop.cc): a key's is summed over
the batch's examples, the MLP's is the batch mean. Every CSV column here
gives one key, so a field pools one entry and mean pooling is x_i / 1.

Test AUC, for every row: sklearn's roc_auc_score of WideDeep's margins on
OUT/split/test.csv from the final model: cpp's from its ps checkpoints
(psctl export), ps's pulled from the ps after both workers finished, local's
from the module. examples/s: examples whose gradients were pushed (local:
applied) over the training time, the slowest worker's (cpp: the workers' own
examples / examples_per_sec); seconds: that time.

Prints the checks, a markdown table, and one JSON line per row. Checks:
k64_rows_differing (this script's keys, by downpour.feature_hash, against
sparse_split.py's key files, row by row: 0), cpp_keys_equal and
cpp_bounds_equal (the training keys and bucket bounds against the C++
reader's, read from cpp's export), mlp_init_equal and embedding_init_equal
(the ps's initial values against this script's, which `local` starts from),
ps_pulled_equals_checkpoint (the state `ps` pulled against its checkpoints).
"""

import argparse
import csv
import json
import multiprocessing as mp
import os
import queue
import shutil
import subprocess
import sys
import time
from collections import namedtuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
MISSING = ("", "?", "na", "nan", "n/a")  # data/reader_internal.h, lower-cased
LOCAL = "127.0.0.1:0"
U64 = np.uint64


# ---- the job: the YAML with the --set overrides ---------------------------

def load_doc(path, sets):
    """The YAML at `path` with `sets` ("section.key=value") applied, as
    downpour.config reads a worker's --set (setup_package first)."""
    from downpour import config
    return config.load(path, sets).doc


class Job:
    """The keys of a wide_deep YAML the Python learners use."""

    def __init__(self, doc):
        d, t, o = doc["data"], doc["training"], doc["optimizer"]
        w = doc.get("wide_deep") or {}
        if d.get("text") or o["type"] != "ftrl":
            raise SystemExit("wide_deep.py: needs optimizer.type ftrl and no "
                             "text columns (one key per field)")
        # Fields in the C++ order (worker/sparse_data.cc SparseColumnsOf).
        self.columns = ([(c, "categorical") for c in d.get("categorical", [])]
                        + [(c, "numeric") for c in d.get("numeric", [])]
                        + [(c, "bucketize") for c in d.get("bucketize", [])])
        self.label, self.classes = d["label_column"], d["classes"]
        self.quantile_buckets = d.get("quantile_buckets", 10)
        self.batch, self.epochs = t["batch_size"], t["epochs"]
        self.seed = t.get("seed", 42)
        self.init_seed = doc["model"].get("init_seed", 1)
        self.dim, self.hidden = w.get("dim", 8), w.get("hidden", [32, 16])
        self.init_scale = w.get("init_scale", 0.01)
        alpha = o["learning_rate"]
        self.wide_rule = (alpha, o.get("ftrl_beta", 1.0), o.get("l1", 0.0),
                          o.get("l2", 0.0))
        self.deep_rule = (w.get("learning_rate", 0) or alpha,
                          o.get("ftrl_beta", 1.0), w.get("l1", 0.0),
                          w.get("l2", 0.0))
        self.mlp_lr = w.get("mlp_learning_rate", 0) or alpha
        self.epsilon = o.get("epsilon", 1e-8)

    @property
    def sizes(self):
        return [len(self.columns) * self.dim] + list(self.hidden) + [1]


# ---- data: CSV rows to Downpour's keys -----------------------------------

Examples = namedtuple("Examples", ["keys", "values", "present", "y"])
Examples.__doc__ = """keys uint64 [n, fields], values float32 [n, fields],
present bool [n, fields] (a missing value adds no key), y float32 [n]."""


def read_csv(path):
    with open(path, newline="") as f:
        rows = [r for r in csv.reader(f) if r]
    return rows[0], rows[1:]


def quantile_bounds(values, buckets):
    """data/sparse_csv_reader.cc: v[j n / B] of the sorted float32 values,
    j = 1..B-1, repeats removed."""
    v = np.sort(np.asarray(values, dtype=np.float32))
    bounds = []
    for j in range(1, buckets):
        b = float(v[j * len(v) // buckets])
        if not bounds or b > bounds[-1]:
            bounds.append(b)
    return bounds


def plan(job, header, rows):
    """{column: bucket bounds} of the bucketized columns, from `rows`."""
    bounds = {}
    for name, kind in job.columns:
        if kind == "bucketize":
            c = header.index(name)
            bounds[name] = quantile_bounds(
                [r[c] for r in rows if r[c].strip().lower() not in MISSING],
                job.quantile_buckets)
    return bounds


def cell_key(fh, name, kind, token, bounds):
    """(key, value) of one present CSV cell, as the C++ reader adds it."""
    if kind == "categorical":
        return fh.feature_key(name, token), 1.0
    v = float(np.float32(token))
    if kind == "numeric":
        return fh.field_key(name), v
    bucket = int(np.searchsorted(bounds[name], v, side="right"))
    return fh.feature_key(name, "b%d" % bucket), 1.0


def encode(job, fh, header, rows, bounds):
    """The Examples of CSV `rows` (keys by downpour.feature_hash)."""
    n, fields = len(rows), len(job.columns)
    ex = Examples(np.zeros((n, fields), U64),
                  np.zeros((n, fields), np.float32),
                  np.zeros((n, fields), bool), np.zeros(n, np.float32))
    cache = {}
    label = header.index(job.label)
    for f, (name, kind) in enumerate(job.columns):
        c = header.index(name)
        for i, row in enumerate(rows):
            token = row[c].strip()
            if token.lower() in MISSING:
                continue
            if (f, token) not in cache:
                cache[f, token] = cell_key(fh, name, kind, token, bounds)
            ex.keys[i, f], ex.values[i, f] = cache[f, token]
            ex.present[i, f] = True
    for i, row in enumerate(rows):
        ex.y[i] = job.classes.index(row[label].strip())
    return ex


def load_split(job, fh, split):
    """(train, test Examples, bounds): the bounds from train.csv, as the
    C++ reader computes them from data.path."""
    header, train = read_csv(os.path.join(split, "train.csv"))
    _, test = read_csv(os.path.join(split, "test.csv"))
    bounds = plan(job, header, train)
    return (encode(job, fh, header, train, bounds),
            encode(job, fh, header, test, bounds), bounds)


def check_k64(ex, path):
    """Rows whose key set differs from sparse_split.py's LIBSVM of keys."""
    bad = 0
    with open(path) as f:
        for i, line in enumerate(f):
            keys = {int(p.split(":")[0]) for p in line.split()[1:]}
            bad += keys != set(ex.keys[i][ex.present[i]].tolist())
    return bad


# ---- batches and the model ------------------------------------------------

Batch = namedtuple("Batch", ["keys", "example_offsets", "bag_offsets",
                             "weights", "y", "n"])


def make_batch(ex, rows):
    """The examples `rows` as EmbeddingBag input: the present keys in
    (example, field) order (int64 tensors of the uint64 bits), offsets of
    each example's keys (the wide sum) and of each (example, field) bag
    (the deep pooling), and each key's value as its weight."""
    present = ex.present[rows]
    keys = np.ascontiguousarray(ex.keys[rows][present]).view(np.int64)

    def offsets(counts):
        return torch.from_numpy(np.concatenate(
            [[0], np.cumsum(counts)[:-1]]).astype(np.int64))
    return Batch(torch.from_numpy(keys), offsets(present.sum(1)),
                 offsets(present.reshape(-1).astype(np.int64)),
                 torch.from_numpy(ex.values[rows][present]),
                 torch.from_numpy(ex.y[rows]), len(rows))


class WideDeep(nn.Module):
    """margin = sum_i w_i x_i + MLP(pool_1, ..., pool_F) (model/
    wide_deep_math.h): `wide` a bag of dim 1 summing each example's weights
    times values, `deep` a bag of dim `dim` pooling each field's
    embeddings; the MLP's layers are the ps's fc1, fc2, ... (ReLU between)."""

    def __init__(self, wide, deep, sizes):
        super().__init__()
        self.wide, self.deep = wide, deep
        layers = []
        for a, b in zip(sizes, sizes[1:]):
            layers += [nn.Linear(a, b), nn.ReLU()]
        self.mlp = nn.Sequential(*layers[:-1])
        self.inputs = sizes[0]

    def forward(self, b):
        wide = self.wide(b.keys, b.example_offsets, b.weights).reshape(-1)
        pooled = self.deep(b.keys, b.bag_offsets, b.weights)
        return wide + self.mlp(pooled.reshape(b.n, self.inputs)).reshape(-1)


def backward(model, b):
    """The summed loss's backward; the MLP's gradient then made the batch
    mean (the C++ worker pushes a key's summed gradient, the MLP's mean)."""
    loss = F.binary_cross_entropy_with_logits(model(b), b.y, reduction="sum")
    loss.backward()
    for p in model.mlp.parameters():
        p.grad /= b.n
    return loss.item()


def margins(model, ex):
    model.eval()
    with torch.no_grad():
        return model(make_batch(ex, np.arange(len(ex.y)))).numpy()


def load_mlp(mlp, tensors):
    """Copies {fc{l}.weight [in, out], fc{l}.bias} into the nn.Linears."""
    linears = [m for m in mlp if isinstance(m, nn.Linear)]
    with torch.no_grad():
        for l, lin in enumerate(linears, 1):
            lin.weight.copy_(torch.from_numpy(
                np.asarray(tensors["fc%d.weight" % l], np.float32).T))
            lin.bias.copy_(torch.from_numpy(
                np.asarray(tensors["fc%d.bias" % l], np.float32)))


class LocalBag(nn.Module):
    """torch.nn.EmbeddingBag (sum, sparse gradient) over the uint64 keys
    `vocab` (sorted), taking keys as downpour.torch.EmbeddingBag does."""

    def __init__(self, vocab, rows):
        super().__init__()
        self.vocab = vocab
        self.bag = nn.EmbeddingBag(len(vocab), rows.shape[1], mode="sum",
                                   sparse=True)
        with torch.no_grad():
            self.bag.weight.copy_(torch.from_numpy(rows))

    def forward(self, keys, offsets, per_sample_weights):
        k = keys.numpy().view(U64)
        idx = np.minimum(np.searchsorted(self.vocab, k), len(self.vocab) - 1)
        if not np.array_equal(self.vocab[idx], k):
            raise KeyError("LocalBag: a key outside its vocabulary")
        return self.bag(torch.from_numpy(idx.astype(np.int64)), offsets,
                        per_sample_weights=per_sample_weights)


# ---- the ps's initial values, re-done in NumPy ------------------------------

def splitmix(x):
    """common/sparse_keys.h SplitMix64 (= model_spec.cc Mix), elementwise."""
    with np.errstate(over="ignore"):
        z = np.asarray(x, U64) + U64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> U64(30))) * U64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> U64(27))) * U64(0x94D049BB133111EB)
    return z ^ (z >> U64(31))


def embedding_init(keys, dim, scale, init_seed):
    """SparseInitialValue of table 1 (seed init_seed ^ 1 << 32), [keys,
    dim]."""
    seed = np.array([init_seed ^ (1 << 32)], U64)
    with np.errstate(over="ignore"):
        base = splitmix(seed ^ splitmix(np.asarray(keys, U64)))
        bits = splitmix(base[:, None] + np.arange(dim, dtype=U64))
    u = (bits >> U64(40)).astype(np.float64) / float(1 << 24)
    return ((2.0 * u - 1.0) * scale).astype(np.float32)


def mlp_init(sizes, init_seed):
    """ModelSpec::InitBlock of every fc tensor: uniform +-sqrt(6 / fan_in)
    from Mix(Mix(seed) ^ flat offset); biases 0."""
    base = splitmix(np.array([init_seed], U64))
    tensors, offset = {}, 0
    for l, (a, b) in enumerate(zip(sizes, sizes[1:]), 1):
        r = splitmix(base ^ (np.arange(a * b, dtype=U64) + U64(offset)))
        u = (r >> U64(11)).astype(np.float64) / 9007199254740992.0
        tensors["fc%d.weight" % l] = ((2 * u - 1) * np.sqrt(6.0 / a)).astype(
            np.float32).reshape(a, b)
        tensors["fc%d.bias" % l] = np.zeros(b, np.float32)
        offset += a * b + b
    return tensors


# ---- local training: the ps's rules in torch --------------------------------

class Ftrl:
    """FTRL-Proximal per row (McMahan et al. 2013) on the rows a sparse
    gradient touches, as server/ftrl_math.h FtrlOne: rule = (alpha, beta,
    l1, l2); z and n start at 0, the weight at its initial value."""

    def __init__(self, weight, rule):
        self.weight, self.rule = weight, rule
        self.z = torch.zeros_like(weight, requires_grad=False)
        self.n = torch.zeros_like(weight, requires_grad=False)

    @torch.no_grad()
    def step(self):
        alpha, beta, l1, l2 = self.rule
        g = self.weight.grad.coalesce()
        rows, gv = g.indices()[0], g.values()
        w = self.weight.data[rows].double()
        n_old = self.n[rows].double()
        n_new = n_old + gv.double() ** 2
        sigma = (n_new.sqrt() - n_old.sqrt()) / alpha
        z = (self.z[rows] + gv).double() - sigma * w
        value = -(z - torch.sign(z) * l1) / (
            (beta + n_new.sqrt()) / alpha + l2)
        self.weight.data[rows] = torch.where(
            z.abs() <= l1, torch.zeros_like(value), value).float()
        self.z[rows], self.n[rows] = z.float(), n_new.float()
        self.weight.grad = None


def local_model(job, vocab):
    """WideDeep on LocalBags, at the ps's initial values."""
    model = WideDeep(LocalBag(vocab, np.zeros((len(vocab), 1), np.float32)),
                     LocalBag(vocab, embedding_init(vocab, job.dim,
                                                    job.init_scale,
                                                    job.init_seed)),
                     job.sizes)
    load_mlp(model.mlp, mlp_init(job.sizes, job.init_seed))
    return model


def train_local(job, train, test, threads):
    """Row `local`: one process, torch.set_num_threads(threads). Returns
    the row's figures and the test margins."""
    torch.set_num_threads(threads)
    vocab = np.unique(np.concatenate([train.keys[train.present],
                                      test.keys[test.present]]))
    model = local_model(job, vocab)
    rules = [Ftrl(model.wide.bag.weight, job.wide_rule),
             Ftrl(model.deep.bag.weight, job.deep_rule),
             torch.optim.Adagrad(model.mlp.parameters(), lr=job.mlp_lr,
                                 eps=job.epsilon)]
    rng = np.random.default_rng(job.seed)
    examples, t0 = 0, time.monotonic()
    for _ in range(job.epochs):
        order = rng.permutation(len(train.y))
        for start in range(0, len(order), job.batch):
            b = make_batch(train, order[start:start + job.batch])
            backward(model, b)
            for rule in rules:
                rule.step()
            rules[2].zero_grad()
            examples += b.n
    seconds = time.monotonic() - t0
    return {"examples": examples, "train_seconds": seconds,
            "threads": torch.get_num_threads()}, margins(model, test)


# ---- the ps row: daemons and two Python workers -----------------------------

class Daemons:
    """A coordinator and `num_ps` ps_server of the YAML, on ephemeral
    ports; `address` is the coordinator's."""

    def __init__(self, bin_dir, config, sets, run_dir, num_ps):
        self.bin_dir, self.config, self.run_dir = bin_dir, config, run_dir
        self.procs = []
        self.sets = sets + ["checkpoint.dir=%s/checkpoints" % run_dir,
                            "coordinator.state_dir=%s/coordinator" % run_dir]
        port = self._start("coordinator", "coordinator/coordinator", [])
        self.address = "127.0.0.1:%d" % port
        self.sets.append("cluster.coordinator=" + self.address)
        for i in range(num_ps):
            self._start("ps-%d" % i, "server/ps_server", ["--index", str(i)])

    def _start(self, name, binary, args):
        port_file = os.path.join(self.run_dir, name + ".port")
        command = [os.path.join(self.bin_dir, binary), "--config",
                   self.config, "--port_file", port_file] + args
        for s in self.sets:
            command += ["--set", s]
        with open(os.path.join(self.run_dir, name + ".log"), "w") as log:
            self.procs.append(subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT))
        deadline = time.monotonic() + 60
        while not os.path.exists(port_file) or not open(port_file).read():
            if (self.procs[-1].poll() is not None or
                    time.monotonic() > deadline):
                raise SystemExit("wide_deep.py: %s did not start; see %s.log"
                                 % (name, os.path.join(self.run_dir, name)))
            time.sleep(0.05)
        return int(open(port_file).read())

    def stop(self):
        """The ps first (each writes its last checkpoint), then the
        coordinator."""
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def my_rows(client, n):
    """The rows i % num_parts in the client's data parts (the C++
    worker's PartitionRows), else i % 2 == index."""
    parts, num = list(client.partition.parts), client.partition.num_parts
    if not num:
        parts, num = [client.index], 2
    return np.nonzero(np.isin(np.arange(n) % num, parts))[0]


def init_check(client, job, train):
    """Whether the ps's initial MLP and embedding rows are mlp_init's and
    embedding_init's (so that row `local` starts where the ps starts)."""
    params, _ = client.pull()
    want = mlp_init(job.sizes, job.init_seed)
    dense = all(np.array_equal(view, want[name].reshape(-1))
                for name, view in client.tensors(params).items())
    keys = np.unique(train.keys[train.present])
    rows, _ = client.pull_sparse(1, keys)
    return {"mlp_init_equal": bool(dense), "embedding_init_equal":
            bool(np.array_equal(rows, embedding_init(
                keys, job.dim, job.init_scale, job.init_seed)))}


def ps_epochs(client, model, dense, job, train):
    """Trains on the client's rows; returns (examples pushed, seconds,
    pushes). A step's rows of both tables and the MLP's gradient go in one
    push (downpour.torch.step), as the C++ worker's one push a step."""
    import downpour.torch
    rows = my_rows(client, len(train.y))
    rng = np.random.default_rng(job.seed + 7919 * client.index)
    examples, steps, pushes, t0 = 0, 0, 0, time.monotonic()
    for _ in range(job.epochs):
        order = rng.permutation(rows)
        for start in range(0, len(order), job.batch):
            b = make_batch(train, order[start:start + job.batch])
            model.train()
            backward(model, b)
            result = downpour.torch.step(model.wide, model.deep, dense)
            pushes += result is not None
            if result is not None and not result.refused:
                examples += b.n
            steps += 1
            client.report(steps=steps, examples=examples)
    return examples, time.monotonic() - t0, pushes


def ps_worker(index, pkg, doc, coordinator, data, barrier, results):
    """One Python worker process of row `ps` (Client index `index`)."""
    sys.path.insert(0, pkg)
    torch.set_num_threads(1)
    import downpour
    from downpour.config import JobConfig
    from downpour.torch import DenseOnPs, EmbeddingBag
    job, (train, test) = Job(doc), data
    client = downpour.Client(JobConfig(doc), index=index,
                             coordinator=coordinator)
    model = WideDeep(EmbeddingBag(client, 0, 1), EmbeddingBag(client, 1,
                                                              job.dim),
                     job.sizes)
    dense = DenseOnPs(model.mlp, client)
    if index == 0:
        results.put(("init", init_check(client, job, train)))
    barrier.wait()
    examples, seconds, pushes = ps_epochs(client, model, dense, job, train)
    barrier.wait()  # both done: the final state
    out = {"examples": examples, "train_seconds": seconds, "pushes": pushes}
    if index == 0:
        dense.fetch()
        out["margins"] = margins(model, test)
    client.finish()
    results.put(("done", index, out))


def collect(procs, results, want):
    """`want` messages from the workers; SystemExit when one died first."""
    got = []
    while len(got) < want:
        try:
            got.append(results.get(timeout=2))
        except queue.Empty:
            dead = [p for p in procs if p.exitcode not in (None, 0)]
            if dead:
                raise SystemExit("wide_deep.py: a ps worker exited with "
                                 "status %d" % dead[0].exitcode)
    return got


def run_ps(args, sets, pkg, data, run_dir):
    """Row `ps`: the daemons, two worker processes; (row, margins, init,
    the model exported from the ps's last checkpoints)."""
    fresh(run_dir)
    daemons = Daemons(args.bin_dir, args.config, sets, run_dir, 2)
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(2, timeout=1800), ctx.Queue()
    procs = [ctx.Process(target=ps_worker, args=(
        i, pkg, load_doc(args.config, daemons.sets), daemons.address, data,
        barrier, results)) for i in range(2)]
    try:
        for p in procs:
            p.start()
        got = collect(procs, results, 3)
        for p in procs:
            p.join(timeout=60)
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
        daemons.stop()
    tensors = export(args, sets, os.path.join(run_dir, "checkpoints"),
                     os.path.join(run_dir, "model.npz"))
    init = [m[1] for m in got if m[0] == "init"][0]
    done = [m[2] for m in got if m[0] == "done"]
    seconds = max(d["train_seconds"] for d in done)
    row = {"examples": sum(d["examples"] for d in done),
           "train_seconds": seconds,
           "pushes": sum(d["pushes"] for d in done)}
    return (row, [d for d in done if "margins" in d][0]["margins"], init,
            tensors)


# ---- the cpp row: the launcher --------------------------------------------

def run_cpp(args, sets, run_dir):
    """Row `cpp`: the launcher, then psctl export of its checkpoints.
    Returns (row, the exported model's tensors)."""
    fresh(run_dir)
    flags = [a for s in sets for a in ("--set", s)]
    with open(os.path.join(run_dir, "launcher.log"), "w") as log:
        rc = subprocess.call(
            [os.path.join(args.bin_dir, "deploy/launcher"), "--bin_dir",
             args.bin_dir, "--config", args.config, "--run_dir", run_dir,
             "--progress_s", "3600"] + flags, stdout=log,
            stderr=subprocess.STDOUT)
    with open(os.path.join(run_dir, "summary.json")) as f:
        summary = json.load(f)
    tensors = export(args, sets, os.path.join(run_dir, "checkpoints"),
                     os.path.join(run_dir, "model.npz"))
    workers = summary["workers"]
    row = {"examples": sum(w["examples"] for w in workers),
           "train_seconds": max(w["examples"] / w["examples_per_sec"]
                                for w in workers),
           "launcher_rc": rc, "launcher_seconds": summary["seconds"],
           "summary_auc": summary["metrics"]["auc"]}
    return row, tensors


def fresh(run_dir):
    """An empty run_dir (a ps would restore an old run's checkpoints)."""
    if os.path.isdir(run_dir):
        shutil.rmtree(run_dir)
    os.makedirs(run_dir)


def export(args, sets, checkpoint_dir, npz):
    """psctl export of the ps checkpoints: {tensor name: array}."""
    subprocess.check_call(
        [os.path.join(args.bin_dir, "tools/psctl"), "export", "--config",
         args.config, "--checkpoint_dir", checkpoint_dir, "--out", npz] +
        [a for s in sets for a in ("--set", s)], stdout=subprocess.DEVNULL)
    with np.load(npz) as z:
        return {k: z[k] for k in z.files}


def cpp_model(job, tensors, vocab):
    """WideDeep on LocalBags holding the exported model (a key without a
    weight weighs 0; one without an embedding row has its initial one)."""
    model = local_model(job, vocab)
    with torch.no_grad():
        for bag, keys, rows in ((model.wide, tensors["keys"],
                                 tensors["weights"].reshape(-1, 1)),
                                (model.deep, tensors["embedding_keys"],
                                 tensors["embeddings"])):
            at = torch.from_numpy(
                np.searchsorted(vocab, keys).astype(np.int64))
            bag.bag.weight[at] = torch.from_numpy(rows)
    load_mlp(model.mlp, tensors)
    return model


def cpp_checks(tensors, train, bounds):
    """The C++ reader's keys (every training key has an embedding row) and
    bucket bounds against this script's."""
    meta = json.loads(str(tensors["meta"]))
    theirs = {c["name"]: c["boundaries"] for c in meta["data"]["columns"]
              if c["boundaries"]}
    return {"cpp_keys_equal": set(tensors["embedding_keys"].tolist()) ==
            set(train.keys[train.present].tolist()),
            "cpp_bounds_equal": all(
                np.array_equal(np.float32(theirs[k]), np.float32(v))
                for k, v in bounds.items())}


# ---- main ------------------------------------------------------------------

def setup_package(out):
    """python/downpour importable from OUT/pkg (python/checkout_package.py);
    returns that folder."""
    sys.path.insert(0, os.path.join(REPO, "python"))
    import checkout_package
    return checkout_package.install(out)


def auc(y, margin):
    from sklearn.metrics import roc_auc_score
    return float(roc_auc_score(y, margin))


def print_rows(rows):
    print("| learner | workers | test AUC | examples/s | seconds |")
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        print("| %s | %d | %.4f | %.0f | %.1f |" % (
            r["learner"], r["workers"], r["auc"], r["examples_per_sec"],
            r["train_seconds"]))
    for r in rows:
        print(json.dumps(r, sort_keys=True))


def finish_row(learner, workers, row, y, margin):
    row.update(learner=learner, workers=workers, auc=round(auc(y, margin), 6),
               examples_per_sec=round(row["examples"] / row["train_seconds"],
                                      1))
    row["train_seconds"] = round(row["train_seconds"], 2)
    return row


Setup = namedtuple("Setup", ["args", "sets", "pkg", "job", "train", "test",
                             "bounds", "vocab", "checks"])


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="deploy/configs/lending_club_wide_deep"
                    ".yaml")
    ap.add_argument("--bin_dir", default="bazel-bin")
    ap.add_argument("--data", default="data")
    ap.add_argument("--out", default="run/wide_deep")
    ap.add_argument("--rows", default="cpp,ps,local")
    ap.add_argument("--set", action="append", default=[],
                    help="more section.key=value overrides, for every row")
    args = ap.parse_args()
    args.out, args.bin_dir = os.path.abspath(args.out), os.path.abspath(
        args.bin_dir)
    return args


def prepare(args):
    """The split, the package, the overrides, the examples and their checks."""
    split = os.path.join(args.out, "split")
    subprocess.check_call([sys.executable, os.path.join(
        REPO, "bench/parity/sparse_split.py"), "lending_club", "--out", split,
        "--data", args.data], stdout=subprocess.DEVNULL)
    pkg = setup_package(args.out)
    from downpour import feature_hash
    sets = ["data.path=%s/train.csv" % split,
            "data.test_path=%s/test.csv" % split,
            "cluster.workers=[%s, %s]" % (LOCAL, LOCAL),
            "cluster.ps=[%s, %s]" % (LOCAL, LOCAL),
            "cluster.coordinator=" + LOCAL,
            "training.stop_at_target=false"] + args.set
    job = Job(load_doc(args.config, sets))
    train, test, bounds = load_split(job, feature_hash, split)
    checks = {"k64_rows_differing": check_k64(train, split + "/train.k64") +
              check_k64(test, split + "/test.k64")}
    vocab = np.unique(np.concatenate([train.keys[train.present],
                                      test.keys[test.present]]))
    return Setup(args, sets, pkg, job, train, test, bounds, vocab, checks)


def cpp_rows(s):
    row, tensors = run_cpp(s.args, s.sets, os.path.join(s.args.out, "cpp"))
    s.checks.update(cpp_checks(tensors, s.train, s.bounds))
    return [finish_row("C++ wide_deep worker", 2, row, s.test.y, margins(
        cpp_model(s.job, tensors, s.vocab), s.test))]


def ps_rows(s):
    row, margin, init, tensors = run_ps(s.args, s.sets, s.pkg,
                                        (s.train, s.test),
                                        os.path.join(s.args.out, "ps"))
    s.checks.update(init)
    # The pulled final state against its checkpoints, scored as cpp's.
    s.checks["ps_pulled_equals_checkpoint"] = bool(np.allclose(
        margin, margins(cpp_model(s.job, tensors, s.vocab), s.test),
        rtol=0, atol=1e-5))
    return [finish_row("PyTorch on the ps", 2, row, s.test.y, margin)]


def local_rows(s):
    default_threads, rows = torch.get_num_threads(), []
    for threads in sorted({1, os.cpu_count() or 1}):
        row, margin = train_local(s.job, s.train, s.test, threads)
        row["torch_default_threads"] = default_threads
        rows.append(finish_row("PyTorch in memory, %d thread%s" % (
            threads, "s" * (threads > 1)), 1, row, s.test.y, margin))
    return rows


def main():
    args = parse_args()
    setup = prepare(args)
    learners = {"cpp": cpp_rows, "ps": ps_rows, "local": local_rows}
    rows = [r for name in args.rows.split(",") for r in learners[name](setup)]
    print("checks: " + json.dumps(setup.checks, sort_keys=True))
    print_rows(rows)


if __name__ == "__main__":
    main()

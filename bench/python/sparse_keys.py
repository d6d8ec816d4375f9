#!/usr/bin/python3
"""Sparse keys per second: the Python client (python/downpour) against the
C++ worker's client (worker/grpc_ps_client.cc), same daemons, same round.

    bazel build -c opt //coordinator //server:ps_server //bench:sparse
    bench/python/sparse_keys.py [--reps 3] [--batches 200] [--batch 1024]

Starts one sparse_linear job's real daemons on 127.0.0.1 (a coordinator and
--shards ps, sparse_buckets 1024, FTRL, table 0 of dim 1) and, in each rep,
runs the two clients one after the other (the order alternates) over the same
Criteo-shaped key stream (bench/sparse's rpc stream: --batch examples of 39
Zipf-distributed fields a batch, sorted and de-duplicated, written by
`bazel-bin/bench/sparse --stream_out`):
  C++     bench/sparse --sections=rpc --coordinator=... as worker 1: per batch
          one PullRows of its keys and one PushWithRows of their gradients and
          the bias (as worker/sparse_loop.cc does);
  Python  downpour.Client as worker 0: per batch pull_sparse(0, keys) and
          push(bias gradient, sparse={0: (keys, gradients)}).
Prints unique keys per second per shard for pull and push, each client's
median over the reps, and the median of the reps' Python/C++ ratios (the
target: >= 0.5). The C++ figures leave out splitting a batch's keys by ps
(bench/sparse does it before it starts the clock); the Python ones include
it (pull_sparse and push take the keys as they come). Before
the reps one untimed C++ pass creates the stream's rows, so that no timed
pass creates rows. Clients and daemons share this machine's cores.

Needs Debian's python3-grpcio, python3-protobuf, python3-numpy, python3-yaml
and protoc (python/build_protos.sh generates the message modules in a
temporary folder). Environment: BIN_DIR (default bazel-bin).
"""

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def setup_package(tmp):
    """python/downpour importable from tmp (python/checkout_package.py)."""
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import checkout_package
    checkout_package.install(tmp)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Daemons:
    """The job's coordinator and ps processes (stopped by stop())."""

    def __init__(self, tmp, bin_dir, shards):
        self.coordinator = "127.0.0.1:%d" % free_port()
        data = os.path.join(tmp, "tiny.libsvm")
        with open(data, "w") as f:
            f.write("1 1:1\n0 2:1\n")
        self.config = os.path.join(tmp, "job.yaml")
        with open(self.config, "w") as f:
            f.write("cluster:\n  coordinator: %s\n  ps: [%s]\n"
                    "  workers: [127.0.0.1:0, 127.0.0.1:0]\n"
                    "rpc:\n  deadline_s: 30\n  connect_timeout_s: 20\n"
                    "model:\n  type: sparse_linear\n  task: binary\n"
                    "  sparse_buckets: 1024\n"
                    "optimizer:\n  type: ftrl\n"
                    "data:\n  source: libsvm\n  path: %s\n"
                    "coordinator:\n  state_dir: %s/coordinator\n"
                    "checkpoint:\n  dir: %s/ckpt\n  interval_s: 0\n" %
                    (self.coordinator, ", ".join(["127.0.0.1:0"] * shards),
                     data, tmp, tmp))
        self.procs = []
        self.tmp = tmp
        self.start(bin_dir, "coordinator/coordinator", "coordinator", [])
        for i in range(shards):
            self.start(bin_dir, "server/ps_server", "ps-%d" % i,
                       ["--index", str(i)])

    def start(self, bin_dir, binary, name, args):
        with open(os.path.join(self.tmp, name + ".log"), "w") as log:
            self.procs.append(subprocess.Popen(
                [os.path.join(bin_dir, binary), "--config", self.config] +
                args, stdout=log, stderr=subprocess.STDOUT))

    def stop(self):
        for p in reversed(self.procs):
            p.terminate()
        for p in self.procs:
            p.wait()


def cpp_pass(sparse_bin, daemons, args, stream):
    """One timed pass of the C++ client: (pull, push) keys/s per shard."""
    out = subprocess.run(
        [sparse_bin, "--sections=rpc", "--coordinator=" + daemons.coordinator,
         "--worker_index=1", "--shards=%d" % args.shards, "--dims=1",
         "--reps=1", "--batches=%d" % args.batches, "--batch=%d" % args.batch,
         "--keys=%d" % args.keys, "--stream_out=" + stream],
        check=True, capture_output=True, text=True).stdout
    # "dim shards pull push ..." under the rpc header.
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[:2] == ["1", str(args.shards)]:
            return float(fields[2]), float(fields[3])
    raise RuntimeError("no rpc row in bench/sparse's output:\n" + out)


def read_stream(path):
    import numpy as np
    raw = open(path, "rb").read()
    batches, at = [], 0
    while at < len(raw):
        (count,) = np.frombuffer(raw, dtype="<u4", count=1, offset=at)
        at += 4
        batches.append(np.frombuffer(raw, dtype="<u8", count=int(count),
                                     offset=at))
        at += 8 * int(count)
    return batches


def python_pass(client, batches, shards, rng):
    """One timed pass of the Python client: (pull, push) keys/s per shard."""
    import numpy as np
    bias = np.zeros(client.num_params, dtype=np.float32)
    bias[0] = 0.01
    pull_s = push_s = 0.0
    for keys in batches:
        t = time.perf_counter()
        client.pull_sparse(0, keys)
        pull_s += time.perf_counter() - t
        grads = rng.normal(0.0, 0.1, (len(keys), 1)).astype(np.float32)
        t = time.perf_counter()
        client.push(bias, sparse={0: (keys, grads)})
        push_s += time.perf_counter() - t
    unique = sum(len(k) for k in batches)
    return unique / pull_s / shards, unique / push_s / shards


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--keys", type=int, default=10_000_000)
    parser.add_argument("--shards", type=int, default=2)
    args = parser.parse_args()
    bin_dir = os.environ.get("BIN_DIR", os.path.join(ROOT, "bazel-bin"))
    sparse_bin = os.path.join(bin_dir, "bench", "sparse")
    for b in (sparse_bin, os.path.join(bin_dir, "server", "ps_server")):
        if not os.access(b, os.X_OK):
            sys.exit("%s missing: bazel build -c opt //coordinator "
                     "//server:ps_server //bench:sparse" % b)
    tmp = tempfile.mkdtemp(prefix="sparse_keys_")
    setup_package(tmp)
    import numpy as np
    import downpour
    daemons = Daemons(tmp, bin_dir, args.shards)
    stream = os.path.join(tmp, "stream.bin")
    try:
        cpp_pass(sparse_bin, daemons, args, stream)  # creates the rows
        batches = read_stream(stream)
        client = downpour.Client(daemons.config, index=0)
        rng = np.random.default_rng(3)
        python_pass(client, batches[:len(batches) // 4], args.shards, rng)
        cpp, py = [], []
        for rep in range(args.reps):
            if rep % 2 == 0:
                cpp.append(cpp_pass(sparse_bin, daemons, args, stream))
                py.append(python_pass(client, batches, args.shards, rng))
            else:
                py.append(python_pass(client, batches, args.shards, rng))
                cpp.append(cpp_pass(sparse_bin, daemons, args, stream))
            print("rep %d: pull C++ %.0f Python %.0f, push C++ %.0f Python "
                  "%.0f keys/s/shard" % (rep, cpp[-1][0], py[-1][0],
                                         cpp[-1][1], py[-1][1]), flush=True)
        client.close()
    finally:
        daemons.stop()
    unique = sum(len(k) for k in batches) / len(batches)
    print("\n%d batches of %.0f unique keys (batch %d x 39 fields), %d ps, "
          "medians of %d reps, keys/s per shard" % (
              len(batches), unique, args.batch, args.shards, args.reps))
    print("| | C++ client | Python client | Python / C++ | the reps' ratios |")
    print("|---|---:|---:|---:|---|")
    for i, what in enumerate(("pull", "push")):
        c = statistics.median(r[i] for r in cpp)
        p = statistics.median(r[i] for r in py)
        ratios = [b[i] / a[i] for a, b in zip(cpp, py)]
        print("| %s | %.0f | %.0f | %.2f | %s |" % (
            what, c, p, statistics.median(ratios),
            " ".join("%.2f" % r for r in ratios)))
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

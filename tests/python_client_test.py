#!/usr/bin/python3
"""The Python client (python/downpour) against the real daemons.

A dense job (2 ps, softmax [4, 3] in blocks of 8 floats) and a sparse one
(sparse_linear, 2 ps): the coordinator and ps daemons from the runfiles, on
loopback ports, and downpour.Client as worker 0, the only worker. Checks that
the ps hold exactly the updates the client pushed (Checksums, sparse row
versions), that a request sent again under its sequence is applied once,
that a push retried through an unreachable ps (SIGSTOPped) is applied once,
that rows pushed and pulled while psctl moves their buckets to the other ps
are updated exactly once, that the coordinator shows the client's report, that under TLS with role
tokens the client trains with the worker token and is refused without one,
and that the feature hash equals the C++ one on
data/testdata/feature_hash_vectors.tsv. A TLS job skips without openssl.

Skips (exit 0, saying why) when Debian's python3-grpcio, python3-protobuf,
python3-numpy, python3-yaml or protoc are missing. Run by the sh_test
//tests:python_client_test; by hand, from the repository root after
`bazel build //coordinator //server:ps_server //tools:psctl`:
  TEST_TMPDIR=/tmp/pc BIN_DIR=bazel-bin tests/python_client_test.py
"""

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.dont_write_bytecode = True

ROOT = os.getcwd()  # the runfiles' workspace folder under bazel test
BIN = os.environ.get("BIN_DIR", ROOT)
TMP = os.environ.get("TEST_TMPDIR") or tempfile.mkdtemp()


def skip_reason():
    for module in ("grpc", "google.protobuf", "numpy", "yaml"):
        try:
            __import__(module)
        except ImportError:
            return ("python module %s missing (apt-get install python3-grpcio "
                    "python3-protobuf python3-numpy python3-yaml)" % module)
    if shutil.which("protoc") is None:
        return "protoc missing (apt-get install protobuf-compiler)"
    return None


def setup_package():
    """python/downpour importable from TMP/pkg (python/checkout_package.py)."""
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import checkout_package
    checkout_package.install(TMP)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what, predicate, timeout=30):
    """predicate() until it returns something true; fails after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError("timed out after %d s waiting for %s" %
                                 (timeout, what))
        time.sleep(0.02)


class Job:
    """A coordinator and `num_ps` ps daemons of one YAML job."""

    def __init__(self, name, num_ps, extra):
        self.dir = os.path.join(TMP, name)
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.coordinator = "127.0.0.1:%d" % free_port()
        self.config = os.path.join(self.dir, "job.yaml")
        with open(self.config, "w") as f:
            f.write(
                "cluster:\n  coordinator: %s\n  ps: [%s]\n"
                "  workers: [127.0.0.1:0]\n"
                "heartbeat:\n  interval_s: 0.2\n  timeout_s: 5\n"
                "rpc:\n  deadline_s: 1\n  connect_timeout_s: 20\n"
                "coordinator:\n  state_dir: %s/coordinator\n%s" %
                (self.coordinator, ", ".join(["127.0.0.1:0"] * num_ps),
                 self.dir, extra))
        self.procs = []
        self.ps = []
        self.start("coordinator", "coordinator/coordinator", [])
        for i in range(num_ps):
            port_file = os.path.join(self.dir, "ps-%d.port" % i)
            self.ps.append(self.start("ps-%d" % i, "server/ps_server",
                                      ["--index", str(i), "--port_file",
                                       port_file]))

    def start(self, name, binary, args):
        with open(os.path.join(self.dir, name + ".log"), "w") as log:
            proc = subprocess.Popen(
                [os.path.join(BIN, binary), "--config", self.config] + args,
                stdout=log, stderr=subprocess.STDOUT)
        proc.name = name
        self.procs.append(proc)
        return proc

    @contextlib.contextmanager
    def logs_on_failure(self):
        """Writes every daemon's log to stderr when the block fails."""
        try:
            yield
        except Exception:
            for p in self.procs:
                sys.stderr.write("---- %s\n%s\n" % (p.name, self.log(p.name)))
            raise

    def log(self, name):
        with open(os.path.join(self.dir, name + ".log")) as f:
            return f.read()[-3000:]

    def stop(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


class FeatureHashVectorsTest(unittest.TestCase):
    def test_vectors_equal_cpp(self):
        from downpour import feature_hash as fh
        path = os.path.join(ROOT, "data", "testdata",
                            "feature_hash_vectors.tsv")
        checked = 0
        with open(path) as f:
            for line in f:
                if line.startswith("#") or not line.strip():
                    continue
                fn, a, b, want = line.rstrip("\n").split("\t")
                A = bytes.fromhex(a) if a != "-" else None
                B = bytes.fromhex(b) if b != "-" else None
                if fn == "mix_key":
                    got = "%016x" % fh.mix_key(int(a, 16))
                elif fn == "token_keys":
                    got = " ".join("%016x" % k for k in
                                   fh.token_keys(A, B)) or "-"
                elif fn == "feature_key":
                    got = "%016x" % fh.feature_key(A, B)
                else:
                    got = "%016x" % getattr(fh, fn)(A)
                self.assertEqual(got, want, line)
                checked += 1
        self.assertGreaterEqual(checked, 200)


class DenseJobTest(unittest.TestCase):
    N = 5

    def setUp(self):
        self.job = Job("dense", 2,
                       "model:\n  layers: [4, 3]\n  type: softmax\n"
                       "  block_size: 8\n"
                       "data:\n  source: synthetic\n"
                       "optimizer:\n  type: sgd\n  learning_rate: 0.1\n"
                       "checkpoint:\n  dir: %s/ckpt\n  interval_s: 0\n" %
                       os.path.join(TMP, "dense"))

    def tearDown(self):
        self.job.stop()

    def test_pushes_applied_exactly_once(self):
        import numpy as np
        import downpour
        client = lossy_client_class()(self.job.config, index=0)
        with self.job.logs_on_failure(), contextlib.closing(client):
            self.assertEqual(client.num_params, 15)  # 12 weights, 3 biases
            params, versions = client.pull()
            self.assertEqual(list(versions), [0, 0, 0])
            grad = np.full(client.num_params, 0.5, dtype=np.float32)
            for _ in range(self.N):
                result = client.push(grad)
                self.assertFalse(result.duplicate)
                self.assertEqual(result.refused, [])
            sums = client.checksums()
            self.assertEqual({b: v for b, (v, _) in sums.items()},
                             {0: self.N, 1: self.N, 2: self.N})
            after, versions = client.pull()
            np.testing.assert_allclose(after, params - 0.1 * 0.5 * self.N,
                                       rtol=1e-5)

            # The first push's request to a ps, sent again under its
            # sequence: a duplicate, applied once.
            shard = min(client._shards)
            first = downpour.client.make_sequence(client.incarnation, 1)
            reply = client.push_request_again_for_test(shard, first, grad)
            self.assertTrue(reply.duplicate)
            self.assertEqual(client.checksums(), sums)

            # A push whose first request was applied but whose reply was
            # lost (UNAVAILABLE): retried under its sequence, a duplicate.
            duplicates = client.duplicates
            client.lose_next_reply = True
            result = client.push(grad)
            self.assertFalse(client.lose_next_reply, "no reply was lost")
            self.assertEqual(client.duplicates, duplicates + 1)
            self.assertEqual(
                {b: v for b, (v, _) in client.checksums().items()},
                {0: self.N + 1, 1: self.N + 1, 2: self.N + 1})
            self.N += 1

            # A push retried through an unreachable ps (stopped): UNAVAILABLE
            # or DEADLINE_EXCEEDED, retried with the same sequence, applied
            # once whatever the first try did.
            ps = self.job.ps[shard]
            ps.send_signal(signal.SIGSTOP)
            retried = threading.Event()
            handler = _RetryWatcher(retried)
            logger = downpour.client.log
            logger.addHandler(handler)
            resumer = threading.Thread(target=lambda: (
                retried.wait(30), ps.send_signal(signal.SIGCONT)))
            resumer.start()
            try:
                client.push(grad)
            finally:
                resumer.join()
                logger.removeHandler(handler)
            self.assertTrue(retried.is_set(), "the push was never retried")
            self.assertEqual(
                {b: v for b, (v, _) in client.checksums().items()},
                {0: self.N + 1, 1: self.N + 1, 2: self.N + 1})

            # The coordinator shows the client's report (psctl status).
            client.report(steps=self.N + 1, examples=32 * (self.N + 1),
                          metrics={"accuracy": 0.5})

            def shown():
                for m in client.cluster_status().members:
                    if (m.role == "worker" and m.index == 0 and
                            m.report.pushes == self.N + 1 and
                            m.report.step == self.N + 1):
                        return m
            member = wait_for("worker 0's report at the coordinator", shown)
            self.assertEqual(member.report.device, "python")
            self.assertAlmostEqual(member.report.metrics["accuracy"], 0.5)
            client.finish()
            wait_for("worker 0 finished at the coordinator", lambda: any(
                m.role == "worker" and m.report.finished
                for m in client.cluster_status().members))


def lossy_client_class():
    """downpour.Client whose ps stubs lose the reply of the next push
    request once lose_next_reply is set: the request reaches the ps and is
    applied, and the client sees UNAVAILABLE, as when a connection drops
    after the ps answered."""
    import grpc
    import downpour

    class LostReply(grpc.RpcError):
        def code(self):
            return grpc.StatusCode.UNAVAILABLE

        def details(self):
            return "the reply was lost (injected by the test)"

    class LossyClient(downpour.Client):
        lose_next_reply = False

        def _ps_stub(self, address):
            stub = super()._ps_stub(address)
            push = stub.Push

            def lossy_push(request, timeout=None):
                reply = push(request, timeout=timeout)
                if self.lose_next_reply:
                    self.lose_next_reply = False
                    raise LostReply()
                return reply
            stub.Push = lossy_push
            return stub

    return LossyClient


class _RetryWatcher:
    """A logging handler that notes the client's "retrying" warning."""

    def __init__(self, event):
        import logging
        self.level = logging.WARNING
        self.event = event

    def handle(self, record):
        if "retrying" in record.getMessage():
            self.event.set()


class SparseJobTest(unittest.TestCase):
    N = 4

    def setUp(self):
        data = os.path.join(TMP, "sparse.libsvm")
        with open(data, "w") as f:
            for i in range(64):
                f.write("%d %d:1 %d:1\n" % (i % 2, i + 1, 1000 + i))
        self.job = Job("sparse", 2,
                       "model:\n  type: sparse_linear\n  task: binary\n"
                       "  sparse_buckets: 32\n"
                       "optimizer:\n  type: adagrad\n  learning_rate: 0.1\n"
                       "data:\n  source: libsvm\n  path: %s\n"
                       "checkpoint:\n  dir: %s/ckpt\n  interval_s: 0\n" %
                       (data, os.path.join(TMP, "sparse")))

    def tearDown(self):
        self.job.stop()

    def test_rows_updated_exactly_once(self):
        import numpy as np
        import downpour
        from downpour.feature_hash import feature_key
        client = downpour.Client(self.job.config, index=0)
        with self.job.logs_on_failure(), contextlib.closing(client):
            keys = np.array([feature_key("f", str(i)) for i in range(50)],
                            dtype=np.uint64)
            values, versions = client.pull_sparse(0, keys)
            self.assertEqual(values.shape, (50, 1))
            self.assertTrue(np.all(versions == 0))
            # Keys on both ps (32 buckets over 2 shards).
            self.assertEqual(len(set(client._shard_of_keys(keys))), 2)
            for _ in range(self.N):
                # Each key twice in the batch: summed into one row update.
                both = np.concatenate([keys, keys])
                result = client.push(sparse={0: (both, np.ones((100, 1)))})
                self.assertFalse(result.duplicate)
            after, versions = client.pull_sparse(0, keys[::-1])
            self.assertEqual(list(versions), [self.N] * 50)
            self.assertTrue(np.all(after < values[::-1]))  # moved downhill
            client.report(steps=self.N, examples=self.N * 100)
            wait_for("worker 0's row updates at the coordinator", lambda: any(
                m.role == "worker" and
                m.report.sparse_row_updates == self.N * 50
                for m in client.cluster_status().members))


class LiveBucketMoveTest(unittest.TestCase):
    """psctl move-buckets hands 8 of ps 0's buckets to ps 1 while the client
    pushes and pulls rows in them: the client re-splits the requests the ps
    answers "bucket moved" and every row update is applied exactly once."""

    def setUp(self):
        data = os.path.join(TMP, "moves.libsvm")
        with open(data, "w") as f:
            for i in range(16):
                f.write("%d %d:1\n" % (i % 2, i + 1))
        self.job = Job("moves", 2,
                       "model:\n  type: sparse_linear\n  task: binary\n"
                       "  sparse_buckets: 32\n"
                       "optimizer:\n  type: adagrad\n  learning_rate: 0.1\n"
                       "data:\n  source: libsvm\n  path: %s\n"
                       "checkpoint:\n  dir: %s/ckpt\n  interval_s: 0\n" %
                       (data, os.path.join(TMP, "moves")))

    def tearDown(self):
        self.job.stop()

    def test_rows_follow_their_buckets(self):
        import numpy as np
        import downpour
        from downpour.feature_hash import feature_key
        client = downpour.Client(self.job.config, index=0)
        with self.job.logs_on_failure(), contextlib.closing(client):
            keys = np.array([feature_key("m", str(i)) for i in range(400)],
                            dtype=np.uint64)
            before = client._shard_of_keys(keys)
            moving = " ".join(str(b) for b in range(0, 16, 2))
            with open(os.path.join(self.job.dir, "psctl.log"), "w") as log:
                psctl = subprocess.Popen(
                    [os.path.join(BIN, "tools", "psctl"), "--config",
                     self.job.config, "--wait_s", "60", "move-buckets",
                     "--to", "1", "--buckets", moving.replace(" ", ",")],
                    stdout=log, stderr=subprocess.STDOUT)
            pushes = 0
            grads = np.full((len(keys), 1), 0.01)
            while psctl.poll() is None or pushes < 20:
                client.pull_sparse(0, keys)
                client.push(sparse={0: (keys, grads)})
                pushes += 1
                self.assertLess(pushes, 20000, "psctl never finished")
            self.assertEqual(psctl.returncode, 0, self.job.log("psctl"))
            after = client._shard_of_keys(keys)
            moved = (before == 0) & (after == 1)
            self.assertGreater(moved.sum(), 50, "no key's bucket moved")
            _, versions = client.pull_sparse(0, keys)
            self.assertEqual(set(versions.tolist()), {pushes},
                             "row updates lost or applied twice")


class DenseBlockMoveTest(unittest.TestCase):
    """psctl move-buckets --blocks hands ps 1's dense blocks to ps 0 while the
    client pushes and pulls them: the client re-splits the requests the ps
    answers "bucket moved" by the blocks' owners and every push is applied
    exactly once to every block."""

    def setUp(self):
        self.job = Job("dense-moves", 2,
                       "model:\n  layers: [4, 3]\n  type: softmax\n"
                       "  block_size: 4\n"
                       "data:\n  source: synthetic\n"
                       "optimizer:\n  type: sgd\n  learning_rate: 0.01\n"
                       "checkpoint:\n  dir: %s/ckpt\n  interval_s: 0\n" %
                       os.path.join(TMP, "dense-moves"))

    def tearDown(self):
        self.job.stop()

    def test_blocks_follow_their_owner(self):
        import numpy as np
        import downpour
        client = downpour.Client(self.job.config, index=0)
        with self.job.logs_on_failure(), contextlib.closing(client):
            client.pull()
            moving = sorted(b for ids in client._shards[1][2] for b in ids)
            self.assertTrue(moving, "ps 1 holds no block")
            with open(os.path.join(self.job.dir, "psctl.log"), "w") as log:
                psctl = subprocess.Popen(
                    [os.path.join(BIN, "tools", "psctl"), "--config",
                     self.job.config, "--wait_s", "60", "move-buckets",
                     "--to", "0", "--blocks",
                     ",".join(str(b) for b in moving)],
                    stdout=log, stderr=subprocess.STDOUT)
            pushes = 0
            grad = np.full(client.num_params, 0.01, dtype=np.float32)
            while psctl.poll() is None or pushes < 20:
                client.pull()
                client.push(grad)
                pushes += 1
                self.assertLess(pushes, 20000, "psctl never finished")
            self.assertEqual(psctl.returncode, 0, self.job.log("psctl"))
            self.assertEqual(client._shards[1][2], [],
                             "ps 1 still holds blocks")
            versions = {b: v for b, (v, _) in client.checksums().items()}
            self.assertEqual(set(versions), set(range(len(
                client.block_lengths))))
            self.assertEqual(set(versions.values()), {pushes},
                             "pushes lost or applied twice")


class TlsJobTest(unittest.TestCase):
    """TLS with role tokens (deploy/make_certs.sh): the client with the
    worker token trains; one without a token is refused and changes
    nothing."""

    def setUp(self):
        if shutil.which("openssl") is None:
            self.skipTest("openssl missing (deploy/make_certs.sh needs it)")
        certs = os.path.join(TMP, "certs")
        subprocess.run([os.path.join(ROOT, "deploy", "make_certs.sh"),
                        "--out", certs, "--ps", "1", "--standby", "0",
                        "--workers", "1", "--force"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.job = Job(
            "tls", 1,
            "model:\n  layers: [4, 3]\n  type: softmax\n"
            "data:\n  source: synthetic\n"
            "optimizer:\n  type: sgd\n  learning_rate: 0.1\n"
            "checkpoint:\n  dir: {d}/tls/ckpt\n  interval_s: 0\n"
            "security:\n  tls: true\n  ca_file: {c}/ca.pem\n"
            "  cert_file: {c}/{{name}}.pem\n  key_file: {c}/{{name}}.key\n"
            "  ps_token_file: {c}/ps.token\n"
            "  worker_token_file: {c}/worker.token\n"
            "  admin_token_file: {c}/admin.token\n"
            "  reader_token_file: {c}/reader.token\n".format(d=TMP, c=certs))

    def tearDown(self):
        if hasattr(self, "job"):
            self.job.stop()

    def test_token_required(self):
        import grpc
        import numpy as np
        import downpour
        from downpour import config as config_lib
        anonymous = config_lib.load(self.job.config)
        anonymous.worker_token_file = ""
        with self.assertRaises(downpour.DownpourError) as refused:
            downpour.Client(anonymous, index=0)
        self.assertEqual(refused.exception.code,
                         grpc.StatusCode.UNAUTHENTICATED, refused.exception)
        client = downpour.Client(self.job.config, index=0)
        try:
            client.pull()
            client.push(np.ones(client.num_params, dtype=np.float32))
            self.assertEqual(
                [v for v, _ in client.checksums().values()], [1, 1])
        finally:
            client.close()


def run_main(name, reason):
    """Runs the module's unittest cases, or skips (exit 0) saying why."""
    if reason is not None:
        print("%s: SKIPPED: %s" % (name, reason))
        return 0
    setup_package()
    started = time.monotonic()
    result = unittest.main(argv=[sys.argv[0], "-v"], exit=False).result
    print("%s: %.1f s" % (name, time.monotonic() - started))
    return 0 if result.wasSuccessful() else 1


def main():
    return run_main("python_client_test", skip_reason())


if __name__ == "__main__":
    sys.exit(main())

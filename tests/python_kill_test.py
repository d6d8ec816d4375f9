#!/usr/bin/python3
"""A Python worker killed with SIGKILL and restarted loses no acknowledged
push and pushes nothing twice.

A sparse_linear job (2 ps, 32 hash buckets, Adagrad) and worker 0 a Python
process (this file run as `worker`): each push carries the bias gradient
(the one dense block) and 48 of 512 hashed keys, drawn from a seed of (run,
push number) so that the test can recompute every push. The worker appends
"ack N" to its log after push N was acknowledged. Three runs of the worker:
  1. killed (SIGKILL) while it pushes;
  2. restarted at once with the same index (the coordinator has not yet seen
     run 1 die); killed while ps 1 is SIGSTOPped and its push waits on it (the
     request may sit in ps 1's socket and be read after SIGCONT);
  3. restarted; pushes to the end and writes the final row and block
     versions.
The ps hold, for each shard, exactly the acknowledged updates plus, per
killed run, either all or none of that shard's part of the one push in
flight when it was killed (no push is acknowledged and then lost, and no
push is applied twice: a restarted worker pushes under a new incarnation, and
nothing is sent again). Each run's incarnation is greater than the last's.

Reuses tests/python_client_test.py's daemon helpers. Skips (exit 0, saying
why) without what that test needs. Run by the sh_test
//tests:python_kill_test; by hand, from the repository root after
`bazel build //coordinator //server:ps_server`:
  TEST_TMPDIR=/tmp/pk BIN_DIR=bazel-bin tests/python_kill_test.py
"""

import itertools
import json
import os
import signal
import subprocess
import sys
import time
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.getcwd(), "tests"))
from python_client_test import TMP, Job, run_main, skip_reason, wait_for  # noqa

KEY_SPACE = 512
KEYS_PER_PUSH = 48


def push_keys(run, n):
    """The keys of push n of run `run` (n = 1, 2, ...)."""
    import numpy as np
    from downpour.feature_hash import feature_key
    picks = np.random.default_rng([run, n]).choice(
        KEY_SPACE, KEYS_PER_PUSH, replace=False)
    return np.array([feature_key("k", str(j)) for j in picks],
                    dtype=np.uint64)


def all_keys():
    import numpy as np
    from downpour.feature_hash import feature_key
    return np.array([feature_key("k", str(j)) for j in range(KEY_SPACE)],
                    dtype=np.uint64)


def worker_main(config, run, pushes, log_path, final_path):
    """One run of worker 0: `pushes` pushes (0: until killed), each
    acknowledged one logged; with final_path, the versions at the end."""
    import numpy as np
    import downpour
    client = downpour.Client(config, index=0)
    with open(log_path, "a", buffering=1) as log:
        log.write("incarnation %d\n" % client.incarnation)
        grad = np.full(client.num_params, 0.01, dtype=np.float32)
        n = 0
        while pushes == 0 or n < pushes:
            n += 1
            keys = push_keys(run, n)
            client.push(grad, sparse={0: (keys, np.full((len(keys), 1), 0.01))})
            log.write("ack %d\n" % n)
    keys = all_keys()
    _, versions = client.pull_sparse(0, keys)
    final = {"rows": [int(v) for v in versions],
             "shards": [int(s) for s in client._shard_of_keys(keys)],
             "blocks": {str(b): v for b, (v, _) in
                        client.checksums().items()},
             "block_shards": {str(b): s for s, (_, _, chunks) in
                              client._shards.items()
                              for ids in chunks for b in ids}}
    with open(final_path, "w") as f:
        json.dump(final, f)
    client.finish()


def read_log(path):
    """(incarnation, last acknowledged push) of one run's log."""
    incarnation, acked = None, 0
    with open(path) as f:
        for line in f:
            if not line.endswith("\n"):
                break  # cut by the kill
            what, value = line.split()
            if what == "incarnation":
                incarnation = int(value)
            else:
                acked = int(value)
    return incarnation, acked


class KilledPythonWorkerTest(unittest.TestCase):
    def setUp(self):
        self.job = Job("kill", 2,
                       "model:\n  type: sparse_linear\n  task: binary\n"
                       "  sparse_buckets: 32\n"
                       "optimizer:\n  type: adagrad\n  learning_rate: 0.1\n"
                       "data:\n  source: libsvm\n  path: %s\n"
                       "training:\n  outage_timeout_s: 60\n"
                       "checkpoint:\n  dir: %s/ckpt\n  interval_s: 0\n" %
                       (self.write_data(), os.path.join(TMP, "kill")))
        self.workers = []

    @staticmethod
    def write_data():
        path = os.path.join(TMP, "kill.libsvm")
        with open(path, "w") as f:
            for i in range(16):
                f.write("%d %d:1\n" % (i % 2, i + 1))
        return path

    def tearDown(self):
        for w in self.workers:
            if w.poll() is None:
                w.kill()
            w.wait()
        self.job.stop()

    def log_path(self, run):
        return os.path.join(self.job.dir, "run-%d.acks" % run)

    def start_worker(self, run, pushes=0):
        out = open(os.path.join(self.job.dir, "worker-run-%d.log" % run), "w")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            p for p in sys.path if p))
        proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "worker",
             self.job.config, str(run), str(pushes), self.log_path(run),
             os.path.join(self.job.dir, "final.json")],
            stdout=out, stderr=subprocess.STDOUT, env=env)
        out.close()
        proc.name = "worker-run-%d" % run
        self.job.procs.append(proc)
        self.workers.append(proc)
        return proc

    def acked(self, run):
        if not os.path.exists(self.log_path(run)):
            return 0
        return read_log(self.log_path(run))[1]

    def kill_after(self, run, acks):
        worker = self.start_worker(run)
        wait_for("run %d's %d acknowledged pushes" % (run, acks),
                 lambda: self.acked(run) >= acks or worker.poll() is not None)
        self.assertIsNone(worker.poll(), "run %d ended" % run)
        return worker

    def test_killed_worker_loses_nothing_and_repeats_nothing(self):
        with self.job.logs_on_failure():
            # Run 1: killed while it pushes.
            self.kill_after(1, 60).kill()
            # Run 2, restarted at once: killed while its push waits on a
            # stopped ps 1.
            worker = self.kill_after(2, 40)
            ps1 = self.job.ps[1]
            ps1.send_signal(signal.SIGSTOP)
            last = [self.acked(2), time.monotonic()]

            def stuck():
                now = self.acked(2)
                if now != last[0]:
                    last[:] = [now, time.monotonic()]
                return time.monotonic() - last[1] > 1.0
            wait_for("run 2 to wait on the stopped ps 1", stuck)
            worker.kill()
            worker.wait()
            ps1.send_signal(signal.SIGCONT)
            # Run 3 pushes to the end.
            final = self.start_worker(3, pushes=50)
            self.assertEqual(final.wait(timeout=120), 0, "run 3 failed")
            self.check_counts()

    def check_counts(self):
        import numpy as np
        logs = [read_log(self.log_path(r)) for r in (1, 2, 3)]
        incarnations = [inc for inc, _ in logs]
        self.assertEqual(incarnations, sorted(set(incarnations)),
                         "each run needs a new incarnation")
        self.assertEqual(logs[2][1], 50)
        with open(os.path.join(self.job.dir, "final.json")) as f:
            final = json.load(f)
        held = np.array(final["rows"], dtype=np.int64)
        shard_of = np.array(final["shards"])
        index = {int(k): i for i, k in enumerate(all_keys())}
        acked = np.zeros(KEY_SPACE, dtype=np.int64)
        for run, (_, last) in zip((1, 2, 3), logs):
            for n in range(1, last + 1):
                acked[[index[int(k)] for k in push_keys(run, n)]] += 1
        # Per killed run: the push that was in flight (maybe applied).
        in_flight = []
        for run, (_, last) in zip((1, 2), logs[:2]):
            vec = np.zeros(KEY_SPACE, dtype=np.int64)
            vec[[index[int(k)] for k in push_keys(run, last + 1)]] = 1
            in_flight.append(vec)
        dense_acked = sum(last for _, last in logs)
        for shard in (0, 1):
            mine = shard_of == shard
            blocks = [v for b, v in final["blocks"].items()
                      if final["block_shards"][b] == shard]
            explained = []
            for applied in itertools.product((0, 1), repeat=2):
                rows = acked + sum(a * v for a, v in zip(applied, in_flight))
                if (np.array_equal(held[mine], rows[mine]) and
                        all(v == dense_acked + sum(applied) for v in blocks)):
                    explained.append(applied)
            self.assertTrue(
                explained,
                "shard %d: its rows and blocks are not the acknowledged "
                "pushes plus all or none of each killed run's push in flight "
                "(rows held - acknowledged: %s; blocks %s, %d acknowledged)" %
                (shard, sorted(set((held - acked)[mine].tolist())), blocks,
                 dense_acked))
        print("acknowledged pushes: runs %s; %d row updates held, %d "
              "acknowledged" % ([last for _, last in logs], held.sum(),
                                acked.sum()))


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        config, run, pushes, log_path, final_path = sys.argv[2:7]
        worker_main(config, int(run), int(pushes), log_path, final_path)
        return 0
    return run_main("python_kill_test", skip_reason())


if __name__ == "__main__":
    sys.exit(main())

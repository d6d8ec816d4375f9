#!/usr/bin/python3
"""The launcher runs Python workers (launcher.worker_command): the example
python/examples/mnist_torch.py as both workers of an mlp job on synthetic
data, with the real coordinator and ps daemons. One Python worker is killed
with SIGKILL while it trains; the launcher restarts it with the same flags,
and the job ends: exit 0, summary.json lists the fault as restarted and both
Python workers as finished with their steps, pushes and test accuracy (above
chance). The model they trained is exported (psctl export), served
(serve/serve) and asked by downpour.Predictor: above chance on the test
split.
A worker_command whose program does not exist ends the launch at once with
exit 2 and a message naming the key.

Reuses tests/python_client_test.py's helpers. Skips (exit 0, saying why)
without python3-torch or what that test needs. Run by the sh_test
//tests:python_launcher_test; by hand, from the repository root after
`bazel build //deploy:launcher //coordinator //server:ps_server`:
  TEST_TMPDIR=/tmp/pl BIN_DIR=bazel-bin tests/python_launcher_test.py
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.getcwd(), "tests"))
from python_client_test import (BIN, ROOT, TMP, run_main, skip_reason,  # noqa
                                wait_for)

STEPS = 240


def job_yaml(run_dir, command):
    return (
        "cluster:\n  coordinator: 127.0.0.1:0\n"
        "  ps: [127.0.0.1:0, 127.0.0.1:0]\n"
        "  workers: [127.0.0.1:0, 127.0.0.1:0]\n"
        "heartbeat:\n  interval_s: 0.2\n  timeout_s: 3\n"
        "rpc:\n  deadline_s: 2\n  connect_timeout_s: 20\n"
        "model:\n  type: mlp\n  layers: [784, 32, 10]\n"
        "optimizer:\n  type: sgd\n  learning_rate: 0.05\n"
        "data:\n  source: synthetic\n  train_examples: 800\n"
        "  test_examples: 200\n"
        "training:\n  batch_size: 16\n  steps: %d\n  eval_every_steps: 40\n"
        "checkpoint:\n  interval_s: 1\n"
        "launcher:\n  worker_command: %s\n  restart_backoff_s: 0\n" %
        (STEPS, json.dumps(command)))


class PythonWorkersUnderTheLauncherTest(unittest.TestCase):
    def setUp(self):
        self.dir = os.path.join(TMP, "launcher")
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.run_dir = os.path.join(self.dir, "run")
        self.launcher = None

    def tearDown(self):
        if self.launcher is not None and self.launcher.poll() is None:
            self.launcher.kill()
            self.launcher.wait()

    def launch(self, command):
        config = os.path.join(self.dir, "job.yaml")
        with open(config, "w") as f:
            f.write(job_yaml(self.run_dir, command))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            p for p in sys.path if p))
        self.log = os.path.join(self.dir, "launcher.log")
        with open(self.log, "w") as out:
            self.launcher = subprocess.Popen(
                [os.path.join(BIN, "deploy", "launcher"), "--config", config,
                 "--run_dir", self.run_dir, "--bin_dir", BIN,
                 "--progress_s", "1"],
                stdout=out, stderr=subprocess.STDOUT, env=env)

    def tail(self):
        with open(self.log) as f:
            text = f.read()[-4000:]
        logs = os.path.join(self.run_dir, "logs")
        for name in sorted(os.listdir(logs)) if os.path.isdir(logs) else []:
            if name.startswith("worker"):
                with open(os.path.join(logs, name)) as f:
                    text += "\n---- %s\n%s" % (name, f.read()[-2000:])
        return text

    def worker_pid(self, index):
        """Worker `index`'s pid from the launcher's pid file."""
        path = os.path.join(self.run_dir, "launcher.pids")
        if not os.path.exists(path):
            return None
        with open(path) as f:
            for line in f:
                parts = line.split(None, 2)
                if len(parts) == 3 and parts[2].strip() == "worker %d" % index:
                    return int(parts[0])
        return None

    def test_a_killed_python_worker_is_restarted_and_the_job_ends(self):
        example = os.path.join(ROOT, "python", "examples", "mnist_torch.py")
        self.launch([sys.executable, example])
        pid = wait_for("worker 1 to start", lambda: self.worker_pid(1), 60)
        # A quarter of its steps in, as the coordinator shows them.
        from downpour import _rpc, config as config_lib
        from downpour._proto import coordinator_pb2
        status_config = config_lib.load(os.path.join(self.dir, "job.yaml"))

        def trained():
            coordinator = self.coordinator_address()
            if coordinator is None:
                return False
            status = _rpc.CoordinatorStub(_rpc.make_channel(
                coordinator, status_config, "test")).ClusterStatus(
                    coordinator_pb2.ClusterStatusRequest(), timeout=2)
            workers = [m for m in status.members if m.role == "worker"]
            # Both are the Python example (the C++ worker names its device
            # "cpu" or "cuda").
            return (len(workers) == 2 and
                    all(m.report.device == "python (torch cpu)"
                        for m in workers) and
                    any(m.index == 1 and m.report.step >= STEPS // 4
                        for m in workers))
        wait_for("Python worker 1 at a quarter of its steps", trained, 90)
        os.kill(pid, signal.SIGKILL)
        self.assertEqual(self.launcher.wait(timeout=180), 0, self.tail())
        with open(os.path.join(self.run_dir, "summary.json")) as f:
            summary = json.load(f)
        self.assertEqual(summary["outcome"], "succeeded", self.tail())
        faults = summary["faults"]
        self.assertEqual(len(faults), 1, faults)
        self.assertEqual(faults[0]["daemon"], "worker 1")
        self.assertEqual(faults[0]["signal"], 9)
        self.assertEqual(faults[0]["action"], "restarted")
        for w in summary["workers"]:
            self.assertTrue(w["finished"], w)
            self.assertEqual(w["steps"], STEPS, w)
            self.assertEqual(w["pushes"], STEPS, w)
            self.assertGreater(w["metrics"]["accuracy"], 0.5, w)  # chance 0.1
        self.check_served(os.path.join(self.dir, "job.yaml"))

    def check_served(self, config):
        """psctl export of what the Python workers trained, served by
        serve/serve and asked by downpour.Predictor on the test split."""
        import downpour
        import numpy as np
        import yaml
        model = os.path.join(self.dir, "model.npz")
        subprocess.run([os.path.join(BIN, "tools", "psctl"), "export",
                        "--config", config, "--checkpoint_dir",
                        os.path.join(self.run_dir, "checkpoints"), "--out",
                        model], check=True, stdout=subprocess.DEVNULL)
        port_file = os.path.join(self.dir, "serve.port")
        with open(os.path.join(self.dir, "serve.log"), "w") as log:
            serve = subprocess.Popen(
                [os.path.join(BIN, "serve", "serve"), "--config", config,
                 "--model", model, "--listen", "127.0.0.1:0", "--port_file",
                 port_file], stdout=log, stderr=subprocess.STDOUT)
        try:
            def port():
                if os.path.exists(port_file):
                    with open(port_file) as f:
                        return f.read().strip()
            address = "127.0.0.1:" + wait_for("serve's port", port, 30)
            sys.path.insert(0, os.path.join(ROOT, "python", "examples"))
            from mnist_torch import split_rows
            with open(config) as f:
                doc = yaml.safe_load(f)
            x, y, _, test = split_rows(doc["data"], doc["model"]["layers"], 42)
            p = downpour.Predictor(address, config).predict(x[test])
            self.assertEqual(p.shape, (len(test), 10))
            np.testing.assert_allclose(p.sum(1), 1, rtol=1e-4)
            self.assertGreater((p.argmax(1) == y[test]).mean(), 0.5)
        finally:
            serve.terminate()
            serve.wait()

    def coordinator_address(self):
        """The coordinator's ephemeral address: its port file in the run
        folder."""
        path = os.path.join(self.run_dir, "coordinator.port")
        if not os.path.exists(path):
            return None
        with open(path) as f:
            port = f.read().strip()
        return "127.0.0.1:%s" % port if port else None

    def test_a_missing_program_is_refused_naming_the_key(self):
        self.launch(["/nonexistent/python3", "train.py"])
        self.assertEqual(self.launcher.wait(timeout=60), 2, self.tail())
        with open(self.log) as f:
            text = f.read()
        self.assertIn("launcher.worker_command: '/nonexistent/python3' is not "
                      "an executable file", text)


def main():
    reason = skip_reason()
    if reason is None:
        try:
            import torch  # noqa: F401
        except ImportError:
            reason = "python module torch missing (apt-get install python3-torch)"
    return run_main("python_launcher_test", reason)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""downpour.torch (python/downpour/torch.py) against the real daemons.

(a) A PyTorch MLP (nn.Sequential of nn.Linear, the YAML `mlp` [8, 32, 2] in
blocks of 64 floats, SGD on the ps) trains on two noisy rings with
DenseOnPs(n_fetch=2, n_push=2): the fetched module computes what the ps
layout does (x @ W + b with W [in, out]), one push moves the ps by exactly
-lr * the torch gradient (transposed back), the loss falls, and every ps
block's version equals the pushes made. A module of the wrong shape is
refused with both shapes named.

(b) Logistic regression whose weights are an EmbeddingBag on the
`sparse_linear` table 0 (dim 1, Adagrad on the ps) and whose bias is a
DenseOnPs parameter trains on generated sparse data (10 of 2000 hashed
features per example, labels drawn from a true logistic model): its test
AUC comes within 0.05 of the true model's (the Bayes AUC of these data,
about 0.9, so the bar also means far above chance), and each row's version
equals the pushes that carried its key. Half the steps use prefetch(), and
half push the rows and the bias in one request (downpour.torch.step).

Reuses tests/python_client_test.py's daemon helpers (Job, run_main).
Skips (exit 0, saying why) without torch or what that test needs. Run by the
sh_test //tests:python_torch_test; by hand, from the repository root after
`bazel build //coordinator //server:ps_server`:
  TEST_TMPDIR=/tmp/pt BIN_DIR=bazel-bin tests/python_torch_test.py
"""

import contextlib
import os
import subprocess
import sys
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.getcwd(), "tests"))
from python_client_test import BIN, TMP, Job, run_main, skip_reason  # noqa

MLP_LR = 0.1


def auc(scores, labels):
    """The area under the ROC curve (Mann-Whitney, ties averaged)."""
    import numpy as np
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    ranks[order] = np.arange(1, len(scores) + 1)
    for s in np.unique(scores[np.diff(np.sort(scores), prepend=np.nan) == 0]):
        ranks[scores == s] = ranks[scores == s].mean()
    pos = labels == 1
    n_pos, n_neg = pos.sum(), (~pos).sum()
    return (ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


class DenseOnPsTest(unittest.TestCase):
    def setUp(self):
        self.job = Job("torch_mlp", 2,
                       "model:\n  type: mlp\n  layers: [8, 32, 2]\n"
                       "  block_size: 64\n"
                       "data:\n  source: synthetic\n"
                       "optimizer:\n  type: sgd\n  learning_rate: %g\n"
                       "checkpoint:\n  dir: %s/ckpt\n  interval_s: 0\n" %
                       (MLP_LR, os.path.join(TMP, "torch_mlp")))

    def tearDown(self):
        self.job.stop()

    def test_mlp_trains(self):
        import numpy as np
        import torch
        import downpour
        from downpour.torch import DenseOnPs
        torch.manual_seed(0)
        rng = np.random.default_rng(0)

        def batch(n):  # two rings in the first 2 of 8 inputs: not linear
            y = rng.integers(0, 2, n)
            angle = rng.uniform(0, 2 * np.pi, n)
            r = 1 + 1.5 * y + rng.normal(0, 0.2, n)
            x = rng.normal(0, 0.3, (n, 8))
            x[:, 0], x[:, 1] = r * np.cos(angle), r * np.sin(angle)
            return torch.tensor(x, dtype=torch.float32), torch.tensor(y)

        client = downpour.Client(self.job.config, index=0)
        with self.job.logs_on_failure(), contextlib.closing(client):
            wrong = torch.nn.Sequential(torch.nn.Linear(8, 32),
                                        torch.nn.ReLU(),
                                        torch.nn.Linear(32, 3))
            with self.assertRaisesRegex(ValueError,
                                        r"\[3, 32\].*fc2.weight.*\[32, 2\]"):
                DenseOnPs(wrong, client)
            model = torch.nn.Sequential(torch.nn.Linear(8, 32),
                                        torch.nn.ReLU(),
                                        torch.nn.Linear(32, 2))
            # One step at n_push 1: the ps moves by -lr * grad, laid out
            # [in, out]; the fetched module computes the ps layout's output.
            dense = DenseOnPs(model, client)
            params, _ = client.pull()
            t = {k: v.copy() for k, v in client.tensors(params).items()}
            x, y = batch(64)
            hidden = np.maximum(x.numpy() @ t["fc1.weight"].reshape(8, 32) +
                                t["fc1.bias"], 0)
            want = hidden @ t["fc2.weight"].reshape(32, 2) + t["fc2.bias"]
            np.testing.assert_allclose(model(x).detach().numpy(), want,
                                       rtol=1e-4, atol=1e-5)
            torch.nn.functional.cross_entropy(model(x), y).backward()
            grad = model[0].weight.grad.numpy().T.copy()
            dense.step()
            after = client.tensors(client.pull()[0])["fc1.weight"]
            np.testing.assert_allclose(
                after, t["fc1.weight"] - MLP_LR * grad.reshape(-1),
                rtol=1e-4, atol=1e-6)
            pushes = dense.pushes

            dense = DenseOnPs(model, client, n_fetch=2, n_push=2)
            losses = []
            for step in range(400):
                x, y = batch(32)
                loss = torch.nn.functional.cross_entropy(model(x), y)
                loss.backward()
                dense.step()
                losses.append(loss.item())
            pushes += dense.pushes
            self.assertEqual(dense.pushes, 200)
            first, last = np.mean(losses[:20]), np.mean(losses[-20:])
            self.assertLess(last, 0.5 * first, "loss %.3f -> %.3f" %
                            (first, last))
            versions = {b: v for b, (v, _) in client.checksums().items()}
            self.assertEqual(len(versions), len(client.block_lengths))
            self.assertGreater(len(versions), 4)  # fc1.weight spans blocks
            self.assertEqual(set(versions.values()), {pushes},
                             "block versions %s" % versions)


class OwnLayersTest(unittest.TestCase):
    """model.type tensors: the YAML declares a small CNN's tensors in
    PyTorch's shapes; DenseOnPs binds the nn.Module to them by name, with no
    transposition; it trains; the ps starts them as declared (a weight
    uniform in +-sqrt(6 / fan_in), a bias 0); and the C++ worker refuses
    the model (exit 2, naming the type)."""

    TENSORS = ["0.weight 4x1x3x3", "0.bias 4", "3.weight 3x144", "3.bias 3"]

    def setUp(self):
        self.job = Job("torch_tensors", 2,
                       "model:\n  type: tensors\n  block_size: 64\n"
                       "  tensors: [%s]\n"
                       "optimizer:\n  type: adam\n  learning_rate: 0.01\n"
                       "checkpoint:\n  dir: %s/ckpt\n  interval_s: 0\n" %
                       (", ".join(self.TENSORS),
                        os.path.join(TMP, "torch_tensors")))

    def tearDown(self):
        self.job.stop()

    def test_a_cnn_trains_on_the_ps(self):
        import numpy as np
        import torch
        import downpour
        from downpour.torch import DenseOnPs
        torch.manual_seed(0)
        rng = np.random.default_rng(0)

        def batch(n):  # 8x8 noise, a bright 3x3 patch where the class says
            y = rng.integers(0, 3, n)
            x = rng.normal(0, 0.5, (n, 1, 8, 8))
            for i, c in enumerate(y):
                x[i, 0, 2 * c:2 * c + 3, 2 * c:2 * c + 3] += 2
            return torch.tensor(x, dtype=torch.float32), torch.tensor(y)

        client = downpour.Client(self.job.config, index=0)
        with self.job.logs_on_failure(), contextlib.closing(client):
            self.assertEqual(client.model_type, "tensors")
            model = torch.nn.Sequential(
                torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(),
                torch.nn.Flatten(), torch.nn.Linear(144, 3))
            dense = DenseOnPs(model, client)
            t = client.tensors(client.pull()[0])
            np.testing.assert_array_equal(
                model[0].weight.detach().numpy().reshape(-1), t["0.weight"])
            self.assertLessEqual(np.abs(t["0.weight"]).max(), np.sqrt(6 / 9))
            self.assertEqual(np.abs(t["3.bias"]).max(), 0)
            np.testing.assert_array_equal(
                model[3].weight.detach().numpy().reshape(-1), t["3.weight"])
            losses = []
            for _ in range(150):
                x, y = batch(32)
                loss = torch.nn.functional.cross_entropy(model(x), y)
                loss.backward()
                dense.step()
                losses.append(loss.item())
            first, last = np.mean(losses[:15]), np.mean(losses[-15:])
            self.assertLess(last, 0.5 * first, "loss %.3f -> %.3f" %
                            (first, last))
            versions = {v for v, _ in client.checksums().values()}
            self.assertEqual(versions, {dense.pushes})

        worker = subprocess.run(
            [os.path.join(BIN, "worker", "ps_worker"), "--config",
             self.job.config, "--index", "0"], capture_output=True, text=True,
            timeout=60)
        self.assertEqual(worker.returncode, 2, worker.stderr)
        self.assertIn("model.type tensors is computed by the workers that "
                      "declare it", worker.stderr + worker.stdout)


class EmbeddingBagTest(unittest.TestCase):
    FEATURES, ACTIVE = 2000, 10

    def setUp(self):
        data = os.path.join(TMP, "torch_sparse.libsvm")
        with open(data, "w") as f:
            f.write("1 1:1\n0 2:1\n")  # the daemons read none of it
        self.job = Job("torch_sparse", 2,
                       "model:\n  type: sparse_linear\n  task: binary\n"
                       "  sparse_buckets: 64\n"
                       "optimizer:\n  type: adagrad\n  learning_rate: 0.3\n"
                       "data:\n  source: libsvm\n  path: %s\n"
                       "checkpoint:\n  dir: %s/ckpt\n  interval_s: 0\n" %
                       (data, os.path.join(TMP, "torch_sparse")))

    def tearDown(self):
        self.job.stop()

    def data(self, rng, n, true_w, keys):
        """n examples of ACTIVE features each (Zipf-like popularity), values
        in [0.5, 1.5], labels from the true logistic model."""
        import numpy as np
        p = 1.0 / np.arange(1, self.FEATURES + 1) ** 0.6
        ids = rng.choice(self.FEATURES, (n, self.ACTIVE), p=p / p.sum())
        values = rng.uniform(0.5, 1.5, (n, self.ACTIVE)).astype(np.float32)
        margin = (true_w[ids] * values).sum(1) - 0.5
        y = (rng.uniform(size=n) < 1 / (1 + np.exp(-margin))).astype(float)
        return keys[ids], values, y, margin

    def test_logistic_trains(self):
        import numpy as np
        import torch
        import downpour
        from downpour.feature_hash import feature_key
        import downpour.torch
        from downpour.torch import DenseOnPs, EmbeddingBag
        rng = np.random.default_rng(1)
        keys = np.array([feature_key("f", str(i)) for i in
                         range(self.FEATURES)], dtype=np.uint64)
        true_w = rng.normal(0, 1.0, self.FEATURES)

        class Logistic(torch.nn.Module):
            def __init__(self, client):
                super().__init__()
                self.weights = EmbeddingBag(client, table=0, dim=1)
                self.bias = torch.nn.Parameter(torch.zeros(1))

            def forward(self, k, v):
                return (self.weights(k, per_sample_weights=v)
                        .reshape(-1) + self.bias)

        client = downpour.Client(self.job.config, index=0)
        with self.job.logs_on_failure(), contextlib.closing(client):
            model = Logistic(client)
            dense = DenseOnPs(model, client)  # the `bias` block
            pushed = {}  # key -> pushes that carried it
            batches = [self.data(rng, 64, true_w, keys) for _ in range(500)]
            for step, (k, v, y, _) in enumerate(batches):
                if step % 2 and step + 1 < len(batches):
                    model.weights.prefetch(batches[step + 1][0])
                out = model(k, torch.from_numpy(v))
                loss = torch.nn.functional.binary_cross_entropy_with_logits(
                    out, torch.from_numpy(y).float())
                loss.backward()
                if step % 4 < 2:
                    result = model.weights.step()
                    self.assertEqual(result.refused, [])
                    dense.step()
                else:  # both in one push
                    before = client._report.pushes
                    result = downpour.torch.step(model.weights, dense)
                    self.assertEqual(result.refused, [])
                    self.assertEqual(client._report.pushes, before + 1)
                for key in np.unique(k):
                    pushed[key] = pushed.get(key, 0) + 1
            k, v, y, margin = self.data(rng, 4000, true_w, keys)
            model.eval()
            with torch.no_grad():
                scores = model(k, torch.from_numpy(v)).numpy()
            got, bayes = auc(scores, y), auc(margin, y)
            print("EmbeddingBag logistic: test AUC %.4f, true model's %.4f" %
                  (got, bayes))
            self.assertGreater(got, bayes - 0.05)
            touched = np.array(sorted(pushed), dtype=np.uint64)
            _, versions = client.pull_sparse(0, touched)
            self.assertEqual(list(versions), [pushed[t] for t in touched])
            self.assertEqual(model.weights.pushes, len(batches))
            self.assertEqual(client.checksums()[0][0], dense.pushes)  # bias


def main():
    reason = skip_reason()
    if reason is None:
        try:
            import torch  # noqa: F401
        except ImportError:
            reason = "python module torch missing (apt-get install " \
                     "python3-torch)"
    return run_main("python_torch_test", reason)


if __name__ == "__main__":
    sys.exit(main())

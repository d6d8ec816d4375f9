"""PyTorch modules whose parameters live on the Downpour ps.

    from downpour.torch import DenseOnPs, EmbeddingBag, step

EmbeddingBag(client, table, dim): an nn.Module over a ps sparse table. Its
forward pulls the rows of the batch's unique keys (client.pull_sparse),
makes them a leaf tensor that requires grad, and pools them with
torch.nn.functional.embedding_bag. Its gradients go back by an explicit
`step()` after backward (no autograd hook: the push is a network call, and
an explicit step makes the point where it happens, and its errors, plain).
`prefetch(keys)` pulls the next batch's rows on a thread.

step(*parts): the step() of EmbeddingBags and a DenseOnPs in one push.

DenseOnPs(module, client, n_fetch, n_push): keeps a module's dense
parameters on the ps, as the Downpour worker does: every n_fetch steps the
ps values are copied into the parameters, and the gradients of n_push steps
are summed (at full weight, as worker/gradient_pusher.h) and pushed.

The optimizer stays on the ps (the YAML's `optimizer`, per block and per
row): no torch.optim here. The ps holds the tensors of the YAML's model:
any module's, declared as model.type tensors (model.tensors: "NAME
D1xD2x..." each, PyTorch's shapes), or those of a built-in type (mlp,
softmax, linear, sparse_linear, fm, wide_deep). DenseOnPs refuses a module
that does not match them.

Layout: a built-in type keeps fc{l}.weight as [fan_in, fan_out] row-major
(common/model_spec.cc; model/dense_forward.h computes Z = A W), and
torch.nn.Linear keeps weight as [out, in] (y = x W^T): an nn.Linear's weight
is copied transposed each way. A tensors model's shapes are PyTorch's, copied
as they are. Any other parameter must have the ps shape.

Thread-safety: like the Client, one training thread; prefetch's thread only
pulls (a read), beside that thread's calls.
"""

import threading

import numpy as np

try:
    import torch
    import torch.nn.functional as F
    from torch import nn
except ImportError as e:  # pragma: no cover (tested where torch is missing)
    raise ImportError(
        "downpour.torch needs PyTorch: apt-get install python3-torch "
        "(Debian's package; the rest of downpour works without it)") from e

__all__ = ["DenseOnPs", "EmbeddingBag", "as_keys", "step"]


def as_keys(keys):
    """uint64 NumPy keys from a NumPy array, a list or an int64 tensor
    (torch has no uint64: a tensor holds the keys' bits as int64)."""
    if isinstance(keys, torch.Tensor):
        keys = keys.detach().cpu().numpy()
    keys = np.asarray(keys)
    if keys.dtype == np.int64:
        return keys.reshape(-1).view(np.uint64)
    return keys.astype(np.uint64).reshape(-1)


class EmbeddingBag(nn.Module):
    """torch.nn.EmbeddingBag whose rows are ps sparse table `table`.

    forward(keys, offsets=None, per_sample_weights=None): as
    F.embedding_bag with `keys` (uint64 feature keys, see as_keys) in place
    of indices; offsets as torch's (None: `keys` is [bags, n], one bag a
    row). A forward in training mode (and with grad enabled) keeps the pulled
    rows until step(); call it after backward: it pushes each unique key's
    summed gradient, with its occurrences as counts (for the table's
    admission), in one client.push, and returns the PushResult (None when no
    forward was pending). Several forwards may precede one step().
    """

    def __init__(self, client, table, dim, mode="sum"):
        super().__init__()
        if mode not in ("sum", "mean", "max"):
            raise ValueError("EmbeddingBag mode must be sum, mean or max, got "
                             "%r" % (mode,))
        self.client, self.table, self.dim, self.mode = client, table, dim, mode
        self._pending = []  # (unique keys, leaf rows, occurrences)
        self._prefetch = None  # (unique keys, thread, result list)
        self.pushes = 0  # step()s that pushed

    def prefetch(self, keys):
        """Starts pulling the rows of `keys` on a thread; the next forward
        whose unique keys are the same uses them. The rows are read while
        the current step runs, so they may miss its push (one step staler,
        as Downpour's double buffering)."""
        unique = np.unique(as_keys(keys))
        result = []

        def pull():
            try:
                result.append(self.client.pull_sparse(self.table, unique))
            except BaseException as e:  # re-raised by forward
                result.append(e)
        thread = threading.Thread(target=pull, name="downpour-prefetch",
                                  daemon=True)
        thread.start()
        self._prefetch = (unique, thread, result)

    def _rows(self, unique):
        if self._prefetch is not None:
            keys, thread, result = self._prefetch
            self._prefetch = None
            thread.join()
            if np.array_equal(keys, unique):
                if isinstance(result[0], BaseException):
                    raise result[0]
                return result[0][0]
        return self.client.pull_sparse(self.table, unique)[0]

    def forward(self, keys, offsets=None, per_sample_weights=None):
        flat = as_keys(keys)
        unique, inverse = np.unique(flat, return_inverse=True)
        rows = self._rows(unique) if len(unique) else np.zeros((0, self.dim))
        if rows.shape[1] != self.dim:
            raise ValueError(
                "ps table %d holds rows of dim %d; this EmbeddingBag was made "
                "with dim %d" % (self.table, rows.shape[1], self.dim))
        weight = torch.tensor(rows, dtype=torch.float32)
        train = self.training and torch.is_grad_enabled()
        weight.requires_grad_(train)
        indices = torch.from_numpy(inverse.astype(np.int64))
        if offsets is None:
            shape = tuple(np.shape(keys))
            if len(shape) != 2:
                raise ValueError("EmbeddingBag: keys without offsets must be "
                                 "[bags, n], got shape %s" % (shape,))
            indices = indices.reshape(shape)
        elif isinstance(offsets, torch.Tensor):
            offsets = offsets.to(torch.int64)
        else:
            offsets = torch.as_tensor(np.asarray(offsets, dtype=np.int64))
        if train:
            counts = np.bincount(inverse, minlength=len(unique))
            self._pending.append((unique, weight, counts))
        return F.embedding_bag(indices, weight, offsets, mode=self.mode,
                               per_sample_weights=per_sample_weights)

    def step(self):
        """Pushes the gradients of the forwards since the last step (after
        backward). Returns the PushResult, or None when nothing was pending.
        RuntimeError when a pending forward's rows have no gradient yet."""
        rows = self._take()
        if rows is None:
            return None
        result = self.client.push(sparse={self.table: rows})
        self.pushes += 1
        return result

    def _take(self):
        """(keys, grads, counts) of the forwards since the last step, which
        it clears; None when none is pending."""
        if not self._pending:
            return None
        pending, self._pending = self._pending, []
        keys, grads, counts = [], [], []
        for unique, weight, occurrences in pending:
            if weight.grad is None:
                raise RuntimeError(
                    "EmbeddingBag.step: a forward's rows have no gradient: "
                    "call loss.backward() before step()")
            keys.append(unique)
            grads.append(weight.grad.numpy())
            counts.append(occurrences)
        # The client sums the gradients (and counts) of a key seen twice.
        return (np.concatenate(keys), np.concatenate(grads),
                np.concatenate(counts))

    def zero_pending(self):
        """Drops the forwards since the last step without pushing them."""
        self._pending = []


def _ps_shapes(client):
    """{ps tensor name: shape} in the ps's order: the coordinator's shapes
    (client.tensor_shapes), or from an older one, which gives names and
    sizes only, an fc{l}.weight's [fan_in, fan_out], fan_out being its
    fc{l}.bias's size (common/model_spec.cc)."""
    if client.tensor_shapes:
        return dict(client.tensor_shapes)
    sizes = {name: len(view) for name, view in
             client.tensors(np.zeros(client.num_params, np.float32)).items()}
    shapes = {}
    for name, size in sizes.items():
        bias = name[:-len("weight")] + "bias" if name.endswith(
            ".weight") else None
        out = sizes.get(bias) if bias else None
        shapes[name] = ((size // out, out) if out and size % out == 0 else
                        (size,))
    return shapes


def _linear_weights(module):
    """Names of the module's parameters that are an nn.Linear's weight."""
    return {(prefix + "." if prefix else "") + "weight"
            for prefix, m in module.named_modules()
            if isinstance(m, nn.Linear)}


def _fmt(shape):
    return "[%s]" % ", ".join(str(d) for d in shape)


class DenseOnPs:
    """A module's dense parameters kept on the ps (Downpour n_fetch/n_push).

    The module's trainable parameters are matched to the ps model's tensors
    (client.tensors): by name when the names are the ps's (fc1.weight, ...),
    else in order (an nn.Sequential's 0.weight, 0.bias, 2.weight, ...), or
    by `names` ({module parameter: ps tensor}). Every ps tensor must be
    matched, each with its shape (an nn.Linear's weight transposed):
    ValueError naming both shapes otherwise.

    The constructor fetches. Then, after each backward, step(): adds the
    gradients to the accumulator and clears them, pushes the sum every
    n_push steps (PushResult, else None), and fetches every n_fetch steps.
    fetch() and flush() (push what is accumulated) may be called any time.
    """

    def __init__(self, module, client, n_fetch=1, n_push=1, names=None):
        if n_fetch < 1 or n_push < 1:
            raise ValueError("DenseOnPs: n_fetch and n_push must be >= 1, got "
                             "%d and %d" % (n_fetch, n_push))
        self.module, self.client = module, client
        self.n_fetch, self.n_push = n_fetch, n_push
        self._bind(names)
        self._grad = np.zeros(client.num_params, dtype=np.float32)
        self._accumulated = 0
        self.steps = self.pushes = self.fetches = 0
        self.fetch()

    def _bind(self, names):
        shapes = _ps_shapes(self.client)
        params = dict(self.module.named_parameters())
        if names is None:
            mine = [n for n, p in params.items() if p.requires_grad]
            if set(mine) == set(shapes):
                names = {n: n for n in mine}
            elif len(mine) == len(shapes):
                names = dict(zip(mine, shapes))
            else:
                raise ValueError(
                    "DenseOnPs: the module has %d trainable parameters (%s), "
                    "the ps model %d tensors (%s): it does not match the "
                    "YAML model" % (len(mine), ", ".join(mine), len(shapes),
                                    ", ".join("%s %s" % (n, _fmt(s))
                                              for n, s in shapes.items())))
        missing = set(shapes) - set(names.values())
        if missing:
            raise ValueError("DenseOnPs: no module parameter for the ps "
                             "tensors %s" % ", ".join(sorted(missing)))
        views = self.client.tensors(np.arange(self.client.num_params))
        linear = _linear_weights(self.module)
        self._bound = []  # (param, ps name, ps shape, start, transposed)
        for mine, theirs in names.items():
            if mine not in params:
                raise ValueError("DenseOnPs: the module has no parameter %r"
                                 % mine)
            if theirs not in shapes:
                raise ValueError("DenseOnPs: the ps model has no tensor %r "
                                 "(it has %s)" % (theirs, ", ".join(shapes)))
            p, shape = params[mine], shapes[theirs]
            # The built-in types keep an fc weight [in, out]; a `tensors`
            # model declares PyTorch's own shapes.
            transposed = (mine in linear and len(shape) == 2 and
                          self.client.model_type != "tensors")
            want = tuple(reversed(shape)) if transposed else tuple(shape)
            if tuple(p.shape) != want:
                raise ValueError(
                    "DenseOnPs: module parameter %r has shape %s, but ps "
                    "tensor %r is %s%s" % (
                        mine, _fmt(p.shape), theirs, _fmt(shape),
                        " (as an nn.Linear weight [out, in]: %s)" % _fmt(want)
                        if transposed else ""))
            self._bound.append((p, theirs, shape, int(views[theirs][0]),
                                transposed))

    def fetch(self):
        """Copies the ps values into the module's parameters."""
        params, _ = self.client.pull()
        with torch.no_grad():
            for p, _, shape, start, transposed in self._bound:
                n = int(np.prod(shape))
                value = torch.from_numpy(
                    params[start:start + n].reshape(shape))
                p.copy_(value.t() if transposed else value)
        self.fetches += 1

    def step(self):
        """After backward: accumulates the gradients (and clears them),
        pushes every n_push steps, fetches every n_fetch steps. Returns the
        PushResult when it pushed, else None."""
        result = self.flush() if self._accumulate() else None
        self._fetch_if_due()
        return result

    def _accumulate(self):
        """Adds the gradients to the accumulator and clears them; True when
        this step pushes (every n_push steps)."""
        for p, _, shape, start, transposed in self._bound:
            if p.grad is None:
                continue  # no gradient reached it this step: adds nothing
            g = p.grad.detach()
            g = (g.t() if transposed else g).to("cpu", torch.float32)
            self._grad[start:start + g.numel()] += g.contiguous().numpy(
            ).reshape(-1)
            p.grad = None
        self._accumulated += 1
        self.steps += 1
        return self.steps % self.n_push == 0

    def _fetch_if_due(self):
        if self.steps % self.n_fetch == 0:
            self.fetch()

    def flush(self):
        """Pushes the accumulated gradient now (None when there is none)."""
        if not self._accumulated:
            return None
        result = self.client.push(self._grad)
        self._pushed()
        return result

    def _pushed(self):
        self._grad[:] = 0
        self._accumulated = 0
        self.pushes += 1


def step(*parts):
    """After backward: the step() of each part (EmbeddingBags and at most one
    DenseOnPs, of one client) in ONE client.push, where each part's own
    step() pushes once: the same updates, one request per ps instead of one
    per part. The DenseOnPs's gradient rides along on the steps it pushes
    (n_push) and it fetches as its step() does. Returns the PushResult, or
    None when nothing was pushed."""
    bags = [p for p in parts if isinstance(p, EmbeddingBag)]
    dense = [p for p in parts if isinstance(p, DenseOnPs)]
    if len(bags) + len(dense) != len(parts) or len(dense) > 1:
        raise ValueError("downpour.torch.step takes EmbeddingBags and at most "
                         "one DenseOnPs")
    if len({id(p.client) for p in parts}) > 1:
        raise ValueError("downpour.torch.step: the parts use different "
                         "clients; step each client's parts on their own")
    sparse, pushed = {}, []
    for bag in bags:
        rows = bag._take()
        if rows is None:
            continue
        pushed.append(bag)
        if bag.table in sparse:  # two bags on one table: one set of rows
            rows = tuple(np.concatenate([a, b])
                         for a, b in zip(sparse[bag.table], rows))
        sparse[bag.table] = rows
    grad = dense[0]._grad if dense and dense[0]._accumulate() else None
    result = None
    if sparse or grad is not None:
        result = parts[0].client.push(grad, sparse=sparse or None)
        for bag in pushed:
            bag.pushes += 1
        if grad is not None:
            dense[0]._pushed()
    if dense:
        dense[0]._fetch_if_due()
    return result

"""downpour.Client: a worker process written in Python.

It registers with the coordinator as worker `index` (or joins), heartbeats on
a daemon thread with a report (steps, examples, pushes, metrics, finished),
reads the placement map, and pulls and pushes dense blocks and sparse rows as
NumPy arrays over the C++ worker's wire (proto/ps.proto: little-endian bytes,
never repeated floats).

Exactly once, as worker/grpc_ps_client.cc: every push request carries
sequence (incarnation << 32) | n, n = 1, 2, ... per ps shard, and the push key
the coordinator issued with the incarnation. A request that fails with a
retryable code (UNAVAILABLE, DEADLINE_EXCEEDED, FAILED_PRECONDITION, ABORTED;
CANCELLED counts as UNAVAILABLE) is sent again with the same sequence after
re-reading the placement, with capped exponential backoff and jitter, for up
to training.outage_timeout_s: a push the ps applied already answers as a
duplicate and is not applied twice. A push the ps's guard refused (an outlier
gradient) is answered, not applied; the client pauses 25-50 ms, as the C++
client does, and PushResult.refused says why. A request a ps answers "bucket
moved" (a live move) is split by its rows' owners now (_moves.py).

Thread-safety: pushes and dense pulls from one thread at a time (one
request in flight per shard); pull_sparse may also run on a second thread
(EmbeddingBag.prefetch). The two share the placement (its fields replaced
one after another) and the last key split (_partition, replaced whole); a
request sent on a placement that changes meanwhile fails at the ps and is
retried on the new one. The heartbeat thread only reads the report under a
lock, which also guards the thread pool's creation.
"""

import concurrent.futures
import logging
import math
import os
import random
import threading
import time
from collections import namedtuple

import grpc
import numpy as np

from . import _moves, _rpc
from . import config as config_lib
from ._proto import coordinator_pb2, ps_pb2

log = logging.getLogger("downpour")

_CHUNK_BYTES = 4 << 20  # worker/grpc_ps_client.cc kChunkBytes
_RETRYABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
              grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.ABORTED)
_BUCKET_MOVED = "bucket moved"  # common/sparse_keys.h kBucketMovedMessage
_SEQUENCE_COUNT_BITS = 32  # common/push_sequence.h

PushResult = namedtuple("PushResult", ["duplicate", "refused", "versions"])
PushResult.__doc__ = """What the shards answered one push.
duplicate: every request was a retry of one applied before (nothing new).
refused: the ps guards' reasons, one per refusing shard ([] = applied).
versions: the new version of each pushed block, by block id (dict)."""


class DownpourError(Exception):
    """A call the client gave up on; `code` is the gRPC status code."""

    def __init__(self, message, code=None):
        super().__init__(message)
        self.code = code


def make_sequence(incarnation, n):
    """common/push_sequence.h MakeSequence: (incarnation << 32) | n."""
    return (incarnation << _SEQUENCE_COUNT_BITS) | n


_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def mix_keys(keys):
    """feature_hash.mix_key of each uint64 key (vectorized, wraps mod 2^64)."""
    keys = np.asarray(keys, dtype=np.uint64)
    # In place on one copy: a worker's batch has ~10^4-10^5 keys, and each
    # temporary costs as much as the arithmetic.
    z = keys >> np.uint64(30)
    z ^= keys
    with np.errstate(over="ignore"):
        z *= _M1
        z ^= z >> np.uint64(27)
        z *= _M2
    z ^= z >> np.uint64(31)
    return z


def _unique(keys):
    """(sorted unique keys, inverse): np.unique's, with inverse None when
    the keys are sorted and unique already (a worker's usual batch), which
    is checked in one pass instead of sorted again."""
    if len(keys) < 2 or bool(np.all(keys[1:] > keys[:-1])):
        return keys, None
    return np.unique(keys, return_inverse=True)


def _by_shard(owners):
    """(order, {shard: slice}): `order` sorts the keys by the ps that owns
    them (stable: each ps's keys stay in their order), and shard s's keys
    are order[slice]. One radix sort of small ints and contiguous slices
    cost less than a boolean mask per ps."""
    owners = owners.astype(np.uint16)  # ps indexes: the placement's < 2^16
    order = np.argsort(owners, kind="stable")
    counts = np.bincount(owners)
    ends = np.cumsum(counts)
    return order, {int(s): slice(int(ends[s] - counts[s]), int(ends[s]))
                   for s in np.flatnonzero(counts)}


def _decode(block):
    """A BlockData's values as float32."""
    if block.encoding == ps_pb2.FLOAT32:
        return np.frombuffer(block.data, dtype="<f4")
    if block.encoding == ps_pb2.FP16:
        return np.frombuffer(block.data, dtype="<f2").astype(np.float32)
    if block.encoding == ps_pb2.BF16:
        bits = np.frombuffer(block.data, dtype="<u2").astype(np.uint32) << 16
        return bits.view(np.float32)
    raise DownpourError("block %d in unknown encoding %d" %
                        (block.block_id, block.encoding))


class Client:
    """One Python worker of a Downpour job (see the module doc).

    config: the job's YAML path (or a config.JobConfig). index: the worker's
    slot in cluster.workers; join=True asks the coordinator for a free slot of
    cluster.max_workers instead. coordinator: overrides cluster.coordinator.
    listen: where its Status service listens (default its cluster.workers
    entry; "127.0.0.1:0" when it joins); the address it registers is the one
    bound. serve_status=False serves none (then `address` must be given: a
    host:port the coordinator shows). device: shown in psctl status.
    """

    def __init__(self, config, index=0, join=False, coordinator=None,
                 listen=None, address=None, device="python",
                 serve_status=True):
        self.config = (config if isinstance(config, config_lib.JobConfig)
                       else config_lib.load(config))
        cfg = self.config
        self.index = -1 if join else int(index)
        self._coordinator_address = coordinator or cfg.coordinator
        self._name = "worker-%d" % max(self.index, 0)
        self._started = time.monotonic()
        self._lock = threading.Lock()  # the report, stop flags and _pool
        self._report = coordinator_pb2.MemberReport(
            loss=math.nan, accuracy=math.nan, device=device)
        self._metrics = {}
        self.incarnation = 0
        self._status_server = None
        if serve_status:
            if listen is None:
                listen = (cfg.workers[index] if not join and
                          0 <= index < len(cfg.workers) else "127.0.0.1:0")
            self._status_server, bound = _rpc.serve_status(
                listen, cfg, self._name, self._status)
            address = address or bound
        elif address is None:
            raise ValueError("serve_status=False needs address=HOST:PORT")
        self.address = address
        self._coordinator = _rpc.CoordinatorStub(_rpc.make_channel(
            self._coordinator_address, cfg, self._name))
        self.stop_requested = False  # the coordinator says the job is over
        self.stop_reason = ""
        self.drained = False
        self._closed = threading.Event()
        self._pool = None  # _call_shards's threads, made when first needed
        self._last_partition = None  # see _partition
        self._member_key = ""
        self.duplicates = 0  # push requests answered as duplicates
        try:
            self._join(join)
        except BaseException:
            if self._status_server is not None:
                self._status_server.stop(0)
            raise

    def _join(self, join):
        self._register(join)
        self._read_model()
        self._placement = None
        self._epoch = 0
        self._shards = {}  # index -> (address, stub, block chunks)
        self._owners = None  # bucket -> ps index
        self._refresh_placement(wait=True)
        self._next_n = {}  # ps index -> n of its next push request
        self._pushes_begun = 0
        self.versions = np.zeros(len(self.block_lengths), dtype=np.uint64)
        self._heartbeat = threading.Thread(
            target=self._heartbeat_loop, name="downpour-heartbeat",
            daemon=True)
        self._heartbeat.start()

    # ---- membership ----

    def _call(self, method, request, what):
        try:
            return method(request, timeout=self.config.deadline_s)
        except grpc.RpcError as e:
            raise DownpourError("%s: %s" % (what, e.details()), e.code())

    def _register(self, join=False):
        request = coordinator_pb2.RegisterWorkerRequest(
            index=self.index, address=self.address,
            member_key=self._member_key, join=join)
        what = "register with the coordinator at %s" % self._coordinator_address
        response = self._retry_until(
            time.monotonic() + self.config.connect_timeout_s, what,
            lambda: self._coordinator.RegisterWorker(
                request, timeout=self.config.deadline_s))
        if response.drained:
            raise DownpourError(
                "worker %d was drained (psctl drain-worker): it does not train "
                "again; join with join=True to add one" % response.index)
        first = not self._member_key
        self._member_key = response.member_key
        if first:
            self.index = response.index
            self._name = "worker-%d" % self.index
            self.incarnation = response.incarnation
            self.push_key = response.push_key
            self.start_clock = response.start_clock
            self.partition = response.partition
            log.info("worker %d registered: incarnation %d, data parts %s of "
                     "%d", self.index, self.incarnation,
                     list(response.partition.parts),
                     response.partition.num_parts)
        # Like the C++ worker (worker_node.cc Reregister), a re-registration
        # keeps the incarnation its pushes are numbered under.
        return response

    def _retry_until(self, deadline, what, fn):
        """fn() until it succeeds, retrying retryable codes until deadline."""
        delay = 0.05
        while True:
            try:
                return fn()
            except grpc.RpcError as e:
                code = e.code()
                if code == grpc.StatusCode.CANCELLED:
                    code = grpc.StatusCode.UNAVAILABLE
                if code not in _RETRYABLE:
                    raise DownpourError("%s: %s" % (what, e.details()), code)
                if time.monotonic() >= deadline:
                    raise DownpourError("%s: gave up: %s" % (what, e.details()),
                                        grpc.StatusCode.DEADLINE_EXCEEDED)
            time.sleep(delay * random.uniform(0.5, 1.0))
            delay = min(delay * 2, 1.0)

    def _heartbeat_loop(self):
        refused = False
        while not self._closed.wait(self.config.heartbeat_interval_s):
            refused = self._beat(refused)

    def _beat(self, refused=False):
        """One heartbeat; returns whether the coordinator refused our key."""
        with self._lock:
            report = coordinator_pb2.MemberReport()
            report.CopyFrom(self._report)
            for k, v in self._metrics.items():
                report.metrics[k] = v
        request = coordinator_pb2.HeartbeatRequest(
            role="worker", index=self.index, report=report,
            address=self.address, member_key=self._member_key)
        try:
            response = self._coordinator.Heartbeat(
                request, timeout=self.config.deadline_s)
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.FAILED_PRECONDITION:
                log.warning("worker %d: coordinator does not know us; "
                            "registering again", self.index)
                try:
                    self._register()
                except DownpourError as err:
                    log.warning("worker %d: %s", self.index, err)
            elif e.code() == grpc.StatusCode.PERMISSION_DENIED:
                if not refused:
                    log.error("worker %d: %s", self.index, e.details())
                return True
            else:
                log.debug("worker %d: heartbeat: %s", self.index, e.details())
            return False
        with self._lock:
            if response.drained:
                self.drained = True
            if response.stop and not self.stop_requested:
                self.stop_requested = True
                self.stop_reason = response.stop_reason
                log.info("coordinator says stop: %s", response.stop_reason)
        return False

    def report(self, steps=None, examples=None, loss=None, metrics=None,
               examples_per_sec=None, finished=None):
        """Sets figures of the next heartbeat's report (None: unchanged).
        metrics: test metrics by name ("accuracy", "auc", "logloss", ...),
        shown by psctl and used for training.target_metric."""
        with self._lock:
            r = self._report
            if steps is not None:
                r.step = int(steps)
            if examples is not None:
                r.examples = int(examples)
            if loss is not None:
                r.loss = float(loss)
            if examples_per_sec is not None:
                r.examples_per_sec = float(examples_per_sec)
            if finished is not None:
                r.finished = bool(finished)
            if metrics:
                self._metrics.update({k: float(v) for k, v in metrics.items()})
                if "accuracy" in metrics:
                    r.accuracy = float(metrics["accuracy"])
                r.evaluations += 1

    def _count(self, **deltas):
        with self._lock:
            for k, v in deltas.items():
                setattr(self._report, k, getattr(self._report, k) + v)

    def finish(self):
        """Reports the worker finished, sends a last heartbeat, stops the
        heartbeat thread. The client can still pull (not push)."""
        self.report(finished=True)
        self.close()

    def close(self):
        """Stops heartbeating after one last report. Idempotent."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._heartbeat.join()
        self._beat()
        with self._lock:
            pool, self._pool = self._pool, None  # a pull after close: another
        if pool is not None:
            pool.shutdown(wait=False)
        if self._status_server is not None:
            self._status_server.stop(1)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _status(self):
        """GetStatus's answer (rpc/status_service.cc's fields a worker sets)."""
        from . import __version__
        from ._proto import status_pb2
        with self._lock:
            r = self._report
            response = status_pb2.GetStatusResponse(
                role="worker", index=self.index, version="python " +
                __version__, uptime_seconds=time.monotonic() - self._started,
                address=self.address, loss=r.loss, accuracy=r.accuracy,
                examples_per_sec=r.examples_per_sec, device=r.device,
                pid=os.getpid(), transport="TLS" if self.config.tls else
                "plaintext")
            counters = {
                # The coordinator's probe (coordinator/member_identity.h).
                "member_incarnation": self.incarnation,
                "step": r.step, "examples": r.examples, "pushes": r.pushes,
                "pulls": r.pulls, "finished": 1 if r.finished else 0,
                "duplicate_pushes": self.duplicates}
            for k, v in counters.items():
                response.counters[k] = float(v)
            for k, v in self._metrics.items():
                response.metrics[k] = v
        return response

    # ---- model and placement ----

    def _read_model(self):
        model = self._call(self._coordinator.DescribeModel,
                           coordinator_pb2.DescribeModelRequest(),
                           "read the model from the coordinator")
        self.model_type = model.type  # "" from a coordinator before it
        self.tensor_shapes = {t.name: tuple(t.shape) for t in model.tensors}
        blocks = sorted(model.blocks, key=lambda b: b.id)
        self.block_tensors = [b.tensor for b in blocks]
        self.block_lengths = np.array([b.floats for b in blocks],
                                      dtype=np.int64)
        self.block_offsets = np.concatenate(
            [[0], np.cumsum(self.block_lengths)]).astype(np.int64)
        self.num_params = int(self.block_offsets[-1])

    def tensors(self, params):
        """{tensor name: view of `params`} (a tensor's blocks are adjacent)."""
        out = {}
        for i, name in enumerate(self.block_tensors):
            lo, hi = self.block_offsets[i], self.block_offsets[i + 1]
            start = out[name][0] if name in out else lo
            out[name] = (start, hi)
        return {name: params[lo:hi] for name, (lo, hi) in out.items()}

    def _refresh_placement(self, wait=False):
        what = "read the placement from the coordinator at %s" % (
            self._coordinator_address)

        def get():
            p = self._coordinator.GetPlacement(
                coordinator_pb2.GetPlacementRequest(),
                timeout=self.config.deadline_s)
            if wait and p.epoch < 1:
                raise _NotReady(p.waiting_for or "a placement")
            return p
        try:
            if wait:
                deadline = time.monotonic() + self.config.connect_timeout_s
                while True:
                    try:
                        placement = self._retry_until(deadline, what, get)
                        break
                    except _NotReady as e:
                        if time.monotonic() >= deadline:
                            raise DownpourError(
                                "%s: not ready: waits for %s" % (what, e),
                                grpc.StatusCode.DEADLINE_EXCEEDED)
                        time.sleep(0.05)
            else:
                placement = get()
        except grpc.RpcError:
            return  # keep the one we have; the caller's backoff decides
        if placement.epoch <= self._epoch:
            return
        shards = {}
        for info in placement.shards:
            old = self._shards.get(info.index)
            stub = (old[1] if old is not None and old[0] == info.address else
                    self._ps_stub(info.address))
            chunks, size = [], _CHUNK_BYTES
            for block in sorted(info.block_ids):
                nbytes = int(self.block_lengths[block]) * 4
                if size + nbytes > _CHUNK_BYTES:
                    chunks.append([])
                    size = 0
                chunks[-1].append(block)
                size += nbytes
            shards[info.index] = (info.address, stub, chunks)
        owners = None
        if any(len(info.buckets) for info in placement.shards):
            owners = np.full(self.config.sparse_buckets, -1, dtype=np.int64)
            for info in placement.shards:
                buckets = np.array(info.buckets, dtype=np.int64)
                owners[buckets[buckets < len(owners)]] = info.index
        log.info("placement epoch %d: %d shards", placement.epoch, len(shards))
        self._placement, self._epoch = placement, placement.epoch
        self._shards, self._owners = shards, owners

    def _ps_stub(self, address):
        """The stub of the ps at `address` (tests wrap it to inject faults)."""
        return _rpc.ParameterServerStub(_rpc.make_channel(
            address, self.config, self._name))

    @property
    def epoch(self):
        """The placement epoch in use."""
        return self._epoch

    def _with_retries(self, shard, what, send):
        """send(stub, epoch) with the C++ client's retry rules."""
        deadline = time.monotonic() + (self.config.outage_timeout_s
                                       if self.config.outage_timeout_s > 0
                                       else math.inf)
        delay, warned = 0.05, False
        while True:
            if shard not in self._shards:
                raise DownpourError("placement epoch %d names no ps %d" %
                                    (self._epoch, shard))
            address, stub, _ = self._shards[shard]
            try:
                return send(stub, self._epoch)
            except grpc.RpcError as e:
                code, details = e.code(), e.details() or ""
            if code == grpc.StatusCode.CANCELLED:
                code = grpc.StatusCode.UNAVAILABLE
            message = "%s ps %d at %s: %s" % (what, shard, address, details)
            if _BUCKET_MOVED in details:
                raise _moves.BucketMoved(message, code)  # see _send
            if code == grpc.StatusCode.OUT_OF_RANGE:
                raise DownpourError(message + " (a newer process of this "
                                    "worker has pushed: this one was "
                                    "replaced)", code)
            if code not in _RETRYABLE:
                raise DownpourError(message, code)
            if time.monotonic() >= deadline:
                raise DownpourError(
                    "worker %d: gave up waiting for %s after %.0f s "
                    "(training.outage_timeout_s)" % (
                        self.index, message, self.config.outage_timeout_s),
                    grpc.StatusCode.DEADLINE_EXCEEDED)
            if not warned:
                log.warning("worker %d: %s; retrying with backoff",
                            self.index, message)
                warned = True
            # The shard may have moved or restarted: read the placement again.
            self._refresh_placement()
            time.sleep(delay * random.uniform(0.5, 1.0))
            delay = min(delay * 2, 1.0)

    def _call_shards(self, method, requests, what):
        """{shard: [request, ...]} -> {shard: [reply, ...]}: the shards at
        once (the first on this thread, the others on the client's thread
        pool: blocking calls there cost less than gRPC futures), each
        shard's requests one after the other, as the C++ client sends them.
        A request whose first try fails is sent again under the same
        sequence, with the ones after it, by _with_retries on this thread
        (which raises what it gives up on)."""
        shards = sorted(s for s in requests if requests[s])
        pool = self._rpc_pool() if len(shards) > 1 else None
        others = {s: pool.submit(self._first_tries, method, s, requests[s])
                  for s in shards[1:]}
        replies = {}
        for shard in shards:
            done = (others[shard].result() if shard in others else
                    self._first_tries(method, shard, requests[shard]))
            for request in requests[shard][len(done):]:
                done.append(self._send(method, shard, request, what))
            replies[shard] = done
        return replies

    def _send(self, method, shard, request, what, hops=0):
        """`request` to `shard` by _with_retries; when the ps answers "bucket
        moved", its sparse rows and dense blocks re-split by their owners
        now (_moves.py)."""
        def send(stub, epoch):
            request.placement_epoch = epoch
            return getattr(stub, method)(request,
                                         timeout=self.config.deadline_s)
        try:
            return self._with_retries(shard, what, send)
        except _moves.BucketMoved as moved:
            return _moves.resend(self, method, shard, request, what, moved,
                                 hops)

    def _rpc_pool(self):
        with self._lock:  # a prefetch thread may ask at the same time
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(
                    max_workers=8, thread_name_prefix="downpour-rpc")
            return self._pool

    def _first_tries(self, method, shard, requests):
        """The replies of `requests` to `shard`, in order, up to the first
        that fails (left to _with_retries). Reads the placement only."""
        replies = []
        entry, epoch = self._shards.get(shard), self._epoch
        if entry is None:
            return replies
        call = getattr(entry[1], method)
        for request in requests:
            request.placement_epoch = epoch
            try:
                replies.append(call(request, timeout=self.config.deadline_s))
            except grpc.RpcError:
                break
        return replies

    # ---- dense blocks ----

    def pull(self):
        """Every dense block: (params, versions), params a float32 array of
        num_params values in block order, versions a uint64 array by block
        id (updates applied). Also kept as self.versions for push()."""
        params = np.empty(self.num_params, dtype=np.float32)
        versions = np.zeros(len(self.block_lengths), dtype=np.uint64)
        nbytes = 0
        requests = {
            shard: [ps_pb2.PullRequest(block_ids=ids, worker_id=self.index,
                                       encoding=ps_pb2.FLOAT32)
                    for ids in chunks]
            for shard, (_, _, chunks) in self._shards.items()}
        for shard, replies in sorted(
                self._call_shards("Pull", requests, "pull from").items()):
            for block in (b for reply in replies for b in reply.blocks):
                values = _decode(block)
                i = block.block_id
                if (i >= len(self.block_lengths) or
                        len(values) != self.block_lengths[i]):
                    raise DownpourError(
                        "ps %d returned block %d with %d values, which "
                        "the model does not hold: do all daemons use the "
                        "same config?" % (shard, i, len(values)))
                params[self.block_offsets[i]:
                       self.block_offsets[i + 1]] = values
                versions[i] = block.version
                nbytes += len(block.data)
        self.versions = versions.copy()
        self._count(pulls=1, bytes=nbytes)
        return params, versions

    def push(self, grad=None, versions=None, sparse=None):
        """One push, applied exactly once: `grad`, the gradient of every dense
        block (num_params float32 values, or None), computed on `versions`
        (default: those of the last pull), and `sparse`, {table: (keys,
        grads[, counts])} with keys uint64 (any order; repeats are summed)
        and grads of shape (len(keys), dim). Returns a PushResult; raises
        DownpourError when a shard refused it outright or stayed out of reach
        for training.outage_timeout_s."""
        if grad is None and not sparse:
            raise ValueError("push: nothing to push")
        if versions is None:
            versions = self.versions
        requests = {}  # shard -> [PushRequest without epoch and sequence]
        if grad is not None:
            grad = np.ascontiguousarray(grad, dtype="<f4").reshape(-1)
            if grad.size != self.num_params:
                raise ValueError("push: the model has %d parameters, the "
                                 "gradient %d" % (self.num_params, grad.size))
            if not np.all(np.isfinite(grad)):
                raise ValueError("push: the gradient holds NaN or Inf")
            for shard, (_, _, chunks) in sorted(self._shards.items()):
                for ids in chunks:
                    blocks = [ps_pb2.BlockData(
                        block_id=i, version=int(versions[i]),
                        encoding=ps_pb2.FLOAT32,
                        data=grad[self.block_offsets[i]:
                                  self.block_offsets[i + 1]].tobytes())
                        for i in ids]
                    requests.setdefault(shard, []).append(
                        ps_pb2.PushRequest(blocks=blocks))
        keys_pushed = 0
        for table, rows in sorted((sparse or {}).items()):
            for shard, part in self._split_rows(table, *rows).items():
                # A shard's rows ride on its first request, as in C++.
                mine = requests.setdefault(shard, [])
                if not mine:
                    mine.append(ps_pb2.PushRequest())
                mine[0].sparse.append(part)
                keys_pushed += len(part.keys) // 8
        self._pushes_begun += 1
        clock = self.start_clock + self._pushes_begun
        duplicate, refused, new_versions, nbytes = True, [], {}, 0
        for shard, shard_requests in sorted(requests.items()):
            for request in shard_requests:
                request.worker_id = self.index
                request.push_key = self.push_key
                request.clock = clock
                request.sequence = self._take_sequence(shard)
                nbytes += request.ByteSize()
        replies = self._call_shards("Push", requests, "push to")
        for shard, shard_requests in sorted(requests.items()):
            for request, reply in zip(shard_requests, replies[shard]):
                if reply.duplicate:
                    self.duplicates += 1
                else:
                    duplicate = False
                if reply.refused:
                    refused.append("ps %d: %s" % (shard, reply.refused))
                for block, version in zip(request.blocks, reply.versions):
                    new_versions[block.block_id] = version
        if refused:
            # The ps's guard refused it as an outlier: go on without this
            # gradient, after the C++ client's pause (25-50 ms, jittered).
            time.sleep(random.uniform(0.025, 0.05))
        self._count(pushes=1, bytes=nbytes,
                    sparse_row_updates=0 if refused else keys_pushed)
        with self._lock:
            self._report.clock = max(self._report.clock, clock)
        return PushResult(duplicate, refused, new_versions)

    def _take_sequence(self, shard):
        n = self._next_n.get(shard, 1)
        self._next_n[shard] = n + 1
        return make_sequence(self.incarnation, n)

    def push_request_again_for_test(self, shard, sequence, grad):
        """Sends the dense part of shard `shard` of `grad` again under an old
        `sequence` (tests of exactly-once: the ps must answer duplicate)."""
        _, _, chunks = self._shards[shard]
        grad = np.asarray(grad, dtype="<f4").reshape(-1)
        request = ps_pb2.PushRequest(
            worker_id=self.index, push_key=self.push_key, sequence=sequence,
            clock=self.start_clock + self._pushes_begun,
            blocks=[ps_pb2.BlockData(
                block_id=i, version=int(self.versions[i]),
                data=grad[self.block_offsets[i]:
                          self.block_offsets[i + 1]].tobytes())
                for i in chunks[0]])
        return self._send("Push", shard, request, "push to")

    # ---- sparse rows ----

    def _shard_of_keys(self, keys):
        if self._owners is None:
            raise DownpourError("the model has no sparse tables (the placement "
                                "gives no ps any hash bucket)")
        owners = self._owners[mix_keys(keys) %
                              np.uint64(len(self._owners))]
        if np.any(owners < 0):
            raise DownpourError("the placement gives some buckets no ps: is "
                                "model.sparse_buckets the daemons' value?")
        return owners

    def _partition(self, unique):
        """_by_shard of sorted unique keys' owners. The last key set's is
        kept (a copy of the keys, with the placement epoch): a push of the
        rows just pulled, the usual step, does not split them again."""
        last = self._last_partition
        if (last is not None and last[0] == self._epoch and
                np.array_equal(last[1], unique)):
            return last[2]
        partition = _by_shard(self._shard_of_keys(unique))
        self._last_partition = (self._epoch, unique.copy(), partition)
        return partition

    def _split_rows(self, table, keys, grads, counts=None):
        """{shard: SparseRows} of a push: sorted unique keys, summed grads."""
        keys = np.asarray(keys, dtype=np.uint64).reshape(-1)
        grads = np.asarray(grads, dtype=np.float32).reshape(len(keys), -1)
        if not np.all(np.isfinite(grads)):
            raise ValueError("push: table %d's gradients hold NaN or Inf" %
                             table)
        unique, inverse = _unique(keys)
        ones = counts is None
        counts = (np.ones(len(keys), dtype=np.uint32) if ones else
                  np.asarray(counts, dtype=np.uint32).reshape(-1))
        if inverse is None:  # sorted and unique already: nothing to sum
            summed, occurrences = grads, counts
        else:
            summed = np.zeros((len(unique), grads.shape[1]), dtype=np.float32)
            np.add.at(summed, inverse, grads)
            occurrences = np.zeros(len(unique), dtype=np.uint32)
            np.add.at(occurrences, inverse, counts)
        order, parts = self._partition(unique)
        keys, values = unique[order], summed[order].astype("<f4", copy=False)
        # Occurrences go on the wire only when one is not 1.
        plain = ones and inverse is None
        occurrences = None if plain else occurrences[order]
        out = {}
        for shard, part in parts.items():
            out[shard] = ps_pb2.SparseRows(
                table=table, keys=keys[part].tobytes(),
                values=values[part].tobytes(),
                counts=(b"" if plain or (ones and np.all(occurrences[part] == 1))
                        else occurrences[part].astype("<u4").tobytes()))
        return out

    def pull_sparse(self, table, keys):
        """The rows of `keys` (uint64, any order, repeats allowed) of sparse
        table `table`: (values, versions), values float32 of shape
        (len(keys), dim) in the keys' order, versions uint32 (updates applied,
        0 without a row). A key without a row reads its initial values; a pull
        creates no row."""
        keys = np.asarray(keys, dtype=np.uint64).reshape(-1)
        unique, inverse = _unique(keys)
        order, parts = self._partition(unique)
        by_shard = unique[order]
        # By unique key: ps s's answer goes to order[its slice].
        values, versions, dim = None, np.zeros(len(unique), np.uint32), None
        nbytes = 0
        requests = {shard: [ps_pb2.PullRequest(
            worker_id=self.index, sparse=[ps_pb2.SparseRows(
                table=table, keys=by_shard[part].tobytes())])]
            for shard, part in parts.items()}
        replies = self._call_shards("Pull", requests, "pull from")
        for shard, mine in sorted(parts.items()):
            reply = replies[shard][0]
            n = mine.stop - mine.start
            if len(reply.sparse) != 1:
                raise DownpourError("ps %d answered a pull of table %d with "
                                    "%d tables" % (shard, table,
                                                   len(reply.sparse)))
            got = np.frombuffer(reply.sparse[0].values, dtype="<f4")
            if dim is None:
                dim = len(got) // max(n, 1)
                values = np.zeros((len(unique), dim), dtype=np.float32)
            if len(got) != n * dim:
                raise DownpourError("ps %d answered %d values for %d keys of "
                                    "dim %d" % (shard, len(got), n, dim))
            values[order[mine]] = got.reshape(n, dim)
            if reply.sparse[0].versions:
                versions[order[mine]] = np.frombuffer(
                    reply.sparse[0].versions, dtype="<u4")
            nbytes += len(reply.sparse[0].values)
        self._count(pulls=1, bytes=nbytes)
        if values is None:
            return np.zeros((0, 0), dtype=np.float32), versions
        if inverse is None:
            return values, versions
        return values[inverse], versions[inverse]

    # ---- observation ----

    def checksums(self):
        """{block id: (version, crc32c)} over every ps (for tests/tools)."""
        out = {}
        for shard in sorted(self._shards):
            reply = self._with_retries(
                shard, "checksums from",
                lambda stub, epoch: stub.Checksums(
                    ps_pb2.ChecksumRequest(), timeout=self.config.deadline_s))
            for b in reply.blocks:
                out[b.block_id] = (b.version, b.crc32c)
        return out

    def cluster_status(self):
        """The coordinator's ClusterStatusResponse."""
        return self._call(self._coordinator.ClusterStatus,
                          coordinator_pb2.ClusterStatusRequest(),
                          "read the cluster status")


class _NotReady(Exception):
    pass

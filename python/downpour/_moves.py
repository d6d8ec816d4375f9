"""Requests a ps answered "bucket moved": a live move (psctl move-buckets,
add-ps, drain-ps) handed some of their keys' buckets, or some of their dense
blocks, to another ps.

As the C++ client does (worker/grpc_ps_client.h, "Live bucket moves"): the
ps applied nothing and did not use up the sequence. The client re-reads the
placement and splits the request's sparse rows by their buckets' owners now,
and its dense blocks by theirs. A push's rows and blocks that ps still holds
go to it again under the same sequence, even with nothing left, so its
sequences have no gap; each other owner's go as a request of their own with
that shard's next sequence, sent like any request (moved again: split again,
at most MAX_HOPS times). A pull gathers the rows and blocks from their owners
and answers in the request's order. When the placement read still gives the ps every key it
called moved, the client asks again after a pause, MOVED_TRIES times, then
fails (the coordinator and the ps disagree).
"""

import logging
import time

import numpy as np

from ._proto import ps_pb2

log = logging.getLogger("downpour")

MOVED_TRIES = 5  # worker/grpc_ps_client_internal.h kMovedTries
MAX_HOPS = 8  # kMaxMoveHops


class BucketMoved(Exception):
    """Raised by Client._with_retries for a "bucket moved" answer."""

    def __init__(self, message, code):
        super().__init__(message)
        self.code = code


def _split_blocks(client, request, keep):
    """{owner: [BlockData or block id, ...]} of the request's dense blocks
    (a push's blocks, a pull's block_ids) by their owners now; `keep` always
    present."""
    owner_of = {block: shard
                for shard, (_, _, chunks) in client._shards.items()
                for ids in chunks for block in ids}
    pieces = {keep: []}
    for block in request.blocks if hasattr(request, "blocks") else ():
        pieces.setdefault(owner_of.get(block.block_id, keep), []).append(block)
    for block in getattr(request, "block_ids", ()):
        pieces.setdefault(owner_of.get(block, keep), []).append(block)
    return pieces


def _split(client, request, keep):
    """{owner: [SparseRows, ...]} of the request's rows by their owners now;
    `keep` always present, with a row per table (maybe without keys)."""
    pieces = {keep: []}
    for rows in request.sparse:
        keys = np.frombuffer(rows.keys, dtype="<u8")
        values = np.frombuffer(rows.values, dtype="<f4")
        dim = len(values) // len(keys) if len(keys) else 0
        values = values.reshape(len(keys), dim) if dim else None
        counts = (np.frombuffer(rows.counts, dtype="<u4") if rows.counts
                  else None)
        order, parts = (client._partition(keys) if len(keys) else
                        (np.zeros(0, dtype=np.int64), {}))
        for owner in sorted(set(parts) | {keep}):
            mine = order[parts[owner]] if owner in parts else order[:0]
            pieces.setdefault(owner, []).append(ps_pb2.SparseRows(
                table=rows.table, keys=keys[mine].tobytes(),
                values=b"" if values is None else values[mine].tobytes(),
                counts=b"" if counts is None else counts[mine].tobytes()))
    return pieces


def resend(client, method, shard, request, what, moved, hops):
    """The reply to `request` (to `shard`, answered `moved`), its rows split
    by their owners now (the module doc)."""
    if hops >= MAX_HOPS:
        raise _error(client, "%s: the buckets or blocks moved %d times while they "
                     "were sent (last: %s): do moves keep handing them on? "
                     "Check `psctl moves`" % (what, hops, moved), moved.code)
    client._refresh_placement()
    pieces = _split(client, request, shard) if len(request.sparse) else {
        shard: []}
    blocks = _split_blocks(client, request, shard)
    if len(pieces) == 1 and len(blocks) == 1:
        # The placement read still gives them all to `shard`: a newer one
        # may come. Ask again after a pause, a bounded number of times.
        if hops >= MOVED_TRIES:
            raise _error(client, "%s: ps %d says the buckets or blocks moved, "
                         "but the coordinator's placement (epoch %d) still "
                         "gives them to it: %s" % (what, shard, client.epoch, moved),
                         moved.code)
        time.sleep(0.05 * (hops + 1))
        return client._send(method, shard, request, what, hops + 1)
    log.info("worker %d: %s ps %d: buckets or blocks moved; split over ps %s",
             client.index, what, shard, sorted(set(pieces) | set(blocks)))
    if method == "Push":
        return _push_pieces(client, shard, request, pieces, blocks, what,
                            hops)
    if len(request.block_ids):
        return _pull_blocks(client, shard, request, blocks, what, hops)
    return _pull_pieces(client, shard, request, pieces, what, hops)


def _push_pieces(client, shard, request, pieces, blocks, what, hops):
    """The kept piece under the request's sequence, the others under their
    shards' next; one reply: the versions of the request's blocks in its
    order, duplicate only when every piece was, refused when any was."""
    kept = ps_pb2.PushRequest()
    kept.CopyFrom(request)
    del kept.sparse[:]
    kept.sparse.extend(pieces.pop(shard))
    del kept.blocks[:]
    kept.blocks.extend(blocks.pop(shard))
    reply = client._send("Push", shard, kept, what, hops + 1)
    versions = dict(zip((b.block_id for b in kept.blocks), reply.versions))
    refused = [reply.refused] if reply.refused else []
    duplicate = reply.duplicate
    for owner in sorted(set(pieces) | set(blocks)):
        piece = ps_pb2.PushRequest(
            worker_id=request.worker_id, push_key=request.push_key,
            clock=request.clock, sequence=client._take_sequence(owner),
            sparse=pieces.get(owner, []), blocks=blocks.get(owner, []))
        answer = client._send("Push", owner, piece, what, hops + 1)
        versions.update(zip((b.block_id for b in piece.blocks),
                            answer.versions))
        duplicate = duplicate and answer.duplicate
        if answer.refused:
            refused.append("ps %d: %s" % (owner, answer.refused))
    reply.duplicate = duplicate
    reply.refused = "; ".join(refused)
    del reply.versions[:]
    reply.versions.extend(versions.get(b.block_id, 0) for b in request.blocks)
    return reply


def _pull_blocks(client, shard, request, blocks, what, hops):
    """A dense pull's blocks, each owner's from it, in one PullResponse."""
    out = ps_pb2.PullResponse()
    for owner, ids in sorted(blocks.items()):
        if not ids:
            continue
        piece = ps_pb2.PullRequest(block_ids=ids, worker_id=request.worker_id,
                                   encoding=request.encoding)
        out.blocks.extend(client._send("Pull", owner, piece, what,
                                       hops + 1).blocks)
    return out


def _pull_pieces(client, shard, request, pieces, what, hops):
    """The rows of each piece from its owner, put back in the request's key
    order in one PullResponse."""
    out = ps_pb2.PullResponse()
    for t, rows in enumerate(request.sparse):
        keys = np.frombuffer(rows.keys, dtype="<u8")
        values, versions = None, np.zeros(len(keys), dtype="<u4")
        for owner, owner_rows in sorted(pieces.items()):
            part = owner_rows[t]
            if not part.keys:
                continue
            piece = ps_pb2.PullRequest(worker_id=request.worker_id,
                                       sparse=[part])
            answer = client._send("Pull", owner, piece, what,
                                  hops + 1).sparse[0]
            at = np.searchsorted(keys, np.frombuffer(part.keys, dtype="<u8"))
            got = np.frombuffer(answer.values, dtype="<f4").reshape(
                len(at), -1)
            if values is None:
                values = np.zeros((len(keys), got.shape[1]), dtype="<f4")
            values[at] = got
            if answer.versions:
                versions[at] = np.frombuffer(answer.versions, dtype="<u4")
        out.sparse.add(table=rows.table,
                       keys=rows.keys,
                       values=b"" if values is None else values.tobytes(),
                       versions=versions.tobytes())
    return out


def _error(client, message, code):
    from .client import DownpourError
    return DownpourError("worker %d: %s" % (client.index, message), code)

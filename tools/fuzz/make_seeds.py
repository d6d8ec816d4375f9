#!/usr/bin/env python3
"""Writes the seed corpora of ps_fuzzer, coordinator_fuzzer and reader_fuzzer (tools/fuzz/corpus/).

Each seed is a sequence of records (op:u8, length:u16le, body) as the fuzzers
read them, whose bodies are protobuf messages of proto/ps.proto and
proto/coordinator.proto, encoded here by hand (no protobuf module needed):
the requests a worker, a ps, a standby and psctl really send, and the hostile
ones of issue 12. The model is the fuzzers' own: layers [6, 4, 3], block_size 8.
reader_fuzzer's seeds are an options byte (see reader_fuzzer.cc) and the text
of a CSV or LIBSVM file, good and broken.
Run it again after changing the record format; the corpora are checked in.
"""
import gzip
import math
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
BLOCKS = [8, 8, 8, 4, 8, 4, 3]  # floats per block of the fuzzers' model


def varint(n):
    n &= (1 << 64) - 1
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(num, value):
    """A field: int -> varint, bytes/str -> length-delimited, float -> double."""
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, int):
        return varint(num << 3) + varint(value)
    if isinstance(value, float):
        return varint(num << 3 | 1) + struct.pack("<d", value)
    if isinstance(value, str):
        value = value.encode()
    return varint(num << 3 | 2) + varint(len(value)) + value


def floats(values):
    return struct.pack("<%df" % len(values), *values)


def record(op, body=b""):
    return bytes([op]) + struct.pack("<H", len(body)) + body


# ---- ps ----
def block_data(block_id, values, version=0, encoding=None, data=None):
    m = field(1, block_id) + field(2, version)
    if encoding is not None:
        m += field(3, encoding)
    return m + field(4, floats(values) if data is None else data)


def push(blocks, worker=0, sequence=1, epoch=1, clock=0):
    m = field(1, epoch) + field(2, worker) + field(3, sequence)
    for b in blocks:
        m += field(4, b)
    return m + (field(5, clock) if clock else b"")


def pull(ids, worker=0, epoch=1, encoding=None):
    m = field(1, epoch)
    for i in ids:
        m += field(2, i)
    m += field(3, worker)
    return m + (field(4, encoding) if encoding is not None else b"")


def grad(block, value):
    return block_data(block, [value] * BLOCKS[block])


def replicate(blocks, full=True, generation=1, shard=0, optimizer="adam",
              sequences=()):
    m = field(1, shard) + field(2, 1) + field(3, full) + field(4, optimizer)
    for (bid, version, values, state) in blocks:
        m += field(5, field(1, bid) + field(2, version) + field(3, floats(values)) +
                   field(4, floats(state)))
    for (w, base, mask) in sequences:
        m += field(6, field(1, w) + field(2, base) + field(3, mask))
    return m + field(7, generation) + field(8, "127.0.0.1:7001")


def replica_blocks(scale=0.5):
    return [(i, 3, [scale] * n, [0.0] * (2 * n)) for i, n in enumerate(BLOCKS)]


PUSH, PULL, CHECKSUMS, REPLICATE, TAKE, PROTO_PUSH, REPLY = range(7)
SLICED_PUSH = PUSH + 7 * 8  # slices of 57 bytes

ps_seeds = {
    "push_pull": record(PUSH, push([grad(0, 0.1)])) + record(PULL, pull([0])),
    "push_all_blocks": record(PUSH, push([grad(i, 0.01) for i in range(7)], sequence=2)),
    "pull_all": record(PULL, pull(range(7))),
    "pull_bf16": record(PULL, pull([1, 2], encoding=1)),
    "pull_fp16": record(PULL, pull([3], encoding=2)),
    "pull_tool": record(PULL, pull([4, 5, 6], worker=-1)) + record(CHECKSUMS),
    "sliced_push": record(SLICED_PUSH, push([grad(2, -0.3), grad(3, 0.2)], worker=1)),
    "proto_push": record(PROTO_PUSH, push([grad(6, 1.0)], worker=2, sequence=7)),
    "bf16_push": record(PUSH, push([block_data(0, [], encoding=1, data=b"\x80\x3f" * 8)])),
    "retry_duplicate": record(PUSH, push([grad(1, 0.5)], sequence=3)) * 2,
    "ssp_clock": record(PUSH, push([grad(0, 0.1)], sequence=4, clock=9)),
    # The hostile pushes of issue 12.
    "seq_max": record(PUSH, push([], sequence=(1 << 64) - 1)) +
               record(PUSH, push([grad(0, 0.1)], sequence=5)),
    "huge_gradient": record(PUSH, push([grad(0, 1e38)], sequence=6)) * 3,
    "nan_gradient": record(PUSH, push([grad(0, math.nan)], sequence=8)),
    "inf_gradient": record(PUSH, push([grad(1, math.inf)], sequence=9)),
    "repeated_block": record(PUSH, push([grad(2, 0.1)] * 3, sequence=10)),
    "wrong_size": record(PUSH, push([block_data(0, [0.1] * 5)], sequence=11)),
    "unknown_block": record(PUSH, push([grad(0, 0.1)[:0] + block_data(99, [0.1] * 8)], sequence=12)),
    "unknown_encoding": record(PUSH, push([block_data(0, [0.1] * 8, encoding=7)], sequence=13)),
    "stale_epoch": record(PUSH, push([grad(0, 0.1)], epoch=0, sequence=14)) +
                   record(PULL, pull([0], epoch=9)),
    "bad_worker": record(PUSH, push([grad(0, 0.1)], worker=-7, sequence=15)) +
                  record(PUSH, push([grad(0, 0.1)], worker=1 << 30, sequence=16)),
    "pull_repeated": record(PULL, pull([0] * 200)),
    "pull_unknown": record(PULL, pull([7, 1 << 31])),
    "pull_bad_encoding": record(PULL, pull([0], encoding=9)),
    "garbage": record(PUSH, bytes(range(256))) + record(PULL, b"\xff" * 40),
    "truncated_push": record(PUSH, push([grad(0, 0.1)])[:-5]),
    # Replication: a primary's cuts, then the standby takes over.
    "replicate_full_take": record(REPLICATE, replicate(replica_blocks(), sequences=[(0, 4, 7)])) +
                           record(TAKE),
    "replicate_partial": record(REPLICATE, replicate(replica_blocks(), generation=0)) +
                         record(REPLICATE, replicate(replica_blocks(0.7)[:2], full=False, generation=2)) +
                         record(TAKE),
    "replicate_bad_sizes": record(REPLICATE, replicate([(0, 1, [1.0] * 3, [0.0]), (9, 1, [1.0] * 8, [])])) +
                           record(TAKE),
    "replicate_other_optimizer": record(REPLICATE, replicate(replica_blocks(), optimizer="sgd")) + record(TAKE),
    "replicate_inf_state": record(REPLICATE, replicate([(0, 1, [1.0] * 8, [math.inf] * 16)])) + record(TAKE),
    "replicate_odd_bytes": record(REPLICATE, field(5, field(1, 0) + field(3, b"\x00" * 7))),
    # What a ps sends a worker back.
    "reply_blocks": record(REPLY, field(1, block_data(0, [0.5] * 8, version=3)) +
                           field(1, block_data(1, [0.25] * 8, version=1))),
    "reply_truncated": record(REPLY, field(1, block_data(0, [0.5] * 8))[:-9]),
}

# ---- coordinator ----
REG_SERVER, REG_WORKER, HEARTBEAT, PLACEMENT, STATUS, TIME, GRACE = range(7)


def reg_server(index, address, standby=False, applied=0):
    return field(1, index) + field(2, address) + (field(3, standby) if standby else b"") + \
        (field(4, applied) if applied else b"")


def reg_worker(index, address):
    return field(1, index) + field(2, address)


def report(step=10, accuracy=None, finished=False, device="cpu", diverged="",
           applied=0, replica_shard=None):
    m = field(1, step) + field(2, 100.0) + field(3, 0.5)
    if accuracy is not None:
        m += field(4, accuracy)
    m += field(5, 3) + field(6, 3) + field(7, 4096)
    if finished:
        m += field(9, True)
    m += field(10, device)
    if diverged:
        m += field(12, diverged)
    if applied:
        m += field(17, applied)
    if replica_shard is not None:
        m += field(18, True) + field(19, replica_shard) + field(20, applied)
    return m


def heartbeat(role, index, rep=b"", address=""):
    return field(1, role) + field(2, index) + field(3, rep) + (field(4, address) if address else b"")


def cluster_up():
    return (record(REG_SERVER, reg_server(0, "127.0.0.1:1")) +
            record(REG_SERVER, reg_server(1, "127.0.0.1:2")) +
            record(REG_SERVER, reg_server(0, "127.0.0.1:3", standby=True)) +
            record(REG_WORKER, reg_worker(0, "127.0.0.1:4")) +
            record(REG_WORKER, reg_worker(1, "127.0.0.1:5")) +
            record(REG_WORKER, reg_worker(2, "127.0.0.1:6")))


coordinator_seeds = {
    "cluster_up": cluster_up() + record(PLACEMENT) + record(STATUS),
    "heartbeats": cluster_up() + record(HEARTBEAT, heartbeat("ps", 0, report(applied=5), "127.0.0.1:1")) +
                  record(HEARTBEAT, heartbeat("worker", 1, report(accuracy=0.5))) +
                  record(HEARTBEAT, heartbeat("standby", 0, report(replica_shard=0))) + record(STATUS),
    "target_reached": cluster_up() + record(HEARTBEAT, heartbeat("worker", 0, report(accuracy=0.95))),
    "worker_finished": cluster_up() + record(HEARTBEAT, heartbeat("worker", 2, report(finished=True))),
    "ps_dies_standby_takes": cluster_up() + record(HEARTBEAT, heartbeat("standby", 0, report(replica_shard=1))) +
                             record(TIME, b"\x05") + record(HEARTBEAT, heartbeat("standby", 0)) +
                             record(PLACEMENT),
    "worker_dies": cluster_up() + record(TIME, b"\x02") + record(HEARTBEAT, heartbeat("worker", 0)) +
                   record(TIME, b"\x02") + record(HEARTBEAT, heartbeat("worker", 0, report())),
    "grace": cluster_up() + record(GRACE, b"\x0a") + record(TIME, b"\x04"),
    "ps_restart": cluster_up() + record(REG_SERVER, reg_server(1, "127.0.0.1:2", applied=9)),
    # The hostile requests of issue 12.
    "takeover_shard": cluster_up() + record(REG_SERVER, reg_server(0, "10.6.6.6:1")),
    "empty_register": cluster_up() + record(REG_SERVER, b"") + record(PLACEMENT),
    "bad_index": record(REG_SERVER, reg_server(-1, "x")) + record(REG_WORKER, reg_worker(1 << 30, "y")) +
                 record(REG_SERVER, reg_server(5, "z", standby=True)),
    "unregistered_heartbeat": record(HEARTBEAT, heartbeat("worker", 0, report(accuracy=1.0))),
    "bad_role": cluster_up() + record(HEARTBEAT, heartbeat("admin", 0)) + record(HEARTBEAT, heartbeat("", -3)),
    "long_strings": cluster_up() + record(HEARTBEAT, heartbeat("worker", 1, report(device="d" * 900, diverged="x" * 900))),
    "nan_report": cluster_up() + record(HEARTBEAT, heartbeat("worker", 1, field(3, math.nan) + field(4, math.inf) +
                                                            field(8, -1.0) + field(13, math.nan))),
    "garbage": record(REG_SERVER, bytes(range(200))) + record(HEARTBEAT, b"\xff" * 30),
}


def write(name, seeds):
    d = os.path.join(HERE, "corpus", name)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        os.remove(os.path.join(d, f))
    for k, v in seeds.items():
        with open(os.path.join(d, k), "wb") as f:
            f.write(v)
    print("%s: %d seeds" % (name, len(seeds)))


# ---- readers: an options byte, then the file's text ----
HEADER, TAB, SEMI, LABEL0, REAL, ZERO, MEAN, CLASSES, SKIP, ZERO_BASED = (
    1, 2, 4, 6, 8, 16, 32, 48, 64, 128)
reader_seeds = {
    "csv_header": bytes([HEADER]) + b"a,b,label\n1,2,x\n3.5,-4,y\n",
    "csv_no_header": bytes([0]) + b"1,2,0\n3,4,1",
    "csv_iris_skip": bytes([SKIP]) + b"150,4,setosa,versicolor,virginica\n5.1,3.5,1.4,0.2,0\n7.0,3.2,4.7,1.4,1\n",
    "csv_crlf_quotes": bytes([HEADER]) + b'\xef\xbb\xbf"a", b ,"class"\r\n 1 , +2 ,"Iris, setosa"\r\n\r\n3,4,"say ""hi"""\r\n',
    "csv_tab": bytes([HEADER | TAB]) + b"a\tb\ty\n1\t2\t0\n",
    "csv_semicolon": bytes([HEADER | SEMI]) + b"a;b;y\n1,5;2;0\n",
    "csv_label_first": bytes([HEADER | LABEL0]) + b"y,a,b\n1,2,3\n0,5,6\n",
    "csv_missing_zero": bytes([HEADER | ZERO]) + b"a,b,y\n1,,0\n3,NA,1\n,4,0\n?,8,1\n",
    "csv_missing_mean": bytes([HEADER | MEAN]) + b"a,b,y\n1,,0\n3,nan,1\n,4,0\n",
    "csv_regression": bytes([HEADER | REAL]) + b"f,price\n1,2.5\n2,-1e2\n3,1e-50\n",
    "csv_classes": bytes([HEADER | CLASSES]) + b"f,y\n1,a\n2,1\n3,+1\n4,b\n",
    "csv_bad_columns": bytes([HEADER]) + b"a,b,c,d,y\n1,2,3,4,0\n1,2,3,0\n",
    "csv_inf": bytes([HEADER]) + b"a,b\n1e39,1\ninf,0\n",
    "csv_unterminated": bytes([HEADER]) + b'a,b\n1,"cat\n',
    "libsvm_binary": bytes([0]) + b"+1 1:0.5 3:2\n-1 2:-1\r\n+1\n",
    "libsvm_multiclass": bytes([0]) + b"# comment\n3 qid:7 1:1\t2:2  # trailing\n\n1 2:5\n2 4:1e-3\n",
    "libsvm_zero_based": bytes([ZERO_BASED]) + b"1 0:1 2:3\n2 1:2\n3 7:1\n",
    "libsvm_errors": bytes([0]) + b"1 0:1\n1 3:1 2:1\n1 2:1 2:1\n1 1: 2:x\n1,2 1:1\n",
    "libsvm_huge_index": bytes([0]) + b"1 99999999999:1\n1 2147483646:1\n",
    "libsvm_regression": bytes([REAL]) + b"2.5 1:1\n-3 1:2\nnan 1:1\n",
    "gzip_csv": bytes([HEADER]) + gzip.compress(b"a,b,y\n1,2,0\n3,4,1\n", mtime=0),
    "binary": bytes([HEADER]) + b"a,b\n1,\x00\xff\xfe\n",
    # Sparse readers: rows for the fixed header "a,b,c,d,y" (categorical,
    # text, numeric value, numeric quantiles) and 64-bit LIBSVM indices.
    "sparse_csv_rows": bytes([0]) + b"red,Corn corn WHEAT,2.5,10,1\nNA,,,3,0\nblue,\"x, y\",-1e3,,1\n",
    "sparse_libsvm_64bit": bytes([0]) + b"1 18446744073709551615:1 3:2 3:-2 0:1\n0 9:1 2:1 9:1\n1 18446744073709551616:1\n",
}

write("ps_fuzzer", ps_seeds)
write("coordinator_fuzzer", coordinator_seeds)
write("reader_fuzzer", reader_seeds)

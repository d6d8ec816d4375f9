#!/usr/bin/env python3
"""Writes a data.frame saved by R as CSV, with Python's standard library only
(no R needed). deploy/fetch_data.sh uses it for r-cran-modeldata's
lending_club.

    deploy/rdata_to_csv.py INPUT OBJECT OUT.csv   # one data.frame to CSV
    deploy/rdata_to_csv.py INPUT                  # list the objects in INPUT

INPUT is any of the three forms R keeps objects in:
  * .rda / .RData (save()): "RDX2\\n" or "RDX3\\n", then a serialized pairlist
    of name -> object;
  * .rds (saveRDS()): one serialized object;
  * .rdb with its .rdx beside it: the lazy-load database an installed package
    keeps its data/ in (Debian's r-cran-* ship data/Rdata.rdb, not .rda
    files). The .rdx (a serialized list: `variables` name -> (offset,
    length), `compressed`) indexes the .rdb; each object is a chunk: a 4-byte
    big-endian uncompressed size, then zlib data (compressed = TRUE), or a
    type byte and the data: '0' stored, '1' zlib, '2' bzip2, 'Z' raw LZMA2
    (compressed = 2 or 3).
Whole files are gzip, bzip2 or xz compressed, or not (told by their magic).

The serialization read is R's "X" (XDR, big-endian) format, versions 2 and 3
(R Internals, "Serialization Formats"): each item is an int of flags (type in
the low 8 bits; bit 8 object, bit 9 has attributes, bit 10 has tag), then its
data. Only what data frames need is kept: logical, integer, double, character
vectors (with ALTREP compact sequences and wrappers), lists, pairlists,
symbols and attributes; environments, closures and persistent references are
read and dropped.

CSV: a header of the column names, then one line per row; factors as their
level labels, integers as integers, doubles in Python's shortest round-trip
form ("35000", "0.1", "1e-05"), logicals as TRUE/FALSE, and NA (or NaN) as an
empty field. Fields holding a comma, quote or line break are quoted (RFC 4180).
Columns of another type (complex, a nested list) are an error.
"""

import bz2
import csv
import gzip
import lzma
import math
import os
import struct
import sys
import zlib

NA_INTEGER = -(2**31)

# SEXP types (R Internals).
NILSXP, SYMSXP, LISTSXP, CLOSXP, ENVSXP, PROMSXP, LANGSXP = 0, 1, 2, 3, 4, 5, 6
SPECIALSXP, BUILTINSXP, CHARSXP, LGLSXP, INTSXP, REALSXP = 7, 8, 9, 10, 13, 14
CPLXSXP, STRSXP, DOTSXP, VECSXP, EXPRSXP, BCODESXP = 15, 16, 17, 19, 20, 21
EXTPTRSXP, WEAKREFSXP, RAWSXP, S4SXP = 22, 23, 24, 25
# Serialization-only pseudo types.
ALTREP_SXP, ATTRLISTSXP, ATTRLANGSXP, BASEENV_SXP, EMPTYENV_SXP = (
    238, 239, 240, 241, 242)
BCREPREF, BCREPDEF, GENERICREFSXP, CLASSREFSXP, PERSISTSXP = (
    243, 244, 245, 246, 247)
PACKAGESXP, NAMESPACESXP, BASENAMESPACE_SXP, MISSINGARG_SXP = 248, 249, 250, 251
UNBOUNDVALUE_SXP, GLOBALENV_SXP, NILVALUE_SXP, REFSXP = 252, 253, 254, 255

PAIRLIST_TYPES = {LISTSXP, LANGSXP, CLOSXP, PROMSXP, DOTSXP, ATTRLISTSXP,
                  ATTRLANGSXP}


class RError(Exception):
    """Input this converter cannot read; the message says what and where."""


class RObject:
    """An R value: `type` (a SEXP type), `data` (a list for vectors, lists
    and pairlists), `attrs` (name -> RObject), and `names` for pairlists."""

    def __init__(self, sexp_type, data=None, attrs=None, names=None):
        self.type = sexp_type
        self.data = data
        self.attrs = attrs or {}
        self.names = names

    def attr_strings(self, name):
        a = self.attrs.get(name)
        return list(a.data) if a is not None and a.type == STRSXP else []


class Symbol:
    def __init__(self, name):
        self.name = name


class Opaque:
    """Something read only to be skipped (an environment, a closure, ...)."""


class Unserializer:
    """Reads one "X" serialization stream."""

    def __init__(self, data, what):
        self.buf = memoryview(data)
        self.pos = 0
        self.what = what
        self.refs = []

    def fail(self, message):
        raise RError("%s: byte %d: %s" % (self.what, self.pos, message))

    def take(self, n):
        if self.pos + n > len(self.buf):
            self.fail("the data ends early (wanted %d more bytes)" % n)
        chunk = self.buf[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def int(self):
        return struct.unpack(">i", self.take(4))[0]

    def length(self):
        n = self.int()
        if n == -1:
            hi, lo = self.int(), self.int()
            n = (hi << 32) + lo
        if n < 0:
            self.fail("negative length %d" % n)
        return n

    def header(self):
        fmt = bytes(self.take(2))
        if fmt != b"X\n":
            self.fail("format %r is not XDR ('X\\n'); ascii and native "
                      "binary serializations are not supported" % fmt)
        version = self.int()
        self.int()  # the writer's R version
        self.int()  # the minimal reader version
        if version == 3:
            self.take(self.int())  # the native encoding, e.g. "UTF-8"
        elif version != 2:
            self.fail("serialization version %d (2 or 3 expected)" % version)

    def string_vec(self):
        if self.int() != 0:
            self.fail("a string vector that does not start with 0")
        return [self.item() for _ in range(self.length())]

    def item(self):
        flags = self.int()
        t = flags & 0xFF
        has_attr = bool(flags & (1 << 9))
        if t == NILVALUE_SXP:
            return None
        if t in (EMPTYENV_SXP, BASEENV_SXP, GLOBALENV_SXP, UNBOUNDVALUE_SXP,
                 MISSINGARG_SXP, BASENAMESPACE_SXP):
            return Opaque()
        if t == REFSXP:
            index = flags >> 8
            if index == 0:
                index = self.int()
            if not 1 <= index <= len(self.refs):
                self.fail("reference %d of %d" % (index, len(self.refs)))
            return self.refs[index - 1]
        if t == PERSISTSXP:
            # An object kept outside the stream (in a lazy-load database: an
            # environment, by a key into the .rdx's references). Dropped, as
            # environments are.
            self.string_vec()
            obj = Opaque()
            self.refs.append(obj)
            return obj
        if t == SYMSXP:
            sym = Symbol(self.item())
            self.refs.append(sym)
            return sym
        if t in (PACKAGESXP, NAMESPACESXP):
            self.string_vec()
            obj = Opaque()
            self.refs.append(obj)
            return obj
        if t == ENVSXP:
            self.int()  # locked
            env = Opaque()
            self.refs.append(env)
            for _ in range(4):  # enclosure, frame, hash table, attributes
                self.item()
            return env
        if t in PAIRLIST_TYPES:
            return self.pairlist(flags)
        if t == ALTREP_SXP:
            return self.altrep()
        if t == CHARSXP:
            return self.charsxp(flags)
        obj = self.vector(t, flags)
        if has_attr:
            obj.attrs = self.attributes(self.item())
        return obj

    def pairlist(self, flags):
        """A pairlist read cell by cell (no recursion along the CDRs)."""
        t = flags & 0xFF
        values, names, attrs = [], [], {}
        first = True
        while True:
            has_attr = bool(flags & (1 << 9))
            has_tag = bool(flags & (1 << 10))
            a = self.item() if has_attr else None
            if first and a is not None:
                attrs = self.attributes(a)
            # For a closure or promise the "tag" is its environment and the
            # CDR its body: the same layout, read the same way and dropped.
            tag = self.item() if has_tag else None
            values.append(self.item())
            names.append(tag.name if isinstance(tag, Symbol) else None)
            first = False
            flags = self.int()
            t2 = flags & 0xFF
            if t2 not in PAIRLIST_TYPES or t2 in (CLOSXP, PROMSXP):
                if t2 == NILVALUE_SXP:
                    break
                self.pos -= 4
                values.append(self.item())  # a dotted tail
                names.append(None)
                break
        if t in (CLOSXP, PROMSXP, LANGSXP, ATTRLANGSXP, DOTSXP):
            return Opaque()
        return RObject(LISTSXP, values, attrs, names)

    def charsxp(self, flags):
        n = self.int()
        if n == -1:
            return None  # NA_STRING
        raw = bytes(self.take(n))
        latin1 = bool((flags >> 12) & (1 << 2))
        return raw.decode("latin-1" if latin1 else "utf-8", errors="replace")

    def vector(self, t, flags):
        if t in (LGLSXP, INTSXP):
            n = self.length()
            ints = struct.unpack(">%di" % n, self.take(4 * n))
            if t == LGLSXP:
                return RObject(t, [None if v == NA_INTEGER else bool(v)
                                   for v in ints])
            return RObject(t, [None if v == NA_INTEGER else v for v in ints])
        if t == REALSXP:
            n = self.length()
            return RObject(t, list(struct.unpack(">%dd" % n,
                                                 self.take(8 * n))))
        if t == CPLXSXP:
            n = self.length()
            return RObject(t, list(struct.unpack(">%dd" % (2 * n),
                                                 self.take(16 * n))))
        if t == STRSXP:
            return RObject(t, [self.item() for _ in range(self.length())])
        if t in (VECSXP, EXPRSXP):
            return RObject(t, [self.item() for _ in range(self.length())])
        if t == RAWSXP:
            return RObject(t, bytes(self.take(self.length())))
        if t == S4SXP:
            return RObject(t, [])
        if t in (SPECIALSXP, BUILTINSXP):
            self.take(self.int())
            return RObject(t, [])
        if t == EXTPTRSXP:
            obj = RObject(t, [])
            self.refs.append(obj)
            self.item()  # protected value
            self.item()  # tag
            return obj
        if t == WEAKREFSXP:
            obj = RObject(t, [])
            self.refs.append(obj)
            return obj
        self.fail("SEXP type %d is not supported (bytecode or unknown)" % t)

    def attributes(self, pairlist):
        if not isinstance(pairlist, RObject) or pairlist.type != LISTSXP:
            return {}
        return {n: v for n, v in zip(pairlist.names, pairlist.data) if n}

    def altrep(self):
        info, state, attr = self.item(), self.item(), self.item()
        cls = info.data[0].name if isinstance(info, RObject) else "?"
        if cls in ("compact_intseq", "compact_realseq"):
            n, start, step = state.data[:3]
            n = int(n)
            t = INTSXP if cls == "compact_intseq" else REALSXP
            cast = int if t == INTSXP else float
            obj = RObject(t, [cast(start + i * step) for i in range(n)])
        elif cls.startswith("wrap_"):
            obj = state.data[0]  # list(x, metadata)
        elif cls == "deferred_string":
            values = state.data[0].data  # the numbers, as.character()'d
            obj = RObject(STRSXP, [None if v is None else format_number(v)
                                   for v in values])
        else:
            self.fail("ALTREP class %r is not supported" % cls)
        obj.attrs = self.attributes(attr)
        return obj


def unserialize(data, what):
    u = Unserializer(data, what)
    u.header()
    return u.item()


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def decompress(data, what):
    if data[:2] == b"\x1f\x8b":
        return gzip.decompress(data)
    if data[:3] == b"BZh":
        return bz2.decompress(data)
    if data[:6] == b"\xfd7zXZ\x00":
        return lzma.decompress(data)
    return data


def format_number(v):
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, int):
        return str(v)
    if math.isnan(v):
        return ""
    if v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    return repr(v)


def read_objects(path):
    """name -> a function that unserializes that object."""
    if path.endswith(".rdb"):
        return read_lazyload(path)
    data = decompress(read_bytes(path), path)
    if data[:5] in (b"RDX2\n", b"RDX3\n"):
        top = unserialize(data[5:], path)
        if not isinstance(top, RObject) or top.type != LISTSXP:
            raise RError("%s: the saved objects are not a pairlist" % path)
        return {n: (lambda v=v: v) for n, v in zip(top.names, top.data)}
    if data[:2] == b"X\n":
        name = os.path.basename(path).rsplit(".", 1)[0]
        obj = unserialize(data, path)
        return {name: lambda: obj}
    raise RError("%s: neither an .rda (RDX2/RDX3), an .rds (X) nor an .rdb "
                 "file" % path)


def read_lazyload(path):
    index_path = path[:-4] + ".rdx"
    index = unserialize(decompress(read_bytes(index_path), index_path),
                        index_path)
    fields = dict(zip(index.attr_strings("names"), index.data))
    variables = fields.get("variables")
    if variables is None:
        raise RError("%s: no 'variables' in the index" % index_path)
    compressed = fields.get("compressed")
    kind = compressed.data[0] if compressed is not None else True
    kind = 1 if kind is True else int(kind)
    blob = read_bytes(path)

    def load(offset, length, name):
        chunk = blob[offset:offset + length]
        what = "%s: object %s" % (path, name)
        if len(chunk) < 5:
            raise RError("%s: chunk at %d is cut short" % (what, offset))
        size = struct.unpack(">I", chunk[:4])[0]
        if kind == 1:
            out = zlib.decompress(chunk[4:])
        else:
            t, body = chunk[4:5], chunk[5:]
            if t == b"0":
                out = body
            elif t == b"1":
                out = zlib.decompress(body)
            elif t == b"2":
                out = bz2.decompress(body)
            elif t == b"Z":
                out = lzma.LZMADecompressor(
                    format=lzma.FORMAT_RAW,
                    filters=[{"id": lzma.FILTER_LZMA2,
                              "dict_size": 1 << 26}]).decompress(body)
            else:
                raise RError("%s: unknown chunk type %r" % (what, t))
        if len(out) != size:
            raise RError("%s: %d bytes after decompression, the index says "
                         "%d" % (what, len(out), size))
        return unserialize(out, what)

    objects = {}
    for name, where in zip(variables.attr_strings("names"), variables.data):
        offset, length = (int(v) for v in where.data[:2])
        objects[name] = (lambda o=offset, n=length, name=name:
                         load(o, n, name))
    return objects


def column_values(name, col, rows):
    if not isinstance(col, RObject):
        raise RError("column %r is not a vector" % name)
    if len(col.data) != rows:
        raise RError("column %r has %d values, not %d" %
                     (name, len(col.data), rows))
    if col.type == INTSXP and "factor" in col.attr_strings("class"):
        levels = col.attr_strings("levels")
        return ["" if v is None else levels[v - 1] for v in col.data]
    if col.type in (INTSXP, REALSXP, LGLSXP):
        return ["" if v is None else format_number(v) for v in col.data]
    if col.type == STRSXP:
        return ["" if v is None else v for v in col.data]
    raise RError("column %r has SEXP type %d; only numbers, logicals, "
                 "strings and factors are written" % (name, col.type))


def write_csv(obj, name, out_path):
    if not isinstance(obj, RObject) or obj.type != VECSXP or \
            "data.frame" not in obj.attr_strings("class"):
        raise RError("object %r is not a data.frame" % name)
    names = obj.attr_strings("names")
    rows = len(obj.data[0].data) if obj.data else 0
    columns = [column_values(n, c, rows) for n, c in zip(names, obj.data)]
    tmp = out_path + ".partial"
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(names)
        for r in range(rows):
            w.writerow([c[r] for c in columns])
    os.replace(tmp, out_path)
    return rows, len(names)


def main(argv):
    if len(argv) not in (2, 4):
        sys.stderr.write(__doc__.split("\n\n")[1] + "\n")
        return 2
    try:
        objects = read_objects(argv[1])
        if len(argv) == 2:
            print("\n".join(sorted(objects)))
            return 0
        name, out = argv[2], argv[3]
        if name not in objects:
            raise RError("%s holds no object %r; it holds: %s" %
                         (argv[1], name, ", ".join(sorted(objects))))
        rows, cols = write_csv(objects[name](), name, out)
    except (RError, OSError, EOFError, zlib.error, lzma.LZMAError) as e:
        sys.stderr.write("rdata_to_csv: %s\n" % e)
        return 1
    print("%s: %d rows, %d columns -> %s" % (name, rows, cols, out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/env python3
"""Tests of deploy/arff_to_csv.py and deploy/rdata_to_csv.py on inputs built
here: small ARFF files, and R serialization streams written byte by byte as
R writes them (R Internals, "Serialization Formats"), wrapped as an .rda
(gzip), an .rds (bzip2) and a lazy-load .rdb/.rdx (zlib and raw LZMA2
chunks). No R or Java needed."""

import bz2
import gzip
import lzma
import os
import struct
import sys
import tempfile
import unittest
import zlib

sys.dont_write_bytecode = True  # nothing left beside the sources
sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import arff_to_csv  # noqa: E402
import rdata_to_csv  # noqa: E402

NA_INT = -(2**31)
NA_REAL = struct.unpack(">d", bytes.fromhex("7ff00000000007a2"))[0]


def flags(t, obj=False, attr=False, tag=False, levels=0):
    return struct.pack(">i", t | obj << 8 | attr << 9 | tag << 10 |
                       levels << 12)


def i32(*v):
    return struct.pack(">%di" % len(v), *v)


def charsxp(s):
    if s is None:
        return flags(9) + i32(-1)
    b = s.encode()
    return flags(9, levels=8) + i32(len(b)) + b  # UTF8_MASK


def strsxp(items, attrs=b""):
    return (flags(16, attr=bool(attrs)) + i32(len(items)) +
            b"".join(charsxp(s) for s in items) + attrs)


def symbol(name):
    return flags(1) + charsxp(name)


def pairlist(cells):
    """A tagged pairlist: [(name, encoded value)], ended by NILVALUE."""
    out = b""
    for name, value in cells:
        out += flags(2, tag=True) + symbol(name) + value
    return out + flags(254)


def intsxp(values, attrs=b"", obj=False):
    return (flags(13, obj=obj, attr=bool(attrs)) + i32(len(values)) +
            i32(*values) + attrs)


def realsxp(values):
    return flags(14) + i32(len(values)) + struct.pack(">%dd" % len(values),
                                                       *values)


def compact_intseq(n, start):
    info = pairlist([("class", symbol("compact_intseq")),
                     ("package", symbol("base")), ("type", intsxp([13]))])
    return (flags(238) + info + realsxp([n, start, 1]) + flags(254))


def data_frame():
    """data.frame(n = 1:3 (ALTREP), i = c(7, NA, -2), x = c(0.5, NA, 1e-5),
    f = factor(c("good", "bad", NA), levels = c("bad", "good")),
    s = c("a,b", NA, 'say "hi"'))."""
    factor_attrs = pairlist([("levels", strsxp(["bad", "good"])),
                             ("class", strsxp(["factor"]))])
    columns = [
        compact_intseq(3, 1),
        intsxp([7, NA_INT, -2]),
        realsxp([0.5, NA_REAL, 1e-5]),
        intsxp([2, 1, NA_INT], factor_attrs, obj=True),
        strsxp(["a,b", None, 'say "hi"']),
    ]
    attrs = pairlist([("names", strsxp(["n", "i", "x", "f", "s"])),
                      ("class", strsxp(["data.frame"])),
                      ("row.names", intsxp([NA_INT, -3]))])
    return (flags(19, obj=True, attr=True) + i32(len(columns)) +
            b"".join(columns) + attrs)


def stream(item):
    return b"X\n" + i32(3, 0x040202, 0x030500, 5) + b"UTF-8" + item


EXPECTED_CSV = ('n,i,x,f,s\n'
                '1,7,0.5,good,"a,b"\n'
                '2,,,bad,\n'
                '3,-2,1e-05,,"say ""hi"""\n')


class RdataToCsvTest(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def path(self, name):
        return os.path.join(self.dir, name)

    def convert(self, path, name):
        out = self.path("out.csv")
        self.assertEqual(rdata_to_csv.main(["x", path, name, out]), 0)
        with open(out) as f:
            return f.read()

    def test_rda_gzip(self):
        with open(self.path("d.rda"), "wb") as f:
            f.write(gzip.compress(b"RDX3\n" + stream(pairlist([
                ("other", intsxp([1])), ("df", data_frame())]))))
        self.assertEqual(self.convert(self.path("d.rda"), "df"), EXPECTED_CSV)
        self.assertEqual(sorted(rdata_to_csv.read_objects(self.path("d.rda"))),
                         ["df", "other"])

    def test_rds_bzip2(self):
        with open(self.path("df.rds"), "wb") as f:
            f.write(bz2.compress(stream(data_frame())))
        self.assertEqual(self.convert(self.path("df.rds"), "df"), EXPECTED_CSV)

    def lazyload(self, compressed, chunk_of):
        body = stream(data_frame())
        chunk = chunk_of(body)
        with open(self.path("Rdata.rdb"), "wb") as f:
            f.write(b"junk" + chunk)
        variables = (flags(19, attr=True) + i32(1) + intsxp([4, len(chunk)]) +
                     pairlist([("names", strsxp(["df"]))]))
        index = (flags(19, attr=True) + i32(2) + variables + compressed +
                 pairlist([("names", strsxp(["variables", "compressed"]))]))
        with open(self.path("Rdata.rdx"), "wb") as f:
            f.write(gzip.compress(stream(index)))
        return self.convert(self.path("Rdata.rdb"), "df")

    def test_lazyload_zlib_chunks(self):
        size = lambda b: struct.pack(">I", len(b))
        self.assertEqual(
            self.lazyload(flags(10) + i32(1, 1),
                          lambda b: size(b) + zlib.compress(b)),
            EXPECTED_CSV)

    def test_lazyload_lzma2_chunks(self):
        size = lambda b: struct.pack(">I", len(b))
        raw = lambda b: lzma.compress(b, format=lzma.FORMAT_RAW, filters=[
            {"id": lzma.FILTER_LZMA2, "preset": 6}])
        self.assertEqual(
            self.lazyload(intsxp([3]), lambda b: size(b) + b"Z" + raw(b)),
            EXPECTED_CSV)

    def test_errors(self):
        with open(self.path("bad.rds"), "wb") as f:
            f.write(stream(intsxp([1, 2]))[:-3])  # cut short
        self.assertEqual(rdata_to_csv.main(
            ["x", self.path("bad.rds"), "bad", self.path("o.csv")]), 1)
        with open(self.path("v.rds"), "wb") as f:
            f.write(stream(intsxp([1, 2])))
        with self.assertRaisesRegex(rdata_to_csv.RError, "not a data.frame"):
            rdata_to_csv.write_csv(
                rdata_to_csv.read_objects(self.path("v.rds"))["v"](), "v",
                self.path("o.csv"))
        with open(self.path("a.txt"), "wb") as f:
            f.write(b"hello")
        with self.assertRaisesRegex(rdata_to_csv.RError, "neither"):
            rdata_to_csv.read_objects(self.path("a.txt"))
        self.assertFalse(os.path.exists(self.path("o.csv")))


ARFF = r"""% a comment
@relation 'news'

@attribute 'Text' string
@attribute class-att {0,1}
@attribute n numeric

@data
'one\ntwo, \'three\'',1, 2.5
"say \"hi\"\t!",0,?
?,1,3
"""


class ArffToCsvTest(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def run_on(self, text, *extra):
        src = os.path.join(self.dir, "a.arff")
        out = os.path.join(self.dir, "a.csv")
        with open(src, "w") as f:
            f.write(text)
        rc = arff_to_csv.main(["x", src, out] + list(extra))
        if rc != 0:
            return rc, None
        with open(out) as f:
            return rc, f.read()

    def test_values_quotes_escapes_missing(self):
        rc, csv_text = self.run_on(ARFF, "--names", "text,class,n")
        self.assertEqual(rc, 0)
        self.assertEqual(csv_text,
                         'text,class,n\n'
                         '"one two, \'three\'",1,2.5\n'
                         '"say ""hi"" !",0,\n'
                         ',1,3\n')
        rc, csv_text = self.run_on(ARFF)
        self.assertTrue(csv_text.startswith("Text,class-att,n\n"))

    def test_errors(self):
        header = "@attribute a numeric\n@attribute b numeric\n@data\n"
        for text in (header + "{0 1}\n",        # sparse
                     header + "1,2,3\n",        # too many values
                     header + "'open,2\n",      # unterminated quote
                     "@attribute a numeric\n1\n"):  # no @data
            self.assertEqual(self.run_on(text)[0], 1, text)
        self.assertEqual(self.run_on(header + "1,2\n", "--names", "x")[0], 1)


if __name__ == "__main__":
    unittest.main()

#!/usr/bin/env python3
"""Writes a Weka ARFF file as CSV, with Python's standard library only (no
Java). deploy/fetch_data.sh uses it for weka's ReutersCorn-{train,test}.arff.

    deploy/arff_to_csv.py IN.arff OUT.csv [--names a,b,...]

ARFF (Weka's "Attribute-Relation File Format"): '%' comment lines, a
`@relation NAME` line, one `@attribute NAME TYPE` line per column (numeric,
string, date or a {nominal,set}), then `@data` and one instance per line,
its values separated by commas. A value may be quoted with ' or ", inside
which a backslash escapes the next character (\\n newline, \\t tab, \\r, and
\\', \\", \\\\, \\% as themselves); `?` is a missing value. Sparse instances
("{0 x, 3 y}") are refused.

CSV: a header of the attribute names (or --names, one per attribute), then
one line per instance: a missing value is an empty field; line breaks and
tabs inside a value become spaces, so that each instance stays on one line
(the project's CSV readers take one example per line); other text is kept as
written (Reuters' "&lt;" stays "&lt;"). Fields holding a comma or quote are
quoted (RFC 4180).
"""

import csv
import os
import sys

ESCAPES = {"n": "\n", "t": "\t", "r": "\r"}


class ArffError(Exception):
    """Input this converter cannot read; the message names the line."""


def split_values(line, where):
    """The values of one @data line (None for '?')."""
    values = []
    i, n = 0, len(line)
    while True:
        while i < n and line[i] in " \t":
            i += 1
        if i < n and line[i] in "'\"":
            quote, i, out = line[i], i + 1, []
            while True:
                if i >= n:
                    raise ArffError("%s: unterminated %s quote" % (where, quote))
                c = line[i]
                if c == "\\" and i + 1 < n:
                    out.append(ESCAPES.get(line[i + 1], line[i + 1]))
                    i += 2
                elif c == quote:
                    i += 1
                    break
                else:
                    out.append(c)
                    i += 1
            values.append("".join(out))
            while i < n and line[i] in " \t":
                i += 1
            if i < n and line[i] != ",":
                raise ArffError("%s: %r after a closing quote, expected ','" %
                                (where, line[i]))
        else:
            j = line.find(",", i)
            j = n if j < 0 else j
            raw = line[i:j].strip()
            values.append(None if raw == "?" else raw)
            i = j
        if i >= n:
            return values
        i += 1  # the comma


def attribute_name(rest, where):
    """The name at the start of an @attribute line's rest (maybe quoted)."""
    rest = rest.strip()
    if rest[:1] in ("'", '"'):
        end = rest.find(rest[0], 1)
        if end < 0:
            raise ArffError("%s: unterminated quote in @attribute" % where)
        return rest[1:end]
    return rest.split(None, 1)[0]


def convert(in_path, out_path, names=None):
    attributes, rows, in_data = [], [], False
    with open(in_path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            where = "%s:%d" % (in_path, number)
            line = line.rstrip("\r\n")
            stripped = line.strip()
            if not stripped or stripped.startswith("%"):
                continue
            lower = stripped.lower()
            if not in_data:
                if lower.startswith("@attribute"):
                    attributes.append(attribute_name(stripped[10:], where))
                elif lower.startswith("@data"):
                    in_data = True
                continue
            if stripped.startswith("{"):
                raise ArffError("%s: sparse ARFF instances are not supported"
                                % where)
            values = split_values(line, where)
            if len(values) != len(attributes):
                raise ArffError("%s: %d values, the header has %d attributes"
                                % (where, len(values), len(attributes)))
            rows.append(values)
    if not in_data:
        raise ArffError("%s: no @data line; is this an ARFF file?" % in_path)
    header = names or attributes
    if len(header) != len(attributes):
        raise ArffError("--names gives %d names for %d attributes (%s)" %
                        (len(header), len(attributes), ", ".join(attributes)))
    tmp = out_path + ".partial"
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        for values in rows:
            w.writerow(["" if v is None else
                        v.replace("\r", " ").replace("\n", " ")
                        .replace("\t", " ") for v in values])
    os.replace(tmp, out_path)
    return len(rows), len(header)


def main(argv):
    args = argv[1:]
    names = None
    if "--names" in args:
        k = args.index("--names")
        if k + 1 >= len(args):
            sys.stderr.write("arff_to_csv: --names needs a,b,...\n")
            return 2
        names = args[k + 1].split(",")
        del args[k:k + 2]
    if len(args) != 2:
        sys.stderr.write(__doc__.split("\n\n")[1] + "\n")
        return 2
    try:
        rows, cols = convert(args[0], args[1], names)
    except (ArffError, OSError) as e:
        sys.stderr.write("arff_to_csv: %s\n" % e)
        return 1
    print("%s: %d rows, %d columns -> %s" % (args[0], rows, cols, args[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

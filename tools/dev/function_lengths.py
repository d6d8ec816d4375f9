#!/usr/bin/env python3
"""Lists the C++ function definitions of the project with their length in lines.

A function's length runs from the first line of its signature (a template<...>
line included) to the line of its closing brace. Member functions defined
inside class bodies count as functions; lambdas and local classes do not count
separately, they are part of the function around them. Scans the git-tracked
*.cc and *.h files outside tests: *_test.cc, tests/ and tools/fuzz/corpus/ are
left out.

The scanner matches braces and skips comments, string and character literals
(raw strings too) and preprocessor lines; it is no C++ parser, but the house
style (clang-format, Google) keeps it honest.

Usage (from anywhere in the workspace):
  tools/dev/function_lengths.py              # every function, longest first
  tools/dev/function_lengths.py --over 60    # those over 60 lines
  tools/dev/function_lengths.py --check      # exit 1 on a function over 100
                                             # lines or more than 30 over 60
//tools/dev:format_test runs --check. The fix: split the function into named
helpers, one step each.
"""

import argparse
import os
import re
import subprocess
import sys

# The house rule (issue 41): no function over MAX_LINES lines, and at most
# MAX_LONG functions over LONG_LINES lines.
MAX_LINES = 100
LONG_LINES = 60
MAX_LONG = 30

_EXCLUDED_DIRS = ("tests/", "tools/fuzz/corpus/", "third_party/",
                  "bench/pslite/")


def _excluded(path):
    return path.endswith("_test.cc") or path.startswith(_EXCLUDED_DIRS)


def list_sources(root):
    """The tracked *.cc/*.h files under root (relative paths), tests left out."""
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "*.cc", "*.h"],
                             capture_output=True, text=True, check=True).stdout
        files = out.split()
    except (OSError, subprocess.CalledProcessError):
        # No git (a sandbox without the repository): walk the tree instead.
        files = []
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames
                           if not d.startswith((".", "bazel-"))]
            for name in filenames:
                if name.endswith((".cc", ".h")):
                    files.append(
                        os.path.relpath(os.path.join(dirpath, name), root))
    return sorted(f for f in files if not _excluded(f))


def strip_code(text):
    """text with comments, literals' contents and preprocessor lines blanked.

    Newlines are kept (so offsets map to the same lines); a string literal
    keeps its quotes ("" stays, so extern "C" reads as extern "").
    """
    out = []
    i, n = 0, len(text)
    line_start = True  # only whitespace since the last newline
    while i < n:
        c = text[i]
        if c == "\n":
            out.append(c)
            line_start = True
            i += 1
            continue
        if line_start and c == "#":
            # A preprocessor line, with its backslash continuations.
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append(" \n")
                    i += 2
                    continue
                out.append(" ")
                i += 1
            continue
        if not c.isspace():
            line_start = False
        if c == "/" and text.startswith("//", i):
            while i < n and text[i] != "\n":
                out.append(" ")
                i += 1
            continue
        if c == "/" and text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
            continue
        if c == '"':
            # Raw string: R"delim( ... )delim", with an optional u8/u/U/L prefix.
            m = re.search(r"(?:u8|u|U|L)?R$", text[max(0, i - 3):i])
            if m and not re.match(r"\w", text[i - len(m.group(0)) - 1:i -
                                              len(m.group(0))] or " "):
                open_paren = text.find("(", i)
                delim = text[i + 1:open_paren]
                end = text.find(")" + delim + '"', open_paren)
                end = n if end < 0 else end + len(delim) + 2
                out.append('"' + re.sub(r"[^\n]", " ", text[i + 1:end - 1]) +
                           '"')
                i = end
                continue
            j = i + 1
            while j < n and text[j] != '"' and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append('"' + " " * (min(j, n) - i - 1) + '"')
            i = j + 1
            continue
        if c == "'":
            # A digit separator (1'000'000) or a character literal.
            k = i
            while k > 0 and (text[k - 1].isalnum() or text[k - 1] in "_'"):
                k -= 1
            if k < i and text[k].isdigit():
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != "'" and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append("'" + " " * (min(j, n) - i - 1) + "'")
            i = j + 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


_ACCESS = re.compile(r"\b(public|private|protected)\s*:(?!:)")
_TEMPLATE_PREFIX = re.compile(r"^\s*template\s*<")
_OPERATOR = re.compile(r"\boperator\s*(\(\s*\)|[^\s(]+)")


def _skip_template_prefix(header):
    """header without leading template<...> clauses."""
    while True:
        m = _TEMPLATE_PREFIX.match(header)
        if not m:
            return header
        depth, i = 0, m.end() - 1
        while i < len(header):
            if header[i] == "<":
                depth += 1
            elif header[i] == ">":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        header = header[i + 1:]


def _depth0(header):
    """header with everything inside (), [] and {} removed (kept: the brackets)."""
    out, depth = [], 0
    for c in header:
        if c in "([{":
            if depth == 0:
                out.append(c)
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                out.append(c)
        elif depth == 0:
            out.append(c)
    return "".join(out)


def _in_init_list(header):
    """Whether header (text before a '{') is inside a constructor's init list."""
    flat = _OPERATOR.sub("operator", _depth0(_skip_template_prefix(header)))
    close = flat.find(")")
    if close < 0:
        return False
    return re.search(r"(?<!:):(?!:)", flat[close:]) is not None


def _function_name(header):
    """The (qualified) name in a function's header, or None if not a function."""
    body = _skip_template_prefix(header).strip()
    if re.match(r"(class|struct|union|enum|namespace|extern)\b", body):
        return None
    flat = _OPERATOR.sub("operator", body)
    if "(" not in flat:
        return None
    before = flat[:flat.find("(")]
    if "=" in before or re.search(r"\b(if|for|while|switch|catch|return)\s*$",
                                  before):
        return None
    m = _OPERATOR.search(body)
    if m and body.find(m.group(0)) <= len(before) + 8:
        start = body.find(m.group(0))
        prefix = re.search(r"((?:[\w~]+(?:<[^()]*?>)?::)*)$", body[:start])
        return (prefix.group(1) if prefix else "") + re.sub(
            r"\s+", "", m.group(0))
    m = re.search(r"((?:[\w~]+(?:<[^()]*?>)?\s*::\s*)*~?\w+)\s*(<[^()]*>)?\s*$",
                  before)
    if not m:
        return None
    return re.sub(r"\s+", "", m.group(1))


def _match_brace(code, i):
    """Index just past the '}' that closes the '{' at code[i]."""
    depth = 0
    n = len(code)
    while i < n:
        c = code[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return n


def scan(code, start=0, end=None, scope=()):
    """Yields (name, first offset, last offset) for each function in code[start:end].

    code[start:end] is the inside of a namespace or class body (or a file).
    """
    end = len(code) if end is None else end
    header_start = start
    i = start
    while i < end:
        c = code[i]
        if c in ";}":
            header_start = i + 1
        elif c == ":" and _ACCESS.search(code[header_start:i + 1]):
            header_start = i + 1
        elif c == "{":
            header = code[header_start:i]
            close = _match_brace(code, i)
            if header.count("(") > header.count(")"):
                i = close  # braces in a default argument: still the header
                continue
            if _in_init_list(header) and re.search(r"[\w>]\s*$", header):
                i = close  # a member's brace initializer: still the header
                continue
            body = _skip_template_prefix(header).strip()
            kind = re.match(r"(namespace|extern|class|struct|union)\b", body)
            name = None if kind else _function_name(header)
            if kind and kind.group(1) in ("namespace", "extern"):
                yield from scan(code, i + 1, close - 1, scope)
            elif kind and "(" not in _depth0(body):
                m = re.match(r"\w+\s+(?:\w+\s+)*?(\w+)\s*(?:final\s*)?(?::|$)",
                             _depth0(body))
                inner = scope + ((m.group(1),) if m else ())
                yield from scan(code, i + 1, close - 1, inner)
            elif name:
                first = header_start + len(header) - len(header.lstrip())
                yield ("::".join(scope + (name,)), first, close - 1)
            i = close
            header_start = i
            # A definition's '}' ends the statement; an initializer's does not,
            # but its ';' follows.
            continue
        i += 1


def functions(root, path):
    """[(length, path, first line, name)] for the functions in root/path."""
    with open(os.path.join(root, path), encoding="utf-8",
              errors="replace") as f:
        code = strip_code(f.read())
    result = []
    for name, first, last in scan(code):
        line = code.count("\n", 0, first) + 1
        length = code.count("\n", first, last) + 1
        result.append((length, path, line, name))
    return result


def main(argv):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--over", type=int, default=0,
                        help="list only the functions over this many lines")
    parser.add_argument("--check", action="store_true",
                        help=f"exit 1 on a function over {MAX_LINES} lines or "
                        f"more than {MAX_LONG} over {LONG_LINES}")
    parser.add_argument("--root", default=None,
                        help="workspace root (default: this script's)")
    args = parser.parse_args(argv)
    root = args.root or os.path.dirname(
        os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
    found = []
    for path in list_sources(root):
        found.extend(functions(root, path))
    found.sort(key=lambda r: (-r[0], r[1], r[2]))
    too_long = [r for r in found if r[0] > MAX_LINES]
    long = [r for r in found if r[0] > LONG_LINES]
    if not args.check:
        for length, path, line, name in found:
            if length > args.over:
                print(f"{length:5d} {path}:{line} {name}")
        sys.stdout.flush()
        print(f"functions: {len(found)}, over {MAX_LINES} lines: "
              f"{len(too_long)}, over {LONG_LINES}: {len(long)}",
              file=sys.stderr)
        return 0
    rc = 0
    for length, path, line, name in too_long:
        print(f"function_lengths: {path}:{line} {name} has {length} lines "
              f"(at most {MAX_LINES})")
        rc = 1
    if len(long) > MAX_LONG:
        print(f"function_lengths: {len(long)} functions over {LONG_LINES} "
              f"lines (at most {MAX_LONG}):")
        for length, path, line, name in long:
            print(f"  {length:5d} {path}:{line} {name}")
        rc = 1
    summary = (f"{len(found)} functions, {len(too_long)} over {MAX_LINES} "
               f"lines, {len(long)} over {LONG_LINES} (at most {MAX_LONG})")
    if rc:
        print(f"function_lengths: {summary}")
        print("fix: split the function into named helpers, one step each "
              "(tools/dev/function_lengths.py --over 60 lists them)")
    else:
        print(f"function_lengths: ok, {summary}")
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

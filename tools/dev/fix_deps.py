#!/usr/bin/env python3
"""Points each cc target's system-library deps at exactly what its sources include.

The WORKSPACE gives one @system_libs target per Abseil library (absl_status,
absl_strings, ...), plus :protobuf (messages) and :grpc (grpc++ and protobuf).
The old @system_libs//:absl bundles all the Abseil ones. For every rule in the
given BUILD files (any rule: cc_library, cc_test, cuda_cc_library, ...) this
script reads the #includes of the rule's own srcs/hdrs (not of their headers:
Bazel only asks for direct includes) and

  * replaces "@system_libs//:absl" with the per-library targets those
    includes need (or removes it when they include no Abseil header);
  * reports "@system_libs//:grpc" on rules that include no gRPC header: they
    need ":protobuf" (they include google/protobuf/...) or nothing, since the
    *_cc_proto / *_cc_grpc targets they use bring the libraries along;
    --fix-grpc applies that;
  * reports includes of a system library that the rule does not list in deps
    (it builds only because a dependency lists it); --add-missing adds them;
  * sorts every deps list of plain labels as buildifier does (local labels,
    then //, then @; by package).

Usage (from the workspace root):
  tools/dev/fix_deps.py                  # every BUILD file outside third_party/
  tools/dev/fix_deps.py server/BUILD     # just these
  tools/dev/fix_deps.py --check          # change nothing; exit 1 if something would change
Options combine: tools/dev/fix_deps.py --fix-grpc --add-missing

An Abseil header the table below does not know keeps the rule on
"@system_libs//:absl" and is reported: add a target for its library to the
WORKSPACE (pkg_config_repository "system_libs") and a line to _HEADER_TARGETS.
"""

import argparse
import ast
import glob
import os
import re
import sys

_REPO = "@system_libs//:"
_ABSL_UNION = _REPO + "absl"
_GRPC = _REPO + "grpc"
_PROTOBUF = _REPO + "protobuf"

# (include path regex, target in @system_libs); the first match wins.
_HEADER_TARGETS = [
    (r"absl/base/", "absl_base"),
    (r"absl/container/flat_hash_map\.h$", "absl_flat_hash_map"),
    (r"absl/container/flat_hash_set\.h$", "absl_flat_hash_set"),
    (r"absl/hash/", "absl_hash"),
    (r"absl/random/", "absl_random"),
    (r"absl/flags/parse\.h$", "absl_flags_parse"),
    (r"absl/flags/usage(_config)?\.h$", "absl_flags_usage"),
    (r"absl/flags/", "absl_flags"),
    (r"absl/status/statusor\.h$", "absl_statusor"),
    (r"absl/status/", "absl_status"),
    (r"absl/strings/str_format\.h$", "absl_str_format"),
    (r"absl/strings/", "absl_strings"),
    (r"absl/synchronization/", "absl_synchronization"),
    (r"absl/time/", "absl_time"),
    (r"(grpcpp|grpc\+\+|grpc)/", "grpc"),
    (r"google/protobuf/", "protobuf"),
    (r"yaml-cpp/", "yaml"),
    (r"spdlog/", "spdlog"),
    (r"(gtest|gmock)/", "gtest"),
    (r"benchmark/", "benchmark"),
    (r"cblas\.h$", "openblas"),
    (r"zlib\.h$", "zlib"),
    (r"openssl/", "openssl"),
    (r"prometheus/", "prometheus"),
]

# Libraries whose missing deps --add-missing adds (and the report lists).
# gtest is left out: tests get it through //common/testing:gtest_main.
_CHECKED_MISSING = re.compile(r"^(absl_|grpc$|protobuf$)")

_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)
_SOURCE_ATTRS = ("srcs", "hdrs", "textual_hdrs", "src", "src_hdrs")


def header_target(include):
  """The @system_libs target name for an #include path, or None; "?" for an
  Abseil header that no target covers."""
  for pattern, target in _HEADER_TARGETS:
    if re.match(pattern, include):
      return target
  return "?" if include.startswith("absl/") else None


def workspace_targets(root):
  """Target names that the WORKSPACE's system_libs repository defines."""
  with open(os.path.join(root, "WORKSPACE")) as f:
    text = f.read()
  start = text.find('name = "system_libs"')
  if start < 0:
    sys.exit("fix_deps: no system_libs repository in WORKSPACE")
  return set(re.findall(r'^\s*"([\w+-]+)": \[', text[start:], re.M))


def _strings(node):
  """String constants of a list / concatenation expression."""
  if isinstance(node, ast.Constant) and isinstance(node.value, str):
    yield node
  elif isinstance(node, (ast.List, ast.Tuple)):
    for e in node.elts:
      yield from _strings(e)
  elif isinstance(node, ast.BinOp):
    yield from _strings(node.left)
    yield from _strings(node.right)
  elif isinstance(node, ast.Call):  # select({...}) and the like
    for a in list(node.args) + [k.value for k in node.keywords]:
      yield from _strings(a)
  elif isinstance(node, ast.Dict):
    for v in node.values:
      yield from _strings(v)
  elif isinstance(node, ast.IfExp):  # [...] if CUDA_AVAILABLE else [...]
    yield from _strings(node.body)
    yield from _strings(node.orelse)


def _source_files(root, package, call):
  """Workspace-relative paths of the files in the rule's source attributes."""
  files = []
  for kw in call.keywords:
    if kw.arg not in _SOURCE_ATTRS:
      continue
    values = [kw.value]
    while values:
      v = values.pop()
      if isinstance(v, ast.BinOp):
        values += [v.left, v.right]
        continue
      if isinstance(v, ast.Call) and getattr(v.func, "id", "") == "glob":
        for pat in _strings(v.args[0]) if v.args else []:
          for p in glob.glob(os.path.join(root, package, pat.value),
                             recursive=True):
            files.append(os.path.relpath(p, root))
        continue
      for s in _strings(v):
        label = s.value
        if label.startswith("//"):
          pkg, _, name = label[2:].partition(":")
          path = os.path.join(pkg, name or os.path.basename(pkg))
        elif label.startswith("@"):
          continue
        else:
          path = os.path.join(package, label.lstrip(":"))
        if os.path.isfile(os.path.join(root, path)):
          files.append(path)
  return files


def _needed(root, files):
  """{target: first 'file: #include' needing it} for the given sources."""
  needed = {}
  for path in files:
    with open(os.path.join(root, path), errors="replace") as f:
      for inc in _INCLUDE.findall(f.read()):
        t = header_target(inc)
        if t:
          needed.setdefault(t, "%s includes %s" % (path, inc))
  return needed


class _Edit:
  """Replace text[start:end] (absolute offsets) by `text`."""

  def __init__(self, start, end, text):
    self.start, self.end, self.text = start, end, text


def _offsets(text):
  starts = [0]
  for line in text.splitlines(keepends=True):
    starts.append(starts[-1] + len(line))
  return lambda lineno, col: starts[lineno - 1] + col


def _sort_key(item):
  """buildifier's order for deps: local, then //, then @ labels; by package."""
  label = item.strip('"')
  return (2 if label.startswith("@") else 1 if label.startswith("//") else 0,
          label.partition(":")[0], label)


def _list_edit(text, off, lst, replace, extra):
  """An edit of list node `lst`: replace(label) gives the labels that stand
  for each string element (the same label to keep it, [] to drop it), and the
  labels in `extra` are added where buildifier would sort them."""
  start = off(lst.lineno, lst.col_offset)
  end = off(lst.end_lineno, lst.end_col_offset)
  items = []
  for e in lst.elts:
    seg = text[off(e.lineno, e.col_offset):off(e.end_lineno, e.end_col_offset)]
    if isinstance(e, ast.Constant) and isinstance(e.value, str):
      items += ['"%s"' % label for label in replace(e.value)]
    else:
      items.append(seg)
  for label in extra:  # before the first string item that sorts after it
    new = '"%s"' % label
    at = next((n for n, i in enumerate(items)
               if i.startswith('"') and _sort_key(i) > _sort_key(new)),
              len(items))
    items.insert(at, new)
  items = list(dict.fromkeys(items))  # drop repeats, keep order
  if all(i.startswith('"') for i in items):
    items.sort(key=_sort_key)
  if lst.lineno == lst.end_lineno and len(items) <= 1:
    return _Edit(start, end, "[%s]" % ", ".join(items))
  line_start = text.rfind("\n", 0, start) + 1
  indent = re.match(r"\s*", text[line_start:start]).group(0)
  body = "".join("%s    %s,\n" % (indent, i) for i in items)
  return _Edit(start, end, "[\n%s%s]" % (body, indent))


def _unsorted(lst):
  """True for a deps list of plain labels that is not in buildifier's order."""
  if not all(isinstance(e, ast.Constant) and isinstance(e.value, str)
             for e in lst.elts):
    return False
  labels = ['"%s"' % e.value for e in lst.elts]
  return labels != sorted(labels, key=_sort_key)


def _deps_lists(call):
  """The list nodes of the rule's deps (through +, select() and if-else), in
  the order they appear in the file."""
  lists = []
  for kw in call.keywords:
    if kw.arg != "deps":
      continue
    stack = [kw.value]
    while stack:
      v = stack.pop()
      if isinstance(v, ast.List):
        lists.append(v)
      elif isinstance(v, ast.BinOp):
        stack += [v.left, v.right]
      elif isinstance(v, ast.Call):
        stack += list(v.args) + [k.value for k in v.keywords]
      elif isinstance(v, ast.Dict):
        stack += v.values
      elif isinstance(v, ast.IfExp):
        stack += [v.body, v.orelse]
  return sorted(lists, key=lambda l: (l.lineno, l.col_offset))


def fix_build(root, build, known, fix_grpc, add_missing, report):
  """Returns the new text of `build` (workspace-relative path)."""
  package = os.path.dirname(build)
  with open(os.path.join(root, build)) as f:
    text = f.read()
  off = _offsets(text)
  edits = []
  for stmt in ast.parse(text, build).body:
    call = stmt.value if isinstance(stmt, ast.Expr) else None
    if not isinstance(call, ast.Call):
      continue
    name = next((k.value.value for k in call.keywords if k.arg == "name"
                 and isinstance(k.value, ast.Constant)), None)
    lists = _deps_lists(call)
    deps = [s.value for l in lists for s in _strings(l)]
    if not name:
      continue
    where = "//%s:%s" % (package, name)
    edits += [_list_edit(text, off, l, lambda label: [label], [])
              for l in lists if _unsorted(l)]
    if not any(k.arg in _SOURCE_ATTRS for k in call.keywords):
      if _ABSL_UNION in deps:
        report.append("%s: keeps %s: no sources to read" % (where, _ABSL_UNION))
      continue
    needed = _needed(root, _source_files(root, package, call))
    unknown = [why for t, why in needed.items() if t == "?"]
    for t in needed:
      if t != "?" and t not in known:
        sys.exit("fix_deps: %s maps to @system_libs//:%s, which the WORKSPACE "
                 "does not define" % (needed[t], t))
    absl = sorted(_REPO + t for t in needed if t.startswith("absl_"))
    repl = {}
    if _ABSL_UNION in deps:
      if unknown:
        report.append("%s: keeps %s: no per-library target for: %s" %
                      (where, _ABSL_UNION, "; ".join(unknown)))
      else:
        repl[_ABSL_UNION] = [a for a in absl if a not in deps]
        report.append("%s: %s -> %s" % (where, _ABSL_UNION, ", ".join(
            l[len(_REPO):] for l in repl[_ABSL_UNION]) or "(nothing)"))
    if _GRPC in deps and "grpc" not in needed:
      to = [_PROTOBUF] if "protobuf" in needed and _PROTOBUF not in deps else []
      report.append("%s: %s%s but includes no gRPC header: it can be %s" % (
          where, _GRPC, " (changed)" if fix_grpc else "",
          "protobuf" if to else "dropped"))
      if fix_grpc:
        repl[_GRPC] = to
    have = set(deps) | set(sum(repl.values(), []))
    if _ABSL_UNION in have and _ABSL_UNION not in repl:
      have |= {_REPO + t for t in needed if t.startswith("absl_")}
    if _GRPC in have and _GRPC not in repl:
      have.add(_PROTOBUF)
    missing = sorted(_REPO + t for t in needed if _CHECKED_MISSING.match(t)
                     and _REPO + t not in have)
    if missing:
      report.append("%s: %s %s (%s)" % (
          where, "adds" if add_missing else "does not list",
          ", ".join(m[len(_REPO):] for m in missing),
          "; ".join(needed[m[len(_REPO):]] for m in missing)))
    if not repl and not (add_missing and missing):
      continue
    if not lists:
      report.append("%s: has no deps list to add to; edit it by hand" % where)
      continue
    for i, lst in enumerate(lists):
      extra = missing if (add_missing and i == 0) else []
      if _unsorted(lst):
        edits = [e for e in edits
                 if e.start != off(lst.lineno, lst.col_offset)]
      if extra or _unsorted(lst) or any(s.value in repl
                                        for s in _strings(lst)):
        edits.append(_list_edit(text, off, lst,
                                lambda label: repl.get(label, [label]), extra))
  for e in sorted(edits, key=lambda e: -e.start):
    text = text[:e.start] + e.text + text[e.end:]
  return text


def main():
  parser = argparse.ArgumentParser(
      description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("builds", nargs="*",
                      help="BUILD files (default: all outside third_party/)")
  parser.add_argument("--check", action="store_true",
                      help="write nothing; exit 1 if a file would change")
  parser.add_argument("--fix-grpc", action="store_true",
                      help="replace :grpc by :protobuf or nothing where no "
                      "source includes a gRPC header")
  parser.add_argument("--add-missing", action="store_true",
                      help="add absl_*/grpc/protobuf targets that sources "
                      "include but deps do not list")
  args = parser.parse_args()
  root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
  if not os.path.isfile(os.path.join(root, "WORKSPACE")):
    sys.exit("fix_deps: no WORKSPACE at %s" % root)
  builds = [os.path.relpath(os.path.abspath(b), root) for b in args.builds]
  if not builds:
    for dirpath, dirnames, filenames in os.walk(root):
      rel = os.path.relpath(dirpath, root)
      dirnames[:] = sorted(d for d in dirnames if not d.startswith(
          (".", "bazel-")) and not (rel == "." and d == "third_party"))
      if "BUILD" in filenames:
        builds.append(os.path.normpath(os.path.join(rel, "BUILD")))
  known = workspace_targets(root)
  changed = []
  for build in builds:
    report = []
    new = fix_build(root, build, known, args.fix_grpc, args.add_missing,
                    report)
    with open(os.path.join(root, build)) as f:
      old = f.read()
    for line in report:
      print("%s: %s" % (build, line))
    if new != old:
      changed.append(build)
      if not args.check:
        with open(os.path.join(root, build), "w") as f:
          f.write(new)
  verb = "would change" if args.check else "changed"
  print("fix_deps: %s %d of %d BUILD files%s" % (
      verb, len(changed), len(builds),
      (": " + " ".join(changed)) if changed else ""))
  return 1 if args.check and changed else 0


if __name__ == "__main__":
  sys.exit(main())

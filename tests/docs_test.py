#!/usr/bin/env python3
"""Runs the shell blocks of README.md and docs/*.md as written, in order.

Every fenced block in those files names its language. Each block tagged `sh`,
`bash` or `shell` is run with `bash -e -o pipefail` (a failing command fails
the block), the blocks of one file in order, in a fresh directory of that
file's own, and its exit status and the checks written beside it decide
whether it passed. A block that cannot run here says so visibly, on a comment
line of its own inside the block:

    # docs_test: skip: REASON            not run; REASON is listed in the report
    # docs_test: with PROGRAM ARGS       every command line that runs PROGRAM
                                         gets ARGS appended (later flags win):
                                         a short run of a long benchmark
    # docs_test: timeout SECONDS         longer than the default 300 s
    # docs_test: beside COMMAND          the block needs COMMAND running (a
                                         cluster, in another terminal): the
                                         test starts it in the background and
                                         runs the block again every second
                                         until it passes, COMMAND ends or the
                                         block's time runs out

Checks sit in an HTML comment right after the closing fence (invisible on
the rendered page), one per line:

    <!-- docs_test
    file run/summary.json                the file exists after the block
    output REGEX                         the block's output matches REGEX
    figure REGEX LOW HIGH                the number REGEX's first group
                                         captures lies in [LOW, HIGH]
    -->

The substitutions the test makes itself, so that blocks run on a machine
where other things run too:
- the fresh directory holds links to the checkout's top-level entries (data/
  and bazel-bin/ included), so `deploy/...`, `data/...` and `bazel-bin/...`
  resolve as in a checkout, and run/, model.npz and the like land in the
  fresh directory;
- ports 7000-8999 on 127.0.0.1 (the configs' and the docs' fixed ports) are
  shifted by one offset to a range found free, in the blocks and in copies of
  deploy/configs/*.yaml;
- `bazel` runs in the checkout and drops `-c opt` (CI builds once, in the
  default mode; an opt build would rebuild everything);
- `sudo` runs its command directly when the test runs as root;
- a line that runs ./tests/run_all.sh is not run (this test is part of it).

Usage: tests/docs_test.py [--list] [--only FILE[:LINE]] [--keep]
Ends with "docs_test: N blocks: R ran (P passed, F failed), S skipped" and
exits 1 when a block failed, an unmarked block has no language, or fewer than
80 % of the shell blocks run.
"""

import argparse
import dataclasses
import glob
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SHELL = {"sh", "bash", "shell"}
DEFAULT_TIMEOUT_S = 300
PORT_RE = re.compile(r"\b(127\.0\.0\.1|localhost|0\.0\.0\.0):([78]\d\d\d)\b")
MIN_RUN_FRACTION = 0.8


@dataclasses.dataclass
class Block:
    path: str  # relative to the checkout
    line: int  # 1-based line of the opening fence
    lang: str
    body: list
    skip: str = ""
    timeout_s: int = DEFAULT_TIMEOUT_S
    beside: str = ""
    appends: list = dataclasses.field(default_factory=list)
    checks: list = dataclasses.field(default_factory=list)

    @property
    def where(self):
        return f"{self.path}:{self.line}"


def parse_markdown(root, rel):
    """The fenced blocks of one file, with their markers and checks."""
    lines = open(os.path.join(root, rel), encoding="utf-8").read().split("\n")
    blocks, problems = [], []
    i = 0
    while i < len(lines):
        m = re.match(r"^\s*(```+)\s*([A-Za-z0-9_+-]*)", lines[i])
        if not m:
            i += 1
            continue
        fence, lang = m.group(1), m.group(2).lower()
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            j += 1
        if j >= len(lines):
            problems.append(f"{rel}:{i + 1}: a fenced block is never closed")
            break
        block = Block(rel, i + 1, lang, lines[i + 1:j])
        if not lang:
            problems.append(
                f"{rel}:{i + 1}: a fenced block without a language; tag it "
                "(sh for commands the docs test runs, text for output)")
        parse_markers(block, problems)
        k = j + 1
        while k < len(lines) and not lines[k].strip():
            k += 1
        if k < len(lines) and lines[k].strip().startswith("<!-- docs_test"):
            end = k
            while end < len(lines) and "-->" not in lines[end]:
                end += 1
            for raw in lines[k:end + 1]:
                text = raw.replace("<!-- docs_test", "").replace("-->", "").strip()
                if text:
                    block.checks.append(text)
            j = end
        blocks.append(block)
        i = j + 1
    return blocks, problems


def parse_markers(block, problems):
    for raw in block.body:
        text = raw.strip()
        if not text.startswith("# docs_test:"):
            continue
        marker = text[len("# docs_test:"):].strip()
        if marker.startswith("skip"):
            block.skip = marker[len("skip"):].lstrip(":").strip()
            if not block.skip:
                problems.append(f"{block.where}: a skip marker needs a reason "
                                "('# docs_test: skip: REASON')")
        elif marker.startswith("with "):
            parts = marker.split(None, 2)
            if len(parts) < 3:
                problems.append(f"{block.where}: want '# docs_test: with PROGRAM ARGS'")
            else:
                block.appends.append((parts[1], parts[2]))
        elif marker.startswith("beside "):
            block.beside = marker[len("beside "):].strip()
        elif marker.startswith("timeout "):
            block.timeout_s = int(marker.split()[1])
        else:
            problems.append(f"{block.where}: unknown docs_test marker {marker!r}")


def doc_files(root):
    return ["README.md"] + sorted(
        os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "docs", "*.md")))


def port_free(port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def pick_port_offset(used_ports):
    """An offset that moves every port the docs use to a free one, below the
    kernel's ephemeral range so that clients' own ports do not take them."""
    for offset in range(10000, 22000, 1000):
        if all(port_free(p + offset) for p in used_ports):
            return offset
    raise SystemExit("docs_test: no free range of ports for the docs' 7000-8999")


def shift_ports(text, offset):
    return PORT_RE.sub(lambda m: f"{m.group(1)}:{int(m.group(2)) + offset}", text)


def make_fresh_dir(root, base, offset):
    """A directory that looks like the checkout (links), with its own run/."""
    os.makedirs(base)
    for name in os.listdir(root):
        if name in (".git", "run", "deploy") or name.startswith("bazel-") and name != "bazel-bin":
            continue
        target = os.path.join(root, name)
        if name == "bazel-bin":
            target = os.path.realpath(target)
        os.symlink(target, os.path.join(base, name))
    deploy = os.path.join(base, "deploy")
    os.makedirs(deploy)
    for name in os.listdir(os.path.join(root, "deploy")):
        if name != "configs":
            os.symlink(os.path.join(root, "deploy", name), os.path.join(deploy, name))
    configs = os.path.join(deploy, "configs")
    os.makedirs(configs)
    for path in glob.glob(os.path.join(root, "deploy", "configs", "*")):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        with open(os.path.join(configs, os.path.basename(path)), "w", encoding="utf-8") as f:
            f.write(shift_ports(text, offset))


def caller_path():
    """The PATH of the shell that started the test (tests/run_all.sh passes
    it: a python3 from pyenv, say, puts its own folders in front)."""
    return os.environ.get("DOCS_TEST_CALLER_PATH") or os.environ.get("PATH", "")


def make_shims(root, shim_dir):
    """`bazel` that builds in the checkout without -c opt; `sudo` for root."""
    os.makedirs(shim_dir)
    real_bazel = shutil.which("bazel") or "bazel"
    with open(os.path.join(shim_dir, "bazel"), "w") as f:
        f.write(f"""#!/usr/bin/env bash
# docs_test: bazel runs in the checkout, in the default mode (-c opt dropped).
args=()
skip=0
for a in "$@"; do
  if [[ $skip == 1 ]]; then skip=0; continue; fi
  if [[ "$a" == "-c" ]]; then skip=1; continue; fi
  if [[ "$a" == "--compilation_mode=opt" || "$a" == "-copt" ]]; then continue; fi
  args+=("$a")
done
# The PATH without the shims: Bazel hands PATH to every action, so another
# PATH would rebuild everything.
export PATH={caller_path()!r}
cd {root!r} && exec {real_bazel!r} "${{args[@]}}"
""")
    with open(os.path.join(shim_dir, "sudo"), "w") as f:
        f.write("""#!/usr/bin/env bash
# docs_test: run as root already; otherwise the real sudo, never prompting.
if [[ $(id -u) == 0 ]]; then exec "$@"; fi
for s in /usr/bin/sudo /bin/sudo; do [[ -x $s ]] && exec $s -n "$@"; done
echo "docs_test: this block needs root (sudo)" >&2; exit 77
""")
    for name in ("bazel", "sudo"):
        os.chmod(os.path.join(shim_dir, name), 0o755)


def script_of(block, offset):
    text = "\n".join(block.body)
    # One line a command: continuations joined, so that ARGS land at the end.
    text = re.sub(r"\\\n\s*", " ", text)
    lines = []
    for line in text.split("\n"):
        for program, extra in block.appends:
            if re.search(r"(^|\s)" + re.escape(program) + r"(\s|$)", line) and \
                    not line.lstrip().startswith("#"):
                command, hash_, comment = line.partition(" # ")
                command = command.rstrip()
                amp = " &" if command.endswith("&") else ""
                command = command[:-1].rstrip() if amp else command
                if re.search(r"\bbazel\s+run\b", command) and " -- " not in command + " ":
                    command += " --"  # the program's arguments, not bazel's
                line = f"{command} {extra}{amp}" + (f"  # {comment}" if hash_ else "")
        if re.match(r"^\s*\./tests/run_all\.sh\b", line):
            line = "true  # docs_test: ./tests/run_all.sh is the command running this test"
        lines.append(line)
    return shift_ports("\n".join(lines), offset)


def run_block(block, cwd, env, offset, log_path):
    script = script_of(block, offset)
    start = time.monotonic()
    deadline = start + block.timeout_s
    with open(log_path, "w") as log:
        log.write(f"$ # {block.where}\n{script}\n----\n")
        log.flush()
        beside = None
        if block.beside:
            beside = subprocess.Popen(
                ["bash", "-c", shift_ports(block.beside, offset)], cwd=cwd, env=env,
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)
        try:
            while True:
                rc, timed_out = run_script(script, cwd, env, log, deadline)
                # With a command beside it, the block is polled: it runs
                # again until it passes while that command lives.
                if rc == 0 or timed_out or beside is None or beside.poll() is not None:
                    break
                if time.monotonic() + 1 > deadline:
                    break
                time.sleep(1)
        finally:
            if beside is not None:
                stop_group(beside.pid)
        elapsed = time.monotonic() - start
    output = open(log_path, encoding="utf-8", errors="replace").read()
    output = output.split("\n----\n", 1)[1] if "\n----\n" in output else output
    if timed_out:
        return False, f"timed out after {block.timeout_s} s", elapsed
    if rc != 0:
        return False, f"exit status {rc}", elapsed
    for check in block.checks:
        ok, why = run_check(check, cwd, output)
        if not ok:
            return False, why, elapsed
    return True, "", elapsed


def run_script(script, cwd, env, log, deadline):
    """Runs the block once; returns (exit status, timed out)."""
    proc = subprocess.Popen(["bash", "-e", "-o", "pipefail", "-c", script + "\n"],
                            cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        rc = proc.wait(timeout=max(1, deadline - time.monotonic()))
        timed_out = False
    except subprocess.TimeoutExpired:
        rc, timed_out = -1, True
    # What the block left in the background (a launcher, serve, a watch):
    # stopped in order, then killed.
    stop_group(proc.pid)
    return rc, timed_out


def stop_group(pgid):
    for sig, wait_s in ((signal.SIGINT, 15), (signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.2)


def run_check(check, cwd, output):
    kind, _, arg = check.partition(" ")
    arg = arg.strip()
    if kind == "file":
        if os.path.exists(os.path.join(cwd, arg)):
            return True, ""
        return False, f"check 'file {arg}': no such file after the block"
    if kind == "output":
        if re.search(arg, output, re.MULTILINE):
            return True, ""
        return False, f"check 'output {arg}': not in the block's output"
    if kind == "figure":
        m = re.match(r"(.*)\s+(\S+)\s+(\S+)$", arg)
        if not m:
            return False, f"check {check!r}: want 'figure REGEX LOW HIGH'"
        regex, low, high = m.group(1), float(m.group(2)), float(m.group(3))
        found = re.search(regex, output, re.MULTILINE)
        if not found:
            return False, f"check 'figure {regex}': not in the block's output"
        value = float(found.group(1))
        if low <= value <= high:
            return True, ""
        return False, f"check 'figure {regex}': {value} is outside [{low}, {high}]"
    return False, f"unknown check {check!r} (file, output, figure)"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--list", action="store_true",
                        help="list the blocks and what would happen to each; run nothing")
    parser.add_argument("--only", default="",
                        help="FILE or FILE:LINE: run only that file's blocks, or one block")
    parser.add_argument("--keep", action="store_true", help="keep the fresh directories")
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    args = parser.parse_args()
    root = os.path.abspath(args.root)

    all_blocks, problems = [], []
    for rel in doc_files(root):
        blocks, p = parse_markdown(root, rel)
        all_blocks += blocks
        problems += p
    shell = [b for b in all_blocks if b.lang in SHELL]
    to_run = [b for b in shell if not b.skip]
    fraction = len(to_run) / max(1, len(shell))

    only_file, _, only_line = args.only.partition(":")
    selected = [b for b in to_run
                if (not only_file or b.path == only_file)
                and (not only_line or b.line == int(only_line))]

    if args.only and not selected:
        print(f"docs_test: --only {args.only}: no shell block to run there "
              "(FILE:LINE names a block's opening fence; --list shows them)")
        return 2
    for p in problems:
        print(f"docs_test: {p}")
    if args.list:
        for b in shell:
            state = f"skip: {b.skip}" if b.skip else (
                "run" + (" shorter (with ...)" if b.appends else ""))
            print(f"{b.where:28} {state}")
        print(f"docs_test: {len(shell)} shell blocks: {len(to_run)} run "
              f"({100 * fraction:.0f} %), {len(shell) - len(to_run)} skipped")
        return 1 if problems or fraction < MIN_RUN_FRACTION else 0

    used = sorted({int(m.group(2)) for b in shell for m in PORT_RE.finditer("\n".join(b.body))} |
                  {int(m.group(2)) for path in glob.glob(os.path.join(root, "deploy", "configs", "*"))
                   for m in PORT_RE.finditer(open(path, encoding="utf-8").read())})
    offset = pick_port_offset(used)
    work = tempfile.mkdtemp(prefix="docs_test.")
    shims = os.path.join(work, "shims")
    make_shims(root, shims)
    env = dict(os.environ)
    env["PATH"] = shims + os.pathsep + caller_path()
    print(f"docs_test: {len(selected)} blocks to run in {work} "
          f"(ports 7000-8999 moved to {7000 + offset}-{8999 + offset})", flush=True)

    passed, failed, fresh = 0, [], {}
    for b in selected:
        if b.path not in fresh:
            fresh[b.path] = os.path.join(work, b.path.replace("/", "_").replace(".md", ""))
            make_fresh_dir(root, fresh[b.path], offset)
        log = os.path.join(work, f"{b.path.replace('/', '_')}_{b.line}.log")
        ok, why, elapsed = run_block(b, fresh[b.path], env, offset, log)
        if ok:
            passed += 1
            print(f"  ok    {b.where:28} {elapsed:6.1f} s", flush=True)
        else:
            failed.append(b)
            print(f"  FAIL  {b.where:28} {elapsed:6.1f} s  {why}", flush=True)
            tail = open(log, encoding="utf-8", errors="replace").read().split("\n")[-25:]
            print("\n".join("        | " + l for l in tail), flush=True)
    skipped = [b for b in shell if b.skip]
    for b in skipped:
        if not only_file or b.path == only_file:
            print(f"  skip  {b.where:28} {b.skip}")
    if not args.keep and not failed:
        shutil.rmtree(work, ignore_errors=True)
    elif failed:
        print(f"docs_test: logs and fresh directories kept in {work}")
    print(f"docs_test: {len(shell)} blocks: {passed + len(failed)} ran ({passed} passed, "
          f"{len(failed)} failed), {len(skipped)} skipped; "
          f"{100 * fraction:.0f} % of the shell blocks run (at least "
          f"{100 * MIN_RUN_FRACTION:.0f} % must)")
    if problems:
        print(f"docs_test: {len(problems)} problem(s) with the blocks' tags or markers, above")
    return 1 if failed or problems or fraction < MIN_RUN_FRACTION else 0


if __name__ == "__main__":
    sys.exit(main())

"""A Python worker run by the launcher (launcher.worker_command).

The launcher runs the command of `launcher.worker_command` for each worker
slot with the flags it gives the C++ worker appended:
  --config PATH  [--set=section.key=value,...]  [--exit_reason_file PATH]
  --index I  --coordinator HOST:PORT
(and restarts it with the same flags when it dies). A worker script reads
them with parse_args and makes its Client with client():

    from downpour import launch
    args = launch.parse_args()          # the launcher's flags, and yours
    with launch.exit_reason(args), launch.client(args) as client:
        ...train...
        client.finish()                 # then exit 0: the slot is done

exit_reason writes why the worker failed (the exception) where the launcher
reads it for summary.json and the restart decision, and exits 2 for an error
that a restart cannot fix (a ValueError: a bad config or argument; the
launcher then does not restart it), 1 otherwise.
"""

import argparse
import contextlib
import sys
import traceback

from . import config as config_lib


def parse_args(argv=None, parser=None):
    """The launcher's flags (above) parsed by `parser` (an
    argparse.ArgumentParser with your own flags; default a new one)."""
    parser = parser or argparse.ArgumentParser()
    parser.add_argument("--config", required=True, help="the job's YAML")
    parser.add_argument("--index", type=int, default=0,
                        help="this worker's slot in cluster.workers")
    parser.add_argument("--join", action="store_true",
                        help="ask the coordinator for a free slot instead")
    parser.add_argument("--coordinator", default=None,
                        help="host:port (default cluster.coordinator)")
    parser.add_argument("--set", action="append", default=[],
                        help="section.key=value overrides, comma-separated")
    parser.add_argument("--exit_reason_file", default="",
                        help="where to write why this worker failed")
    args = parser.parse_args(argv)
    args.overrides = [o for s in args.set for o in s.split(",") if o]
    return args


def load_config(args):
    """The job's config with the launcher's overrides."""
    return config_lib.load(args.config, args.overrides)


def client(args, **kwargs):
    """downpour.Client as the launcher's flags say (kwargs passed on)."""
    from .client import Client
    return Client(load_config(args), index=args.index, join=args.join,
                  coordinator=args.coordinator, **kwargs)


@contextlib.contextmanager
def exit_reason(args):
    """Writes the reason of an exception to --exit_reason_file and exits 2
    (ValueError: not worth a restart) or 1."""
    try:
        yield
    except Exception as e:  # noqa: BLE001 (every failure gets its reason)
        traceback.print_exc()
        reason = "%s: %s" % (type(e).__name__, e)
        if args.exit_reason_file:
            with open(args.exit_reason_file, "w") as f:
                f.write(reason + "\n")
        sys.exit(2 if isinstance(e, ValueError) else 1)

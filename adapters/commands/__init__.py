"""Subcommands of ``cpsat-scheduler``, one module each, listed in ``adapters.cli.COMMANDS``.

A command module exposes ``register(subparsers)``, which adds its parser and sets
``handler=<function(args) -> exit status>``. The helpers here give every command the same
spelling of the shared options and the same way of reading its inputs.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:  # loaded by a command that reads its config, not by --help or --version
    from models import SchedulerConfig

__all__ = [
    "add_config_options",
    "add_progress_option",
    "config_from_args",
    "non_negative_float",
    "any_non_negative_int",
    "non_negative_int",
    "note",
    "progress_lines",
    "solver_seed",
    "time_limit",
]


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number >= 0")
    return value


# Past about 9.2e9 s the waits on the decision's threads overflow (time_t): an internal error.
MAX_TIME_LIMIT_SECONDS = 1_000_000_000


def time_limit(text: str) -> float:
    """A ``--time-limit``: a finite number of seconds >= 0 that a thread's wait can take."""
    value = non_negative_float(text)
    if value > MAX_TIME_LIMIT_SECONDS:
        raise argparse.ArgumentTypeError(f"{text!r} must be at most {MAX_TIME_LIMIT_SECONDS} seconds")
    return value


# The largest count, seed or millisecond wait a flag takes: CP-SAT's bounds and int32 parameters
# refuse larger ones as an internal error (``repack --max-moves 99999999999999999999`` did).
MAX_FLAG_INT = 2**31 - 1


def _non_negative(text: str) -> int:
    """A flag's integer >= 0, read without ``int``'s 4,300-digit refusal: past 30 digits it stands
    for "too large" (every caller bounds it far below)."""
    digits = text.strip().removeprefix("-").removeprefix("+")
    if not (digits.isascii() and digits.isdigit()):
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not an integer")
    if text.strip().startswith("-") and digits.strip("0"):
        raise argparse.ArgumentTypeError(f"{text[:40]!r} must be >= 0")
    return int(digits) if len(digits) <= 30 else 10**30


def any_non_negative_int(text: str) -> int:
    """An integer from 0 to 2**64 - 1: for what only Python reads (the bench generator's seed, which
    also names the files ``--dump`` writes: 300 digits made a name too long)."""
    value = _non_negative(text)
    if value >= 2**64:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} must be at most {2**64 - 1}")
    return value


def non_negative_int(text: str) -> int:
    value = _non_negative(text)
    if value > MAX_FLAG_INT:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} must be at most {MAX_FLAG_INT}")
    return value


def solver_seed(text: str) -> int:
    """CP-SAT's random_seed is an int32: a larger one was refused by its parameters' setter as an
    internal error after the snapshot was read."""
    return non_negative_int(text)


def worker_count(text: str) -> int:
    value = non_negative_int(text)
    if value > 64:
        raise argparse.ArgumentTypeError(f"{text!r} must be at most 64")
    return value


def add_config_options(parser: argparse.ArgumentParser) -> None:
    """``--config``, ``--scheduler-name`` and ``--all-pending``: which pods are ours, and how."""
    parser.add_argument("--config", metavar="FILE", help="scheduler config, YAML or JSON (see examples/config/)")
    parser.add_argument(
        "--scheduler-name",
        metavar="NAME",
        help="schedule pending pods whose spec.schedulerName is NAME (default: the config's, cpsat-scheduler)",
    )
    parser.add_argument(
        "--all-pending",
        action="store_true",
        help="take every pending pod whatever its schedulerName (for dumps of real clusters)",
    )


def config_from_args(args: argparse.Namespace, **overrides: object) -> SchedulerConfig:
    """The config file (or defaults), with command-line flags winning over it."""
    from adapters.snapshot_io import load_config
    from models import SchedulerConfig

    config = load_config(args.config) if getattr(args, "config", None) else SchedulerConfig()
    return config.with_overrides(scheduler_name=getattr(args, "scheduler_name", None), **overrides)


def add_progress_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--progress", action=argparse.BooleanOptionalAction, default=None,
        help="one line per stage of the decision on stderr, with the seconds since the start "
        "(default: when stderr is a terminal); never on stdout",
    )


@contextmanager
def progress_lines(args: argparse.Namespace) -> Iterator[None]:
    """While inside, the solver's stages (``solver.progress``) are printed on stderr, if asked
    (``--progress``) or if stderr is a terminal."""
    wanted = getattr(args, "progress", None)
    if wanted is None:
        wanted = _is_terminal(sys.stderr)
    if not wanted:
        yield
        return
    from solver import progress

    start = time.monotonic()

    def show(message: str) -> None:
        print(f"cpsat-scheduler: [{time.monotonic() - start:6.1f}s] {message}", file=sys.stderr, flush=True)

    with progress.listening(show):
        yield


def stage(message: str) -> None:
    """A stage of the command itself (reading, validating), shown like the solver's."""
    from solver import progress

    progress.stage(message)


def _is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def others_pending(snapshot, scheduler_name: str) -> str | None:
    """A hint when nothing is ours but other schedulers' pods wait (a dump of a real cluster):
    every command that decides says it, or its answer (\"every pending pod is placed\", \"nothing to
    provision\") would be about no pod at all."""
    if snapshot.pending_pods(scheduler_name):
        return None
    others = len(snapshot.pending_pods(all_pending=True))
    if not others:
        return None
    return (
        f'no pending pod has schedulerName "{scheduler_name}", but {others} pending pod(s) name '
        "another scheduler; --all-pending takes them"
    )


def missing_nodes(snapshot) -> str | None:
    """A note when bound pods name nodes the snapshot lacks (pods dumped without all their
    nodes): the decision leaves them out, and the room they take with them, without a word
    otherwise."""
    lost = snapshot.missing_nodes()
    if not lost:
        return None
    gone = set(lost)
    pods = sum(1 for p in snapshot.bound_pod_tuple if p.spec.node_name in gone)
    more = f" and {len(lost) - 5} more" if len(lost) > 5 else ""
    return (f"{pods} bound pod(s) run on {len(lost)} node(s) not in the snapshot ({', '.join(lost[:5])}{more}); "
            "they are left out: dump every node (kubectl get nodes,pods -A -o yaml)")


def note(message: Optional[str]) -> None:
    """A side remark for people, on stderr so that stdout stays machine-readable."""
    if message:
        print(f"cpsat-scheduler: note: {message}", file=sys.stderr)


def read_snapshot_or_cluster(args: argparse.Namespace, config: SchedulerConfig, source):
    """The ``LoadedSnapshot`` a command decides on: the cluster of ``--kubeconfig``/``--context``/
    ``--in-cluster`` (read-only: list calls) when asked for, else ``source`` (a SNAPSHOT file, ``-``
    for stdin, or a bundled example; None: none was given). Bad input raises ``InputError``."""
    from adapters.cluster_read import cluster_requested, read_cluster
    from adapters.snapshot_io import read_snapshot
    from models import InputError

    if cluster_requested(args, snapshot_given=args.snapshot is not None):
        if args.snapshot is not None:
            raise InputError(args.snapshot, "", "give a SNAPSHOT or --kubeconfig/--context/--in-cluster, not both")
        stage("reading the cluster")
        cluster = read_cluster(args)
        return read_snapshot(cluster.open(), label=cluster.label, max_bytes=config.limits.max_snapshot_bytes)
    if source is None:
        raise InputError("", "SNAPSHOT", "give a snapshot file (or - for stdin), or --kubeconfig to read a cluster")
    stage(f"reading {source}")
    return read_snapshot(source, max_bytes=config.limits.max_snapshot_bytes)

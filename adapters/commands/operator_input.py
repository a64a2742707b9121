"""What the operator's questions (``what-if``, ``why``) share: a SNAPSHOT or the cluster of
``--kubeconfig`` (read-only: list calls), the config options, the solver's settings and
``--output table|json``. Not a command itself (``adapters.cli.COMMANDS`` does not list it)."""

from __future__ import annotations

import argparse

from adapters.cluster_read import add_cluster_options
from adapters.gc_control import keep_for_good

from . import (
    add_config_options, add_progress_option, config_from_args, missing_nodes, note, others_pending,
    read_snapshot_or_cluster, time_limit, worker_count,
)

OUTPUTS = ("table", "json")


def add_input_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("snapshot", nargs="?", metavar="SNAPSHOT", help="snapshot file, or - for stdin (left out "
                        "with --kubeconfig/--context/--in-cluster, or as `kubectl cpsat`: the cluster is read)")
    add_cluster_options(parser)
    parser.add_argument("--time-limit", type=time_limit, metavar="SECONDS",
                        help="each decision's time limit, its context build and validation included (config solver.timeLimitSeconds)")
    parser.add_argument("--workers", type=worker_count, metavar="N", help="CP-SAT worker threads (config solver.workers)")
    add_config_options(parser)
    parser.add_argument("--output", "-o", choices=OUTPUTS, default="table", help="table (default) or json")
    add_progress_option(parser)


def read_input(args: argparse.Namespace):
    """(snapshot, config) from the command line; bad input raises ``InputError`` (exit 2)."""
    config = config_from_args(args, time_limit_seconds=args.time_limit, workers=args.workers)
    keep_for_good()  # the snapshot lives until the command is done: no collection walks it again
    loaded = read_snapshot_or_cluster(args, config, args.snapshot)
    loaded = loaded.require_nodes_or_pods()
    note(loaded.note())
    note(missing_nodes(loaded.snapshot))
    if not args.all_pending:
        note(others_pending(loaded.snapshot, config.scheduler_name))
    loaded.decidable(config.scheduler_name, all_pending=args.all_pending)
    return loaded.snapshot, config

"""What the operator's questions (``what-if``, ``why``) share: a SNAPSHOT or the cluster of
``--kubeconfig`` (read-only: list calls), the config options, the solver's settings and
``--output table|json``. Not a command itself (``adapters.cli.COMMANDS`` does not list it)."""

from __future__ import annotations

import argparse

from adapters.cluster_read import add_cluster_options, cluster_requested, read_cluster
from models import InputError

from . import add_config_options, add_progress_option, config_from_args, non_negative_float, note, stage, worker_count

OUTPUTS = ("table", "json")


def add_input_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("snapshot", nargs="?", metavar="SNAPSHOT", help="snapshot file, or - for stdin (left out "
                        "with --kubeconfig/--context/--in-cluster, or as `kubectl cpsat`: the cluster is read)")
    add_cluster_options(parser)
    parser.add_argument("--time-limit", type=non_negative_float, metavar="SECONDS",
                        help="CP-SAT time limit per decision (config solver.timeLimitSeconds)")
    parser.add_argument("--workers", type=worker_count, metavar="N", help="CP-SAT worker threads (config solver.workers)")
    add_config_options(parser)
    parser.add_argument("--output", "-o", choices=OUTPUTS, default="table", help="table (default) or json")
    add_progress_option(parser)


def read_input(args: argparse.Namespace):
    """(snapshot, config) from the command line; bad input raises ``InputError`` (exit 2)."""
    from adapters.snapshot_io import read_snapshot

    config = config_from_args(args, time_limit_seconds=args.time_limit, workers=args.workers)
    if cluster_requested(args, snapshot_given=args.snapshot is not None):
        if args.snapshot is not None:
            raise InputError(args.snapshot, "", "give a SNAPSHOT or --kubeconfig/--context/--in-cluster, not both")
        stage("reading the cluster")
        cluster = read_cluster(args)
        loaded = read_snapshot(cluster.open(), label=cluster.label, max_bytes=config.limits.max_snapshot_bytes)
    else:
        if args.snapshot is None:
            raise InputError("", "SNAPSHOT", "give a snapshot file (or - for stdin), or --kubeconfig to read a cluster")
        loaded = read_snapshot(args.snapshot, max_bytes=config.limits.max_snapshot_bytes)
    loaded = loaded.require_nodes_or_pods()
    note(loaded.note())
    loaded.decidable(config.scheduler_name, all_pending=args.all_pending)
    return loaded.snapshot, config

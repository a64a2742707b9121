"""``cpsat-scheduler repack``: which running pods to move where, in which order, to free nodes.

The plan is replayed step by step by an independent check before anything is printed; a plan
without a safe order, or one the replay refuses, is never shown (exit 1 with the reason).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from adapters import gang_api
from adapters.gc_control import keep_for_good, paused_gc
from adapters.cluster_read import add_cluster_options, cluster_requested, read_cluster
from adapters.interrupts import checkpoint, write_result
from models import InputError

from . import (
    add_progress_option, non_negative_float, non_negative_int, note, progress_lines, solver_seed, stage, time_limit,
    worker_count,
)

OUTPUTS = ("table", "json", "yaml")
OBJECTIVES = ("nodes", "cost")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "repack",
        help="recommend pod moves that free nodes, in a safe order",
        description="Read a running cluster (any `kubectl get nodes,pods,pdb -A -o yaml|json` dump) and "
        "recommend which pods to move where so that as many nodes as possible (or the most expensive "
        "ones) end up empty, with the fewest moves, as numbered steps that are each safe when they run. "
        "DaemonSet, mirror, terminating and safe-to-evict=false pods never move; bare pods, pods "
        "with local storage and kube-system pods without a PodDisruptionBudget only if the config allows "
        "(repack.moveBarePods, repack.moveLocalStorage, repack.moveSystemPods); pods with persistent "
        "volumes only where the volumes can follow (dump pv,pvc too). Pending pods that fit today keep "
        "a node to run on.",
    )
    parser.add_argument("snapshot", metavar="SNAPSHOT", nargs="?", help="snapshot file, or - for stdin")
    parser.add_argument("--max-moves", type=non_negative_int, metavar="N", help="evict at most N pods in all")
    parser.add_argument(
        "--target-free",
        type=non_negative_int,
        metavar="N",
        help="free at most N nodes (stop there and spend the rest on fewer moves)",
    )
    parser.add_argument(
        "--keep-node",
        action="extend",
        nargs="+",
        default=[],
        metavar="NAME",
        help="never free these nodes (they may still receive pods)",
    )
    parser.add_argument(
        "--objective",
        choices=OBJECTIVES,
        default="nodes",
        help="nodes (default): free the most nodes; cost: free the most expensive ones (repack.instanceCost)",
    )
    parser.add_argument("--config", metavar="FILE", help="scheduler config, YAML or JSON (see examples/config/)")
    parser.add_argument("--time-limit", type=time_limit, metavar="SECONDS", help="CP-SAT time limit (config solver.timeLimitSeconds)")
    parser.add_argument("--workers", type=worker_count, metavar="N", help="CP-SAT worker threads (config solver.workers; default 0 = automatic: 8, since CP-SAT's portfolio needs several diverse workers more than cores)")
    parser.add_argument("--seed", type=solver_seed, metavar="N", help="CP-SAT random seed (config solver.seed)")
    parser.add_argument("--output", "-o", choices=OUTPUTS, default="table", help="table (default), json (the stable contract) or yaml")
    parser.add_argument(
        "--allow-blocking-pending", action="store_true",
        help="print the best plan even if it leaves pending pods that fit today with no node (named in the "
        "plan); by default a plan freeing fewer nodes is printed instead",
    )
    add_progress_option(parser)
    parser.add_argument(
        "--apply", action="store_true",
        help="after printing the plan, carry its runbook out against the cluster of --kubeconfig: cordon, "
        "evict in order through the Eviction API, wait for each replacement to be Ready where planned; "
        "the first surprise stops it (exit 1, saying where)",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the plan and change nothing (the default)")
    parser.add_argument("--kubeconfig", metavar="FILE", help="the cluster's kubeconfig: read instead of a SNAPSHOT "
                        "when none is given (read-only: list calls), and where --apply acts (default: the client's)")
    parser.add_argument("--context", metavar="NAME", help="the kubeconfig context (with --kubeconfig or --apply)")
    add_cluster_options(parser, kubeconfig=False)
    parser.add_argument("--wait-seconds", type=non_negative_float, default=300.0, metavar="S",
                        help="with --apply: how long one replacement may take to be Ready (default 300)")
    parser.add_argument("--plot", metavar="FILE.png", help="also draw per-node utilisation before and after (needs matplotlib)")
    # A decision in CP-SAT's C++ code: Ctrl-C stops it at once (``adapters.interrupts``), and
    # --apply stops between polls on the same request.
    parser.set_defaults(handler=run, decides=True)


def run(args: argparse.Namespace) -> int:
    from adapters.repack_output import PlotUnavailable, dump_repack, write_plot
    from adapters.snapshot_io import read_snapshot

    from . import config_from_args

    if args.plot:
        try:
            import matplotlib  # noqa: F401 - only checking it is there before the long part
        except ImportError:
            print(
                "cpsat-scheduler: error: --plot needs matplotlib, which is not installed: "
                "pip install 'cpsat-scheduler[plot]'",
                file=sys.stderr,
            )
            return 2
    if args.apply and args.dry_run:
        raise InputError("--dry-run", "", "cannot be given with --apply: choose one")
    config = config_from_args(args, time_limit_seconds=args.time_limit, workers=args.workers, seed=args.seed)
    # The snapshot lives until the command is done: what the read makes is put out of the
    # collector's sight as the read ends (frozen after it, the first collection walked it all
    # again: a second at 5,000 nodes, deaf to Ctrl-C).
    keep_for_good()
    given = args.snapshot is not None or _snapshot_after_keep_node(args)
    if given and not args.apply:
        _note_cluster_options(args)
    if not given and cluster_requested(args, snapshot_given=False):
        cluster = read_cluster(args)
        loaded = read_snapshot(cluster.open(), label=cluster.label, max_bytes=config.limits.max_snapshot_bytes)
    else:
        loaded = read_snapshot(_snapshot_arg(args), max_bytes=config.limits.max_snapshot_bytes)
    loaded = loaded.require_nodes("no node to free and none to move pods to")
    note(loaded.note())
    checkpoint()

    from solver import SolverMemory
    from solver.repack import OrderError, RepackInfeasible, RepackOptions, RepackUnsafe, plan_repack

    options = RepackOptions(
        max_moves=args.max_moves,
        target_free=args.target_free,
        keep_nodes=tuple(dict.fromkeys(args.keep_node)),
        objective=args.objective,
        time_limit=args.time_limit,
        allow_blocking_pending=args.allow_blocking_pending,
    )
    try:
        # No cyclic collection while planning: the plan makes hundreds of thousands of small
        # objects that live until it is done (the problem, the round walk's states, the replay's
        # cluster), and each collection walked them all again: a quarter of the planning CPU on
        # the 1,000-node dump, with the same peak memory (docs/repack.md, "Large clusters: rounds").
        with progress_lines(args), paused_gc():
            stage("planning the moves")
            result = plan_repack(loaded.snapshot, config, options, memory=SolverMemory())  # this run's
    except (OrderError, RepackInfeasible) as exc:
        print(f"cpsat-scheduler: no plan: {exc}", file=sys.stderr)
        return 1
    except RepackUnsafe as exc:
        print(
            f"cpsat-scheduler: refusing to print a plan that fails its replay ({len(exc.problems)} problem(s)); "
            "this is a bug, please report it with the snapshot:",
            file=sys.stderr,
        )
        for line in exc.problems:
            print(f"  {line}", file=sys.stderr)
        return 1
    if args.plot:
        try:
            write_plot(result, args.plot)
        except PlotUnavailable as exc:
            print(f"cpsat-scheduler: error: {exc}", file=sys.stderr)
            return 2
        except OSError as exc:
            raise InputError("--plot", args.plot, f"cannot write the picture: {exc.strerror or exc}") from None
    write_result(dump_repack(result, args.output))
    if args.apply and not args.dry_run:
        sys.stdout.flush()
        return _apply(args, result, config)
    return 0


def _apply(args: argparse.Namespace, result, config) -> int:
    from adapters.live.api_client import KubeApi, credentials_refused, load_api_client
    from adapters.repack_apply import ApplyApi, apply_runbook

    try:
        client = load_api_client(args.kubeconfig, context=args.context)
    except Exception as exc:  # noqa: BLE001 - the loader's errors vary; none carries the file's content
        raise credentials_refused(args.kubeconfig or "default kubeconfig", exc) from None
    api = KubeApi(client)
    try:
        applied = apply_runbook(ApplyApi(api), result.runbook, wait_seconds=args.wait_seconds, scheduler_name=config.scheduler_name,
                                say=lambda line: print(f"cpsat-scheduler: apply: {line}", file=sys.stderr, flush=True))
    finally:
        api.close()
    if applied.stopped:
        from solver import interrupt

        if interrupt.requested():  # said above; not a decision cut short, so no "no plan printed"
            interrupt.reset()
            return 130
        return 1
    print(f"cpsat-scheduler: apply: done, {len(applied.done)} action(s)", file=sys.stderr)
    return 0


def _note_cluster_options(args: argparse.Namespace) -> None:
    """A SNAPSHOT without --apply reads no cluster: an option naming one is not read, and a note
    says so (a refusal would break scripts that switch --dry-run and --apply alone)."""
    try:  # a version this scheduler does not read is refused, as every command refuses it
        gang_api.parse_choice(args.gang_api)
    except ValueError as exc:
        raise InputError("--gang-api", "", str(exc).partition(": ")[2]) from None
    given = [flag for flag, value in (("--kubeconfig", args.kubeconfig), ("--context", args.context),
                                      ("--in-cluster", args.in_cluster),
                                      ("--gang-api", None if args.gang_api == "auto" else args.gang_api)) if value]
    if given:
        note(f"{', '.join(given)}: a SNAPSHOT without --apply reads no cluster; not read")


def _snapshot_after_keep_node(args: argparse.Namespace) -> bool:
    return bool(args.keep_node) and (args.keep_node[-1] == "-" or Path(args.keep_node[-1]).is_file())


def _snapshot_arg(args: argparse.Namespace) -> str:
    """SNAPSHOT, also when written after ``--keep-node A B`` (which takes every name that follows
    it): then the last of those names is the snapshot if it is a file (or ``-``)."""
    if args.snapshot is not None:
        return args.snapshot
    if args.keep_node and (args.keep_node[-1] == "-" or Path(args.keep_node[-1]).is_file()):
        return args.keep_node.pop()
    raise InputError("", "SNAPSHOT", "missing: give the snapshot file (or - for stdin)")

"""``cpsat-scheduler schedule``: place the pending pods of a snapshot and print the plan.

The plan is checked by the independent validator before it is printed; a plan that fails it is
refused (exit 1) rather than shown, so every plan this command prints is one the validator accepts.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from adapters.gc_control import keep_for_good, paused_gc
from adapters.cluster_read import add_cluster_options
from adapters.interrupts import checkpoint, write_result
from models import InputError

from . import (
    add_config_options,
    add_progress_option,
    config_from_args,
    missing_nodes,
    note,
    others_pending,
    progress_lines,
    read_snapshot_or_cluster,
    solver_seed,
    stage,
    time_limit,
    worker_count,
)

if TYPE_CHECKING:
    from models import ClusterSnapshot, Plan

ENGINES = ("cpsat", "greedy")
OUTPUTS = ("table", "json", "yaml")
# Run when no SNAPSHOT is given. It lives in the source tree (adapters/commands/ → repo root).
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DEFAULT_SNAPSHOT = EXAMPLES / "snapshots" / "quickstart.yaml"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "schedule",
        help="place the pending pods of a snapshot and print the plan",
        description="Place the pending pods of a cluster snapshot (any `kubectl get ... -o yaml|json` "
        "dump) and print the plan. Without SNAPSHOT, runs on the bundled example "
        "examples/snapshots/quickstart.yaml.",
    )
    parser.add_argument("snapshot", nargs="?", metavar="SNAPSHOT", help="snapshot file, or - for stdin")
    add_cluster_options(parser)
    parser.add_argument("--engine", choices=ENGINES, default="cpsat", help="cpsat (default) or greedy (kube-scheduler's scheduleOne)")
    parser.add_argument("--time-limit", type=time_limit, metavar="SECONDS", help="the decision's time limit, its context build and validation included (config solver.timeLimitSeconds)")
    parser.add_argument("--workers", type=worker_count, metavar="N", help="CP-SAT worker threads (config solver.workers; default 0 = automatic: 8, since CP-SAT's portfolio needs several diverse workers more than cores)")
    parser.add_argument("--seed", type=solver_seed, metavar="N", help="CP-SAT random seed (config solver.seed)")
    add_config_options(parser)
    parser.add_argument("--output", "-o", choices=OUTPUTS, default="table", help="table (default, for people), json (the stable contract) or yaml")
    parser.add_argument("--bound", action="store_true", help="after the decision, prove with CP-SAT the most pods of each "
                        "priority and above any plan could place, and print the plan's gap to it (stats.tier_bound, "
                        "stats.tier_gap; outside the time limit: about 10 s more at 1,000 nodes, 5 s of it solving)")
    add_progress_option(parser)
    parser.set_defaults(handler=run, decides=True)


def snapshot_source(arg: str | None) -> str | Path:
    if arg:
        return arg
    if not DEFAULT_SNAPSHOT.is_file():
        raise InputError(
            str(DEFAULT_SNAPSHOT),
            "",
            "no SNAPSHOT given and the bundled example is not there (installed without the source "
            "tree?); pass a snapshot file, or - to read stdin",
        )
    return DEFAULT_SNAPSHOT


def run(args: argparse.Namespace) -> int:
    with progress_lines(args):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from adapters.output import dump_plan

    config = config_from_args(args, time_limit_seconds=args.time_limit, workers=args.workers, seed=args.seed)
    # The snapshot, and what the decision reads of it, live until the command is done: no
    # collection walks them again (``paused_gc`` puts what each stage made out of sight too).
    keep_for_good()
    loaded = read_snapshot_or_cluster(args, config, snapshot_source(args.snapshot))
    loaded = loaded.require_nodes_or_pods()
    note(loaded.note())
    note(missing_nodes(loaded.snapshot))
    if not args.all_pending:
        note(others_pending(loaded.snapshot, config.scheduler_name))
    checkpoint()  # each of these walks every pod once
    loaded.decidable(config.scheduler_name, all_pending=args.all_pending)
    checkpoint()
    snapshot = loaded.snapshot
    stage(f"read {len(snapshot.nodes):,} node(s) and {len(snapshot.pods):,} pod(s); preparing the decision")

    from solver import ScheduleRequest, decide

    # One decision: validated inside (whichever engine made the plan), greedy's plan if the
    # model's cannot be used; the decision says whether the plan passed.
    # No cyclic collection while deciding either: the context alone is an info per pod, running
    # ones included, and each collection walked all made so far (a fifth of the context's CPU
    # on the realistic 1k dump); one decision makes no garbage that outlives it by much.
    with paused_gc():
        decision = decide(ScheduleRequest(loaded.snapshot, config, engine=args.engine, all_pending=args.all_pending))
    if not decision.validated:
        print(
            f"cpsat-scheduler: refusing to print a plan that fails validation ({len(decision.problems)} "
            "violation(s)); this is a bug, please report it with the snapshot:",
            file=sys.stderr,
        )
        for line in decision.problems:
            print(f"  {line}", file=sys.stderr)
        return 1
    plan = decision.plan
    if args.bound:
        stage("proving how many pods of each priority any plan could place (--bound)")
        plan = with_tier_bound(plan, snapshot)
    write_result(dump_plan(plan, args.output))
    return 0


def with_tier_bound(plan: Plan, snapshot: ClusterSnapshot) -> Plan:
    """``plan`` with ``stats.tier_bound`` and ``stats.tier_gap`` over the pods it decided."""
    from adapters.bench.bounds import priority
    from adapters.bench.tier_bounds import tier_bound

    decided = {a.pod for a in plan.assignments} | {u.pod for u in plan.unschedulable}
    pods = snapshot.pods_among(decided)
    bound = tier_bound(snapshot, pods).at_or_above
    of = {p.key: priority(p) for p in pods}
    placed = [of[a.pod] for a in plan.assignments if a.pod in of]
    tiers = sorted(bound, reverse=True)
    stats = plan.stats.model_copy(update={
        "tier_bound": {str(t): bound[t] for t in tiers},
        "tier_gap": {str(t): bound[t] - sum(1 for p in placed if p >= t) for t in tiers},
    })
    return plan.model_copy(update={"stats": stats})

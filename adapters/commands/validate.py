"""``cpsat-scheduler validate``: check a plan against a snapshot with the independent validator.

Exit 0 and one ``OK`` line when every hard rule holds; exit 1 and one line per violation
otherwise; exit 2 when the snapshot, the plan or the config cannot be read.
"""

from __future__ import annotations

import argparse
import sys

from adapters.cluster_read import add_cluster_options, cluster_requested, read_cluster
from adapters.gc_control import keep_for_good

from . import add_config_options, config_from_args, missing_nodes, note


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "validate",
        help="check that a plan respects every hard scheduling rule of a snapshot",
        description="Replay PLAN (as printed by `schedule --output json|yaml`) on SNAPSHOT and "
        "report every violated hard rule, one per line. Exit 0 if valid, 1 if not, 2 on bad input.",
    )
    parser.add_argument("snapshot", metavar="SNAPSHOT", help="snapshot file, or - for stdin (with "
                        "--kubeconfig/--context/--in-cluster: left out, the cluster is read instead)")
    parser.add_argument("plan", metavar="PLAN", nargs="?", help="plan file (JSON or YAML), or - for stdin")
    add_cluster_options(parser)
    add_config_options(parser)
    parser.set_defaults(handler=run, usage_error=lambda message: _usage_error(parser, message))


def _usage_error(parser: argparse.ArgumentParser, message: str) -> int:
    parser.print_usage(sys.stderr)
    print(f"{parser.prog}: error: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    from adapters.snapshot_io import load_plan, read_snapshot
    from models import InputError

    config = config_from_args(args)
    max_bytes = config.limits.max_snapshot_bytes
    keep_for_good()  # the snapshot lives until the command is done: no collection walks it again
    if cluster_requested(args, snapshot_given=args.plan is not None):
        if args.plan is not None:
            raise InputError(args.snapshot, "", "give a SNAPSHOT or --kubeconfig/--context/--in-cluster, not both")
        args.plan = args.snapshot          # the one positional is the plan
        cluster = read_cluster(args)
        loaded = read_snapshot(cluster.open(), label=cluster.label, max_bytes=max_bytes)
    else:
        if args.plan is None:        # as argparse says it (PLAN is optional only with a cluster)
            return int(args.usage_error("the following arguments are required: PLAN"))
        if args.snapshot == "-" and args.plan == "-":
            raise InputError("", "PLAN", "only one of SNAPSHOT and PLAN can be read from stdin")
        loaded = read_snapshot(args.snapshot, max_bytes=max_bytes)
    loaded = loaded.require_nodes_or_pods()
    note(loaded.note())
    note(missing_nodes(loaded.snapshot))
    # Pending pods and no Node: what `schedule` refuses to decide is not replayed either.
    loaded.decidable(config.scheduler_name, all_pending=args.all_pending)

    from solver import validate
    from solver.limits import check_snapshot

    # What `schedule` would refuse to decide is not replayed either.
    check_snapshot(loaded.snapshot, config, all_pending=args.all_pending)
    plan = load_plan(args.plan, max_bytes=max_bytes)
    _refuse_unknown_names(plan, loaded.snapshot)
    violations = validate(loaded.snapshot, plan, config, all_pending=args.all_pending)
    if violations:
        for line in violations:
            print(line)
        return 1
    print(
        f"OK: plan is valid ({len(plan.assignments)} assignment(s), {len(plan.preemptions)} "
        f"preemption(s), {len(plan.unschedulable)} unschedulable)"
    )
    return 0


def _refuse_unknown_names(plan, snapshot) -> None:
    """A plan that names a pod or node the snapshot does not have was made for another snapshot:
    one clear error (exit 2), not a cascade of violations (nor a pass: a gated pod the snapshot
    lacks broke no rule)."""
    from models import InputError

    pods = snapshot.pod_by_key
    nodes = {n.metadata.name for n in snapshot.nodes}

    def unknown(field: str, what: str, name: str) -> InputError:
        return InputError("plan", field, f'{what} "{name}" is not in the snapshot (a plan for another snapshot?)')

    entries = (("assignments", plan.assignments), ("preemptions", plan.preemptions),
               ("unschedulable", plan.unschedulable), ("nominations", plan.nominations), ("gated", plan.gated),
               ("volume_bindings", plan.volume_bindings))
    for field, items in entries:
        for i, entry in enumerate(items):
            if entry.pod not in pods:
                raise unknown(f"{field}[{i}].pod", "pod", entry.pod)
            node = getattr(entry, "node", None)
            if node is not None and node not in nodes:
                raise unknown(f"{field}[{i}].node", "node", node)
            preemptor = getattr(entry, "preemptor", None)
            if preemptor is not None and preemptor not in pods:
                raise unknown(f"{field}[{i}].preemptor", "pod", preemptor)
    for i, allocation in enumerate(plan.allocations):
        for j, pod in enumerate(allocation.pods):
            if pod not in pods:
                raise unknown(f"allocations[{i}].pods[{j}]", "pod", pod)

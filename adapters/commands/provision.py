"""``cpsat-scheduler provision``: the cheapest set of nodes to add so that every pending pod
the best plan leaves out is placed, chosen exactly over node shapes (the cluster's own, or
``--shapes FILE``), beside first-fit-decreasing's answer. Nothing is written to the cluster."""

from __future__ import annotations

import argparse
import json
from collections import Counter

from models import InputError

from adapters.interrupts import write_result

from . import note, progress_lines
from .operator_input import add_input_options, read_input


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "provision",
        help="the cheapest nodes to add so that every pending pod is placed (exact, beside first-fit-decreasing)",
        description="For the pending pods the best plan leaves out, choose the cheapest set of nodes to add "
        "(total cost, then fewest nodes) over node shapes taken from the cluster's nodes or from --shapes "
        "FILE, and print the nodes and where each pod would go (the engine's validated plan on the "
        "cluster with them). Read-only. Exit 2 on a shape file that does not parse.",
    )
    add_input_options(parser)
    parser.add_argument("--shapes", metavar="FILE", help="node shapes, YAML or JSON: a list (or shapes: list) of "
                        "name, labels, taints, allocatable, cost, maxCount, zones, devices")
    parser.set_defaults(handler=run, decides=True)


def run(args: argparse.Namespace) -> int:
    with progress_lines(args):
        return _run(args)


def read_shapes(path: str, default_max: int, nodes=()):
    """The shapes of ``path``; ``nodes``, the cluster's, give what an entry leaves out that every
    node has (os and arch labels, disk: ``solver.provision.defaults``)."""
    from adapters.snapshot_io import read_documents
    from solver.provision import parse_shapes

    documents = read_documents(path)
    if len(documents) != 1:
        raise InputError(path, "", f"expected one YAML/JSON document of shapes, found {len(documents)}")
    entries = documents[0]
    if isinstance(entries, dict) and "shapes" in entries:
        entries = entries["shapes"]
    try:
        return parse_shapes(entries, default_max=default_max, nodes=nodes)
    except InputError as exc:
        raise InputError(f"{path}: {exc.obj}", exc.field, exc.problem) from None


def _run(args: argparse.Namespace) -> int:
    snapshot, config = read_input(args)
    pending = len(snapshot.pending_pods(config.scheduler_name, all_pending=args.all_pending))
    shapes = read_shapes(args.shapes, max(1, pending), snapshot.nodes) if args.shapes else None
    from solver.provision import provision

    result = provision(snapshot, config, shapes, all_pending=args.all_pending)
    for line in result.notes:
        note(line)
    if args.output == "json":
        write_result(json.dumps(result.to_json(), indent=2) + "\n")
    else:
        write_result(table(result))
    return 0


def table(r) -> str:
    if not r.pending:
        return "nothing to provision: the best plan places every pending pod\n"
    proof = "optimal (proven)" if r.proven else (
        f"{r.status}, gap {r.gap:.2%}" if r.gap is not None else r.status)
    if r.nowhere:
        proof += f", for the {r.pending - len(r.nowhere)} of {r.pending} pod(s) it can place"
    lines = [f"ADD {len(r.added)} node(s), cost {r.cost / 1000:g} — {proof}"]
    counts = Counter(a.shape for a in r.added)
    for shape, n in sorted(counts.items()):
        first = next(a for a in r.added if a.shape == shape)
        devices = f", {first.devices} device(s)" if first.devices else ""
        lines.append(f"  {n:>4} x {shape} (cost {first.cost / 1000:g} each{devices})")
    lines.append(f"first-fit-decreasing would add {r.ffd_nodes} node(s), cost {r.ffd_cost / 1000:g}"
                 + (f", and leave {r.ffd_unplaced} pod(s) out" if r.ffd_unplaced else ""))
    if r.placement:
        lines += ["", f"WHERE {len(r.placement)} OF THE {r.pending} LEFT-OUT POD(S) GO"]
        lines += [f"  {pod}  ->  {node}" for pod, node in sorted(r.placement.items())]
    if r.left_out:
        lines += ["", f"STILL LEFT OUT: {len(r.left_out)} (a rule the cost model does not count: spread across "
                  "pods, volume limits, devices not counted exactly; or the engine's queue order, a pod "
                  "before its pending affinity support)"]
        lines += [f"  {pod}: {why}" for pod, why in sorted(r.left_out.items())]
    if r.nowhere:
        lines += ["", f"NOT PLACED ON ANY SHAPE: {len(r.nowhere)}"]
        lines += [f"  {pod}: {why}" for pod, why in sorted(r.nowhere.items())]
    return "\n".join(lines) + "\n"

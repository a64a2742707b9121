"""``cpsat-scheduler what-if``: the same snapshot with changes applied, decided by the same
solver and printed beside today's plan. Nothing is written to the cluster."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from models import InputError
from models.errors import clipped

from adapters.interrupts import write_result

from . import progress_lines
from .operator_input import add_input_options, read_input


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "what-if",
        help="decide the snapshot with changes applied (drain, add nodes, relax a PDB, ...) beside today's plan",
        description="Apply the changes (several may be given) to SNAPSHOT or the cluster, decide both "
        "with the same solver and print them side by side: pods and gangs placed per priority, evictions, "
        "nodes used, and what changed. Read-only. Every name a change gives is read in SNAPSHOT as it was, "
        "so the order of the flags does not matter (--remove-node X --add-nodes 2:X replaces X). Exit 2 "
        "when a change names a node, pod, PodDisruptionBudget, group or namespace that does not exist, or "
        "when two changes cannot both hold (--delete-pdb B with --relax-pdb B=1).",
    )
    add_input_options(parser)
    add = parser.add_argument
    add("--drain", action="append", default=[], metavar="NODE", help="cordon NODE; its workloads come back pending")
    add("--remove-node", action="append", default=[], metavar="NODE", help="NODE is gone (its workloads come back pending)")
    add("--add-nodes", action="append", default=[], metavar="N:LIKE",
        help="add N nodes like node LIKE (labels, taints, allocatable), or like the Node in file @PATH")
    add("--delete-pdb", action="append", default=[], metavar="NS/NAME", help="delete a PodDisruptionBudget")
    add("--relax-pdb", action="append", default=[], metavar="NS/NAME=MAX",
        help="set a PodDisruptionBudget to maxUnavailable MAX (integer, or percentage up to 100%%)")
    add("--priority", action="append", default=[], metavar="TARGET=VALUE",
        help="set the priority of pod NS/NAME, or of every pod of podgroup/NS/NAME")
    add("--remove-pod", action="append", default=[], metavar="NS/NAME", help="delete a pod (running or pending)")
    add("--remove-namespace", action="append", default=[], metavar="NS",
        help="delete a namespace's pods, PodDisruptionBudgets and pod groups")
    # argparse takes a value like "-1:worker-a-1" for an unknown option and prints its usage
    # ("expected one argument"). No option of this command begins with a dash and a digit, so
    # such a token is read as the value it is, and the flag's own check refuses it in one line.
    parser._negative_number_matcher = re.compile(r"^-\d")
    parser.set_defaults(handler=run, decides=True)


def run(args: argparse.Namespace) -> int:
    with progress_lines(args):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    changes = parse_changes(args)
    if not changes:
        raise InputError("", "what-if", "no change given (--drain, --remove-node, --add-nodes, --delete-pdb, "
                         "--relax-pdb, --priority, --remove-pod, --remove-namespace)")
    snapshot, config = read_input(args)
    _refuse_too_many_nodes(args.add_nodes, changes, snapshot, config.limits.max_nodes)
    from solver.whatif import what_if

    result = what_if(snapshot, changes, config, all_pending=args.all_pending)
    if args.output == "json":
        write_result(json.dumps(to_json(result), indent=2) + "\n")
    else:
        write_result(table(result))
    return 0


def _refuse_too_many_nodes(texts: list[str], changes: list, snapshot, max_nodes: int) -> None:
    """The nodes the changed snapshot would have, checked against ``limits.maxNodes`` before one
    is made: it is built node by node before its decision looks at the limit, so a count of a
    billion would run until memory ran out. Nodes ``--remove-node`` takes away are counted off
    (replacing a node of a cluster at the limit is a fair question)."""
    from models.config import LIMITS_HINT
    from solver.whatif import AddNodes, RemoveNode

    nodes = len(snapshot.nodes)
    names = {n.metadata.name for n in snapshot.nodes}
    removed = len({c.node for c in changes if isinstance(c, RemoveNode) and c.node in names})
    added = [c for c in changes if isinstance(c, AddNodes)]  # in the order of the flags
    total = nodes - removed + sum(c.count for c in added)
    if added and total > max_nodes:
        less = f" less {removed} removed" if removed else ""
        raise InputError(texts[-1], "--add-nodes", f"the snapshot's {nodes} nodes{less} and "
                         f"{sum(c.count for c in added)} added make {total}, above limits.maxNodes={max_nodes} "
                         f"({LIMITS_HINT})")


def _key(text: str, flag: str) -> str:
    namespace, _, name = text.partition("/")
    if not namespace or not name or "/" in name:
        raise InputError(text, flag, "expected NAMESPACE/NAME")
    return text


def _split(text: str, flag: str, sep: str, what: str) -> tuple[str, str]:
    head, found, tail = text.rpartition(sep)
    if not found or not head or not tail:
        raise InputError(text, flag, f"expected {what}")
    return head, tail


def parse_changes(args: argparse.Namespace) -> list:
    """The changes, in the order the CHANGES line lists them: removals, then additions, budgets,
    priorities (the outcome does not depend on it: ``solver.whatif.changes``). A flag's text an
    error names is cut to a line's worth (a 5,000-digit count was printed whole)."""
    try:
        return _parse_changes(args)
    except InputError as exc:
        raise InputError(clipped(exc.obj, 300), exc.field, exc.problem) from None  # (a path stays whole)


def _parse_changes(args: argparse.Namespace) -> list:
    from solver import whatif as w

    out: list = [w.Drain(n) for n in args.drain] + [w.RemoveNode(n) for n in args.remove_node]
    out += [w.RemovePod(_key(k, "--remove-pod")) for k in args.remove_pod]
    out += [w.RemoveNamespace(ns) for ns in args.remove_namespace]
    out += [_add_nodes(text) for text in args.add_nodes]
    out += [w.DeletePdb(_key(k, "--delete-pdb")) for k in args.delete_pdb]
    for text in args.relax_pdb:
        key, value = _split(text, "--relax-pdb", "=", "NS/NAME=MAX_UNAVAILABLE")
        out.append(w.RelaxPdb(_key(key, "--relax-pdb"), _int_or_percent(value, text)))
    for text in args.priority:
        target, value = _split(text, "--priority", "=", "POD_OR_GROUP=VALUE")
        number = int(value) if _digits(value.removeprefix("-")) else None
        if number is None:
            raise InputError(text, "--priority", f'"{clipped(value)}" is not an integer in a pod priority\'s range')
        if not -(2**31) <= number <= 2_000_001_000:
            raise InputError(text, "--priority", f"{number} is outside a pod priority's range")
        out.append(w.SetPriority(target, number))
    return out


def _digits(text: str) -> bool:
    """``[0-9]+`` of at most 12 digits: ``str.isdigit`` also takes "²" and other scripts' digits,
    which ``int`` then refuses or the API server would, and past 4,300 digits ``int`` refuses
    them all (no count, budget or priority needs more than 12)."""
    return text.isascii() and text.isdigit() and len(text) <= 12


def _int_or_percent(value: str, text: str) -> int | str:
    from models.objects import budget_amount  # (here: the models load only when a command runs)

    try:
        return budget_amount(value)  # the budget's own rule
    except ValueError as exc:
        raise InputError(text, "--relax-pdb", str(exc)) from None


def _add_nodes(text: str):
    from solver.whatif import AddNodes

    count_text, sep, like = text.partition(":")
    if not sep or not _digits(count_text) or int(count_text) < 1 or not like:
        raise InputError(text, "--add-nodes", "expected N:LIKE_NODE or N:@FILE with N >= 1")
    if not like.startswith("@"):
        return AddNodes(int(count_text), like)
    from adapters.snapshot_io import read_snapshot

    path = like[1:]
    if not Path(path).is_file():
        raise InputError(path, "--add-nodes", "no such file")
    try:
        nodes = read_snapshot(path).snapshot.nodes
    except InputError as exc:  # named after an object of the file alone: say which flag read it
        said = str(exc).removeprefix(f"{path}: ")  # (a whole-file error names the file already)
        raise InputError(path, "--add-nodes", f"does not read as one Node: {said}") from None
    if len(nodes) != 1:
        raise InputError(path, "--add-nodes", f"expected exactly one Node in the file, found {len(nodes)}")
    return AddNodes(int(count_text), nodes[0].metadata.name, shape=nodes[0])


# -- output ---------------------------------------------------------------------------------


def to_json(result) -> dict[str, Any]:
    return {
        "changes": [c.describe() for c in result.changes],
        "today": result.today.to_json(),
        "whatIf": result.changed.to_json(),
        "difference": result.difference.to_json(),
    }


def table(result) -> str:
    today, changed, diff = result.today, result.changed, result.difference
    rows: list[tuple[str, str, str]] = [("", "TODAY", "WHAT-IF")]
    rows.append(("pods placed", f"{len(today.placed)}/{len(today.placed) + len(today.left_out)}",
                 f"{len(changed.placed)}/{len(changed.placed) + len(changed.left_out)}"))
    for priority in sorted(set(today.placed_by_priority) | set(changed.placed_by_priority), reverse=True):
        a = today.placed_by_priority.get(priority, (0, 0))
        b = changed.placed_by_priority.get(priority, (0, 0))
        rows.append((f"  priority {priority}", f"{a[0]}/{a[1]}", f"{b[0]}/{b[1]}"))
    rows.append(("gangs placed", f"{sum(today.gangs.values())}/{len(today.gangs)}",
                 f"{sum(changed.gangs.values())}/{len(changed.gangs)}"))
    before, after = today.gangs_by_priority(), changed.gangs_by_priority()
    if len(set(before) | set(after)) > 1:
        for priority in sorted(set(before) | set(after), reverse=True):
            a, b = before.get(priority, (0, 0)), after.get(priority, (0, 0))
            rows.append((f"  priority {priority}", f"{a[0]}/{a[1]}", f"{b[0]}/{b[1]}"))
    rows.append(("evictions", str(len(today.evicted)), str(len(changed.evicted))))
    rows.append(("nodes used", f"{today.nodes_used}/{today.nodes}", f"{changed.nodes_used}/{changed.nodes}"))
    rows.append(("solver status", today.status, changed.status))
    width = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = ["CHANGES: " + "; ".join(c.describe() for c in result.changes), ""]
    lines += [f"{r[0]:<{width[0]}}  {r[1]:>{width[1]}}  {r[2]:>{width[2]}}".rstrip() for r in rows]
    lines += ["", "WHAT CHANGED"]
    lines += _changed_lines(diff, changed)
    return "\n".join(lines) + "\n"


def _changed_lines(diff, changed) -> list[str]:
    out = [f"  placed now:   {pod} -> {node}" for pod, node in sorted(diff.newly_placed.items())]
    out += [f"  left out now: {pod}: {changed.left_out.get(pod, '')}" for pod in sorted(diff.newly_left_out)]
    out += [f"  moved:        {pod}: {a} -> {b}" for pod, (a, b) in sorted(diff.moved.items())]
    out += [f"  evicted now:  {pod} (from {node})" for pod, node in sorted(diff.evictions_added.items())]
    out += [f"  no longer evicted: {pod} (on {node})" for pod, node in sorted(diff.evictions_dropped.items())]
    out += [f"  removed:      {pod}" for pod in diff.removed]
    return out or ["  nothing: the same pods are placed on the same nodes with the same evictions"]

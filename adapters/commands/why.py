"""``cpsat-scheduler why TARGET``: why the best plan leaves a pending pod or gang out —
kube-scheduler's per-node histogram and a minimal set of obstacles the solver proves (relaxing
them all lets it fit; relaxing any fewer does not). Nothing is written to the cluster."""

from __future__ import annotations

import argparse
import json
from collections import Counter

from adapters.interrupts import write_result

from . import progress_lines
from .operator_input import add_input_options, read_input


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "why",
        help="why a pending pod or gang is left out: kube-scheduler's reasons and a minimal set of obstacles",
        description="Decide SNAPSHOT (or the cluster) as `schedule` does; for TARGET — a pod NS/NAME, "
        "podgroup/NS/NAME, workload/NS/NAME, or `all` for every pod and gang the plan leaves out — print "
        "kube-scheduler's per-node reasons and a minimal set of obstacles: relaxing them all lets it fit, "
        "relaxing any fewer does not. Read-only. Exit 2 when TARGET names nothing pending.",
    )
    parser.add_argument("target", metavar="TARGET", help="NS/NAME, podgroup/NS/NAME, workload/NS/NAME or all")
    add_input_options(parser)
    parser.set_defaults(handler=run, decides=True)


def run(args: argparse.Namespace) -> int:
    with progress_lines(args):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    snapshot, config = read_input(args)
    from solver.explain import explain

    target = None if args.target == "all" else args.target
    found = explain(snapshot, config, target, all_pending=args.all_pending)
    if args.output == "json":
        write_result(json.dumps([e.to_json() for e in found], indent=2) + "\n")
    else:
        write_result("\n".join(text(e) for e in found) if found else "every pending pod is placed\n")
    return 0


def text(e) -> str:
    unit = e.unit
    what = "pod" if unit.kind == "pod" else f"gang, {len(unit.pods)} pending pod(s)"
    if not e.reasons:
        where = ", ".join(f"{k} -> {n}" for k, n in sorted(e.placed.items()))
        return f"{unit.name} ({what}): placed by the best plan: {where}\n"
    lines = [f"{unit.name} ({what}): left out" + (f" ({len(e.placed)} placed)" if e.placed else "")]
    for message, count in Counter(e.reasons.values()).most_common():
        lines.append(f"  kube-scheduler{f' ({count} pods)' if count > 1 else ''}: {message}")
    if e.fits_as_is:
        lines.append("  no obstacle: it fits the cluster as the plan leaves it on its own; the plan gave its "
                     "room to pods of higher priority or to a better joint placement")
    elif e.obstacles is None:
        lines.append("  it fits nowhere even with every obstacle relaxed (every node's room, taints, "
                     "cordons, its own rules):")
        lines += [f"    {b}" for b in e.beyond] or ["    (a rule not modelled as an obstacle: pods count, volumes, devices)"]
    else:
        n = len(e.obstacles)
        lines.append(f"  minimal obstacles ({n}): relaxing {'it' if n == 1 else 'all ' + str(n)} makes it fit; "
                     f"relaxing {'nothing' if n == 1 else 'any fewer'} does not:")
        for i, o in enumerate(e.obstacles, 1):
            lines.append(f"    {i}. {o.text}")
            lines.append(f"       objects: {', '.join(o.objects[:6])}{' ...' if len(o.objects) > 6 else ''}; "
                         f"fields: {', '.join(o.fields)}")
    if e.claims_not_carried:
        lines.append("  note: the checks see the plan's pods bound but not the volumes it binds them; "
                     "a pod short only of those may show as fitting")
    proof = "yes" if e.proven else "no (a feasibility check ran out of time: the set may not be minimal)"
    lines.append(f"  proven: {proof} ({e.checks} feasibility check(s), {e.seconds:.2f}s)")
    return "\n".join(lines) + "\n"

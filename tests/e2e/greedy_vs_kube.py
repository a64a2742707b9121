"""Greedy against kube-scheduler, pod by pod, on one run of the peer bench (issue 38): are the
pods taken in the same order, how many land on the same node, and is the first difference in
queue order an exact tie of kube-scheduler's scores (which it breaks at random)?

    python -m tests.e2e.kube_peer --nodes 20 --seed 1089 --no-live --time-limit 1 \\
        --kube-verbosity 10 --workdir DIR --save-snapshot DIR/snap.json --json DIR/report.json
    python -m tests.e2e.greedy_vs_kube DIR

(``--kube-verbosity 3`` is enough for the order; 10 adds the scores.) Greedy is what
``cpsat-scheduler schedule DIR/snap.json --engine greedy --scheduler-name kube-peer`` decides.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any, Optional

from tests.e2e.kube_peer import _config, _snapshot, attempt_order
from tests.e2e.peer_scenario import PROFILE, Scenario

# kube-scheduler's line (at --v=10) with a node's weighted total for a pod
_FINAL = re.compile(r'"Calculated node\'s final score for pod" pod="([^"]+)" node="([^"]+)" score=(\d+)')


def final_scores(log: str, pod: str) -> dict[str, int]:
    """Each node's total for ``pod`` at its first scoring in the log (empty: not scored there)."""
    out: dict[str, int] = {}
    for found in _FINAL.finditer(log):
        if found.group(1) == pod:
            if found.group(2) in out:
                break                       # a later attempt of the same pod
            out[found.group(2)] = int(found.group(3))
    return out


def tiers(placed: dict[str, str], priority: dict[str, int]) -> str:
    count: dict[int, int] = {}
    for k in placed:
        count[priority[k]] = count.get(priority[k], 0) + 1
    return " / ".join(str(count.get(t, 0)) for t in sorted(set(priority.values()), reverse=True))


def compare(workdir: Path) -> list[str]:
    from solver import ScheduleRequest, decide
    from solver.context import build_context

    items: list[dict[str, Any]] = json.loads((workdir / "snap.json").read_text())["items"]
    kube: dict[str, Any] = json.loads((workdir / "report.json").read_text())["outcomes"][0]
    log = next(workdir.glob("kube-scheduler-*.log")).read_text(errors="replace")
    snapshot = _snapshot(Scenario("compare", []), items)
    config = _config(1.0)
    plan = decide(ScheduleRequest(snapshot, config, engine="greedy")).plan
    greedy = plan.assignment_map()
    ours = [p.key for p in build_context(snapshot, config).window]
    priority = {p.key: p.priority for p in build_context(snapshot, config).window}
    tried = attempt_order(log)
    same = sum(1 for k, n in kube["placed"].items() if greedy.get(k) == n)
    lines = [
        f"kube-scheduler placed per tier {tiers(kube['placed'], priority)} ({len(kube['placed'])}), "
        f"{len(kube['evicted'])} evicted",
        f"greedy         placed per tier {tiers(greedy, priority)} ({len(greedy)}), {len(plan.preemptions)} evicted",
        f"same node: {same} of kube-scheduler's {len(kube['placed'])} placements",
        f"queue order: {sum(a == b for a, b in zip(tried, ours))} of {len(ours)} positions agree"
        + ("" if tried else " (no attempts in the log: --kube-verbosity 3 or more)"),
    ]
    first: Optional[str] = next((k for k in ours if kube["placed"].get(k) != greedy.get(k)), None)
    if first is not None:
        lines.append(f"first difference, position {ours.index(first)}: {first} kube-scheduler "
                     f"{kube['placed'].get(first, '-')}, greedy {greedy.get(first, '-')}")
        scores = final_scores(log, first)
        if scores:
            best = max(scores.values())
            tied = sorted(n for n, s in scores.items() if s == best)
            lines.append(f"  kube-scheduler's best total {best} on {', '.join(tied)}; greedy's node "
                         f"{scores.get(greedy.get(first, ''), '-')}")
    return lines


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.e2e.greedy_vs_kube", description=__doc__.split("\n\n")[0])
    parser.add_argument("workdir", help=f"a peer bench run's --workdir (snap.json, report.json, its log; profile {PROFILE})")
    args = parser.parse_args(argv)
    print("\n".join(compare(Path(args.workdir))))
    return 0


if __name__ == "__main__":
    sys.exit(main())

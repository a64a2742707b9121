"""What one live window costs the scheduling loop, apart from the API server and the threads
around it: a `ClusterCache` fed directly (no HTTP), `--bound` pods running on `--nodes` nodes,
then window after window of `--window` new pods taken through the loop's steps — snapshot,
scheduleOne's decision, the validator's replay, assuming the plan, the watch confirming the
binds, and as many running pods leaving — timed per step. The decision is one `solver.decide`
call, as in the live loop: it validates its plan itself ("decide and check").

    python -m adapters.live.window_cost [--nodes 500] [--bound 3000] [--window 4] [--windows 200]

The live benchmark (`python -m adapters.bench.live`) measures the whole scheduler process;
this isolates the part that grows with the cluster, so a change to the snapshot, the solver's
kept state or the validator shows here first. The first 20 windows are not counted (warm-up).
The cyclic collector is set as the live scheduler sets it (``scheduler.InterpreterTuning``).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, Optional

import solver
from models import SchedulerConfig

from adapters.synthetic_objects import node_object, pod_object
from .cache import BINDING, ClusterCache
from .api_client import NODES, PODS, WATCHED
from .scheduler import InterpreterTuning, with_hard_budgets

WARM_UP = 20
PHASES = ("snapshot", "decide and check", "assume and confirm")


def _pod(name: str, i: int, rv: int, node: Optional[str] = None) -> dict[str, Any]:
    obj = pod_object(name, i, "bench", "cpsat-scheduler")
    obj["metadata"]["resourceVersion"] = str(rv)
    if node:
        obj["spec"]["nodeName"] = node
    return obj


def measure(nodes: int, bound: int, window: int, windows: int) -> dict[str, float]:
    """Milliseconds per window for each step, after the warm-up; and under ``contexts``, how
    many contexts each window built (the decision's and the validator's replays)."""
    cache = ClusterCache()
    for resource in WATCHED:
        if resource not in (NODES, PODS):
            cache.replace(resource, [])
    cache.replace(NODES, [node_object(f"node-{i}", i) for i in range(nodes)])
    cache.replace(PODS, [_pod(f"run-{i}", i, i + 1, f"node-{i % nodes}") for i in range(bound)])
    running = [f"run-{i}" for i in range(bound)]  # oldest first
    config = with_hard_budgets(SchedulerConfig())
    memory = solver.SolverMemory()  # the loop's, as the live scheduler keeps one
    rv, made = bound + 1, 0
    contexts = 0
    spent = dict.fromkeys(PHASES, 0.0)
    for w in range(windows + WARM_UP):
        keys = []
        for _ in range(window):
            rv += 1
            cache.apply(PODS, "ADDED", _pod(f"new-{made}", made, rv))
            keys.append(f"bench/new-{made}")
            made += 1
        t0 = time.perf_counter()
        snapshot = cache.snapshot(keys)
        t1 = time.perf_counter()
        built = memory.contexts_built
        decision = solver.decide(solver.ScheduleRequest(snapshot, config, engine="greedy", window_keys=tuple(keys),
                                                        memory=memory))
        if not decision.validated:
            raise SystemExit(f"window {w}: the plan failed validation: {decision.problems[0]}")
        plan = decision.plan
        t3 = time.perf_counter()
        for a in plan.assignments:
            cache.assume(a.pod, a.node, state=BINDING, now=0.0)
        for a in plan.assignments:  # the watch shows each bind
            rv += 1
            name = a.pod.split("/", 1)[1]
            cache.apply(PODS, "MODIFIED", _pod(name, int(name.rsplit("-", 1)[1]), rv, a.node))
            running.append(name)
        for name in running[:len(plan.assignments)]:  # as many leave: the cluster keeps its size
            cache.apply(PODS, "DELETED", {"metadata": {"name": name, "namespace": "bench"}})
        del running[:len(plan.assignments)]
        t4 = time.perf_counter()
        if w >= WARM_UP:
            for phase, took in zip(PHASES, (t1 - t0, t3 - t1, t4 - t3)):
                spent[phase] += took
            contexts += memory.contexts_built - built
    return {**{phase: 1000 * total / windows for phase, total in spent.items()}, "contexts": contexts / windows}


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m adapters.live.window_cost",
                                     description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--bound", type=int, default=3000, help="pods running before the first window")
    parser.add_argument("--window", type=int, default=4, help="new pods per window")
    parser.add_argument("--windows", type=int, default=200, help="windows timed (after %d to warm up)" % WARM_UP)
    args = parser.parse_args(argv)
    if min(args.nodes, args.window, args.windows) < 1 or args.bound < 0:
        parser.error("--nodes, --window and --windows must be at least 1, --bound at least 0")
    tuning = InterpreterTuning()  # the collector's settings of a running scheduler
    tuning.acquire(None, quiet_collector=True)
    try:
        per = measure(args.nodes, args.bound, args.window, args.windows)
    finally:
        tuning.release()
    contexts = per.pop("contexts")
    steps = ", ".join(f"{phase} {ms:.2f}" for phase, ms in per.items())
    print(f"{args.nodes} nodes, {args.bound} running pods, windows of {args.window}: ms per window: {steps}; "
          f"total {sum(per.values()):.2f}; contexts built per window {contexts:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

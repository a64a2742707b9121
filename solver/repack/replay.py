"""The independent check of a re-packing plan: replay its steps one at a time, then the end.

It reads only the snapshot, the config and the plan's steps (pod, from, to) — nothing of the
model or of the ordering — and rebuilds the cluster itself:

1. each step: the pod runs on ``from`` at that moment and may move at all (``movable``); once it
   has left, its replacement passes kube-scheduler's filters on ``to`` in the cluster as it is
   then (room, host ports, inter-pod (anti-)affinity, topology spread, and the node's static
   rules);
2. PodDisruptionBudgets: a budget's pods are evicted at most its disruptions allowed times in
   the whole plan; ``--max-moves`` bounds the evictions;
3. the end: the final state passes the plan validator (``solver.validate``: the window rules of
   DESIGN.md, with the moved pods as the window), and every node the plan calls freed runs no
   workload pod.

Each problem is one line; an empty list means the plan is safe to print.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional, cast

from models.config import SchedulerConfig
from models.plan import Assignment, Plan, PlanStats
from models.snapshot import ClusterSnapshot

from ..context import build_context
from ..memory import SolverMemory
from ..info import PodInfo
from ..disruption import allowances, eviction_budgets
from ..filtering import Cycle, StaticFilters
from ..validate import validate
from . import availability
from .movable import verdict as movable_verdict
from .problem import unbind, with_window


@dataclass(frozen=True)
class PlannedStep:
    """A step as printed: pod ``ns/name`` leaves node ``source`` for node ``target``."""

    pod: str
    source: str
    target: str


def replay(
    snapshot: ClusterSnapshot,
    config: SchedulerConfig,
    steps: list[PlannedStep],
    *,
    freed: Sequence[str] = (),
    max_moves: Optional[int] = None,
    memory: Optional[SolverMemory] = None,
) -> list[str]:
    problems: list[str] = []
    ctx = build_context(with_window(snapshot, set(), config.scheduler_name), config, memory=memory)
    state, index, nodes = ctx.state, ctx.state.node_index, ctx.nodes
    moving = sorted({s.pod for s in steps})
    unbound: dict[str, PodInfo] = {}
    ns_labels = snapshot.namespace_labels
    for key in moving:
        pod = snapshot.pod_by_key.get(key)
        if pod is None or ctx.pod(key) is None:
            problems.append(f"plan: {key} is not a running pod of the snapshot")
            continue
        verdict = movable_verdict(pod, snapshot, config.repack)
        if not verdict.movable:
            problems.append(f"plan: {key} may not move: {verdict.describe()}")
        unbound[key] = PodInfo.of(unbind(pod, config.scheduler_name, verdict), ns_labels.get(pod.metadata.namespace, {}))
    if problems:
        return problems
    static = StaticFilters(nodes, list(unbound.values()))
    in_state = {key: cast(PodInfo, ctx.pod(key)) for key in moving}  # each checked above

    for number, step in enumerate(steps, 1):
        where = f"step {number}: {step.pod} {step.source} -> {step.target}"
        source, target = index.get(step.source), index.get(step.target)
        if source is None or target is None:
            problems.append(f"{where}: no node {step.source if source is None else step.target} in the snapshot")
            continue
        at = state.where.get(step.pod)
        if at != source:
            problems.append(f"{where}: the pod runs on {nodes[at].name if at is not None else 'no node'} at this step")
            continue
        state.remove(in_state[step.pod])
        status = Cycle(unbound[step.pod], state, static, version=config.kubernetes_version).status(nodes[target])
        if not status.ok:
            problems.append(f"{where}: {status.plugin}: {'; '.join(status.reasons)}")
        state.add(unbound[step.pod], target)
        in_state[step.pod] = unbound[step.pod]

    evicted = Counter(s.pod for s in steps)
    if max_moves is not None and len(steps) > max_moves:
        problems.append(f"moves: {len(steps)} evictions exceed --max-moves {max_moves}")
    # Read as the Eviction API reads them, as the planner's budgets are (``PdbBudgets.of``).
    counts: Counter[str] = Counter()
    for key, times in evicted.items():
        for pdb in eviction_budgets(snapshot.pod_by_key[key], snapshot.pdbs):
            counts[pdb.key] += times
    touched = [pdb for pdb in snapshot.pdbs if counts[pdb.key]]
    for pdb, allowed in zip(touched, allowances(touched, snapshot.pods)):
        count = counts[pdb.key]
        if count > allowed:
            problems.append(
                f"pdb: PodDisruptionBudget {pdb.key} allows {allowed} disruption(s) but the plan evicts its pods {count} time(s)"
            )

    for name in freed:
        n = index.get(name)
        if n is None:
            problems.append(f"freed: no node {name} in the snapshot")
            continue
        left = sorted(key for key, pod in state.pods_on[n].items()
                      if movable_verdict(snapshot.pod_by_key.get(key, pod.pod), snapshot, config.repack).workload)
        if left:
            problems.append(f"freed: node {name} still runs {', '.join(left[:5])}")

    if moving:
        movable = [
            (cast(PodInfo, ctx.pod(pod.key)), index[pod.spec.node_name], state.where[pod.key])
            for pod in snapshot.pods
            if pod.key in state.where and pod.spec.node_name in index and ctx.pod(pod.key) is not None
            and movable_verdict(pod, snapshot, config.repack).movable
        ]
        problems += availability.crowding(movable)

    if not problems and moving:
        final = {key: nodes[state.where[key]].name for key in moving}
        moved = {key for key, name in final.items() if name != snapshot.pod_by_key[key].spec.node_name}
        plan = Plan(
            assignments=tuple(Assignment(pod=key, node=final[key]) for key in sorted(moved)),
            stats=PlanStats(engine="repack", status="replay"),
        )
        for line in validate(with_window(snapshot, moved, config.scheduler_name), plan, config, memory=memory):
            problems.append(f"final state: {line}")
    return problems

"""DefaultPreemption for the greedy path (kube-scheduler's PostFilter, SEMANTICS.md §6).

When a pod fits nowhere, look at the nodes where removing pods could help (status
Unschedulable, not UnschedulableAndUnresolvable), find on each the smallest set of
lower-priority victims (remove them all, then reprieve the most important back one by one,
PodDisruptionBudget-violating ones first), and pick the node by kube-scheduler's criteria:
fewest PDB violations, lowest top victim priority, smallest priority sum, fewest victims,
latest start among the top victims.

The CP-SAT model treats preemption as costed variables instead (``solver/cpsat``); this module
is what the greedy fallback does, so falling back never silently drops preemption.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Optional

from .framework import Code, Status, fit_error_message, reason_histogram, unresolvable
from .info import PodInfo
from .pdb import PdbBudgets
from .predicates import Cycle, StaticFilters
from .state import ClusterState

NAME = "DefaultPreemption"
# The pod's preemptionPolicy is Never.
REASON_NEVER = "not eligible due to preemptionPolicy=Never."
# The node has no pod of lower priority.
REASON_NO_VICTIMS = "No preemption victims found for incoming pod"
# The node was not a candidate (its failure was unresolvable, or it was not tried).
REASON_NOT_HELPFUL = "Preemption is not helpful for scheduling"
# minCandidateNodesPercentage / minCandidateNodesAbsolute.
MIN_CANDIDATE_NODES_PERCENTAGE = 10
MIN_CANDIDATE_NODES_ABSOLUTE = 100
# Offset making every int32 priority non-negative in the priority-sum criterion.
PRIORITY_OFFSET = 2**31
_NOW = datetime.max.replace(tzinfo=timezone.utc)


@dataclass
class PreemptionOutcome:
    node: Optional[int]
    victims: list[PodInfo] = field(default_factory=list)
    pdb_violations: int = 0
    message: Optional[str] = None  # "preemption: ..." when no node was found


@dataclass
class _Candidate:
    node: int
    victims: list[PodInfo]
    pdb_violations: int


def _importance(pod: PodInfo) -> tuple:
    """Sort key: higher priority first, then earlier start (no start time counts as now)."""
    return (-pod.priority, pod.start_time or _NOW)


def _fits(pod: PodInfo, node: int, state: ClusterState, static: StaticFilters, version: str) -> Status:
    return Cycle(pod, state, static, version=version).status(static.nodes[node])


def select_victims(
    pod: PodInfo,
    node: int,
    state: ClusterState,
    static: StaticFilters,
    budgets: PdbBudgets,
    version: str,
    *,
    hard_pdb: bool = False,
    window: frozenset[str] = frozenset(),
) -> tuple[Optional[_Candidate], Status]:
    """The minimal victim set on one node (or why the node cannot be made to fit).

    With ``hard_pdb`` (config ``preemption.pdb: hard``), pods whose eviction would break a
    PodDisruptionBudget are never victims: they are put back before the fit is judged."""
    # Victims are running pods: pods placed earlier in this window are decisions, not victims.
    # A gang member never evicts a running member of its own group (that would undo the gang).
    lower = [
        p
        for p in state.pods_on[node].values()
        if p.priority < pod.priority and p.key not in window and (pod.group is None or p.group != pod.group)
    ]
    if not lower:
        return None, unresolvable(NAME, REASON_NO_VICTIMS)
    for victim in lower:
        state.remove(victim)
    try:
        status = _fits(pod, node, state, static, version)
        if not status.ok:
            return None, status
        lower.sort(key=_importance)
        violating, safe = budgets.split(lower)
        if hard_pdb and violating:
            for keep in violating:
                state.add(keep, node)
            status = _fits(pod, node, state, static, version)
            if not status.ok:
                return None, status
            violating = []
        victims: list[PodInfo] = []
        pdb_violations = 0
        for group, counts_violation in ((violating, True), (safe, False)):
            for candidate in group:
                state.add(candidate, node)
                if _fits(pod, node, state, static, version).ok:
                    continue  # reprieved: it stays
                state.remove(candidate)
                victims.append(candidate)
                pdb_violations += counts_violation
        if violating and safe:
            victims.sort(key=_importance)
        return _Candidate(node, victims, pdb_violations), status
    finally:
        for victim in lower:
            if victim.key in state.where:
                state.remove(victim)
        for victim in lower:
            state.add(victim, node)


def _best(candidates: list[_Candidate]) -> _Candidate:
    def key(c: _Candidate) -> tuple:
        top = max((v.priority for v in c.victims), default=-PRIORITY_OFFSET)
        tops = [v for v in c.victims if v.priority == top]
        earliest = min((v.start_time or _NOW for v in tops), default=_NOW)
        return (
            c.pdb_violations,
            top,
            sum(v.priority + PRIORITY_OFFSET for v in c.victims),
            len(c.victims),
            -earliest.timestamp() if earliest != _NOW else float("inf"),
        )

    return min(candidates, key=key)


def default_preemption(
    pod: PodInfo,
    cycle: Cycle,
    state: ClusterState,
    static: StaticFilters,
    ctx,
    *,
    rng: Optional[random.Random] = None,
    allowed=None,
) -> PreemptionOutcome:
    """Where to place ``pod`` by evicting lower-priority pods, or the ``preemption: ...`` text.

    ``allowed`` (a node mask) keeps out nodes the window's own rules refuse (greedy's spread
    guard): preemption must not break what placement may not."""
    if pod.preempt_never:
        return PreemptionOutcome(None, message=f"preemption: {REASON_NEVER}")
    version = ctx.config.kubernetes_version
    statuses = cycle.statuses()
    n = len(statuses)
    window = frozenset(p.key for p in ctx.window)
    node_status: dict[int, Status] = {}
    # A node with no pod of lower priority has no victims to offer (checked before any dry run).
    no_victims = unresolvable(NAME, REASON_NO_VICTIMS)
    potential = []
    for i, s in enumerate(statuses):
        if s.code != Code.UNSCHEDULABLE or (allowed is not None and not allowed[i]):
            continue
        if any(
            p.priority < pod.priority and p.key not in window and (pod.group is None or p.group != pod.group)
            for p in state.pods_on[i].values()
        ):
            potential.append(i)
        else:
            node_status[i] = no_victims
    candidates: list[_Candidate] = []
    if potential:
        budgets = PdbBudgets.of(ctx)
        wanted = min(len(potential), max(len(potential) * MIN_CANDIDATE_NODES_PERCENTAGE // 100, MIN_CANDIDATE_NODES_ABSOLUTE))
        offset = rng.randrange(len(potential)) if rng is not None else 0
        for i in range(len(potential)):
            node = potential[(offset + i) % len(potential)]
            candidate, status = select_victims(
                pod, node, state, static, budgets, version, hard_pdb=ctx.config.preemption.pdb == "hard", window=window
            )
            node_status[node] = status
            if candidate is not None:
                candidates.append(candidate)
                if len(candidates) >= wanted and any(c.pdb_violations == 0 for c in candidates):
                    break
    if candidates:
        best = _best(candidates)
        return PreemptionOutcome(best.node, best.victims, best.pdb_violations)
    hist = reason_histogram(
        node_status.get(i) or Status(Code.UNRESOLVABLE, (REASON_NOT_HELPFUL,)) for i in range(n)
    )
    return PreemptionOutcome(None, message=f"preemption: {fit_error_message(n, hist)}")

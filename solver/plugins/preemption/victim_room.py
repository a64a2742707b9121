"""Who may preempt whom, and when an eviction is needed.

kube-scheduler places pods one at a time, highest priority first. A pod preempts only when it does
not fit the node as it is at its turn, and then evicts the fewest, lowest-priority pods that make
it fit. Lifted to a window's final state, on each node:

* a pod ``p`` may preempt a running pod ``v`` only if ``p`` outranks ``v`` (strictly higher
  priority), ``p``'s preemptionPolicy is not ``Never``, and ``v`` is not a member of ``p``'s own
  PodGroup (``may_preempt``);
* a victim of priority ``w`` is evicted only if the window pods placed there that outrank it do
  not fit without it — with every lower-priority victim of the plan already gone, since
  kube-scheduler gives up the lowest priorities first. Otherwise its room would go to a pod that
  could not have preempted it (equal or lower priority, or ``Never``), which is what a
  sequential scheduler never does (``needless_victims``; ``encode`` for CP-SAT).

"Do not fit" is read on the node-local rules a victim can be in the way of: every resource the
outranking pods request (the pod count included) and host ports. Where a required
(anti-)affinity term or a topology spread constraint is involved on the node, an eviction may be
needed for reasons this check does not weigh, and it is accepted as needed (both here and in the
model, so the two agree).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Optional

import numpy as np
from ortools.sat.python import cp_model

from ...info import PodInfo
from ..node_ports import filter as node_ports

if TYPE_CHECKING:
    from ...cpsat.model import WindowModel


def why_not(preemptor: PodInfo, victim: PodInfo) -> list[str]:
    """Why ``preemptor`` may not evict ``victim`` at all, one sentence per reason; ``[]`` when it
    may. The rule of who may preempt whom, in one place: a victim has strictly lower priority, the
    preemptor's preemptionPolicy is not Never, and a gang never evicts a member of its own
    PodGroup (that would undo the gang)."""
    reasons = []
    if victim.priority >= preemptor.priority:
        reasons.append(
            f"{victim.key} (priority {victim.priority}) is evicted for {preemptor.key} "
            f"(priority {preemptor.priority}): a victim must have strictly lower priority"
        )
    if preemptor.preempt_never:
        reasons.append(f"{preemptor.key} has preemptionPolicy Never but evicts {victim.key}")
    if victim.group is not None and victim.group == preemptor.group:
        reasons.append(
            f"{victim.key} is evicted for {preemptor.key}, a member of its own PodGroup "
            f"{victim.group}: a gang never preempts itself"
        )
    return reasons


def may_preempt(preemptor: PodInfo, victim: PodInfo) -> bool:
    """Whether ``preemptor`` may evict ``victim`` at all (``why_not`` finds no reason against)."""
    return not why_not(preemptor, victim)


def _beyond_node_local(placed: Iterable[PodInfo], running: Iterable[PodInfo]) -> bool:
    """Whether a placement on the node can hinge on other pods beyond resources and ports: a
    placed pod with required (anti-)affinity or spread, or with claims (a ReadWriteOncePod claim
    or a CSI volume count a victim holds), or a running pod's anti-affinity."""
    return (any(p.affinity or p.anti_affinity or p.spread or p.claims for p in placed)
            or any(q.anti_affinity for q in running))


def _port_blocked(outranking: Iterable[PodInfo], running: Iterable[PodInfo], level: int) -> bool:
    """Whether an outranking pod wants a host port a running pod of priority ≥ ``level`` holds."""
    holders = [q for q in running if q.host_ports and q.priority >= level]
    return any(node_ports.ports_conflict(p.host_ports, q.host_ports) for p in outranking if p.host_ports for q in holders)


def needless_victims(
    alloc: np.ndarray,
    used_before: np.ndarray,
    running: Sequence[PodInfo],
    placed: Sequence[PodInfo],
    victims: Sequence[PodInfo],
    vector,
    preemptor_priority: Optional[Mapping[str, int]] = None,
) -> list[tuple[PodInfo, list[PodInfo]]]:
    """On one node, the victims no outranking pod needs, each with the placed pods that use the
    room it frees (those that may not preempt it).

    ``alloc``/``used_before``: the node's allocatable and what its running pods use before the
    plan; ``running``: those pods (victims included); ``placed``: the window pods the plan puts
    there; ``victims``: the pods the plan evicts there; ``vector``: a pod's request vector.

    The outranking pods of a level are judged with the lower victims gone, except a lower victim
    whose preemptor (``preemptor_priority``: victim key -> its preemptor's priority) does not
    outrank the level: that preemptor comes after them in the queue, so they arrived with the
    victim still there. kube-scheduler plans so when a PodDisruptionBudget steers a preemption:
    a pod evicts a higher-priority victim rather than a budget-protected lower one, which a later,
    lower-priority pod then evicts (a long property run found it in greedy's plans)."""
    if _beyond_node_local(placed, running):
        return []
    out: list[tuple[PodInfo, list[PodInfo]]] = []
    for level in sorted({v.priority for v in victims}):
        outranking = [p for p in placed if p.priority > level]
        if _port_blocked(outranking, running, level):
            continue
        demand = used_before.astype(np.int64).copy()
        requested = np.zeros(len(alloc), dtype=bool)
        for p in outranking:
            vec = vector(p)
            demand += vec
            requested |= vec > 0
        for v in victims:
            if v.priority < level and (preemptor_priority is None or preemptor_priority.get(v.key, level + 1) > level):
                demand -= vector(v)
        if outranking and bool((demand[requested] > alloc[requested]).any()):
            continue
        for v in victims:
            if v.priority == level:
                out.append((v, [p for p in placed if not may_preempt(p, v)]))
    return out


def encode(wm: WindowModel) -> None:
    """CP-SAT: ``evict[v]`` only when the placed classes that outrank ``v`` would not fit the node
    with ``v`` still there (and every lower-priority evicted pod gone): on some resource they
    request, or on a host port a running pod of ``v``'s priority or above holds."""
    if not wm.evict:
        return
    m, state = wm.model, wm.state
    victims_on: dict[int, list[tuple[PodInfo, cp_model.IntVar]]] = defaultdict(list)
    for key, (victim, n) in wm.evict_pod.items():
        victims_on[n].append((victim, wm.evict[key]))
    for n, victims in victims_on.items():
        entries = wm.by_node[n]
        running = list(state.pods_on[n].values())
        if _beyond_node_local((), running):
            continue
        # A placed pod whose placement can hinge on other pods' rules makes every eviction on the
        # node count as needed (the check does not weigh those rules): its presence is a reason.
        beyond = [
            wm.new_presence(f"beyond_local[{n},{cls.id}]", [var], wm.ub_of(cls.id, n))
            for cls, var in entries
            if _beyond_node_local((cls.rep,), ())
        ]
        for level in sorted({v.priority for v, _ in victims}):
            outranking = [(cls, var) for cls, var in entries if cls.rep.priority > level]
            reasons = list(beyond)
            holders = [q for q in running if q.host_ports and q.priority >= level]
            for cls, var in outranking:
                if cls.rep.host_ports and any(node_ports.ports_conflict(cls.rep.host_ports, q.host_ports) for q in holders):
                    reasons.append(wm.new_presence(f"port_need[{n},{level},{cls.id}]", [var], wm.ub_of(cls.id, n)))
            lower = [(state.vector(v), e) for v, e in victims if v.priority < level]
            requested = np.zeros(state.free.shape[1], dtype=bool)
            for cls, _ in outranking:
                requested |= wm.vec[cls.id] > 0
            for r in np.flatnonzero(requested).tolist():
                vars_ = [var for cls, var in outranking if wm.vec[cls.id][r]]
                coeffs = [int(wm.vec[cls.id][r]) for cls, var in outranking if wm.vec[cls.id][r]]
                for vec, e in lower:
                    if vec[r]:
                        vars_.append(e)
                        coeffs.append(-int(vec[r]))
                short = m.new_bool_var(f"room_need[{n},{level},{r}]")
                # The outranking pods need more of resource r than the node has free with this
                # level's victims still there.
                m.add(cp_model.LinearExpr.weighted_sum(vars_, coeffs) >= int(state.free[n, r]) + 1).only_enforce_if(short)
                if state.free[n, r] < 0:
                    # Running pods overcommit r already, so the sum above holds with nothing placed:
                    # the need is there only if an outranking pod asking for r is placed (as the
                    # check reads it: the resources the placed outranking pods request).
                    asking = [var for cls, var in outranking if wm.vec[cls.id][r]]
                    m.add(cp_model.LinearExpr.sum(asking) >= 1).only_enforce_if(short)
                reasons.append(short)
            for victim, e in victims:
                if victim.priority == level:
                    if reasons:
                        m.add_bool_or(reasons).only_enforce_if(e)
                    else:
                        m.add(e == 0)

"""Who may preempt whom, and which evictions can hinge on rules beyond a node's room: what the
model, greedy and the validator share about preemption.

* **Who.** A pod ``p`` may preempt a running pod ``v`` only if ``p`` outranks ``v`` (strictly
  higher priority), ``p``'s preemptionPolicy is not ``Never``, ``p`` is not waiting for the victims
  of its earlier preemption, and ``v`` is not a member of ``p``'s own PodGroup (``why_not`` /
  ``may_preempt``); ``candidate_levels``: the priorities of the pods that may evict a victim.
* **Which.** Which evictions a plan may make is kube-scheduler's own preemption, replayed on the
  plan's placements in queue order (``replay``); the model states it level by level
  (``reprieve_encode``), greedy is that procedure. Where a placed pod has required
  (anti-)affinity, a hard spread constraint or claims, or a running pod has required
  anti-affinity (``beyond_node_local``), or a window pod's anti-affinity or spread counts a victim
  (``entangled``), an eviction may hinge on more than room; and a victim whose claim's devices
  come back may be evicted for them (``device_reasons``, the model's literal for it).
* Greedy's ``reprieve_level`` (one priority's preemptors on a node as one batch) reads the same
  helpers to put back what such a batch no longer needs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from ...info import PodInfo
from ...state import PodMatcher

if TYPE_CHECKING:
    from ...plugin_api import EncodeModel as WindowModel


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
    if preemptor.waiting_on:
        reasons.append(f"{preemptor.key} evicts {victim.key}, but it waits for its victims on its nominated "
                       f"node {preemptor.waiting_on}: it may not preempt again")
    if victim.group is not None and victim.group == preemptor.group:
        reasons.append(
            f"{victim.key} is evicted for {preemptor.key}, a member of its own PodGroup "
            f"{victim.group}: a gang never preempts itself"
        )
    return reasons


def may_preempt(preemptor: PodInfo, victim: PodInfo) -> bool:
    """Whether ``preemptor`` may evict ``victim`` at all (``why_not`` finds no reason against)."""
    return not why_not(preemptor, victim)


def beyond_node_local(placed: Iterable[PodInfo], running: Iterable[PodInfo]) -> bool:
    """Whether a placement on the node can hinge on other pods beyond resources and ports: a
    placed pod with required (anti-)affinity or hard spread, or with claims (a ReadWriteOncePod
    claim or a CSI volume count a victim holds), or a running pod's anti-affinity."""
    return (any(p.affinity or p.anti_affinity or p.hard_spread or p.claims for p in placed)
            or any(q.anti_affinity for q in running))


def entangling(ctx) -> tuple[PodMatcher, ...]:
    """The matchers of the window's required anti-affinity terms and hard spread constraints (a
    victim one of them counts is ``entangled``), built once per context."""
    hit = ctx.__dict__.get("_preemption_entangling")
    if hit is None:
        found: set[PodMatcher] = set()
        for p in ctx.window:
            found.update(PodMatcher.of_term(t) for t in p.anti_affinity)
            found.update(PodMatcher.of_spread(c.selector, p.namespace) for c in p.hard_spread)
        hit = ctx.__dict__["_preemption_entangling"] = tuple(found)
    return hit


def entangled(victim: PodInfo, matchers: Sequence[PodMatcher]) -> bool:
    """Whether a window pod's required anti-affinity or hard spread counts ``victim``: putting it
    back could break that pod's rule elsewhere in its domain, so its eviction counts as needed."""
    return any(m.matches(victim) for m in matchers)


def candidate_levels(victim: PodInfo, preemptors: Iterable[PodInfo]) -> list[int]:
    """The levels a victim may be evicted at: the priorities of the pods that may preempt it."""
    return sorted({p.priority for p in preemptors if may_preempt(p, victim)})


def device_reasons(wm: WindowModel, n: int, victim: PodInfo, level: int, above: list) -> list:
    """Devices as room, in the model: a literal true only when one of ``victim``'s claims is given
    back (``dynamic_resources.encode.freed_literals``: reserved only for evicted pods) and a class
    with ResourceClaims is placed on node ``n`` at or above ``level`` — its devices are room such
    a pod may take. Read per node, not per device (the model counts devices by kind)."""
    from ..dynamic_resources.encode import freed_literals
    from ..dynamic_resources.hold import hold_of

    dra = hold_of(wm.state)
    if dra is None or not victim.pod.spec.resource_claims:
        return []

    freed = freed_literals(wm)
    lits = [freed[pc.key] for pc in dra.claims_of(victim) if pc.key in freed]
    users = [(cls, var) for cls, var in above if cls.rep.pod.spec.resource_claims]
    if not lits or not users:
        return []
    m = wm.model
    there = [wm.new_presence(f"dra_user[{n},{cls.id}]", [var], wm.ub_of(cls.id, n)) for cls, var in users]
    b = m.new_bool_var(f"dra_need[{n},{level},{victim.key}]")
    m.add_bool_or(lits).only_enforce_if(b)
    m.add_bool_or(there).only_enforce_if(b)
    return [b]

"""Who may preempt whom, and which evictions can hinge on rules beyond a node's room: what the
model, greedy and the validator share about preemption.

* **Who.** A pod ``p`` may preempt a running pod ``v`` only if ``p`` outranks ``v`` (strictly
  higher priority), ``p``'s preemptionPolicy is not ``Never``, ``p`` is not waiting for the victims
  of its earlier preemption, and ``v`` is not a member of ``p``'s own PodGroup (``why_not`` /
  ``may_preempt``, offered to every plugin by ``shared.preemption_rule``); ``candidate_levels``:
  the priorities of the pods that may evict a victim.
* **Which.** Which evictions a plan may make is kube-scheduler's own preemption, replayed on the
  plan's placements in queue order (``replay``); the model states it level by level
  (``reprieve_encode``), greedy is that procedure. Where a placed pod has required
  (anti-)affinity, a hard spread constraint or claims, or a running pod has required
  anti-affinity (``beyond_node_local``), or a window pod's anti-affinity or spread counts a victim
  (``entangled``), an eviction may hinge on more than room; and a victim whose claim's devices
  come back may be evicted for them (``freed_reasons``, the model's literal for it).
* Greedy's ``reprieve_level`` (one priority's preemptors on a node as one batch) reads the same
  helpers to put back what such a batch no longer needs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from ...info import PodInfo
from ...plugin_api import GivesBackInModel
from ...state import PodMatcher
from ..shared.preemption_rule import may_preempt

if TYPE_CHECKING:
    from ...plugin_api import EncodeModel as WindowModel


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


def freed_reasons(wm: WindowModel, n: int, victim: PodInfo, level: int, above: list) -> list:
    """Room an eviction gives back beyond the node's resources, in the model: the literals of every
    book of the model's state that an eviction may give something back from
    (``plugin_api.GivesBackInModel``: DRA's devices of a claim reserved only for evicted pods), for
    the classes placed on node ``n`` at or above ``level``."""
    books = wm.__dict__.get("_preemption_gives_back")
    if books is None:  # found once per model: asked per victim, level and node
        books = wm.__dict__["_preemption_gives_back"] = [
            book for book in wm.state.books.values() if isinstance(book, GivesBackInModel)]
    return [lit for book in books for lit in book.freed_reasons(wm, n, victim, level, above)]

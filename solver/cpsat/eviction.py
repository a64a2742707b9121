"""Preemption as costed variables.

For every running pod that some candidate window pod on its node outranks (and may preempt), a
boolean ``evict[v]``, and per priority L of the pods that may evict it ``level[v, L]``: the
priority of the pod it goes for (``victim_room`` judges the eviction needed at that level).
Capacity, ports and anti-affinity read ``1 − evict[v]`` for v's share of the node. A pod is
evicted only if a window pod of strictly higher priority, whose preemptionPolicy is not Never, is
placed on the same node. Cost sits below placement in the
lexicographic objective: PodDisruptionBudget violations first (or forbidden with ``pdb: hard``),
then the victims' priorities (one higher-priority victim outweighs any number of lower ones),
then how many victims.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

import numpy as np
from ortools.sat.python import cp_model

from ..info import PodInfo
from ..disruption import PdbBudgets
from ..plugins.registry import may_preempt

if TYPE_CHECKING:
    from ..plugin_api import EncodeModel as WindowModel

# Above this, exact tier weights for victim priorities are abandoned for a linear priority cost.
MAX_TIER_WEIGHT = 2**40


def can_evict(cls_rep: PodInfo, victim: PodInfo, allow: bool) -> bool:
    """Whether a pod of ``cls_rep``'s class may preempt ``victim`` at all."""
    return allow and may_preempt(cls_rep, victim)


def top_preemptor(classes, cand: dict, num_nodes: int) -> np.ndarray:
    """Per node, the highest priority of a class that may preempt and has the node among its
    candidates (the lowest int64 where none has): no running pod at or above it can go."""
    top = np.full(num_nodes, np.iinfo(np.int64).min, dtype=np.int64)
    for cls in classes:
        if cls.rep.may_preempt_others and len(cand[cls.id]):
            np.maximum.at(top, cand[cls.id], cls.rep.priority)
    return top


def create(wm: WindowModel) -> None:
    """evict[v] for running pods on candidate nodes that some candidate class may preempt."""
    if not wm.allow_preemption:
        return
    m, state = wm.model, wm.state
    for n, entries in wm.by_node.items():
        preemptors = [(cls, var) for cls, var in entries if cls.rep.may_preempt_others]
        if not preemptors:
            continue
        top = max(cls.rep.priority for cls, _ in preemptors)
        here = _Here(m, n)
        for victim in state.pods_on[n].values():
            if victim.priority >= top:
                continue
            # Only a placed window pod of strictly higher priority on the same node justifies it.
            # A gang member never evicts a running member of its own group.
            by_level: dict[int, list] = defaultdict(list)
            for cls, var in preemptors:
                if may_preempt(cls.rep, victim):
                    by_level[cls.rep.priority].append(var)
            if not by_level:
                continue
            evict = m.new_bool_var(f"evict[{victim.key}]")
            wm.evict[victim.key] = evict
            wm.evict_pod[victim.key] = (victim, n)
            # level[v, L]: v is evicted for a pod of priority L placed on its node (``victim_room``
            # judges the eviction at that level); exactly one when v is evicted.
            if len(by_level) == 1:
                (level, outranking), = by_level.items()
                wm.evict_level[victim.key] = {level: evict}
                m.add_implication(evict, here.some(level, outranking))
                continue
            levels = {}
            for level, outranking in sorted(by_level.items()):
                lam = levels[level] = m.new_bool_var(f"level[{victim.key},{level}]")
                m.add_implication(lam, here.some(level, outranking))
            wm.evict_level[victim.key] = levels
            m.add(cp_model.LinearExpr.sum(list(levels.values())) == evict)


class _Here:
    """One node's "some pod of these classes is placed here" literals, shared by the node's
    victims: each victim links to one literal per level rather than to every preemptor (the
    eviction links grow with victims plus pairs, not victims times classes)."""

    def __init__(self, model: cp_model.CpModel, node: int) -> None:
        self.model, self.node = model, node
        self.lits: dict[tuple[int, ...], cp_model.IntVar] = {}

    def some(self, level: int, outranking: list) -> cp_model.IntVar:
        key = tuple(sorted(v.Index() for v in outranking))
        lit = self.lits.get(key)
        if lit is None:
            lit = self.lits[key] = self.model.new_bool_var(f"preemptor_here[{self.node},{level},{len(self.lits)}]")
            self.model.add(lit <= cp_model.LinearExpr.sum(outranking))
        return lit


def encode_costs(wm: WindowModel, ctx) -> None:
    if not wm.evict:
        return
    m = wm.model
    victims = [wm.evict_pod[k][0] for k in wm.evict]
    # PodDisruptionBudgets: soft (costed above any ordinary victim) or hard.
    budgets = PdbBudgets.of(ctx)
    covered = defaultdict(list)
    for key, evict in wm.evict.items():
        for i in budgets.covering(wm.evict_pod[key][0]):
            covered[i].append(evict)
    hard = ctx.config.preemption.pdb == "hard"
    for i, evicts in covered.items():
        allowed = budgets.budgets[i].allowed
        if hard:
            m.add(cp_model.LinearExpr.sum(evicts) <= allowed)
        elif len(evicts) > allowed:
            over = m.new_int_var(0, len(evicts) - allowed, f"pdb_over[{i}]")
            m.add(over >= cp_model.LinearExpr.sum(evicts) - allowed)
            wm.level("pdb_violations").add(over, -1, 0, len(evicts) - allowed)
    # Victim priority tiers: one victim of a higher priority outweighs all lower ones together.
    tiers = sorted({v.priority for v in victims})
    count = {p: sum(1 for v in victims if v.priority == p) for p in tiers}
    weight, weights, total = 1, {}, 0
    for p in tiers:
        weights[p] = weight
        total += weight * count[p]
        weight = total + 1
    if weight > MAX_TIER_WEIGHT:
        base = tiers[0]
        weights = {p: p - base + 1 for p in tiers}
    for key, evict in wm.evict.items():
        victim = wm.evict_pod[key][0]
        wm.level("victim_priority").add(evict, -weights[victim.priority], 0, 1)
        wm.level("victims").add(evict, -1, 0, 1)

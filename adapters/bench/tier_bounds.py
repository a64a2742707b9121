"""A bound CP-SAT proves: at most how many pending pods of each priority and above any plan places.

The bench reports it beside each engine (the TIERS table, ``bound.tiers``); ``schedule --bound``
puts it in the plan's stats (``tier_bound``, ``tier_gap``), after the decision.

``max_placeable_bound`` (bounds.py) caps the whole window by one resource at a time. This relaxation
is solved as a CP-SAT model instead, so it can hold every resource at once, node pools apart, the
evictions preemption needs and gangs whole, and it is asked once per priority tier: the bound on
the pods of priority *p and above* is what the lexicographic order (``choose``) ranks first.

The relaxation, over *pools* (nodes every pending pod's static filters treat alike: node name,
cordon, taints, nodeSelector, required node affinity):

- ``x[g, P]``: pods of equivalence group ``g`` placed in pool ``P``, at most what the pool's nodes
  could each take of ``g`` alone (``bounds.group_caps``), and per group at most its cap (its size,
  its own required anti-affinity, its gang's reach);
- per pool and resource, the pods placed and the bound pods kept fit the pool's allocatable summed
  (a pod may straddle nodes here: that is what makes it a relaxation; a node its running pods
  overcommit counts with what they use);
- bound pods at or above the window's highest preempting priority are kept; below it, the room of
  bound pods of priority ``q`` and below that is evicted in a pool is at most one node's worth of
  them (the pool's fullest node) per pod placed there that may preempt them (priority above ``q``):
  kube-scheduler's preemption evicts on the node its preemptor goes to (members of a PodGroup
  evicted only whole, ``disruptionMode: all``, are not held to it: their group goes with them);
- a gang places at least its missing minMember, or nothing.

Spread, inter-pod affinity, ports, volumes, PodDisruptionBudgets and the order of the turns are
left out, and each requested amount is rounded down, capacities up: the bound can be loose, never
low. CP-SAT's best bound is used even when a tier's solve stops at its time limit, so each
figure is proven whether the relaxation was solved to the end (``proven_optimal``) or not. No
figure is above ``max_placeable_bound`` either (it bounds every tier as well, and is now and then
the lower of the two), nor above a lower tier's.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
from ortools.sat.python import cp_model

from models import ClusterSnapshot, Pod, pod_group_key, pod_requests
from solver import interrupt

from .bounds import (
    PODS, GroupCaps, can_preempt, gang_members_bound, group_caps, highest_preemptor, placeable_bound, priority,
)

# The largest coefficient a resource keeps after scaling (requests rounded down, capacity up).
MAX_UNITS = 1 << 24


@dataclass
class TierBound:
    """``at_or_above[p]``: no plan places more of the window's pods of priority ``p`` or above."""

    at_or_above: dict[int, int] = field(default_factory=dict)
    proven_optimal: bool = True  # every tier's relaxation solved to the end
    pools: int = 0
    seconds: float = 0.0

    @property
    def total(self) -> Optional[int]:
        """The bound on all the window's pods (the lowest tier's)."""
        return self.at_or_above[min(self.at_or_above)] if self.at_or_above else None

    def to_json(self) -> dict:
        return {
            "at_or_above_priority": {str(p): b for p, b in sorted(self.at_or_above.items(), reverse=True)},
            "proven_optimal": self.proven_optimal,
            "pools": self.pools,
            "seconds": round(self.seconds, 3),
        }


def tier_bound(snapshot: ClusterSnapshot, pending: list[Pod], *, seconds: float = 5.0, workers: int = 2,
               grouped: Optional[GroupCaps] = None) -> TierBound:
    """The relaxation above, solved once per priority tier of ``pending``, the solves within
    ``seconds`` in all (building the model comes first: a few seconds at 1,000 nodes).
    ``grouped``: ``bounds.group_caps`` of the same snapshot and pods, when the caller has them."""
    start = time.perf_counter()
    if not pending or not snapshot.nodes:
        return TierBound(at_or_above={p: 0 for p in {priority(q) for q in pending}})
    found = grouped if grouped is not None else group_caps(snapshot, pending)
    cluster = found.cluster
    pools = cluster.pools()
    usage = cluster.usage()
    top = highest_preemptor(pending)
    movable = sorted(q for q in usage if top is not None and q < top)  # bound priorities some pod may evict

    used = sum(usage.values(), np.zeros_like(cluster.alloc))  # all running pods, resource x node
    units = _whole_group_usage(snapshot, found, movable)
    model = cp_model.CpModel()
    scale = [_scale(cluster.alloc[i]) for i in range(len(cluster.resources))]
    need = [[_need(g[0], r, scale[i]) for i, r in enumerate(cluster.resources)] for g in found.groups]
    x: dict[tuple[int, int], cp_model.IntVar] = {}
    for g, alone in enumerate(found.counts):
        if found.caps[g] <= 0:
            continue
        for k, nodes in enumerate(pools):
            room = int(alone[nodes].sum())
            if room > 0:
                x[g, k] = model.new_int_var(0, min(room, found.caps[g]), f"x{g}_{k}")
    by_group: dict[int, list[cp_model.IntVar]] = defaultdict(list)
    by_pool: dict[int, list[tuple[int, cp_model.IntVar]]] = defaultdict(list)
    for (g, k), var in x.items():
        by_group[g].append(var)
        by_pool[k].append((g, var))
    for g, vars_ in by_group.items():
        model.add(sum(vars_) <= found.caps[g])

    for k, nodes in enumerate(pools):
        placed = by_pool.get(k)
        if not placed:
            continue
        for i in range(len(cluster.resources)):
            # Requests and kept room round down, capacity up; a scaled resource's kept room at each
            # movable level can then read one unit above the truth, so the capacity gets as many.
            slack = len(movable) + 1 if scale[i] > 1 else 0
            # A node its running pods overcommit (they came before its allocatable shrank, or a
            # kubelet admitted them) counts as full, not as taking room from the pool's others.
            cap = _ceil(int(np.maximum(cluster.alloc[i][nodes], used[i][nodes]).sum()), scale[i]) + slack
            kept = _floor(sum(int(use[i][nodes].sum()) for q, use in usage.items() if q not in movable), scale[i])
            load: list = [need[g][i] * var for g, var in placed if need[g][i] > 0]
            evictable: list[cp_model.IntVar] = []
            above = np.zeros(len(nodes), dtype=np.int64)
            for q in reversed(movable):  # highest first: evictions at q and above need a preemptor above q
                level = usage[q][i][nodes] - (units[q][i][nodes] if q in units else 0)
                above += level
                amount = _floor(int(level.sum()), scale[i])
                if amount > 0:
                    evicted = model.new_int_var(0, amount, f"e{k}_{q}_{i}")
                    load.append(amount - evicted)
                    evictable.append(evicted)
                if not evictable:
                    continue
                per_node = _ceil(int(above.max()), scale[i])
                preemptors = [var for g, var in placed
                              if can_preempt(found.groups[g][0]) and priority(found.groups[g][0]) > q]
                if preemptors:
                    model.add(sum(evictable) <= per_node * sum(preemptors))
                else:
                    model.add(sum(evictable) == 0)
            # Members of a group evicted only whole go wherever their preemptor goes: no
            # one-node's-worth limit on their room (one eviction may empty every node of a pool).
            whole = _floor(sum(int(use[i][nodes].sum()) for use in units.values()), scale[i])
            if whole > 0:
                load.append(whole - model.new_int_var(0, whole, f"w{k}_{i}"))
            if load:
                model.add(sum(load) <= max(cap - kept, 0))

    # Gangs: the missing minMember, or none of the gang.
    members = gang_members_bound(cluster.bound)
    gangs: dict[str, list[int]] = defaultdict(list)
    for g, group in enumerate(found.groups):
        gk = pod_group_key(group[0])
        if gk and g in by_group:
            gangs[gk].append(g)
    for gk, groups in gangs.items():
        pg = snapshot.pod_group_by_key.get(gk)
        missing = (pg.spec.min_member - members[gk]) if pg is not None else 0
        if missing <= 0:
            continue
        placed_whole = model.new_bool_var(f"gang_{gk}")
        model.add(sum(v for g in groups for v in by_group[g]) >= missing * placed_whole)
        for g in groups:
            model.add(sum(by_group[g]) <= found.caps[g] * placed_whole)

    tiers = sorted({priority(p) for p in pending}, reverse=True)
    out = TierBound(pools=len(pools))
    solving = time.perf_counter()
    for n, tier in enumerate(tiers):
        counted = [var for (g, _k), var in x.items() if priority(found.groups[g][0]) >= tier]
        if not counted:
            out.at_or_above[tier] = 0
            continue
        model.maximize(sum(counted))
        solver = interrupt.new_solver()  # Ctrl-C stops it through ``interrupt.request``
        left = seconds - (time.perf_counter() - solving)
        solver.parameters.max_time_in_seconds = max(0.1, left / (len(tiers) - n))
        solver.parameters.num_workers = workers
        with interrupt.stoppable(solver):
            status = solver.solve(model)
        interrupt.check()  # a stopped solve's figures are not proven: no bound at all
        if status == cp_model.OPTIMAL:
            out.at_or_above[tier] = int(round(solver.objective_value))
        else:
            out.proven_optimal = False
            # No answer at all (not even a bound): the tier's pods, the count no plan exceeds.
            proven = solver.best_objective_bound if status == cp_model.FEASIBLE else float("inf")
            out.at_or_above[tier] = int(min(np.floor(proven + 1e-6), sum(len(g) for g in found.groups
                                                                          if priority(g[0]) >= tier)))
    # The arithmetic bound (bounds.py: one resource at a time, smallest requests first) holds for
    # every tier too and is sometimes the lower where the pools' sums let large pods through.
    lowest = tiers[-1]
    out.at_or_above[lowest] = min(out.at_or_above[lowest], placeable_bound(snapshot, pending, found).total)
    # No plan places more pods of a tier and above than of a lower tier and above: a lower tier's
    # bound holds for the tiers above it too (it is tighter when a solve stopped short).
    for lo, hi in zip(tiers[::-1], tiers[::-1][1:]):
        out.at_or_above[hi] = min(out.at_or_above[hi], out.at_or_above[lo])
    out.seconds = time.perf_counter() - start
    return out


def _whole_group_usage(snapshot: ClusterSnapshot, found: GroupCaps, levels: list[int]) -> dict[int, np.ndarray]:
    """Per priority in ``levels``: what the running pods evicted only with their whole group
    (PodGroup ``disruptionMode: all``) use, resource x node."""
    def whole(pod: Pod) -> bool:
        gk = pod_group_key(pod)
        group = snapshot.pod_group_by_key.get(gk) if gk else None
        return group is not None and group.spec.disruption_unit is not None

    return found.cluster.usage_of(p for p in found.cluster.bound if priority(p) in levels and whole(p))


def _scale(alloc: np.ndarray) -> int:
    """Units per step for a resource, so that the largest node's allocatable stays small."""
    largest = int(alloc.max()) if alloc.size else 0
    return max(1, -(-largest // MAX_UNITS))


def _need(pod: Pod, resource: str, scale: int) -> int:
    return 1 if resource == PODS else _floor(pod_requests(pod).get(resource, 0), scale)


def _floor(value: int, scale: int) -> int:
    return value // scale


def _ceil(value: int, scale: int) -> int:
    return -(-value // scale)

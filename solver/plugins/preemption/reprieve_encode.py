"""kube-scheduler's reprieve in CP-SAT: the victims the model may choose are the ones
``SelectVictimsOnNode`` picks, priority level by priority level (issue 33).

The rule is the replay (``replay``): kube-scheduler's preemption on the plan's placements in queue
order. This encoding states it on each node, level by level, taking the pods of one priority as
one batch (kube-scheduler takes them one at a time; where that evicts differently, the engine's
cuts, ``solver/cpsat/kube_victims.py``, take over):

* ``gone[u, L]``: running pod ``u`` is evicted at level ``L`` in kube-scheduler's procedure (at
  the turn of the pods of priority ``L`` on its node). At most one level per pod; only at a level
  some pod placed on the node may preempt at (``active[L]``).
* At level ``L``, the pods that may be evicted (present, lower priority, evictable) are reprieved
  one by one, those whose eviction would break a PodDisruptionBudget first (the budgets read as
  the window starts), each group the most important first (higher priority, then earlier
  start): ``u`` stays
  (``kept[u, L]``) exactly when it fits beside the pods already there at that turn — every placed
  pod of priority ≥ ``L``, every running pod not evicted before, the room nominated pods keep at
  ``L`` — and the more important pods reprieved before it:

      kept[u, L]  ⇒  base_L + Σ_{w before u} kept[w, L]·w + u ≤ allocatable   (every resource)
      gone[u, L]  ⇒  base_L + Σ_{w before u} kept[w, L]·w + u > allocatable   (some resource)

  read on the resources the level's pods request (the pod count included).
* The plan evicts only what kube-scheduler evicts, and at that level:
  ``level[u, L] ≤ gone[u, L]`` (the model's ``evict_level``), so ``evict[u] ≤ Σ_L gone[u, L]``; the
  plan may keep a pod kube-scheduler evicts, the final capacity rows then holding it.

Host ports count too: a pod placed at or above ``L`` that wants a port ``u`` holds keeps ``u`` from
being reprieved. Where rules beyond the node may keep ``u`` out as well (a placed pod with
(anti-)affinity, spread or claims, a running pod's anti-affinity, a victim a window pod's
anti-affinity or spread counts), ``gone[u, L]`` is not required to be for room; ``kept`` still
requires room. Not weighed here (the cuts take them): the budgets other nodes' evictions spend
before a level's turn, and what those rules decide.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timezone
from typing import TYPE_CHECKING

import numpy as np
from ortools.sat.python import cp_model

from ...disruption import PdbBudgets
from ...info import PodInfo
from ..node_ports import filter as node_ports
from .victim_room import beyond_node_local, device_reasons, entangled, entangling

if TYPE_CHECKING:
    from ...plugin_api import EncodeModel as WindowModel

_NOW = datetime.max.replace(tzinfo=timezone.utc)


def _importance(pod: PodInfo) -> tuple:
    """Reprieve order: higher priority first, then earlier start (no start time: now), then name."""
    return (-pod.priority, pod.start_time or _NOW, pod.key)


def encode(wm: WindowModel) -> None:
    if not wm.evict:
        return
    victims_on: dict[int, list[PodInfo]] = defaultdict(list)
    for victim, n in wm.evict_pod.values():
        victims_on[n].append(victim)
    for n, victims in victims_on.items():
        _encode_node(wm, n, sorted(victims, key=_importance))


def _encode_node(wm: WindowModel, n: int, victims: list[PodInfo]) -> None:
    """The reprieve on node ``n``, whose evictable running pods are ``victims`` (most important
    first)."""
    m, state = wm.model, wm.state
    entries = wm.by_node[n]
    matchers = entangling(wm.ctx)
    budgets = PdbBudgets.of(wm.ctx)
    free_beyond = beyond_node_local((), state.pods_on[n].values())
    lam = {v.key: wm.evict_level[v.key] for v in victims}
    levels = sorted({lv for v in victims for lv in lam[v.key]}, reverse=True)
    gone: dict[tuple[str, int], cp_model.IntVar] = {}
    for v in victims:
        for lv in lam[v.key]:
            gone[v.key, lv] = m.new_bool_var(f"gone[{v.key},{lv}]")
        m.add(cp_model.LinearExpr.sum([gone[v.key, lv] for lv in lam[v.key]]) <= 1)
        for lv, var in lam[v.key].items():
            m.add(var <= gone[v.key, lv])  # the plan evicts at kube's level only

    def present(v: PodInfo, level: int):
        """1 − (v gone at a level above ``level``), as (vars, coeffs, constant)."""
        above = [gone[v.key, lv] for lv in lam[v.key] if lv > level]
        return above, [-1] * len(above), 1

    width = state.free.shape[1]
    alloc = state.alloc[n].astype(np.int64)
    used = state.used[n].astype(np.int64)
    claims = wm.ctx.claims
    for level in levels:
        preemptors = [(cls, var) for cls, var in entries
                      if cls.rep.priority == level and cls.rep.may_preempt_others]
        here = [v for v in victims if level in lam[v.key]]
        if not here:
            continue
        # kube-scheduler's order: those whose eviction would break a PodDisruptionBudget first.
        violating, safe = budgets.split(here)
        here = violating + safe
        if not preemptors:
            for v in here:
                m.add(gone[v.key, level] == 0)
            continue
        active = wm.new_presence(f"reprieve_active[{n},{level}]", [var for _, var in preemptors],
                                 sum(wm.ub_of(cls.id, n) for cls, _ in preemptors))
        for v in here:
            m.add(gone[v.key, level] <= active)
        requested = np.zeros(width, dtype=bool)
        for cls, _ in preemptors:
            requested |= wm.vec[cls.id] > 0
        above = [(cls, var) for cls, var in entries if cls.rep.priority >= level]
        claimed = claims.room(n, level, width) if claims else np.zeros(width, dtype=np.int64)
        # kept[v, L]: present at L's turn and not evicted there; over[v]: the literals "with v
        # back, resource r is over" (one per resource v asks for).
        kept: dict[str, cp_model.IntVar] = {}
        over_lits: dict[str, list] = defaultdict(list)
        for v in here:
            k = kept[v.key] = m.new_bool_var(f"kept[{v.key},{level}]")
            vs, cs, const = present(v, level)
            m.add(k == cp_model.LinearExpr.weighted_sum(vs, cs) + const - gone[v.key, level])
        for r in np.flatnonzero(requested).tolist():
            # base_L,r: the node's running pods, less those gone before L and less the ones in the
            # reprieve list (added back one by one below), plus the pods placed at or above L.
            vars_: list = [var for _, var in above]
            coeffs: list[int] = [int(wm.vec[cls.id][r]) for cls, _ in above]
            const = int(used[r]) + int(claimed[r])
            for v in victims:
                amount = int(state.vector(v)[r])
                if not amount:
                    continue
                if level in lam[v.key]:
                    const -= amount  # in the list: counted through kept[]
                    continue
                vs, cs, c0 = present(v, level)  # gone above L: its room is free
                const -= amount * (1 - c0)
                vars_ += vs
                coeffs += [amount * c for c in cs]
            cap = int(alloc[r])
            prefix_vars: list = []
            prefix_coeffs: list[int] = []
            for v in here:
                amount = int(state.vector(v)[r])
                expr = cp_model.LinearExpr.weighted_sum(vars_ + prefix_vars, coeffs + prefix_coeffs) + const + amount
                if amount:
                    m.add(expr <= cap).only_enforce_if([kept[v.key], active])
                    over = m.new_bool_var(f"reprieve_over[{n},{level},{r},{v.key}]")
                    m.add(expr >= cap + 1).only_enforce_if(over)
                    over_lits[v.key].append(over)
                prefix_vars.append(kept[v.key])
                prefix_coeffs.append(amount)
        for v in here:
            if not v.host_ports:
                continue
            for cls, var in above:
                if cls.rep.host_ports and node_ports.ports_conflict(cls.rep.host_ports, v.host_ports):
                    # A pod placed at or above L wants a port v holds: v is never reprieved there.
                    there = wm.new_presence(f"reprieve_port[{n},{level},{cls.id},{v.key}]", [var], wm.ub_of(cls.id, n))
                    m.add_implication(there, kept[v.key].Not()).only_enforce_if(active)
                    over_lits[v.key].append(there)
        # Rules beyond the node may keep a pod from being reprieved too: a placed pod with
        # (anti-)affinity, spread or claims, a running pod's anti-affinity, a victim some window
        # pod's anti-affinity or spread counts. There the eviction is not required to be for room
        # (the cuts judge it).
        beyond = [wm.new_presence(f"reprieve_beyond[{n},{level},{cls.id}]", [var], wm.ub_of(cls.id, n))
                  for cls, var in above if beyond_node_local((cls.rep,), ())]
        for v in here:
            if free_beyond or entangled(v, matchers):
                continue
            over_lits[v.key] += beyond
            # Devices as room: a claim of v's given back to a placed pod with claims (``victim_room``).
            over_lits[v.key] += device_reasons(wm, n, v, level, above)
            if over_lits[v.key]:
                m.add_bool_or(over_lits[v.key]).only_enforce_if(gone[v.key, level])
            else:
                m.add(gone[v.key, level] == 0)  # it asks for nothing the level's pods request

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
being reprieved. Where a rule beyond room may keep ``u`` out as well — a pod of priority ``L``
placed on the node whose required anti-affinity or hard spread counts ``u``, volume claims on
both sides, or ``u``'s own required anti-affinity (``_hinges_on``) — ``gone[u, L]`` is not
required to be for room; ``kept`` still requires room. Rules of other pods (placed above ``L``,
or on other nodes of a domain ``u`` is in) are no reason: kube-scheduler evicts at a pod's turn
only what keeps that pod off that node. Not weighed here (the cuts take them): the budgets other nodes' evictions spend
before a level's turn, and what those rules decide.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Optional

import numpy as np
from ortools.sat.python import cp_model

from ...disruption import PdbBudgets
from ...info import PodInfo
from ..shared.host_ports import ports_conflict
from ...state import PodMatcher
from .nominated import claims_of
from .victim_room import freed_reasons

if TYPE_CHECKING:
    from ...plugin_api import EncodeModel as WindowModel

_NOW = datetime.max.replace(tzinfo=timezone.utc)


def _importance(pod: PodInfo) -> tuple:
    """Reprieve order: higher priority first, then earlier start (no start time: now), then name."""
    return (-pod.priority, pod.start_time or _NOW, pod.key)


class ReprieveEncoding:
    """What the encoding leaves in the model (``plugin_api.Relaxable``): per node, ``strict[n]``,
    under which the plan's evictions there must be the level-by-level reprieve's. It must hold
    unless ``relaxed`` (fixed false; true only in a copy, ``relax``) or the node's ``alternative``
    (fixed false until ``admit`` frees it) does."""

    def __init__(self, model: cp_model.CpModel) -> None:
        self.relaxed = model.new_int_var(0, 0, "reprieve_relaxed")
        self.strict: dict[int, cp_model.IntVar] = {}
        self.alternative: dict[int, cp_model.IntVar] = {}

    def add_node(self, model: cp_model.CpModel, n: int) -> cp_model.IntVar:
        strict = self.strict[n] = model.new_bool_var(f"reprieve_strict[{n}]")
        alternative = self.alternative[n] = model.new_int_var(0, 0, f"reprieve_alternative[{n}]")
        model.add_bool_or([strict, self.relaxed, alternative])
        return strict

    def relax(self, model: cp_model.CpModel) -> None:
        """In ``model`` (a copy of the window model), evictions no longer tied to the reprieve on
        any node; the replay still judges them."""
        _free(model, self.relaxed, 1, 1)

    def admit(self, wm: WindowModel, counts: Mapping[tuple[int, int], int], victims: Mapping[int, set[str]]) -> None:
        """Admit one plan's own evictions beside the reprieve's: on each node of ``victims``, when
        the node holds exactly that plan's pods (``counts``, pods per (class, node)), the plan may
        evict those victims (or fewer) whatever the batch says. Greedy's plan evicts as
        kube-scheduler does, one pod at a time, which the batch can refuse; admitted, it is a hint
        the model holds and a floor the solver cannot fall below."""
        m = wm.model
        for n, keys in victims.items():
            alternative = self.alternative.get(n)
            if alternative is None:
                continue
            _free(m, alternative, 0, 1)
            for cls, var in wm.by_node[n]:
                k = counts.get((cls.id, n), 0)
                differs = m.new_bool_var(f"reprieve_differs[{n},{cls.id}]")
                m.add(var != k).only_enforce_if(differs)
                m.add(var == k).only_enforce_if(differs.Not())
                m.add_implication(differs, alternative.Not())
            for key, (_, node) in wm.evict_pod.items():
                if node == n and key not in keys:
                    m.add(wm.evict[key] == 0).only_enforce_if(alternative)


def _free(model: cp_model.CpModel, var: cp_model.IntVar, lo: int, hi: int) -> None:
    """Set ``var``'s domain in ``model`` (the literals above are fixed through their domains)."""
    domain = model.proto.variables[var.index].domain
    domain[0] = lo
    domain[1] = hi


def encode(wm: WindowModel) -> Optional[ReprieveEncoding]:
    if not wm.evict:
        return None
    victims_on: dict[int, list[PodInfo]] = defaultdict(list)
    for victim, n in wm.evict_pod.values():
        victims_on[n].append(victim)
    made = ReprieveEncoding(wm.model)
    for n, victims in victims_on.items():
        _encode_node(wm, n, sorted(victims, key=_importance), made.add_node(wm.model, n))
    return made


def _encode_node(wm: WindowModel, n: int, victims: list[PodInfo], exact: Any) -> None:
    """The reprieve on node ``n``, whose evictable running pods are ``victims`` (most important
    first)."""
    node = _NodeReprieve(wm, n, victims, exact)
    for level in node.levels:
        node.encode_level(level)


class _NodeReprieve:
    """The reprieve on one node: its victims' ``gone[v, L]`` variables (made at construction) and
    what the node holds, shared by the levels' constraints."""

    def __init__(self, wm: WindowModel, n: int, victims: list[PodInfo], exact: Any) -> None:
        self.wm, self.n, self.victims = wm, n, victims
        self.m, self.state = wm.model, wm.state
        m, state = self.m, self.state
        self.entries = wm.by_node[n]
        self.budgets = PdbBudgets.of(wm.ctx)
        lam = self.lam = {v.key: wm.evict_level[v.key] for v in victims}
        self.levels = sorted({lv for v in victims for lv in lam[v.key]}, reverse=True)
        gone: dict[tuple[str, int], cp_model.IntVar] = {}
        for v in victims:
            for lv in lam[v.key]:
                gone[v.key, lv] = m.new_bool_var(f"gone[{v.key},{lv}]")
            m.add(cp_model.LinearExpr.sum([gone[v.key, lv] for lv in lam[v.key]]) <= 1)
            for lv, var in lam[v.key].items():
                m.add(var <= gone[v.key, lv]).only_enforce_if(exact)  # the plan evicts at kube's level only
        self.gone = gone
        self.width = state.free.shape[1]
        self.alloc = state.alloc[n].astype(np.int64)
        self.used = state.used[n].astype(np.int64)
        self.claims = claims_of(wm.ctx)

    def present(self, v: PodInfo, level: int):
        """1 − (v gone at a level above ``level``), as (vars, coeffs, constant)."""
        above = [self.gone[v.key, lv] for lv in self.lam[v.key] if lv > level]
        return above, [-1] * len(above), 1

    def encode_level(self, level: int) -> None:
        """Level ``level``'s turn: its victims, in kube-scheduler's order, reprieved one by one
        while they fit back; evicted only when a pod placed at that priority may preempt."""
        m, wm, n, gone = self.m, self.wm, self.n, self.gone
        preemptors = [(cls, var) for cls, var in self.entries
                      if cls.rep.priority == level and cls.rep.may_preempt_others]
        here = [v for v in self.victims if level in self.lam[v.key]]
        if not here:
            return
        # kube-scheduler's order: those whose eviction would break a PodDisruptionBudget first.
        violating, safe = self.budgets.split(here)
        here = violating + safe
        if not preemptors:
            for v in here:
                m.add(gone[v.key, level] == 0)
            return
        active = wm.new_presence(f"reprieve_active[{n},{level}]", [var for _, var in preemptors],
                                 sum(wm.ub_of(cls.id, n) for cls, _ in preemptors))
        for v in here:
            m.add(gone[v.key, level] <= active)
        requested = np.zeros(self.width, dtype=bool)
        for cls, _ in preemptors:
            requested |= wm.vec[cls.id] > 0
        above = [(cls, var) for cls, var in self.entries if cls.rep.priority >= level]
        claimed = self.claims.room(n, level, self.width) if self.claims else np.zeros(self.width, dtype=np.int64)
        kept = self._kept(level, here)
        # over[v]: the literals "with v back, resource r is over" (one per resource v asks for).
        over_lits: dict[str, list] = defaultdict(list)
        for r in np.flatnonzero(requested).tolist():
            self._room(level, r, here, above, claimed, active, kept, over_lits)
        self._ports(level, here, above, active, kept, over_lits)
        self._beyond(level, here, above, over_lits)

    def _kept(self, level: int, here: list[PodInfo]) -> dict[str, Any]:
        """kept[v, L]: present at L's turn and not evicted there (a bool var, or the negation of
        gone[v, L] for a pod never gone before L)."""
        m, gone = self.m, self.gone
        kept: dict[str, Any] = {}
        for v in here:
            vs, cs, const = self.present(v, level)
            if not vs:  # never gone before L: kept is "not gone at L"
                kept[v.key] = gone[v.key, level].Not()
                continue
            k = kept[v.key] = m.new_bool_var(f"kept[{v.key},{level}]")
            m.add(k == cp_model.LinearExpr.weighted_sum(vs, cs) + const - gone[v.key, level])
        return kept

    def _base(self, level: int, r: int, above: list, claimed: np.ndarray) -> tuple[list, list[int], int]:
        """base_L,r: the node's running pods, less those gone before L and less the ones in the
        reprieve list (added back one by one), plus the pods placed at or above L; as (vars,
        coeffs, constant), the placed pods' terms first."""
        wm, state = self.wm, self.state
        vars_: list = [var for _, var in above]
        coeffs: list[int] = [int(wm.vec[cls.id][r]) for cls, _ in above]
        const = int(self.used[r]) + int(claimed[r])
        for v in self.victims:
            amount = int(state.vector(v)[r])
            if not amount:
                continue
            if level in self.lam[v.key]:
                const -= amount  # in the list: counted through kept[]
                continue
            vs, cs, c0 = self.present(v, level)  # gone above L: its room is free
            const -= amount * (1 - c0)
            vars_ += vs
            coeffs += [amount * c for c in cs]
        return vars_, coeffs, const

    def _room(self, level: int, r: int, here: list[PodInfo], above: list, claimed: np.ndarray, active: Any,
              kept: dict[str, Any], over_lits: dict[str, list]) -> None:
        """Resource ``r`` at level L: each victim in turn is over when it does not fit back beside
        the base and the victims kept before it; one never fitting back is reprieved only
        without a turn."""
        m, wm, n = self.m, self.wm, self.n
        vars_, coeffs, const = self._base(level, r, above, claimed)
        cap = int(self.alloc[r])
        # The sum's range (placed counts up to their bounds; pods gone above L free room).
        hi = const + sum(c * wm.ub_of(cls.id, n) for (cls, _), c in zip(above, coeffs))
        lo = const + sum(c for c in coeffs[len(above):] if c < 0)
        prefix_vars: list = []
        prefix_coeffs: list[int] = []
        for v in here:
            amount = int(self.state.vector(v)[r])
            if amount and hi + amount > cap:  # else v always fits back on r: nothing to state
                if lo + amount > cap:
                    # v never fits back on r at this level: reprieved only without a turn.
                    m.add_implication(kept[v.key], active.Not())
                    over_lits[v.key].append(active)
                else:
                    expr = (cp_model.LinearExpr.weighted_sum(vars_ + prefix_vars, coeffs + prefix_coeffs)
                            + const + amount)
                    over = m.new_bool_var(f"reprieve_over[{n},{level},{r},{v.key}]")
                    m.add(expr >= cap + 1).only_enforce_if(over)
                    m.add(expr <= cap).only_enforce_if(over.Not())
                    m.add_bool_or([kept[v.key].Not(), active.Not(), over.Not()])
                    over_lits[v.key].append(over)
            prefix_vars.append(kept[v.key])
            prefix_coeffs.append(amount)
            hi += amount

    def _ports(self, level: int, here: list[PodInfo], above: list, active: Any, kept: dict[str, Any],
               over_lits: dict[str, list]) -> None:
        """Host ports: a pod placed at or above L that wants a port v holds keeps v out."""
        wm, n = self.wm, self.n
        for v in here:
            if not v.host_ports:
                continue
            for cls, var in above:
                if cls.rep.host_ports and ports_conflict(cls.rep.host_ports, v.host_ports):
                    # A pod placed at or above L wants a port v holds: v is never reprieved there.
                    there = wm.new_presence(f"reprieve_port[{n},{level},{cls.id},{v.key}]", [var], wm.ub_of(cls.id, n))
                    self.m.add_implication(there, kept[v.key].Not()).only_enforce_if(active)
                    over_lits[v.key].append(there)

    def _beyond(self, level: int, here: list[PodInfo], above: list, over_lits: dict[str, list]) -> None:
        """Why each victim may be gone at L: one of its ``over`` literals (room, ports, rules
        beyond the node, devices), or never gone when it has none."""
        m, wm, n, gone = self.m, self.wm, self.n, self.gone
        # At L's turn a pod of priority L evicts a victim only so that it fits the node itself:
        # beyond room and ports, only through a rule of its own that reads the victim (its
        # anti-affinity or hard spread matches it, or both hold volume claims), or the victim's
        # own anti-affinity. A rule of some other pod — placed above L, or elsewhere in a domain
        # the victim shares — is judged at that pod's turn, on its node, and is no reason here.
        preempting = [(cls, var) for cls, var in above if cls.rep.priority == level and cls.rep.may_preempt_others]
        presence: dict[int, Any] = {}
        for v in here:
            for cls, var in preempting:
                if _hinges_on(cls.rep, v):
                    if cls.id not in presence:
                        presence[cls.id] = wm.new_presence(f"reprieve_beyond[{n},{level},{cls.id}]", [var],
                                                           wm.ub_of(cls.id, n))
                    over_lits[v.key].append(presence[cls.id])
            # Devices as room: a claim of v's given back to a placed pod with claims (``victim_room``).
            over_lits[v.key] += freed_reasons(wm, n, v, level, above)
            if over_lits[v.key]:
                m.add_bool_or(over_lits[v.key]).only_enforce_if(gone[v.key, level])
            else:
                m.add(gone[v.key, level] == 0)  # it asks for nothing the level's pods request


def _hinges_on(preemptor: PodInfo, victim: PodInfo) -> bool:
    """Whether ``preemptor``'s fit on the victim's node can hinge on ``victim`` beyond room and
    ports: the victim's own required anti-affinity matching it, the preemptor's required anti-affinity or
    hard spread counting it, or volume claims on both sides (ReadWriteOncePod, CSI counts)."""
    if any(PodMatcher.of_term(t).matches(preemptor) for t in victim.anti_affinity):
        return True
    if preemptor.claims and victim.claims:
        return True
    if any(PodMatcher.of_term(t).matches(victim) for t in preemptor.anti_affinity):
        return True
    return any(PodMatcher.of_spread(c.selector, preemptor.namespace).matches(victim) for c in preemptor.hard_spread)

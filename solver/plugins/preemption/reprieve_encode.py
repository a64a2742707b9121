"""kube-scheduler's reprieve in CP-SAT: the victims the model may choose are the ones
``SelectVictimsOnNode`` picks, priority level by priority level (issue 33).

The rule is the replay (``replay``): kube-scheduler's preemption on the plan's placements in queue
order. This encoding states it on each node, level by level. kube-scheduler takes the pods of one
priority one at a time, each reprieving beside the ones before it; the encoding does too where the
order of the level's pods on the node is known and they are at most ``MAX_TURNS`` (``_turns``,
``_encode_turns``: the same rows below, once per turn, with the level's pods up to that turn in
the base), and elsewhere takes them as one batch (where that evicts differently, the engine's cuts,
``solver/cpsat/kube_victims.py``, take over):

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

  read on the resources the level's pods request (the pod count included); a resource only some
  of them request is read where one of those is placed on the node (kube-scheduler's fit for a
  pod reads what it asks for), and at a turn only the turn's pod's resources are read.
* The plan evicts only what kube-scheduler evicts, and at that level:
  ``level[u, L] ≤ gone[u, L]`` (the model's ``evict_level``), so ``evict[u] ≤ Σ_L gone[u, L]``; the
  plan may keep a pod kube-scheduler evicts, the final capacity rows then holding it.

Host ports count too: a pod placed at or above ``L`` that wants a port ``u`` holds keeps ``u`` from
being reprieved. Where a rule beyond room may keep ``u`` out as well — a pod of priority ``L``
placed on the node whose required anti-affinity or hard spread counts ``u``, volume claims on
both sides, or ``u``'s own required anti-affinity (``_hinges_on``) — ``gone[u, L]`` is not
required to be for room; ``kept`` still requires room. Rules of other pods (placed above ``L``,
or on other nodes of a domain ``u`` is in) are no reason: kube-scheduler evicts at a pod's turn
only what keeps that pod off that node. Not weighed here (the cuts take them): what those rules decide.

A level whose pods on the node need, by required affinity, a lower pod there may come late
(``_may_come_late``): kube-scheduler's dry run takes that support off, so the turn evicts nothing
and the pods come after the lower levels' turns, which then do not see them. Where nothing else
can support such a pod (``_support_only_below``), its dry run surely fails: placed there, it either
fits as the node is or comes late; its level's turn evicts nothing for it.

The budgets are read as the window starts, but evictions before a level's turn (on other nodes, at
higher levels, for the level's earlier pods) may have spent them, and a pod the split calls safe
then counts as violating and moves ahead. Where that can happen (the split with every budget spent
as far as the window's preemptors could spend it calls the pod violating), the order is not fixed
and the encoding keeps only what holds in every order: ``kept`` requires room beside the pods
surely before, ``gone`` a lack of room beside the pods possibly before. So the model never refuses
a plan whose victims kube-scheduler's preemption picks with budgets spent; the replay's cuts
refuse what it would not pick.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Optional

import numpy as np
from ortools.sat.python import cp_model

from ...disruption import PdbBudgets
from ...info import PodInfo, queue_order_key
from ..shared.all_terms import AllTerms
from ..shared.host_ports import ports_conflict
from ..shared.preemption_rule import may_preempt
from ...state import PodMatcher
from .nominated import claims_of
from .victim_room import freed_reasons

if TYPE_CHECKING:
    from ...plugin_api import EncodeModel as WindowModel

_NOW = datetime.max.replace(tzinfo=timezone.utc)
# The most preemptors of one priority on a node whose turns the model states one by one
# (``_turns``); above it the level's pods there are reprieved as one batch (each turn costs the
# level's victims once more, per resource).
MAX_TURNS = 4


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
    spans = _QueueSpans()
    for n, victims in victims_on.items():
        _encode_node(wm, n, sorted(victims, key=_importance), made.add_node(wm.model, n), spans)
    return made


class _QueueSpans:
    """What the nodes' reprieves share, worked out once per model: per class, the queue order keys
    of its first and last pod (None for a class holding a gang's pods, which the queue moves to
    their group's place), and, per preemptor class and level, how many running pods in each domain
    support its required affinity (``support``)."""

    def __init__(self) -> None:
        self._memo: dict[int, Optional[tuple]] = {}
        self._support: dict[tuple[str, int], Optional[list]] = {}

    def support(self, wm: Any, rep: PodInfo, level: int) -> Optional[list]:
        """Per required affinity term of ``rep`` (a preemptor of priority ``level``), the node
        domains of its key and how many running pods matching all of ``rep``'s terms each domain
        holds; None where other support may come (``rep`` matches its own terms, or a window class
        of priority ``level`` or above matches them). Worked out once per class and level."""
        key = (rep.key, level)
        if key not in self._support:
            self._support[key] = self._count_support(wm, rep, level)
        return self._support[key]

    @staticmethod
    def _count_support(wm: Any, rep: PodInfo, level: int) -> Optional[list]:
        every = AllTerms(rep.affinity)
        if every.matches(rep) or any(cls.rep.priority >= level and every.matches(cls.rep) for cls in wm.classes):
            return None
        nodes = np.array([node for _, node in wm.state.pods_matching(every)], dtype=np.int64)
        out = []
        for term in rep.affinity:
            ids = wm.state.domains(term.topology_key)[0]
            at = ids[nodes]
            out.append((ids, np.bincount(at[at >= 0])))
        return out

    def span(self, cls: Any) -> Optional[tuple]:
        if cls.id not in self._memo:
            pods = cls.pods
            keys = sorted(queue_order_key(p) for p in pods)
            self._memo[cls.id] = None if any(p.group for p in pods) else (keys[0], keys[-1])
        return self._memo[cls.id]


def _encode_node(wm: WindowModel, n: int, victims: list[PodInfo], exact: Any, spans: _QueueSpans) -> None:
    """The reprieve on node ``n``, whose evictable running pods are ``victims`` (most important
    first)."""
    node = _NodeReprieve(wm, n, victims, exact, spans)
    for level in node.levels:
        node.encode_level(level)


class _NodeReprieve:
    """The reprieve on one node: its victims' ``gone[v, L]`` variables (made at construction) and
    what the node holds, shared by the levels' constraints."""

    def __init__(self, wm: WindowModel, n: int, victims: list[PodInfo], exact: Any, spans: _QueueSpans) -> None:
        self.wm, self.n, self.victims, self.spans = wm, n, victims, spans
        self.placed_here: dict[int, Any] = {}
        self.m, self.state = wm.model, wm.state
        m, state = self.m, self.state
        self.entries = wm.by_node[n]
        self.exact = exact
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
        self.late: dict[int, Any] = {}  # level -> "its preemptors here find no room at their turn"
        self.counted: dict[int, Any] = {}  # class id -> its count here as the lower levels see it
        for level in self.levels:
            self._may_come_late(level)

    def present(self, v: PodInfo, level: int):
        """1 − (v gone at a level above ``level``), as (vars, coeffs, constant)."""
        above = [self.gone[v.key, lv] for lv in self.lam[v.key] if lv > level]
        return above, [-1] * len(above), 1

    def _may_come_late(self, level: int) -> None:
        """A preemptor with required pod affinity whose only support on the node is a lower pod
        finds no room at its turn: kube-scheduler's dry run takes that support off with the other
        lower pods, so it evicts nothing, leaves the pod pending and retries it once later pods
        have made its room (and brought other support). Where the level has such classes here,
        ``late[L]`` lets the model say its pods come late: only such classes placed here, no
        evictions at the level's turn, and its pods absent from the turns of the lower levels
        (``_seen``). The replay judges whether the turn truly finds no room."""
        preemptors = [(cls, var) for cls, var in self.entries
                      if cls.rep.priority == level and cls.rep.may_preempt_others]
        below = {cls.id: self._lower_support(cls.rep, level) for cls, _ in preemptors}
        leaning = {cid for cid, count in below.items() if count}
        if not leaning:
            return
        m, wm, n = self.m, self.wm, self.n
        late = self.late[level] = m.new_bool_var(f"reprieve_late[{n},{level}]")
        for cls, var in preemptors:
            if cls.id not in leaning:
                m.add(var == 0).only_enforce_if(late)  # it would preempt at its turn
                continue
            seen = self.counted[cls.id] = m.new_int_var(0, wm.ub_of(cls.id, n), f"reprieve_seen[{n},{cls.id}]")
            m.add(seen == var).only_enforce_if(late.Not())
            m.add(seen == 0).only_enforce_if(late)
            if self._support_only_below(cls.rep, level, below[cls.id]):
                # Its dry run here surely fails: on time, its turn evicts nothing (it fits as the
                # node is, its support still there), or it comes late.
                here = wm.new_presence(f"reprieve_leaning[{n},{cls.id}]", [var], wm.ub_of(cls.id, n))
                for v in self.victims:
                    if level in self.lam[v.key]:
                        m.add_bool_or([self.gone[v.key, level].Not(), here.Not(), late, self.exact.Not()])

    def _lower_support(self, rep: PodInfo, level: int) -> int:
        """How many lower pods the level may evict on the node match all of ``rep``'s required
        affinity terms: the support its dry run here takes off (it leans on them when any)."""
        if not rep.affinity:
            return 0
        every = AllTerms(rep.affinity)
        return sum(1 for v in self.victims if v.priority < level and may_preempt(rep, v) and every.matches(v))

    def _support_only_below(self, rep: PodInfo, level: int, taken_off: int) -> bool:
        """Whether kube-scheduler's dry run for ``rep`` on the node surely leaves a required
        affinity term without support: every running pod that matches all its terms in that term's
        domain is one of the ``taken_off`` lower pods of the node the dry run takes off
        (``_lower_support``), and no window pod that may come before it (priority ``level`` or
        above) matches them. (A pod matching its own terms may pass as the first of its series:
        never said of it.)"""
        support = self.spans.support(self.wm, rep, level)
        if support is None:
            return False
        for ids, per_domain in support:
            d = int(ids[self.n])
            if d >= 0 and (d >= len(per_domain) or per_domain[d] <= taken_off):
                return True
        return False

    def _and(self, a: Any, b: Any, name: str) -> Any:
        """A literal equal to ``a`` and ``b``."""
        m = self.m
        both = m.new_bool_var(name)
        m.add_implication(both, a)
        m.add_implication(both, b)
        m.add_bool_or([a.Not(), b.Not(), both])
        return both

    def _seen(self, cls: Any, var: Any, level: int) -> Any:
        """``cls``'s count on the node as the turn of ``level`` sees it: without its pods where
        they come late (``_may_come_late``) at a level above."""
        seen = self.counted.get(cls.id)
        return var if seen is None or cls.rep.priority == level else seen

    def encode_level(self, level: int) -> None:
        """Level ``level``'s turn: its victims, in kube-scheduler's order, reprieved one by one
        while they fit back; evicted only when a pod placed at that priority may preempt."""
        m, wm, n, gone = self.m, self.wm, self.n, self.gone
        preemptors = [(cls, var) for cls, var in self.entries
                      if cls.rep.priority == level and cls.rep.may_preempt_others]
        here = [v for v in self.victims if level in self.lam[v.key]]
        if not here:
            return
        if not preemptors:
            for v in here:
                m.add(gone[v.key, level] == 0)
            return
        # kube-scheduler's order: those whose eviction would break a PodDisruptionBudget first.
        order = self._order(here)
        here = order.pods
        active = wm.new_presence(f"reprieve_active[{n},{level}]", [var for _, var in preemptors],
                                 sum(wm.ub_of(cls.id, n) for cls, _ in preemptors))
        late = self.late.get(level)
        on_time = None  # where the level may come late: "its pods here are on time"
        if late is not None:
            # The level's pods come late here: their turn evicts nothing.
            m.add_implication(late, active)  # (no pod of the level here: nothing to say)
            on_time = late.Not()
            active = self._and(active, on_time, f"reprieve_on_time[{n},{level}]")
        for v in here:
            m.add(gone[v.key, level] <= active)
        above = [(cls, self._seen(cls, var, level)) for cls, var in self.entries if cls.rep.priority >= level]
        claimed = self.claims.room(n, level, self.width) if self.claims else np.zeros(self.width, dtype=np.int64)
        turns = self._turns(level, above, order)
        if turns:
            self._encode_turns(level, turns, order, above, claimed, on_time)
            return
        requested = np.zeros(self.width, dtype=bool)
        for cls, _ in preemptors:
            requested |= wm.vec[cls.id] > 0
        reasons = self._beyond(level, here, above, preemptors)
        kept = self._kept(level, here, {v.key: [gone[v.key, level]] for v in here})
        # over[v]: the literals "with v back, resource r is over" (one per resource v asks for).
        over_lits: dict[str, list] = defaultdict(list)
        for r in np.flatnonzero(requested).tolist():
            # kube-scheduler's fit for a pod reads only what it asks for: a resource some of the
            # level's preemptors do not ask for counts only where one that does is placed.
            askers = [(cls, var) for cls, var in preemptors if wm.vec[cls.id][r] > 0]
            if len(askers) == len(preemptors):
                self._room(level, r, order, above, claimed, active, kept, over_lits)
                continue
            gate = (self._here(*askers[0]) if len(askers) == 1 else
                    wm.new_presence(f"reprieve_asks[{n},{level},{r}]", [var for _, var in askers],
                                    sum(wm.ub_of(cls.id, n) for cls, _ in askers)))
            if on_time is not None:
                gate = self._and(gate, on_time, f"reprieve_asks_on_time[{n},{level},{r}]")
            self._room(level, r, order, above, claimed, gate, kept, over_lits, gated=True)
        self._ports(level, here, above, active, kept, over_lits)
        for v in here:
            self._gone_for(gone[v.key, level], over_lits[v.key] + reasons[v.key])

    def _turns(self, level: int, above: list, order: "_Order") -> list[tuple]:
        """The level's preemptor turns on the node, in queue order, as (class, var, k, before):
        the k-th pod of ``class`` there, after every pod of the level's classes in ``before``
        (their counts are in its base). Empty: the level is reprieved as one batch.

        kube-scheduler reprieves at each preemptor's turn beside the preemptors before it, which
        can evict more than the batch (a pod kept at the first turn goes at the second, and a pod
        that fitted beside it goes at the first). Turns are stated where the order of the level's
        pods on the node is known whatever the counts: the level's classes there (preempting or
        not) never interleave in the queue and hold no gang's pods, at most ``MAX_TURNS``
        preemptors in all, and an order the budgets fix."""
        if order.unsure:
            return []
        level_classes = [(cls, var) for cls, var in above if cls.rep.priority == level]
        spanned: list[tuple[tuple, tuple]] = []
        for cls, var in level_classes:
            span = self.spans.span(cls)
            if span is None:
                return []
            spanned.append((span, (cls, var)))
        ranked = sorted(spanned, key=lambda item: item[0])
        if any(a[1] >= b[0] for (a, _), (b, _) in zip(ranked, ranked[1:])):
            return []  # two classes interleave: which pods land here decides the turns' order
        turns: list[tuple] = []
        before: list = []
        for _, (cls, var) in ranked:
            if cls.rep.may_preempt_others:
                turns += [(cls, var, k, list(before)) for k in range(1, self.wm.ub_of(cls.id, self.n) + 1)]
            before.append((cls, var))
        return turns if 2 <= len(turns) <= MAX_TURNS else []

    def _encode_turns(self, level: int, turns: list[tuple], order: "_Order", above: list,
                      claimed: np.ndarray, on_time: Any = None) -> None:
        """The level's reprieve turn by turn (``_turns``): at a turn (the k-th pod of a class,
        ``at``: at least k placed) the base holds the pods above the level, the level's classes
        before it and k pods of its class, and the victims still present are reprieved in
        kube-scheduler's order, on the resources that pod requests, for that pod's own rules;
        ``turn_gone[v][t]``: ``v`` goes at turn t. ``gone[v, L]`` is the sum over the turns.
        ``on_time``: where the level may come late (``_may_come_late``), the literal it does not;
        a turn is then taken only on time."""
        m, wm, n = self.m, self.wm, self.n
        at = []
        for cls, var, k, _ in turns:
            b = m.new_bool_var(f"reprieve_turn[{n},{level},{cls.id},{k}]")
            m.add(var >= k).only_enforce_if(b)
            m.add(var <= k - 1).only_enforce_if(b.Not())
            if on_time is not None:
                b = self._and(b, on_time, f"reprieve_turn_on_time[{n},{level},{cls.id},{k}]")
            at.append(b)
        higher = [(c, v) for c, v in above if c.rep.priority > level]
        turn_gone: dict[str, list] = {}
        for v in order.pods:
            lits = turn_gone[v.key] = [m.new_bool_var(f"reprieve_turn_gone[{v.key},{level},{t}]")
                                       for t in range(len(turns))]
            for lit, b in zip(lits, at):
                m.add_implication(lit, b)
            m.add(self.gone[v.key, level] == cp_model.LinearExpr.sum(lits))
        for t, (cls, var, k, before) in enumerate(turns):
            kept = self._kept(level, order.pods, {v.key: turn_gone[v.key][:t + 1] for v in order.pods}, f":{t}")
            # kube-scheduler's fit reads only what the turn's pod asks for (a resource another
            # class of the level requests may stay overcommitted), and at its turn only its own
            # rules, and the pods placed so far, are reasons to evict.
            placed = higher + before + [(cls, var)]
            over_lits: dict[str, list] = defaultdict(list)
            for r in np.flatnonzero(wm.vec[cls.id] > 0).tolist():
                self._room(level, r, order, higher + before, claimed, at[t], kept, over_lits,
                           extra=k * int(wm.vec[cls.id][r]), tag=f"{t}")
            self._ports(level, order.pods, placed, at[t], kept, over_lits)
            reasons = self._beyond(level, order.pods, placed, [(cls, var)])
            for v in order.pods:
                self._gone_for(turn_gone[v.key][t], over_lits[v.key] + reasons[v.key])

    def _gone_for(self, gone: Any, reasons: list) -> None:
        """``gone`` (a victim evicted at a level, or at one turn of it) only for one of ``reasons``,
        never when it has none."""
        if reasons:
            self.m.add_bool_or(reasons).only_enforce_if(gone)
        else:
            self.m.add(gone == 0)  # it asks for nothing the level's pods request

    def _here(self, cls: Any, var: Any) -> Any:
        """The literal "some pod of ``cls`` is placed on the node" (``var``: its count, or the
        count the lower levels see, ``_seen``), made once per node and count (read by the ports
        and the rules beyond room, at every level and turn)."""
        lit = self.placed_here.get(var.index)
        if lit is None:
            lit = self.placed_here[var.index] = self.wm.new_presence(f"reprieve_here[{self.n},{cls.id}]", [var],
                                                                     self.wm.ub_of(cls.id, self.n))
        return lit

    def _kept(self, level: int, here: list[PodInfo], taken: Mapping[str, list], tag: str = "") -> dict[str, Any]:
        """kept[v]: present at L's turn and not evicted by ``taken[v]`` (gone[v, L], or its
        turns so far): a bool var, or the negation of the one literal for a pod never gone
        before L."""
        m = self.m
        kept: dict[str, Any] = {}
        for v in here:
            vs, cs, const = self.present(v, level)
            lits = taken[v.key]
            if not vs and len(lits) == 1:  # never gone before L: kept is "not taken"
                kept[v.key] = lits[0].Not()
                continue
            k = kept[v.key] = m.new_bool_var(f"kept[{v.key},{level}{tag}]")
            m.add(k == cp_model.LinearExpr.weighted_sum(vs, cs) + const - cp_model.LinearExpr.sum(lits))
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

    def _order(self, here: list[PodInfo]) -> "_Order":
        """The level's victims in kube-scheduler's reprieve order, as far as the budgets fix it.
        The split reads the budgets as the window starts; evictions kube-scheduler makes before
        this turn (other nodes', earlier levels', the level's earlier pods') may have spent them,
        turning pods the split calls safe into violating ones, which moves them ahead. Which of
        those pods come first is then not known here: the encoding states only what holds in
        every such order (``_Order``), and the replay's cuts judge the rest."""
        violating, safe = self.budgets.split(here)
        if not safe or not self.budgets.budgets:
            return _Order(violating, safe)
        # The split again with every budget spent as far as it can be: pods safe at the start
        # that it calls violating may stand in either group.
        spent = self.budgets.split(here, spent=self._most_spent())[0]
        unsure = frozenset(v.key for v in spent) - {v.key for v in violating}
        return _Order(violating, safe, unsure)

    def _most_spent(self) -> list[int]:
        """Per budget, the most evictions before a turn may have spent of it: every running pod
        it covers that some window pod outranks (reached only if all of them go)."""
        ctx = self.wm.ctx
        top = max((cls.rep.priority for cls in ctx.classes if cls.rep.may_preempt_others), default=None)
        return self.budgets.spent_below(top, ctx.bound)

    def _room(self, level: int, r: int, order: "_Order", above: list, claimed: np.ndarray, active: Any,
              kept: dict[str, Any], over_lits: dict[str, list], extra: int = 0, tag: str = "",
              gated: bool = False) -> None:
        """Resource ``r`` at level L: each victim in turn is over when it does not fit back beside
        the base and the victims kept before it; one never fitting back is reprieved only
        without a turn. Where the order is not fixed (``_Order.unsure``), a victim is kept only
        if it fits beside those surely before it, and gone only if it does not fit beside those
        possibly before it. ``extra``: room the base holds beyond ``above`` (a turn's preemptors).
        ``active``: where ``r`` is read (a pod asking for it has its turn here); ``gated``: it is
        not implied by the victims' going, so "over" is a reason only together with it."""
        m, wm, n = self.m, self.wm, self.n
        vars_, coeffs, const = self._base(level, r, above, claimed)
        const += extra
        cap = int(self.alloc[r])
        # The sum's range (placed counts up to their bounds; pods gone above L free room).
        hi0 = const + sum(c * wm.ub_of(cls.id, n) for (cls, _), c in zip(above, coeffs))
        lo = const + sum(c for c in coeffs[len(above):] if c < 0)
        amounts = {v.key: int(self.state.vector(v)[r]) for v in order.pods}
        # A pod that may not preempt (``preemptionPolicy: Never``, or nominated and waiting for
        # its victims) is at the turn only if it fitted at its own: one that fits only once this
        # level's victims are gone came (in the final state) after the turn. Either may hold, so
        # with such pods placed here a victim is kept only if it fits beside the others (``sure``),
        # and gone only if it does not fit beside them all (found by the long exhaustive-optimum
        # run: a Never pod placed in the room a later preemptor freed, which the batch counted at
        # that preemptor's turn).
        unsure = any(not cls.rep.may_preempt_others for cls, _ in above)
        if unsure:
            sure_above = [(cls, var) for cls, var in above if cls.rep.may_preempt_others]
            s_vars, s_coeffs, s_const = self._base(level, r, sure_above, claimed)
            s_const += extra
            s_hi0 = s_const + sum(c * wm.ub_of(cls.id, n) for (cls, _), c in zip(sure_above, s_coeffs))
        else:
            s_vars, s_coeffs, s_const, s_hi0 = vars_, coeffs, const, hi0

        def prefix(before: list[PodInfo]) -> tuple[list, list[int], int]:
            keys = [w.key for w in before if amounts[w.key]]
            return [kept[k] for k in keys], [amounts[k] for k in keys], hi0 + sum(amounts[k] for k in keys)

        def expr(more_vars: list, more_coeffs: list[int], amount: int):
            return cp_model.LinearExpr.weighted_sum(vars_ + more_vars, coeffs + more_coeffs) + const + amount

        def sure_expr(more_vars: list, more_coeffs: list[int], amount: int):
            return cp_model.LinearExpr.weighted_sum(s_vars + more_vars, s_coeffs + more_coeffs) + s_const + amount

        run_vars: list = []  # the victims before v in the split's order (where it is fixed) ...
        run_coeffs: list[int] = []
        run_hi = hi0  # ... and the sum's top with them back
        for v in order.pods:
            amount = amounts[v.key]
            in_order = order.fixed(v)
            fixed = in_order and not unsure  # "kept" and "over" then read the same sum
            sure = (run_vars, run_coeffs, run_hi) if in_order else prefix(order.surely_before(v))
            maybe = sure if in_order else prefix(order.possibly_before(v))
            if amount:
                run_vars, run_coeffs, run_hi = run_vars + [kept[v.key]], run_coeffs + [amount], run_hi + amount
            if not amount or maybe[2] + amount <= cap:
                continue  # v always fits back on r: nothing to state
            if lo + amount > cap:
                # v never fits back on r at this level: reprieved only without a turn.
                m.add_implication(kept[v.key], active.Not())
                over_lits[v.key].append(active)
                continue
            over = m.new_bool_var(f"reprieve_over[{n},{level}{tag and ':' + tag},{r},{v.key}]")
            m.add(expr(maybe[0], maybe[1], amount) >= cap + 1).only_enforce_if(over)
            if gated:
                reason = m.new_bool_var(f"reprieve_over_read[{n},{level},{r},{v.key}]")
                m.add_implication(reason, over)
                m.add_implication(reason, active)
                over_lits[v.key].append(reason)
            else:
                over_lits[v.key].append(over)
            if fixed:
                m.add(expr(maybe[0], maybe[1], amount) <= cap).only_enforce_if(over.Not())
                m.add_bool_or([kept[v.key].Not(), active.Not(), over.Not()])
            elif sure[2] - (hi0 - s_hi0) + amount > cap:  # (the sure sum's top)
                m.add(sure_expr(sure[0], sure[1], amount) <= cap).only_enforce_if([kept[v.key], active])

    def _ports(self, level: int, here: list[PodInfo], above: list, active: Any, kept: dict[str, Any],
               over_lits: dict[str, list]) -> None:
        """Host ports: a pod placed at or above L that wants a port v holds keeps v out."""
        for v in here:
            if not v.host_ports:
                continue
            for cls, var in above:
                if cls.rep.host_ports and ports_conflict(cls.rep.host_ports, v.host_ports):
                    # A pod placed at or above L wants a port v holds: v is never reprieved there.
                    if not cls.rep.may_preempt_others:
                        # One that may not preempt fits at its turn only as the node stands, so
                        # it is not there while v holds the port: it comes after v is gone (no
                        # bar on keeping v, and no reason to evict it).
                        continue
                    there = self._here(cls, var)
                    self.m.add_implication(there, kept[v.key].Not()).only_enforce_if(active)
                    over_lits[v.key].append(there)

    def _beyond(self, level: int, here: list[PodInfo], above: list, preempting: list) -> dict[str, list]:
        """Why each victim may be gone at L beside room and ports: rules beyond the node of the
        ``preempting`` classes, devices given back to the pods placed (``above``)."""
        wm, n = self.wm, self.n
        # At L's turn a pod of priority L evicts a victim only so that it fits the node itself:
        # beyond room and ports, only through a rule of its own that reads the victim (its
        # anti-affinity or hard spread matches it, or both hold volume claims), or the victim's
        # own anti-affinity. A rule of some other pod — placed above L, or elsewhere in a domain
        # the victim shares — is judged at that pod's turn, on its node, and is no reason here.
        reasons: dict[str, list] = {}
        for v in here:
            lits = reasons[v.key] = [self._here(cls, var) for cls, var in preempting if _hinges_on(cls.rep, v)]
            # Devices as room: a claim of v's given back to a placed pod with claims (``victim_room``).
            lits += freed_reasons(wm, n, v, level, above)
        return reasons


class _Order:
    """A level's victims in kube-scheduler's reprieve order: those whose eviction breaks a budget
    first, each group the most important first. ``unsure``: pods the budgets as the window starts
    call safe that evictions before the turn may make violating; such a pod may stand in either
    group, so which pods come before it (and it before them) is known only where both agree."""

    def __init__(self, violating: list[PodInfo], safe: list[PodInfo], unsure: frozenset[str] = frozenset()) -> None:
        self.pods = violating + safe
        self.unsure = unsure
        self._violating = {v.key for v in violating}
        self._rank = {v.key: i for i, v in enumerate(sorted(self.pods, key=_importance))}
        # Per victim, (surely before, possibly before): asked once per resource, made once.
        self._before: dict[str, tuple[list[PodInfo], list[PodInfo]]] = {}

    def fixed(self, v: PodInfo) -> bool:
        """Whether the pods before ``v`` are the same in every order the budgets allow."""
        if not self.unsure:
            return True
        sure, maybe = self._before_of(v)
        return len(sure) == len(maybe)

    def surely_before(self, v: PodInfo) -> list[PodInfo]:
        if not self.unsure:
            return self.pods[:self.pods.index(v)]
        return self._before_of(v)[0]

    def possibly_before(self, v: PodInfo) -> list[PodInfo]:
        return self._before_of(v)[1]

    def _before_of(self, v: PodInfo) -> tuple[list[PodInfo], list[PodInfo]]:
        hit = self._before.get(v.key)
        if hit is None:
            others = [w for w in self.pods if w is not v]
            hit = self._before[v.key] = ([w for w in others if self._surely(w, v)],
                                         [w for w in others if self._maybe(w, v)])
        return hit

    def _groups(self, v: PodInfo) -> tuple[bool, ...]:
        """The groups ``v`` may stand in (True: violating)."""
        return (True, False) if v.key in self.unsure else (v.key in self._violating,)

    def _surely(self, w: PodInfo, v: PodInfo) -> bool:
        return all(self._ahead(gw, w, gv, v) for gw in self._groups(w) for gv in self._groups(v))

    def _maybe(self, w: PodInfo, v: PodInfo) -> bool:
        return any(self._ahead(gw, w, gv, v) for gw in self._groups(w) for gv in self._groups(v))

    def _ahead(self, gw: bool, w: PodInfo, gv: bool, v: PodInfo) -> bool:
        """Whether ``w`` in group ``gw`` comes before ``v`` in group ``gv``."""
        return gw if gw != gv else self._rank[w.key] < self._rank[v.key]


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

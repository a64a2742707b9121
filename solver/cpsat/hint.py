"""Starting points for CP-SAT.

The greedy plan is the natural hint (DESIGN.md: greedy first, as the solver's start). When a
window is so large that waiting for greedy would eat the time limit, the engine instead builds
the model first and hints a vectorised first fit: the classes no coupling rule touches are
packed, in priority order, onto their candidate nodes in node order; every other class is hinted
empty. That hint satisfies every constraint by construction, so the solver starts feasible.

Greedy takes gangs first come, first served and spreads their members (LeastAllocated), which
can leave far fewer pods placed than the window allows. ``packing_counts`` is a second opinion
for the classes without host ports, required pod affinity or hard spread: whole gangs and plain
pods, higher priority first and smaller pods first within a priority, each pod best fit, with
required anti-affinity followed as it goes (``_AntiBook``) — best fit puts an exclusive pod
where little else would fit, which is what a window of anti-affine pods needs and greedy's
LeastAllocated does not do. The engine hints whichever of the two places more (by priority
tier); the packing is checked by ``complete`` like any hint. A gang with required topology is
packed into one domain of its key, the tightest that takes it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

import numpy as np
from ortools.sat.python import cp_model

from .. import interrupt
from ..plugin_api import Coupling, HintsItself, PackingBook, PacksWhole, Relaxable, term_owners
from ..plugins import registry
from ..plugins.registry import per_node_state
from ..plugins.registry import copies as room_copies, fits as room_fits
from ..greedy import GreedyResult
from ..state import PodMatcher
from .model import HintSolution
from .symmetry import canonical

if TYPE_CHECKING:
    from ..context import PodClass
    from .model import WindowModel


def greedy_counts(wm: WindowModel, greedy: GreedyResult, ctx) -> dict[tuple[int, int], int]:
    """Greedy's plan as pods per (model class, node)."""
    counts: dict[tuple[int, int], int] = {}
    for key, node in greedy.placements.items():
        pod = ctx.pod(key)
        if pod is not None:
            c = wm.class_of(pod)
            counts[c, node] = counts.get((c, node), 0) + 1
    return counts


def greedy_hint(wm: WindowModel, greedy: GreedyResult, ctx, counts: Optional[dict[tuple[int, int], int]] = None) -> None:
    """Hint greedy's plan (``counts``: its ``greedy_counts``, when already at hand)."""
    counts = greedy_counts(wm, greedy, ctx) if counts is None else counts
    levels = {v.pod.key: ctx.pod(v.preemptor).priority for v in greedy.victims}
    _apply(wm, counts, set(levels), greedy.placements, levels)


def _coupled(wm: WindowModel, cls) -> bool:
    """Some rule ties the class's pods to other pods (``registry.coupling``): not first fit."""
    return registry.coupling(cls.rep, wm.state) > Coupling.NONE


def first_fit_counts(wm: WindowModel) -> dict[tuple[int, int], int]:
    free = wm.ctx.claims.withheld(wm.state.free)
    counts: dict[tuple[int, int], int] = {}
    for cls in sorted(wm.classes, key=lambda c: (-c.rep.priority, c.id)):
        entries = wm.by_class.get(cls.id)
        if not entries or _coupled(wm, cls):
            continue
        nodes = np.fromiter((n for n, _ in entries), dtype=np.int64, count=len(entries))
        ubs = np.fromiter((wm.ub_of(cls.id, n) for n, _ in entries), dtype=np.int64, count=len(entries))
        vec = wm.vec[cls.id]
        room = np.minimum(room_copies(vec, free[nodes]), ubs)
        before = np.concatenate(([0], np.cumsum(room)[:-1]))
        take = np.clip(np.minimum(room, cls.size - before), 0, None)
        free[nodes] -= take[:, None] * vec
        for n, k in zip(nodes[take > 0].tolist(), take[take > 0].tolist()):
            counts[cls.id, n] = k
    return counts


def _left_out_of_packing(cls, books: list[tuple[str, PackingBook]]) -> bool:
    """Rules the packing does not follow: the class is left out of it (any rule keeping state per
    node for it, ``Plugin.per_node_state``: one volume per claim, ReadWriteOncePod, per-node CSI
    counts, devices), except where a rule's ``PackingBook`` counts it exactly (devices, where
    exact). Required anti-affinity it follows (``_AntiBook``), in both directions and over any
    topology key."""
    rep = cls.rep
    if rep.host_ports or rep.affinity or rep.hard_spread:
        return True
    counted = tuple(name for name, book in books if book.counts(cls.id))
    return per_node_state(rep, besides=counted)


def _cap(books: list[PackingBook], c: int, i: int) -> int:
    """The pods more of class ``c`` on its ``i``-th candidate that every book allows."""
    return min(book.cap(c, i) for book in books)


class _AntiBook:
    """Required anti-affinity for the packing, kept per topology domain as pods are packed.

    For every term in play (the window classes' own and the running pods'): per domain, the
    pods that match it and the pods that own it. A pod may go to a node unless the node's
    domain holds a pod one of its own terms matches, or a pod owning a term that matches it —
    InterPodAffinity's two anti-affinity checks, on the same counts (a node without the key is
    outside every domain of it). The packing evicts nothing, so the running pods all stay."""

    def __init__(self, wm: WindowModel) -> None:
        state = wm.state
        held = term_owners(state)  # running pods' terms, with their owners per node
        terms = {t for c in wm.classes for t in c.rep.anti_affinity} | set(held)
        self.ids: dict = {}
        self.size: dict = {}
        self.matching: dict = {}  # term -> pods matching it, per domain
        self.owning: dict = {}  # term -> pods owning it, per domain
        for t in terms:
            ids, values = state.domains(t.topology_key)
            has = ids >= 0
            self.ids[t] = ids
            self.size[t] = np.bincount(ids[has], minlength=len(values))  # nodes per domain

            def per_domain(per_node: np.ndarray) -> np.ndarray:
                return np.bincount(ids[has], weights=per_node[has], minlength=len(values)).astype(np.int64)

            self.matching[t] = per_domain(state.match_counts(PodMatcher.of_term(t)))
            owners = held.get(t)
            self.owning[t] = per_domain(owners) if owners is not None else np.zeros(len(values), dtype=np.int64)
        self.own = {c.id: c.rep.anti_affinity for c in wm.classes}
        self.hit_by = {c.id: tuple(t for t in terms if t.matches(c.rep.namespace, c.rep.labels, c.rep.ns_labels))
                       for c in wm.classes}

    def involves(self, c: int) -> bool:
        return bool(self.own[c] or self.hit_by[c])

    def allowed(self, c: int, nodes: np.ndarray) -> np.ndarray:
        ok = np.ones(len(nodes), dtype=bool)
        for table, terms in ((self.matching, self.own[c]), (self.owning, self.hit_by[c])):
            for t in terms:
                dom = self.ids[t][nodes]
                has = dom >= 0
                if len(table[t]):
                    ok &= ~(has & (table[t][np.where(has, dom, 0)] > 0))
        return ok

    def add(self, c: int, node: int, delta: int = 1) -> bool:
        """Count a pod of class ``c`` on ``node`` (or take it back); whether a domain it touched
        holds other nodes too (then more than this node may have closed)."""
        wide = False
        for table, terms in ((self.matching, self.hit_by[c]), (self.owning, self.own[c])):
            for t in terms:
                d = self.ids[t][node]
                if d >= 0:
                    table[t][d] += delta
                    wide = wide or self.size[t][d] > 1
        return wide


def packing_counts(wm: WindowModel) -> dict[tuple[int, int], int]:
    """Whole gangs and plain pods of the uncoupled classes, best fit (see the module note).

    Every other class is left empty. A gang whose members cannot reach its ``need`` is taken
    back out; an elastic gang keeps every member that fits. A gang with required topology tries
    the domains of its key whose free room could hold it, the tightest first, and stays in the
    first that takes ``need`` of its members."""
    return _Packing(wm).counts()


class _Packing:
    """The best-fit walk of ``packing_counts``: the room left on every node, the pods taken per
    class and candidate, and the books (devices, required anti-affinity) that follow each pod
    placed, shared by the steps below."""

    def __init__(self, wm: WindowModel) -> None:
        self.wm = wm
        state = wm.state
        self.free = wm.ctx.claims.withheld(state.free)
        self.scale = np.maximum(state.alloc.max(axis=0), 1)
        named_books = [(name, make(wm)) for name, make in registry.PACKING_BOOKS]
        self.books = [book for _, book in named_books]
        self.units = self._units(named_books)
        self.nodes, self.ubs = wm.cand, wm.ub  # per class, in the order of its variables
        self.taken = {c.id: np.zeros(len(self.nodes[c.id]), dtype=np.int64) for c in wm.classes}
        self.book = _AntiBook(wm) if any(c.rep.anti_affinity for c in wm.classes) or term_owners(state) else None

    def _units(self, named_books: list[tuple[str, PackingBook]]
               ) -> list[tuple[int, float, int, int, list[tuple[PodClass, int]], Any]]:
        """What to pack, in packing order: (priority, share per pod, first pod's queue position,
        need, [(class, count)], where: None for any node, else (free) -> the node masks to try in
        turn). A gang gives the units of its ``packing_units``; every other class with variables
        is one unit of all its pods. Higher priority first, then the smaller pods."""
        wm = self.wm
        skip = {c.id for c in wm.classes if _left_out_of_packing(c, named_books)}
        units: list[tuple[int, float, int, int, list[tuple[PodClass, int]], Any]] = []
        in_unit: set[int] = set()
        whole = [enc for enc in wm.encodings.values() if isinstance(enc, PacksWhole)]  # gangs
        for enc in whole:
            for need, members, repeats, where in enc.packing_units(wm):
                in_unit.update(c.id for c, _ in members)
                if any(c.id in skip for c, _ in members):
                    continue
                pods = sum(k for _, k in members)
                share = sum(k * float((wm.vec[c.id] / self.scale).max()) for c, k in members) / max(pods, 1)
                first = min(c.id for c, _ in members)
                units.extend((members[0][0].rep.priority, share, first, need, members, where) for _ in range(repeats))
        for cls in wm.classes:
            if cls.id in in_unit or cls.id in skip or any(enc.packing_leaves_out(wm, cls) for enc in whole) \
                    or not wm.by_class.get(cls.id):
                continue
            units.append((cls.rep.priority, float((wm.vec[cls.id] / self.scale).max()), cls.id, 0, [(cls, cls.size)],
                          None))
        units.sort(key=lambda u: (-u[0], u[1], u[2]))
        return units

    def counts(self) -> dict[tuple[int, int], int]:
        """Pack the units in turn; a unit that places fewer than its ``need`` is taken back out.
        The pods placed, per (class id, node)."""
        counts: dict[tuple[int, int], int] = {}
        for _, _, _, need, members, where in self.units:
            placed = self._place_unit(need, members, where)
            if len(placed) < need:
                self.undo(placed)
                continue
            for c, i in placed:
                key_ = (c, int(self.nodes[c][i]))
                counts[key_] = counts.get(key_, 0) + 1
        return counts

    def _place_unit(self, need: int, members: list[tuple[PodClass, int]], where: Any) -> list[tuple[int, int]]:
        """One unit best fit: anywhere, or in the first of its domains (``where``) that takes
        ``need`` of its pods (at least one), the others' attempts undone."""
        if where is None:
            return self.place(members, None)
        placed: list[tuple[int, int]] = []
        for within in where(self.free):
            placed = self.place(members, within)
            if len(placed) >= max(need, 1):
                break
            self.undo(placed)
            placed = []
        return placed

    def place(self, members: list[tuple[PodClass, int]], within: Optional[np.ndarray]) -> list[tuple[int, int]]:
        """Best fit of a unit's pods (onto nodes of ``within`` only, when given): the (class id,
        position in its candidate list) of each pod placed."""
        placed: list[tuple[int, int]] = []
        for cls, k in members:
            self._place_class(cls, k, within, placed)
        return placed

    def _place_class(self, cls: PodClass, k: int, within: Optional[np.ndarray], placed: list[tuple[int, int]]) -> None:
        """Best fit of ``k`` pods of ``cls`` one node at a time, each (class id, position) placed
        appended to ``placed``; stops when no candidate is left."""
        wm, free, scale, book, taken, ubs = self.wm, self.free, self.scale, self.book, self.taken, self.ubs
        cand, vec = self.nodes[cls.id], wm.vec[cls.id]
        if not len(cand) or not vec.any():
            return
        cols = np.flatnonzero(vec)
        anti = book is not None and book.involves(cls.id)
        room = free[np.ix_(cand, cols)] - vec[cols]  # per candidate, what one more pod leaves
        ok = room_fits(vec, free[cand]) & (taken[cls.id] < ubs[cls.id])
        if within is not None:
            ok &= within[cand]
        if anti:
            assert book is not None  # anti implies a book
            ok &= book.allowed(cls.id, cand)
        counting = [b for b in self.books if b.counts(cls.id)]  # devices, counted exactly
        if counting:
            cap = np.fromiter((_cap(counting, cls.id, i) for i in range(len(cand))), dtype=np.int64, count=len(cand))
            ok &= cap > 0
        left = np.where(ok, (room / scale[cols]).max(axis=1), np.inf)
        while k > 0:
            i = int(left.argmin())  # best fit: the node this pod fills most ...
            if not ok[i]:
                break
            # ... and as many of the unit's pods of this class as fit there (one at a time
            # under anti-affinity: each may close the domain to the next).
            here = 1 if anti else min(k, int(ubs[cls.id][i] - taken[cls.id][i]),
                                      int(room_copies(vec, free[cand[i]])))
            if counting:
                here = min(here, int(cap[i]))
                for b in counting:
                    b.take(cls.id, i, here)
                cap[i] = _cap(counting, cls.id, i)
            free[cand[i]] -= here * vec
            taken[cls.id][i] += here
            placed.extend([(cls.id, i)] * here)
            k -= here
            # Only this node changed (and, under anti-affinity, its domains): refresh its
            # entry, or the whole mask when a domain spans more nodes than this one.
            r = free[cand[i], cols] - vec[cols]  # what one more pod would leave
            ok[i] = bool(room_fits(vec, free[cand[i]])) and taken[cls.id][i] < ubs[cls.id][i]
            if counting:
                ok[i] = ok[i] and cap[i] > 0
            if anti:
                assert book is not None
                if book.add(cls.id, int(cand[i])):
                    ok &= book.allowed(cls.id, cand)
                    left[~ok] = np.inf
                else:
                    ok[i] = ok[i] and bool(book.allowed(cls.id, cand[i:i + 1])[0])
            left[i] = float((r / scale[cols]).max()) if ok[i] else np.inf

    def undo(self, placed: list[tuple[int, int]]) -> None:
        """Take placed pods back out: their room, counts and book entries."""
        wm, nodes = self.wm, self.nodes
        for c, i in placed:
            self.free[nodes[c][i]] += wm.vec[c]
            self.taken[c][i] -= 1
            for b in self.books:
                if b.counts(c):
                    b.take(c, i, -1)
            if self.book is not None and self.book.involves(c):
                self.book.add(c, int(nodes[c][i]), -1)


def counts_value(wm: WindowModel, counts: dict[tuple[int, int], int], weights: dict[int, int]) -> int:
    """Placement value of counts, over the model's classes: pods placed, weighted by priority tier."""
    priority = {c.id: c.rep.priority for c in wm.classes}
    return sum(weights[priority[c]] * k for (c, _), k in counts.items() if c in priority)


def _apply(wm: WindowModel, counts: dict[tuple[int, int], int], evicted: set[str], placements=None,
           levels: Optional[dict[str, int]] = None) -> dict[tuple[int, int], int]:
    """Hint these counts (permuted to the symmetry break's order, which is returned), these
    evictions (at these ``levels``: victim -> its preemptor's priority), and the gangs of each kind that run (from ``placements``, else from the counts)."""
    counts = canonical(wm, counts)
    for (c, n), var in interrupt.checked(wm.x.items(), every=8192):
        wm.model.add_hint(var, counts.get((c, n), 0))
    placed: dict[int, int] = {}
    for (c, _), k in counts.items():
        placed[c] = placed.get(c, 0) + k
    for c, placed_var in wm.placed.items():
        if not isinstance(placed_var, int):
            wm.model.add_hint(placed_var, placed.get(c, 0))
    for key, var in wm.evict.items():
        wm.model.add_hint(var, 1 if key in evicted else 0)
        lams = wm.evict_level[key]
        if len(lams) > 1:
            for level, lam in lams.items():
                wm.model.add_hint(lam, 1 if key in evicted and (levels or {}).get(key) == level else 0)
    by_class: dict[int, list[tuple[int, int]]] = {}
    for (c, n), k in counts.items():
        if k:
            by_class.setdefault(c, []).append((n, k))
    for enc in wm.encodings.values():  # gangs: how many of each kind run
        if isinstance(enc, HintsItself):
            enc.hint(wm, by_class, placed, placements)
    return counts


def solve_hinted(model: cp_model.CpModel, budget: float) -> tuple[int, cp_model.CpSolver]:
    """Solve ``model`` with its hinted variables fixed (a propagation exercise: one worker, no
    presolve, the first solution): CP-SAT's status and the solver holding its answer."""
    solver = interrupt.new_solver()
    params = solver.parameters
    params.fix_variables_to_their_hinted_value = True
    params.max_time_in_seconds = max(budget, 0.01)
    params.num_workers = 1
    params.stop_after_first_solution = True
    params.cp_model_presolve = False
    with interrupt.stoppable(solver):
        status = solver.solve(model)
    interrupt.check()
    return status, solver


def complete(wm: WindowModel, budget: float) -> Optional[bool]:
    """Extend the hint on placements and evictions to every variable of the model.

    The hint names x, placed and evict only; the auxiliary variables (presence flags, domain
    counts, minima, seeds) are left for CP-SAT to fill in by search, which a starved machine may
    not finish within the limit. A solve with the hinted variables fixed is a propagation
    exercise; its answer becomes the hint for every variable. Returns whether it succeeded
    (if not, the partial hint stays as it was), or None if the hint is infeasible."""
    status, solver = solve_hinted(wm.model, budget)
    if status == cp_model.INFEASIBLE:
        return None
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return False
    wm.model.clear_hints()
    proto = wm.model.Proto()
    for index in range(len(proto.variables)):
        var = wm.model.get_int_var_from_proto_index(index)
        wm.model.add_hint(var, solver.value(var))
    wm.hint_complete = True
    return True


def best_hint(wm: WindowModel, greedy: Optional[GreedyResult], ctx, weights: dict[int, int], budget: float,
              admit: bool = True) -> str:
    """Hint the better of greedy's plan (or, without it, first fit) and the packing (kept in
    ``wm.hint_solution`` when it wins). With greedy's plan at hand the hint is completed to every
    variable (``complete``); a packing the model rejects gives way to greedy's plan. Returns
    which hint stands."""
    interrupt.check()
    packed = packing_counts(wm)
    value = counts_value(wm, packed, weights)
    other = first_fit_counts(wm) if greedy is None else greedy_counts(wm, greedy, ctx)
    if value > counts_value(wm, other, weights):
        wm.hint_solution = HintSolution(wm, _apply(wm, packed, set()), value)
        # Completed, the packing is a solution CP-SAT starts from; left partial, a large model
        # may find no solution at all in its time (5,000 nodes of anti-affinity did not).
        done = complete(wm, budget)
        if done is not None:  # out of time to complete it is still the better start
            return "packing (completed)" if done else "packing"
        wm.model.clear_hints()  # the model rejects the packing
        wm.hint_solution = None
    if greedy is None:
        _apply(wm, other, set())
        return "first fit"
    greedy_hint(wm, greedy, ctx, other)
    done = complete(wm, budget)
    if done is None and admit and _admit_greedy(wm, greedy, other):
        wm.model.clear_hints()  # a refused completion leaves greedy's partial hint in place
        greedy_hint(wm, greedy, ctx, other)
        done = complete(wm, budget)
        if done is not None:
            return "greedy plan (completed, its evictions admitted)" if done else "greedy plan (its evictions admitted)"
    return "greedy plan (completed)" if done else "greedy plan" + (" (infeasible)" if done is None else "")


def _admit_greedy(wm: WindowModel, greedy: GreedyResult, counts: dict[tuple[int, int], int]) -> bool:
    """Admit greedy's own evictions beside the model's batch reprieve (``plugin_api.Relaxable``)
    on the nodes it evicts from, for its configuration there. Greedy evicts as kube-scheduler
    does, one pod at a time, which the batch can refuse (three victims where the batch keeps one,
    and the pods after the preemptors in their room); its plan is the bar the solver must not fall
    below, so the model must hold it. Whether anything was admitted."""
    victims: dict[int, set[str]] = {}
    for v in greedy.victims:
        victims.setdefault(v.node, set()).add(v.pod.key)
    relaxable = [enc for enc in wm.encodings.values() if isinstance(enc, Relaxable)]
    if not victims or not relaxable:
        return False
    for enc in relaxable:
        enc.admit(wm, counts, victims)
    return True
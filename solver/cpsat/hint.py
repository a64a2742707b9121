"""Starting points for CP-SAT.

The greedy plan is the natural hint (DESIGN.md: greedy first, as the solver's start). When a
window is so large that waiting for greedy would eat the time limit, the engine instead builds
the model first and hints a vectorised first fit: the classes no coupling rule touches are
packed, in priority order, onto their candidate nodes in node order; every other class is hinted
empty. That hint satisfies every constraint by construction, so the solver starts feasible.
"""

from __future__ import annotations

import numpy as np
from ortools.sat.python import cp_model

from ..gang import runs_in
from ..greedy import GreedyResult
from .symmetry import canonical


def greedy_hint(wm, greedy: GreedyResult, ctx) -> None:
    counts: dict[tuple[int, int], int] = {}
    for key, node in greedy.placements.items():
        pod = ctx.pod(key)
        if pod is not None:
            c = wm.class_of(pod)
            counts[c, node] = counts.get((c, node), 0) + 1
    evicted = {v.pod.key for v in greedy.victims}
    _apply(wm, counts, evicted, greedy.placements)


def _coupled(wm, cls) -> bool:
    rep = cls.rep
    if rep.host_ports or rep.affinity or rep.anti_affinity or rep.hard_spread or rep.group:
        return True
    return any(term.matches(rep.namespace, rep.labels, rep.ns_labels) for term in wm.state.anti_owners)


def first_fit_hint(wm) -> None:
    free = wm.state.free.copy()
    counts: dict[tuple[int, int], int] = {}
    for cls in sorted(wm.classes, key=lambda c: (-c.rep.priority, c.id)):
        entries = wm.by_class.get(cls.id)
        if not entries or _coupled(wm, cls):
            continue
        nodes = np.fromiter((n for n, _ in entries), dtype=np.int64, count=len(entries))
        ubs = np.fromiter((wm.ub_of(cls.id, n) for n, _ in entries), dtype=np.int64, count=len(entries))
        vec = wm.vec[cls.id]
        cols = np.flatnonzero(vec)
        room = (free[np.ix_(nodes, cols)] // vec[cols]).min(axis=1)
        room = np.clip(np.minimum(room, ubs), 0, None)
        before = np.concatenate(([0], np.cumsum(room)[:-1]))
        take = np.clip(np.minimum(room, cls.size - before), 0, None)
        free[nodes] -= take[:, None] * vec
        for n, k in zip(nodes[take > 0].tolist(), take[take > 0].tolist()):
            counts[cls.id, n] = k
    _apply(wm, counts, set())


def _apply(wm, counts: dict[tuple[int, int], int], evicted: set[str], placements=None) -> None:
    """Hint these counts (permuted to the symmetry break's order), these evictions, and the
    gangs of each kind that run (from ``placements``, else from the counts)."""
    counts = canonical(wm, counts)
    for (c, n), var in wm.x.items():
        wm.model.add_hint(var, counts.get((c, n), 0))
    placed: dict[int, int] = {}
    for (c, _), k in counts.items():
        placed[c] = placed.get(c, 0) + k
    for c, var in wm.placed.items():
        if not isinstance(var, int):
            wm.model.add_hint(var, placed.get(c, 0))
    for key, var in wm.evict.items():
        wm.model.add_hint(var, 1 if key in evicted else 0)
    for kind, var in wm.gang_runs:
        if placements is not None:
            runs = runs_in(kind, placements)
        else:  # counts built whole gang by whole gang: the fewest gangs that hold them
            runs = kind.runs_needed({c.id: placed.get(c.id, 0) for c in kind.classes})
        wm.model.add_hint(var, runs)


def complete(wm, budget: float) -> bool:
    """Extend the hint on placements and evictions to every variable of the model.

    The hint names x, placed and evict only; the auxiliary variables (presence flags, domain
    counts, minima, seeds) are left for CP-SAT to fill in by search, which a starved machine may
    not finish within the limit. A solve with the hinted variables fixed is a propagation
    exercise; its answer becomes the hint for every variable. Returns whether it succeeded
    (if not, the partial hint stays as it was)."""
    solver = cp_model.CpSolver()
    params = solver.parameters
    params.fix_variables_to_their_hinted_value = True
    params.max_time_in_seconds = max(budget, 0.01)
    params.num_workers = 1
    params.stop_after_first_solution = True
    params.cp_model_presolve = False
    status = solver.solve(wm.model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return False
    wm.model.clear_hints()
    proto = wm.model.Proto()
    for index in range(len(proto.variables)):
        var = wm.model.get_int_var_from_proto_index(index)
        wm.model.add_hint(var, solver.value(var))
    return True

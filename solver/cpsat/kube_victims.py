"""Only evictions kube-scheduler's own preemption would make: the replay's verdicts as lazy
constraints (issue 33).

The model's eviction rule (``victim_room``, read on the final state) admits plans whose victims
kube-scheduler, taking the pods one at a time in queue order, would keep (it evicts another pod, or
none). Which pods kube-scheduler evicts on a node follows from the pods placed there (the replay,
``POSTFILTER.replay``), a sequential procedure no final-state constraint states exactly. So the
component is solved, its plan replayed on the nodes it evicts from, and for each node where the
plan evicts a pod the replay keeps, the replay's verdict for that node's placement is added:

    x[c, n] = k_c for every class c on n   ⇒   evict[v] = 0 for every v the replay keeps

(one clause per kept victim over "x[c, n] ≠ k_c" literals), and the component is solved again,
from scratch: the lexicographic stages' value fixings are dropped first (an earlier stage's value
may no longer be reachable). The cuts remove only plans the replay rejects, so a plan proven
optimal with them is optimal among the plans the rule allows. When the time runs out before a
plan passes, the component has no solver plan (the packing or greedy's plan stands in).
"""

from __future__ import annotations

import logging
import time
from typing import Optional

from ortools.sat.python import cp_model

from ..plugins.registry import POSTFILTER
from .decode import extract
from .model import WindowModel
from .outcome import Solution
from .stages import solve_component

log = logging.getLogger("cpsat_scheduler.solver")


def solve_sound(wm: WindowModel, cfg, deadline: float, work: Optional[float] = None,
                ) -> tuple[Optional[cp_model.CpSolver], str, Optional[float], Optional[float], int]:
    """``solve_component``, repeated with the replay's cuts until the plan's victims are ones
    kube-scheduler's preemption evicts: (solver or None, status, objective, bound, rounds of cuts)."""
    if POSTFILTER is None or not wm.evict:
        return (*solve_component(wm, cfg, deadline, work=work), 0)
    ne: dict[tuple[int, int], cp_model.IntVar] = {}
    rounds = 0
    while True:
        mark = len(wm.model.proto.constraints)
        solver, status, obj, bnd = solve_component(wm, cfg, deadline, work=work)
        if solver is None:
            return solver, status, obj, bnd, rounds
        trial = Solution()
        extract(wm, solver, trial)
        found = POSTFILTER.replay(wm.ctx, trial.placements, {v.node for v in trial.victims}, wm.static)
        kept = [v for v in trial.victims if v.pod.key not in found.evicted_by]
        if not kept:
            return solver, status, obj, bnd, rounds
        rounds += 1
        log.debug("kube's preemption keeps %d victim(s) of the plan: cut round %d", len(kept), rounds)
        if time.monotonic() >= deadline:
            return None, "UNKNOWN", None, None, rounds
        for c in list(wm.model.proto.constraints)[mark:]:
            c.clear_linear()  # the stages' value fixings (each a linear row): dropped
        nodes = {v.node for v in kept}
        for n in nodes:
            config = [_differs(wm, ne, var, int(solver.value(var))) for _, var in wm.by_node[n]]
            for key, (victim, node) in wm.evict_pod.items():
                if node == n and key not in found.evicted_by:
                    wm.model.add_bool_or([*config, wm.evict[key].Not()])


def name_by_replay(ctx, sol: Solution, static) -> None:
    """Name each of ``sol``'s victims for the pod at whose turn kube-scheduler's preemption evicts
    it (the model's decode names a pod of its level), and nominate that pod to its node."""
    if POSTFILTER is None or not sol.victims:
        return
    sol.victims = POSTFILTER.kube_preemptors(ctx, sol.placements, sol.victims, static)
    for v in sol.victims:
        if v.preemptor in sol.placements:
            sol.nominations[v.preemptor] = sol.placements[v.preemptor]


def _differs(wm: WindowModel, ne: dict, var, k: int):
    """A literal that is true only when ``var`` ≠ ``k``."""
    key = (var.index, k)
    lit = ne.get(key)
    if lit is None:
        lit = ne[key] = wm.model.new_bool_var(f"ne[{var.index},{k}]")
        wm.model.add(var != k).only_enforce_if(lit)
    return lit

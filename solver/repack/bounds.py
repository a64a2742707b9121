"""Lower bounds on the nodes the workload needs, to show how far a plan is from the best possible.

* per resource: the total request of the workload pods over the largest room one node offers;
* LP: the linear relaxation of the re-packing model (fractional pods, fractional nodes), solved
  with GLOP, OR-tools' LP solver. It keeps what the per-resource bound forgets — every resource
  at once, which nodes each pod class may use, the nodes pinned by pods that cannot move, what
  already runs everywhere, and the PodDisruptionBudgets (pods a budget cannot let go stay where
  they are) — and so is never below it.

Neither depends on the run's options (``--max-moves``, ``--target-free``, ``--keep-node``... except
that kept busy nodes count as in use): they bound what any safe plan could reach.

The CP-SAT bound the solver proves for the run itself (with its move budget) is reported with the
solver's statistics, not here.
"""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np

from models.resources import CPU, MEMORY, PODS

from .problem import RepackProblem

# The LP's optimum is a float; this much is forgiven before rounding it up.
LP_TOLERANCE = 1e-6


def per_resource_bound(problem: RepackProblem) -> dict[str, int]:
    """Per resource (cpu, memory, pods): ceil(total workload request / largest room of a node),
    the room being allocatable less what DaemonSet and mirror pods take on that node."""
    state = problem.ctx.state
    workload = np.zeros(len(state.resources), dtype=np.int64)
    overhead = np.zeros_like(state.used)
    for pod, n in state.pods():
        if problem.verdicts[pod.key].workload:
            workload += state.vector(pod)
        else:
            overhead[n] += state.vector(pod)
    for pod in problem.ctx.window:
        workload += state.vector(pod)
    room = (state.alloc - overhead).max(axis=0) if len(state.nodes) else np.zeros_like(workload)
    out: dict[str, int] = {}
    for name in (CPU, MEMORY, PODS):
        r = state.res_index[name]
        if workload[r] <= 0:
            out[name] = 0
        elif room[r] <= 0:
            out[name] = len(state.nodes)
        else:
            out[name] = math.ceil(int(workload[r]) / int(room[r]))
    return out


def lp_bound(problem: RepackProblem, cand: dict[int, np.ndarray], upper: dict[int, np.ndarray]) -> Optional[float]:
    """The LP relaxation's optimum (nodes in use at the end), or None if GLOP gives no optimum.

    Variables: x[c, n] ∈ [0, ub] pods of class c on candidate n; y[n] ∈ [0, 1] node n in use
    (fixed to 1 where a pod pins it or it is kept while busy); stay[c, n] ≤ min(x, pods there
    now). Constraints: every class placed in full; per node and resource, Σ_c request · x[c, n] ≤
    room(n) · y[n]; x[c, n] ≤ ub · y[n]; per budget, pods moved ≤ disruptions allowed.
    Objective: minimise Σ y[n].
    """
    from ortools.linear_solver import pywraplp

    solver = pywraplp.Solver.CreateSolver("GLOP")
    if solver is None:
        return None
    state = problem.ctx.state
    room = state.alloc - state.used
    y: dict[int, Any] = {}  # pywraplp variables (the stubs give them no arithmetic)
    fixed = 0
    for node in problem.nodes:
        n = node.index
        if n in problem.pinned or (n in problem.keep and n in problem.busy_before):
            fixed += 1
        else:
            y[n] = solver.NumVar(0.0, 1.0, f"y[{n}]")
    rows: dict[int, list[tuple[Any, np.ndarray]]] = {}
    stays: dict[int, list] = {}
    for cls in problem.ctx.classes:
        vec = state.vector(cls.rep)
        now: dict[int, int] = {}
        for pod in cls.pods:
            now[problem.origin[pod.key]] = now.get(problem.origin[pod.key], 0) + 1
        if cls.id not in cand:  # decided in rounds: no candidates for the whole cluster
            return None
        terms = []
        for n, ub in zip(cand[cls.id].tolist(), upper[cls.id].tolist()):
            x = solver.NumVar(0.0, float(ub), f"x[{cls.id},{n}]")
            terms.append(x)
            rows.setdefault(n, []).append((x, vec))
            if n in y:
                solver.Add(x <= float(ub) * y[n])
            if now.get(n):
                # stay[c, n] ≤ min(x, pods there now): what PodDisruptionBudgets leave in place.
                stay = solver.NumVar(0.0, float(now[n]), f"stay[{cls.id},{n}]")
                solver.Add(stay <= x)
                stays.setdefault(cls.id, []).append(stay)
        if not terms:
            return None
        solver.Add(solver.Sum(terms) == float(cls.size))
    for i, budget in enumerate(problem.budgets.budgets):
        covered = [cls for cls in problem.ctx.classes if any(i in problem.budgets.covering(p) for p in cls.pods)]
        if covered:
            kept = [s for cls in covered for s in stays.get(cls.id, [])]
            size = sum(cls.size for cls in covered)
            solver.Add(size - solver.Sum(kept) <= float(budget.allowed))
    for n, entries in rows.items():
        for r in range(len(state.resources)):
            coeffs = [(x, float(vec[r])) for x, vec in entries if vec[r]]
            if not coeffs:
                continue
            lhs = solver.Sum([c * x for x, c in coeffs])
            cap = float(max(room[n, r], 0))
            solver.Add(lhs <= cap * y[n] if n in y else lhs <= cap)
    solver.Minimize(solver.Sum(list(y.values())) if y else 0)
    if solver.Solve() != pywraplp.Solver.OPTIMAL:
        return None
    return fixed + solver.Objective().Value()


def nodes_bound(per_resource: dict[str, int], lp: Optional[float], pinned: int) -> int:
    """The best of the bounds, in whole nodes."""
    best = max([pinned, *per_resource.values()])
    if lp is not None:
        best = max(best, math.ceil(lp - LP_TOLERANCE))
    return best


def grouped_lp_bound(problem: RepackProblem) -> Optional[float]:
    """A cheap LP bound for clusters decided in rounds (no per-node model to relax): the LP of
    ``lp_bound`` with the nodes of one allocatable size merged into one group (its room the
    largest room among them, pinned and kept busy nodes a group of their own, in use), any pod
    class allowed on any group. Each per-node solution sums to a grouped one, so the optimum is
    at most the per-node LP's: still a lower bound on the nodes in use, with one variable per
    class and group instead of per class and node. It keeps every resource at once, which the
    per-resource bound does not."""
    from ortools.linear_solver import pywraplp

    solver = pywraplp.Solver.CreateSolver("GLOP")
    if solver is None:
        return None
    state = problem.ctx.state
    room = state.alloc - state.used
    groups: dict[tuple, list[int]] = {}
    for node in problem.nodes:
        n = node.index
        fixed = n in problem.pinned or (n in problem.keep and n in problem.busy_before)
        groups.setdefault((fixed, state.alloc[n].tobytes()), []).append(n)
    fixed_count = 0
    y: dict[tuple, Any] = {}
    caps: dict[tuple, np.ndarray] = {}
    for key, members in groups.items():
        caps[key] = np.maximum(room[members].max(axis=0), 0)
        if key[0]:
            fixed_count += len(members)
        else:
            y[key] = solver.NumVar(0.0, float(len(members)), f"y[{len(y)}]")
    rows: dict[tuple, list[tuple[Any, np.ndarray]]] = {key: [] for key in groups}
    for cls in problem.ctx.classes:
        vec = state.vector(cls.rep)
        terms: list[Any] = []
        for key in groups:
            x = solver.NumVar(0.0, float(cls.size), f"x[{cls.id},{len(terms)}]")
            terms.append(x)
            rows[key].append((x, vec))
        solver.Add(solver.Sum(terms) == float(cls.size))
    for key, entries in rows.items():
        count = float(len(groups[key]))
        for r in range(len(state.resources)):
            coeffs = [(x, float(vec[r])) for x, vec in entries if vec[r]]
            if not coeffs:
                continue
            lhs = solver.Sum([c * x for x, c in coeffs])
            cap = float(caps[key][r])
            solver.Add(lhs <= cap * y[key] if key in y else lhs <= cap * count)
    solver.Minimize(solver.Sum(list(y.values())) if y else 0)
    if solver.Solve() != pywraplp.Solver.OPTIMAL:
        return None
    return fixed_count + solver.Objective().Value()

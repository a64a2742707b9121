"""Redundant cuts for the provisioning model's bound, and the bound they give alone.

Each cut is a row over the shapes a family of pod classes may use: the new nodes of those shapes
must hold at least what the family's pods need beyond the free room of the existing nodes they
may use. Three kinds: per resource (requests in all), devices in all (the fewest a pod of each
class could take), and per class the pods a node can hold (``fit_count``). Each is implied by the
placement constraints, so adding it changes no answer, only what the LP sees.

``aggregate_bound`` minimises the cost of node counts per shape under the rows alone (every pod
placed, each file entry's maxCount over its zones kept): a relaxation of the model, so its
optimum is a lower bound on the cost; it has one variable per shape and is proven in a moment,
where CP-SAT's own bound on the full model may not arrive within the time limit on a loaded
machine.
"""

from __future__ import annotations

from dataclasses import dataclass

from ortools.sat.python import cp_model

from .devices import DEVICE
from .problem import PodClass, Problem, demand, need
from .shapes import entry_limits

BOUND_SECONDS = 5.0


@dataclass(frozen=True)
class Cut:
    per_shape: dict[int, int]  # shape -> what one new node of it holds
    short: int  # what must be held by new nodes
    missed: dict[int, int]  # class -> what one missed pod of it takes off ``short``


def fit_count(c: PodClass, room: dict[str, int], resources: list[str], where: tuple[str, int]) -> int:
    """How many pods of class ``c`` fit ``room`` of bin ``where`` (1 at most when it repels its
    own per node)."""
    names = resources + [d for d in room if d.startswith(DEVICE)]
    most = min((room.get(r, 0) // need(c, r, where) for r in names if need(c, r, where)), default=len(c.keys))
    return min(most, 1) if c.one_per_node else most


def cuts(problem: Problem) -> list[Cut]:
    rows = _volume(problem) + _devices(problem) + _counts(problem)
    return [r for r in rows if r.short > 0 and any(r.per_shape.values())]


def _volume(problem: Problem) -> list[Cut]:
    """Per resource, a family's requests beyond the free room of its existing nodes."""
    out = []
    for family in {frozenset(c.shapes) for c in problem.classes}:
        members = [c for c in problem.classes if set(c.shapes) <= family]
        existing = {i for c in members for i in c.existing}
        for r in problem.resources:
            short = sum(demand(c, r) * len(c.keys) for c in members) - sum(problem.free[i][r] for i in existing)
            out.append(Cut({s: problem.shapes[s].allocatable.get(r, 0) for s in family}, short,
                           {c.id: demand(c, r) for c in members if demand(c, r)}))
    return out


def _devices_in(room: dict[str, int]) -> int:
    return sum(v for r, v in room.items() if r.startswith(DEVICE))


def _devices(problem: Problem) -> list[Cut]:
    """Devices in all: the fewest each pod of a family could take, beyond the existing nodes' free ones."""
    taking = [c for c in problem.classes if c.devices]
    out = []
    for family in {frozenset(c.shapes) for c in taking}:
        members = [c for c in taking if set(c.shapes) <= family]
        least = {c.id: min((sum(c.devices.get(w, {}).values()) for w in
                            [("node", i) for i in c.existing] + [("shape", s) for s in c.shapes]), default=0)
                 for c in members}
        existing = {i for c in members for i in c.existing}
        short = sum(least[c.id] * len(c.keys) for c in members) - sum(_devices_in(problem.free[i]) for i in existing)
        out.append(Cut({s: _devices_in(problem.room(("shape", s))) for s in family}, short,
                       {c: k for c, k in least.items() if k}))
    return out


def _counts(problem: Problem) -> list[Cut]:
    """Per class, the pods beyond what its existing nodes hold, at most ``fit_count`` per new node."""
    res = problem.resources
    out = []
    for c in problem.classes:
        short = len(c.keys) - sum(fit_count(c, problem.room(("node", i)), res, ("node", i)) for i in c.existing)
        out.append(Cut({s: fit_count(c, problem.room(("shape", s)), res, ("shape", s)) for s in c.shapes}, short,
                       {c.id: 1}))
    return out


def aggregate_bound(problem: Problem, counts: list[int], rows: list[Cut]) -> int:
    """The least cost of node counts per shape (at most ``counts``) meeting every row; 0 when not proven."""
    model = cp_model.CpModel()
    # n[s]: nodes of shape s added.
    n = {s: model.new_int_var(0, k, f"n[{s}]") for s, k in enumerate(counts)}
    for row in rows:
        model.add(sum(a * n[s] for s, a in row.per_shape.items() if a) >= row.short)
    for members, most in entry_limits(problem.shapes):
        model.add(sum(n[s] for s in members) <= most)
    model.minimize(sum(problem.shapes[s].cost * v for s, v in n.items()))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = BOUND_SECONDS
    solver.parameters.num_workers = 1
    status = solver.solve(model)
    if status == cp_model.OPTIMAL:
        return int(solver.objective_value)
    if status == cp_model.FEASIBLE:
        return int(solver.best_objective_bound)
    return 0

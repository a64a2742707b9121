"""The cheapest set of nodes to add, exactly: a CP-SAT model over pod classes and bins.

Bins are the existing nodes (their free room) and, for each shape, candidate nodes
``new[s, j]`` for j below the most that could pay off (the shape's maxCount, the pods that may
go there, and what first-fit-decreasing spent over the shape's cost). Constraints, one family
per sentence below; objective: total cost, then fewest nodes. The better of two first-fit-decreasing
answers is the hint, so the model's answer is never worse than the baseline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ortools.sat.python import cp_model

from .ffd import Bins
from .devices import DEVICE
from .problem import Problem, demand, need


@dataclass(frozen=True)
class Solved:
    counts: dict[int, int]  # shape index -> nodes added
    placement: dict[tuple[int, tuple[str, int, int]], int]  # (class, bin) -> pods; bin ("node", i, 0) / ("shape", s, j)
    cost: int
    nodes: int
    status: str
    bound_cost: Optional[int]  # the proven lower bound on cost (None: no bound)
    missed: int = 0  # pods no set of candidate nodes could place


def candidate_counts(problem: Problem, baseline: Bins) -> list[int]:
    ffd_cost = sum(problem.shapes[s].cost for s in baseline.added())
    out = []
    for s, shape in enumerate(problem.shapes):
        pods = sum(len(c.keys) for c in problem.classes if s in c.shapes)
        most = min(shape.max_count, pods)
        if shape.cost > 0 and not baseline.unplaced and ffd_cost:
            most = min(most, ffd_cost // shape.cost)
        out.append(most)
    return out


def solve(problem: Problem, baseline: Bins, start_from: Bins, *, time_limit: float, workers: int) -> Solved:
    """``baseline`` bounds the candidates (never more than its cost can buy); ``start_from``
    (the better of the two first-fit-decreasing answers) is the hint."""
    model = cp_model.CpModel()
    counts = candidate_counts(problem, baseline)
    bins = [("node", i, 0) for i in range(len(problem.existing))]
    bins += [("shape", s, j) for s, n in enumerate(counts) for j in range(n)]
    # new[s, j]: candidate node j of shape s is added.
    new = {(s, j): model.new_bool_var(f"new[{s},{j}]") for s, n in enumerate(counts) for j in range(n)}
    # x[c, b]: how many pods of class c go to bin b (only where the filters allow the class).
    x = {}
    for c in problem.classes:
        allowed = set(c.existing)
        for b in bins:
            if (b[0] == "node" and b[1] in allowed) or (b[0] == "shape" and b[1] in c.shapes):
                x[c.id, b] = model.new_int_var(0, 1 if c.one_per_node else len(c.keys), f"x[{c.id},{b}]")
    # Every pending pod is placed; missed[c]: pods of class c no choice of nodes can place,
    # each costing more than any set of nodes (so none is missed when all can be placed).
    missed = {c.id: model.new_int_var(0, len(c.keys), f"missed[{c.id}]") for c in problem.classes}
    for c in problem.classes:
        model.add(sum(v for (cid, _), v in x.items() if cid == c.id) + missed[c.id] == len(c.keys))
    _capacity(model, problem, bins, x, new)
    # Candidates of a shape are added in order (no two solutions differ by renaming nodes).
    for s, n in enumerate(counts):
        for j in range(1, n):
            model.add_implication(new[s, j], new[s, j - 1])
    _gang_domains(model, problem, bins, x)
    _apart(model, problem, bins, x)
    _volume_cuts(model, problem, counts, new, missed)
    _device_cuts(model, problem, counts, new, missed)
    _count_cuts(model, problem, counts, new, missed)
    nodes = sum(new.values())
    weight = len(new) + 1
    cost = sum(problem.shapes[s].cost * v for (s, _), v in new.items())
    most = sum(problem.shapes[s].cost for (s, _) in new) * weight + len(new) + 1
    model.minimize(sum(missed.values()) * most + cost * weight + nodes)
    _hint(model, problem, start_from, x, new)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = time_limit
    solver.parameters.num_workers = workers or 8
    solver.parameters.linearization_level = 2  # the LP's bound is what proves a packing optimal
    status = solver.solve(model)
    name = solver.status_name(status)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return Solved({}, {}, 0, 0, name, None)
    chosen = {s: sum(solver.value(new[s, j]) for j in range(n)) for s, n in enumerate(counts)}
    placement = {k: solver.value(v) for k, v in x.items() if solver.value(v)}
    total = sum(problem.shapes[s].cost * n for s, n in chosen.items())
    missing = sum(solver.value(v) for v in missed.values())
    bound = (int(solver.best_objective_bound) - missing * most) // weight if missing == 0 else None
    return Solved(chosen, placement, total, sum(chosen.values()), name, bound, missing)


def _capacity(model, problem: Problem, bins, x, new) -> None:
    """No bin holds more than its room (an added node's, only if it is added), devices included."""
    by_bin: dict = {}
    for (cid, b), v in x.items():
        by_bin.setdefault(b, []).append((problem.classes[cid], v))
    for b, terms in by_bin.items():
        where = (b[0], b[1])
        room = problem.room(where)
        for r in problem.resources + [d for d in room if d.startswith(DEVICE)]:
            load = sum(need(c, r, where) * v for c, v in terms if need(c, r, where))
            if isinstance(load, int):
                continue
            if b[0] == "node":
                model.add(load <= room.get(r, 0))
            else:
                model.add(load <= room.get(r, 0) * new[b[1], b[2]])


def _volume_cuts(model, problem: Problem, counts: list[int], new, missed) -> None:
    """Redundant, for the bound: pods that may go only to nodes of shapes S (and some existing
    nodes) need, per resource, at least their total request in nodes of S beyond that free room."""
    families = {frozenset(c.shapes) for c in problem.classes}
    for family in families:
        members = [c for c in problem.classes if set(c.shapes) <= family]
        existing = {i for c in members for i in c.existing}
        for r in problem.resources:
            short = sum(demand(c, r) * len(c.keys) for c in members) - sum(problem.free[i][r] for i in existing)
            if short <= 0:
                continue
            room = [(problem.shapes[s].allocatable.get(r, 0), new[s, j]) for s in family for j in range(counts[s])]
            if any(a for a, _ in room):
                model.add(sum(a * v for a, v in room if a)
                          + sum(demand(c, r) * missed[c.id] for c in members) >= short)


def _devices_in(room: dict[str, int]) -> int:
    return sum(v for r, v in room.items() if r.startswith(DEVICE))


def _device_cuts(model, problem: Problem, counts: list[int], new, missed) -> None:
    """Redundant, for the bound: pods with devices that may go only to nodes of shapes S (and
    some existing nodes) need at least the fewest devices each could take, in all, from the
    free devices of those existing nodes and the devices of new nodes of S."""
    taking = [c for c in problem.classes if c.devices]
    for family in {frozenset(c.shapes) for c in taking}:
        members = [c for c in taking if set(c.shapes) <= family]
        least = {c.id: min((sum(c.devices.get(w, {}).values()) for w in
                            [("node", i) for i in c.existing] + [("shape", s) for s in c.shapes]), default=0)
                 for c in members}
        existing = {i for c in members for i in c.existing}
        short = sum(least[c.id] * len(c.keys) for c in members) - sum(_devices_in(problem.free[i]) for i in existing)
        room = [(_devices_in(problem.room(("shape", s))), new[s, j]) for s in family for j in range(counts[s])]
        if short > 0 and any(a for a, _ in room):
            model.add(sum(a * v for a, v in room if a) + sum(least[c.id] * missed[c.id] for c in members) >= short)


def fit_count(c, room: dict[str, int], resources: list[str], where: tuple[str, int]) -> int:
    """How many pods of class ``c`` fit ``room`` of bin ``where`` (1 at most when it repels its
    own per node)."""
    names = resources + [d for d in room if d.startswith(DEVICE)]
    most = min((room.get(r, 0) // need(c, r, where) for r in names if need(c, r, where)), default=len(c.keys))
    return min(most, 1) if c.one_per_node else most


def _count_cuts(model, problem: Problem, counts: list[int], new, missed) -> None:
    """Redundant, for the bound: each class's pods need nodes, at most ``fit_count`` per node."""
    res = problem.resources
    for c in problem.classes:
        need_more = len(c.keys) - sum(fit_count(c, problem.room(("node", i)), res, ("node", i)) for i in c.existing)
        terms = [(fit_count(c, problem.room(("shape", s)), res, ("shape", s)), new[s, j])
                 for s in c.shapes for j in range(counts[s])]
        if need_more > 0 and any(f for f, _ in terms):
            model.add(sum(f * v for f, v in terms if f) + missed[c.id] >= need_more)


def _apart(model, problem: Problem, bins, x) -> None:
    """Two classes whose pods cannot share a node (host ports, anti-affinity on hostname) do not
    both have pods in one bin: ``on[c, b]`` is true when class c has a pod in bin b."""
    involved = {c for pair in problem.apart for c in pair}
    on = {}
    for (cid, b), v in x.items():
        if cid in involved:
            on[cid, b] = model.new_bool_var(f"on[{cid},{b}]")
            model.add(v == 0).only_enforce_if(on[cid, b].Not())
    for a, c in problem.apart:
        for b in bins:
            if (a, b) in on and (c, b) in on:
                model.add_at_most_one(on[a, b], on[c, b])


def _gang_domains(model, problem: Problem, bins, x) -> None:
    """A gang that must share a domain picks one value of its topology label; its pods go only
    to bins carrying that value."""
    for gang, key in problem.gang_keys.items():
        classes = [c for c in problem.classes if c.gang == gang]
        if not classes:
            continue
        values = sorted({v for b in bins if (v := _label(problem, b, key)) is not None})
        pick = {v: model.new_bool_var(f"domain[{gang},{v}]") for v in values}
        model.add_exactly_one(pick.values())
        for c in classes:
            for b in bins:
                v = x.get((c.id, b))
                if v is None:
                    continue
                value = _label(problem, b, key)
                if value is None:
                    model.add(v == 0)
                else:
                    model.add(v == 0).only_enforce_if(pick[value].Not())


def _label(problem: Problem, b, key: str):
    if b[0] == "node":
        return problem.existing_labels[b[1]].get(key)
    return problem.shapes[b[1]].node.metadata.labels.get(key)


def _hint(model, problem: Problem, baseline: Bins, x, new) -> None:
    """First-fit-decreasing's bins, numbered per shape in the order they were opened."""
    seen: dict[int, int] = {}
    hinted = set()
    for kind, count in zip(baseline.kind, baseline.count):
        if kind[0] == "node":
            b = ("node", kind[1], 0)
        else:
            j = seen.get(kind[1], 0)
            seen[kind[1]] = j + 1
            b = ("shape", kind[1], j)
            if (kind[1], j) in new:
                model.add_hint(new[kind[1], j], 1)
                hinted.add((kind[1], j))
        for cid, n in count.items():
            if (cid, b) in x:
                model.add_hint(x[cid, b], n)
    for key, v in new.items():
        if key not in hinted:
            model.add_hint(v, 0)

"""The cheapest set of nodes to add, exactly: a CP-SAT model over pod classes and bins.

Bins are the existing nodes (their free room) and, for each shape, candidate nodes
``new[s, j]`` for j below the most that could pay off (the shape's maxCount, the pods that may
go there, and what first-fit-decreasing spent over the shape's cost; a file entry's maxCount
bounds its zones' shapes together). Constraints, one family
per sentence below (a class placed only beside its required pod affinity's pending support:
``support.constrain``); objective: total cost, then fewest nodes. The better of two first-fit-decreasing
answers is the hint, so the model's answer is never worse than the baseline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ortools.sat.python import cp_model

from .ffd import Bins
from .cuts import aggregate_bound, cuts
from . import support
from .devices import DEVICE
from .problem import Problem, need
from .shapes import entry_limits


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
    # A file entry's maxCount bounds the nodes of its zones' shapes in all.
    for members, most in entry_limits(problem.shapes):
        model.add(sum(new[s, j] for s in members for j in range(counts[s])) <= most)
    _gang_domains(model, problem, bins, x)
    _apart(model, problem, bins, x)
    _apart_in_domains(model, problem, bins, x)
    # A class placed only beside support has it in each domain of its terms' keys (``support``).
    support.constrain(model, problem.support, bins, x, lambda where, key: _label(problem, where, key),
                      {c.id: len(c.keys) for c in problem.classes})
    rows = cuts(problem)
    # Redundant cuts, for the bound (``cuts``): per row, the nodes of its shapes hold at least
    # what its pods need beyond the existing nodes' room (less what is missed).
    for row in rows:
        room = [(a, new[s, j]) for s, a in row.per_shape.items() for j in range(counts[s])]
        if any(a for a, _ in room):
            model.add(sum(a * v for a, v in room) + sum(k * missed[c] for c, k in row.missed.items()) >= row.short)
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
    if bound is not None and status != cp_model.OPTIMAL:
        # The cuts alone over node counts per shape: a small model proven in a moment, whose
        # optimum bounds the cost too (a bound CP-SAT's search may not reach in its time).
        bound = max(bound, aggregate_bound(problem, counts, rows))
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


def _apart_in_domains(model, problem: Problem, bins, x) -> None:
    """Classes that may not share a domain of a wider key (zone, rack) do not both have pods in
    one value of it (``in_domain[c, key, v]``: class c has a pod where the key is v); a class that
    repels its own pods there has at most one pod per value."""
    in_domain: dict = {}

    def there(c: int, key: str, value: str, where: list) -> Any:
        if (c, key, value) not in in_domain:
            flag = in_domain[c, key, value] = model.new_bool_var(f"in_domain[{c},{key},{value}]")
            for b in where:
                if (c, b) in x:
                    model.add(x[c, b] == 0).only_enforce_if(flag.Not())
        return in_domain[c, key, value]

    for (a, c), keys in problem.apart_in.items():
        for key in sorted(keys):
            by_value: dict[str, list] = {}
            for b in bins:
                value = _label(problem, b, key)
                if value is not None:
                    by_value.setdefault(value, []).append(b)
            for value, where in sorted(by_value.items()):
                if a == c:
                    terms = [x[a, b] for b in where if (a, b) in x]
                    if terms:
                        model.add(sum(terms) <= 1)
                else:
                    model.add_at_most_one(there(a, key, value, where), there(c, key, value, where))


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

"""``provision``: for the pending pods the best plan leaves out, the cheapest set of nodes to
add (total cost, then fewest nodes), chosen exactly over node shapes (``model``), beside
first-fit-decreasing's answer (``ffd``). The model's placement, with the devices and volume
bindings the engine's rules give it, is then checked by the independent validator on the
cluster with the nodes added; when a rule the model does not count refuses it, the same engine
as ``schedule`` decides the pods there instead, and what it leaves out is named."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Optional

from models.config import SchedulerConfig
from models.snapshot import ClusterSnapshot

from ..api import ScheduleRequest, decide, plan_of_placements
from ..validate import validate
from ..explain import plan_applied
from .ffd import Bins, first_fit_decreasing
from .model import Solved, solve
from .notes import omission_notes
from .problem import Problem, build_problem
from .shapes import COST_SCALE, Shape, parse_shapes, shapes_from_nodes, with_new_nodes

__all__ = ["Provisioned", "Shape", "parse_shapes", "provision", "shapes_from_nodes"]


@dataclass(frozen=True)
class Added:
    name: str
    shape: str
    cost: int  # thousandths
    devices: int = 0  # DRA devices the node publishes (its shape's)


@dataclass
class Provisioned:
    pending: int  # pods the best plan leaves out
    added: list[Added]
    cost: int
    status: str  # the model's: OPTIMAL, FEASIBLE, or "first-fit-decreasing" when it found nothing better
    bound: Optional[int]
    placement: dict[str, str]  # pod -> node, from the engine's plan on the provisioned cluster
    left_out: dict[str, str]  # pods that plan still leaves out -> reason
    nowhere: dict[str, str]  # pods no existing node nor any shape could take alone
    ffd_cost: int
    ffd_nodes: int
    # pending pods first-fit-decreasing's answer leaves out: those of ``nowhere`` (no answer
    # places them) and those it could not fit within the shapes' maxCounts
    ffd_unplaced: int
    seconds: float
    shapes: list[Shape] = field(default_factory=list)
    # "model": the validator accepted the model's placement (devices and volume bindings given as
    # the engine gives them); "engine": it did not, and the engine decided the pods on those nodes
    placed_by: str = "model"
    # for people: a field a shape file's entry left out is why pods of ``nowhere`` fit no shape
    notes: list[str] = field(default_factory=list)

    @property
    def proven(self) -> bool:
        return self.status == "OPTIMAL" and not self.left_out

    @property
    def gap(self) -> Optional[float]:
        if self.bound is None or self.cost == 0:
            return None if self.bound is None else 0.0
        return max(0.0, (self.cost - self.bound) / self.cost)

    def to_json(self) -> dict[str, Any]:
        return {
            "pending": self.pending, "nodes": len(self.added), "cost": self.cost / COST_SCALE,
            "status": self.status, "proven": self.proven,
            "costBound": None if self.bound is None else self.bound / COST_SCALE, "gap": self.gap,
            "added": [{"name": a.name, "shape": a.shape, "cost": a.cost / COST_SCALE, "devices": a.devices}
                      for a in self.added],
            "placement": dict(sorted(self.placement.items())), "leftOut": dict(sorted(self.left_out.items())),
            "fitsNoShape": dict(sorted(self.nowhere.items())),
            "firstFitDecreasing": {"nodes": self.ffd_nodes, "cost": self.ffd_cost / COST_SCALE,
                                   "unplaced": self.ffd_unplaced},
            "placedBy": self.placed_by, "seconds": round(self.seconds, 3),
        }


def provision(snapshot: ClusterSnapshot, config: SchedulerConfig, shapes: Optional[list[Shape]] = None, *,
              all_pending: bool = False) -> Provisioned:
    start = time.monotonic()
    plan = decide(ScheduleRequest(snapshot, config, all_pending=all_pending)).plan
    keys = [u.pod for u in plan.unschedulable]
    base = plan_applied(snapshot, plan, keep=set(keys))
    if shapes is None:
        shapes = shapes_from_nodes(base, config, max_count=max(1, len(keys)))
    problem = build_problem(base, plan, shapes, config, all_pending=all_pending)
    baseline = first_fit_decreasing(problem)
    ffd_cost = sum(shapes[s].cost for s in baseline.added())
    start_from = min((baseline, first_fit_decreasing(problem, per_pod=True)),
                     key=lambda b: (len(b.unplaced), sum(shapes[s].cost for s in b.added())))
    solved = solve(problem, baseline, start_from, time_limit=config.solver.time_limit_seconds,
                   workers=config.solver.workers) if problem.classes else Solved({}, {}, 0, 0, "OPTIMAL", 0)
    if solved.status in ("OPTIMAL", "FEASIBLE") and (baseline.unplaced or solved.cost <= ffd_cost):
        counts, status, bound = solved.counts, solved.status, solved.bound_cost
        where = _from_model(problem, solved)
    else:  # the model found nothing in time: first-fit-decreasing's answer stands
        counts, status, bound = _counts(baseline), "first-fit-decreasing", None
        where = _from_bins(problem, baseline)
    added = [Added(f"{shapes[s].name}-new-{j + 1}", shapes[s].name, shapes[s].cost, shapes[s].device_count)
             for s, n in sorted(counts.items()) for j in range(n)]
    placement, left_out, placed_by = _checked(base, config, keys, problem.nowhere, added, shapes, where, all_pending)
    notes = omission_notes(shapes, [p for k in sorted(problem.nowhere) if (p := base.pod(k)) is not None])
    return Provisioned(len(keys), added, sum(a.cost for a in added), status, bound, placement, left_out,
                       problem.nowhere, ffd_cost, len(baseline.added()), len(problem.nowhere) + len(baseline.unplaced),
                       time.monotonic() - start, shapes, placed_by, notes)


def _counts(baseline: Bins) -> dict[int, int]:
    out: dict[int, int] = {}
    for s in baseline.added():
        out[s] = out.get(s, 0) + 1
    return out


def _node_name(problem: Problem, kind: str, index: int, j: int) -> str:
    return problem.existing[index] if kind == "node" else f"{problem.shapes[index].name}-new-{j + 1}"


def _from_model(problem: Problem, solved: Solved) -> dict[str, str]:
    """Pod -> node from the model's counts per class and bin (a class's pods in order)."""
    out: dict[str, str] = {}
    left = {c.id: list(c.keys) for c in problem.classes}
    for (cid, (kind, index, j)), n in sorted(solved.placement.items()):
        for _ in range(n):
            out[left[cid].pop(0)] = _node_name(problem, kind, index, j)
    return out


def _from_bins(problem: Problem, bins: Bins) -> dict[str, str]:
    out: dict[str, str] = {}
    left = {c.id: list(c.keys) for c in problem.classes}
    seen: dict[int, int] = {}
    for (kind, index), count in zip(bins.kind, bins.count):
        j = seen.get(index, 0) if kind == "shape" else 0
        if kind == "shape":
            seen[index] = j + 1
        for cid, n in count.items():
            for _ in range(n):
                out[left[cid].pop(0)] = _node_name(problem, kind, index, j)
    return out


def _checked(base, config, keys, nowhere, added, shapes, where,
             all_pending) -> tuple[dict[str, str], dict[str, str], str]:
    """Where the pods go on ``base`` with the ``added`` nodes: the model's placement when the
    independent validator accepts it whole; else the engine's own decision (its left-out pods
    named with their reasons)."""
    by_name = {s.name: s for s in shapes}
    provisioned = with_new_nodes(base, [(by_name[a.shape], a.name) for a in added])
    window = [k for k in keys if k not in nowhere]
    if not window:
        return {}, {}, "model"
    if set(window) <= set(where):
        plan = plan_of_placements(provisioned, config, {k: where[k] for k in window}, window_keys=tuple(window),
                                  all_pending=all_pending)
        if not validate(provisioned, plan, config, all_pending=all_pending, window_keys=window):
            return {k: where[k] for k in window}, {}, "model"
    decision = decide(ScheduleRequest(provisioned, config, all_pending=all_pending, window_keys=tuple(window)))
    if not decision.validated:
        raise RuntimeError("the provisioned cluster's plan failed validation (a bug): " + "; ".join(decision.problems[:3]))
    return decision.plan.assignment_map(), {u.pod: u.message for u in decision.plan.unschedulable}, "engine"

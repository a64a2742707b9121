"""The re-packing model: where every movable pod should run so that the most nodes (or the most
expensive ones) end up empty, with the fewest pods moved.

It is the scheduler's window model (``WindowModel``) with the movable pods as the window:

    x[c, n]     — pods of class c on node n in the final state     (the scheduler's variables)
    stay[c, n]  — pods of class c that run on n now and stay there  (0 ≤ stay ≤ min(x, now))
    free[n]     — node n ends with no workload pod                   (bool; only where nothing pins n)

Candidate nodes come from the scheduler's pruning (static filters, room, running pods' ports and
anti-affinity); a pod may also stay where it runs even if the static rules would no longer admit
it there (they are checked at scheduling time only: ``IgnoredDuringExecution``). Capacity, host
ports, inter-pod (anti-)affinity and topology spread hold in the final state through each rule's
own ``encode``. On top of them:

* every movable pod is placed: Σ_n x[c, n] = |c|;
* a free node holds nothing: Σ_c x[c, n] = 0 when free[n];
* PodDisruptionBudgets: the pods of a budget moved in the whole plan stay within its
  disruptions allowed (in total, not per step: safe even when the moves run back to back without
  waiting for replacements to become ready);
* ``--max-moves N``: Σ (|c| − Σ_n stay[c, n]) ≤ N;
* ``--target-free N`` is a constraint cap: at most N of the nodes busy now are freed, so once N
  are free the objective has nothing left to gain there and goes to fewer moves.

Objective, lexicographic: freed nodes (or, with ``--objective cost``, the price of freed
nodes), then pods that stay put (fewest moves). The current placement, which moves nothing, is
the solution hint.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
from ortools.sat.python import cp_model

from .. import interrupt, progress
from ..cpsat.model import WindowModel
from ..cpsat.build import encode_rules
from ..cpsat.solve import STATUS_NAMES, _solver, candidates
from ..plugins import registry
from ..plugins.registry import copies as room_copies
from . import availability
from .drain import greedy_drain
from .problem import RepackProblem

OBJECTIVES = ("nodes", "cost")
# Largest objective range combined into one weighted stage (as the window solver does).
MAX_STAGE_RANGE = 2**50
# Share of the time the first stage may use when the objective needs two stages.
FIRST_STAGE_SHARE = 0.7
# Presolve costs about this much per variable here (4.6 s for the 12,600 variables of a
# 1,000-node cluster); it is skipped when that would eat more than a quarter of the stage's time,
# as the search then starts from the greedy placement at once instead of finding nothing.
PRESOLVE_SECONDS_PER_VARIABLE = 4e-4
# Share of the time limit spent checking a starting placement against the model.
HINT_SHARE = 0.1


@dataclass(frozen=True)
class RepackOptions:
    max_moves: Optional[int] = None
    target_free: Optional[int] = None
    keep_nodes: tuple[str, ...] = ()
    objective: str = "nodes"
    time_limit: Optional[float] = None  # seconds; default: the config's solver.timeLimitSeconds
    # Print a plan even if it leaves pending pods that fit today with no node (``pending.py``).
    allow_blocking_pending: bool = False


@dataclass
class Placement:
    """The model's answer: the final node of every movable pod, and how it was found."""

    final: dict[str, int]  # movable pod key -> node index
    status: str
    objective: Optional[float] = None  # primary level reached (freed nodes, or cost units)
    bound: Optional[float] = None  # best bound CP-SAT proved on it
    variables: int = 0
    constraints: int = 0
    build_time: float = 0.0
    solve_time: float = 0.0
    started_better: bool = False  # the starting placement beat (or replaced) the solver's answer
    candidates: dict[int, np.ndarray] = field(default_factory=dict)  # class -> candidate nodes
    upper: dict[int, np.ndarray] = field(default_factory=dict)  # class -> bound per candidate
    rounds: list = field(default_factory=list)  # ``rounds.RoundReport`` per round, when decided in rounds
    phases: Optional[list[list[str]]] = None  # per round, the pods it moves (walked in that order)
    checked: frozenset[str] = frozenset()  # of those, moves already checked in that order


def level_range(lv_vars: list, coeffs: list) -> int:
    """The most a level Σ c·v can vary over the variables' domains."""
    total = 0
    for var, c in zip(lv_vars, coeffs):
        domain = var.proto.domain
        total += abs(c) * (max(domain) - min(domain))
    return total


class RepackInfeasible(RuntimeError):
    """No final state keeps every rule — the current one included (the message says why)."""


class RepackModel:
    def __init__(self, problem: RepackProblem, options: RepackOptions) -> None:
        self.problem = problem
        self.options = options
        ctx = problem.ctx
        self.classes = [c for c in ctx.classes]
        self.wm = WindowModel(ctx, self.classes, problem.static, allow_preemption=False)
        self.model = self.wm.model
        self.stay: dict[tuple[int, int], cp_model.IntVar] = {}
        self.free: dict[int, cp_model.IntVar] = {}
        self.levels: list[tuple[str, list, list]] = []  # (name, vars, coeffs), most important first
        # now[c][n]: pods of class c running on node n today.
        self.now: dict[int, dict[int, int]] = {}
        for cls in self.classes:
            counts: dict[int, int] = {}
            for pod in cls.pods:
                n = problem.origin[pod.key]
                counts[n] = counts.get(n, 0) + 1
            self.now[cls.id] = counts

    # -- data ------------------------------------------------------------------------------------

    def compute_candidates(self) -> None:
        """The scheduler's candidates, plus each class's current nodes (staying needs no filter)."""
        ctx, wm = self.problem.ctx, self.wm
        cand, upper = candidates(ctx, self.classes, self.problem.static, {}, False)
        state = ctx.state
        # The rules' limits on where a moving pod may go (a gang with required topology keeps
        # the domain it shares today), given where the pods are now.
        keeps = [make(ctx, self.problem.origin) for make in registry.REPACK_KEEPS]
        for cls in self.classes:
            nodes, ubs = cand[cls.id], upper[cls.id]
            have = dict(zip(nodes.tolist(), ubs.tolist()))
            vec = wm.vec[cls.id]
            for n, count in self.now[cls.id].items():
                if n in have:
                    continue
                room = int(room_copies(vec, state.free[n])) if vec.any() else count
                if room > 0:
                    have[n] = min(count, room)
            for keep in keeps:
                allowed = keep(cls.rep)
                if allowed is not None:
                    have = {n: k for n, k in have.items() if allowed[n]}
            order = sorted(have)
            wm.cand[cls.id] = np.array(order, dtype=np.int64)
            wm.ub[cls.id] = np.array([have[n] for n in order], dtype=np.int64)

    # -- model -----------------------------------------------------------------------------------

    def build(self, hint: Optional[dict[str, int]] = None) -> None:
        """The model; ``hint`` (pod -> node) is where the search starts (default: nothing moves)."""
        self.compute_candidates()
        wm, m, problem = self.wm, self.model, self.problem
        wm.create_variables()
        # The rules, each from its own module (the engine keeps the encodings they return).
        encode_rules(wm, registry.FILTER_ENCODINGS)

        # Every movable pod is placed somewhere.
        for cls in self.classes:
            placed = wm.placed[cls.id]
            if isinstance(placed, int):
                raise RepackInfeasible(
                    f"{cls.rep.key} (and {cls.size - 1} pod(s) like it) fits no node at all, not even the one it runs on"
                    if cls.size > 1
                    else f"{cls.rep.key} fits no node at all, not even the one it runs on"
                )
            m.add(placed == cls.size)

        # stay[c, n]: pods of class c that keep running on n (at most those there now, and x).
        for cls in self.classes:
            for n, count in self.now[cls.id].items():
                x = wm.x.get((cls.id, n))
                if x is None:
                    continue
                stay = m.new_int_var(0, min(count, wm.ub_of(cls.id, n)), f"stay[{cls.id},{n}]")
                m.add(stay <= x)
                self.stay[cls.id, n] = stay

        # free[n]: nothing of the window ends on n (pinned and kept nodes have no such variable).
        for node in problem.nodes:
            n = node.index
            if not problem.freeable(n):
                continue
            free = m.new_bool_var(f"free[{n}]")
            entries = [var for _, var in wm.by_node.get(n, [])]
            if entries:
                m.add(cp_model.LinearExpr.sum(entries) == 0).only_enforce_if(free)
            self.free[n] = free

        stays_of = self._stays_by_class()
        # PodDisruptionBudgets: the pods of a budget moved in the whole plan ≤ its allowance. A
        # class counts whole if moving any of its pods spends the budget (pods of a class share
        # their labels; one that is not Ready may go unspent, ``PdbBudgets.covering``).
        for i, budget in enumerate(problem.budgets.budgets):
            covered = [cls for cls in self.classes if any(i in problem.budgets.covering(p) for p in cls.pods)]
            if covered:
                stays = [v for cls in covered for v in stays_of.get(cls.id, [])]
                size = sum(cls.size for cls in covered)
                m.add(size - cp_model.LinearExpr.sum(stays) <= budget.allowed)
        # Replicas that ask to be apart per node stay at least as apart as today.
        self.encode_apart()
        # --max-moves: pods moved in total.
        total = sum(cls.size for cls in self.classes)
        if self.options.max_moves is not None:
            m.add(total - cp_model.LinearExpr.sum(list(self.stay.values())) <= self.options.max_moves)
        # --target-free: at most N of the nodes busy now are freed (a cap, not a demand).
        if self.options.target_free is not None:
            busy_free = [v for n, v in self.free.items() if n in problem.busy_before]
            if busy_free:
                m.add(cp_model.LinearExpr.sum(busy_free) <= self.options.target_free)

        # Objective levels, most important first.
        frees = list(self.free.items())
        if self.options.objective == "cost":
            self.levels.append(("freed_cost", [v for _, v in frees], [problem.cost_units(n) for n, _ in frees]))
        else:
            self.levels.append(("freed_nodes", [v for _, v in frees], [1] * len(frees)))
        self.levels.append(("stays", list(self.stay.values()), [1] * len(self.stay)))
        self.levels = [lv for lv in self.levels if lv[1]]
        self._hint(hint or self.problem.origin)

    def encode_apart(self) -> None:
        availability.encode(self)

    def _stays_by_class(self) -> dict[int, list]:
        out: dict[int, list] = {}
        for (c, _), var in self.stay.items():
            out.setdefault(c, []).append(var)
        return out

    def _hint(self, where: dict[str, int]) -> None:
        """A starting placement (pod -> node); pods it puts where no variable exists stay home."""
        wm, m, origin = self.wm, self.model, self.problem.origin
        counts: dict[tuple[int, int], int] = {}
        for cls in self.classes:
            for pod in cls.pods:
                n = where.get(pod.key, origin[pod.key])
                if (cls.id, n) not in wm.x:
                    n = origin[pod.key]
                counts[cls.id, n] = counts.get((cls.id, n), 0) + 1
        for (c, n), var in wm.x.items():
            m.add_hint(var, min(counts.get((c, n), 0), wm.ub_of(c, n)))
        for cls in self.classes:
            placed = wm.placed[cls.id]
            if not isinstance(placed, int):
                m.add_hint(placed, sum(min(k, wm.ub_of(c, n)) for (c, n), k in counts.items() if c == cls.id and (c, n) in wm.x))
        for (c, n), var in self.stay.items():
            m.add_hint(var, min(self.now[c][n], counts.get((c, n), 0), wm.ub_of(c, n)))
        used = {n for (_, n), k in counts.items() if k}
        for n, var in self.free.items():
            m.add_hint(var, 0 if n in used else 1)

    # -- solve -----------------------------------------------------------------------------------

    def stages(self) -> list[list[tuple[str, list, list]]]:
        """One weighted stage when the levels' ranges multiply below ``MAX_STAGE_RANGE``."""
        span = 1
        for _, lv_vars, coeffs in self.levels:
            span *= level_range(lv_vars, coeffs) + 1
        return [self.levels] if span <= MAX_STAGE_RANGE else [[lv] for lv in self.levels]

    @staticmethod
    def stage_expr(stage) -> tuple[cp_model.LinearExpr, int]:
        """Σ M_i · level_i, M_i the product of the ranges of the levels after it; and M_0.
        A level's range counts each variable's whole domain (a ``stay`` counts up to the pods of
        its class on the node): with only the coefficients, more stays could outweigh one more
        freed node, and the bound read back from the weighted sum overstated the freed nodes."""
        vars_, coeffs = [], []
        mult = 1
        for _, lv_vars, lv_coeffs in reversed(stage):
            vars_ += lv_vars
            coeffs += [c * mult for c in lv_coeffs]
            top = mult
            mult *= level_range(lv_vars, lv_coeffs) + 1
        return cp_model.LinearExpr.weighted_sum(vars_, coeffs), top

    def complete_hint(self, starts: list[dict[str, int]], budget: float) -> Optional[dict[str, int]]:
        """Hint every variable from the first start (pod -> node) the model accepts whole: a
        quick solve with the hinted variables fixed fills in the rules' own helper variables.
        Returns the start used, or None (the partial hint of the first start is left). A start
        putting a pod where the model has no variable for it (the greedy drain knows no gang
        topology, the gang plugin's ``repack_keep``) is not accepted: its hint would silently keep that pod home."""
        origin = self.problem.origin
        for start in starts:
            if any((cls.id, start.get(p.key, origin[p.key])) not in self.wm.x for cls in self.classes for p in cls.pods):
                continue
            self.model.clear_hints()
            self._hint(start)
            probe = self.model.clone()
            probe.clear_objective()
            solver = interrupt.new_solver()
            solver.parameters.fix_variables_to_their_hinted_value = True
            solver.parameters.max_time_in_seconds = max(budget, 0.001)
            solver.parameters.num_workers = 1
            with interrupt.stoppable(solver):
                status = solver.solve(probe)
            interrupt.check()
            if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
                self._hint_all(solver)
                return start
        self.model.clear_hints()
        self._hint(starts[0])
        return None

    def _hint_all(self, solver: cp_model.CpSolver) -> None:
        self.model.clear_hints()
        for i in range(len(self.model.Proto().variables)):
            var = self.model.get_int_var_from_proto_index(i)
            self.model.add_hint(var, solver.value(var))

    def value(self, final: dict[str, int]) -> tuple[int, int]:
        """(primary level, −moves) of a placement, as the objective ranks it."""
        used = set(final.values())
        free = [n for n in self.free if n not in used]
        primary = sum(self.problem.cost_units(n) for n in free) if self.options.objective == "cost" else len(free)
        moves = sum(1 for key, n in final.items() if n != self.problem.origin[key])
        return primary, -moves

    def solve(self, deadline: float, start: Optional[dict[str, int]] = None) -> Placement:
        """Solve stage by stage; ``start`` (a complete placement the model accepts) is returned
        instead of the solver's answer if it is better, or if the solver finds nothing."""
        cfg = self.problem.config.solver
        proto = self.model.Proto()
        placement = Placement(final={}, status="OPTIMAL", variables=len(proto.variables), constraints=len(proto.constraints))
        placement.candidates = dict(self.wm.cand)
        placement.upper = dict(self.wm.ub)
        stages = self.stages() if self.levels else [[]]
        solver = None
        for i, stage in enumerate(stages):
            remaining = deadline - time.monotonic()
            if solver is not None and remaining <= 0:
                placement.status = "FEASIBLE"
                break
            share = FIRST_STAGE_SHARE if i == 0 and len(stages) > 1 else 1.0
            expr, weight = self.stage_expr(stage) if stage else (None, 1)
            if stage:
                assert expr is not None  # stage_expr gives one for a stage
                self.model.maximize(expr)
            budget = max(remaining, 0.001) * share
            this = _solver(cfg, budget, len(proto.variables))
            if len(proto.variables) * PRESOLVE_SECONDS_PER_VARIABLE > budget / 4:
                this.parameters.cp_model_presolve = False
            with interrupt.stoppable(this):
                status = this.solve(self.model)
            interrupt.check()
            if status == cp_model.MODEL_INVALID:
                raise RuntimeError(self.model.validate() or "CP-SAT reported MODEL_INVALID for the repack model")
            if status == cp_model.INFEASIBLE:
                raise RepackInfeasible("no placement of the movable pods keeps every rule")
            if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
                placement.status = "FEASIBLE" if solver is not None else STATUS_NAMES[status]
                break
            solver = this
            if status == cp_model.FEASIBLE:
                placement.status = "FEASIBLE"
            if i == 0 and stage:
                # The primary level alone: its value, and what CP-SAT proved it cannot exceed.
                _, lv_vars, lv_coeffs = stage[0]
                placement.objective = float(sum(c * this.value(v) for v, c in zip(lv_vars, lv_coeffs)))
                placement.bound = float(int(this.best_objective_bound) // weight)
            # Fix this stage's value; the next stage starts from the solution found.
            if stage:
                assert expr is not None
                self.model.add(expr >= int(round(this.objective_value)))
            self._hint_all(this)
        if solver is not None:
            placement.final = self._extract(solver)
        if start is not None and (solver is None or self.value(start) > self.value(placement.final)):
            placement.final = dict(start)
            placement.objective = float(self.value(start)[0])
            placement.status = "FEASIBLE"
            placement.started_better = True
        return placement

    def _extract(self, solver: cp_model.CpSolver) -> dict[str, int]:
        """Final node per pod: the pods that stay keep their node; the others fill the nodes
        where the class gains pods, in a fixed order (pods by key, nodes by index)."""
        final: dict[str, int] = {}
        origin = self.problem.origin
        for cls in self.classes:
            target = {n: solver.value(var) for n, var in self.wm.by_class.get(cls.id, [])}
            leaving = []
            by_node: dict[int, list[str]] = {}
            for pod in sorted(cls.pods, key=lambda p: p.key):
                by_node.setdefault(origin[pod.key], []).append(pod.key)
            for n, keys in sorted(by_node.items()):
                keep = min(len(keys), target.get(n, 0))
                for key in keys[:keep]:
                    final[key] = n
                leaving += keys[keep:]
                target[n] = target.get(n, 0) - keep
            arrivals = [n for n, k in sorted(target.items()) for _ in range(k)]
            if len(arrivals) != len(leaving):
                raise RuntimeError(f"repack extraction: class of {cls.rep.key} has {len(leaving)} leaving, {len(arrivals)} places")
            final.update(self._pair(cls, leaving, arrivals))
        return final

    def _pair(self, cls, leaving: list[str], arrivals: list[int]) -> dict[str, int]:
        """Which leaving pod goes to which arriving place: within one topology domain (of the
        class's spread and affinity keys) first. The final state is the same whatever the
        pairing, but a move inside its domain leaves the domain counts alone at every step, so
        spread constraints that a cross-domain swap would break halfway still hold."""
        rep, labels, origin = cls.rep, [n.labels for n in self.problem.nodes], self.problem.origin
        keys = sorted(registry.topology_keys(rep))
        out: dict[str, int] = {}
        if keys:
            open_places: dict[tuple, list[int]] = {}
            for n in arrivals:
                open_places.setdefault(tuple(labels[n].get(k) for k in keys), []).append(n)
            rest = []
            for key in leaving:
                places = open_places.get(tuple(labels[origin[key]].get(k) for k in keys))
                if places:
                    out[key] = places.pop(0)
                else:
                    rest.append(key)
            leaving = rest
            arrivals = [n for places in open_places.values() for n in places]
        out.update(zip(leaving, sorted(arrivals)))
        return out


def solve_placement(problem: RepackProblem, options: RepackOptions, first: Optional[dict[str, int]] = None) -> Placement:
    """One model for every movable pod (``rounds.solve_placement`` decides when rounds are needed
    instead). Build and solve the model within the time limit (the config's, unless the options say).

    The search starts from ``first`` (pod -> node, for every movable pod) if given and the model
    accepts it whole, else from the greedy drain's placement, else from the current one (nothing
    moves); whichever is used is also the fallback answer."""
    start = time.monotonic()
    limit = options.time_limit if options.time_limit is not None else problem.config.solver.time_limit_seconds
    deadline = start + limit
    greedy = greedy_drain(
        problem, max_moves=options.max_moves, target_free=options.target_free, by_cost=options.objective == "cost"
    )
    model = RepackModel(problem, options)
    model.build()
    starts = [greedy, dict(problem.origin)]
    if first is not None and set(first) == set(problem.origin):
        starts.insert(0, first)
    used = model.complete_hint(starts, limit * HINT_SHARE)
    built = time.monotonic()
    progress.stage(f"re-packing model: {len(model.model.Proto().variables)} variables; solving "
                   f"(time limit {max(deadline - built, 0):.1f}s)")
    placement = model.solve(deadline, used)
    placement.build_time = built - start
    placement.solve_time = time.monotonic() - built
    return placement

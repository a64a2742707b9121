"""The CP-SAT engine: greedy first, then one model per independent component, solved
lexicographically, and the better of the two plans returned.

1. Greedy ``scheduleOne`` runs first: cheap, the solution hint, and the fallback.
2. Candidate nodes per pod class are pruned; the window splits into independent components.
3. Each component becomes a ``WindowModel``; every rule adds its constraints from its module.
4. Objective levels (placement by priority tier, PDB violations, victim priorities, victims,
   scores) are solved lexicographically: levels whose combined range fits exact integer weights
   share one stage; otherwise each stage fixes the value reached before the next begins.
5. Whatever the solver found is compared with greedy on the same lexicographic value; the better
   one is returned. No incumbent at the limit (or a zero time limit) returns greedy, marked.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
from google.protobuf import text_format
from ortools.sat.python import cp_model

from models.errors import InputError

from ..plugins.gang import min_resources as gang_min_resources
from ..plugins.gang import permit as gang_mod
from ..plugins.gang import preferred as gang_preferred
from .. import interrupt, progress
from ..plugins.preemption import victim_room
from ..plugins.preemption.pdb import PdbBudgets
from ..context import PodClass, SchedulingContext
from ..greedy import GreedyResult, schedule_greedy
from ..plugin_api import Victim
from ..filtering import StaticFilters
from ..plugins.inter_pod_affinity import encode as inter_pod_affinity
from ..scoring import ScoreContext, crowding, final_state, score_nodes
from . import eviction
from . import node_classes
from .components import components
from .hint import best_hint, counts_value, first_fit_counts, greedy_counts
from .symmetry import break_symmetry
from .model import HintSolution, Level, WindowModel
from ..plugins.registry import PRUNES, WINDOW_ENCODERS

log = logging.getLogger("cpsat_scheduler.solver")

# Largest objective range one stage combines with exact integer weights.
MAX_STAGE_RANGE = 2**50
# Above this many variables CP-SAT's presolve costs more than it gains (measured: 7.5 s of
# presolve on a 50,000-variable window that solves to optimality in 2 s without it).
PRESOLVE_MAX_VARIABLES = 20_000
# ... and above this many when the hint is complete: CP-SAT takes a complete hint as its first
# solution only once the search starts, and presolve can take the whole limit first (measured:
# 5,000 nodes of anti-affinity, 13,668 variables, 5.7 s of presolve and no solution; without
# it the hint at 0.6 s and four improvements by 5 s).
PRESOLVE_MAX_VARIABLES_HINTED = 5_000
# Workers when the config says 0 (auto). CP-SAT's portfolio needs several diverse workers more
# than it needs cores: on 2 cores, 8 workers proved 1,000 nodes x 3,000 pods optimal in 4 s,
# 2 workers took 16 s.
AUTO_WORKERS = 8
# Share of the remaining time the first (placement) stage may use when later stages follow.
FIRST_STAGE_SHARE = 0.6

STATUS_NAMES = {
    cp_model.OPTIMAL: "OPTIMAL",
    cp_model.FEASIBLE: "FEASIBLE",
    cp_model.INFEASIBLE: "INFEASIBLE",
    cp_model.UNKNOWN: "UNKNOWN",
    cp_model.MODEL_INVALID: "MODEL_INVALID",
}


class ModelInvalidError(RuntimeError):
    """CP-SAT rejected the model: a bug in an encoding, never a user error."""


@dataclass
class Solution:
    placements: dict[str, int] = field(default_factory=dict)
    victims: list[Victim] = field(default_factory=list)
    nominations: dict[str, int] = field(default_factory=dict)
    status: str = "OPTIMAL"
    objective: Optional[float] = None
    bound: Optional[float] = None
    variables: int = 0
    constraints: int = 0
    build_time: float = 0.0
    solve_time: float = 0.0
    components: int = 0
    node_groups: int = 0  # groups of interchangeable nodes whose symmetry was broken
    greedy_components: int = 0  # components where the solver found nothing and greedy stood in
    hint_components: int = 0  # components where the packing hint beat what the solve found (or nothing)
    # The step the decision degraded to because the per-node model would overrun the limit
    # ("node classes"), how many node classes it used, pods decoding could not fit, and whether
    # the solve was skipped (the build used the whole limit).
    degraded: Optional[str] = None
    node_classes: Optional[int] = None
    decode_lost: int = 0
    greedy_rest: int = 0  # pods greedy placed on top of the node-class plan
    solve_skipped: bool = False
    gang_rejected: dict[str, str] = field(default_factory=dict)


@dataclass
class CpsatOutcome:
    greedy: Optional[GreedyResult]  # None: greedy was stopped, the solver's plan is chosen
    solution: Optional[Solution]
    chose_solver: bool
    fallback_reason: Optional[str]
    static: StaticFilters
    greedy_time: float
    chosen_because: Optional[str] = None  # why the returned plan was picked (``choose``)
    degraded: Optional[str] = None  # the step taken when the per-node model would overrun ("node classes", "greedy")


def tier_weights(priorities: list[int]) -> dict[int, int]:
    """Weight per priority so one pod of a tier outweighs every pod of the tiers below."""
    weights: dict[int, int] = {}
    weight, total = 1, 0
    for p in sorted(set(priorities)):
        weights[p] = weight
        total += weight * priorities.count(p)
        weight = total + 1
    return weights


def _solver(cfg, budget: float, num_variables: int = 0, hint_complete: bool = False, presolve: bool = True) -> cp_model.CpSolver:
    solver = interrupt.new_solver()
    params = solver.parameters
    if not presolve or num_variables > (PRESOLVE_MAX_VARIABLES_HINTED if hint_complete else PRESOLVE_MAX_VARIABLES):
        params.cp_model_presolve = False
    if cfg.parameters:
        _merge_parameters(params, cfg.parameters)
    params.max_time_in_seconds = max(budget, 0.001)
    params.num_workers = cfg.workers or AUTO_WORKERS
    params.random_seed = cfg.seed
    if cfg.relative_gap:
        params.relative_gap_limit = cfg.relative_gap
    if cfg.workers == 1:
        # One worker is deterministic only if it stops on work done, not on the wall clock.
        params.max_deterministic_time = max(budget, 0.001)
        params.max_time_in_seconds = max(budget, 0.001) * 4 + 1
    return solver


def _merge_parameters(params, text: str) -> None:
    """Merge expert parameters (protobuf text) into the solver's, whichever wrapper it has.

    OR-tools up to 9.12 hands out a Python protobuf message; later versions a C++ wrapper with
    its own text parser (``merge_text_format``), which the protobuf library cannot write to.
    """
    try:
        if hasattr(params, "merge_text_format"):
            if not params.merge_text_format(text):
                raise text_format.ParseError("rejected by OR-tools' parser")
        else:
            text_format.Merge(text, params)
    except text_format.ParseError as exc:
        raise InputError("config", "solver.parameters", f"not CP-SAT parameters: {exc}") from None


def _stages(levels: list[Level]) -> list[list[Level]]:
    """Group consecutive levels whose combined range fits exact weights into one stage."""
    levels = [lv for lv in levels if lv.terms]
    stages: list[list[Level]] = []
    current: list[Level] = []
    span = 1
    for lv in reversed(levels):
        lo, hi = lv.bounds()
        width = hi - lo + 1
        if current and span * width > MAX_STAGE_RANGE:
            stages.insert(0, current)
            current, span = [], 1
        current.insert(0, lv)
        span *= width
    if current:
        stages.insert(0, current)
    return stages


def _stage_terms(stage: list[Level]) -> tuple[list, list[int]]:
    """Σ M_i · level_i with M_i the product of the ranges of the less important levels, as
    (variables, coefficients)."""
    terms, coeffs = [], []
    mult = 1
    for lv in reversed(stage):
        for var, coeff in lv.terms:
            terms.append(var)
            coeffs.append(coeff * mult)
        lo, hi = lv.bounds()
        mult *= hi - lo + 1
    return terms, coeffs


def maximize(model: cp_model.CpModel, terms: list, coeffs: list[int]) -> None:
    """``model.maximize(Σ coeffs·terms)``, written into the proto in bulk: the same objective
    (repeated variables merged, zero coefficients dropped, by variable index, negated with a
    scaling factor of -1, as ``CpModel.maximize`` writes it), without OR-tools' Python loop of
    one protobuf append per term (seconds for the 640,000 terms of a 1,000-node window)."""
    total: dict[int, int] = {}
    for var, coeff in zip(terms, coeffs):
        index = var.index
        total[index] = total.get(index, 0) + coeff
    indices = sorted(i for i, c in total.items() if c)
    model.clear_objective()
    objective = model.proto.objective
    objective.vars.extend(indices)
    objective.coeffs.extend([-total[i] for i in indices])
    objective.scaling_factor = -1.0
    objective.offset = 0


def build_component(ctx, classes, static, cand, ubs, gangs, sctx, weights, allow_preemption, kinds=(), alias=None) -> WindowModel:
    """One component's model. ``kinds``/``alias``: gang kinds and the context classes merged
    into their classes (``gang.merge_classes``)."""
    wm = WindowModel(ctx, classes, static, allow_preemption=allow_preemption)
    wm.alias = alias or {}
    for cls in classes:
        wm.cand[cls.id], wm.ub[cls.id] = cand[cls.id], ubs[cls.id]
    wm.create_variables()
    eviction.create(wm)
    wm.encodings[gang_mod.NAME] = gang_mod.GangEncoding(gangs, list(kinds))
    for encode in WINDOW_ENCODERS:
        interrupt.check()
        encode(wm)
    interrupt.check()
    eviction.encode_costs(wm, ctx)
    placement = wm.level("placement")
    for cls in classes:
        if not isinstance(wm.placed[cls.id], int):
            placement.add(wm.placed[cls.id], weights[cls.rep.priority], 0, cls.size)
    _encode_scores(wm, ctx, sctx)
    interrupt.check()
    break_symmetry(wm, enabled=ctx.config.solver.break_symmetry)
    return wm


def _encode_scores(wm: WindowModel, ctx: SchedulingContext, sctx) -> None:
    """Soft scores: kube-scheduler's weighted plugin total for each class on each candidate node,
    computed against the state before the window (the window's own effect on scores is not
    modelled). The packing profile first minimises the nodes that become active."""
    score = wm.level("score")
    if ctx.config.profile == "packing":
        active = Level("active_nodes")
        for n, on_node in wm.by_node.items():
            if wm.state.pods_on[n]:
                continue  # already active
            on = wm.model.new_bool_var(f"active[{n}]")
            for cls, var in on_node:
                wm.model.add(var <= wm.ub_of(cls.id, n) * on)
            active.add(on, -1, 0, 1)
        wm.levels.insert(wm.levels.index(score), active)
    if not any(ctx.config.scoring.weights.values()):
        return
    spreading = ctx.config.profile != "packing"
    for cls in interrupt.checked(wm.classes, every=4):
        entries = wm.by_class.get(cls.id)
        if not entries:
            continue
        nodes = np.array([n for n, _ in entries], dtype=np.int64)
        totals = score_nodes(cls.rep, nodes, wm.state, sctx) if len(nodes) > 1 else np.zeros(1, dtype=np.int64)
        for (n, var), s in zip(entries, totals.tolist()):
            score.add(var, crowding.SCALE * int(s), 0, wm.ub_of(cls.id, n))
        if spreading and len(nodes) > 1:
            _encode_crowding(wm, cls, entries, crowding.drop_per_pod(cls.rep, nodes, wm.state, sctx, class_size=cls.size))


def _encode_crowding(wm: WindowModel, cls: PodClass, entries, drops: np.ndarray) -> None:
    """Each further pod of a class on a node scores ``drop`` less than the one before it
    (``scores.crowding``): ``crowd[c, n] ≥ drop·k(k−1)/2`` for ``k = x[c, n]``, as tangents at
    integer points, subtracted from the score level."""
    score = wm.level("score")
    for (n, var), drop in zip(entries, drops.tolist()):
        ub = wm.ub_of(cls.id, n)
        if drop <= 0 or ub < 2:
            continue
        top = drop * ub * (ub - 1) // 2
        # crowd[c, n]: the score the class's pods on node n lose to each other.
        crowd = wm.model.new_int_var(0, top, f"crowd[{cls.id},{n}]")
        for j in crowding.tangent_points(ub):
            wm.model.add(crowd >= drop * j * var - drop * j * (j + 1) // 2)
        score.add(crowd, -1, 0, top)


def _solve_component(wm: WindowModel, cfg, deadline: float, presolve: bool = True) -> tuple[Optional[cp_model.CpSolver], str, Optional[float], Optional[float]]:
    stages = _stages(wm.levels)
    num_variables = len(wm.model.Proto().variables)
    if not stages:
        return None, "OPTIMAL", 0.0, 0.0
    status_name = "OPTIMAL"
    solver = None
    objective = bound = None
    for i, stage in enumerate(stages):
        remaining = deadline - time.monotonic()
        if remaining <= 0 and solver is not None:
            status_name = "FEASIBLE"
            break
        budget = remaining * (FIRST_STAGE_SHARE if i == 0 and len(stages) > 1 else 1.0 / (len(stages) - i))
        terms, coeffs = _stage_terms(stage)
        maximize(wm.model, terms, coeffs)
        this = _solver(cfg, budget, num_variables, hint_complete=wm.hint_complete and i == 0, presolve=presolve)
        with interrupt.stoppable(this):
            status = this.solve(wm.model)
        interrupt.check()
        log.debug(
            "stage %s: %s after %.2fs of %.2fs (objective %s)",
            "+".join(lv.name for lv in stage), STATUS_NAMES[status], this.wall_time, budget,
            this.objective_value if status in (cp_model.OPTIMAL, cp_model.FEASIBLE) else None,
        )
        if status == cp_model.MODEL_INVALID:
            raise ModelInvalidError(wm.model.validate() or "CP-SAT reported MODEL_INVALID")
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            if solver is None:
                return None, STATUS_NAMES[status], None, None
            status_name = "FEASIBLE"
            break
        solver = this
        if status == cp_model.FEASIBLE:
            status_name = "FEASIBLE"
        if i == 0:
            objective, bound = this.objective_value, this.best_objective_bound
        if i == len(stages) - 1:
            break
        # Fix this stage's value and hint the next stage with the solution found.
        wm.model.add(cp_model.LinearExpr.weighted_sum(terms, coeffs) >= int(round(this.objective_value)))
        wm.model.clear_hints()
        for var in wm.x.values():
            wm.model.add_hint(var, this.value(var))
        for var in wm.evict.values():
            wm.model.add_hint(var, this.value(var))
        for levels in wm.evict_level.values():
            if len(levels) > 1:
                for var in levels.values():
                    wm.model.add_hint(var, this.value(var))
        for placed in wm.placed.values():
            if not isinstance(placed, int):
                wm.model.add_hint(placed, this.value(placed))
        for var in gang_mod.encoding(wm).hint_vars():
            wm.model.add_hint(var, this.value(var))
    return solver, status_name, objective, bound


def _extract(wm: WindowModel, solver: cp_model.CpSolver | HintSolution, sol: Solution) -> None:
    counts: dict[int, list[tuple[int, int]]] = {}
    for (c, n), var in wm.x.items():
        k = solver.value(var)
        if k:
            counts.setdefault(c, []).append((n, k))
    placed_on: dict[int, list] = {}
    gang_runs = gang_mod.encoding(wm).runs
    in_kind = {c.id for kind, _ in gang_runs for c in kind.classes}
    for cls in wm.classes:
        if cls.id in in_kind:
            continue
        pods = iter(cls.pods)
        for n, k in sorted(counts.get(cls.id, [])):
            for _ in range(k):
                pod = next(pods)
                sol.placements[pod.key] = n
                placed_on.setdefault(n, []).append(pod)
    for kind, _ in gang_runs:
        ids = wm.state.domains(kind.topology_key)[0] if kind.topology_key is not None else None
        preferred_ids = tuple(wm.state.domains(key)[0] for key in kind.preferred_keys)
        for key, n in gang_mod.decode(kind, counts, ids, preferred_ids).items():
            sol.placements[key] = n
            placed_on.setdefault(n, []).append(wm.ctx.pod(key))
    for key, var in wm.evict.items():
        if solver.value(var):
            victim, n = wm.evict_pod[key]
            level = next(lv for lv, lam in wm.evict_level[key].items() if solver.value(lam))
            preemptors = [p for p in placed_on.get(n, []) if p.priority == level and victim_room.may_preempt(p, victim)]
            named = inter_pod_affinity.encoding(wm).preemptor_named.get(key)
            if named:
                # The model chose the class whose pod is named (the victim supports every other
                # pod's affinity: ``inter_pod_affinity.named_preemptor``).
                chosen = {c for c, b in named.items() if solver.value(b)}
                preemptors = [p for p in preemptors if wm.class_of(p) in chosen] or preemptors
            # A pod whose affinity the victim may support is named last: the victim supports every
            # pod but its own preemptor (``inter_pod_affinity.leans_on``).
            preemptor = min(preemptors, key=lambda p: (inter_pod_affinity.leans_on(p, victim), p.key))
            sol.victims.append(Victim(victim, n, preemptor.key))
            sol.nominations[preemptor.key] = n


def candidates(ctx, classes, static, gangs, allow_preemption):
    """Candidate nodes and upper bounds per class (shared by every component)."""
    state = ctx.state
    probe = WindowModel(ctx, classes, static, allow_preemption=allow_preemption)

    def extra_prune(cls: PodClass, can_preempt: bool, others=frozenset()) -> np.ndarray:
        """``others``: running pods another class's preemption may evict (their rules may go)."""
        rep = cls.rep
        gang = gangs.get(rep.group) if rep.group else None
        if gang is not None and gang.blocked(rep):
            return np.zeros(len(state.nodes), dtype=bool)

        def can_evict(other) -> bool:
            return (can_preempt and eviction.can_evict(rep, other, allow_preemption)) or other.key in others

        mask = np.ones(len(state.nodes), dtype=bool)
        for prune in PRUNES:
            mask &= prune(rep, state, can_evict, gangs)
        return mask

    probe.compute_candidates(extra_prune)
    return probe.cand, probe.ub


class _GreedyRun:
    """Greedy scheduleOne in a thread beside the model build and the solve.

    CP-SAT's solve releases the GIL, so the two overlap. Greedy works on its own copy of the
    state and its own score context; it stops early when asked (the solver proved optimality,
    so greedy cannot do better)."""

    def __init__(self, ctx: SchedulingContext, static: StaticFilters) -> None:
        self.cancel = threading.Event()
        self.progress = [0]
        self.result: Optional[GreedyResult] = None
        self.error: Optional[BaseException] = None
        self.started = time.monotonic()
        self.finished: Optional[float] = None
        state = ctx.state.copy()  # copied here, before the main thread registers counters
        self._thread = threading.Thread(
            target=self._run, args=(ctx, static, state), name="greedy-scheduleOne", daemon=True
        )
        self._thread.start()

    def _run(self, ctx, static, state) -> None:
        try:
            with interrupt.stoppable(cancel=self.cancel):
                self.result = schedule_greedy(ctx, static=static, state=state, cancel=self.cancel, progress=self.progress)
        except BaseException as exc:  # re-raised in the caller's thread by wait()
            self.error = exc
        finally:
            self.finished = time.monotonic()

    @property
    def done(self) -> bool:
        return self.finished is not None

    def wait(self, timeout: Optional[float] = None) -> Optional[GreedyResult]:
        self._thread.join(timeout)
        if self.error is not None:
            raise self.error
        return self.result if self.done else None

    @property
    def seconds(self) -> float:
        return (self.finished or time.monotonic()) - self.started


# At most this share of the time left may go to completing the hint: milliseconds on small
# windows, about 0.4 s for gang medium's 33,000 variables (0.1 of what was left did not finish
# it on a loaded machine).
COMPLETE_HINT_SHARE = 0.25
# Greedy goes first (its plan is the hint) when it should take at most this share of the limit;
# a larger window is built first, hinted by first fit, and greedy runs beside the solve.
GREEDY_FIRST_SHARE = 0.25
# ... and is waited for at most this share of the limit before the build starts without it.
GREEDY_FIRST_WAIT_SHARE = 0.4
# Rough cost of greedy per pod and node looked at (filter and score), measured on 2 cores.
GREEDY_SECONDS_PER_NODE_CHECK = 2e-6


def estimated_greedy_seconds(ctx: SchedulingContext) -> float:
    from ..node_order import num_feasible_nodes_to_find

    looked_at = num_feasible_nodes_to_find(len(ctx.nodes), ctx.config.percentage_of_nodes_to_score)
    return len(ctx.window) * looked_at * GREEDY_SECONDS_PER_NODE_CHECK


def solve_window(ctx: SchedulingContext, *, time_limit: Optional[float] = None) -> CpsatOutcome:
    cfg = ctx.config
    start = time.monotonic()
    limit = cfg.solver.time_limit_seconds if time_limit is None else time_limit
    deadline = start + limit
    static = StaticFilters(ctx.nodes, ctx.window)
    if limit <= 0 or not ctx.window or not ctx.nodes:
        greedy = schedule_greedy(ctx, static=static)
        greedy_time = time.monotonic() - start
        if limit <= 0:
            return CpsatOutcome(greedy, None, False, "time limit is 0: greedy plan returned", static, greedy_time)
        # Nothing to decide (no pending pod, or no node to put one on): the empty model is
        # trivially optimal, and greedy's plan (every pod explained) is the same decision.
        return CpsatOutcome(greedy, Solution(), True, None, static, greedy_time, "nothing to decide")
    greedy_first = estimated_greedy_seconds(ctx) <= GREEDY_FIRST_SHARE * limit
    runner: list[_GreedyRun] = []
    try:
        if greedy_first:
            progress.stage("greedy scheduleOne first: its plan is the solver's hint")
            runner.append(_GreedyRun(ctx, static))
            # The estimate cannot see pods that fail (each one costs a pass over every node and
            # a preemption dry run): if greedy overruns, the model is built and hinted without
            # its plan, and greedy finishes beside the solve instead of eating its time.
            if runner[0].wait(GREEDY_FIRST_WAIT_SHARE * limit) is None and not runner[0].done:
                log.debug("greedy still running after %.1fs; building the model beside it", time.monotonic() - start)
                progress.stage("greedy is slow: building the model beside it")
            interrupt.check()
        return _solve_beside_greedy(ctx, static, runner, start, deadline)
    finally:
        for run in runner:
            run.cancel.set()  # whatever happened, the thread stops at its next pod


def _solve_beside_greedy(ctx, static, runner: list, start: float, deadline: float) -> CpsatOutcome:
    cfg = ctx.config
    allow_preemption = cfg.preemption.enabled
    gangs = gang_mod.collect(ctx)
    sctx = ScoreContext.of(ctx)
    weights = tier_weights([p.priority for p in ctx.window])
    build_start = time.monotonic()
    # Interchangeable gangs share classes: the model follows the variety of gangs, not their number.
    kinds = gang_mod.kinds(ctx, gangs)
    classes, alias = gang_mod.merge_classes(ctx.classes, kinds)
    # What the static filters leave is an upper bound on the pairs, known before the candidate
    # pass (itself seconds at 5,000 nodes): when even the bound is far past the budget, degrade now.
    upper = sum(int(static.mask(c.rep).sum()) for c in interrupt.checked(classes, every=32))
    if upper * BUILD_SECONDS_PER_PAIR > EARLY_FACTOR * BUILD_SHARE * (deadline - time.monotonic()):
        return _degraded(ctx, static, runner, start, deadline, upper, weights, allow_preemption, bound_only=True)
    cand, ubs = candidates(ctx, classes, static, gangs, allow_preemption)
    groups = {c.rep.group for c in classes if c.rep.group}
    running_members: dict[str, list] = {}
    for pod, n in ctx.state.pods():
        if pod.group in groups:
            running_members.setdefault(pod.group, []).append((pod, n))
    gated = gang_min_resources.gated(gangs)
    parts = components([c for c in classes if len(cand[c.id])], cand, running_members, allow_preemption, ctx.state,
                       linked_groups=frozenset(gated) if len(gated) > 1 else frozenset())
    sol = Solution(components=len(parts))
    pairs = sum(len(cand[c.id]) for part in parts for c in part)
    left = deadline - time.monotonic()
    if pairs * BUILD_SECONDS_PER_PAIR > BUILD_SHARE * left:
        # The per-node model would not be built (and loaded by CP-SAT) in time: degrade.
        return _degraded(ctx, static, runner, start, deadline, pairs, weights, allow_preemption)
    progress.stage(f"building the CP-SAT model: {len(parts)} component(s), {pairs:,} class x node pair(s); "
                   f"{_time_left(start, deadline)}")
    models = [
        build_component(ctx, part, static, cand, ubs, gangs, sctx, weights, allow_preemption, kinds, alias)
        for part in parts
    ]
    for wm in models:
        nv, nc = wm.size()
        sol.variables += nv
        sol.constraints += nc
        sol.node_groups += len(wm.node_groups)
    sol.build_time = time.monotonic() - build_start
    # The better of greedy's plan and a packing of whole gangs and plain pods (``hint``). With
    # greedy's plan the hint is completed to every variable; first fit hints uncoupled classes,
    # whose auxiliary values are trivial, and at that size the completing solve costs more than
    # it saves.
    budget = COMPLETE_HINT_SHARE * max(0.0, deadline - time.monotonic()) / max(len(models), 1)
    if runner:
        run = runner[0]
        hints = [best_hint(wm, run.result, ctx, weights, budget) for wm in models]
    else:
        # Greedy starts now, beside the hints: completing a hint and the solve run in CP-SAT,
        # outside the interpreter, and greedy's plan is waited for at the end anyway.
        run = _GreedyRun(ctx, static)
        runner.append(run)
        hints = [best_hint(wm, None, ctx, weights, budget) for wm in models]
    hint = ", ".join(f"{n} {name}" for name, n in Counter(hints).items())
    completed = sum("completed" in h for h in hints)
    log.debug(
        "built %d component(s): %d variables, %d constraints in %.2fs; hint: %s (%d/%d completed)",
        len(models), sol.variables, sol.constraints, sol.build_time, hint, completed, len(models),
    )

    statuses = []
    objective = bound = 0.0
    have_bounds = True
    solve_start = time.monotonic()
    progress.stage(f"solving: {sol.variables:,} variables, {sol.constraints:,} constraints; {_time_left(start, deadline)}")
    deadlines = _component_deadlines(parts, solve_start, deadline)
    unsolved = []  # components the solve found nothing for: greedy or the packing stands in
    for i, (part, wm) in enumerate(zip(parts, models)):
        t1 = time.monotonic()
        if t1 >= deadline:
            # The build used the whole limit: CP-SAT would spend its loading of the model to
            # answer UNKNOWN. The packing hint or greedy stands in.
            sol.solve_skipped = True
            unsolved.append((i, wm, "UNKNOWN"))
            continue
        part_deadline = max(deadlines[i], t1 + MIN_COMPONENT_SECONDS)
        solver, status, obj, bnd = _solve_component(wm, cfg.solver, part_deadline)
        log.debug("component %d: %s in %.2fs (objective %s, bound %s)", i, status, time.monotonic() - t1, obj, bnd)
        if solver is None and status != "OPTIMAL":
            unsolved.append((i, wm, status))
            continue
        if solver is not None and _packing_value(wm) > _placement_value(wm, solver):
            # Less than the packing it was hinted with (a partial hint is not always taken up).
            log.debug("component %d: the packing hint stands in", i)
            assert wm.hint_solution is not None  # _packing_value is -1 without it
            _extract(wm, wm.hint_solution, sol)
            statuses.append("FEASIBLE")
            sol.hint_components += 1
            have_bounds = False
            continue
        statuses.append(status)
        if solver is not None:
            _extract(wm, solver, sol)
            if obj is not None:
                objective += obj
                bound += bnd if bnd is not None else obj
            else:
                have_bounds = False
    # Waiting for greedy only now leaves every component its own share of the time.
    for i, wm, status in unsolved:
        statuses.append("FEASIBLE")
        have_bounds = False
        packing = _packing_value(wm) if status != "INFEASIBLE" else -1
        # A packing of every pod of the component cannot be beaten: greedy is not waited for.
        if packing == _full_value(wm, weights) or \
                packing > counts_value(wm, greedy_counts(wm, run.wait(), ctx), weights):
            log.debug("component %d: the packing hint stands in", i)
            assert wm.hint_solution is not None  # _packing_value is -1 without it
            _extract(wm, wm.hint_solution, sol)
            sol.hint_components += 1
        else:
            # Greedy's placements for its classes stand in (components share no node and no
            # rule, so the two plans combine).
            _take_from_greedy(wm, run.wait(), ctx, sol)
            sol.greedy_components += 1
    sol.solve_time = time.monotonic() - solve_start
    sol.status = "OPTIMAL" if all(s == "OPTIMAL" for s in statuses) else "FEASIBLE"
    sol.objective = objective if have_bounds else None
    sol.bound = bound if have_bounds else None
    # Small windows compare the two plans' final-state scores too (``scores.final_state``): the
    # model's score terms approximate how the window's pods crowd each other, greedy's are exact.
    scored = final_state.affordable(ctx)
    if (sol.status == "OPTIMAL" or (len(sol.placements) == len(ctx.window) and not sol.victims)) \
            and not run.done and not scored:
        # Proven optimal, or every pod placed with no victim: greedy's plan cannot be better
        # (``plan_value``), so it need not finish.
        run.cancel.set()
        run.wait()
        interrupt.check()
        return CpsatOutcome(None, sol, True, None, static, run.seconds, "greedy not needed: " + (
            "the solver's plan is proven optimal" if sol.status == "OPTIMAL" else "the solver's plan places every pod"))
    if not run.done:
        progress.stage("waiting for greedy's plan, to return the better of the two")
    greedy = run.wait()
    interrupt.check()
    better, why = choose(ctx, (sol.placements, sol.victims), (greedy.placements, greedy.victims), weights, scored=scored)
    return CpsatOutcome(greedy, sol, better, None, static, run.seconds, why)


# What one class x node pair costs, from the build through CP-SAT loading the model (measured on
# the realistic medium dump, 2 busy cores: 33 s to build 320,000 pairs, 10 s for CP-SAT to load
# their 640,000 variables).
BUILD_SECONDS_PER_PAIR = 1.3e-4
# Share of the time left the build may be estimated to take before the decision degrades.
BUILD_SHARE = 0.4
# ... and the degrading is decided before the candidate pass when the static filters' upper bound
# on the pairs is this many times past that share (resources and rules prune rarely more).
EARLY_FACTOR = 4
# The node-class model costs more per pair (each pseudo node holds many running pods, and its
# fixed costs weigh more at this size): measured 6 s for 15,680 pairs on 2 busy cores. It may take
# this share of the time left, the rest is the solve's.
NODE_CLASS_SECONDS_PER_PAIR = 3e-4
NODE_CLASS_BUILD_SHARE = 0.3


def _degraded(ctx, static, runner: list, start: float, deadline: float, pairs: int, weights,
              allow_preemption: bool, bound_only: bool = False) -> CpsatOutcome:
    """The decision in steps down from the per-node model: (a) node classes (``node_classes``),
    when the window allows them and some bucketing fits the budget; else (c) greedy's plan."""
    build_start = time.monotonic()
    budget_pairs = node_classes.pairs_budget(NODE_CLASS_BUILD_SHARE * (deadline - build_start), NODE_CLASS_SECONDS_PER_PAIR)
    why = node_classes.not_eligible(ctx, allow_preemption)
    buckets = None
    if why is None:
        buckets = node_classes.choose_buckets(ctx, budget_pairs // max(len(ctx.classes), 1))
        if buckets is None:
            why = f"even {node_classes.MIN_BUCKETS} free-room buckets leave too many node classes"
    estimate = f"{'up to ' if bound_only else ''}{pairs:,} class x node pairs, about {pairs * BUILD_SECONDS_PER_PAIR:.0f}s to build"
    if buckets is None:
        step = f"greedy: the per-node model ({estimate}) would overrun the time limit and node classes do not apply ({why})"
        progress.stage(f"degraded to {step}; waiting for greedy's plan")
        if not runner:
            runner.append(_GreedyRun(ctx, static))
        run = runner[0]
        greedy = run.wait()
        interrupt.check()
        return CpsatOutcome(greedy, None, False, f"degraded to {step}", static, run.seconds, degraded="greedy")
    reduced = node_classes.reduce(ctx, buckets)
    rctx = reduced.ctx
    rstatic = StaticFilters(rctx.nodes, rctx.window)
    cand, ubs = candidates(rctx, rctx.classes, rstatic, {}, allow_preemption)
    parts = components([c for c in rctx.classes if len(cand[c.id])], cand, {}, allow_preemption, rctx.state)
    rpairs = sum(len(cand[c.id]) for part in parts for c in part)
    step = (f"node classes: the per-node model ({estimate}) would overrun the time limit; "
            f"{len(ctx.nodes):,} nodes make {len(rctx.nodes):,} node classes ({buckets} free-room buckets per resource)")
    progress.stage(f"degraded to {step}: building {rpairs:,} class x node-class pair(s); {_time_left(start, deadline)}")
    sctx = ScoreContext.of(rctx)
    models = [build_component(rctx, part, rstatic, cand, ubs, {}, sctx, weights, allow_preemption) for part in parts]
    sol = Solution(components=len(parts), degraded="node classes", node_classes=len(rctx.nodes))
    for wm in models:
        nv, nc = wm.size()
        sol.variables += nv
        sol.constraints += nc
    hint_budget = COMPLETE_HINT_SHARE * max(0.0, deadline - time.monotonic()) / max(len(models), 1)
    fallbacks = []  # per component, the hint read as a plan: what stands when the solve finds less
    for wm in models:
        best_hint(wm, None, rctx, weights, hint_budget)
        if wm.hint_solution is None:
            counts = first_fit_counts(wm)
            fallbacks.append(HintSolution(wm, counts, counts_value(wm, counts, weights)))
        else:
            fallbacks.append(wm.hint_solution)
    sol.build_time = time.monotonic() - build_start
    solve_start = time.monotonic()
    pseudo = Solution()
    if time.monotonic() >= deadline:
        # The build used the whole limit: CP-SAT would spend its loading time to answer UNKNOWN.
        progress.stage("the build used the time limit: the solve is skipped, the packing hint stands")
        sol.solve_skipped = True
    else:
        progress.stage(f"solving over node classes: {sol.variables:,} variables, {sol.constraints:,} constraints; "
                       f"{_time_left(start, deadline)}")
    deadlines = _component_deadlines(parts, solve_start, deadline)
    for i, wm in enumerate(models):
        solver, status = None, "UNKNOWN"
        if not sol.solve_skipped:
            # Without presolve: on the realistic medium dump's 10,644 variables presolve took 6.5 s
            # of 7.7 and the search then found nothing; without it the search starts at once.
            solver, status, _, _ = _solve_component(wm, ctx.config.solver, max(deadlines[i], time.monotonic() + MIN_COMPONENT_SECONDS),
                                                    presolve=False)
        if solver is not None and fallbacks[i].placement_value <= _placement_value(wm, solver):
            _extract(wm, solver, pseudo)
        else:
            _extract(wm, fallbacks[i], pseudo)
            sol.hint_components += 1
    sol.placements, lost = node_classes.decode(reduced, ctx, pseudo.placements)
    sol.decode_lost = lost
    rest = [p for p in ctx.window if p.key not in sol.placements]
    if rest:  # cheaper than the whole window's greedy run, which is waited for anyway
        # (c) greedy for the rest: what the node-class plan left (what the solve found no place
        # for in its time, what decoding could not fit) goes through scheduleOne on top of it.
        progress.stage(f"greedy for the rest: {len(rest):,} pod(s) the node-class plan left")
        state = ctx.state.copy()
        for key, n in sol.placements.items():
            state.add(ctx.pod(key), n)
        cancel = threading.Event()  # Ctrl-C stops it at the next pod (``interrupt.request``)
        with interrupt.stoppable(cancel=cancel):
            more = schedule_greedy(dataclasses.replace(ctx, window=rest), static=static, allow_preemption=False,
                                   state=state, cancel=cancel)
        interrupt.check()
        sol.placements.update(more.placements)
        sol.greedy_rest = len(more.placements)
        sol.degraded = "node classes + greedy for the rest"
    sol.solve_time = time.monotonic() - solve_start
    # Bounds over node classes are not bounds of the real problem: none are reported.
    sol.status = "FEASIBLE"
    log.debug("node classes: %d, %d variables, %d constraints, %d pod(s) lost in decoding",
              len(rctx.nodes), sol.variables, sol.constraints, lost)
    scored = final_state.affordable(ctx)
    if len(sol.placements) == len(ctx.window) and not (runner and runner[0].done) and not scored:
        # Every pod placed, no victim: greedy's plan cannot be better (``plan_value``). The
        # whole window's greedy run is started only when it may be (it would hold the
        # interpreter through the build), so usually it never runs.
        for run in runner:
            run.cancel.set()
            run.wait()
        interrupt.check()
        return CpsatOutcome(None, sol, True, None, static, runner[0].seconds if runner else 0.0,
                            "greedy not needed: the solver's plan places every pod", degraded=sol.degraded)
    if not runner:
        runner.append(_GreedyRun(ctx, static))
    run = runner[0]
    if not run.done:
        progress.stage("waiting for greedy's plan, to return the better of the two")
    greedy = run.wait()
    interrupt.check()
    better, chosen = choose(ctx, (sol.placements, sol.victims), (greedy.placements, greedy.victims), weights, scored=scored)
    return CpsatOutcome(greedy, sol, better, None, static, run.seconds, chosen, degraded=sol.degraded)


# Each component gets at least this long, even when the ones before it overran their share.
MIN_COMPONENT_SECONDS = 0.2


def _time_left(start: float, deadline: float) -> str:
    """How much of the time limit is left, for a progress line; when nothing is, what happens
    instead (the solve still gets its minimum, and CP-SAT checks its limit only once it has
    loaded the model: 11 s for 640,000 variables on two busy cores)."""
    now = time.monotonic()
    limit = deadline - start
    if now < deadline:
        return f"{deadline - now:.1f}s of the {limit:g}s time limit left"
    return (f"the {limit:g}s time limit is used up ({now - start:.1f}s into the decision): the solve gets "
            f"{MIN_COMPONENT_SECONDS:g}s per component, plus what CP-SAT takes to load a model this size")


def _component_deadlines(parts, start: float, deadline: float) -> list[float]:
    """Cumulative deadlines by pod share: time a component leaves unused flows to the next."""
    sizes = [sum(c.size for c in part) for part in parts]
    total = sum(sizes) or 1
    out, done = [], 0
    for size in sizes:
        done += size
        out.append(start + (deadline - start) * done / total)
    return out


def _packing_value(wm: WindowModel) -> int:
    """The packing hint's placement value, or -1 when the hint was not the packing."""
    return wm.hint_solution.placement_value if wm.hint_solution is not None else -1


def _full_value(wm: WindowModel, weights: dict[int, int]) -> int:
    """The placement value of every pod of the component placed."""
    return sum(weights[c.rep.priority] * c.size for c in wm.classes)


def _placement_value(wm: WindowModel, solver) -> int:
    return sum(coeff * solver.value(var) for var, coeff in wm.level("placement").terms)


def _take_from_greedy(wm: WindowModel, greedy: GreedyResult, ctx, sol: Solution) -> None:
    classes = {c.id for c in wm.classes}
    members = {p.key for c in wm.classes for p in c.pods}
    for key, node in greedy.placements.items():
        if wm.class_of(ctx.pod(key)) in classes:
            sol.placements[key] = node
    for victim in greedy.victims:
        if victim.preemptor in members:
            sol.victims.append(victim)
    for key, node in greedy.nominations.items():
        if key in members:
            sol.nominations[key] = node


# A plan as ``choose`` weighs it: (placements, victims).
PlanPair = tuple[dict[str, int], list[Victim]]


def not_worse(ctx, ours: PlanPair, theirs: PlanPair, weights: dict[int, int]) -> bool:
    """Whether plan ``ours`` (placements, victims) is at least as good as ``theirs`` in the model's
    own lexicographic order, both weighed on one scale: the victims' priority tiers are built from
    both plans' victims together (each plan's own tiers could rank one priority-5 victim below
    three priority-0 ones, the reverse of the model's order)."""
    return choose(ctx, ours, theirs, weights, scored=False)[0]


# Why one plan was chosen over the other, by the first level of ``plan_value`` that differs.
_LEVELS = ("places more by priority", "breaks fewer PodDisruptionBudgets", "evicts lower priorities",
           "evicts fewer pods", "keeps preferred-topology gangs in fewer domains")


def choose(ctx, ours: PlanPair, theirs: PlanPair, weights: dict[int, int], *, scored: bool) -> tuple[bool, str]:
    """(whether the solver's plan ``ours`` is kept over greedy's ``theirs``, why). Ties on the model's
    lexicographic levels go to the higher final-state score when ``scored``, else to ``ours``."""
    scale = tier_weights([v.pod.priority for v in (*ours[1], *theirs[1])])
    a, b = plan_value(ctx, *ours, weights, scale), plan_value(ctx, *theirs, weights, scale)
    for level, x, y in zip(_LEVELS, a, b):
        if x != y:
            return (x > y), ("solver's plan " if x > y else "greedy's plan ") + level
    if scored:
        sa = final_state.final_state_score(ctx, ours[0], [v.pod for v in ours[1]])
        sb = final_state.final_state_score(ctx, theirs[0], [v.pod for v in theirs[1]])
        if sa != sb:
            return (sa > sb), ("solver's" if sa > sb else "greedy's") + f" plan scores higher on the final state ({max(sa, sb)} vs {min(sa, sb)})"
    return True, "equal plans: the solver's is kept"


def plan_value(ctx, placements: dict[str, int], victims: list[Victim], weights: dict[int, int],
               victim_weights: dict[int, int]) -> tuple:
    """Lexicographic value of a plan, as the model orders it: placement by priority tier, then
    PodDisruptionBudget violations, the victims' priority tiers (``victim_weights``, one scale for
    every plan compared), the number of victims, then the domains preferred-topology gangs span
    (``gang.preferred``), widest level first."""
    placed = sum(weights[ctx.pod(k).priority] for k in placements)
    return (
        placed,
        -PdbBudgets.of(ctx).violations(v.pod for v in victims),
        -sum(victim_weights[v.pod.priority] for v in victims),
        -len(victims),
        tuple(-count for count in gang_preferred.spans(ctx, placements)),
    )

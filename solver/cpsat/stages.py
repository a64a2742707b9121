"""Solving one component's model: CP-SAT's parameters (``new_solver``), the objective levels
grouped into stages that fit exact integer weights, and the staged (lexicographic) solve."""

from __future__ import annotations

import logging
import re
import time
from typing import Callable, Optional

from google.protobuf import text_format
from ortools.sat.python import cp_model

from models.errors import InputError

from .. import interrupt
from ..plugin_api import CarriesHint
from .model import Level, WindowModel
from .outcome import STATUS_NAMES, ModelInvalidError

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


def new_solver(cfg, budget: float, num_variables: int = 0, hint_complete: bool = False, presolve: bool = True,
               work: Optional[float] = None, clock: bool = False) -> cp_model.CpSolver:
    """A CP-SAT solver for ``budget`` seconds. With one worker (``cfg.workers == 1``) the solve
    stops on work done, ``work`` deterministic seconds (``budget`` when not given), unless the
    user's own parameters set ``max_deterministic_time``; the wall clock then only guards.
    ``clock``: one worker on the wall clock all the same (a worker the decision chose, not the
    user's reproducible decision: ``lns`` beside a second search)."""
    solver = interrupt.new_solver()
    params = solver.parameters
    if not presolve or num_variables > (PRESOLVE_MAX_VARIABLES_HINTED if hint_complete else PRESOLVE_MAX_VARIABLES):
        params.cp_model_presolve = False
    if cfg.parameters:
        merge_parameters(params, cfg.parameters)
    params.max_time_in_seconds = max(budget, 0.001)
    params.num_workers = cfg.workers or AUTO_WORKERS
    params.random_seed = cfg.seed
    if cfg.relative_gap:
        params.relative_gap_limit = cfg.relative_gap
    if cfg.workers == 1 and not clock:
        # One worker is deterministic only if it stops on work done, not on the wall clock.
        if not user_sets_work_limit(cfg):
            params.max_deterministic_time = max(budget if work is None else work, 0.001)
        params.max_time_in_seconds = max(budget, 0.001) * 4 + 1
    return solver


def user_sets_work_limit(cfg) -> bool:
    """Whether the user's expert parameters set ``max_deterministic_time`` (kept as given)."""
    return bool(cfg.parameters) and re.search(r"\bmax_deterministic_time\b", cfg.parameters) is not None


def merge_parameters(params, text: str) -> None:
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


def stages_of(levels: list[Level]) -> list[list[Level]]:
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


def stage_terms(stage: list[Level]) -> tuple[list, list[int]]:
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



# The first stage's solutions a ``Recorder`` keeps: its first ones (closest to the hint) and its
# latest (the best so far).
RECORDED_FIRST, RECORDED_LAST = 6, 12


class Recorder(cp_model.CpSolverSolutionCallback):
    """The values of ``variables`` in each solution the first stage finds, as (objective,
    {variable index: value}), the first ``RECORDED_FIRST`` and the latest ``RECORDED_LAST`` kept:
    a caller that refuses the stage's last solution may find an earlier one it accepts
    (``kube_victims``)."""

    def __init__(self, variables: list) -> None:
        super().__init__()
        self.variables = variables
        self.found: list[tuple[float, dict[int, int]]] = []

    def on_solution_callback(self) -> None:
        self.found.append((self.objective_value, {v.index: self.value(v) for v in self.variables}))
        if len(self.found) > RECORDED_FIRST + RECORDED_LAST:
            del self.found[RECORDED_FIRST]


def solve_component(wm: WindowModel, cfg, deadline: float, presolve: bool = True, work: Optional[float] = None,
                    accept: Optional[Callable[[cp_model.CpSolver], bool]] = None,
                    record: Optional[Recorder] = None, polish_only_gains: bool = False, polish: bool = True,
                    clock: bool = False, spent: Optional[list[float]] = None
                    ) -> tuple[Optional[cp_model.CpSolver], str, Optional[float], Optional[float]]:
    """Solve ``wm`` stage by stage until ``deadline``: (the solver holding the last stage's
    solution or None, its status, the first stage's objective and bound). ``work``: with one
    worker, the deterministic seconds the stages share (``new_solver``), so a fixed seed gives
    the same plan whatever else the machine is doing. ``accept``: asked of the first stage's
    solution when later stages follow; a solution it refuses is returned at once (FEASIBLE), the
    later stages not run: their time would be spent polishing a plan the caller throws away.
    ``record``: told of each solution of the first stage. ``polish_only_gains``: a stage of
    ``POLISH_LEVELS`` alone runs only when the stages before it beat the (complete) hint, the
    incumbent a neighbourhood round improves on: its caller ranks plans without them, and a plan
    no better than the hint is thrown away however well it is polished. ``polish``: False skips
    the stages of ``POLISH_LEVELS`` alone whatever the stages before them found (a search too short
    to spend a third of a round on scores). ``clock``: ``new_solver``'s. ``spent``: told each
    stage's deterministic seconds (with ``work``, what the stages used of it)."""
    stages = stages_of(wm.levels)
    if not polish:  # (the first stage stays: it is the plan)
        stages = stages[:1] + [st for st in stages[1:] if not all(lv.name in POLISH_LEVELS for lv in st)]
    hinted = _hint_values(wm, stages) if polish_only_gains else None
    num_variables = len(wm.model.Proto().variables)
    if not stages:
        return None, "OPTIMAL", 0.0, 0.0
    status_name = "OPTIMAL"
    solver = None
    objective = bound = None
    found: list[int] = []
    for i, stage in enumerate(stages):
        remaining = deadline - time.monotonic()
        if remaining <= 0 and solver is not None:
            status_name = "FEASIBLE"
            break
        if hinted is not None and solver is not None and all(lv.name in POLISH_LEVELS for lv in stage) \
                and not tuple(found) > tuple(hinted[:i]):
            status_name = "FEASIBLE"
            break
        share = FIRST_STAGE_SHARE if i == 0 and len(stages) > 1 else 1.0 / (len(stages) - i)
        budget = remaining * share
        terms, coeffs = stage_terms(stage)
        maximize(wm.model, terms, coeffs)
        this = new_solver(cfg, budget, num_variables, hint_complete=wm.hint_complete and i == 0, presolve=presolve,
                          work=None if work is None else work * share, clock=clock)
        with interrupt.stoppable(this):
            status = this.solve(wm.model, record) if i == 0 and record is not None else this.solve(wm.model)
        interrupt.check()
        if spent is not None:  # (whatever the stage found: its work is spent)
            spent.append(this.response_proto.deterministic_time)
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
        if work is not None:
            work = max(work - this.response_proto.deterministic_time, 0.0)
        if status == cp_model.FEASIBLE:
            status_name = "FEASIBLE"
        if i == 0:
            objective, bound = this.objective_value, this.best_objective_bound
        found.append(round(this.objective_value))
        if i == len(stages) - 1:
            break
        if i == 0 and accept is not None and not accept(this):
            return this, "FEASIBLE", objective, bound
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
        for enc in wm.encodings.values():
            if isinstance(enc, CarriesHint):
                for var in enc.hint_vars():
                    wm.model.add_hint(var, this.value(var))
    return solver, status_name, objective, bound


# Levels that only polish a plan (``solve_component``'s ``polish_only_gains``).
POLISH_LEVELS = frozenset({"score"})


def _hint_values(wm: WindowModel, stages: list[list[Level]]) -> Optional[list[int]]:
    """Each stage's objective at the model's hint, or None when the hint does not name every
    variable a stage reads."""
    hint = wm.model.proto.solution_hint
    values = dict(zip(hint.vars, hint.values))
    out = []
    for stage in stages:
        terms, coeffs = stage_terms(stage)
        total = 0
        for var, coeff in zip(terms, coeffs):
            value = values.get(var.index)
            if value is None:
                return None
            total += coeff * value
        out.append(total)
    return out


# Each component gets at least this long, even when the ones before it overran their share.
MIN_COMPONENT_SECONDS = 0.2


def time_left(start: float, deadline: float) -> str:
    """How much of the time limit is left, for a progress line; when nothing is, what happens
    instead (the solve still gets its minimum, and CP-SAT checks its limit only once it has
    loaded the model: 11 s for 640,000 variables on two busy cores)."""
    now = time.monotonic()
    limit = deadline - start
    if now < deadline:
        return f"{deadline - now:.1f}s of the {limit:g}s time limit left"
    return (f"the {limit:g}s time limit is used up ({now - start:.1f}s into the decision): the solve gets "
            f"{MIN_COMPONENT_SECONDS:g}s per component, plus what CP-SAT takes to load a model this size")


def component_deadlines(parts, start: float, deadline: float) -> list[float]:
    """Cumulative deadlines by pod share: time a component leaves unused flows to the next."""
    sizes = [sum(c.size for c in part) for part in parts]
    total = sum(sizes) or 1
    out, done = [], 0
    for size in sizes:
        done += size
        out.append(start + (deadline - start) * done / total)
    return out




# At most this share of the time left may go to completing the hint: milliseconds on small
# windows, about 0.4 s for gang medium's 33,000 variables (0.1 of what was left did not finish
# it on a loaded machine).
COMPLETE_HINT_SHARE = 0.25

"""The CP-SAT engine: greedy first, then one model per independent component, solved
lexicographically, and the better of the two plans returned.

1. Greedy ``scheduleOne`` runs first: cheap, the solution hint, and the fallback (``greedy_run``).
2. Candidate nodes per pod class are pruned; the window splits into independent components.
3. Each component becomes a ``WindowModel``; every rule adds its constraints from its module
   (``build``).
4. Objective levels (placement by priority tier, PDB violations, victim priorities, victims,
   scores) are solved lexicographically: levels whose combined range fits exact integer weights
   share one stage; otherwise each stage fixes the value reached before the next begins
   (``stages``). A solution is read back by ``decode``.
5. Whatever the solver found is compared with greedy on the same lexicographic value; the better
   one is returned (``choose``). No incumbent at the limit (or a zero time limit) returns greedy,
   marked. A model that would not be built in time degrades in steps (``degraded``).

With one worker (``solver.workers: 1``) and a fixed seed the decision is reproducible whenever the
time limit is not what stops it: the hint is chosen without greedy's plan (whether greedy had
finished was a race between threads), greedy running beside the solve, and each component's solve
is bounded by deterministic work, its share of the limit by pods, not by the wall-clock time the
build happened to leave.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass
from typing import Optional

from .. import interrupt, progress
from ..context import SchedulingContext
from ..filtering import StaticFilters
from ..greedy import GreedyResult, schedule_greedy
from ..plugin_api import WindowPart
from ..plugins.registry import window_parts
from ..scoring import ScoreContext, final_state
from .build import BuildInput, build_component, candidates
from .choose import PlanPair, choose, not_worse, plan_value, tier_weights
from .components import budget_links, components
from .decode import extract, full_value, packing_value, placement_value, take_from_greedy
from . import guided
from . import degraded as steps  # read as steps.X: tests and tuning set them there
from .greedy_run import (GREEDY_FIRST_SHARE, GREEDY_FIRST_WAIT_SHARE, GREEDY_SECONDS_PER_NODE_CHECK, GreedyRun,
                         estimated_greedy_seconds)
from .kube_victims import name_by_replay, solve_sound
from .hint import best_hint, counts_value, greedy_counts
from .model import WindowModel
from .outcome import STATUS_NAMES, CpsatOutcome, ModelInvalidError, Solution
from .stages import (AUTO_WORKERS, COMPLETE_HINT_SHARE, FIRST_STAGE_SHARE, MAX_STAGE_RANGE, MIN_COMPONENT_SECONDS,
                     PRESOLVE_MAX_VARIABLES, PRESOLVE_MAX_VARIABLES_HINTED, component_deadlines, maximize,
                     new_solver, solve_component, time_left)

# The names this module has always offered (repack, the bench and tests import them from here).
_solver = new_solver
__all__ = [
    "AUTO_WORKERS", "COMPLETE_HINT_SHARE",
    "FIRST_STAGE_SHARE", "GREEDY_FIRST_SHARE", "GREEDY_FIRST_WAIT_SHARE", "GREEDY_SECONDS_PER_NODE_CHECK",
    "MAX_STAGE_RANGE", "MIN_COMPONENT_SECONDS",
    "PRESOLVE_MAX_VARIABLES", "PRESOLVE_MAX_VARIABLES_HINTED", "STATUS_NAMES", "BuildInput", "CpsatOutcome",
    "ModelInvalidError", "PlanPair", "Solution", "build_component", "candidates", "choose", "estimated_greedy_seconds",
    "maximize", "model_classes", "not_worse", "plan_value", "solve_window", "tier_weights",
]

log = logging.getLogger("cpsat_scheduler.solver")


def deterministic(ctx: SchedulingContext) -> bool:
    """Whether the user asked for a reproducible decision: one CP-SAT worker."""
    return ctx.config.solver.workers == 1


@dataclass
class Window:
    """One decision in progress: what every step of ``solve_window`` reads."""

    ctx: SchedulingContext
    static: StaticFilters
    runner: list[GreedyRun]  # greedy's thread, once started
    start: float
    deadline: float
    # Seconds kept back from the solve for the guided passes (``guided.reserve``), at the end.
    reserved: float = 0.0

    @property
    def limit(self) -> float:
        return self.deadline - self.start


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
    # With one worker the hint must not depend on which thread is faster (greedy finishing
    # before the build or not): the hint is then chosen without greedy's plan, by a rule that
    # reads no clock (the packing or first fit, ``hint.best_hint``), and greedy runs beside the
    # solve as for a large window; its plan is still weighed against the solver's at the end.
    greedy_first = not deterministic(ctx) and estimated_greedy_seconds(ctx) <= GREEDY_FIRST_SHARE * limit
    runner: list[GreedyRun] = []
    try:
        if greedy_first:
            progress.stage("greedy scheduleOne first: its plan is the solver's hint")
            runner.append(GreedyRun(ctx, static))
            # The estimate cannot see pods that fail (each one costs a pass over every node and
            # a preemption dry run): if greedy overruns, the model is built and hinted without
            # its plan, and greedy finishes beside the solve instead of eating its time.
            if runner[0].wait(GREEDY_FIRST_WAIT_SHARE * limit) is None and not runner[0].done:
                log.debug("greedy still running after %.1fs; building the model beside it", time.monotonic() - start)
                progress.stage("greedy is slow: building the model beside it")
            interrupt.check()
        return _solve_beside_greedy(Window(ctx, static, runner, start, deadline))
    finally:
        for run in runner:
            run.cancel.set()  # whatever happened, the thread stops at its next pod


def _solve_beside_greedy(win: Window) -> CpsatOutcome:
    ctx, static = win.ctx, win.static
    allow_preemption = ctx.config.preemption.enabled
    weights = tier_weights([p.priority for p in ctx.window])
    build_start = time.monotonic()
    window, classes, alias = model_classes(ctx)
    # What the static filters leave is an upper bound on the pairs, known before the candidate
    # pass (itself seconds at 5,000 nodes): when even the bound is far past the budget, degrade now.
    upper = sum(int(static.mask(c.rep).sum()) for c in interrupt.checked(classes, every=32))
    if upper * steps.BUILD_SECONDS_PER_PAIR > steps.EARLY_FACTOR * steps.BUILD_SHARE * (win.deadline - time.monotonic()):
        return steps.degraded(ctx, static, win.runner, win.start, win.deadline, upper, weights, allow_preemption, bound_only=True)
    cand, ubs = candidates(ctx, classes, static, window, allow_preemption)
    parts = _components(ctx, classes, cand, window, allow_preemption)
    pairs = sum(len(cand[c.id]) for part in parts for c in part)
    if pairs * steps.BUILD_SECONDS_PER_PAIR > steps.BUILD_SHARE * (win.deadline - time.monotonic()):
        # The per-node model would not be built (and loaded by CP-SAT) in time: degrade.
        return steps.degraded(ctx, static, win.runner, win.start, win.deadline, pairs, weights, allow_preemption)
    progress.stage(f"building the CP-SAT model: {len(parts)} component(s), {pairs:,} class x node pair(s); "
                   f"{time_left(win.start, win.deadline)}")
    inp = BuildInput(ctx, static, cand, ubs, ScoreContext.of(ctx), weights, allow_preemption, window, alias)
    models = [build_component(inp, part) for part in parts]
    sol = Solution(components=len(parts))
    for wm in models:
        nv, nc = wm.size()
        sol.variables += nv
        sol.constraints += nc
        sol.node_groups += len(wm.node_groups)
    sol.build_time = time.monotonic() - build_start
    run = _hint(win, models, weights, sol)
    if run.done and not deterministic(ctx):
        win.reserved = guided.reserve(run.seconds, win.limit)
    _solve_components(win, parts, models, weights, run, sol)
    return _choose(win, sol, run, weights, models)


def model_classes(ctx: SchedulingContext) -> tuple[dict[str, WindowPart], list, dict[int, int]]:
    """Each rule's view of the whole window, by plugin name (``plugin_api.WindowPart``: the gangs
    in it), and the model's classes as the rules merge them (interchangeable gangs share classes:
    the model follows the variety of gangs, not their number) with the alias of each merged-away
    context class id."""
    window = window_parts(ctx)
    classes, alias = ctx.classes, {}
    for part in window.values():
        classes, merged = part.merge(classes)
        alias.update(merged)
    return window, classes, alias


def _components(ctx, classes, cand, window, allow_preemption: bool) -> list:
    """The window's independent components over the classes with a candidate node. A class
    that may evict a running member of a window gang couples with the gang's classes (the
    pod's ``group`` is shared pod data, not a rule's); the rules' window parts link the
    classes that must share a component, and so do classes that may evict pods of one budget."""
    groups = {c.rep.group for c in classes if c.rep.group}
    running_members: dict[str, list] = {}
    for pod, n in ctx.state.pods():
        if pod.group in groups:
            running_members.setdefault(pod.group, []).append((pod, n))
    kept = [c for c in classes if len(cand[c.id])]
    linked = [ids for part in window.values() for ids in part.linked(kept)]
    linked += budget_links(ctx, kept, cand, allow_preemption)
    return components(kept, cand, running_members, allow_preemption, ctx.state, linked=linked)


def _hint(win: Window, models: list[WindowModel], weights, sol: Solution) -> GreedyRun:
    """Hint every model with the better of greedy's plan and a packing of whole gangs and plain
    pods (``hint``); returns greedy's run, started now when it did not go first. With greedy's plan
    the hint is completed to every variable; first fit hints uncoupled classes, whose auxiliary
    values are trivial, and at that size the completing solve costs more than it saves."""
    ctx = win.ctx
    budget = COMPLETE_HINT_SHARE * max(0.0, win.deadline - time.monotonic()) / max(len(models), 1)
    if win.runner:
        run = win.runner[0]
        hints = [best_hint(wm, run.result, ctx, weights, budget) for wm in models]
    else:
        # Greedy starts now, beside the hints: completing a hint and the solve run in CP-SAT,
        # outside the interpreter, and greedy's plan is waited for at the end anyway.
        run = GreedyRun(ctx, win.static)
        win.runner.append(run)
        hints = [best_hint(wm, None, ctx, weights, budget) for wm in models]
    hint = ", ".join(f"{n} {name}" for name, n in Counter(hints).items())
    completed = sum("completed" in h for h in hints)
    log.debug(
        "built %d component(s): %d variables, %d constraints in %.2fs; hint: %s (%d/%d completed)",
        len(models), sol.variables, sol.constraints, sol.build_time, hint, completed, len(models),
    )
    return run


def _solve_components(win: Window, parts, models: list[WindowModel], weights, run: GreedyRun, sol: Solution) -> None:
    """Solve each component in its share of the time and add its plan to ``sol``; where the solve
    found nothing, the packing hint or greedy's plan for the component stands in."""
    ctx, cfg = win.ctx, win.ctx.config
    statuses = []
    objective = bound = 0.0
    have_bounds = True
    solve_start = time.monotonic()
    progress.stage(f"solving: {sol.variables:,} variables, {sol.constraints:,} constraints; {time_left(win.start, win.deadline)}")
    deadlines = component_deadlines(parts, solve_start, win.deadline - win.reserved)
    # With one worker, each component's deterministic work is its share of the limit by pods: a
    # rule that does not read the clock (``stages.new_solver``).
    work = [d - solve_start for d in component_deadlines(parts, solve_start, solve_start + win.limit)] \
        if deterministic(ctx) else None
    unsolved = []  # components the solve found nothing for: greedy or the packing stands in
    for i, (part, wm) in enumerate(zip(parts, models)):
        t1 = time.monotonic()
        if t1 >= win.deadline:
            # The build used the whole limit: CP-SAT would spend its loading of the model to
            # answer UNKNOWN. The packing hint or greedy stands in.
            sol.solve_skipped = True
            unsolved.append((i, wm, "UNKNOWN"))
            continue
        part_deadline = max(deadlines[i], t1 + MIN_COMPONENT_SECONDS)
        part_work = None if work is None else work[i] - (work[i - 1] if i else 0.0)
        solver, status, obj, bnd, cuts = solve_sound(wm, cfg.solver, part_deadline, work=part_work,
                                                     solve=solve_component)
        sol.victim_cut_rounds += cuts
        log.debug("component %d: %s in %.2fs (objective %s, bound %s)", i, status, time.monotonic() - t1, obj, bnd)
        if solver is None and status != "OPTIMAL":
            unsolved.append((i, wm, status))
            continue
        if solver is not None and packing_value(wm) > placement_value(wm, solver):
            # Less than the packing it was hinted with (a partial hint is not always taken up).
            log.debug("component %d: the packing hint stands in", i)
            assert wm.hint_solution is not None  # packing_value is -1 without it
            extract(wm, wm.hint_solution, sol)
            statuses.append("FEASIBLE")
            sol.hint_components += 1
            have_bounds = False
            continue
        statuses.append(status)
        if solver is not None:
            extract(wm, solver, sol)
            if obj is not None:
                objective += obj
                bound += bnd if bnd is not None else obj
            else:
                have_bounds = False
    # Waiting for greedy only now leaves every component its own share of the time.
    for i, wm, status in unsolved:
        statuses.append("FEASIBLE")
        have_bounds = False
        packing = packing_value(wm) if status != "INFEASIBLE" else -1
        # A packing of every pod of the component cannot be beaten: greedy is not waited for.
        if packing == full_value(wm, weights) or \
                packing > counts_value(wm, greedy_counts(wm, run.plan(), ctx), weights):
            log.debug("component %d: the packing hint stands in", i)
            assert wm.hint_solution is not None  # packing_value is -1 without it
            extract(wm, wm.hint_solution, sol)
            sol.hint_components += 1
        else:
            # Greedy's placements for its classes stand in (components share no node and no
            # rule, so the two plans combine).
            take_from_greedy(wm, run.plan(), ctx, sol)
            sol.greedy_components += 1
    # The solves' own replays named their victims; the plan is replayed again only when a
    # stand-in (greedy's plan for a component) brought victims they did not name.
    name_by_replay(ctx, sol, win.static, {key: who for wm in models for key, who in wm.kube_names.items()})
    sol.solve_time = time.monotonic() - solve_start
    sol.status = "OPTIMAL" if all(s == "OPTIMAL" for s in statuses) else "FEASIBLE"
    # (rounded: CP-SAT reports a scaled objective as a float, and the same plan came back as
    # 15359102.0 and 15359101.999999998 from one seed, a reproducible decision told apart)
    sol.objective = round(objective, 6) if have_bounds else None
    sol.bound = round(bound, 6) if have_bounds else None


def _choose(win: Window, sol: Solution, run: GreedyRun, weights, models: list[WindowModel]) -> CpsatOutcome:
    """The solver's plan or greedy's, whichever is better (greedy is not waited for when it
    cannot be). Before the two are weighed, the solver's plan may be replaced by a pass that
    follows it where kube-scheduler's turns allow (``guided``), when that is better still."""
    ctx = win.ctx
    # Small windows compare the two plans' final-state scores too (``scores.final_state``): the
    # model's score terms approximate how the window's pods crowd each other, greedy's are exact.
    scored = final_state.affordable(ctx)
    room = guided.room_left(sol, models)
    if (sol.status == "OPTIMAL" or (len(sol.placements) == len(ctx.window) and not sol.victims)) \
            and not run.done and not scored:
        # Proven optimal, or every pod placed with no victim: greedy's plan cannot be better
        # (``plan_value``), so it need not finish.
        run.cancel.set()
        run.wait()
        interrupt.check()
        if room:
            sol.guided = guided.follow(ctx, win.static, sol, models, weights, estimated_greedy_seconds(ctx),
                                       win.limit, win.reserved, room=True)
        why = sol.guided or ("the solver's plan is proven optimal" if sol.status == "OPTIMAL"
                             else "the solver's plan places every pod")
        return CpsatOutcome(None, sol, True, None, win.static, run.seconds, "greedy not needed: " + why)
    if not run.done:
        progress.stage("waiting for greedy's plan, to return the better of the two")
    greedy: Optional[GreedyResult] = run.wait()
    interrupt.check()
    assert greedy is not None  # wait() without a timeout returns the result or raises
    # With one worker the decision must not read the clock: greedy's cost is then its estimate.
    cost = estimated_greedy_seconds(ctx) if deterministic(ctx) else run.seconds
    sol.guided = guided.follow(ctx, win.static, sol, models, weights, cost, win.limit, win.reserved, room=room)
    better, why = choose(ctx, (sol.placements, sol.victims), (greedy.placements, greedy.victims), weights, scored=scored)
    return CpsatOutcome(greedy, sol, better, None, win.static, run.seconds, why)

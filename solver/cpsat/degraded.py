"""The decision in steps down from the per-node model, when building it would overrun the time
limit: node classes (``node_classes``), greedy for what they leave, or greedy's plan alone."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from typing import Any, Optional

from .. import interrupt, progress
from ..filtering import StaticFilters
from ..greedy import GreedyResult, schedule_greedy
from ..scoring import ScoreContext, final_state
from . import lns, node_classes, small_first
from .build import BuildInput, build_component, candidates
from .choose import choose, tier_weights
from .components import components
from .decode import extract, placement_value
from .greedy_run import GreedyRun
from .hint import best_hint, counts_value, first_fit_counts
from .kube_victims import name_by_replay
from .model import HintSolution
from .outcome import CpsatOutcome, Solution
from .stages import (COMPLETE_HINT_SHARE, MIN_COMPONENT_SECONDS, component_deadlines, solve_component,
                     time_left)

log = logging.getLogger("cpsat_scheduler.solver")

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
# When greedy's plan leaves the search no round, the decision names a time limit that would: the
# time the search lacked, plus this much for a few rounds (the 1,000-node contended window's
# rounds take about a second each), plus this share of greedy's own time, which varies by as
# much from run to run on a busy machine (5,000 nodes: 13.5 and 14.8 s in two runs in a row).
SUGGESTED_SEARCH_SECONDS = 3.0
SUGGESTED_GREEDY_SHARE = 0.25


def degraded(ctx, static, runner: list[GreedyRun], start: float, deadline: float, pairs: int, weights,
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
        return _greedy_only(ctx, static, runner, start, deadline, estimate, why)
    built = _build_node_classes(ctx, buckets, estimate, start, deadline, weights, allow_preemption)
    sol = built.sol
    sol.build_time = time.monotonic() - build_start
    solve_start = time.monotonic()
    lost = _solve_node_classes(ctx, built, start, deadline, solve_start)
    _greedy_for_rest(ctx, static, sol)
    sol.solve_time = time.monotonic() - solve_start
    # Bounds over node classes are not bounds of the real problem: none are reported.
    sol.status = "FEASIBLE"
    log.debug("node classes: %d, %d variables, %d constraints, %d pod(s) lost in decoding",
              len(built.reduced.ctx.nodes), sol.variables, sol.constraints, lost)
    return _better_of(ctx, static, runner, sol, weights)


def _greedy_only(ctx, static, runner: list[GreedyRun], start: float, deadline: float, estimate: str, why) -> CpsatOutcome:
    """(c) Node classes do not apply: greedy's plan, improved by the neighbourhood search when the
    window allows it and time is left."""
    step = f"greedy: the per-node model ({estimate}) would overrun the time limit and node classes do not apply ({why})"
    progress.stage(f"degraded to {step}; waiting for greedy's plan")
    no_search = lns.eligible(ctx)
    # The search's second start, on the other core beside greedy's pass (forked before greedy's
    # thread starts, when it has not started already), and the child's search from it.
    second = None
    if no_search is None and small_first.wanted(ctx, deadline - start):
        until = deadline - small_first.CHILD_EARLY if ctx.config.solver.second_search else None
        second = small_first.SmallFirstRun(ctx, static, search_until=until, seed=ctx.config.solver.seed)
    try:
        return _after_greedy(ctx, static, runner, deadline, estimate, why, step, no_search, second)
    finally:
        if second is not None:
            second.stop()


def _after_greedy(ctx, static, runner: list[GreedyRun], deadline: float, estimate: str, why, step: str,
                  no_search: Optional[str], second: Optional[small_first.SmallFirstRun]) -> CpsatOutcome:
    """``_greedy_only`` once the child is forked: greedy's plan, then the search when time is left
    (``second``: the child, stopped by the caller)."""
    if not runner:
        runner.append(GreedyRun(ctx, static))
    run = runner[0]
    greedy = run.wait()
    interrupt.check()
    assert greedy is not None
    best = lns.settled(ctx, greedy.placements, greedy.victims) if no_search is None else None
    if best is not None:
        # No round could improve it, nor could the child's search (its plan is no better): a
        # window greedy places whole is decided at greedy's pace, not at the limit (a 500-pod
        # window on 1,000 nodes: 52 rounds in 8.7 s found nothing).
        progress.stage(f"greedy's plan: {best}; no neighbourhood round could improve it: no search")
        return CpsatOutcome(greedy, None, False, None, static, run.seconds,
                            f"greedy's plan: {best}; no neighbourhood round could improve it, so none ran "
                            f"(the per-node model ({estimate}) would overrun the time limit and node classes "
                            f"do not apply ({why}))", degraded="greedy", settled=True)
    other = None
    if second is not None and no_search is None and deadline - time.monotonic() > 0:
        # A child that searches is not waited for: this process searches from greedy's plan
        # meanwhile; its start is taken if it is in already (for the stats).
        wait = 0.0 if second.searches else small_first.WAIT_SHARE * (deadline - time.monotonic())
        other = second.result(wait)
    margin = SUGGESTED_SEARCH_SECONDS + SUGGESTED_GREEDY_SHARE * run.seconds  # of a limit named for the search
    if no_search is None and deadline - time.monotonic() > 0:
        outcome = _search(ctx, static, greedy, run.seconds, deadline, f"{estimate}) would overrun the time limit "
                          f"and node classes do not apply ({why}", second=second, other=other)
        if outcome.solution is None or outcome.solution.lns is None or outcome.solution.lns.too_short is None:
            return outcome
        left, least = outcome.solution.lns.too_short
        no_search = (f"greedy's plan (after {run.seconds:.1f}s) left {left:.2f}s of the solver's share of the time "
                     f"limit, less than a round needs ({least:.1f}s)")
        lacked = least - left + margin
    elif no_search is None:
        no_search = f"greedy's plan came after the time limit (greedy took {run.seconds:.1f}s)"
        lacked = time.monotonic() - deadline + margin
    else:
        lacked = None  # not time: the window itself is not searched
    return CpsatOutcome(greedy, None, False, f"degraded to {step}; no neighbourhood search: {no_search}", static,
                        run.seconds, degraded="greedy", search_lacked=lacked)


@dataclasses.dataclass
class _NodeClassModels:
    """The node-class problem, built: the reduced cluster, its components and their models, each
    model's hint read as a plan (what stands when the solve finds less), and the solution so far
    (sizes)."""
    reduced: Any
    parts: list
    models: list
    fallbacks: list
    sol: Solution


def _build_node_classes(ctx, buckets: int, estimate: str, start: float, deadline: float, weights,
                        allow_preemption: bool) -> _NodeClassModels:
    """(a) The window over node classes: the nodes bucketed, the candidates and components over
    them, one model per component, each with its best hint."""
    reduced = node_classes.reduce(ctx, buckets)
    rctx = reduced.ctx
    rstatic = StaticFilters(rctx.nodes, rctx.window)
    cand, ubs = candidates(rctx, rctx.classes, rstatic, {}, allow_preemption)
    parts = components([c for c in rctx.classes if len(cand[c.id])], cand, {}, allow_preemption, rctx.state)
    rpairs = sum(len(cand[c.id]) for part in parts for c in part)
    step = (f"node classes: the per-node model ({estimate}) would overrun the time limit; "
            f"{len(ctx.nodes):,} nodes make {len(rctx.nodes):,} node classes ({buckets} free-room buckets per resource)")
    progress.stage(f"degraded to {step}: building {rpairs:,} class x node-class pair(s); {time_left(start, deadline)}")
    sctx = ScoreContext.of(rctx)
    inp = BuildInput(rctx, rstatic, cand, ubs, sctx, weights, allow_preemption)
    models = [build_component(inp, part) for part in parts]
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
    return _NodeClassModels(reduced, parts, models, fallbacks, sol)


def _solve_node_classes(ctx, built: _NodeClassModels, start: float, deadline: float, solve_start: float) -> int:
    """Solve each component's model in its share of the time (or keep its hint when the solve
    finds less, or when the build used the whole limit), then decode the node-class plan onto
    real nodes. The pods decoding could not fit."""
    sol, models, fallbacks = built.sol, built.models, built.fallbacks
    pseudo = Solution()
    if time.monotonic() >= deadline:
        # The build used the whole limit: CP-SAT would spend its loading time to answer UNKNOWN.
        progress.stage("the build used the time limit: the solve is skipped, the packing hint stands")
        sol.solve_skipped = True
    else:
        progress.stage(f"solving over node classes: {sol.variables:,} variables, {sol.constraints:,} constraints; "
                       f"{time_left(start, deadline)}")
    deadlines = component_deadlines(built.parts, solve_start, deadline)
    for i, wm in enumerate(models):
        solver, status = None, "UNKNOWN"
        if not sol.solve_skipped:
            # Without presolve: on the realistic medium dump's 10,644 variables presolve took 6.5 s
            # of 7.7 and the search then found nothing; without it the search starts at once.
            solver, status, _, _ = solve_component(wm, ctx.config.solver, max(deadlines[i], time.monotonic() + MIN_COMPONENT_SECONDS),
                                                    presolve=False)
        if solver is not None and fallbacks[i].placement_value <= placement_value(wm, solver):
            extract(wm, solver, pseudo)
        else:
            extract(wm, fallbacks[i], pseudo)
            sol.hint_components += 1
    sol.placements, lost = node_classes.decode(built.reduced, ctx, pseudo.placements)
    sol.decode_lost = lost
    return lost


def _greedy_for_rest(ctx, static, sol: Solution) -> None:
    """(c) Greedy for the rest: what the node-class plan left (what the solve found no place for in
    its time, what decoding could not fit) goes through scheduleOne on top of it."""
    rest = [p for p in ctx.window if p.key not in sol.placements]
    if not rest:
        return
    # Cheaper than the whole window's greedy run, which is waited for anyway.
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


def _better_of(ctx, static, runner: list[GreedyRun], sol: Solution, weights) -> CpsatOutcome:
    """The node-class plan or greedy's, whichever is better; greedy's run is skipped when the plan
    places every pod without victims (greedy's cannot be better then)."""
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
        runner.append(GreedyRun(ctx, static))
    run = runner[0]
    if not run.done:
        progress.stage("waiting for greedy's plan, to return the better of the two")
    greedy = run.plan()
    better, chosen = choose(ctx, (sol.placements, sol.victims), (greedy.placements, greedy.victims), weights, scored=scored)
    return CpsatOutcome(greedy, sol, better, None, static, run.seconds, chosen, degraded=sol.degraded)



def _search(ctx, static, greedy, greedy_seconds: float, deadline: float, why: str,
            second: Optional[small_first.SmallFirstRun] = None, other: Optional[GreedyResult] = None) -> CpsatOutcome:
    """Greedy's plan (or the small-first pass's, ``other``, when strictly better: ``small_first``)
    improved by the large-neighbourhood search (``lns``) until the deadline; ``why``: why the
    per-node model and node classes were not taken; ``second``: the child that looked for
    ``other``. A child that searches from its own plan meanwhile (``SmallFirstRun.searches``):
    this process searches from greedy's, and the better of the two plans is kept."""
    step = f"large-neighbourhood search: the per-node model ({why})"
    weights = tier_weights([p.priority for p in ctx.window])
    two = second is not None and second.searches
    begin = None if two else (other if small_first.better_start(ctx, greedy, other, weights) else None)
    progress.stage(f"{step}; improving {'the small-first pass' if begin is not None else 'greedy'}'s plan "
                   f"a neighbourhood at a time" + (" (and the small-first pass's in a second process)" if two else ""))
    t0 = time.monotonic()
    # Two searches: half the cores each (on 2 cores one CP-SAT worker a round each: a second
    # worker here took a third of the child's core, and its search ran 1-3 rounds at 1,000 nodes
    # instead of 3-4).
    sol, stats = lns.improve(ctx, static, greedy, deadline, seed=ctx.config.solver.seed, greedy_seconds=greedy_seconds,
                             start=begin, workers=small_first.workers_each() if two else None,
                             stop=second.settled if two and second is not None else None)
    sol.solve_time = time.monotonic() - t0
    sol.lns = stats
    if two:
        assert second is not None
        return _two_searches(ctx, static, greedy, greedy_seconds, deadline, step, weights, second, sol, t0)
    stats.start = small_first.start_note(second, other, begin is not None)
    stats.start_child_mib = None if second is None else second.private_mib
    if not stats.improved and begin is None:
        return CpsatOutcome(greedy, sol, False, None, static, greedy_seconds,
                            f"greedy's plan: {stats.rounds} neighbourhood round(s) found nothing better ({step})",
                            degraded="large-neighbourhood search")
    if begin is not None:
        said = f"the small-first pass's plan beat greedy's, and {stats.improved} of {stats.rounds} neighbourhood round(s) improved it"
    else:
        said = f"{stats.improved} of {stats.rounds} neighbourhood round(s) improved greedy's"
    return CpsatOutcome(greedy, sol, True, None, static, greedy_seconds, f"solver's plan: {said} ({step})",
                        degraded="large-neighbourhood search")


def _two_searches(ctx, static, greedy: GreedyResult, greedy_seconds: float, deadline: float, step: str,
                  weights: dict[int, int], second: small_first.SmallFirstRun, sol: Solution, t0: float) -> CpsatOutcome:
    """This process's search from greedy's plan is done (``sol``); the child's, from the
    small-first pass's plan, is taken as it stands (the last incumbent it sent by the deadline;
    its start alone when its search sent none), and the better plan kept."""
    mine = sol.lns
    # (this plan no round can improve, or the child's that it has sent already: not waited for)
    theirs = second.searched(0.0 if mine is not None and mine.settled else max(0.0, deadline - time.monotonic()))
    start = second.result(0.0)
    child, child_stats = theirs if theirs is not None else (start, None)
    better = child is not None and small_first.better_start(ctx, _as_greedy(sol), child, weights)
    note = small_first.search_note(second, start, theirs, mine, better)
    if better:
        assert child is not None
        stats = child_stats if child_stats is not None else lns.LnsStats()
        if start is not None:
            stats.history.insert(0, f"start: the small-first pass's plan against greedy's: "
                                    f"{lns.gain(ctx, start, greedy)}")
        stats.placed_gain = len(child.placements) - len(greedy.placements)
        stats.victims_change = len(child.victims) - len(greedy.victims)
        stats.too_short = None
        sol = Solution(placements=dict(child.placements), victims=list(child.victims), status="FEASIBLE",
                       solve_time=time.monotonic() - t0)
        # (its victims come named by the child's replays, and then no replay runs here; the
        # nominations follow from the names)
        name_by_replay(ctx, sol, static, names={v.pod.key: v.preemptor for v in child.victims if v.preemptor})
        sol.lns = stats
        said = (f"the small-first pass's plan, searched in a second process ({stats.improved} of {stats.rounds} "
                f"neighbourhood round(s) improved it), beat greedy's and this process's search from greedy's")
    else:
        stats = mine
    stats.start = note
    stats.start_child_mib = second.private_mib
    if better:
        return CpsatOutcome(greedy, sol, True, None, static, greedy_seconds, f"solver's plan: {said} ({step})",
                            degraded="large-neighbourhood search")
    if not stats.improved:
        return CpsatOutcome(greedy, sol, False, None, static, greedy_seconds,
                            f"greedy's plan: {stats.rounds} neighbourhood round(s) found nothing better, nor did the "
                            f"small-first pass and its search in a second process ({step})",
                            degraded="large-neighbourhood search")
    said = (f"{stats.improved} of {stats.rounds} neighbourhood round(s) improved greedy's; the second process's search "
            f"from the small-first pass's plan gave no better plan")
    return CpsatOutcome(greedy, sol, True, None, static, greedy_seconds, f"solver's plan: {said} ({step})",
                        degraded="large-neighbourhood search")


def _as_greedy(sol: Solution) -> GreedyResult:
    return GreedyResult(placements=sol.placements, victims=sol.victims, nominations=sol.nominations)

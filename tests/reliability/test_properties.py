"""Property-based tests over generated windows: every engine, every plan, four properties.

For each generated window (``generators.windows``: mixed resources, taints, affinities, spread,
ports, priorities with preemption, PDBs and gangs), the same snapshot goes through

* ``greedy`` — kube-scheduler's scheduleOne;
* ``cpsat`` — the window model (2 workers, a short limit);
* ``fallback`` — ``cpsat`` with ``time_limit_seconds=0``, which must return greedy's plan, marked;
* ``cpsat`` with ``workers=1`` and a drawn seed, twice.

and each plan must:

1. pass the independent validator (no line at all);
2. if it is the solver's, place at least greedy's tier-weighted value (``tier_weights``: one pod
   of a higher priority outweighs any number of lower ones); when the solver proved optimality,
   its own solution too, not just the better-of-two the API returns;
3. with one worker and a seed, come out identical twice;
4. survive the JSON contract: ``to_json_dict`` → text → ``load_plan`` (and ``model_validate``)
   gives an equal ``Plan``.

The default run checks a couple of hundred windows; ``pytest -m long`` checks at least 10,000 and
prints one summary line with the counts.
"""

from __future__ import annotations

import io
import json
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from adapters.output import dump_plan
from adapters.snapshot_io import load_plan
from models.config import SchedulerConfig
from models.plan import Plan
from solver import schedule, validate
from solver.context import build_context
from solver.cpsat.solve import solve_window, tier_weights
from solver.plugins.gang import preferred as gang_preferred
from solver.scoring.final_state import plan_score
from tests.builders import describe

from .generators import Window, dump, windows

# Default-run size: each window costs five schedule() calls; keep the file near a minute on 2 cores.
DEFAULT_WINDOWS = 200
LONG_WINDOWS = int(os.environ.get("CPSAT_LONG_WINDOWS", "10000"))
NEW_GAP = "NEW model gap: solver's optimum below greedy's"
TIME_LIMIT = 5.0


@dataclass
class Tally:
    """What the property runs saw, for the summary line."""

    windows: int = 0
    validated: Counter = field(default_factory=Counter)  # engine -> plans the validator accepted
    violations: int = 0
    better: int = 0  # solver plan strictly above greedy (tier-weighted placement)
    equal: int = 0
    statuses: Counter = field(default_factory=Counter)
    greedy_better: Counter = field(default_factory=Counter)  # why the API preferred greedy's plan
    deterministic: int = 0
    round_trips: int = 0
    preemptions: int = 0  # windows where some plan preempts
    gangs_placed: int = 0  # windows where a gang member is placed by the solver
    volumes_placed: int = 0  # windows where a pod mounting a claim is placed by the solver
    scored: int = 0  # windows whose plans were compared on the final-state score
    started: float = field(default_factory=time.monotonic)
    # The long run counts new model gaps (the solver's own optimum below greedy's; the plan
    # returned was greedy's, valid) and writes their windows to ``gap_dir`` instead of stopping
    # the run there: each is a model shortcoming to reduce, not a plan anyone received.
    gap_dir: Optional[Path] = None
    progress_every: int = 0

    def line(self) -> str:
        engines = ", ".join(f"{k} {v}" for k, v in sorted(self.validated.items()))
        statuses = ", ".join(f"{k} {v}" for k, v in sorted(self.statuses.items()))
        why = ", ".join(f"{k} {v}" for k, v in sorted(self.greedy_better.items()))
        return (
            f"reliability properties: {self.windows} windows; plans validated: {engines}; "
            f"violations {self.violations}; solver vs greedy: better {self.better}, equal {self.equal}, "
            f"worse 0; deterministic reruns {self.deterministic}; JSON round-trips {self.round_trips}; "
            f"windows with preemption {self.preemptions}, with a gang placed {self.gangs_placed}, "
            f"with a pod mounting a claim placed {self.volumes_placed}; "
            f"final-state scores compared (same pods placed) {self.scored}, solver below greedy 0; "
            f"solver status: {statuses}; greedy's plan preferred because: {why or 'never'}; "
            + (f"new model gaps' windows in {self.gap_dir}; " if self.greedy_better.get(NEW_GAP) else "")
            + f"{time.monotonic() - self.started:.0f} s"
        )


def _config(window: Window, **solver: object) -> SchedulerConfig:
    return window.config.with_overrides(**solver)


def _valid(window: Window, plan: Plan, config: SchedulerConfig, engine: str, tally: Tally) -> None:
    problems = validate(window.snapshot, plan, config)
    tally.violations += len(problems)
    assert problems == [], f"{engine} plan breaks a rule:\n" + "\n".join(problems)
    tally.validated[engine] += 1


def _round_trip(plan: Plan, tally: Tally) -> None:
    data = plan.to_json_dict()
    assert load_plan(io.StringIO(json.dumps(data))) == plan
    assert load_plan(io.StringIO(dump_plan(plan, "json"))) == plan
    assert Plan.model_validate(data) == plan
    tally.round_trips += 1


def _decisions(plan: Plan) -> tuple:
    """Everything a plan decides (timings and greedy's side figures left out)."""
    return (plan.assignments, plan.preemptions, plan.nominations, plan.unschedulable,
            plan.stats.status, plan.stats.objective, plan.stats.fallback)


def check_window(window: Window, seed: int, tally: Tally) -> None:
    snapshot = window.snapshot
    note(describe(snapshot))
    note("as JSON lines:\n" + dump(window))
    note(f"config: profile={window.config.profile} preemption={window.config.preemption.model_dump()} seed={seed}")
    fast = _config(window, time_limit_seconds=TIME_LIMIT, workers=2, seed=seed)
    fallback_cfg = _config(window, time_limit_seconds=0.0, workers=2, seed=seed)
    single = _config(window, time_limit_seconds=TIME_LIMIT, workers=1, seed=seed)

    ctx = build_context(snapshot, fast)
    weights = tier_weights([p.priority for p in ctx.window])

    def value(assigned) -> int:
        return sum(weights[ctx.pod(key).priority] for key in assigned)

    greedy = schedule(snapshot, fast, engine="greedy")
    _valid(window, greedy, fast, "greedy", tally)

    solver = schedule(snapshot, fast, engine="cpsat")
    note(f"solver stats: {solver.stats.model_dump(exclude_none=True)}")
    _valid(window, solver, fast, "cpsat", tally)
    # The API's safety net (a solver plan failing validation replaced by greedy's, or by the pass
    # that follows it by kube-scheduler's turns, ``guided.rescue``) must not fire.
    reasons = (solver.stats.fallback_reason or "") + (solver.stats.plan_reason or "")
    assert "solver plan failed validation" not in reasons, solver.stats
    # Greedy's plan returned is always said so.
    assert solver.stats.fallback == (solver.stats.plan_from == "greedy"), solver.stats
    if solver.assignment_map().keys() == greedy.assignment_map().keys() and not solver.preemptions \
            and not greedy.preemptions:
        # Same pods placed, no eviction: the plan keeps preferred-topology gangs in at most as
        # many domains (the level above the scores), and if as many, scores at least greedy's
        # on the final state.
        index = {n.name: n.index for n in ctx.nodes}
        ours_spans, their_spans = (gang_preferred.spans(ctx, {a.pod: index[a.node] for a in plan.assignments})
                                   for plan in (solver, greedy))
        assert ours_spans <= their_spans, f"preferred-topology domains {ours_spans} > greedy's {their_spans}"
        if ours_spans == their_spans:
            ours, theirs = plan_score(snapshot, solver, fast), plan_score(snapshot, greedy, fast)
            assert ours >= theirs, f"final-state score {ours} < greedy's {theirs}"
            tally.scored += 1
    tally.statuses[solver.stats.status] += 1
    g, s = value(greedy.assignment_map()), value(solver.assignment_map())
    assert s >= g, f"solver places tier-weighted {s} < greedy {g}"
    if solver.stats.status == "GREEDY_BETTER" and "final state" not in (solver.stats.plan_reason or ""):
        _own_solution_not_worse(window, fast, ctx, value, g, tally)
    tally.better += s > g
    tally.equal += s == g

    fallback = schedule(snapshot, fallback_cfg, engine="cpsat")
    _valid(window, fallback, fallback_cfg, "fallback", tally)
    assert fallback.stats.fallback is True and fallback.stats.status == "FALLBACK"
    assert fallback.assignments == greedy.assignments
    assert fallback.preemptions == greedy.preemptions

    first = schedule(snapshot, single, engine="cpsat")
    second = schedule(snapshot, single, engine="cpsat")
    _valid(window, first, single, "cpsat-1-worker", tally)
    assert _decisions(first) == _decisions(second), "workers=1 with a seed gave two different plans"
    assert value(first.assignment_map()) >= g
    tally.deterministic += 1

    for plan in (greedy, solver, fallback, first):
        _round_trip(plan, tally)
    tally.preemptions += any(p.preemptions for p in (greedy, solver))
    tally.gangs_placed += any(ctx.pod(a.pod).group for a in solver.assignments)
    tally.volumes_placed += any(ctx.pod(a.pod).claims for a in solver.assignments)
    tally.windows += 1
    if tally.progress_every and tally.windows % tally.progress_every == 0:
        print(f"\n[{tally.windows} windows] {tally.line()}", flush=True)


def _own_solution_not_worse(window: Window, config: SchedulerConfig, ctx, value, greedy_value: int, tally: Tally) -> None:
    """The API preferred greedy's plan: the solver's own solution, when proven optimal, must still
    place as much. (The one known model gap, affinity support a later preemption evicted, is
    closed: such a window fails here like any other.)"""
    own_ctx = build_context(window.snapshot, config)
    outcome = solve_window(own_ctx)
    sol, greedy = outcome.solution, outcome.greedy
    if sol is None or greedy is None or sol.status != "OPTIMAL":
        tally.greedy_better["solver not proven optimal"] += 1
        return
    own = value(sol.placements)
    note(f"solver's own optimum: {sol.placements} victims {[v.pod.key for v in sol.victims]}")
    if own >= greedy_value:
        tally.greedy_better["same placement, greedy's victims preferred"] += 1
        return
    if tally.gap_dir is not None:
        tally.greedy_better[NEW_GAP] += 1
        tally.gap_dir.mkdir(parents=True, exist_ok=True)
        (tally.gap_dir / f"window-{tally.windows + 1}.jsonl").write_text(dump(window))
        return
    raise AssertionError(f"solver's proven optimum places tier-weighted {own} < greedy {greedy_value}")


_SETTINGS = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=False,
)


@pytest.fixture
def tally(capsys):
    t = Tally()
    yield t
    with capsys.disabled():
        print("\n" + t.line())


def test_generated_windows(tally):
    # The CI run is derandomized: the same windows every time, so main stays green or red for a
    # reason of its own; the long run below explores new windows on every run.
    @settings(max_examples=DEFAULT_WINDOWS, **{**_SETTINGS, "derandomize": True})
    @given(windows(), st.integers(0, 1000))
    def run(window, seed):
        check_window(window, seed, tally)

    run()
    assert tally.windows >= DEFAULT_WINDOWS


@pytest.mark.long
def test_generated_windows_long(tally, tmp_path_factory):
    tally.gap_dir = tmp_path_factory.mktemp("model-gaps")
    tally.progress_every = 500
    @settings(max_examples=LONG_WINDOWS, database=None, **_SETTINGS)
    @given(windows(), st.integers(0, 1000))
    def run(window, seed):
        check_window(window, seed, tally)

    run()
    assert tally.windows >= LONG_WINDOWS


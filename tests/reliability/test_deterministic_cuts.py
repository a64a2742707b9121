"""One CP-SAT worker with a seed is the user's reproducible decision (``solver.workers: 1``): the
clock must not decide it, not even where the replay keeps refusing the model's plans.

The window (``windows/cut-rounds-without-end.jsonl``, met by a fuzzed run of the properties): two
priority-1000 pods with required zone affinity to ``app=c``, whose only support is two
lower-priority pods on a full node. Kube-scheduler's dry run for them there removes every lower
pod first, their support with them, so they never preempt on that node; the model's reprieve
keeps the support, and each of its plans that puts one there is refused and cut, one node
configuration at a time. The cut rounds went on until the wall clock stopped them (64-78
rounds in 2 s, 135-148 in 5 s) and the plan came out as one of two, run by run. A second
fuzzed window (``windows/objective-float-noise.jsonl``) gave one plan with two objectives.

Since the thirty-second round the model knows that dry run fails (``reprieve_encode``,
``_support_only_below``): the first window decides with no cut round at all, and stays here as a
check of that and of one worker's reproducibility."""

from __future__ import annotations

from pathlib import Path

from solver import schedule, validate
from tests.reliability.gap_windows import load

WINDOW = Path(__file__).with_name("windows") / "cut-rounds-without-end.jsonl"


def test_one_worker_stops_its_cut_rounds_on_work_not_on_the_clock() -> None:
    window = load(WINDOW)
    config = window.config.with_overrides(time_limit_seconds=2.0, workers=1, seed=0)
    first, second = (schedule(window.snapshot, config, engine="cpsat") for _ in range(2))
    assert first.stats.victim_cut_rounds == second.stats.victim_cut_rounds
    assert (first.assignments, first.preemptions, first.stats.status) == \
        (second.assignments, second.preemptions, second.stats.status)
    assert validate(window.snapshot, first, config) == []


def test_one_worker_reports_one_objective_for_one_plan() -> None:
    # The same plan came back with objective 15359102.0 and 15359101.999999998 (CP-SAT reports a
    # scaled objective as a float): the fuzzed run told two reproducible decisions apart.
    window = load(Path(__file__).with_name("windows") / "objective-float-noise.jsonl")
    config = window.config.with_overrides(time_limit_seconds=5.0, workers=1, seed=955)
    objectives = {schedule(window.snapshot, config, engine="cpsat").stats.objective for _ in range(8)}
    assert len(objectives) == 1, objectives


def test_the_window_whose_cuts_had_no_end_needs_none() -> None:
    window = load(WINDOW)
    config = window.config.with_overrides(time_limit_seconds=5.0, workers=2, seed=0)
    plan = schedule(window.snapshot, config, engine="cpsat")
    greedy = schedule(window.snapshot, config, engine="greedy")
    assert plan.stats.victim_cut_rounds == 0
    assert plan.assignment_map().keys() == greedy.assignment_map().keys()
    assert validate(window.snapshot, plan, config) == []

"""A pass that follows another plan's nodes (``greedy.Guide``, used by ``solver/cpsat/guided.py``)
always makes a plan the validator accepts, whatever plan it follows: every node it keeps is one
the pod fits at its turn, every victim one kube-scheduler's preemption evicts there. Followed on
greedy's own plan, it makes greedy's plan.
"""

from __future__ import annotations

import random
import time

from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from solver import schedule, validate
from solver.api import _plan_from
from solver.context import build_context
from solver.filtering import StaticFilters
from solver.greedy import Guide, schedule_greedy
from tests.builders import describe

from .generators import Window, windows


def _guided_plan(window: Window, guide: Guide):
    ctx = build_context(window.snapshot, window.config)
    static = StaticFilters(ctx.nodes, ctx.window)
    result = schedule_greedy(ctx, static=static, guide=guide)
    plan = _plan_from(ctx, result.placements, result.victims, result.nominations, result.unschedulable, static,
                      stats=dict(engine="cpsat", status="FEASIBLE"), start=time.monotonic(), named=True)
    return ctx, result, plan


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(window=windows(), seed=st.integers(0, 2**16), others=st.booleans())
def test_a_pass_following_any_plan_makes_a_plan_the_validator_accepts(window: Window, seed: int, others: bool) -> None:
    note(describe(window.snapshot))
    ctx = build_context(window.snapshot, window.config)
    rng = random.Random(seed)
    nodes = {p.key: rng.randrange(len(ctx.nodes)) for p in ctx.window if ctx.nodes and rng.random() < 0.8}
    guide = Guide(nodes, others=others)
    _, result, plan = _guided_plan(window, guide)
    note(f"guide {nodes} others={others}; placed {result.placements}; victims {result.victims}")
    assert validate(window.snapshot, plan, window.config) == []
    if not others:
        assert set(result.placements) <= set(nodes), "a pod the guide leaves out was placed"


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(window=windows())
def test_a_pass_following_greedys_plan_makes_greedys_plan(window: Window) -> None:
    note(describe(window.snapshot))
    greedy = schedule(window.snapshot, window.config, engine="greedy")
    ctx = build_context(window.snapshot, window.config)
    index = {n.name: n.index for n in ctx.nodes}
    guide = Guide({a.pod: index[a.node] for a in greedy.assignments}, others=False)
    _, _, plan = _guided_plan(window, guide)
    assert plan.assignment_map() == greedy.assignment_map()
    assert {(p.pod, p.node) for p in plan.preemptions} == {(p.pod, p.node) for p in greedy.preemptions}

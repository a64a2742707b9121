"""Greedy remembers a pod class's failure and reuses it while nothing that could change the
verdict has happened (greedy.py, ``_still_failing``). That is only a shortcut: with or without
it, greedy must place exactly the same pods on the same nodes, with the same victims."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from models.config import SchedulerConfig
from solver import greedy as greedy_mod
from solver.context import build_context
from solver.filtering import StaticFilters
from tests.reliability.generators import windows


def _run(snapshot, config, monkeypatch=None):
    ctx = build_context(snapshot, config)
    result = greedy_mod.schedule_greedy(ctx, static=StaticFilters(ctx.nodes, ctx.window))
    return dict(result.placements), sorted((v.pod.key, v.node) for v in result.victims), set(result.unschedulable)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(windows(max_nodes=5, max_running=6, max_templates=4))
def test_failure_cache_changes_no_decision(monkeypatch, window):
    config = SchedulerConfig()
    cached = _run(window.snapshot, config)
    with monkeypatch.context() as m:
        m.setattr(greedy_mod, "_still_failing", lambda *args: False)
        fresh = _run(window.snapshot, config)
    assert cached == fresh


def test_a_placement_the_spread_counts_lifts_a_remembered_failure():
    # web spreads over zones with maxSkew 1. Zone a holds two web pods, b one, c none (and no
    # room for a 1-CPU pod): the first web pod fits nowhere. A small web pod pinned to zone c
    # then raises the minimum to 1, so the second web pod of the same class fits in zone b —
    # the remembered failure must not be reused.
    from datetime import timedelta

    from tests.builders import T0, make_node, make_pod, make_snapshot, spread

    nodes = [
        make_node("n-a", cpu="8", labels={"zone": "a"}),
        make_node("n-b", cpu="8", labels={"zone": "b"}),
        make_node("n-c", cpu="500m", labels={"zone": "c"}),
    ]
    running = [make_pod(f"default/old-{i}", cpu="100m", labels={"app": "web"}, node=n)
               for i, n in enumerate(("n-a", "n-a", "n-b"))]
    web = dict(cpu="1", labels={"app": "web"}, spread=[spread("zone", {"app": "web"}, max_skew=1)])
    pending = [
        make_pod("default/web-1", created=T0 + timedelta(minutes=1), **web),
        make_pod("default/small", cpu="100m", labels={"app": "web"}, node_selector={"zone": "c"},
                 created=T0 + timedelta(minutes=2)),
        make_pod("default/web-2", created=T0 + timedelta(minutes=3), **web),
    ]
    placements, _, unschedulable = _run(make_snapshot(nodes, running + pending), SchedulerConfig())
    names = {key: nodes[i].metadata.name for key, i in placements.items()}
    assert unschedulable == {"default/web-1"}
    assert names == {"default/small": "n-c", "default/web-2": "n-b"}

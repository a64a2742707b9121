"""The large-neighbourhood search (issue 34): when the whole-window model would overrun the time
limit, greedy's plan is improved a neighbourhood at a time (``solver/cpsat/lns.py``)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from models.config import SchedulerConfig
from solver import schedule, validate
from solver.cpsat import degraded
from tests.builders import T0, make_node, make_pod, make_snapshot, term

CONFIG = SchedulerConfig().with_overrides(time_limit_seconds=6.0, workers=2, seed=1)


@pytest.fixture
def too_big(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every model reads as too large to build in time: the decision takes the search."""
    monkeypatch.setattr(degraded, "BUILD_SECONDS_PER_PAIR", 10.0)


def _fragmented():
    """Greedy spreads four 1-CPU pods over two 4-CPU nodes (two each); the 4-CPU pod created after
    them then fits nowhere. Packed, all five fit. A hostname anti-affinity keeps node classes
    out, so the decision degrades to greedy's plan and the search."""
    nodes = [make_node(f"n{i}", cpu="4", memory="64Gi") for i in range(2)]
    pods = [make_pod(f"default/small-{i}", cpu="1", created=T0 + timedelta(seconds=i)) for i in range(4)]
    pods.append(make_pod("default/big", cpu="4", created=T0 + timedelta(seconds=9), labels={"app": "big"},
                         pod_anti_affinity=[term({"app": "big"}, "kubernetes.io/hostname")]))
    return make_snapshot(nodes, pods)


def test_the_search_places_what_greedy_left_out(too_big: None) -> None:
    snapshot = _fragmented()
    greedy = schedule(snapshot, CONFIG, engine="greedy")
    assert "default/big" in {u.pod for u in greedy.unschedulable}
    plan = schedule(snapshot, CONFIG)
    assert validate(snapshot, plan, CONFIG) == []
    assert {a.pod for a in plan.assignments} == {*(f"default/small-{i}" for i in range(4)), "default/big"}
    stats = plan.stats
    assert stats.degraded == "large-neighbourhood search" and stats.plan_from == "solver"
    assert stats.lns_rounds >= 1 and stats.lns_improved_rounds >= 1 and stats.lns_placed_gain == 1
    assert stats.lns_max_pairs > 0 and stats.lns_history


def test_without_a_gain_greedy_s_plan_is_returned_and_says_why(too_big: None) -> None:
    nodes = [make_node(f"n{i}", cpu="4", memory="64Gi") for i in range(2)]
    pods = [make_pod(f"default/p-{i}", cpu="1", labels={"app": "x"},
                     pod_anti_affinity=[term({"app": "y"}, "kubernetes.io/hostname")]) for i in range(3)]
    snapshot = make_snapshot(nodes, pods)
    plan = schedule(snapshot, CONFIG)
    assert validate(snapshot, plan, CONFIG) == [] and len(plan.assignments) == 3
    assert plan.stats.plan_from == "greedy" and plan.stats.lns_improved_rounds == 0
    assert "neighbourhood round(s) found nothing better" in (plan.stats.plan_reason or "")

"""The guided passes (``solver/cpsat/guided.py``): a pass that follows a plan where kube-scheduler's
turns allow it replaces the solver's plan only when it is strictly better, never a proven optimum,
and only when its cost fits the limit's share."""

from __future__ import annotations

from models.config import SchedulerConfig
from solver.context import build_context
from solver.cpsat import guided
from solver.cpsat.choose import tier_weights
from solver.cpsat.outcome import Solution
from solver.filtering import StaticFilters
from solver.greedy import Guide, schedule_greedy
from tests.builders import make_node, make_pod, make_snapshot

CONFIG = SchedulerConfig()


def _window():
    # Two nodes of 4 CPUs, one of them half full of a low-priority pod; three pending pods.
    snapshot = make_snapshot(
        [make_node("node-a", cpu="4"), make_node("node-b", cpu="4")],
        [make_pod("default/low", cpu="2", node="node-a", priority=0),
         make_pod("default/high-1", cpu="3", priority=1000),
         make_pod("default/high-2", cpu="3", priority=1000),
         make_pod("default/mid", cpu="1", priority=100)],
    )
    ctx = build_context(snapshot, CONFIG)
    return ctx, StaticFilters(ctx.nodes, ctx.window), tier_weights([p.priority for p in ctx.window])


def test_a_plan_that_leaves_pods_kube_would_place_is_replaced_by_the_pass_that_places_them() -> None:
    ctx, static, weights = _window()
    sol = Solution(placements={"default/mid": 1}, status="FEASIBLE")
    done = guided.follow(ctx, static, sol, [], weights, greedy_seconds=0.0, limit=10.0)
    assert done is not None
    # kube's own turns for the two high-priority pods: the first takes node-b, the second fits
    # node-a only by evicting the low pod; the mid pod keeps the solver's node-b, its last CPU.
    followed = schedule_greedy(ctx, static=static, guide=Guide({"default/mid": 1}))
    assert sol.placements == followed.placements == {"default/high-1": 1, "default/high-2": 0, "default/mid": 1}
    assert [(v.pod.key, v.node, v.preemptor) for v in sol.victims] == [("default/low", 0, "default/high-2")]
    assert sol.status == "FEASIBLE" and sol.objective is None and sol.bound is None


def test_a_proven_optimum_or_a_pass_too_slow_for_the_limit_is_left_alone() -> None:
    ctx, static, weights = _window()
    optimal = Solution(placements={"default/mid": 1}, status="OPTIMAL")
    assert guided.follow(ctx, static, optimal, [], weights, greedy_seconds=0.0, limit=10.0) is None
    assert optimal.placements == {"default/mid": 1}
    slow = Solution(placements={"default/mid": 1}, status="FEASIBLE")
    assert guided.follow(ctx, static, slow, [], weights, greedy_seconds=1.0, limit=10.0) is None
    assert guided.follow(ctx, static, slow, [], weights, greedy_seconds=0.4, limit=10.0, reserved=0.45) is not None


def test_a_plan_no_pass_betters_is_kept() -> None:
    ctx, static, weights = _window()
    greedy = schedule_greedy(ctx, static=static)
    sol = Solution(placements=dict(greedy.placements), victims=list(greedy.victims), status="FEASIBLE")
    assert guided.follow(ctx, static, sol, [], weights, greedy_seconds=0.0, limit=10.0) is None
    assert sol.placements == greedy.placements


def test_the_reserve_is_three_passes_when_they_fit_the_share() -> None:
    assert abs(guided.reserve(0.1, 10.0) - 0.3) < 1e-9
    assert guided.reserve(1.0, 10.0) == 0.0

"""The guided passes (``solver/cpsat/guided.py``): a pass that follows a plan where kube-scheduler's
turns allow it replaces the solver's plan only when it is strictly better, never a proven optimum,
and only when its cost fits the limit's share; and where the validator refused the solver's plan,
the passes that follow it make the decision's plan when they beat greedy's."""

from __future__ import annotations

from datetime import timedelta

from models.config import SchedulerConfig
from solver.context import build_context
from solver.cpsat import guided
from solver.cpsat.choose import tier_weights
from solver.cpsat.outcome import Solution
from solver.filtering import StaticFilters
from solver.greedy import Guide, schedule_greedy
from tests.builders import T0, make_node, make_pod, make_snapshot

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


# -- a solver plan the validator refused (``guided.rescue``, ``api._Deciding._rescued``) --------

def at(minutes: int):
    return T0 + timedelta(minutes=minutes)


def _crossed():
    # Greedy puts the first pod on the roomier node-0 (LeastAllocated), so the pod that can only
    # go there finds no room; the other order places all three.
    snapshot = make_snapshot(
        [make_node("node-0", cpu="4"), make_node("node-1", cpu="2")],
        [make_pod("default/first", cpu="1500m", priority=100, created=at(0)),
         make_pod("default/only-0", cpu="3", priority=100, node_selector={"kubernetes.io/hostname": "node-0"},
                  created=at(1)),
         make_pod("default/only-1", cpu="500m", priority=100, node_selector={"kubernetes.io/hostname": "node-1"},
                  created=at(2))],
    )
    return snapshot


# A plan with the right idea and one wrong node: only-1 on node-0, which its selector refuses.
WRONG = {"default/first": 1, "default/only-0": 0, "default/only-1": 0}


def test_a_refused_plan_followed_by_kube_turns_keeps_what_holds_and_beats_greedy() -> None:
    snapshot = _crossed()
    ctx = build_context(snapshot, CONFIG)
    static = StaticFilters(ctx.nodes, ctx.window)
    weights = tier_weights([p.priority for p in ctx.window])
    greedy = schedule_greedy(ctx, static=static)
    assert sorted(greedy.placements) == ["default/first", "default/only-1"]
    rescued = guided.rescue(ctx, static, WRONG, greedy, weights, cost=0.0, time_left=None)
    assert rescued is not None
    # first and only-0 where the plan put them; only-1 by kube's own turn, on the node it may use
    assert rescued.placements == {"default/first": 1, "default/only-0": 0, "default/only-1": 1}
    # no better than greedy's: nothing; too slow for the limit's share: not tried
    assert guided.rescue(ctx, static, dict(greedy.placements), greedy, weights, cost=0.0, time_left=None) is None
    assert guided.rescue(ctx, static, WRONG, greedy, weights, cost=1.0, time_left=None) is None
    assert guided.rescue(ctx, static, WRONG, greedy, weights, cost=1.0, time_left=5.0) is not None


def test_the_decision_returns_the_rescued_plan_validated_and_says_so(monkeypatch) -> None:
    from solver import api, schedule, validate

    snapshot = _crossed()
    config = SchedulerConfig().with_overrides(time_limit_seconds=5.0, workers=2, seed=1)
    solve = api.solve_window

    def wrong_solver_plan(ctx, **kw):  # the solver's plan, as a model that drifted from a rule gives it
        outcome = solve(ctx, **kw)
        assert outcome.solution is not None
        outcome.solution.placements = {k: ctx.state.node_index[n] for k, n in
                                       {"default/first": "node-1", "default/only-0": "node-0",
                                        "default/only-1": "node-0"}.items()}
        outcome.solution.victims = []
        outcome.chose_solver = True
        return outcome

    monkeypatch.setattr(api, "solve_window", wrong_solver_plan)
    decision = api.decide(api.ScheduleRequest(snapshot=snapshot, config=config, engine="cpsat"))
    plan = decision.plan
    assert decision.validated and not validate(snapshot, plan, config)
    assert dict(plan.assignment_map()) == {"default/first": "node-1", "default/only-0": "node-0",
                                           "default/only-1": "node-1"}
    assert plan.stats.plan_from == "solver" and plan.stats.guided == guided.RESCUED
    assert plan.stats.status == "FEASIBLE" and not plan.stats.fallback
    assert "solver plan failed validation" in plan.stats.plan_reason
    assert [r.source for r in decision.rejected] == [api.PlanSource.SOLVER]
    # greedy alone places two
    assert len(schedule(snapshot, config, engine="greedy").assignments) == 2

"""The CP-SAT engine against greedy, brute force and the validator.

Each joint-placement case is built so that kube-scheduler's one-at-a-time choice is provably
worse (the comment says why) and the solver must find the better placement; every plan is
checked by the independent validator.
"""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ortools.sat.python import cp_model

from models.config import SchedulerConfig
from solver import schedule, validate
from solver.context import build_context
from solver.cpsat import greedy_run
from solver.cpsat import solve as cpsat
from solver.cpsat.symmetry import canonical
from solver.greedy import schedule_greedy
from solver.filtering import StaticFilters
from solver.scoring import ScoreContext
from tests.builders import (T0, describe, make_node, make_pod, make_pod_group, make_pv, make_pvc, make_snapshot,
                            spread, term)

FAST = SchedulerConfig().with_overrides(time_limit_seconds=10.0, workers=2, seed=1)


def at(minutes: int):
    return T0 + timedelta(minutes=minutes)


def run(snapshot, config=FAST):
    greedy = schedule(snapshot, config, engine="greedy")
    plan = schedule(snapshot, config, engine="cpsat")
    assert validate(snapshot, plan, config) == []
    assert validate(snapshot, greedy, config) == []
    return greedy, plan


def placed(plan) -> set[str]:
    return {a.pod for a in plan.assignments}


def test_fragmentation_small_pods_spread_by_least_allocated_strand_a_big_one():
    # LeastAllocated spreads four 1-CPU pods two per node; the 4-CPU pod then fits nowhere.
    # Jointly: the small pods share one node and the big pod takes the other.
    nodes = [make_node("n1", cpu="4"), make_node("n2", cpu="4")]
    pods = [make_pod(f"default/small-{i}", cpu="1", labels={"app": "small"}, created=at(i)) for i in range(4)]
    pods.append(make_pod("default/big", cpu="4", labels={"app": "big"}, created=at(10)))
    greedy, plan = run(make_snapshot(nodes, pods))
    assert "default/big" not in placed(greedy)
    assert placed(plan) == {p.key for p in pods}
    assert plan.stats.status == "OPTIMAL"


def test_joint_anti_affinity_keeps_the_large_node_for_the_large_pod():
    # Three pods that refuse to share a host arrive first; LeastAllocated puts the first on the
    # big node (most room relative to size), which then cannot take the 8-CPU pod.
    nodes = [make_node("big", cpu="8")] + [make_node(f"small-{i}", cpu="2") for i in range(3)]
    anti = term({"app": "a"}, "kubernetes.io/hostname")
    pods = [
        make_pod(f"default/a-{i}", cpu="1", labels={"app": "a"}, pod_anti_affinity=[anti], created=at(i))
        for i in range(3)
    ]
    pods.append(make_pod("default/huge", cpu="8", labels={"app": "huge"}, created=at(10)))
    greedy, plan = run(make_snapshot(nodes, pods))
    assert "default/huge" not in placed(greedy)
    assert placed(plan) == {p.key for p in pods}
    hosts = {a.node for a in plan.assignments if a.pod.startswith("default/a-")}
    assert len(hosts) == 3


def test_priority_tiers_one_high_pod_beats_many_low_ones():
    nodes = [make_node("n1", cpu="4")]
    pods = [make_pod(f"default/low-{i}", cpu="1", priority=0, created=at(i)) for i in range(4)]
    pods.append(make_pod("default/high", cpu="4", priority=1000, created=at(10)))
    _, plan = run(make_snapshot(nodes, pods), FAST.model_copy(update={"preemption": FAST.preemption.model_copy(update={"enabled": False})}))
    assert placed(plan) == {"default/high"}


def test_spread_repair_fills_the_short_domain_first():
    # Zone a already has 3 matching pods, zone b none; maxSkew 1 sends new pods to b until it
    # catches up; only then may one more go to a.
    nodes = [
        make_node("a1", cpu="8", labels={"zone": "a"}),
        make_node("a2", cpu="8", labels={"zone": "a"}),
        make_node("b1", cpu="8", labels={"zone": "b"}),
    ]
    spread = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
              "labelSelector": {"matchLabels": {"app": "web"}}}
    running = [make_pod(f"default/old-{i}", cpu="1", labels={"app": "web"}, node="a1") for i in range(3)]
    pending = [make_pod(f"default/web-{i}", cpu="1", labels={"app": "web"}, spread=[spread], created=at(i)) for i in range(4)]
    greedy, plan = run(make_snapshot(nodes, running + pending))
    assert len(plan.assignments) == len(greedy.assignments) == 4
    in_b = sum(1 for a in plan.assignments if a.node == "b1")
    in_a = 3 + len(plan.assignments) - in_b
    assert in_b >= 3 and abs(in_a - in_b) <= 1


def test_zero_time_limit_returns_the_greedy_plan_marked_as_fallback():
    nodes = [make_node("n1", cpu="4")]
    pods = [make_pod(f"default/p-{i}", cpu="1", created=at(i)) for i in range(6)]
    snap = make_snapshot(nodes, pods)
    plan = schedule(snap, FAST.with_overrides(time_limit_seconds=0.0))
    greedy = schedule(snap, FAST, engine="greedy")
    assert plan.stats.fallback is True
    assert plan.stats.status == "FALLBACK"
    assert "time limit" in plan.stats.fallback_reason
    assert placed(plan) == placed(greedy)
    assert validate(snap, plan, FAST) == []


def test_greedy_that_overruns_its_estimate_finishes_beside_the_solve(monkeypatch):
    # Greedy was expected to be quick, so it goes first; it turns out slow (in the field:
    # thousands of failing pods). The model must not wait for it: it is built and solved beside
    # greedy, and greedy's plan still arrives for the comparison. Here greedy holds until the
    # solve has begun (at most 30 s): if the model waited for greedy, greedy would see no solve.
    import threading

    nodes = [make_node("n1", cpu="4"), make_node("n2", cpu="4")]
    pods = [make_pod(f"default/p-{i}", cpu="1", created=at(i)) for i in range(6)]
    snap = make_snapshot(nodes, pods)
    real = greedy_run.schedule_greedy
    solve_began = threading.Event()
    greedy_saw_solve: list[bool] = []

    def slow_greedy(*args, **kwargs):
        greedy_saw_solve.append(solve_began.wait(timeout=30.0))
        return real(*args, **kwargs)

    real_solve = cpsat.solve_component

    def marked_solve(*args, **kwargs):
        solve_began.set()
        return real_solve(*args, **kwargs)

    monkeypatch.setattr(greedy_run, "schedule_greedy", slow_greedy)
    monkeypatch.setattr(cpsat, "solve_component", marked_solve)
    monkeypatch.setattr(cpsat, "estimated_greedy_seconds", lambda ctx: 0.0)
    config = FAST.with_overrides(time_limit_seconds=60.0)
    outcome = cpsat.solve_window(build_context(snap, config))
    assert outcome.solution is not None and outcome.solution.status == "OPTIMAL"
    assert len(outcome.solution.placements) == 6
    assert greedy_saw_solve == [True]  # the solve began while greedy was still running
    monkeypatch.setattr(greedy_run, "schedule_greedy", real)
    assert validate(snap, schedule(snap, config), config) == []


def test_single_worker_with_a_seed_is_deterministic():
    nodes = [make_node(f"n{i}", cpu="4", labels={"zone": f"z{i % 2}"}) for i in range(6)]
    pods = [make_pod(f"default/p-{i}", cpu=f"{(i % 3) + 1}", labels={"app": f"a{i % 3}"}, created=at(i)) for i in range(14)]
    snap = make_snapshot(nodes, pods)
    cfg = FAST.with_overrides(workers=1, seed=7)
    first, second = schedule(snap, cfg), schedule(snap, cfg)
    assert first.assignments == second.assignments


def test_model_size_follows_classes_not_pods():
    nodes = [make_node(f"n{i}", cpu="64", memory="256Gi") for i in range(20)]
    pods = [make_pod(f"default/p-{i}", cpu=str(1 + i % 2), labels={"app": f"a{i % 2}"}, created=at(i)) for i in range(200)]
    plan = schedule(make_snapshot(nodes, pods), FAST)
    assert plan.stats.pod_classes == 2
    # x[c, n] and crowd[c, n] (how a class's pods on a node lower each other's score) plus a few
    # sums: 2 × classes × nodes, not pods × nodes (200 × 20).
    assert plan.stats.variables <= 2 * 2 * 20 + 10


def test_identical_nodes_are_grouped_and_still_packed_optimally():
    # Six interchangeable nodes in two zones (two groups), one node made distinct by a running
    # pod that a spread term counts: it stays out of every group.
    nodes = [make_node(f"n{i}", cpu="4", labels={"zone": f"z{i % 2}"}) for i in range(7)]
    running = [make_pod("default/seen", cpu="1", labels={"app": "web"}, node="n6")]
    spread = {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
              "labelSelector": {"matchLabels": {"app": "web"}}}
    pods = [make_pod(f"default/small-{i}", cpu="1", labels={"app": "small"}, created=at(i)) for i in range(8)]
    pods += [make_pod(f"default/big-{i}", cpu="4", labels={"app": "big"}, created=at(20 + i)) for i in range(4)]
    pods += [make_pod(f"default/web-{i}", cpu="1", labels={"app": "web"}, spread=[spread], created=at(40 + i)) for i in range(2)]
    snap = make_snapshot(nodes, running + pods)
    greedy, plan = run(snap)
    assert plan.stats.node_groups == 2
    assert len(plan.assignments) == len(pods)
    broken = FAST.with_overrides(break_symmetry=True)
    plan = schedule(snap, broken)
    assert validate(snap, plan, broken) == []
    assert len(plan.assignments) >= len(greedy.assignments)
    assert len(plan.assignments) == len(pods)
    assert plan.stats.status == "OPTIMAL"


# --------------------------------------------------------------------------- brute force


def _brute_force_value(snapshot, config) -> int:
    """Best tier-weighted placement by enumerating every assignment (capacity and ports only)."""
    ctx = build_context(snapshot, config)
    weights = cpsat.tier_weights([p.priority for p in ctx.window])
    best = 0
    options = list(range(len(ctx.nodes))) + [None]
    for choice in itertools.product(options, repeat=len(ctx.window)):
        used = ctx.state.used.copy()
        ok = True
        for pod, n in zip(ctx.window, choice):
            if n is None:
                continue
            used[n] += ctx.state.vector(pod)
        if (used > ctx.state.alloc).any():
            ok = False
        if ok:
            best = max(best, sum(weights[p.priority] for p, n in zip(ctx.window, choice) if n is not None))
    return best


pod_specs = st.lists(
    st.tuples(st.integers(1, 4), st.sampled_from([0, 10, 100])), min_size=1, max_size=5
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pod_specs, st.lists(st.integers(2, 6), min_size=1, max_size=3))
def test_solver_placement_equals_brute_force_optimum(specs, node_cpus):
    nodes = [make_node(f"n{i}", cpu=str(c), memory="64Gi") for i, c in enumerate(node_cpus)]
    pods = [make_pod(f"default/p{i}", cpu=str(c), priority=pr, created=at(i)) for i, (c, pr) in enumerate(specs)]
    snap = make_snapshot(nodes, pods)
    cfg = FAST.model_copy(update={"preemption": FAST.preemption.model_copy(update={"enabled": False})})
    plan = schedule(snap, cfg)
    assert validate(snap, plan, cfg) == []
    ctx = build_context(snap, cfg)
    weights = cpsat.tier_weights([p.priority for p in ctx.window])
    value = sum(weights[ctx.pod(a.pod).priority] for a in plan.assignments)
    assert value == _brute_force_value(snap, cfg)
    # The solver's proven optimum, or greedy's plan placing as much and scoring higher on the
    # final state (the best-of tie-break).
    assert plan.stats.status == "OPTIMAL" or "final state" in plan.stats.plan_reason


# --------------------------------------------------------------------------- greedy as a hint


def _accepts(snapshot, config) -> bool:
    """Fix every placement variable to greedy's plan: the model must still be feasible."""
    ctx = build_context(snapshot, config)
    static = StaticFilters(ctx.nodes, ctx.window)
    greedy = schedule_greedy(ctx, static=static)
    gangs = {}
    cand, ubs = cpsat.candidates(ctx, ctx.classes, static, gangs, config.preemption.enabled)
    live = [c for c in ctx.classes if len(cand[c.id])]
    if not live:
        return not greedy.placements
    wm = cpsat.build_component(cpsat.BuildInput(ctx, static, cand, ubs, ScoreContext.of(ctx),
                                                  cpsat.tier_weights([p.priority for p in ctx.window]),
                                                  config.preemption.enabled, gangs), live)
    counts = {}
    for key, n in greedy.placements.items():
        c = ctx.pod(key).class_id
        counts[c, n] = counts.get((c, n), 0) + 1
    for (c, n) in counts:
        if (c, n) not in wm.x:
            return False
    # Identical nodes are ordered in the model; greedy's plan is judged up to that permutation.
    counts = canonical(wm, counts)
    for (c, n), var in wm.x.items():
        wm.model.add(var == counts.get((c, n), 0))
    evicted = {v.pod.key for v in greedy.victims}
    for key, var in wm.evict.items():
        wm.model.add(var == (1 if key in evicted else 0))
    if any(v.pod.key not in wm.evict for v in greedy.victims):
        return False
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = 10
    return solver.solve(wm.model) in (cp_model.OPTIMAL, cp_model.FEASIBLE)


@st.composite
def small_clusters(draw):
    zones = draw(st.integers(1, 3))
    nodes = [
        make_node(f"n{i}", cpu=str(draw(st.integers(2, 8))), memory="32Gi", labels={"zone": f"z{i % zones}"})
        for i in range(draw(st.integers(1, 5)))
    ]
    pods = []
    for i in range(draw(st.integers(0, 4))):
        node = draw(st.sampled_from(nodes)).metadata.name
        pods.append(make_pod(f"default/run{i}", cpu="1", labels={"app": draw(st.sampled_from("ab"))},
                             priority=draw(st.sampled_from([0, 5])), node=node))
    for i in range(draw(st.integers(1, 8))):
        app = draw(st.sampled_from("abc"))
        kind = draw(st.sampled_from(["plain", "anti", "spread", "affinity", "port"]))
        extra = {}
        if kind == "anti":
            extra["pod_anti_affinity"] = [term({"app": app}, "kubernetes.io/hostname")]
        elif kind == "spread":
            extra["spread"] = [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                                "labelSelector": {"matchLabels": {"app": app}}}]
        elif kind == "affinity":
            extra["pod_affinity"] = [term({"app": app}, "zone")]
        elif kind == "port":
            extra["host_ports"] = [8080]
        pods.append(make_pod(f"default/p{i}", cpu=str(draw(st.integers(1, 4))), labels={"app": app},
                             priority=draw(st.sampled_from([0, 10])), created=at(i), **extra))
    return make_snapshot(nodes, pods)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_clusters())
def test_every_solver_plan_is_valid_and_never_worse_than_greedy(snapshot):
    greedy = schedule(snapshot, FAST, engine="greedy")
    plan = schedule(snapshot, FAST)
    assert validate(snapshot, plan, FAST) == []
    assert validate(snapshot, greedy, FAST) == []
    assert plan.stats.status != "FALLBACK", plan.stats.fallback_reason
    ctx = build_context(snapshot, FAST)
    weights = cpsat.tier_weights([p.priority for p in ctx.window])

    def value(p):
        return sum(weights[ctx.pod(a.pod).priority] for a in p.assignments)

    assert value(plan) >= value(greedy)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_clusters())
def test_greedy_plan_as_a_full_hint_is_accepted_by_the_model(snapshot):
    assert _accepts(snapshot, FAST), describe(snapshot)


def test_affinity_support_a_later_preemption_evicts_is_a_plan_the_model_accepts() -> None:
    """Found by the property above (issue 23, item 6): greedy places p0 (required affinity to
    app=a in its zone) on n1 beside run3, its only support in z1; p2 then evicts run3 for room.
    kube-scheduler checks p0's affinity at its turn and never again, so the plan is legal (the
    validator agrees); the model read support on the final state, without run3, and refused it."""
    nodes = [make_node("n0", cpu="2", memory="32Gi", labels={"zone": "z0"}),
             make_node("n1", cpu="7", memory="32Gi", labels={"zone": "z1"})]
    running = [make_pod(f"default/run{i}", cpu="1", labels={"app": "a"}, priority=0, node=node)
               for i, node in enumerate(["n0", "n0", "n0", "n1"])]
    pending = [make_pod("default/p0", cpu="3", labels={"app": "a"}, priority=10,
                        pod_affinity=[term({"app": "a"}, "zone")], created=at(0)),
               make_pod("default/p1", cpu="1", labels={"app": "a"}, priority=0, created=at(1)),
               make_pod("default/p2", cpu="4", labels={"app": "b"}, priority=10, created=at(2))]
    snapshot = make_snapshot(nodes, [*running, *pending])
    greedy = schedule(snapshot, FAST, engine="greedy")
    assert greedy.assignment_map() == {"default/p0": "n1", "default/p2": "n1"}
    assert [(v.pod, v.preemptor) for v in greedy.preemptions] == [("default/run3", "default/p2")]
    assert validate(snapshot, greedy, FAST) == []
    assert _accepts(snapshot, FAST)
    plan = schedule(snapshot, FAST)
    assert validate(snapshot, plan, FAST) == [] and plan.stats.status != "FALLBACK"
    assert len(plan.assignments) >= len(greedy.assignments)


def test_a_victim_supports_the_pods_beside_it_when_its_preemptor_leans_on_it_too() -> None:
    """``q`` (affinity to tier=x) is placed beside ``v``, its only support; ``p`` (affinity to
    app=a, which ``v`` and ``q`` both carry) then evicts ``v`` for room and has ``q``'s support.
    Both lean on ``v``: the plan names ``p`` its preemptor and ``v`` supports ``q`` (the validator
    agrees, and greedy makes the plan). The model's own optimum must place both too: it read a
    victim evicted for a pod that leans on it as supporting nobody, placed ``q`` alone and fell back
    to greedy's plan (GREEDY_BETTER)."""
    snapshot = make_snapshot(
        [make_node("n0", cpu="4")],
        [make_pod("default/v", cpu="2", node="n0", priority=0, labels={"app": "a", "tier": "x"}),
         make_pod("default/q", cpu="1", priority=100, labels={"app": "a"},
                  pod_affinity=[term({"tier": "x"}, "kubernetes.io/hostname")], created=at(0)),
         make_pod("default/p", cpu="2", priority=100, labels={"app": "p"},
                  pod_affinity=[term({"app": "a"}, "kubernetes.io/hostname")], created=at(1))],
    )
    greedy = schedule(snapshot, FAST, engine="greedy")
    assert greedy.assignment_map() == {"default/q": "n0", "default/p": "n0"}
    assert validate(snapshot, greedy, FAST) == []
    outcome = cpsat.solve_window(build_context(snapshot, FAST))
    assert outcome.solution is not None and outcome.solution.status == "OPTIMAL"
    assert outcome.solution.placements == {"default/q": 0, "default/p": 0}
    assert [(v.pod.key, v.preemptor) for v in outcome.solution.victims] == [("default/v", "default/p")]
    plan = schedule(snapshot, FAST)
    assert validate(snapshot, plan, FAST) == [] and plan.stats.status == "OPTIMAL"


def test_a_victim_supports_the_replicas_of_its_own_preemptor() -> None:
    """Found by the exhaustive-optimum test: ``run`` (app=b, anti-affinity to app=b) must go for
    any replica of ``t`` (affinity to app=b, matching itself) to join n0. Evicted for ``t-0``, it
    supports ``t-1`` beside it, which supports ``t-0``: two placed. ``t-2`` cannot start a group
    of its own on another node: before ``t-0`` comes, ``run`` matches its terms, after it ``t-0``
    does (an earlier reading let it, and placed three; kube-scheduler places two, as greedy does)."""
    snapshot = make_snapshot(
        [make_node(f"n{i}", cpu="1", pods=2) for i in range(3)],
        [make_pod("default/run", cpu="500m", node="n0", priority=0, labels={"app": "b"}, host_ports=[80],
                  pod_anti_affinity=[term({"app": "b"}, "kubernetes.io/hostname")]),
         *(make_pod(f"default/t-{i}", cpu="500m", priority=10, labels={"app": "b"},
                    pod_affinity=[term({"app": "b"}, "kubernetes.io/hostname")], created=at(i)) for i in range(3))],
    )
    config = FAST.with_overrides(preemption={"enabled": True})
    outcome = cpsat.solve_window(build_context(snapshot, config))
    assert outcome.solution is not None and outcome.solution.status == "OPTIMAL"
    assert sorted(outcome.solution.placements) == ["default/t-0", "default/t-1"]
    assert {outcome.solution.placements[k] for k in ("default/t-0", "default/t-1")} == {0}
    plan = schedule(snapshot, config)
    assert validate(snapshot, plan, config) == [] and len(plan.assignments) == 2
    greedy = schedule(snapshot, config, engine="greedy")
    assert validate(snapshot, greedy, config) == [] and len(greedy.assignments) == 2


def test_a_victim_supporting_affinity_evicted_for_a_merged_gang_is_named_a_preemptor() -> None:
    """Found by the long property run: two one-member gangs of one shape are one model class (an
    alias of their own classes); ``run`` supports ``t``'s affinity and is evicted for one of them.
    The plan must name a gang member as its preemptor (it raised: no pod of the model's class)."""
    snapshot = make_snapshot(
        [make_node("n2", cpu="1"), make_node("n3", cpu="1")],
        [make_pod("default/run", cpu="100m", node="n3", priority=0, labels={"app": "a"}),
         make_pod("default/t", cpu="0", priority=0, labels={"app": "a"}, preemption_policy="Never",
                  node_selector={"kubernetes.io/hostname": "n3"},
                  pod_affinity=[term({"app": "a"}, "kubernetes.io/hostname")], created=at(0)),
         *(make_pod(f"default/fam{i}-0", cpu="1", priority=1000, group=f"fam{i}", created=at(1 + i)) for i in range(2))],
        pod_groups=[make_pod_group(f"default/fam{i}", 1) for i in range(2)],
    )
    plan = schedule(snapshot, FAST)
    assert validate(snapshot, plan, FAST) == []
    assert plan.assignment_map()["default/t"] == "n3"
    assert {a.pod for a in plan.assignments} == {"default/t", "default/fam0-0", "default/fam1-0"}
    assert [(p.pod, p.node) for p in plan.preemptions] == [("default/run", "n3")]


def test_a_spread_pod_placed_before_a_later_preemption_is_a_plan_the_model_accepts() -> None:
    """Found by the property above: greedy places p1 (zone spread, maxSkew 1) in z1 while z0 holds
    three matching pods, then p2 evicts those three from z0. kube-scheduler checks p1's skew at
    its arrival and never again, so the plan is legal (the validator agrees); the model read the
    global minimum with the victims already gone and refused it (skew 2)."""
    spread = [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "a"}}}]
    nodes = [make_node("n0", cpu="4", memory="32Gi", labels={"zone": "z0"}),
             make_node("n1", cpu="3", memory="32Gi", labels={"zone": "z1"})]
    running = [make_pod(f"default/run{i}", cpu="1", labels={"app": "a"}, priority=0, node=node)
               for i, node in enumerate(["n0", "n0", "n0", "n1"])]
    pending = [make_pod("default/p0", cpu="1", labels={"app": "a"}, priority=10, created=T0),
               make_pod("default/p1", cpu="1", labels={"app": "a"}, priority=10, spread=spread,
                        created=T0 + timedelta(minutes=1)),
               make_pod("default/p2", cpu="4", labels={"app": "a"}, priority=10, created=T0 + timedelta(minutes=2))]
    snapshot = make_snapshot(nodes, [*running, *pending])
    greedy = schedule(snapshot, FAST, engine="greedy")
    assert validate(snapshot, greedy, FAST) == []
    assert _accepts(snapshot, FAST)
    plan = schedule(snapshot, FAST)
    assert validate(snapshot, plan, FAST) == [] and len(plan.assignments) >= len(greedy.assignments)


def test_bulk_objective_is_the_one_or_tools_writes() -> None:
    """``solve.maximize`` writes the very objective ``CpModel.maximize`` does (repeated variables
    merged, zeros dropped, by index, negated), only without a Python loop per term."""
    import random

    from ortools.sat.python import cp_model

    from solver.cpsat.solve import maximize

    rng = random.Random(7)
    ours, theirs = cp_model.CpModel(), cp_model.CpModel()
    for model in (ours, theirs):
        for i in range(60):
            model.new_int_var(0, 9, f"x{i}")
    picks = [rng.randrange(60) for _ in range(400)]
    coeffs = [rng.randint(-4, 4) for _ in picks]
    maximize(ours, [ours.get_int_var_from_proto_index(i) for i in picks], coeffs)
    theirs.maximize(cp_model.LinearExpr.weighted_sum([theirs.get_int_var_from_proto_index(i) for i in picks], coeffs))
    assert str(ours.proto.objective) == str(theirs.proto.objective)
    assert len(ours.proto.objective.vars) < 60


def test_a_victim_evicted_for_an_earlier_pod_supports_no_later_pod_s_affinity() -> None:
    """Found by the property test above. run0 (app a) is the only pod of its app in zone z0; p0
    (created first) and p4 (app a, required affinity to app a in its zone) of one priority both
    want n0, where room for both means evicting run0. The model counted run0 as p4's support,
    evicted "for p0" — but p0 comes first in the queue and fits without evicting: run0 goes at
    p4's turn, and p4 is then the first pod of its group, which p3 (the same terms, in zone z1)
    cannot also be. The model's plan failed the validator and greedy's was returned; now a victim
    supports a class only when the pod it is evicted for comes after all of that class's pods."""
    affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "zone"}]}}
    nodes = [make_node("n0", cpu="5", memory="32Gi", labels={"zone": "z0"}),
             make_node("n1", cpu="2", memory="32Gi", labels={"zone": "z1"})]
    pods = [make_pod("default/run0", cpu="1", node="n0", priority=0, labels={"app": "a"}),
            make_pod("default/p0", cpu="4", priority=10, labels={"app": "b"}, created=at(0)),
            make_pod("default/p1", cpu="2", priority=0, labels={"app": "a"}, created=at(1)),
            make_pod("default/p2", cpu="2", priority=0, labels={"app": "a"}, created=at(2)),
            make_pod("default/p3", cpu="1", priority=0, labels={"app": "a"}, created=at(3), affinity=affinity),
            make_pod("default/p4", cpu="1", priority=10, labels={"app": "a"}, created=at(4), affinity=affinity)]
    snapshot = make_snapshot(nodes, pods)
    plan = schedule(snapshot, FAST)
    assert validate(snapshot, plan, FAST) == []
    assert plan.stats.status != "FALLBACK", plan.stats.fallback_reason


def test_a_victim_supports_no_pod_that_cannot_fit_beside_it_on_its_own_node() -> None:
    """Found by the long property run (4,000 windows, reduced). run-0 (app c, terminating, 2 CPUs
    on n2's 1 CPU) is the only app c pod; t0-0..t0-3 (app c, required affinity to app c per host,
    preemptionPolicy Never; t0-0 with a volume, a class of its own) cannot preempt, and t3-2 (a
    lower priority) may evict run-0. The model put t0-0 and t0-3 on n2 leaning on run-0, evicted
    after them for t3-2, and t0-1 and t0-2 on n0 as the group's seed: but no pod fits n2 beside
    run-0, so the t0 pods there come only once it is gone, and then the group starts once, in one
    host. The validator refused the plan and greedy's came back. A victim now supports nothing of a
    class that does not fit beside it on its node, where that node is the whole domain."""
    host = "kubernetes.io/hostname"
    nodes = [make_node("n0", cpu="2500m", memory="16Gi", labels={host: "n0"}),
             make_node("n2", cpu="1", memory="4Gi", pods=3, labels={host: "n2"})]
    pods = [make_pod("default/run-0", cpu="2", node="n2", priority=0, labels={"app": "c"}, terminating=True)]
    pods += [make_pod(f"default/t0-{i}", cpu="100m", priority=100, preemption_policy="Never", labels={"app": "c"},
                      pod_affinity=[term({"app": "c"}, host)], created=at(i), claims=["claim-1"] if i == 0 else ())
             for i in range(4)]
    pods.append(make_pod("default/t3-2", cpu="100m", priority=10, labels={"app": "b"}, created=at(10),
                         spread=[spread(host, {"app": "b"}, max_skew=2, min_domains=2)]))
    snapshot = make_snapshot(nodes, pods, pvs=[make_pv("pv-1", claim="default/claim-1")],
                             pvcs=[make_pvc("default/claim-1", volume="pv-1")])
    config = SchedulerConfig().with_overrides(time_limit_seconds=5.0, workers=1, seed=23, profile="packing")
    plan = schedule(snapshot, config)
    assert validate(snapshot, plan, config) == []
    assert plan.stats.status != "FALLBACK", plan.stats.fallback_reason
    placed = {a.pod: a.node for a in plan.assignments}
    assert len({placed[f"default/t0-{i}"] for i in range(4) if f"default/t0-{i}" in placed}) == 1
    assert sum(f"default/t0-{i}" in placed for i in range(4)) == 4  # all four, in one host


def test_a_victim_evicted_after_the_placed_pods_of_a_class_supports_them() -> None:
    """Found by the long exhaustive-optimum run (4,000 windows). t0-0 and t2-0 are one class
    (required affinity to app b per host, preemptionPolicy Never); t1-0 (created between them)
    wants n1's host port, which run-1, the only app b pod, holds. The best plan puts t0-0 on n1
    leaning on run-1, then t1-0 there evicting it: t0-0 was placed before the eviction, so its
    affinity held at its turn. The model read run-1 as supporting t0's class only if every pod
    of the class came before t1-0's, and t2-0 does not, so its optimum placed t0-0 alone and the
    decision returned greedy's plan. A class's places go to its first pods, so when it places no
    more pods than come before the preemptor's class, the victim supports them all."""
    host = "kubernetes.io/hostname"
    anti = [term({"app": "b"}, host)]
    nodes = [make_node("n0", cpu="1", memory="64Gi", pods=2, labels={host: "n0"}),
             make_node("n1", cpu="2", memory="64Gi", pods=2, labels={host: "n1"})]
    pods = [make_pod("default/run-0", cpu="500m", node="n0", labels={"app": "a"}, priority=0, host_ports=[80],
                     start_time=at(0), pod_anti_affinity=anti),
            make_pod("default/run-1", cpu="500m", node="n1", labels={"app": "b"}, priority=0, host_ports=[80],
                     start_time=at(0), pod_anti_affinity=anti),
            make_pod("default/run-2", cpu="500m", node="n0", labels={"app": "a"}, priority=0, start_time=at(0),
                     pod_anti_affinity=anti)]
    pods += [make_pod(f"default/t{i}-0", cpu="1" if i != 1 else "500m", priority=10, labels={"app": "a"},
                      created=at(i), preemption_policy="Never" if i != 1 else None,
                      host_ports=[80] if i == 1 else (), pod_affinity=[term({"app": "b" if i != 1 else "a"}, host)])
             for i in range(3)]
    snapshot = make_snapshot(nodes, pods)
    config = SchedulerConfig().with_overrides(time_limit_seconds=5.0, workers=1, seed=1)
    plan = schedule(snapshot, config)
    assert validate(snapshot, plan, config) == []
    assert (plan.stats.status, plan.stats.plan_from) == ("OPTIMAL", "solver"), plan.stats.plan_reason
    assert {a.pod: a.node for a in plan.assignments} == {"default/t0-0": "n1", "default/t1-0": "n1"}
    assert [(p.pod, p.preemptor) for p in plan.preemptions] == [("default/run-1", "default/t1-0")]


def test_a_victim_named_for_a_later_pod_by_the_model_supports_no_pod_kube_evicts_it_for() -> None:
    """Found by the long property run. t0 and t1 (app c, required affinity to app c per
    host, zone spread) are one affinity group; run0, the only app c pod, sits on n0 in zone z0,
    with room on n0 for one more pod. The model puts t0 on n0 leaning on run0, which it evicts
    "for t2" (created after the group), and t1 on n1 as the group's seed. kube-scheduler evicts
    run0 at t0's own turn (t0 beside it would break the zone spread), so the replay names t0 as
    its preemptor: t0 is then the group's first pod, and t1 may not start it again. The model's
    naming of a victim's preemptor does not follow the spread at each turn, so ``solve_sound``
    refuses a plan whose victim the replay evicts for another class than the model named, cuts
    that naming and solves again: the plan returned is the model's, and valid."""
    affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "c"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    zone_spread = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "c"}}}]
    nodes = [make_node(f"n{i}", cpu="1", pods=2, labels={"topology.kubernetes.io/zone": f"z{i}"}) for i in range(2)]
    pods = [make_pod("default/run0", cpu="100m", node="n0", priority=0, labels={"app": "c"}),
            make_pod("default/t0", cpu="0", priority=10, labels={"app": "c"}, created=at(1), affinity=affinity,
                     spread=zone_spread),
            make_pod("default/t1", cpu="0", priority=10, labels={"app": "c"}, created=at(2), affinity=affinity,
                     spread=zone_spread),
            make_pod("default/t2", cpu="0", priority=10, labels={"app": "a"}, created=at(3))]
    snapshot = make_snapshot(nodes, pods)
    plan = schedule(snapshot, FAST)
    assert validate(snapshot, plan, FAST) == []
    assert plan.stats.status != "FALLBACK", plan.stats.fallback_reason

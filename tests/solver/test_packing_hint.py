"""The packing hint (``solver.cpsat.hint.packing_counts``) with required pod anti-affinity.

The packing stands in for the solve's answer when the solve finds nothing better in its time
(large windows), so it must be a valid plan by construction: every packing is replayed here
through the independent validator, on hand-built windows and on generated ones.
"""

from __future__ import annotations

import time

from hypothesis import HealthCheck, given, settings

from models.config import SchedulerConfig
from solver import schedule, validate
from solver.api import _plan_from
from solver.context import build_context
from solver.cpsat import solve as cpsat
from solver.cpsat.decode import extract
from solver.cpsat.hint import HintSolution, _apply, counts_value, packing_counts
from solver.filtering import StaticFilters
from solver.scoring import ScoreContext
from tests.builders import make_node, make_pod, make_pod_group, make_snapshot, selector, term
from tests.reliability.generators import windows

CONFIG = SchedulerConfig().with_overrides(time_limit_seconds=5.0, workers=2, seed=1)
HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def packing_plan(snapshot, config=CONFIG):
    """The packing of the whole window as a plan, and its tier-weighted value."""
    ctx = build_context(snapshot, config)
    static = StaticFilters(ctx.nodes, ctx.window)
    window, classes, alias = cpsat.model_classes(ctx)
    allow = config.preemption.enabled
    cand, ubs = cpsat.candidates(ctx, classes, static, window, allow)
    live = [c for c in classes if len(cand[c.id])]
    weights = cpsat.tier_weights([p.priority for p in ctx.window])
    sol = cpsat.Solution()
    value = 0
    if live:
        wm = cpsat.build_component(cpsat.BuildInput(ctx, static, cand, ubs, ScoreContext.of(ctx), weights, allow, window, alias), live)
        packed = packing_counts(wm)
        value = counts_value(wm, packed, weights)
        extract(wm, HintSolution(wm, _apply(wm, packed, set()), value), sol)
    plan = _plan_from(ctx, sol.placements, [], {}, {}, static, stats=dict(engine="cpsat", status="FEASIBLE"),
                      start=time.monotonic())
    return plan, value


def exclusive_window():
    # The bench's anti-affinity shape, small: cache and search repel both apps (one of either per
    # host); search needs ssd. The hdd nodes run a batch pod, so LeastAllocated sends cache to
    # the empty ssd nodes and search is stranded; best fit sends cache to the fuller hdd nodes.
    exclusive = [term(key=HOST, label_selector=selector(exprs=[("app", "In", ["cache", "search"])]))]
    nodes = [make_node(f"ssd{i}", cpu="4", labels={"disk": "ssd"}) for i in range(2)]
    nodes += [make_node(f"hdd{i}", cpu="4", labels={"disk": "hdd"}) for i in range(2)]
    pods = [make_pod(f"default/batch{i}", cpu="1", node=f"hdd{i}", labels={"app": "batch"}) for i in range(2)]
    pods += [make_pod(f"default/cache{i}", cpu="1", labels={"app": "cache"}, pod_anti_affinity=exclusive) for i in range(2)]
    pods += [make_pod(f"default/search{i}", cpu="1", labels={"app": "search"}, pod_anti_affinity=exclusive,
                      node_selector={"disk": "ssd"}) for i in range(2)]
    return make_snapshot(nodes, pods)


def test_packing_follows_anti_affinity_where_greedy_strands_pods():
    snapshot = exclusive_window()
    greedy = schedule(snapshot, CONFIG, engine="greedy")
    assert len(greedy.assignments) == 2  # both cache pods on ssd, search left out
    plan, _ = packing_plan(snapshot)
    assert validate(snapshot, plan, CONFIG) == []
    assert plan.assignment_map() == {"default/cache0": "hdd0", "default/cache1": "hdd1",
                                     "default/search0": "ssd0", "default/search1": "ssd1"}


def test_packing_respects_running_pods_anti_affinity_and_zones():
    # A running pod repels app=web from its zone; web repels itself per host. z0 is closed to
    # web, so of four web pods only the two nodes of z1 take one each.
    nodes = [make_node(f"n{i}", cpu="4", labels={ZONE: f"z{i // 2}"}) for i in range(4)]
    pods = [make_pod("default/guard", cpu="1", node="n0", labels={"app": "guard"},
                     pod_anti_affinity=[term({"app": "web"}, ZONE)])]
    pods += [make_pod(f"default/web{i}", cpu="1", labels={"app": "web"}, pod_anti_affinity=[term({"app": "web"}, HOST)])
             for i in range(4)]
    snapshot = make_snapshot(nodes, pods)
    plan, _ = packing_plan(snapshot)
    assert validate(snapshot, plan, CONFIG) == []
    assert sorted(plan.assignment_map().values()) == ["n2", "n3"]


def test_packing_puts_each_topology_gang_in_one_rack_beside_plain_pods():
    # Two racks of two 4-CPU nodes; four interchangeable rack-bound gangs of two 1-CPU members
    # (one kind, counted per rack) and a plain pod. The packing takes each gang into the
    # tightest rack that holds it, whole, and the plan replays clean.
    rack = "example.com/rack"
    nodes = [make_node(f"r{r}n{i}", cpu="4", labels={rack: f"r{r}"}) for r in range(2) for i in range(2)]
    pods = [make_pod(f"ml/g{g}-{i}", cpu="1", group=f"g{g}") for g in range(4) for i in range(2)]
    pods.append(make_pod("ml/plain", cpu="2"))
    groups = [make_pod_group(f"ml/g{g}", 2, topology_key=rack) for g in range(4)]
    snapshot = make_snapshot(nodes, pods, pod_groups=groups)
    plan, _ = packing_plan(snapshot)
    assert validate(snapshot, plan, CONFIG) == []
    placed = plan.assignment_map()
    assert len(placed) == 9
    for g in range(4):
        assert len({placed[f"ml/g{g}-{i}"][:2] for i in range(2)}) == 1, placed


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(windows())
def test_every_packing_is_a_valid_plan(window):
    config = window.config.with_overrides(time_limit_seconds=5.0, workers=2)
    plan, _ = packing_plan(window.snapshot, config)
    assert validate(window.snapshot, plan, config) == []

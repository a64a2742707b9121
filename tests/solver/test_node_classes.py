"""The degrade steps of the CP-SAT engine when the per-node model would overrun the time limit
(``solver/cpsat/node_classes.py``): node classes, greedy for the rest, greedy.

The build-cost estimate is raised so that a cluster small enough for a test counts as "too big
to build in time": the decision then takes the step a 1,000-node cluster takes at the default
limit, and every plan is checked by the independent validator against greedy's.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from models.config import SchedulerConfig
from solver import schedule, validate
from solver.api import ScheduleRequest, decide
from solver.context import build_context
from solver.cpsat import node_classes
from solver.cpsat import degraded as steps
from solver.cpsat import solve as cpsat
from tests.builders import make_node, make_pod, make_snapshot, spread

CONFIG = SchedulerConfig().with_overrides(time_limit_seconds=5.0, workers=2, seed=1)


@pytest.fixture
def too_big(monkeypatch):
    """Every class x node pair costs a second to build: any per-node model overruns the limit."""
    monkeypatch.setattr(steps, "BUILD_SECONDS_PER_PAIR", 1.0)
    # ... while a node-class model of a few hundred pairs fits its share.
    monkeypatch.setattr(steps, "NODE_CLASS_SECONDS_PER_PAIR", 1e-4)


def alike_cluster(seed: int = 3, nodes: int = 60, running: int = 4, pending: int = 150):
    """Many alike nodes (two shapes, three zones) with running pods of random small requests, and
    pending pods of a few shapes, a tenth of them spread over zones."""
    rng = random.Random(seed)
    node_objs, pods = [], []
    for i in range(nodes):
        big = i % 4 == 3
        name = f"node-{i:03d}"
        node_objs.append(make_node(name, cpu="16" if big else "8", memory="32Gi" if big else "16Gi",
                                   labels={"zone": f"z{i % 3}"}))
        for j in range(running):
            pods.append(make_pod(f"prod/run-{i}-{j}", cpu=f"{rng.choice([250, 500, 1000])}m",
                                 memory=f"{rng.choice([256, 512, 1024])}Mi", node=name,
                                 labels={"app": f"a{rng.randrange(5)}"}, scheduler="default-scheduler"))
    for k in range(pending):
        app = "spread" if k % 10 == 0 else f"a{rng.randrange(5)}"
        pods.append(make_pod(f"prod/p-{k:04d}", cpu=f"{rng.choice([500, 1000, 1500, 2000])}m",
                             memory=f"{rng.choice([512, 1024, 2048])}Mi", labels={"app": app},
                             spread=[spread("zone", {"app": "spread"})] if app == "spread" else ()))
    return make_snapshot(node_objs, pods)


def overcommitted(snapshot, plan) -> list[str]:
    """Nodes whose pods (running and placed) request more cpu or memory than allocatable."""
    ctx = build_context(snapshot, CONFIG)
    state = ctx.state.copy()
    for a in plan.assignments:
        state.add(ctx.pod(a.pod), state.node_index[a.node])
    cols = [state.res_index["cpu"], state.res_index["memory"], state.res_index["pods"]]
    bad = np.flatnonzero((state.used[:, cols] > state.alloc[:, cols]).any(axis=1))
    return [state.nodes[n].name for n in bad.tolist()]


def test_node_classes_give_a_valid_plan_placing_at_least_greedys(too_big):
    snapshot = alike_cluster()
    greedy = schedule(snapshot, CONFIG, engine="greedy")
    plan = schedule(snapshot, CONFIG, engine="cpsat")
    assert plan.stats.degraded is not None and plan.stats.degraded.startswith("node classes")
    assert 0 < plan.stats.node_classes < 60  # alike nodes share one count variable per class
    assert validate(snapshot, plan, CONFIG) == []
    assert len(plan.assignments) >= len(greedy.assignments)
    assert overcommitted(snapshot, plan) == []


def test_the_node_class_plan_itself_never_overcommits_a_node(too_big, monkeypatch):
    # The solver's own plan, before the choice against greedy's: decoded by first fit into real
    # free room, never into the rounded-down buckets' sum. Coarse buckets, so that the members
    # of a class differ in free room.
    monkeypatch.setattr(node_classes, "FIRST_BUCKETS", 4)
    snapshot = alike_cluster(seed=7, nodes=30, running=8, pending=200)
    ctx = build_context(snapshot, CONFIG)
    outcome = cpsat.solve_window(ctx, time_limit=5.0)
    assert outcome.degraded is not None and outcome.degraded.startswith("node classes")
    sol = outcome.solution
    assert sol.node_classes < 30
    state = ctx.state.copy()
    for key, n in sol.placements.items():
        state.add(ctx.pod(key), n)
    assert not (state.free[:, [state.res_index["cpu"], state.res_index["memory"]]] < 0).any()
    assert len(sol.placements) >= len(outcome.greedy.placements) or not outcome.chose_solver


def test_rounding_down_never_promises_room_a_member_lacks():
    snapshot = alike_cluster(seed=5, nodes=24, running=6, pending=30)
    ctx = build_context(snapshot, CONFIG)
    for buckets in (2, 8, 32):
        reduced = node_classes.reduce(ctx, buckets)
        for k, members in enumerate(reduced.members):
            per_member = reduced.ctx.state.free[k] // len(members)
            assert (ctx.state.free[members] >= per_member).all()


def test_a_window_node_classes_cannot_express_is_searched_from_greedy_s_plan_and_says_why(too_big):
    # More demand than room: greedy leaves pods out that an emptied node could hold, so a round
    # might do better (a plan of every pod, none evicted, is taken without a search: test_lns).
    snapshot = alike_cluster(nodes=12, pending=100)
    # A host port is a per-node rule: node classes cannot count it.
    snapshot = make_snapshot(
        list(snapshot.nodes),
        [*snapshot.pods, make_pod("prod/ported", cpu="100m", host_ports=[8080])],
    )
    greedy = schedule(snapshot, CONFIG, engine="greedy")
    plan = schedule(snapshot, CONFIG, engine="cpsat")
    # Not node classes: greedy's plan, improved a neighbourhood at a time (issue 34).
    assert plan.stats.degraded == "large-neighbourhood search" and plan.stats.lns_rounds
    assert "host ports" in (plan.stats.plan_reason or "")
    assert validate(snapshot, plan, CONFIG) == []
    assert len(plan.assignments) >= len(greedy.assignments)


def test_a_model_that_fits_the_budget_is_not_degraded():
    snapshot = alike_cluster(nodes=12, pending=20)
    plan = schedule(snapshot, CONFIG, engine="cpsat")
    assert plan.stats.degraded is None and plan.stats.node_classes is None


def test_a_build_that_used_the_whole_limit_skips_the_solve(monkeypatch):
    # No degrading (the estimate says every model is free), and a limit the build alone uses up:
    # CP-SAT is not asked to load the model only to answer UNKNOWN.
    monkeypatch.setattr(steps, "BUILD_SECONDS_PER_PAIR", 0.0)
    monkeypatch.setattr(steps, "BUILD_SHARE", 0.0)
    snapshot = alike_cluster(nodes=12, pending=40)
    config = CONFIG.with_overrides(time_limit_seconds=0.001)
    greedy = schedule(snapshot, config, engine="greedy")
    plan = schedule(snapshot, config, engine="cpsat")
    assert plan.stats.solve_skipped is True and plan.stats.degraded is None
    assert validate(snapshot, plan, config) == []
    assert len(plan.assignments) >= len(greedy.assignments)


def test_a_node_class_never_spans_zones_a_spread_constraint_counts():
    # Node classes are grouped by the node labels the window's rules read: here the spread
    # pods' topology key. Merging nodes of several zones into one pseudo node let the model
    # balance zones that decoding then broke (the plan failed validation, greedy's stood in).
    snapshot = alike_cluster(seed=5, nodes=24, running=6, pending=30)
    ctx = build_context(snapshot, CONFIG)
    assert "zone" in node_classes.node_label_keys(ctx)
    reduced = node_classes.reduce(ctx, 2)
    for members in reduced.members:
        assert len({ctx.nodes[n].labels["zone"] for n in members}) == 1


def test_the_node_class_plan_keeps_zone_spread_and_is_the_solvers(too_big):
    # Twelve alike nodes in three zones, one running pod each; zone z0's are the spread app's. A
    # valid plan puts the eight new pods of the app in z1 and z2. With the zones merged into
    # one pseudo node the model saw one domain, and decoding put some in z0.
    nodes, pods = [], []
    for i in range(12):
        name = f"node-{i:02d}"
        nodes.append(make_node(name, cpu="8", memory="16Gi", labels={"zone": f"z{i % 3}"}))
        pods.append(make_pod(f"prod/run-{i}", cpu="500m", memory="512Mi", node=name,
                             labels={"app": "spread" if i % 3 == 0 else "other"}, scheduler="default-scheduler"))
    for k in range(8):
        pods.append(make_pod(f"prod/p-{k}", cpu="500m", memory="512Mi", labels={"app": "spread"},
                             spread=[spread("zone", {"app": "spread"})]))
    snapshot = make_snapshot(nodes, pods)
    ctx = build_context(snapshot, CONFIG)
    outcome = cpsat.solve_window(ctx, time_limit=5.0)
    assert outcome.degraded is not None and outcome.degraded.startswith("node classes")
    # The solver's own plan, before the choice against greedy's (which may hide it).
    zones = sorted(int(ctx.nodes[n].labels["zone"][1]) for n in outcome.solution.placements.values())
    assert zones == [1, 1, 1, 1, 2, 2, 2, 2]
    decision = decide(ScheduleRequest(snapshot, CONFIG))
    assert decision.rejected == () and decision.validated


def test_a_node_class_never_spans_zones_the_default_spread_counts():
    # A ReplicaSet's pods with no spread constraints of their own are scored by kube-scheduler's
    # system default constraints, one of them over topology.kubernetes.io/zone: the zone label is
    # read, so nodes of two zones must not become one pseudo node (its score would count one zone).
    from models.objects import OwnerReference

    zone = "topology.kubernetes.io/zone"
    nodes = [make_node(f"node-{i:02d}", cpu="8", memory="16Gi", labels={zone: f"z{i % 2}"}) for i in range(8)]
    owner = [OwnerReference(api_version="apps/v1", kind="ReplicaSet", name="web-1", controller=True)]
    pods = []
    for k in range(6):
        pod = make_pod(f"prod/web-{k}", cpu="500m", memory="512Mi", labels={"app": "web"})
        pods.append(pod.model_copy(update={"metadata": pod.metadata.model_copy(update={"owner_references": owner})}))
    ctx = build_context(make_snapshot(nodes, pods), CONFIG)
    assert zone in node_classes.node_label_keys(ctx)
    reduced = node_classes.reduce(ctx, 2)
    for members in reduced.members:
        assert len({ctx.nodes[n].labels[zone] for n in members}) == 1

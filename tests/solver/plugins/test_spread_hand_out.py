"""Which pod of a zone-spread class takes which of the model's places (``pod_topology_spread/
hand_out.py``): the plan names pods, and kube-scheduler's preemption takes them in queue order,
each judged on the pods placed before it. Handed node by node, a class's second pod lands in the
zone its first filled and breaks ``maxSkew: 1`` at its turn; kube-scheduler then preempts nothing
for it and the plan's evictions there are refused."""

from __future__ import annotations

from datetime import timedelta

from models.config import SchedulerConfig
from solver import schedule, validate
from solver.context import build_context
from solver.filtering import StaticFilters
from solver.plugins import registry
from solver.plugins.preemption.replay import NO_ROOM, replay
from tests.builders import T0, make_node, make_pod, make_snapshot, spread

CONFIG = SchedulerConfig().with_overrides(time_limit_seconds=10.0, workers=2, seed=1)
ZONES = {"a0": "a", "a1": "a", "b0": "b", "b1": "b"}


def _full_zones():
    """Two zones of two 2-CPU nodes, each full with a 2-CPU pod of priority 0; four 2-CPU pods of
    app=s (priority 1000, zone spread maxSkew 1), each of which must evict one of them."""
    nodes = [make_node(name, cpu="2", memory="64Gi", labels={"zone": zone}) for name, zone in ZONES.items()]
    pods = [make_pod(f"default/low-{name}", cpu="2", node=name, priority=0) for name in ZONES]
    pods += [make_pod(f"default/s-{i}", cpu="2", priority=1000, labels={"app": "s"},
                      spread=[spread("zone", {"app": "s"})], created=T0 + timedelta(seconds=i))
             for i in range(4)]
    return make_snapshot(nodes, pods)


def test_a_spread_class_s_places_go_to_its_pods_zone_by_zone_in_turn() -> None:
    """One place on each of the four nodes: node by node would give s-0 and s-1 zone a's two
    nodes (s-1's turn then finds zone a one above the skew); handed out, the zones alternate,
    and every pod's turn preempts as the plan says."""
    ctx = build_context(_full_zones(), CONFIG)
    static = StaticFilters(ctx.nodes, ctx.window)
    index = {node.name: i for i, node in enumerate(ctx.nodes)}
    (cls,) = ctx.classes
    slots = sorted((index[name], 1) for name in ZONES)
    assert registry.hands_out(cls.rep)
    handed = registry.hand_out(ctx, static, cls.pods, slots)
    zones = [ZONES[ctx.nodes[n].name] for n in handed]
    assert zones in (["a", "b", "a", "b"], ["b", "a", "b", "a"]), zones
    assert sorted(handed) == [n for n, _ in slots]

    by_node = [n for n, k in slots for _ in range(k)]
    for order, stuck in ((by_node, True), (handed, False)):
        placements = {pod.key: n for pod, n in zip(cls.pods, order)}
        turns = replay(ctx, placements, set(order), static).turns
        assert any(turn.outcome == NO_ROOM for turn in turns.values()) is stuck, (order, turns)


def test_the_solver_s_plan_for_a_spread_class_that_preempts_passes_the_validator() -> None:
    """The same window through ``schedule``: the solver's plan places all four pods, each
    evicting the low pod of its node, and kube-scheduler's preemption (the validator's replay)
    agrees with every eviction."""
    snapshot = _full_zones()
    plan = schedule(snapshot, CONFIG)
    assert validate(snapshot, plan, CONFIG) == []
    assert {a.pod for a in plan.assignments} == {f"default/s-{i}" for i in range(4)}
    assert len(plan.preemptions) == 4
    assert plan.stats.plan_from == "solver", plan.stats


def test_classes_without_hard_spread_are_handed_node_by_node() -> None:
    nodes = [make_node(name, cpu="2", memory="64Gi", labels={"zone": zone}) for name, zone in ZONES.items()]
    pods = [make_pod(f"default/p-{i}", cpu="1", created=T0 + timedelta(seconds=i)) for i in range(3)]
    ctx = build_context(make_snapshot(nodes, pods), CONFIG)
    static = StaticFilters(ctx.nodes, ctx.window)
    (cls,) = ctx.classes
    assert not registry.hands_out(cls.rep)
    assert registry.hand_out(ctx, static, cls.pods, [(0, 2), (3, 1)]) == [0, 0, 3]


def test_each_constraint_is_weighed_against_its_own_max_skew() -> None:
    """Zone spread with maxSkew 1 and hostname spread with maxSkew 2 on one class: a hostname
    skew of 2 is allowed where a zone skew of 2 is not, so the places are ranked by how far each
    constraint is past its own maxSkew, not by the raw skews (which tied here and sent s-2 to a
    place where its zone turn failed, so the solver's plan was refused and greedy's returned)."""
    hostname = "kubernetes.io/hostname"
    nodes = [make_node("n0", cpu="2", memory="64Gi", labels={"zone": "a"}),
             make_node("n1", cpu="1", memory="64Gi", labels={"zone": "b"}),
             make_node("n2", cpu="1500m", memory="64Gi", labels={"zone": "b"}),
             make_node("n3", cpu="1", memory="64Gi", labels={"zone": "a"})]
    pods = [make_pod("default/low-n0a", cpu="1", node="n0", priority=0),
            make_pod("default/low-n0b", cpu="1", node="n0", priority=0),
            make_pod("default/top-n1", cpu="1", node="n1", priority=5000),
            make_pod("default/run-s", cpu="500m", node="n2", priority=1000, labels={"app": "s"}),
            make_pod("default/low-n2", cpu="1", node="n2", priority=0),
            make_pod("default/low-n3", cpu="1", node="n3", priority=0)]
    pods += [make_pod(f"default/s-{i}", cpu="1", priority=1000, labels={"app": "s"},
                      spread=[spread("zone", {"app": "s"}), spread(hostname, {"app": "s"}, max_skew=2)],
                      created=T0 + timedelta(seconds=i)) for i in range(4)]
    snapshot = make_snapshot(nodes, pods)
    ctx = build_context(snapshot, CONFIG)
    static = StaticFilters(ctx.nodes, ctx.window)
    index = {node.name: i for i, node in enumerate(ctx.nodes)}
    (cls,) = ctx.classes
    slots = sorted([(index["n0"], 2), (index["n2"], 1), (index["n3"], 1)])
    handed = registry.hand_out(ctx, static, cls.pods, slots)
    turns = replay(ctx, {pod.key: n for pod, n in zip(cls.pods, handed)}, set(handed), static).turns
    assert not [key for key, turn in turns.items() if turn.outcome == NO_ROOM], [ctx.nodes[n].name for n in handed]

    plan = schedule(snapshot, CONFIG)
    assert validate(snapshot, plan, CONFIG) == []
    assert len(plan.assignments) == 4 and plan.stats.plan_from == "solver", plan.stats

"""Gang kinds: interchangeable PodGroups share one set of count variables in the CP-SAT model
(``gang.kinds`` / ``gang.merge_classes``), and ``gang decode`` hands the counts back to whole
gangs in queue order. Every plan passes the validator."""

from __future__ import annotations

from datetime import timedelta

from models.config import SchedulerConfig
from models.snapshot import POD_GROUP_LABEL
from solver.plugins.gang import decode as gang_decode
from solver.plugins.gang import permit as gang
from solver import schedule, validate
from solver.context import PodClass, build_context
from solver.cpsat import solve as cpsat
from solver.cpsat.hint import complete, counts_value, greedy_counts, greedy_hint, packing_counts
from solver.greedy import schedule_greedy
from solver.plugins.gang.encoding import NAME as GANGS
from solver.filtering import StaticFilters
from solver.scoring import ScoreContext
from tests.builders import T0, make_node, make_pod, make_pod_group, make_snapshot

CONFIG = SchedulerConfig().with_overrides(time_limit_seconds=10.0, workers=2, seed=1)


def at(minutes: int):
    return T0 + timedelta(minutes=minutes)


def gang_pods(name: str, members: int, *, cpu: str = "1", created: int = 0, **extra):
    return [make_pod(f"batch/{name}-{i}", cpu=cpu, group=name, created=at(created), **extra) for i in range(members)]


def kinds_of(snapshot):
    ctx = build_context(snapshot, CONFIG)
    gangs = gang.collect(ctx)
    return ctx, gangs, gang.kinds(ctx, gangs)


def plan_for(snapshot):
    plan = schedule(snapshot, CONFIG)
    assert validate(snapshot, plan, CONFIG) == []
    assert plan.stats.fallback is False
    return plan


def placed(plan) -> set[str]:
    return {a.pod for a in plan.assignments}


def members(name: str, count: int) -> set[str]:
    return {f"batch/{name}-{i}" for i in range(count)}


# --------------------------------------------------------------------------- which gangs share a kind


def test_two_interchangeable_gangs_share_a_kind_and_one_class():
    pods = gang_pods("a", 3, created=0) + gang_pods("b", 3, created=1)
    snap = make_snapshot([make_node("n1", cpu="8")], pods,
                         pod_groups=[make_pod_group("batch/a", 3), make_pod_group("batch/b", 3)])
    ctx, gangs, kinds = kinds_of(snap)
    assert len(ctx.classes) == 2  # the group is part of a pod's class ...
    assert [[g.key for g in k.gangs] for k in kinds] == [["batch/a", "batch/b"]]
    classes, alias = gang.merge_classes(ctx.classes, kinds)
    assert len(classes) == 1 and classes[0].size == 6  # ... but not of the model's
    assert alias == {1: 0}
    assert kinds[0].per_gang == {0: 3} and kinds[0].need == 3


def test_model_size_follows_gang_kinds_not_gangs():
    nodes = [make_node(f"n{i}", cpu="4") for i in range(10)]
    pods, groups = [], []
    for g in range(30):
        pods += gang_pods(f"g{g:02d}", 2, created=g)
        groups.append(make_pod_group(f"batch/g{g:02d}", 2))
    plan = plan_for(make_snapshot(nodes, pods, pod_groups=groups))
    assert plan.stats.pod_classes == 30
    assert plan.stats.variables <= 3 * len(nodes) + 10  # one class, one kind: not 30 classes x 10 nodes
    assert len(placed(plan)) == 40


def test_a_selector_on_the_group_label_keeps_gangs_apart():
    spread = [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchExpressions": [{"key": POD_GROUP_LABEL, "operator": "Exists"}]}}]
    pods = gang_pods("a", 2, spread=spread) + gang_pods("b", 2, created=1, spread=spread)
    snap = make_snapshot([make_node(f"n{i}", cpu="4") for i in range(2)], pods,
                         pod_groups=[make_pod_group("batch/a", 2), make_pod_group("batch/b", 2)])
    assert kinds_of(snap)[2] == []
    assert len(placed(plan_for(snap))) == 4


def test_gangs_differing_in_size_need_running_members_or_min_resources_do_not_share_a_kind():
    nodes = [make_node("n1", cpu="16")]
    running = [make_pod("batch/c-r", cpu="1", group="c", node="n1")]
    pods = (gang_pods("a", 2) + gang_pods("b", 3, created=1) + gang_pods("c", 2, created=2)
            + gang_pods("d", 2, created=3) + gang_pods("e", 2, created=4))
    groups = [make_pod_group(f"batch/{g}", 2) for g in "abcd"]
    elastic = make_pod_group("batch/e", 1)  # same members as a and d, smaller need
    snap = make_snapshot(nodes, running + pods, pod_groups=[*groups, elastic])
    _, _, kinds = kinds_of(snap)
    assert [[g.key for g in k.gangs] for k in kinds] == [["batch/a", "batch/d"]]
    d = groups[3].model_copy(update={"spec": groups[3].spec.model_copy(update={"min_resources": {"cpu": 2000}})})
    snap = make_snapshot(nodes, running + pods, pod_groups=[*groups[:3], d, elastic])
    assert kinds_of(snap)[2] == []


# --------------------------------------------------------------------------- decoding


def test_decoding_runs_the_gangs_first_in_queue_order():
    # Room for two of three identical gangs: the two created first run, as greedy would take them.
    pods = gang_pods("late", 2, created=5) + gang_pods("early", 2, created=1) + gang_pods("mid", 2, created=3)
    snap = make_snapshot([make_node(f"n{i}", cpu="1") for i in range(4)], pods,
                         pod_groups=[make_pod_group(f"batch/{g}", 2) for g in ("late", "early", "mid")])
    _, _, kinds = kinds_of(snap)
    assert [g.key for g in kinds[0].gangs] == ["batch/early", "batch/mid", "batch/late"]
    plan = plan_for(snap)
    assert placed(plan) == members("early", 2) | members("mid", 2)
    messages = {u.pod: u.message for u in plan.unschedulable}
    assert set(messages) == members("late", 2)
    assert all("Insufficient cpu" in m for m in messages.values())  # explained against the final state


def test_decode_hands_counts_round_robin_so_every_running_gang_reaches_need():
    pods = [*gang_pods("a", 3), *gang_pods("b", 3, created=1), *gang_pods("c", 3, created=2)]
    snap = make_snapshot([make_node("n1", cpu="16")], pods,
                         pod_groups=[make_pod_group(f"batch/{g}", 2) for g in "abc"])
    ctx, _, kinds = kinds_of(snap)
    gang.merge_classes(ctx.classes, kinds)
    kind = kinds[0]
    (cls,) = kind.classes
    for total, expect in [(0, []), (2, [2]), (3, [3]), (4, [2, 2]), (5, [3, 2]), (6, [3, 3]), (8, [3, 3, 2])]:
        out = gang_decode.decode(kind, {cls.id: [(0, total - total // 2), (1, total // 2)]} if total else {})
        by_gang = [sum(1 for p in g.members if p.key in out) for g in kind.gangs]
        assert [k for k in by_gang if k] == expect, total
        assert by_gang[: len(expect)] == expect  # the first gangs in queue order run


def test_decode_of_a_kind_with_two_member_signatures():
    # Each gang: one 2-CPU driver and two 1-CPU workers; minMember 3.
    def job(name, created):
        driver = [make_pod(f"batch/{name}-driver", cpu="2", group=name, created=at(created))]
        return driver + [make_pod(f"batch/{name}-w{i}", cpu="1", group=name, created=at(created)) for i in range(2)]

    pods = job("a", 0) + job("b", 1)
    snap = make_snapshot([make_node("n1", cpu="4"), make_node("n2", cpu="4")], pods,
                         pod_groups=[make_pod_group("batch/a", 3), make_pod_group("batch/b", 3)])
    ctx, _, kinds = kinds_of(snap)
    classes, _ = gang.merge_classes(ctx.classes, kinds)
    assert len(classes) == 2 and sorted(kinds[0].per_gang.values()) == [1, 2]
    plan = plan_for(snap)
    assert len(placed(plan)) == 6


# --------------------------------------------------------------------------- elastic gangs


def test_elastic_gangs_run_as_complete_as_the_room_allows():
    # Two gangs of 3 with minMember 2, 1-CPU pods. Room for 5: one runs whole, one with 2.
    # Room for 4: both run with 2 each (3 + 1 would break the second gang).
    def snap(room):
        pods = gang_pods("a", 3) + gang_pods("b", 3, created=1)
        return make_snapshot([make_node(f"n{i}", cpu="1") for i in range(room)], pods,
                             pod_groups=[make_pod_group("batch/a", 2), make_pod_group("batch/b", 2)])

    assert len(kinds_of(snap(5))[2]) == 1
    plan = plan_for(snap(5))
    assert len(placed(plan)) == 5 and members("a", 3) <= placed(plan)
    plan = plan_for(snap(4))
    assert len(placed(plan) & members("a", 3)) == 2 and len(placed(plan) & members("b", 3)) == 2
    plan = plan_for(snap(3))
    assert placed(plan) == members("a", 3)


# --------------------------------------------------------------------------- hints


def _model(snapshot):
    ctx = build_context(snapshot, CONFIG)
    static = StaticFilters(ctx.nodes, ctx.window)
    window, classes, alias = cpsat.model_classes(ctx)
    cand, ubs = cpsat.candidates(ctx, classes, static, window, True)
    weights = cpsat.tier_weights([p.priority for p in ctx.window])
    live = [c for c in classes if len(cand[c.id])]
    wm = cpsat.build_component(cpsat.BuildInput(ctx, static, cand, ubs, ScoreContext.of(ctx), weights, True, window, alias), live)
    return ctx, static, wm, weights


def _first_come_snapshot():
    # Big-pod gangs arrive first and take a node per pod; the small-pod gangs after them then
    # find no room. Packing small pods first places twice as many.
    pods, groups = [], []
    for g in range(2):
        pods += gang_pods(f"big{g}", 2, cpu="3", created=g)
        groups.append(make_pod_group(f"batch/big{g}", 2))
    for g in range(4):
        pods += gang_pods(f"small{g}", 4, cpu="1", created=10 + g)
        groups.append(make_pod_group(f"batch/small{g}", 4))
    return make_snapshot([make_node(f"n{i}", cpu="4") for i in range(4)], pods, pod_groups=groups)


def test_greedy_plan_hinted_per_kind_is_a_feasible_point_of_the_model():
    ctx, static, wm, _ = _model(_first_come_snapshot())
    assert wm.encodings[GANGS].runs  # the kinds are in the model (the gang encoder returned it)
    greedy_hint(wm, schedule_greedy(ctx, static=static), ctx)
    assert complete(wm, 10.0) is True


def test_packing_hint_places_whole_gangs_small_pods_first_and_is_feasible():
    snap = _first_come_snapshot()
    ctx, static, wm, weights = _model(snap)
    greedy = schedule_greedy(ctx, static=static)
    packed = packing_counts(wm)
    assert counts_value(wm, packed, weights) == 16 > counts_value(wm, greedy_counts(wm, greedy, ctx), weights)
    from solver.cpsat.hint import _apply

    _apply(wm, packed, set())
    assert complete(wm, 10.0) is True
    assert len(placed(plan_for(snap))) == 16


def test_merge_classes_without_kinds_leaves_classes_alone():
    classes = [PodClass(0, []), PodClass(1, [])]
    assert gang.merge_classes(classes, []) == (classes, {})


def test_a_member_left_out_of_a_gang_that_runs_is_not_called_rejected():
    from solver.api import explain

    snap = make_snapshot([make_node(f"n{i}", cpu="1") for i in range(3)], gang_pods("a", 3),
                         pod_groups=[make_pod_group("batch/a", 2)])
    ctx = build_context(snap, CONFIG)
    static = StaticFilters(ctx.nodes, ctx.window)
    left = ctx.pod("batch/a-2")
    message = explain(ctx, [left], {"batch/a-0": 0, "batch/a-1": 1}, [], static)[left.key]
    assert "gets rejected" not in message
    assert "gets rejected" in explain(ctx, [left], {"batch/a-0": 0}, [], static)[left.key]

"""A PodGroup's ``spec.minResources`` (``plugins/gang/min_resources.py``): coscheduling's PreFilter
admits a group's pods only when the cluster's free room covers it, with a pod slot per minMember.

The arithmetic on its own, then whole plans from both engines, each checked by the validator."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import pytest
import yaml

from models.config import SchedulerConfig
from models.objects import PodGroup
from models.plan import Plan
from models.snapshot import ClusterSnapshot
from solver import schedule, validate
from solver.context import build_context
from solver.plugins.gang import min_resources, permit
from tests.builders import make_node, make_pod, make_snapshot

VOLCANO = Path(__file__).resolve().parents[3] / "examples" / "snapshots" / "gangs" / "volcano.yaml"
CONFIG = SchedulerConfig.model_validate({"solver": {"timeLimitSeconds": 5, "workers": 2}})


def group(key: str, min_member: int, min_resources_: Optional[dict[str, Any]] = None, **spec: Any) -> PodGroup:
    namespace, _, name = key.rpartition("/")
    body: dict[str, Any] = {"minMember": min_member, **spec}
    if min_resources_ is not None:
        body["minResources"] = min_resources_
    return PodGroup.model_validate({"metadata": {"name": name, "namespace": namespace}, "spec": body})


def gang_pods(name: str, members: int, cpu: str, *, priority: Optional[int] = None) -> list:
    return [make_pod(f"ml/{name}-{i}", cpu=cpu, group=name, priority=priority) for i in range(members)]


def plans(snapshot: ClusterSnapshot) -> dict[str, Plan]:
    """Each engine's plan, each checked by the validator."""
    out = {engine: schedule(snapshot, CONFIG, engine=engine) for engine in ("cpsat", "greedy")}
    for engine, plan in out.items():
        assert validate(snapshot, plan, CONFIG) == [], engine
    return out


def placed(plan: Plan) -> set[str]:
    return {a.pod for a in plan.assignments}


def reasons(plan: Plan) -> dict[str, str]:
    return {u.pod: u.message for u in plan.unschedulable}


def refusal_of(snapshot: ClusterSnapshot, key: str) -> Optional[str]:
    gangs = permit.collect(build_context(snapshot, CONFIG))
    return gangs[key].refused


# -- the check on its own ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, nodes, running, spec, want",
    [
        ("no minResources: no check", [("4", 110)], [], (2, None), {}),
        ("exactly at the free room", [("4", 110), ("2", 110)], [], (2, {"cpu": "6"}), {}),
        ("one millicore short", [("4", 110), ("2", 110)], [], (2, {"cpu": "6001m"}), {"cpu": 1}),
        ("other pods' requests are not free", [("4", 110)], [("web", "3")], (1, {"cpu": "2"}), {"cpu": 1000}),
        ("the group's running members count as free", [("4", 110)], [("ml/g-run", "3")], (2, {"cpu": "4"}), {}),
        ("a pod slot per minMember", [("8", 2)], [], (3, {"cpu": "1"}), {"pods": 1}),
        ("minResources' own pods entry is replaced by minMember", [("8", 2)], [], (2, {"pods": "5"}), {}),
        ("a resource no node has", [("8", 110)], [], (1, {"nvidia.com/gpu": "2"}), {"nvidia.com/gpu": 2}),
        ("a node over its allocatable adds no negative room", [("1", 110), ("4", 110)], [("web", "2")],
         (1, {"cpu": "4"}), {}),
    ],
)
def test_gap(name: str, nodes: list, running: list, spec: tuple, want: dict) -> None:
    node_objs = [make_node(f"n{i}", cpu=cpu, pods=slots) for i, (cpu, slots) in enumerate(nodes)]
    bound = [make_pod(key if "/" in key else f"default/{key}", cpu=cpu, node="n0",
                      group="g" if key.startswith("ml/g") else None) for key, cpu in running]
    snapshot = make_snapshot(node_objs, [*bound, make_pod("ml/g-0", cpu="100m", group="g")],
                             pod_groups=[group("ml/g", spec[0], spec[1])])
    ctx = build_context(snapshot, CONFIG)
    gang = permit.collect(ctx)["ml/g"]
    assert min_resources.gap(gang.group, ctx.state, gang.own) == want, name


def test_the_message_names_the_group_and_every_short_resource() -> None:
    assert min_resources.short_of_room("ml/g", {"memory": 2 * 2**30, "cpu": 1500}) == (
        "PodGroup ml/g is not admitted: the cluster's free resources fall short of its minResources "
        "(with a pod slot per minMember) by cpu 1500m, memory 2Gi (resource gap)"
    )


# -- plans -----------------------------------------------------------------------------------------


def test_a_gang_whose_min_resources_exceed_the_free_room_places_nothing() -> None:
    nodes = [make_node(f"n{i}", cpu="4") for i in range(2)]
    snapshot = make_snapshot(nodes, [make_pod("default/web", cpu="2", node="n0"), *gang_pods("g", 2, "1")],
                             pod_groups=[group("ml/g", 2, {"cpu": "7"})])
    message = ("0/2 nodes are available: PodGroup ml/g is not admitted: the cluster's free resources fall "
               "short of its minResources (with a pod slot per minMember) by cpu 1 (resource gap).")
    for engine, plan in plans(snapshot).items():
        assert placed(plan) == set(), engine
        assert reasons(plan) == {"ml/g-0": message, "ml/g-1": message}, engine


def test_a_gang_whose_min_resources_fit_places_normally() -> None:
    nodes = [make_node(f"n{i}", cpu="4") for i in range(2)]
    snapshot = make_snapshot(nodes, [make_pod("default/web", cpu="2", node="n0"), *gang_pods("g", 2, "1")],
                             pod_groups=[group("ml/g", 2, {"cpu": "6", "memory": "1Gi"})])
    for engine, plan in plans(snapshot).items():
        assert placed(plan) == {"ml/g-0", "ml/g-1"}, engine


def test_victims_are_not_counted_as_room_no_preemption_for_min_resources() -> None:
    nodes = [make_node(f"n{i}", cpu="4") for i in range(2)]
    low = [make_pod(f"default/low-{i}", cpu="3", node=f"n{i}", priority=0) for i in range(2)]
    gang = gang_pods("g", 2, "2", priority=1000)
    base = make_snapshot(nodes, [*low, *gang], pod_groups=[group("ml/g", 2)])
    for engine, plan in plans(base).items():  # without minResources, preemption makes room
        assert placed(plan) == {"ml/g-0", "ml/g-1"} and plan.preemptions, engine
    gated = make_snapshot(nodes, [*low, *gang], pod_groups=[group("ml/g", 2, {"cpu": "4"})])
    for engine, plan in plans(gated).items():
        assert placed(plan) == set() and plan.preemptions == (), engine
        assert "short of its minResources (with a pod slot per minMember) by cpu 2 " in reasons(plan)["ml/g-0"]


def test_two_gangs_the_room_admits_one_of() -> None:
    """Each gang alone fits the free room, not both: whichever comes first takes room the
    other's minResources needs. Both engines place one whole gang; greedy the first in queue."""
    nodes = [make_node(f"n{i}", cpu="4") for i in range(2)]
    pods = [*gang_pods("a", 2, "2"), *gang_pods("b", 2, "2")]
    snapshot = make_snapshot(nodes, pods, pod_groups=[group("ml/a", 2, {"cpu": "6"}), group("ml/b", 2, {"cpu": "6"})])
    results = plans(snapshot)
    for engine, plan in results.items():
        assert len(placed(plan)) == 2 and len({p.rsplit("-", 1)[0] for p in placed(plan)}) == 1, engine
    greedy = results["greedy"]
    assert placed(greedy) == {"ml/a-0", "ml/a-1"}
    assert "PodGroup ml/b is not admitted" in reasons(greedy)["ml/b-0"]
    assert "by cpu 2 (resource gap)" in reasons(greedy)["ml/b-0"]
    # The gang the model leaves out is told the same: the room the plan leaves misses its need.
    cpsat = results["cpsat"]
    left_out = ({"ml/a-0", "ml/a-1", "ml/b-0", "ml/b-1"} - placed(cpsat)).pop()
    assert "is not admitted: the cluster's free resources fall short" in reasons(cpsat)[left_out]


def test_the_model_admits_gated_gangs_in_an_order_that_works() -> None:
    """a needs little room and comes first; b needs 7 of the 8 CPU. In queue order b would be
    refused after a; the model takes only gangs some order admits: a and then b does not work
    (8 − 2 < 7), b and then a does (8 ≥ 7, 8 − 4 ≥ 1), but the model orders the gated gangs by
    queue, so it places one gang, as greedy does."""
    nodes = [make_node(f"n{i}", cpu="4") for i in range(2)]
    pods = [*gang_pods("a", 2, "1"), *gang_pods("b", 2, "2")]
    snapshot = make_snapshot(nodes, pods, pod_groups=[group("ml/a", 2, {"cpu": "1"}), group("ml/b", 2, {"cpu": "7"})])
    for engine, plan in plans(snapshot).items():
        assert len({p.rsplit("-", 1)[0] for p in placed(plan)}) == 1, engine


def test_interchangeable_gated_gangs_one_kind_admit_as_many_as_the_room_orders() -> None:
    """Three identical gangs (one kind in the model), each asking for 5 CPU free with 2 members
    of 1 CPU, on 8 CPU: the first sees 8, the second 6, the third 4 < 5: two run."""
    nodes = [make_node(f"n{i}", cpu="4") for i in range(2)]
    pods = [p for name in "abc" for p in gang_pods(name, 2, "1")]
    snapshot = make_snapshot(nodes, pods, pod_groups=[group(f"ml/{n}", 2, {"cpu": "5"}) for n in "abc"])
    results = plans(snapshot)
    for engine, plan in results.items():
        assert len(placed(plan)) == 4, engine
    assert placed(results["greedy"]) == {"ml/a-0", "ml/a-1", "ml/b-0", "ml/b-1"}


def test_greedy_counts_the_window_placements_before_the_gang_the_model_orders_it_first() -> None:
    """Greedy asks at the gang's turn, after a higher-priority pod took room. The joint model
    takes gated gangs ahead of every other pod (an order that admits the gang, then places the
    pod), so it places both: a plan some order of admissions allows."""
    nodes = [make_node(f"n{i}", cpu="4") for i in range(2)]
    snapshot = make_snapshot(nodes, [make_pod("default/big", cpu="3", priority=10), *gang_pods("g", 2, "1")],
                             pod_groups=[group("ml/g", 2, {"cpu": "6"})])
    assert refusal_of(snapshot, "ml/g") is None  # the window's start: 8 cpu free
    results = plans(snapshot)
    assert placed(results["greedy"]) == {"default/big"}
    assert "by cpu 1 (resource gap)" in reasons(results["greedy"])["ml/g-0"]
    assert placed(results["cpsat"]) == {"default/big", "ml/g-0", "ml/g-1"}


def test_schedule_timeout_is_read_and_changes_nothing() -> None:
    nodes = [make_node("n0", cpu="4")]
    pods = gang_pods("g", 2, "1")
    with_timeout = make_snapshot(nodes, pods, pod_groups=[group("ml/g", 2, scheduleTimeoutSeconds=5)])
    assert with_timeout.pod_groups[0].spec.schedule_timeout_seconds == 5
    for engine, plan in plans(with_timeout).items():
        assert placed(plan) == {"ml/g-0", "ml/g-1"}, engine


def test_volcano_min_resources_is_enforced_the_same_way(tmp_path: Path) -> None:
    """The bundled Volcano example (4 nodes of 4 CPU) with eval asking for 17 CPU free: eval is
    refused before any node is tried, and train, which lost to eval before, places whole."""
    from adapters.snapshot_io import read_snapshot

    doc = yaml.safe_load(VOLCANO.read_text())
    for item in doc["items"]:
        if item["kind"] == "PodGroup" and item["metadata"]["name"] == "eval":
            item["spec"]["minResources"] = {"cpu": "17", "memory": "1Gi"}
    path = tmp_path / "volcano.json"
    path.write_text(json.dumps(doc))
    snapshot = read_snapshot(path).snapshot
    for engine, plan in plans(snapshot).items():
        assert {p.split("-")[0] for p in placed(plan)} == {"ml/train"}, engine
        assert "PodGroup ml/eval is not admitted" in reasons(plan)["ml/eval-0"], engine
        assert "by cpu 1 (resource gap)" in reasons(plan)["ml/eval-0"], engine


def admitting_order_holds(snapshot: ClusterSnapshot, plan: Plan) -> bool:
    """Whether the gated gangs a plan runs are each admitted when taken in queue order before
    every other pod: the order the model's encoding promises exists."""
    ctx = build_context(snapshot, CONFIG)
    gangs = permit.collect(ctx)
    where = {a.pod: ctx.state.node_index[a.node] for a in plan.assignments}
    state = ctx.state.copy()
    for key, gang in gangs.items():  # queue order
        members = [p for p in gang.members if p.key in where]
        if gang.group is None or not min_resources.needed(gang.group) or not members:
            continue
        if min_resources.gap(gang.group, state, gang.own):
            return False
        for pod in members:
            state.add(pod, where[pod.key])
    return True


@pytest.mark.parametrize("seed", [*range(12), 41, 54])  # 41, 54: the window-start check alone breaks the order
def test_random_gated_gangs_both_engines_valid_and_admissible(seed: int) -> None:
    """Small random clusters with two to four gangs, most setting minResources: both plans valid,
    and every gated gang they run admitted in some order (``admitting_order_holds``)."""
    import random

    rng = random.Random(seed)
    nodes = [make_node(f"n{i}", cpu=str(rng.choice([2, 4, 8]))) for i in range(rng.randint(2, 5))]
    pods: list = [make_pod(f"default/run-{i}", cpu=f"{rng.randint(1, 3) * 500}m", node=nodes[i % len(nodes)].name)
                  for i in range(rng.randint(0, 3))]
    groups = []
    for g in range(rng.randint(2, 4)):
        size = rng.randint(1, 3)
        cpu = rng.choice(["500m", "1", "2"])
        pods += gang_pods(f"g{g}", size, cpu, priority=rng.choice([None, 10]))
        asks = None if rng.random() < 0.2 else {"cpu": f"{rng.randint(1, 12)}"}
        groups.append(group(f"ml/g{g}", size, asks))
    pods += [make_pod(f"default/p{i}", cpu="1") for i in range(rng.randint(0, 3))]
    snapshot = make_snapshot(nodes, pods, pod_groups=groups)
    for engine, plan in plans(snapshot).items():
        # Greedy's own order admits no more than this one, but for room its preemption freed.
        assert admitting_order_holds(snapshot, plan) or (engine == "greedy" and plan.preemptions), engine

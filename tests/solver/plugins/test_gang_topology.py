"""Required gang topology (``plugins/gang/topology.py``): a PodGroup whose
``spec.schedulingConstraints.topology`` names a node label puts every member in one domain of it.

Both engines, the validator and the messages, on racks of small nodes."""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Optional

import numpy as np
import pytest
import yaml

from adapters.cli import main
from adapters.snapshot_io import read_snapshot
from models.config import SchedulerConfig
from models.plan import Assignment, Plan, PlanStats, Unschedulable
from models.snapshot import ClusterSnapshot
from solver import schedule, validate
from solver.context import build_context
from solver.plugins.gang import permit, topology
from tests.builders import make_node, make_pod, make_pod_group, make_snapshot

RACK = "example.com/rack"
CONFIG = SchedulerConfig.model_validate({"solver": {"timeLimitSeconds": 5, "workers": 2}})
EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "snapshots" / "gangs" / "topology-rack.yaml"
T0 = datetime(2026, 3, 1, 10, tzinfo=timezone.utc)


def racks(*sizes: int, cpu: str = "8", unlabelled: int = 0) -> list:
    """Racks ``r0``, ``r1``, ... of ``sizes[i]`` nodes each (``n-r0-0``, ...), and ``unlabelled``
    nodes without the rack label (``n-x-0``, ...)."""
    nodes = [make_node(f"n-r{r}-{i}", cpu=cpu, memory="32Gi", labels={RACK: f"r{r}"})
             for r, size in enumerate(sizes) for i in range(size)]
    return nodes + [make_node(f"n-x-{i}", cpu=cpu, memory="32Gi") for i in range(unlabelled)]


class Gangs:
    """Gangs with rack topology, built in queue order (each pod created after the one before)."""

    def __init__(self) -> None:
        self.pods: list = []
        self.groups: list = []

    def gang(self, name: str, members: int, cpu: str, *, min_member: Optional[int] = None,
             running_on: tuple[str, ...] = (), key: Optional[str] = RACK, priority: Optional[int] = None) -> "Gangs":
        self.groups.append(make_pod_group(f"ml/{name}", min_member or members, topology_key=key))
        for i, node in enumerate(running_on):
            self.pods.append(make_pod(f"ml/{name}-run-{i}", cpu=cpu, node=node, group=name, priority=priority))
        for i in range(members):
            created = T0 + timedelta(seconds=len(self.pods))
            self.pods.append(make_pod(f"ml/{name}-{i}", cpu=cpu, group=name, created=created, priority=priority))
        return self

    def snapshot(self, nodes: list, extra_pods: tuple = ()) -> ClusterSnapshot:
        return make_snapshot(nodes, [*self.pods, *extra_pods], pod_groups=self.groups)


def placed(plan: Plan) -> dict[str, str]:
    return {a.pod: a.node for a in plan.assignments}


def gangs_placed(plan: Plan) -> set[str]:
    return {a.pod.split("/")[1].rsplit("-", 1)[0] for a in plan.assignments}


def rack_of(node: str) -> str:
    return node.split("-")[1]


def both(snapshot: ClusterSnapshot) -> dict[str, Plan]:
    """Each engine's plan, each checked by the validator."""
    plans = {engine: schedule(snapshot, CONFIG, engine=engine) for engine in ("cpsat", "greedy")}
    for engine, plan in plans.items():
        assert validate(snapshot, plan, CONFIG) == [], engine
    return plans


def contended() -> ClusterSnapshot:
    """The example's window: prep (2 x 4 CPU) first, then three gangs of two whole nodes, on two
    racks of three 8-CPU nodes."""
    g = Gangs().gang("prep", 2, "4")
    for name in ("train-a", "train-b", "train-c"):
        g.gang(name, 2, "8")
    return g.snapshot(racks(3, 3))


# -- (a) a contended window: greedy fragments racks, the joint model does not ---------------------


def test_greedy_fragments_a_rack_and_the_joint_placement_packs_one_more_gang() -> None:
    plans = both(contended())
    assert gangs_placed(plans["greedy"]) == {"prep", "train-a"}
    assert len(gangs_placed(plans["cpsat"])) == 3 and "prep" in gangs_placed(plans["cpsat"])
    assert len(plans["cpsat"].assignments) == 6 and len(plans["greedy"].assignments) == 4


def test_many_racks_cpsat_places_strictly_more_gangs() -> None:
    """Four racks, four small gangs ahead of eight whole-node gangs: greedy packs each small gang
    by fullness but spreads it inside its rack, so every rack it touches loses a whole node."""
    g = Gangs()
    for i in range(2):
        g.gang(f"prep{i}", 2, "4")
    for i in range(6):
        g.gang(f"train{i}", 2, "8")
    plans = both(g.snapshot(racks(3, 3, 3, 3)))
    assert len(gangs_placed(plans["cpsat"])) > len(gangs_placed(plans["greedy"]))


def test_the_bundled_example_places_three_gangs_each_in_one_rack(capsys) -> None:
    assert main(["schedule", str(EXAMPLE), "-o", "json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    nodes = {a["pod"]: a["node"] for a in plan["assignments"]}
    gangs: dict[str, set[str]] = {}
    for pod, node in nodes.items():
        gangs.setdefault(pod.split("/")[1].rsplit("-", 1)[0], set()).add(node[len("node-")])  # node-a0: rack-a
    assert len(gangs) == 3 and all(len(r) == 1 for r in gangs.values())
    left = {u["pod"]: u["message"] for u in plan["unschedulable"]}
    assert len(left) == 2
    for message in left.values():
        assert "no single example.com/rack domain has room for the 2 member(s)" in message
    snapshot = read_snapshot(EXAMPLE).snapshot
    assert snapshot.pod_group_by_key["ml/prep"].spec.topology_key == RACK


# -- (b) the validator ----------------------------------------------------------------------------


def plan_of(snapshot: ClusterSnapshot, assign: dict[str, str]) -> Plan:
    left = [p.key for p in snapshot.pending_pods() if p.key not in assign]
    return Plan(assignments=tuple(Assignment(pod=p, node=n) for p, n in assign.items()),
                unschedulable=tuple(Unschedulable(pod=p, message="test") for p in left),
                stats=PlanStats(engine="test", status="TEST"))


def test_validator_rejects_a_gang_split_across_racks() -> None:
    snapshot = Gangs().gang("g", 2, "4").snapshot(racks(1, 1))
    assert validate(snapshot, plan_of(snapshot, {"ml/g-0": "n-r0-0", "ml/g-1": "n-r0-0"}), CONFIG) == []
    problems = validate(snapshot, plan_of(snapshot, {"ml/g-0": "n-r0-0", "ml/g-1": "n-r1-0"}), CONFIG)
    assert problems == [
        "gang topology: PodGroup ml/g needs every member in one example.com/rack domain, "
        "but its members span 2 domains: r0, r1"
    ]


def test_validator_rejects_a_member_on_a_node_without_the_label() -> None:
    snapshot = Gangs().gang("g", 2, "4").snapshot(racks(1, unlabelled=1))
    problems = validate(snapshot, plan_of(snapshot, {"ml/g-0": "n-r0-0", "ml/g-1": "n-x-0"}), CONFIG)
    assert problems == [
        "gang topology: PodGroup ml/g needs every member in one example.com/rack domain, but "
        "ml/g-1 run(s) on node(s) without the example.com/rack label (domains seen: r0)"
    ]


def test_validator_counts_running_members() -> None:
    snapshot = Gangs().gang("g", 1, "4", min_member=2, running_on=("n-r1-0",)).snapshot(racks(1, 1))
    problems = validate(snapshot, plan_of(snapshot, {"ml/g-0": "n-r0-0"}), CONFIG)
    assert len(problems) == 1 and "span 2 domains: r0, r1" in problems[0]
    assert validate(snapshot, plan_of(snapshot, {"ml/g-0": "n-r1-0"}), CONFIG) == []


# -- (c) running members pin the domain ------------------------------------------------------------


def test_running_members_pin_the_domain_though_another_rack_is_emptier() -> None:
    snapshot = Gangs().gang("g", 2, "2", min_member=3, running_on=("n-r1-0",)).snapshot(racks(2, 2))
    for engine, plan in both(snapshot).items():
        assert {rack_of(n) for n in placed(plan).values()} == {"r1"}, engine
        assert len(plan.assignments) == 2, engine


def test_a_full_pinned_rack_places_nothing_and_says_why() -> None:
    hog = make_pod("other/hog", cpu="7", node="n-r1-0")
    g = Gangs().gang("g", 2, "2", min_member=3, running_on=("n-r1-0",))
    snapshot = g.snapshot(racks(3, 1), extra_pods=(hog,))  # hog + running member fill rack r1
    for engine, plan in both(snapshot).items():
        assert plan.assignments == (), engine
        for u in plan.unschedulable:
            assert "no single example.com/rack domain has room for the 2 member(s)" in u.message, (engine, u)


def test_running_members_in_two_domains_leave_no_domain() -> None:
    g = Gangs().gang("g", 1, "1", min_member=3, running_on=("n-r0-0", "n-r1-0"))
    for engine, plan in both(g.snapshot(racks(1, 1))).items():
        assert plan.assignments == (), engine


# -- nodes without the label, kinds, the encoding's choice -----------------------------------------


def test_nodes_without_the_label_never_host_members() -> None:
    snapshot = Gangs().gang("g", 3, "4").snapshot(racks(1, unlabelled=4))  # only the unlabelled fit 3
    for engine, plan in both(snapshot).items():
        assert plan.assignments == (), engine
    snapshot = Gangs().gang("g", 2, "4").snapshot(racks(1, unlabelled=4))
    for engine, plan in both(snapshot).items():
        assert set(placed(plan).values()) == {"n-r0-0"}, engine


def test_interchangeable_topology_gangs_share_a_kind_counted_per_domain() -> None:
    g = Gangs().gang("a", 2, "8").gang("b", 2, "8")
    snapshot = g.snapshot(racks(2, 2))
    ctx = build_context(snapshot, CONFIG)
    [kind] = permit.kinds(ctx, permit.collect(ctx))
    assert kind.topology_key == RACK and [gang.key for gang in kind.gangs] == ["ml/a", "ml/b"]
    untied = Gangs().gang("a", 2, "8", key=None).gang("b", 2, "8", key=None).snapshot(racks(2, 2))
    ctx = build_context(untied, CONFIG)
    [kind] = permit.kinds(ctx, permit.collect(ctx))
    assert kind.topology_key is None  # the same gangs without topology merge into a plain kind
    for engine, plan in both(snapshot).items():
        racks_of = {name: {rack_of(n) for p, n in placed(plan).items() if p.startswith(f"ml/{name}-")}
                    for name in ("a", "b")}
        assert racks_of["a"] and racks_of["b"] and racks_of["a"] != racks_of["b"], engine
        assert all(len(r) == 1 for r in racks_of.values()), engine


def test_a_gang_with_a_running_member_keeps_its_own_domain_choice() -> None:
    g = Gangs().gang("a", 2, "8").gang("b", 2, "8").gang("c", 1, "8", min_member=2, running_on=("n-r1-0",))
    ctx = build_context(g.snapshot(racks(2, 2)), CONFIG)
    [kind] = permit.kinds(ctx, permit.collect(ctx))
    assert [gang.key for gang in kind.gangs] == ["ml/a", "ml/b"]


def test_a_kind_of_many_topology_gangs_lands_each_gang_in_one_rack() -> None:
    # Eight gangs of three 3-CPU members on four racks of three 8-CPU nodes: a rack holds two
    # gangs (six members, two a node), so the joint plan runs all eight, each in one rack.
    g = Gangs()
    for i in range(8):
        g.gang(f"g{i}", 3, "3")
    snapshot = g.snapshot(racks(3, 3, 3, 3))
    ctx = build_context(snapshot, CONFIG)
    [kind] = permit.kinds(ctx, permit.collect(ctx))
    assert len(kind.gangs) == 8
    plan = both(snapshot)["cpsat"]
    per_gang = {f"g{i}": {rack_of(n) for p, n in placed(plan).items() if p.startswith(f"ml/g{i}-")} for i in range(8)}
    assert all(len(r) == 1 for r in per_gang.values()), per_gang
    assert len(plan.assignments) == 24


def test_allocation_ratio_and_candidate_domains() -> None:
    snapshot = Gangs().gang("g", 1, "4", min_member=2, running_on=("n-r1-0",)).snapshot(racks(2, 2))
    ctx = build_context(snapshot, CONFIG)
    gang = permit.collect(ctx)["ml/g"]
    ids, values = ctx.state.domains(RACK)
    assert [values[d] for d in topology.candidate_domains(gang, ctx.state, RACK)] == ["r1"]
    r1 = [i for i, v in enumerate(ids.tolist()) if values[v] == "r1"]
    assert topology.allocation_ratio(ctx.state, np.array(r1)) > topology.allocation_ratio(ctx.state, np.array([0, 1]))


# -- (d) greedy's plans are always valid (and the joint plan never places fewer pods) --------------


def random_window(rng: random.Random) -> ClusterSnapshot:
    sizes = [rng.randint(1, 3) for _ in range(rng.randint(1, 3))]
    nodes = racks(*sizes, cpu=str(rng.choice([4, 8])), unlabelled=rng.randint(0, 1))
    names = [n.metadata.name for n in nodes]
    g = Gangs()
    for i in range(rng.randint(1, 4)):
        members = rng.randint(1, 3)
        running = tuple(rng.choice(names) for _ in range(rng.choice([0, 0, 1])))
        g.gang(f"g{i}", members, rng.choice(["1", "2", "4"]), min_member=rng.randint(1, members + len(running)),
               running_on=running, key=rng.choice([RACK, RACK, None]), priority=rng.choice([None, 100]))
    low = [make_pod(f"other/low-{i}", cpu="2", node=rng.choice(names), priority=0) for i in range(rng.randint(0, 3))]
    return g.snapshot(nodes, extra_pods=tuple(low))


@pytest.mark.parametrize("seed", range(25))
def test_random_windows_give_valid_plans_from_both_engines(seed: int) -> None:
    snapshot = random_window(random.Random(seed))
    plans = both(snapshot)
    assert len(plans["cpsat"].assignments) >= len(plans["greedy"].assignments) or plans["cpsat"].preemptions


# -- (e) bad input ----------------------------------------------------------------------------------


def test_two_topology_keys_exit_2_naming_the_field(tmp_path: Path, capsys) -> None:
    doc = yaml.safe_load(EXAMPLE.read_text())
    group = next(i for i in doc["items"] if i["kind"] == "PodGroup")
    group["spec"]["schedulingConstraints"]["topology"].append({"key": "example.com/block"})
    path = tmp_path / "two-keys.json"
    path.write_text(json.dumps(doc))
    assert main(["schedule", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("cpsat-scheduler: error: podgroups/ml/prep: spec.schedulingConstraints.topology: "
                             "takes at most 1 items"), err


def test_an_empty_key_exits_2(tmp_path: Path, capsys) -> None:
    doc = yaml.safe_load(EXAMPLE.read_text())
    next(i for i in doc["items"] if i["kind"] == "PodGroup")["spec"]["schedulingConstraints"]["topology"] = [{"key": ""}]
    path = tmp_path / "empty-key.json"
    path.write_text(json.dumps(doc))
    assert main(["schedule", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "spec.schedulingConstraints.topology[0].key" in err[0]


def test_other_shapes_never_read_a_topology_key() -> None:
    """The key is internal: a scheduler-plugins PodGroup's stray ``topologyKey`` is ignored."""
    from models.objects import PodGroup
    group = PodGroup.model_validate({"metadata": {"name": "g", "namespace": "ml"},
                                     "spec": {"minMember": 2, "topologyKey": RACK}})
    assert group.spec.topology_key is None
    assert "topology" not in json.dumps(group.spec.model_dump(mode="json", by_alias=True)).lower()


# -- re-packing keeps a running topology gang in its domain ----------------------------------------


@pytest.mark.parametrize(("web_kind", "freed"), [("ReplicaSet", ["n-r1-0"]), (None, [])], ids=["web-moves", "web-pinned"])
def test_repack_keeps_a_topology_gang_in_the_rack_it_shares(web_kind, freed) -> None:
    """g's members run in rack r0 (4 and 5 CPU on two 8-CPU nodes: they cannot share one); r1's
    one node has 5 CPU free beside a 3-CPU web pod. Moving the 5-CPU member to r1 would free a
    node but split the gang: re-packing moves web into r0 instead, or, with web a bare pod that
    cannot move, frees nothing (before, the greedy drain's split was taken as the plan and
    failed its replay)."""
    from solver.repack import plan_repack
    from tests.solver.test_repack import FAST, final_nodes, replay_ok, workload

    nodes = [make_node(f"n-r0-{i}", cpu="8", memory="32Gi", labels={RACK: "r0"}) for i in range(2)]
    nodes.append(make_node("n-r1-0", cpu="8", memory="32Gi", labels={RACK: "r1"}))
    pods = [workload("ml/g-0", "n-r0-0", cpu="4", kind="Job", owner="g", group="g"),
            workload("ml/g-1", "n-r0-1", cpu="5", kind="Job", owner="g", group="g"),
            workload("default/web-0", "n-r1-0", cpu="3", kind=web_kind)]
    snapshot = make_snapshot(nodes, pods, pod_groups=[make_pod_group("ml/g", 2, topology_key=RACK)])
    result = plan_repack(snapshot, options=FAST)
    moved = final_nodes(result)
    assert all(rack_of(moved.get(p, "n-r0-x")) == "r0" for p in ("ml/g-0", "ml/g-1"))
    assert result.freed_nodes == freed
    replay_ok(snapshot, result)


# -- (e) a kind counted per domain decides as the gangs modelled one by one -------------------------


def kinds_window(rng: random.Random) -> ClusterSnapshot:
    """Racks of small nodes and a few gang shapes, each repeated (so gangs merge into kinds), each
    shape with a required rack, a preferred rack, or neither; a plain pod or two beside them."""
    nodes = racks(*[rng.randint(1, 3) for _ in range(rng.randint(2, 4))], cpu=str(rng.choice([4, 8])))
    pods, groups = [], []
    at = 0
    for s in range(rng.randint(1, 3)):
        members, cpu = rng.randint(1, 3), rng.choice(["1", "2", "3"])
        need = rng.randint(1, members)
        how = rng.choice(["rack", "rack", "preferred", None])
        for r in range(rng.randint(2, 4)):
            name = f"s{s}r{r}"
            groups.append(make_pod_group(f"ml/{name}", need, topology_key=RACK if how == "rack" else None,
                                         preferred=RACK if how == "preferred" else None))
            for i in range(members):
                pods.append(make_pod(f"ml/{name}-{i}", cpu=cpu, group=name, created=T0 + timedelta(seconds=at)))
                at += 1
    for i in range(rng.randint(0, 2)):
        pods.append(make_pod(f"ml/plain-{i}", cpu=rng.choice(["1", "2"]), created=T0 + timedelta(seconds=at + i)))
    return make_snapshot(nodes, pods, pod_groups=groups)


@pytest.mark.parametrize("seed", range(25))
def test_a_kind_places_as_many_pods_as_its_gangs_one_by_one(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    snapshot = kinds_window(random.Random(seed))
    config = CONFIG.with_overrides(seed=1, workers=1)
    merged = schedule(snapshot, config, engine="cpsat")
    assert validate(snapshot, merged, config) == []
    ctx = build_context(snapshot, config)
    assert permit.kinds(ctx, permit.collect(ctx))  # the window does have kinds
    with monkeypatch.context() as m:
        m.setattr(permit, "kinds", lambda ctx, gangs: [])
        apart = schedule(snapshot, config, engine="cpsat")
    assert validate(snapshot, apart, config) == []
    if merged.stats.status == apart.stats.status == "OPTIMAL":
        assert len(merged.assignments) == len(apart.assignments)
    for plan in (merged, apart):
        for group in {a.pod.rsplit("-", 1)[0] for a in plan.assignments if not a.pod.startswith("ml/plain")}:
            pg = next(g for g in snapshot.pod_groups if g.key == group)
            if pg.spec.topology_key is not None:
                assert len({rack_of(a.node) for a in plan.assignments if a.pod.rsplit("-", 1)[0] == group}) == 1

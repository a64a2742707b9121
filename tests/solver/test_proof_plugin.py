"""The proof that a new rule is one package and one registry line: CrewRack (``tests/proof_plugin``,
a crew's pods share one rack) is registered from here and nowhere else, and greedy, the CP-SAT
model, the validator and re-packing follow it. Each test also runs without it, to show the rule
is what changed the answer (the live binder's part is ``tests/adapters/test_live_proof_plugin.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from models import SchedulerConfig
from models.objects import OwnerReference, Pod
from solver.api import schedule
from solver.context import build_context
from solver.plugins import registry
from solver.repack import RepackOptions, plan_repack
from solver.validate import validate
from tests.builders import make_node, make_pod, make_snapshot
from tests.proof_plugin import PLUGIN
from tests.proof_plugin.rule import CREW, NAME, RACK

ENGINES = ("greedy", "cpsat")


@pytest.fixture
def crew_rack() -> Iterator[None]:
    with registry.registered(PLUGIN):  # the one line a new plugin needs
        yield


def crew_pod(key: str, crew: str, *, cpu: str = "1", node: str | None = None, owned: bool = False) -> Pod:
    pod = make_pod(key, cpu=cpu, memory="1Gi", node=node, scheduler="default-scheduler" if node else "cpsat-scheduler")
    refs = [OwnerReference(kind="ReplicaSet", name="crew-rs", controller=True)] if owned else []
    meta = pod.metadata.model_copy(update={"annotations": {CREW: crew} if crew else {}, "owner_references": refs})
    return pod.model_copy(update={"metadata": meta})


def rack_node(name: str, rack: str | None, cpu: str) -> object:
    return make_node(name, cpu=cpu, memory="64Gi", labels={RACK: rack} if rack else {})


def racks_of(snapshot, placements: dict[str, str]) -> set[str]:
    labels = {n.metadata.name: n.metadata.labels for n in snapshot.nodes}
    return {labels[node].get(RACK, "") for node in placements.values()}


def _three_racks():
    """r1 holds two of the crew's pods, r2 all three, the big node without a rack would take them
    all by score: the crew can only go to r2."""
    nodes = [rack_node("r1-a", "r1", "2"), rack_node("r2-a", "r2", "3"), rack_node("r2-b", "r2", "3"),
             rack_node("free", None, "16")]
    pods = [crew_pod(f"default/db-{i}", "db", cpu="1") for i in range(3)]
    return make_snapshot(nodes, pods)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_crew_lands_on_one_rack_in_both_engines_and_the_validator_accepts_it(crew_rack, engine) -> None:
    snapshot = _three_racks()
    plan = schedule(snapshot, SchedulerConfig(), engine=engine)
    placed = {a.pod: a.node for a in plan.assignments}
    assert sorted(placed) == ["default/db-0", "default/db-1", "default/db-2"]
    assert racks_of(snapshot, placed) == {"r2"}
    assert validate(snapshot, plan, SchedulerConfig()) == []


@pytest.mark.parametrize("engine", ENGINES)
def test_without_the_plugin_the_crew_spreads_and_the_plugins_check_says_so(engine) -> None:
    snapshot = _three_racks()
    plan = schedule(snapshot, SchedulerConfig(), engine=engine)
    placed = {a.pod: a.node for a in plan.assignments}
    assert racks_of(snapshot, placed) != {"r2"}  # the big node without a rack scores best
    with registry.registered(PLUGIN):
        problems = validate(snapshot, plan, SchedulerConfig())
    assert problems and all(line.startswith(f"{NAME}: crew default/db runs on racks") for line in problems)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_running_member_keeps_its_crew_on_its_rack(crew_rack, engine) -> None:
    nodes = [rack_node("r1-a", "r1", "8"), rack_node("r2-a", "r2", "2")]
    pods = [crew_pod("default/db-0", "db", node="r2-a"), crew_pod("default/db-1", "db"),
            crew_pod("default/db-2", "db")]
    snapshot = make_snapshot(nodes, pods)
    plan = schedule(snapshot, SchedulerConfig(), engine=engine)
    placed = {a.pod: a.node for a in plan.assignments}
    assert placed == {"default/db-1": "r2-a"}  # r2-a has room for one more; r1 is another rack
    why = {u.pod: u.message for u in plan.unschedulable}
    assert "1 node(s) were in another rack than the pod's crew" in why["default/db-2"], why
    assert validate(snapshot, plan, SchedulerConfig()) == []


def test_the_annotation_the_plugin_reads_is_part_of_a_pods_class(crew_rack) -> None:
    """Two pods alike but for their crew annotation never share a class (``Reads.signature``)."""
    nodes = [rack_node("r1-a", "r1", "8")]
    pods = [crew_pod("default/a", "one"), crew_pod("default/b", "two"), crew_pod("default/c", "one")]
    ctx = build_context(make_snapshot(nodes, pods), SchedulerConfig())
    classes = sorted(sorted(p.key for p in cls.pods) for cls in ctx.classes)
    assert classes == [["default/a", "default/c"], ["default/b"]]


def test_the_registry_derives_the_plugins_facts_and_forgets_them_when_it_leaves() -> None:
    from solver.plugin_api import Coupling
    from tests.builders import pod_info

    pod = pod_info(crew_pod("default/a", "one"))
    assert registry.coupling(pod) is Coupling.NONE and registry.node_label_keys(pod) == set()
    with registry.registered(PLUGIN):
        assert registry.coupling(pod) is Coupling.DOMAIN
        assert registry.node_label_keys(pod) == {RACK}
        assert registry.topology_keys(pod) == {RACK}
        assert registry.signature(pod) == ("default/one",)
        assert PLUGIN.checks[0] in registry.FINAL_CHECKS and PLUGIN.cycle in registry.CYCLE_FILTERS
    assert PLUGIN not in registry.PLUGINS and PLUGIN.cycle not in registry.CYCLE_FILTERS


def _repack_scene():
    """The crew (two pods, 3 cpu each) runs on r1-b; r1-a is full and r2-a, whose pod cannot move
    (no controller), has room for both: only moving the crew to another rack frees a node."""
    nodes = [rack_node("r1-a", "r1", "10"), rack_node("r1-b", "r1", "10"), rack_node("r2-a", "r2", "10")]
    pods = [make_pod("default/big", cpu="9", memory="1Gi", node="r1-a", scheduler="default-scheduler"),
            make_pod("default/bare", cpu="4", memory="1Gi", node="r2-a", scheduler="default-scheduler"),
            crew_pod("default/db-0", "db", cpu="3", node="r1-b", owned=True),
            crew_pod("default/db-1", "db", cpu="3", node="r1-b", owned=True)]
    big = pods[0]
    pods[0] = big.model_copy(update={"metadata": big.metadata.model_copy(update={"owner_references": [
        OwnerReference(kind="ReplicaSet", name="big-rs", controller=True)]})})
    return make_snapshot(nodes, pods)


def test_repacking_keeps_a_crew_on_its_rack(crew_rack) -> None:
    snapshot = _repack_scene()
    result = plan_repack(snapshot, options=RepackOptions(time_limit=10))
    names = result.node_names
    for step in result.steps:
        if step.pod.startswith("default/db-"):
            assert names[step.target].startswith("r1-"), step
    assert "r1-b" not in result.freed_nodes


def test_without_the_plugin_repacking_moves_the_crew_to_the_other_rack() -> None:
    result = plan_repack(_repack_scene(), options=RepackOptions(time_limit=10))
    assert result.freed_nodes == ["r1-b"]
    assert {result.node_names[s.target] for s in result.steps} == {"r2-a"}

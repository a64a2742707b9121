"""Kubernetes 1.37's CompositePodGroup (issue 35), on examples/snapshots/gangs/composite-block-rack.yaml:
ml/train (gang, minGroupCount 2, one block) over two PodGroup replicas (2 pods each, one rack).
Block 1 has one free rack, block 2 two. And the group tree's bad input, one line each."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml

from adapters.cli import main
from adapters.snapshot_io import read_snapshot
from models import SchedulerConfig
from solver import schedule, validate

GANGS = Path(__file__).resolve().parents[2] / "examples" / "snapshots" / "gangs"
EXAMPLE = GANGS / "composite-block-rack.yaml"
ENGINES = ["cpsat", "greedy"]


def items_of(edit=None) -> list[dict]:
    items = yaml.safe_load(EXAMPLE.read_text())["items"]
    if edit is not None:
        edit(items)
    return items


def read(items: list[dict]):
    return read_snapshot(io.StringIO(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))).snapshot


def obj(items, kind: str, name: str) -> dict:
    return next(i for i in items if i["kind"] == kind and i["metadata"]["name"] == name)


def busy(node: str, name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "infra"},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "2"}}}]},
            "status": {"phase": "Running"}}


def fill_rack_2a(items) -> None:
    items += [busy("b2-ra-0", "fill-0"), busy("b2-ra-1", "fill-1")]


def decide(snapshot, engine: str):
    plan = schedule(snapshot, SchedulerConfig(), engine=engine)
    assert validate(snapshot, plan, SchedulerConfig()) == []
    return plan


def where(plan) -> dict[str, str]:
    return {a.pod: a.node for a in plan.assignments}


@pytest.mark.parametrize("engine", ENGINES)
def test_both_replicas_in_one_block_one_rack_each(engine: str) -> None:
    placed = where(decide(read(items_of()), engine))
    assert len(placed) == 4
    assert {node[:2] for node in placed.values()} == {"b2"}
    for replica in ("a", "b"):
        racks = {placed[f"ml/train-{replica}-{i}"][:5] for i in range(2)}
        assert len(racks) == 1
    assert {placed["ml/train-a-0"][:5], placed["ml/train-b-0"][:5]} == {"b2-ra", "b2-rb"}


@pytest.mark.parametrize("engine", ENGINES)
def test_min_group_count_or_none(engine: str) -> None:
    """With rack-2a taken too, each block has one free rack: each replica alone could go, but
    not both in one block, so neither does."""
    plan = decide(read(items_of(fill_rack_2a)), engine)
    assert plan.assignments == ()
    assert {u.pod for u in plan.unschedulable} == {f"ml/train-{r}-{i}" for r in "ab" for i in range(2)}


@pytest.mark.parametrize("engine", ENGINES)
def test_a_basic_level_imposes_nothing(engine: str) -> None:
    """The same cluster with the root basic and without its block constraint: both replicas
    place, one in rack-1b and one in rack-2b."""
    def basic(items):
        fill_rack_2a(items)
        spec = obj(items, "CompositePodGroup", "train")["spec"]
        spec["schedulingPolicy"] = {"basic": {}}
        spec.pop("schedulingConstraints")
        obj(items, "Workload", "train")["spec"]["compositePodGroupTemplates"][0]["schedulingPolicy"] = {"basic": {}}
    placed = where(decide(read(items_of(basic)), engine))
    assert sorted({node[:5] for node in placed.values()}) == ["b1-rb", "b2-rb"]


def test_the_validator_refuses_one_child_of_a_gang_level() -> None:
    """The basic level's plan (one replica per block) judged against the gang level."""
    def basic(items):
        fill_rack_2a(items)
        spec = obj(items, "CompositePodGroup", "train")["spec"]
        spec["schedulingPolicy"] = {"basic": {}}
        spec.pop("schedulingConstraints")
    plan = decide(read(items_of(basic)), "greedy")
    problems = validate(read(items_of(fill_rack_2a)), plan, SchedulerConfig())
    assert any(p.startswith("composite: CompositePodGroup ml/train has members in 2 topology.example.com/block domains")
               for p in problems), problems


def test_a_running_replica_pins_the_block() -> None:
    """train-a already runs in rack-2b: train-b must join it in block 2 (rack-2a)."""
    def running(items):
        for i in range(2):
            pod = obj(items, "Pod", f"train-a-{i}")
            pod["spec"]["nodeName"], pod["status"]["phase"] = f"b2-rb-{i}", "Running"
    for engine in ENGINES:
        placed = where(decide(read(items_of(running)), engine))
        assert {placed["ml/train-b-0"][:5], placed["ml/train-b-1"][:5]} == {"b2-ra"}, engine


def test_v1alpha3_podgroups_read_as_v1beta1() -> None:
    def alpha(items):
        for i in items:
            if i["kind"] == "PodGroup":
                i["apiVersion"] = "scheduling.k8s.io/v1alpha3"
    assert where(decide(read(items_of(alpha)), "cpsat")) == where(decide(read(items_of()), "cpsat"))


def _cycle(items):
    other = json.loads(json.dumps(obj(items, "CompositePodGroup", "train")))
    other["metadata"]["name"] = "outer"
    other["spec"]["parentCompositePodGroupName"] = "train"
    other["spec"]["schedulingPolicy"] = {"basic": {}}
    obj(items, "CompositePodGroup", "train")["spec"]["parentCompositePodGroupName"] = "outer"
    items.append(other)


def _elsewhere(items):
    obj(items, "CompositePodGroup", "train")["metadata"]["namespace"] = "other"


BAD = [
    pytest.param(lambda items: obj(items, "PodGroup", "train-a")["spec"]["workloadRef"].update(templateName="nope"),
                 'podgroups/ml/train-a: spec.workloadRef.templateName: Workload ml/train has no podGroupTemplate named "nope"',
                 id="missing-template"),
    pytest.param(lambda items: obj(items, "CompositePodGroup", "train")["spec"]["workloadRef"].update(templateName="nope"),
                 "compositepodgroups/ml/train: spec.workloadRef.templateName: Workload ml/train has no "
                 'compositePodGroupTemplate named "nope"', id="missing-composite-template"),
    pytest.param(_cycle, "compositepodgroups/ml/train: spec.parentCompositePodGroupName: the parents form a cycle: "
                 "ml/train -> ml/outer -> ml/train", id="cycle"),
    pytest.param(_elsewhere, 'podgroups/ml/train-a: spec.parentCompositePodGroupName: no CompositePodGroup "train" in '
                 "namespace ml; the one of that name is in namespace other, and a parent must be in its child's "
                 "namespace (ml)", id="parent-in-another-namespace"),
    pytest.param(lambda items: obj(items, "CompositePodGroup", "train")["spec"]["schedulingPolicy"]["gang"].update(
                 minGroupCount=3), "compositepodgroups/ml/train: spec.schedulingPolicy.gang.minGroupCount: 3 is above "
                 "the 2 child group(s) naming it as their parent", id="min-group-count-above-children"),
    pytest.param(lambda items: obj(items, "PodGroup", "train-a")["spec"].update(priorityClassName="gold"),
                 'podgroups/ml/train-a: spec.priorityClassName: priority class "gold" not found', id="unknown-class"),
    pytest.param(lambda items: obj(items, "PodGroup", "train-a")["spec"].update(disruptionMode={"all": {}, "single": {}}),
                 "podgroups/ml/train-a: spec.disruptionMode: at most one of single and all may be set", id="two-modes"),
]


@pytest.mark.parametrize(("edit", "message"), BAD)
def test_bad_trees_exit_2_naming_object_and_field(edit, message, tmp_path: Path, capsys) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items_of(edit)}))
    assert main(["schedule", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"cpsat-scheduler: error: {message}", err


@pytest.mark.parametrize("engine", ENGINES)
def test_a_levels_disruption_mode_all_takes_every_pod_under_it(engine: str) -> None:
    """Both replicas run in block 2; the root says disruptionMode: all and priority 5 (its
    PodGroups set none, so their pods take it). A pod of priority 100 that must go on b2-ra-0
    evicts the four pods of the tree, not the one in its way."""
    def running(items):
        for replica, rack in (("a", "rb"), ("b", "ra")):
            for i in range(2):
                pod = obj(items, "Pod", f"train-{replica}-{i}")
                pod["spec"]["nodeName"], pod["status"]["phase"] = f"b2-{rack}-{i}", "Running"
        obj(items, "CompositePodGroup", "train")["spec"].update(disruptionMode={"all": {}}, priority=5)
        items.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "urgent", "namespace": "ops"},
                      "spec": {"schedulerName": "cpsat-scheduler", "priority": 100,
                               "nodeSelector": {"kubernetes.io/hostname": "b2-ra-0"},
                               "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "2"}}}]},
                      "status": {"phase": "Pending"}})
    snapshot = read(items_of(running))
    assert snapshot.pod_by_key["ml/train-a-0"].spec.priority == 5
    plan = decide(snapshot, engine)
    assert sorted(p.pod for p in plan.preemptions) == sorted(f"ml/train-{r}-{i}" for r in "ab" for i in range(2))

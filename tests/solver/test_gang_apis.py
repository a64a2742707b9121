"""Gangs declared in each API shape place the same way (issue 15): scheduler-plugins' PodGroup,
Kubernetes 1.36's PodGroup (scheduling.k8s.io/v1alpha2), 1.35's Workload (v1alpha1) and Volcano's
PodGroup. The bundled examples (examples/snapshots/gangs/) are the same cluster in each shape."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from adapters.cli import main
from adapters.snapshot_io import read_snapshot
from models import SchedulerConfig
from solver import schedule, validate

GANGS = Path(__file__).resolve().parents[2] / "examples" / "snapshots" / "gangs"
SHAPES = ["scheduler-plugins", "podgroup-v1alpha2", "podgroup-v1beta1", "workload-v1alpha1", "volcano"]


def plan_of(path: Path, engine: str):
    snapshot = read_snapshot(path).snapshot
    plan = schedule(snapshot, SchedulerConfig(), engine=engine)
    assert validate(snapshot, plan, SchedulerConfig()) == []
    return plan


@pytest.mark.parametrize("engine", ["cpsat", "greedy"])
@pytest.mark.parametrize("shape", SHAPES)
def test_every_shape_places_the_same_gangs(shape: str, engine: str) -> None:
    plan = plan_of(GANGS / f"{shape}.yaml", engine)
    reference = plan_of(GANGS / "scheduler-plugins.yaml", engine)
    assert sorted(a.pod for a in plan.assignments) == sorted(a.pod for a in reference.assignments)
    placed = {a.pod.split("/")[1].split("-")[0] for a in plan.assignments}
    counts = {job: sum(a.pod.startswith(f"ml/{job}-") for a in plan.assignments) for job in ("train", "eval")}
    assert counts in ({"train": 0, "eval": 5}, {"train": 4, "eval": 0}) and placed  # whole gangs only
    if engine == "cpsat":
        assert counts == {"train": 0, "eval": 5}  # the most pods: the larger gang whole


def documents(shape: str) -> dict:
    return yaml.safe_load((GANGS / f"{shape}.yaml").read_text())


def edited(tmp_path: Path, shape: str, edit) -> str:
    doc = documents(shape)
    edit(doc["items"])
    path = tmp_path / f"{shape}.json"
    path.write_text(json.dumps(doc))
    return str(path)


def groups(items, kind="PodGroup"):
    return [i for i in items if i["kind"] == kind]


def test_basic_policy_is_no_gang(tmp_path: Path, capsys) -> None:
    """eval under `basic: {}`: its pods place one by one, 4 of 5 beside train."""
    def basic(items):
        groups(items)[1]["spec"]["schedulingPolicy"] = {"basic": {}}
    assert main(["schedule", edited(tmp_path, "podgroup-v1alpha2", basic), "-o", "json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    placed = [a["pod"] for a in plan["assignments"]]
    assert sum(p.startswith("ml/train-") for p in placed) == 4
    assert sum(p.startswith("ml/eval-") for p in placed) == 4


def test_each_replica_key_of_a_workload_is_a_gang_of_its_own(tmp_path: Path, capsys) -> None:
    """eval's pods in two replicas, r1 (3 pods) and r2 (2 pods), under minCount 3: each replica
    is a gang of its own, so r2 can never start (2 < 3) while r1 places whole beside train. As
    one gang of 5 pods, 4 of them would have placed."""
    def replicas(items):
        groups(items, "Workload")[0]["spec"]["podGroups"][1]["policy"] = {"gang": {"minCount": 3}}
        for item in items:
            if item["kind"] == "Pod" and item["metadata"]["name"].startswith("eval-"):
                k = int(item["metadata"]["name"].split("-")[1])
                item["spec"]["workloadRef"]["podGroupReplicaKey"] = "r1" if k < 3 else "r2"
    assert main(["schedule", edited(tmp_path, "workload-v1alpha1", replicas), "-o", "json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    placed = sorted(a["pod"] for a in plan["assignments"])
    assert [p for p in placed if p.startswith("ml/eval-")] == ["ml/eval-0", "ml/eval-1", "ml/eval-2"]
    assert sum(p.startswith("ml/train-") for p in placed) == 4
    waiting = {u["pod"]: u["message"] for u in plan["unschedulable"]}
    assert "minMember of group: 3" in waiting["ml/eval-3"]


def test_a_missing_group_object_makes_its_pods_wait(tmp_path: Path, capsys) -> None:
    def drop(items):
        items.remove(groups(items)[0])  # train's PodGroup
    assert main(["schedule", edited(tmp_path, "podgroup-v1alpha2", drop), "-o", "json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert not any(a["pod"].startswith("ml/train-") for a in plan["assignments"])
    waiting = {u["pod"]: u["message"] for u in plan["unschedulable"]}
    assert "not found" in waiting["ml/train-0"].lower()


BAD = [
    pytest.param("podgroup-v1alpha2", lambda items: groups(items)[0]["spec"]["schedulingPolicy"]["gang"].update(minCount=0),
                 "podgroups/ml/train: spec.schedulingPolicy.gang.minCount: 0 is below the minimum 1", id="min-count-0"),
    pytest.param("podgroup-v1alpha2", lambda items: groups(items)[0]["spec"]["schedulingPolicy"].update(basic={}),
                 "podgroups/ml/train: spec.schedulingPolicy: exactly one of basic and gang must be set", id="two-policies"),
    pytest.param("podgroup-v1alpha2", lambda items: groups(items)[0]["spec"].update(
                 schedulingConstraints={"topology": [{"key": "rack"}, {"key": "block"}]}),
                 "podgroups/ml/train: spec.schedulingConstraints.topology: takes at most 1 items", id="two-topology-keys"),
    pytest.param("workload-v1alpha1", lambda items: groups(items, "Workload")[0]["spec"]["podGroups"][0]["policy"].update(basic={}),
                 "workloads/ml/experiment: spec.podGroups[0].policy: exactly one of basic and gang must be set",
                 id="workload-two-policies"),
    pytest.param("workload-v1alpha1", lambda items: groups(items, "Workload")[0]["spec"].update(
                 podGroups=[{"name": f"g{i}", "policy": {"basic": {}}} for i in range(9)]),
                 "workloads/ml/experiment: spec.podGroups: takes at most 8 items", id="workload-nine-groups"),
]


@pytest.mark.parametrize(("shape", "edit", "message"), BAD)
def test_bad_shapes_exit_2_naming_the_field(shape, edit, message, tmp_path: Path, capsys) -> None:
    assert main(["schedule", edited(tmp_path, shape, edit)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"cpsat-scheduler: error: {message}"), err
    assert len(err.strip().splitlines()) == 1

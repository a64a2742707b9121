"""Consumable capacity (DRAConsumableCapacity, Kubernetes 1.34+): a device with
``allowMultipleAllocations: true`` is shared by several claims while the capacity they consume
(``capacity.requests`` raised to the device's ``requestPolicy``) fits; each share is written with
its ``consumedCapacity`` and a ``shareID``; the validator refuses a plan that overdraws it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from adapters.snapshot_io import load_snapshot
from models import SchedulerConfig
from solver.api import schedule
from solver.validate import validate

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples/snapshots/dra/shared-capacity.yaml"
CLI = Path(sys.executable).with_name("cpsat-scheduler")


@pytest.mark.parametrize("engine", ["greedy", "cpsat"])
def test_two_claims_share_the_gpu_and_the_third_waits(engine: str, tmp_path: Path) -> None:
    out = subprocess.run([str(CLI), "schedule", "--engine", engine, "-o", "json", str(EXAMPLE)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert sorted(a["pod"] for a in data["assignments"]) == ["ml/share-0", "ml/share-1"]
    assert [u["pod"] for u in data["unschedulable"]] == ["ml/share-2"]
    results = [r for a in data["allocations"] for r in a["allocation"]["devices"]["results"]]
    assert [(r["device"], r["consumedCapacity"]) for r in results] == [("gpu-0", {"memory": "30Gi"})] * 2
    assert len({r["shareID"] for r in results}) == 2
    if engine == "cpsat":
        assert data["stats"]["plan_from"] == "solver"  # the model shares the device too
    plan = tmp_path / "plan.json"
    plan.write_text(out.stdout)
    ok = subprocess.run([str(CLI), "validate", str(EXAMPLE), str(plan)], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    # The third pod placed too, with a share of its own: 90Gi of an 80Gi device.
    third = json.loads(json.dumps(data["allocations"][0]))
    third["claim"], third["pods"] = "ml/share-2-gpu-", ["ml/share-2"]
    third["allocation"]["devices"]["results"][0]["shareID"] = "00000000-0000-0000-0000-000000000003"
    data["allocations"].append(third)
    data["assignments"].append({"pod": "ml/share-2", "node": "n0"})
    data["unschedulable"] = []
    plan.write_text(json.dumps(data))
    bad = subprocess.run([str(CLI), "validate", str(EXAMPLE), str(plan)], capture_output=True, text=True)
    assert bad.returncode == 1
    assert ("device gpu.example.com/n0/gpu-0 (allowMultipleAllocations) is given 90Gi of capacity memory, "
            "above its 80Gi, by claims ml/share-0-gpu-, ml/share-1-gpu-, ml/share-2-gpu-") in bad.stdout + bad.stderr


def test_a_share_that_consumes_less_than_its_request_is_refused(tmp_path: Path) -> None:
    snap = load_snapshot(EXAMPLE)
    plan = schedule(snap, engine="greedy")
    entry = plan.allocations[0]
    allocation = json.loads(json.dumps(entry.allocation))
    allocation["devices"]["results"][0]["consumedCapacity"] = {"memory": "20Gi"}  # the policy makes 25Gi 30Gi
    bad = plan.model_copy(update={"allocations": (entry.model_copy(update={"allocation": allocation}), *plan.allocations[1:])})
    assert validate(snap, bad, SchedulerConfig()) == [
        "dra: resourceclaim ml/share-0-gpu-: device gpu.example.com/n0/gpu-0 is given less of memory than request gpu consumes"]


def _mixed(tmp_path: Path, exclusive: bool = False) -> Path:
    """Two shareable 80Gi GPUs on one node; the queue asks 30Gi, 30Gi, 50Gi, 50Gi."""
    items = yaml.safe_load(EXAMPLE.read_text())["items"]
    items = [i for i in items if i["kind"] not in ("Pod", "ResourceClaimTemplate")]
    sl = next(i for i in items if i["kind"] == "ResourceSlice")
    gpu = sl["spec"]["devices"][0]
    if exclusive:
        del gpu["allowMultipleAllocations"], gpu["capacity"]["memory"]["requestPolicy"]
    sl["spec"]["devices"] = [gpu, {**gpu, "name": "gpu-1"}]
    for gi in (30, 50):
        items.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                      "metadata": {"name": f"gpu-{gi}g", "namespace": "ml"},
                      "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                          "deviceClassName": "gpu.example.com", "capacity": {"requests": {"memory": f"{gi}Gi"}}}}]}}}})
    for i, gi in enumerate([30, 30, 50, 50]):
        items.append({"apiVersion": "v1", "kind": "Pod",
                      "metadata": {"name": f"p{i}", "namespace": "ml", "creationTimestamp": f"2026-01-01T00:00:0{i}Z"},
                      "spec": {"schedulerName": "cpsat-scheduler",
                               "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": f"gpu-{gi}g"}],
                               "containers": [{"name": "c", "resources": {"claims": [{"name": "gpu"}]}}]}})
    path = tmp_path / "mixed.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


def test_shares_packed_jointly_beat_one_pod_at_a_time(tmp_path: Path) -> None:
    """First fit in queue order puts both 30Gi claims on gpu-0 and leaves 20Gi + 30Gi, too little
    for the second 50Gi claim; the solver pairs a 50Gi with a 30Gi on each GPU."""
    snap = load_snapshot(_mixed(tmp_path))
    greedy, cpsat = schedule(snap, engine="greedy"), schedule(snap, engine="cpsat")
    assert (len(greedy.assignments), len(cpsat.assignments)) == (3, 4)
    assert cpsat.stats.plan_from == "solver"
    for plan in (greedy, cpsat):
        assert validate(snap, plan, SchedulerConfig()) == []
    per_gpu: dict[str, list[str]] = {}
    for a in cpsat.allocations:
        for r in a.allocation["devices"]["results"]:
            per_gpu.setdefault(r["device"], []).append(r["consumedCapacity"]["memory"])
    assert sorted(sorted(v) for v in per_gpu.values()) == [["30Gi", "50Gi"], ["30Gi", "50Gi"]]


def test_capacity_requests_filter_exclusive_devices_too(tmp_path: Path) -> None:
    """Without allowMultipleAllocations each GPU goes to one claim whole; capacity.requests
    still picks devices with that much (here: all do), and no share fields are written."""
    snap = load_snapshot(_mixed(tmp_path, exclusive=True))
    for engine in ("greedy", "cpsat"):
        plan = schedule(snap, engine=engine)
        assert len(plan.assignments) == 2
        assert validate(snap, plan, SchedulerConfig()) == []
        assert all(set(r) == {"request", "driver", "pool", "device"}
                   for a in plan.allocations for r in a.allocation["devices"]["results"])


def test_a_request_for_all_devices_takes_a_share_of_each_shareable_one(tmp_path: Path) -> None:
    """allocationMode All over shareable GPUs takes a share of each (the policy's default,
    10Gi), beside another claim's share: both pods run, in the solver's own plan too."""
    items = yaml.safe_load(EXAMPLE.read_text())["items"]
    items = [i for i in items if i["kind"] != "Pod"]
    sl = next(i for i in items if i["kind"] == "ResourceSlice")
    sl["spec"]["devices"].append({**sl["spec"]["devices"][0], "name": "gpu-1"})
    items.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                  "metadata": {"name": "every-gpu", "namespace": "ml"},
                  "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                      "deviceClassName": "gpu.example.com", "allocationMode": "All"}}]}}}})
    for i, template in enumerate(["gpu-25g", "every-gpu"]):
        items.append({"apiVersion": "v1", "kind": "Pod",
                      "metadata": {"name": f"p{i}", "namespace": "ml", "creationTimestamp": f"2026-01-01T00:00:0{i}Z"},
                      "spec": {"schedulerName": "cpsat-scheduler",
                               "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
                               "containers": [{"name": "c", "resources": {"claims": [{"name": "gpu"}]}}]}})
    path = tmp_path / "all.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    snap = load_snapshot(path)
    for engine in ("greedy", "cpsat"):
        plan = schedule(snap, engine=engine)
        assert validate(snap, plan, SchedulerConfig()) == []
        assert len(plan.assignments) == 2, engine
        every = next(a for a in plan.allocations if a.claim == "ml/p1-gpu-")
        assert sorted((r["device"], r["consumedCapacity"]["memory"]) for r in every.allocation["devices"]["results"]) == [
            ("gpu-0", "10Gi"), ("gpu-1", "10Gi")]
    assert plan.stats.plan_from == "solver"


def _held_without_share_id(tmp_path: Path, share_id: bool, consumed: str = "10Gi", asks: str = "") -> Path:
    """The example with ml/old running on n0 and its claim allocated gpu-0, 10Gi consumed —
    with or without a ``shareID`` — and one pending pod asking 25Gi of it."""
    items = [i for i in yaml.safe_load(EXAMPLE.read_text())["items"] if i["metadata"]["name"] not in ("share-1", "share-2")]
    result = {"request": "gpu", "driver": "gpu.example.com", "pool": "n0", "device": "gpu-0",
              "consumedCapacity": {"memory": consumed}}
    if share_id:
        result["shareID"] = "6b1f9e2a-3c1d-4f5e-9a7b-1c2d3e4f5a6b"
    items.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "old", "namespace": "ml"},
                  "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com", **(
                      {"capacity": {"requests": {"memory": asks}}} if asks else {})}}]}},
                  "status": {"allocation": {"devices": {"results": [result]}, "nodeSelector": {"nodeSelectorTerms": [
                      {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n0"]}]}]}},
                      "reservedFor": [{"resource": "pods", "name": "old", "uid": "u-old"}]}})
    items.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "old", "namespace": "ml", "uid": "u-old"},
                  "spec": {"nodeName": "n0", "resourceClaims": [{"name": "gpu", "resourceClaimName": "old"}],
                           "containers": [{"name": "c", "resources": {"claims": [{"name": "gpu"}]}}]},
                  "status": {"phase": "Running"}})
    path = tmp_path / "held.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


@pytest.mark.parametrize("engine", ["greedy", "cpsat"])
def test_a_result_without_share_id_holds_the_device_whole(engine: str, tmp_path: Path) -> None:
    """kube-scheduler reads an allocation result without ``shareID`` as the device allocated
    exclusively, whatever its ``consumedCapacity`` says: no share may join it. With a shareID
    the 10Gi share leaves 70Gi, and the pod's 30Gi share fits beside it."""
    held = load_snapshot(_held_without_share_id(tmp_path, share_id=False))
    plan = schedule(held, engine=engine)
    assert [u.pod for u in plan.unschedulable] == ["ml/share-0"] and not plan.assignments
    if engine == "cpsat":
        assert plan.stats.plan_from == "solver"  # the model keeps the share off it too
    shared = load_snapshot(_held_without_share_id(tmp_path, share_id=True))
    plan = schedule(shared, engine=engine)
    assert [a.pod for a in plan.assignments] == ["ml/share-0"]
    assert validate(shared, plan, SchedulerConfig()) == []
    # That plan, replayed where the old claim holds the GPU whole, gives it to two claims.
    assert validate(held, plan, SchedulerConfig()) == [
        "dra: device gpu.example.com/n0/gpu-0 is given to 2 claims: ml/old, ml/share-0-gpu-"]


def _edit_first_result(plan, edit):
    entry = plan.allocations[0]
    allocation = json.loads(json.dumps(entry.allocation))
    edit(allocation["devices"]["results"][0], plan)
    return plan.model_copy(update={"allocations": (entry.model_copy(update={"allocation": allocation}), *plan.allocations[1:])})


def test_validate_refuses_shares_kube_scheduler_would_not_write() -> None:
    """Two shares of one device under one shareID (the status of each device share is keyed
    by it), a share without shareID beside another (an exclusive allocation), and a share
    consuming a capacity the device does not have."""
    snap = load_snapshot(EXAMPLE)
    plan = schedule(snap, engine="greedy")
    assert len(plan.allocations) == 2 and validate(snap, plan, SchedulerConfig()) == []
    other = plan.allocations[1].allocation["devices"]["results"][0]["shareID"]
    same = _edit_first_result(plan, lambda r, p: r.update(shareID=other))
    assert validate(snap, same, SchedulerConfig()) == [
        f"dra: device gpu.example.com/n0/gpu-0: shareID {other} is given to 2 allocations: "
        "ml/share-0-gpu-, ml/share-1-gpu-"]
    whole = _edit_first_result(plan, lambda r, p: r.pop("shareID"))
    assert validate(snap, whole, SchedulerConfig()) == [
        "dra: device gpu.example.com/n0/gpu-0 is given to 2 claims: ml/share-0-gpu-, ml/share-1-gpu-"]
    odd = _edit_first_result(plan, lambda r, p: r["consumedCapacity"].update(cores="4"))
    assert validate(snap, odd, SchedulerConfig()) == [
        "dra: resourceclaim ml/share-0-gpu-: device gpu.example.com/n0/gpu-0 has no capacity cores, "
        "which its consumedCapacity names"]


def test_a_share_the_snapshot_holds_is_a_fact_not_a_fault_of_the_plan(tmp_path: Path) -> None:
    """ml/old's claim was given 25Gi of gpu-0 (as the slice's policy then allowed); the policy
    now rounds 25Gi up to 30Gi. That allocation is the cluster's, not the plan's: the plan that
    gives ml/share-0 30Gi beside it (55Gi of 80Gi) is valid and printed (it used to be refused
    by the validator for every plan, the CLI exiting 1 with "this is a bug")."""
    path = _held_without_share_id(tmp_path, share_id=True, consumed="25Gi", asks="25Gi")
    snap = load_snapshot(path)
    for engine in ("greedy", "cpsat"):
        plan = schedule(snap, engine=engine)
        assert [a.pod for a in plan.assignments] == ["ml/share-0"]
        assert validate(snap, plan, SchedulerConfig()) == []
    out = subprocess.run([str(CLI), "schedule", "-o", "json", str(path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    # A plan adding a share that overdraws it is still refused, naming the snapshot's share too.
    plan = schedule(snap, engine="greedy")
    entry = plan.allocations[0]
    allocation = json.loads(json.dumps(entry.allocation))
    allocation["devices"]["results"][0]["consumedCapacity"] = {"memory": "60Gi"}
    bad = plan.model_copy(update={"allocations": (entry.model_copy(update={"allocation": allocation}),)})
    assert validate(snap, bad, SchedulerConfig()) == [
        "dra: device gpu.example.com/n0/gpu-0 (allowMultipleAllocations) is given 85Gi of capacity memory, "
        "above its 80Gi, by claims ml/old, ml/share-0-gpu-"]


def test_evicting_one_share_of_a_device_frees_no_device(tmp_path: Path) -> None:
    """preemption.freeDevices: gpu-0 (shareable, drawing a shared counter) holds two shares,
    run-a's (priority 0, first) and run-b's (1000). urgent (500) wants the GPU whole: evicting
    run-a deallocates one share, but run-b's keeps the device and its counter. The model used to
    count the device and its counter back with run-a's claim (it was the device's first holder),
    evicted run-a, and its plan failed validation (greedy's stood in)."""
    items = [i for i in yaml.safe_load(EXAMPLE.read_text())["items"] if i["kind"] in ("DeviceClass", "Node")]
    gpu = {"name": "gpu-0", "allowMultipleAllocations": True, "capacity": {"memory": {"value": "80Gi"}},
           "consumesCounters": [{"counterSet": "set", "counters": {"mem": {"value": "80Gi"}}}]}
    items.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "n0-gpus"},
                  "spec": {"driver": "gpu.example.com", "nodeName": "n0", "pool": {"name": "n0", "generation": 1, "resourceSliceCount": 1},
                           "sharedCounters": [{"name": "set", "counters": {"mem": {"value": "80Gi"}}}], "devices": [gpu]}})
    pin = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n0"]}]}]}
    for n, (name, priority) in enumerate([("a", 0), ("b", 1000)]):
        items.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": f"held-{name}", "namespace": "ml"},
                      "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                          "deviceClassName": "gpu.example.com", "capacity": {"requests": {"memory": "40Gi"}}}}]}},
                      "status": {"allocation": {"devices": {"results": [{
                          "request": "gpu", "driver": "gpu.example.com", "pool": "n0", "device": "gpu-0",
                          "shareID": f"00000000-0000-0000-0000-00000000000{n + 1}", "consumedCapacity": {"memory": "40Gi"}}]},
                          "nodeSelector": pin}, "reservedFor": [{"resource": "pods", "name": f"run-{name}", "uid": f"u-{name}"}]}})
        items.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"run-{name}", "namespace": "ml", "uid": f"u-{name}"},
                      "spec": {"nodeName": "n0", "priority": priority, "resourceClaims": [{"name": "g", "resourceClaimName": f"held-{name}"}],
                               "containers": [{"name": "c", "resources": {"claims": [{"name": "g"}]}}]},
                      "status": {"phase": "Running"}})
    items.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "whole", "namespace": "ml"},
                  "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}}})
    items.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "urgent", "namespace": "ml"},
                  "spec": {"schedulerName": "cpsat-scheduler", "priority": 500,
                           "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "whole"}],
                           "containers": [{"name": "c", "resources": {"claims": [{"name": "g"}]}}]}})
    path = tmp_path / "shares.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    config = ROOT / "examples/config/dra-free-devices.yaml"
    out = subprocess.run([str(CLI), "schedule", "-o", "json", "--config", str(config), str(path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["assignments"] == [] and data["preemptions"] == []
    assert [u["pod"] for u in data["unschedulable"]] == ["ml/urgent"]
    assert data["stats"]["plan_from"] == "solver", data["stats"]["fallback_reason"]

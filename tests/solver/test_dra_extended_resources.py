"""Extended resources backed by DRA (kube-scheduler 1.34+, DRAExtendedResource; issue 27): a
container asking for ``example.com/gpu`` where a DeviceClass names that resource and no node
advertises it gets devices of the class, through the CLI in both engines, and the plan passes
``validate``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples/snapshots/dra/extended.yaml"
CLI = Path(sys.executable).with_name("cpsat-scheduler")


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(CLI), *args], capture_output=True, text=True, timeout=120)


def schedule(snapshot: Path, engine: str) -> dict:
    out = run("schedule", str(snapshot), "-o", "json", "--engine", engine)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def devices(plan: dict) -> dict[str, list[str]]:
    return {a["claim"]: [f"{r['request']}={r['pool']}/{r['device']}" for r in a["allocation"]["devices"]["results"]]
            for a in plan["allocations"]}


def valid(snapshot: Path, plan: dict, tmp_path: Path) -> bool:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    out = run("validate", str(snapshot), str(path))
    assert out.returncode == 0, out.stdout + out.stderr
    return True


def edited(tmp_path: Path, edit) -> Path:
    doc = yaml.safe_load(EXAMPLE.read_text())
    edit(doc["items"])
    path = tmp_path / "edited.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def item(items: list, kind: str, name: str) -> dict:
    return next(i for i in items if i["kind"] == kind and i["metadata"]["name"] == name)


@pytest.mark.parametrize("engine", ["greedy", "cpsat"])
def test_pods_asking_for_the_extended_resource_get_devices_of_the_class(engine: str, tmp_path: Path) -> None:
    plan = schedule(EXAMPLE, engine)
    assert sorted(a["pod"] for a in plan["assignments"]) == ["ml/train-0", "ml/train-1"]
    (left,) = plan["unschedulable"]
    assert left["pod"] == "ml/train-2" and "cannot allocate all claims" in left["message"]
    got = devices(plan)
    assert sorted(got) == ["ml/train-0-extended-resources-", "ml/train-1-extended-resources-"]
    # named as kube-scheduler names them: container 0, the resource's place among the container's
    # requests sorted by name (cpu, example.com/gpu: 1)
    assert sorted(d for ds in got.values() for d in ds) == ["container-0-request-1=n0/gpu-0",
                                                            "container-0-request-1=n0/gpu-1"]
    assert valid(EXAMPLE, plan, tmp_path)


@pytest.mark.parametrize("engine", ["greedy", "cpsat"])
def test_a_node_advertising_the_resource_keeps_the_device_plugin_path(engine: str, tmp_path: Path) -> None:
    def advertise(items: list) -> None:
        item(items, "Node", "n0")["status"]["allocatable"]["example.com/gpu"] = "4"

    snapshot = edited(tmp_path, advertise)
    plan = schedule(snapshot, engine)
    assert len(plan["assignments"]) == 3 and plan["allocations"] == []  # counted as allocatable, no claim
    assert valid(snapshot, plan, tmp_path)


@pytest.mark.parametrize("engine", ["greedy", "cpsat"])
def test_the_implicit_class_name_and_a_bound_pods_claim(engine: str, tmp_path: Path) -> None:
    def edit(items: list) -> None:
        del item(items, "DeviceClass", "gpu.example.com")["spec"]["extendedResourceName"]
        for name in ("train-0", "train-1", "train-2"):
            limits = item(items, "Pod", name)["spec"]["containers"][0]["resources"]["limits"]
            limits["deviceclass.resource.kubernetes.io/gpu.example.com"] = limits.pop("example.com/gpu")
        # train-0 runs already, holding gpu-1 through the claim kube-scheduler made for it
        running = item(items, "Pod", "train-0")
        running["spec"]["nodeName"] = "n0"
        running["status"] = {"phase": "Running", "extendedResourceClaimStatus": {
            "resourceClaimName": "train-0-extended-resources-abcde",
            "requestMappings": [{"containerName": "main", "resourceName": "example.com/gpu",
                                 "requestName": "container-0-request-0"}]}}
        items.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                      "metadata": {"name": "train-0-extended-resources-abcde", "namespace": "ml"},
                      "spec": {"devices": {"requests": [{"name": "container-0-request-0", "exactly": {
                          "deviceClassName": "gpu.example.com", "count": 1}}]}},
                      "status": {"allocation": {"devices": {"results": [{
                          "request": "container-0-request-0", "driver": "gpu.example.com", "pool": "n0",
                          "device": "gpu-1"}]}},
                          "reservedFor": [{"resource": "pods", "name": "train-0"}]}})

    snapshot = edited(tmp_path, edit)
    plan = schedule(snapshot, engine)
    assert [a["pod"] for a in plan["assignments"]] == ["ml/train-1"]
    assert devices(plan) == {"ml/train-1-extended-resources-": ["container-0-request-1=n0/gpu-0"]}
    assert valid(snapshot, plan, tmp_path)

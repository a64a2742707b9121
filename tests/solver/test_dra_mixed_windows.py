"""Random small windows mixing every DRA feature the model decides — ExactCount, firstAvailable,
allocationMode All, consumable capacity (with and without a requestPolicy), adminAccess (in a
namespace with and without the label) and a claim several pending pods share — on one to three
nodes: both engines' plans pass the validator, and the solver never places fewer pods than
greedy, nor does greedy's plan stand in because it placed more."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from adapters.snapshot_io import load_snapshot
from models import SchedulerConfig
from solver.api import schedule
from solver.validate import validate

V1 = "resource.k8s.io/v1"


def window(seed: int) -> list[dict[str, Any]]:
    rnd = random.Random(seed)
    items: list[dict[str, Any]] = [
        {"apiVersion": V1, "kind": "DeviceClass", "metadata": {"name": model},
         "spec": {"selectors": [{"cel": {"expression": f'device.attributes["gpu.example.com"].model == "{model}"'}}]}}
        for model in ("a100", "t4")]
    admin = {"resource.kubernetes.io/admin-access": "true"} if rnd.random() < 0.5 else {}
    items.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml", "labels": admin}})
    for n in range(rnd.randint(1, 3)):
        items.append({"apiVersion": "v1", "kind": "Node",
                      "metadata": {"name": f"n{n}", "labels": {"kubernetes.io/hostname": f"n{n}"}},
                      "status": {"allocatable": {"cpu": str(rnd.choice([4, 8, 32])), "memory": "64Gi", "pods": "110"}}})
        devices = []
        for d in range(rnd.randint(1, 4)):
            device: dict[str, Any] = {"name": f"gpu-{d}", "attributes": {"model": {"string": rnd.choice(["a100", "t4"])}}}
            if rnd.random() < 0.4:
                device["allowMultipleAllocations"] = True
                device["capacity"] = {"memory": {"value": "80Gi"}}
                if rnd.random() < 0.5:
                    device["capacity"]["memory"]["requestPolicy"] = {
                        "default": "10Gi", "validRange": {"min": "10Gi", "step": "10Gi"}}
            devices.append(device)
        items.append({"apiVersion": V1, "kind": "ResourceSlice", "metadata": {"name": f"n{n}-gpus"},
                      "spec": {"driver": "gpu.example.com", "nodeName": f"n{n}",
                               "pool": {"name": f"n{n}", "generation": 1, "resourceSliceCount": 1}, "devices": devices}})
    items.append({"apiVersion": V1, "kind": "ResourceClaim", "metadata": {"name": "shared", "namespace": "ml"},
                  "spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": rnd.choice(["a100", "t4"])}}]}}})
    for p in range(rnd.randint(2, 7)):
        form = rnd.choice(["exact", "first", "all", "capacity", "admin", "shared"])
        model = rnd.choice(["a100", "t4"])
        request: dict[str, Any] = {"name": "g", "exactly": {"deviceClassName": model}}
        if form == "exact":
            request["exactly"]["count"] = rnd.randint(1, 2)
        elif form == "first":
            request = {"name": "g", "firstAvailable": [{"name": "big", "deviceClassName": "a100"},
                                                       {"name": "small", "deviceClassName": "t4", "count": rnd.randint(1, 2)}]}
        elif form == "all":
            request["exactly"]["allocationMode"] = "All"
        elif form == "capacity":
            request["exactly"]["capacity"] = {"requests": {"memory": f"{rnd.choice([15, 25, 40, 60])}Gi"}}
        elif form == "admin":
            request["exactly"]["adminAccess"] = True
        pod: dict[str, Any] = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"p{p}", "namespace": "ml", "creationTimestamp": f"2026-01-01T00:00:{p:02d}Z"},
            "spec": {"schedulerName": "cpsat-scheduler", "containers": [{"name": "c", "resources": {
                "requests": {"cpu": str(rnd.randint(1, 4))}, "claims": [{"name": "g"}]}}]}}
        if form == "shared":
            pod["spec"]["resourceClaims"] = [{"name": "g", "resourceClaimName": "shared"}]
        else:
            items.append({"apiVersion": V1, "kind": "ResourceClaimTemplate", "metadata": {"name": f"t{p}", "namespace": "ml"},
                          "spec": {"spec": {"devices": {"requests": [request]}}}})
            pod["spec"]["resourceClaims"] = [{"name": "g", "resourceClaimTemplateName": f"t{p}"}]
        items.append(pod)
    return items


@pytest.mark.parametrize("seed", range(0, 200, 10))
def test_mixed_dra_windows_are_valid_and_never_worse(seed: int, tmp_path: Path) -> None:
    path = tmp_path / "window.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": window(seed)}))
    snap = load_snapshot(path)
    greedy, cpsat = schedule(snap, engine="greedy"), schedule(snap, engine="cpsat")
    assert validate(snap, greedy, SchedulerConfig()) == []
    assert validate(snap, cpsat, SchedulerConfig()) == []
    assert len(cpsat.assignments) >= len(greedy.assignments)
    reason = cpsat.stats.fallback_reason or ""
    assert "validation" not in reason and "places more" not in reason, reason

"""A claim the cluster holds allocated to a device no ResourceSlice publishes any more (the driver
unpublished it, its node was removed) is the cluster's state, not a fault of the plan: it must
not make every plan of a DRA cluster fail validation. The plan's own allocations are still
checked in full."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from adapters.snapshot_io import load_snapshot
from models.config import SchedulerConfig
from solver import schedule, validate

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "snapshots" / "dra" / "gpus.yaml"
CLI = Path(sys.executable).parent / "cpsat-scheduler"


def _with_stale_claim(tmp_path: Path) -> Path:
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["items"].append({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "left-behind", "namespace": "ml"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}},
        "status": {"allocation": {"devices": {"results": [
            {"request": "gpu", "driver": "gpu.example.com", "pool": "gone", "device": "gpu-0"}]}}},
    })
    path = tmp_path / "stale.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_a_claim_allocated_to_a_vanished_device_does_not_fail_every_plan(tmp_path: Path) -> None:
    path = _with_stale_claim(tmp_path)
    snap = load_snapshot(path)
    plain = load_snapshot(EXAMPLE)
    for engine in ("greedy", "cpsat"):
        plan = schedule(snap, engine=engine)
        assert validate(snap, plan, SchedulerConfig()) == []
        # the stale claim changes nothing else: the same pods are placed as without it
        assert sorted(a.pod for a in plan.assignments) == sorted(a.pod for a in schedule(plain, engine=engine).assignments)
    out = subprocess.run([str(CLI), "schedule", "-o", "json", str(path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["assignments"]


def test_the_plans_own_allocations_are_still_checked_beside_a_stale_claim(tmp_path: Path) -> None:
    path = _with_stale_claim(tmp_path)
    snap = load_snapshot(path)
    plan = schedule(snap, engine="greedy")
    assert plan.allocations
    entry = plan.allocations[0]
    allocation = json.loads(json.dumps(entry.allocation))
    allocation["devices"]["results"][0]["pool"] = "vanished"  # the plan itself names a device no slice has
    bad = plan.model_copy(update={"allocations": (entry.model_copy(update={"allocation": allocation}),) + plan.allocations[1:]})
    problems = validate(snap, bad, SchedulerConfig())
    assert any(f"resourceclaim {entry.claim}: device gpu.example.com/vanished/" in p and "is in no ResourceSlice" in p
               for p in problems), problems
    assert not any("left-behind" in p for p in problems), problems

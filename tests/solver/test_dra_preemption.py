"""Preemption and a victim's devices (issue 27), through the CLI in both engines and the validator.

Config ``preemption.freeDevices`` off (the default, kube-scheduler's rule): evicting a pod does
not free the devices of its claim, so nobody is evicted for them and ``validate`` refuses a plan
that gives them away. On (``examples/config/dra-free-devices.yaml``): a claim reserved only for
pods the plan evicts is deallocated once they are gone, so a higher-priority pod may be given its
devices; a claim another pod keeps using stays allocated."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples/snapshots/dra/preempt.yaml"
CLI = Path(sys.executable).with_name("cpsat-scheduler")
FREE_DEVICES = ROOT / "examples/config/dra-free-devices.yaml"
ON = ("--config", str(FREE_DEVICES))


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(CLI), *args], capture_output=True, text=True, timeout=120)


def schedule(snapshot: Path, engine: str, *config: str) -> dict:
    args = ["schedule", str(snapshot), "-o", "json", "--engine", engine, *config]
    out = run(*args)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def devices(plan: dict) -> dict[str, list[str]]:
    return {a["claim"]: [f"{r['pool']}/{r['device']}" for r in a["allocation"]["devices"]["results"]]
            for a in plan["allocations"]}


def validate(snapshot: Path, plan: dict, tmp_path: Path, *config: str) -> subprocess.CompletedProcess:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    return run("validate", str(snapshot), str(path), *config)


def variant(tmp_path: Path, *, sharer_priority: int) -> Path:
    """The example with a second running pod, ``viewer`` on n0, of the given priority, that
    shares the batch pod's claim (named in its ``reservedFor`` too)."""
    doc = yaml.safe_load(EXAMPLE.read_text())
    items = doc["items"]
    claim = next(i for i in items if i["kind"] == "ResourceClaim")
    claim["status"]["reservedFor"].append({"resource": "pods", "name": "viewer", "uid": "p-viewer"})
    batch = next(i for i in items if i["kind"] == "Pod" and i["metadata"]["name"] == "batch")
    viewer = json.loads(json.dumps(batch))
    viewer["metadata"].update(name="viewer", uid="p-viewer")
    viewer["spec"]["priority"] = sharer_priority
    items.append(viewer)
    path = tmp_path / "shared.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize("engine", ["greedy", "cpsat"])
def test_evicting_the_holder_frees_its_gpus_for_the_preemptor(engine: str, tmp_path: Path) -> None:
    plan = schedule(EXAMPLE, engine, *ON)
    assert plan["assignments"] == [{"pod": "ml/urgent", "node": "n0"}]
    assert plan["preemptions"] == [{"pod": "ml/batch", "node": "n0", "preemptor": "ml/urgent"}]
    # the freed devices, named as the batch claim held them; the batch claim is not re-allocated
    assert devices(plan) == {"ml/urgent-gpus-": ["n0/gpu-0", "n0/gpu-1"]}
    (entry,) = plan["allocations"]
    assert entry["pods"] == ["ml/urgent"]
    assert entry["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["n0"]
    if engine == "cpsat":
        assert plan["stats"]["plan_from"] == "solver"  # the model counted the freed devices itself
    out = validate(EXAMPLE, plan, tmp_path, *ON)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("engine", ["greedy", "cpsat"])
def test_a_claim_shared_with_a_pod_that_stays_keeps_its_devices(engine: str, tmp_path: Path) -> None:
    # viewer outranks the preemptor: it stays, so the shared claim stays allocated and evicting
    # batch would free nothing — the urgent pod waits and nobody is evicted
    snapshot = variant(tmp_path, sharer_priority=2000)
    plan = schedule(snapshot, engine, *ON)
    assert plan["assignments"] == [] and plan["preemptions"] == [] and plan["allocations"] == []
    (left,) = plan["unschedulable"]
    assert left["pod"] == "ml/urgent" and "cannot allocate all claims" in left["message"]
    assert validate(snapshot, plan, tmp_path, *ON).returncode == 0


@pytest.mark.parametrize("engine", ["greedy", "cpsat"])
def test_a_claim_shared_by_two_victims_is_freed_when_both_go(engine: str, tmp_path: Path) -> None:
    snapshot = variant(tmp_path, sharer_priority=0)
    plan = schedule(snapshot, engine, *ON)
    assert plan["assignments"] == [{"pod": "ml/urgent", "node": "n0"}]
    assert sorted(p["pod"] for p in plan["preemptions"]) == ["ml/batch", "ml/viewer"]
    assert devices(plan) == {"ml/urgent-gpus-": ["n0/gpu-0", "n0/gpu-1"]}
    assert validate(snapshot, plan, tmp_path, *ON).returncode == 0


def test_validator_refuses_the_devices_of_a_claim_a_staying_pod_still_holds(tmp_path: Path) -> None:
    # A plan that evicts batch only, while viewer (priority 0, not evicted) still uses the claim:
    # the claim is not deallocated, so its devices are given to two claims.
    snapshot = variant(tmp_path, sharer_priority=0)
    plan = schedule(snapshot, "greedy", *ON)
    plan["preemptions"] = [p for p in plan["preemptions"] if p["pod"] == "ml/batch"]
    out = validate(snapshot, plan, tmp_path, *ON)
    assert out.returncode == 1
    assert "device gpu.example.com/n0/gpu-0 is given to 2 claims: ml/batch-gpus, ml/urgent-gpus-" in out.stdout


def test_validator_refuses_evicting_a_device_holder_for_a_pod_that_needs_no_devices(tmp_path: Path) -> None:
    # The urgent pod without a claim fits beside batch: evicting batch for it frees devices
    # nobody placed there takes, and the victim rule names it.
    doc = yaml.safe_load(EXAMPLE.read_text())
    urgent = next(i for i in doc["items"] if i["kind"] == "Pod" and i["metadata"]["name"] == "urgent")
    del urgent["spec"]["resourceClaims"]
    del urgent["spec"]["containers"][0]["resources"]["claims"]
    snapshot = tmp_path / "no-claim.yaml"
    snapshot.write_text(yaml.safe_dump(doc))
    plan = schedule(snapshot, "greedy", *ON)
    assert plan["preemptions"] == []
    plan["preemptions"] = [{"pod": "ml/batch", "node": "n0", "preemptor": "ml/urgent"}]
    out = validate(snapshot, plan, tmp_path, *ON)
    assert out.returncode == 1 and "ml/batch (priority 0) is evicted from node n0" in out.stdout


# --- preemption.freeDevices off (the default): kube-scheduler's rule -----------------------------


@pytest.mark.parametrize("engine", ["greedy", "cpsat"])
def test_by_default_a_victims_devices_are_not_freed_and_nobody_is_evicted(engine: str, tmp_path: Path) -> None:
    plan = schedule(EXAMPLE, engine)
    assert plan["assignments"] == [] and plan["preemptions"] == [] and plan["allocations"] == []
    assert plan["nominations"] == []
    (left,) = plan["unschedulable"]
    assert left["pod"] == "ml/urgent" and "cannot allocate all claims" in left["message"]
    assert validate(EXAMPLE, plan, tmp_path).returncode == 0


@pytest.mark.parametrize("engine", ["greedy", "cpsat"])
def test_by_default_validate_refuses_a_plan_that_frees_a_victims_devices(engine: str, tmp_path: Path) -> None:
    plan = schedule(EXAMPLE, engine, *ON)
    assert plan["preemptions"] == [{"pod": "ml/batch", "node": "n0", "preemptor": "ml/urgent"}]
    out = validate(EXAMPLE, plan, tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    for device in ("gpu-0", "gpu-1"):
        assert (f"dra: device gpu.example.com/n0/{device} is given to 2 claims: ml/batch-gpus, ml/urgent-gpus- "
                "(ml/batch-gpus: reserved only for evicted pods") in out.stdout
    assert "preemption.freeDevices: true" in out.stdout
    # the same plan with the option on is valid
    assert validate(EXAMPLE, plan, tmp_path, *ON).returncode == 0


def test_by_default_a_shared_claim_is_not_freed_when_all_its_pods_are_evicted(tmp_path: Path) -> None:
    # Both reserving pods are lower priority: with the option on both are evicted (above); off,
    # evicting them frees nothing, so neither engine evicts anyone.
    snapshot = variant(tmp_path, sharer_priority=0)
    for engine in ("greedy", "cpsat"):
        plan = schedule(snapshot, engine)
        assert plan["assignments"] == [] and plan["preemptions"] == [], engine
        assert [u["pod"] for u in plan["unschedulable"]] == ["ml/urgent"]

"""``adminAccess`` requests (DRAAdminAccess): their devices may already be held by other claims
and are not held by them, only in namespaces labelled ``resource.kubernetes.io/admin-access:
"true"``; the allocation says ``adminAccess: true``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples/snapshots/dra/admin-access.yaml"
CLI = Path(sys.executable).with_name("cpsat-scheduler")


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(CLI), *args], capture_output=True, text=True)


@pytest.mark.parametrize("engine", ["greedy", "cpsat"])
def test_admin_access_reads_held_devices_and_holds_none(engine: str, tmp_path: Path) -> None:
    out = _run("schedule", "--engine", engine, "-o", "json", str(EXAMPLE))
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    placed = {a["pod"]: a["node"] for a in data["assignments"]}
    assert placed == {"monitoring/inspect-n0": "n0", "monitoring/inspect-n1": "n1", "ml/infer": "n1"}
    given = {a["claim"]: [(r["device"], r.get("adminAccess", False)) for r in a["allocation"]["devices"]["results"]]
             for a in data["allocations"]}
    assert given == {"monitoring/inspect-n0-gpus-": [("gpu-0", True), ("gpu-1", True)],  # ml/train's GPUs
                     "monitoring/inspect-n1-gpus-": [("gpu-0", True)],
                     "ml/infer-gpus-": [("gpu-0", False)]}  # the GPU inspect-n1 looks at is still free for it
    (debug,) = data["unschedulable"]
    assert debug["pod"] == "ml/debug"
    assert ('request gpus asks for admin access, which namespace ml does not allow '
            '(it lacks the label resource.kubernetes.io/admin-access: "true")') in debug["message"]
    plan = tmp_path / "plan.json"
    plan.write_text(out.stdout)
    ok = _run("validate", str(EXAMPLE), str(plan))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    # Without adminAccess the same result takes ml/train's GPU: refused on both counts.
    for a in data["allocations"]:
        if a["claim"] == "monitoring/inspect-n0-gpus-":
            del a["allocation"]["devices"]["results"][0]["adminAccess"]
    plan.write_text(json.dumps(data))
    bad = _run("validate", str(EXAMPLE), str(plan))
    assert bad.returncode == 1
    text = bad.stdout + bad.stderr
    assert "device gpu.example.com/n0/gpu-0 is given to 2 claims: ml/train-gpus, monitoring/inspect-n0-gpus-" in text
    assert ("resourceclaim monitoring/inspect-n0-gpus-: device gpu.example.com/n0/gpu-0 of request gpus: "
            "adminAccess is false, the request's is true") in text


def test_a_plan_giving_admin_access_in_an_unlabelled_namespace_is_refused(tmp_path: Path) -> None:
    out = _run("schedule", "--engine", "greedy", "-o", "json", str(EXAMPLE))
    data = json.loads(out.stdout)
    data["assignments"].append({"pod": "ml/debug", "node": "n1"})
    data["unschedulable"] = []
    data["allocations"].append({"claim": "ml/debug-gpus-", "pods": ["ml/debug"], "allocation": {"devices": {"results": [
        {"request": "gpus", "driver": "gpu.example.com", "pool": "n1", "device": "gpu-0", "adminAccess": True}]}}})
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(data))
    bad = _run("validate", str(EXAMPLE), str(plan))
    assert bad.returncode == 1
    assert "dra: resourceclaim ml/debug-gpus-: request gpus asks for admin access, which namespace ml does not allow" \
        in bad.stdout + bad.stderr

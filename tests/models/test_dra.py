"""Reading Dynamic Resource Allocation objects (``models.dra``) from dumps: what a claim of a
pod resolves to, and bad input refused naming the object and field."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from adapters.snapshot_io import load_snapshot
from models import InputError
from models.dra import template_claim_name

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples/snapshots/dra/gpus.yaml"
CLI = Path(sys.executable).with_name("cpsat-scheduler")


def example_items() -> list[dict]:
    return yaml.safe_load(EXAMPLE.read_text())["items"]


def dump(tmp_path: Path, items: list[dict]) -> Path:
    path = tmp_path / "snap.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


def test_example_objects_and_pod_claims() -> None:
    snap = load_snapshot(EXAMPLE)
    assert [c.name for c in snap.device_classes] == ["gpu.example.com", "big-gpu.example.com"]
    assert len(snap.resource_slices) == 2 and len(snap.resource_slices[0].spec.devices) == 4
    gpu = snap.resource_slices[0].spec.devices[0]
    assert gpu.attributes["model"].value == "a100"
    assert gpu.capacity["memory"].value == 80 * 2**30
    claims = {p.metadata.name: snap.pod_claims(p) for p in snap.pods}
    assert [(c.key, c.from_template) for c in claims["serving"]] == [("ml/held", False)]
    held = claims["serving"][0].claim
    assert held is not None and held.status.allocation is not None
    assert held.status.allocation.devices.results[0].device == "gpu-0"
    # status.resourceClaimStatuses names the claim the controller made
    assert [c.key for c in claims["worker"]] == ["ml/worker-gpu-x7k2q"]
    # no status, no claim owned by the pod: the template's claim, named as the controller would
    (made,) = claims["notebook"]
    assert made.from_template and made.key == "ml/notebook-gpu-"
    assert made.claim is not None and made.claim.spec.devices.requests[0].exactly.device_class_name == "gpu.example.com"
    assert snap.pods[1].spec.containers[0].resources.claims[0].name == "gpus"


def test_claim_owned_by_pod_is_found_without_status(tmp_path: Path) -> None:
    items = example_items()
    for item in items:
        if item["kind"] == "Pod" and item["metadata"]["name"] == "worker":
            del item["status"]["resourceClaimStatuses"]
    snap = load_snapshot(dump(tmp_path, items))
    worker = next(p for p in snap.pods if p.metadata.name == "worker")
    assert [(c.key, c.from_template) for c in snap.pod_claims(worker)] == [("ml/worker-gpu-x7k2q", False)]


def test_missing_claim_and_template_make_the_pod_wait(tmp_path: Path) -> None:
    items = [i for i in example_items() if i["kind"] not in ("ResourceClaimTemplate",)
             and i["metadata"]["name"] != "pair-nvlink"]
    snap = load_snapshot(dump(tmp_path, items))
    by = {p.metadata.name: snap.pod_claims(p) for p in snap.pods}
    assert by["train-pair"][0].claim is None and "resourceclaim ml/pair-nvlink does not exist" in by["train-pair"][0].waiting
    assert "resourceclaimtemplate ml/one-gpu does not exist" in by["notebook"][0].waiting


def test_status_without_claim_name_means_no_claim_needed(tmp_path: Path) -> None:
    items = example_items()
    for item in items:
        if item["kind"] == "Pod" and item["metadata"]["name"] == "notebook":
            item["status"]["resourceClaimStatuses"] = [{"name": "gpu"}]
    snap = load_snapshot(dump(tmp_path, items))
    nb = next(p for p in snap.pods if p.metadata.name == "notebook")
    assert [(c.needed, c.claim) for c in snap.pod_claims(nb)] == [(False, None)]


def test_template_claim_name_is_cut_in_proportion() -> None:
    assert template_claim_name("web", "gpu") == "web-gpu-"
    long = template_claim_name("p" * 60, "c" * 30)
    assert len(long) <= 58 and long.startswith("p") and "-c" in long and long.endswith("-")


@pytest.mark.parametrize("mutate, obj, field", [
    (lambda i: i[3]["spec"]["devices"][0].update(basics=1), "resourceslices/gpu-node-0-gpu.example.com",
     "spec.devices[0].basics"),
    (lambda i: i[3]["spec"]["devices"][0]["capacity"]["memory"].update(value="80Gx"),
     "resourceslices/gpu-node-0-gpu.example.com", "spec.devices[0].capacity.memory.value"),
    (lambda i: i[3]["spec"]["devices"][0]["attributes"]["model"].update(int=3),
     "resourceslices/gpu-node-0-gpu.example.com", "spec.devices[0].attributes.model"),
    (lambda i: i[7]["spec"]["devices"]["requests"][0]["exactly"].update(allocationMode="Some"),
     "resourceclaims/ml/pair-nvlink", "spec.devices.requests[0].exactly.allocationMode"),
    (lambda i: i[7]["spec"]["devices"]["constraints"][0].update(distinctAttribute="x"),
     "resourceclaims/ml/pair-nvlink", "spec.devices.constraints[0]"),
    (lambda i: i[0].update(apiVersion="resource.k8s.io/v1beta1"), "deviceclasses/gpu.example.com", "apiVersion"),
    (lambda i: i[0]["spec"].update(selector=[]), "deviceclasses/gpu.example.com", "spec.selector"),
])
def test_bad_dra_field_is_refused_naming_object_and_field(tmp_path: Path, mutate, obj: str, field: str) -> None:
    items = example_items()
    mutate(items)
    with pytest.raises(InputError) as caught:
        load_snapshot(dump(tmp_path, items))
    assert caught.value.obj == obj and caught.value.field == field, str(caught.value)


def test_cli_exits_2_on_a_bad_slice(tmp_path: Path) -> None:
    items = example_items()
    items[3]["spec"]["pool"]["generation"] = "one"
    proc = subprocess.run([str(CLI), "schedule", str(dump(tmp_path, items))],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2, proc.stderr
    assert "resourceslices/gpu-node-0-gpu.example.com: spec.pool.generation" in proc.stderr
    assert "Traceback" not in proc.stderr


SHARED = ROOT / "examples/snapshots/dra/shared-capacity.yaml"
_GPU = "resourceslices/n0-gpus"
_MEM = "spec.devices[0].capacity.memory"


def _gpu(items: list[dict]) -> dict:
    return next(i for i in items if i["kind"] == "ResourceSlice")["spec"]["devices"][0]


def _policy(items: list[dict]) -> dict:
    return _gpu(items)["capacity"]["memory"]["requestPolicy"]


@pytest.mark.parametrize("mutate, field, words", [
    # (the example: 80Gi, default 10Gi, validRange min 10Gi step 10Gi)
    (lambda i: _policy(i)["validRange"].update(step="0"), f"{_MEM}.requestPolicy.validRange", "step"),
    (lambda i: _policy(i)["validRange"].update(max="5Gi"), f"{_MEM}.requestPolicy.validRange", "max"),
    (lambda i: _policy(i).update(validValues=["10Gi", "20Gi"]), f"{_MEM}.requestPolicy", "validValues"),
    (lambda i: _policy(i).pop("default"), f"{_MEM}.requestPolicy", "default"),
    (lambda i: _policy(i).update(default="5Gi"), f"{_MEM}.requestPolicy", "default"),
    (lambda i: (_policy(i).pop("validRange"), _policy(i).update(validValues=["40Gi", "10Gi"])),
     f"{_MEM}.requestPolicy", "ascending"),
    (lambda i: (_policy(i).pop("validRange"), _policy(i).update(validValues=["10Gi", "40Gi"], default="20Gi")),
     f"{_MEM}.requestPolicy", "default"),
    (lambda i: _policy(i)["validRange"].update(max="160Gi"), _MEM, "max"),
    (lambda i: (_policy(i)["validRange"].update(min="100Gi"), _policy(i).update(default="100Gi")), _MEM, "above the capacity"),
    (lambda i: _gpu(i).pop("allowMultipleAllocations"), "spec.devices[0]", "allowMultipleAllocations"),
])
def test_a_request_policy_the_api_server_would_refuse_is_refused(tmp_path: Path, mutate, field: str, words: str) -> None:
    """Kubernetes validates a capacity's requestPolicy (one of validValues / validRange, a default
    inside it, a positive step, values ascending, nothing above the capacity, only on devices
    that allow multiple allocations); the scheduler would otherwise read such a slice some way
    of its own (the first list wins, a zero step is no step, ...) and hand out shares by it."""
    items = yaml.safe_load(SHARED.read_text())["items"]
    mutate(items)
    with pytest.raises(InputError) as caught:
        load_snapshot(dump(tmp_path, items))
    assert (caught.value.obj, caught.value.field) == (_GPU, field), str(caught.value)
    assert words in str(caught.value)


def test_the_shared_capacity_example_policy_is_read() -> None:
    snap = load_snapshot(SHARED)
    policy = snap.resource_slices[0].spec.devices[0].capacity["memory"].request_policy
    assert policy is not None and policy.valid_range is not None and policy.valid_range.step == 10 * 2**30


def test_cli_exits_2_on_a_bad_request_policy(tmp_path: Path) -> None:
    items = yaml.safe_load(SHARED.read_text())["items"]
    _policy(items)["validRange"]["step"] = "0"
    proc = subprocess.run([str(CLI), "schedule", str(dump(tmp_path, items))], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2, proc.stderr
    assert f"{_GPU}: {_MEM}.requestPolicy.validRange" in proc.stderr and "Traceback" not in proc.stderr

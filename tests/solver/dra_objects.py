"""Small builders of Dynamic Resource Allocation objects for the operator questions' tests:
a GPU DeviceClass, one node's ResourceSlice of GPUs, a template asking for N of them, a pod
with a claim from it, and an allocated claim a running pod holds."""

from __future__ import annotations

from typing import Optional

from models.dra import DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice
from models.objects import Pod, PodResourceClaim, ResourceClaimRef, copy_with

DRIVER = "gpu.example.com"


def gpu_class() -> DeviceClass:
    return DeviceClass.model_validate({"metadata": {"name": DRIVER}, "spec": {
        "selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}})


def gpu_slice(node: str, gpus: int) -> ResourceSlice:
    return ResourceSlice.model_validate({"metadata": {"name": f"{node}-gpus"}, "spec": {
        "driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": f"gpu-{i}"} for i in range(gpus)]}})


def gpu_template(key: str, count: int) -> ResourceClaimTemplate:
    ns, _, name = key.partition("/")
    return ResourceClaimTemplate.model_validate({"metadata": {"name": name, "namespace": ns}, "spec": {"spec": {
        "devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": DRIVER, "count": count}}]}}}})


def with_claim(pod: Pod, template: Optional[str] = None, claim: Optional[str] = None) -> Pod:
    """``pod`` with one entry ``gpus``: from ``template`` (a name) or the named ``claim``."""
    entry = PodResourceClaim.model_validate(
        {"name": "gpus", **({"resourceClaimTemplateName": template} if template else {"resourceClaimName": claim})})
    main = pod.spec.containers[0]
    main = copy_with(main, {"resources": copy_with(main.resources, {"claims": [ResourceClaimRef(name="gpus")]})})
    return copy_with(pod, {"spec": copy_with(pod.spec, {"resource_claims": [entry],
                                                         "containers": [main, *pod.spec.containers[1:]]})})


def allocated_claim(key: str, node: str, devices: list[str], pod: str) -> ResourceClaim:
    """A claim holding ``devices`` of ``node``'s pool, reserved for pod ``pod`` (its name)."""
    ns, _, name = key.partition("/")
    return ResourceClaim.model_validate({"metadata": {"name": name, "namespace": ns}, "spec": {"devices": {
        "requests": [{"name": "gpus", "exactly": {"deviceClassName": DRIVER, "count": len(devices)}}]}},
        "status": {"allocation": {"devices": {"results": [
            {"request": "gpus", "driver": DRIVER, "pool": node, "device": d} for d in devices]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]}]}]}},
            "reservedFor": [{"resource": "pods", "name": pod, "uid": ""}]}})

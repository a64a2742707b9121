"""The generated provisioning workload with GPUs as DRA devices (``--devices``): every pod placed,
each GPU pod on a node with devices, never dearer than first-fit-decreasing."""

from __future__ import annotations

import pytest

from adapters.provision_workload import DEVICE_SHAPES, SHAPES, workload
from models.config import SchedulerConfig
from solver.provision import parse_shapes, provision

CONFIG = SchedulerConfig.model_validate({"solver": {"timeLimitSeconds": 10, "workers": 2}})


@pytest.mark.parametrize("seed", [0, 1])
def test_gpu_pods_as_claims_are_provisioned_on_shapes_with_devices(seed: int) -> None:
    snap = workload(120, seed, devices=True)
    shapes = parse_shapes([s for s in SHAPES if s["name"] != "gpu"] + DEVICE_SHAPES, default_max=120)
    r = provision(snap, CONFIG, shapes)
    gpu_pods = {p.key for p in snap.pods if p.spec.resource_claims and not p.spec.node_name}
    placed = {k: n for k, n in r.placement.items() if k in gpu_pods}
    assert placed and not r.left_out and not r.nowhere
    assert r.cost <= r.ffd_cost
    assert all(n == "old-gpu" or n.startswith("gpu") for n in placed.values()), placed

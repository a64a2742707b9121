"""A generated provisioning workload: a small running cluster and many pending pods that do not
fit it, over five node shapes (general, large, high-memory, GPU with its taint, a zone-pinned
small one); and the comparison ``provision`` makes against first-fit-decreasing on it.

    python -m adapters.provision_workload --pods 1000 --seeds 0 1 2 3 4
    python -m adapters.provision_workload --pods 200 --devices

``--devices``: the GPUs are DRA devices rather than an extended resource — training pods ask
for 1, 2 or 4 GPUs through ResourceClaimTemplates of DeviceClass ``gpu.example.com``, the GPU
shapes carry 4 or 8 devices (``devices:``), and one running node has 4 GPUs, 2 of them held by a
running pod's claim. Prints, per seed, the nodes added and their cost for both, the model's status and gap, and
whether the engine placed every pod on the provisioned cluster.
"""

from __future__ import annotations

import argparse
import random
import sys
import time

from models.config import SchedulerConfig
from models.objects import Node, Pod
from models.snapshot import ClusterSnapshot
from solver.provision import parse_shapes, provision

SCHEDULER = "cpsat-scheduler"
SHAPES = [
    {"name": "general", "labels": {"node.kubernetes.io/instance-type": "general"},
     "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}, "cost": 0.20},
    {"name": "large", "labels": {"node.kubernetes.io/instance-type": "large"},
     "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"}, "cost": 0.77},
    {"name": "highmem", "labels": {"node.kubernetes.io/instance-type": "highmem"},
     "allocatable": {"cpu": "8", "memory": "128Gi", "pods": "110"}, "cost": 1.01},
    {"name": "gpu", "labels": {"node.kubernetes.io/instance-type": "gpu", "accelerator": "a10"},
     "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
     "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110", "nvidia.com/gpu": "4"}, "cost": 2.50},
    {"name": "spot-small", "labels": {"node.kubernetes.io/instance-type": "spot-small", "lifecycle": "spot"},
     "taints": [{"key": "lifecycle", "value": "spot", "effect": "NoSchedule"}],
     "allocatable": {"cpu": "2", "memory": "8Gi", "pods": "110"}, "cost": 0.06, "zones": {"a": 100, "b": 100}},
]

# --devices: the GPU shape as DRA devices, and a larger one.
DRIVER = "gpu.example.com"
DEVICE_SHAPES = [
    {"name": "gpu", "labels": {"node.kubernetes.io/instance-type": "gpu"},
     "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
     "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}, "cost": 2.50,
     "devices": [{"driver": DRIVER, "count": 4, "name": "gpu", "attributes": {"model": "a10"}}]},
    {"name": "gpu8", "labels": {"node.kubernetes.io/instance-type": "gpu8"},
     "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
     "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"}, "cost": 4.60,
     "devices": [{"driver": DRIVER, "count": 8, "name": "gpu", "attributes": {"model": "a10"}}]},
]

# (name, cpu, memory, extra, weight)
KINDS = [
    ("web", "500m", "1Gi", {}, 30), ("api", "1", "2Gi", {}, 20), ("batch", "3", "6Gi", {}, 15),
    ("cache", "1", "24Gi", {}, 8), ("train", "2", "8Gi", {"gpu": 1}, 5), ("spot", "1500m", "3Gi", {"spot": True}, 12),
    ("worker", "2", "4Gi", {}, 10),
]


def _pod(name: str, kind: tuple, rng: random.Random, devices: bool = False) -> Pod:
    kname, cpu, memory, extra, _ = kind
    requests: dict = {"cpu": cpu, "memory": memory}
    spec: dict = {"schedulerName": SCHEDULER, "containers": [{"name": "c", "image": "x", "resources": {"requests": requests}}]}
    if extra.get("gpu") and devices:
        gpus = rng.choice([1, 1, 2, 4])
        spec["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": f"gpus-{gpus}"}]
        spec["containers"][0]["resources"]["claims"] = [{"name": "gpus"}]
        spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    elif extra.get("gpu"):
        requests["nvidia.com/gpu"] = str(extra["gpu"])
        spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    if extra.get("spot"):
        spec["nodeSelector"] = {"lifecycle": "spot"}
        spec["tolerations"] = [{"key": "lifecycle", "operator": "Equal", "value": "spot", "effect": "NoSchedule"}]
    return Pod.model_validate({"metadata": {"name": name, "namespace": kname, "labels": {"app": kname}}, "spec": spec})


def workload(pods: int, seed: int, *, devices: bool = False) -> ClusterSnapshot:
    rng = random.Random(seed)
    nodes = [Node.model_validate({"metadata": {"name": f"old-{i}", "labels": {"kubernetes.io/hostname": f"old-{i}"}},
                                  "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}}})
             for i in range(5)]
    weights = [k[4] for k in KINDS]
    out = [_pod(f"p{i}", rng.choices(KINDS, weights)[0], rng, devices) for i in range(pods)]
    if not devices:
        return ClusterSnapshot.build(nodes=nodes, pods=out)
    return ClusterSnapshot.build(nodes=nodes, pods=out, **_devices(nodes, out))


def _devices(nodes: list[Node], pods: list[Pod]) -> dict:
    """The DRA objects of ``--devices``: the class, templates of 1, 2 and 4 GPUs, and a running
    GPU node whose pod's claim holds 2 of its 4 GPUs."""
    from models.dra import DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice

    nodes.append(Node.model_validate({"metadata": {"name": "old-gpu", "labels": {
        "kubernetes.io/hostname": "old-gpu", "node.kubernetes.io/instance-type": "gpu"}},
        "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}}}))
    pods.append(Pod.model_validate({"metadata": {"name": "running", "namespace": "train"}, "spec": {
        "nodeName": "old-gpu", "resourceClaims": [{"name": "gpus", "resourceClaimName": "running-gpus"}],
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}, "claims": [{"name": "gpus"}]}}]},
        "status": {"phase": "Running"}}))
    one = {"request": "gpus", "driver": DRIVER, "pool": "old-gpu"}
    return {
        "device_classes": [DeviceClass.model_validate({"metadata": {"name": DRIVER}, "spec": {
            "selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}})],
        "resource_slices": [ResourceSlice.model_validate({"metadata": {"name": "old-gpu"}, "spec": {
            "driver": DRIVER, "nodeName": "old-gpu", "pool": {"name": "old-gpu", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": f"gpu-{i}", "attributes": {"model": {"string": "a10"}}} for i in range(4)]}})],
        "resource_claim_templates": [ResourceClaimTemplate.model_validate({
            "metadata": {"name": f"gpus-{n}", "namespace": "train"}, "spec": {"spec": {"devices": {"requests": [
                {"name": "gpus", "exactly": {"deviceClassName": DRIVER, "count": n}}]}}}}) for n in (1, 2, 4)],
        "resource_claims": [ResourceClaim.model_validate({"metadata": {"name": "running-gpus", "namespace": "train"},
            "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": DRIVER, "count": 2}}]}},
            "status": {"allocation": {"devices": {"results": [{**one, "device": "gpu-0"}, {**one, "device": "gpu-1"}]}},
                       "reservedFor": [{"resource": "pods", "name": "running", "uid": ""}]}})],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m adapters.provision_workload")
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--time-limit", type=float, default=30.0)
    parser.add_argument("--workers", type=int, default=0, help="CP-SAT workers (0: automatic, 8)")
    parser.add_argument("--devices", action="store_true", help="GPUs as DRA devices (claims, shapes with devices:)")
    args = parser.parse_args(argv)
    config = SchedulerConfig.model_validate({"solver": {"timeLimitSeconds": args.time_limit, "workers": args.workers}})
    listed = [s for s in SHAPES if s["name"] != "gpu"] + DEVICE_SHAPES if args.devices else SHAPES
    shapes = parse_shapes(listed, default_max=args.pods)
    print(f"{'seed':>4} {'pending':>7} {'ffd nodes':>9} {'ffd cost':>9} {'cpsat nodes':>11} {'cpsat cost':>10} "
          f"{'status':>8} {'gap':>6} {'all placed':>10} {'seconds':>7}")
    worse = 0
    for seed in args.seeds:
        start = time.monotonic()
        r = provision(workload(args.pods, seed, devices=args.devices), config, shapes)
        gap = "-" if r.gap is None else f"{r.gap:.2%}"
        print(f"{seed:>4} {r.pending:>7} {r.ffd_nodes:>9} {r.ffd_cost / 1000:>9.2f} {len(r.added):>11} "
              f"{r.cost / 1000:>10.2f} {r.status:>8} {gap:>6} {str(not r.left_out):>10} {time.monotonic() - start:>7.1f}")
        worse += r.cost > r.ffd_cost
        if r.nowhere:
            print(f"     {len(r.nowhere)} pod(s) no shape could take, e.g. {next(iter(r.nowhere.values()))}")
    return 1 if worse else 0


if __name__ == "__main__":
    sys.exit(main())

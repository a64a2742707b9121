"""Pods whose claims are all still to be made from equal templates share one model class, and the
model counts their devices per class: ``count`` devices per pod placed, ``matchAttribute`` as
pods per attribute value (not devices per value), each plan valid."""

from __future__ import annotations

from typing import Any

from adapters.bench.parse import to_snapshot
from models import SchedulerConfig
from solver.api import schedule
from solver.context import build_context
from solver.validate import validate

DRIVER = "gpu.example.com"


def cluster(domains: list[int], pods: int, count: int, *, match: bool = True, held: int = 0) -> list[dict[str, Any]]:
    """One node whose GPUs are in NVLink islands of the given sizes; ``pods`` pods asking for
    ``count`` GPUs each through one template (in one island with ``match``). ``held``: pods of
    the template made and allocated already (their claims named, not from the template)."""
    devices = [{"name": f"gpu-{d}-{i}", "attributes": {"island": {"int": d}}}
               for d, size in enumerate(domains) for i in range(size)]
    request = {"name": "gpus", "exactly": {"deviceClassName": DRIVER, "count": count}}
    spec: dict[str, Any] = {"devices": {"requests": [request]}}
    if match:
        spec["devices"]["constraints"] = [{"matchAttribute": f"{DRIVER}/island"}]
    items: list[dict[str, Any]] = [
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": DRIVER},
         "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}},
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n0"},
         "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"}}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "n0-gpus"},
         "spec": {"driver": DRIVER, "nodeName": "n0", "pool": {"name": "n0", "generation": 1, "resourceSliceCount": 1},
                  "devices": devices}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "gpus", "namespace": "ml"},
         "spec": {"spec": spec}},
    ]
    for i in range(pods):
        items.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}", "namespace": "ml", "uid": f"u{i}"},
                      "spec": {"schedulerName": "cpsat-scheduler",
                               "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "gpus"}],
                               "containers": [{"name": "main", "resources": {"requests": {"cpu": "1"},
                                                                              "claims": [{"name": "gpus"}]}}]}})
    return items


def test_pods_of_one_template_share_a_class_and_fill_the_islands() -> None:
    snap = to_snapshot(cluster([4, 4], 4, 2))
    ctx = build_context(snap, SchedulerConfig())
    assert len(ctx.classes) == 1 and ctx.classes[0].size == 4
    plan = schedule(snap, SchedulerConfig().with_overrides(time_limit_seconds=5.0), engine="cpsat")
    assert len(plan.assignments) == 4 and plan.stats.plan_from == "solver"
    assert validate(snap, plan, SchedulerConfig()) == []
    for a in plan.allocations:  # each pair inside one island
        assert len({r["device"].split("-")[1] for r in a.allocation["devices"]["results"]}) == 1


def test_match_attribute_counts_pods_per_value_not_devices() -> None:
    """Islands of 3 and 3: six free GPUs would take three pairs by count, but a pair needs one
    island, so only two pods fit (one per island)."""
    snap = to_snapshot(cluster([3, 3], 3, 2))
    plan = schedule(snap, SchedulerConfig().with_overrides(time_limit_seconds=5.0), engine="cpsat")
    assert len(plan.assignments) == 2
    assert validate(snap, plan, SchedulerConfig()) == []
    # Without the constraint all three pairs fit in the same six GPUs.
    loose = to_snapshot(cluster([3, 3], 3, 2, match=False))
    plan = schedule(loose, SchedulerConfig().with_overrides(time_limit_seconds=5.0), engine="cpsat")
    assert len(plan.assignments) == 3 and validate(loose, plan, SchedulerConfig()) == []


def test_a_pod_whose_claim_exists_keeps_a_class_of_its_own() -> None:
    items = cluster([4, 4], 3, 2)
    # p0's claim was made by the controller already (named in its status): not a template claim.
    items.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                  "metadata": {"name": "p0-gpus-abcde", "namespace": "ml"},
                  "spec": items[3]["spec"]["spec"]})
    items[4]["status"] = {"resourceClaimStatuses": [{"name": "gpus", "resourceClaimName": "p0-gpus-abcde"}]}
    snap = to_snapshot(items)
    ctx = build_context(snap, SchedulerConfig())
    assert sorted(c.size for c in ctx.classes) == [1, 2]
    plan = schedule(snap, SchedulerConfig().with_overrides(time_limit_seconds=5.0), engine="cpsat")
    assert len(plan.assignments) == 3 and validate(snap, plan, SchedulerConfig()) == []

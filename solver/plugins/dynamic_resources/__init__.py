"""Dynamic Resource Allocation (``resource.k8s.io/v1``; SEMANTICS §3.11): which devices a pod's
ResourceClaims may take on a node, and the allocation itself.

- ``cel.py``: the CEL device selectors (compiled once, evaluated once per device);
- ``devices.py``: the slices' devices, where each can be used, interchangeable devices as kinds;
- ``allocator.py``: kube-scheduler's one-pod-at-a-time allocation with backtracking;
- ``check.py``: the allocation read on a plan's final state, for the validator.

``for_snapshot`` builds the rule for one snapshot.
"""

from __future__ import annotations

from typing import Any

from models.snapshot import ClusterSnapshot

from .allocator import AllocationError, ClaimAllocation, DeviceResult, DraState, Rules
from .devices import Inventory
from .hold import DraHold

NAME = "DynamicResources"

__all__ = ["AllocationError", "ClaimAllocation", "DeviceResult", "DraState", "Inventory", "NAME", "Rules",
           "for_snapshot", "hold_for"]


def for_snapshot(snapshot: ClusterSnapshot) -> Rules:
    """The allocation rule over ``snapshot``'s slices, classes and claims (built once per
    snapshot: its compiled selectors and per-device results serve every context of it)."""
    rules = snapshot.__dict__.get("_dra_rules")
    if rules is None:
        rules = Rules(Inventory(snapshot.resource_slices), snapshot.device_class_by_name, snapshot.resource_claims,
                      {ns.metadata.name: dict(ns.metadata.labels) for ns in snapshot.namespaces})
        snapshot.__dict__["_dra_rules"] = rules
    return rules


def hold_for(snapshot: ClusterSnapshot, nodes: list[Any], *, free_devices: bool = False) -> DraHold:
    """A fresh ``DraHold`` for a state of ``snapshot`` (the snapshot's allocations held);
    ``free_devices``: config ``preemption.freeDevices`` (evicting a claim's pods frees it)."""
    rules = for_snapshot(snapshot)
    return DraHold(rules, snapshot, nodes, rules.initial_state(), free_devices=free_devices)

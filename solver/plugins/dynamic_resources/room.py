"""Devices as provisioning's room (``plugin_api.KindRoom``): per node, the devices one pod takes
of each node-local kind, counted as the packing hint counts them (``hint.devices_per_kind``) —
exact when the pod's claims are all still to be made from templates and each request may take
one kind only there — and the free devices of a node's own kinds."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from ...info import NodeInfo, PodInfo
from ...state import ClusterState
from .allocator import AllocationError
from .hint import devices_per_kind
from .hold import hold_of


class DeviceRoom:
    """DynamicResources' ``kind_room``: kinds are the inventory's kind indexes."""

    def taken(self, state: ClusterState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Optional[list[dict[int, int]]]:
        dra = hold_of(state)
        if dra is None or not pod.devices_key:
            return None
        claims = dra.claims_of(pod)
        out = []
        try:
            for node in nodes:
                row = devices_per_kind(dra.rules, claims, node.node)
                out.append({k: v for k, v in (row or {}).items() if v})
        except (LookupError, AllocationError, ValueError):
            return None
        return out

    def free(self, state: ClusterState, node: NodeInfo) -> dict[int, int]:
        dra = hold_of(state)
        if dra is None:
            return {}
        out = {}
        for kind in dra.rules.inventory.kinds_on(node.node):
            if kind.scope.node_name is not None:
                out[kind.index] = sum(1 for r in kind.members if r.id not in dra.state.used)
        return out

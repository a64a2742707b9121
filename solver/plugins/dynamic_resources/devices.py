"""The devices of a snapshot's ResourceSlices, where each can be used, and which are taken.

``Inventory`` reads the slices once: only the newest generation of each pool counts (older
slices are being replaced), a pool with fewer slices than ``resourceSliceCount`` is incomplete
(a request for ``All`` devices cannot be decided from it), and identical devices of one pool —
same attributes, capacity, counter consumption, taints and nodes — are one ``DeviceKind``, so
that a search or a model counts devices of a kind instead of naming each.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Optional

from models.dra import AllocationResult, Device, ResourceClaim, ResourceSlice
from models.objects import Node, NodeSelector

DeviceId = tuple[str, str, str]  # (driver, pool, device)


@dataclass(frozen=True, eq=False)
class Scope:
    """The nodes a device can be used on: one node by name, the nodes a selector matches, or
    every node."""

    node_name: Optional[str] = None
    selector: Optional[NodeSelector] = None

    def admits(self, node: Node) -> bool:
        if self.node_name is not None:
            return node.name == self.node_name
        if self.selector is not None:
            return self.selector.matches(node.name, node.metadata.labels)
        return True

    def key(self) -> str:
        if self.node_name is not None:
            return f"node:{self.node_name}"
        if self.selector is not None:
            return "selector:" + self.selector.model_dump_json(by_alias=True)
        return "all"


@dataclass(frozen=True, eq=False)
class DeviceRecord:
    driver: str
    pool: str
    device: Device
    scope: Scope
    kind: int = -1  # index into Inventory.kinds

    @property
    def id(self) -> DeviceId:
        return (self.driver, self.pool, self.device.name)


@dataclass(eq=False)
class DeviceKind:
    """Interchangeable devices of one pool: for allocation any one of them is as good as another."""

    index: int
    driver: str
    pool: str
    sample: Device
    scope: Scope
    members: list[DeviceRecord] = field(default_factory=list)


@dataclass(frozen=True)
class PoolInfo:
    driver: str
    name: str
    generation: int
    complete: bool
    # counter set name -> counter name -> total
    counters: dict[str, dict[str, Fraction]]


class Inventory:
    """Every usable device of a snapshot, by identity and by kind."""

    def __init__(self, slices: tuple[ResourceSlice, ...] | list[ResourceSlice]) -> None:
        newest: dict[tuple[str, str], int] = {}
        for s in slices:
            key = (s.spec.driver, s.spec.pool.name)
            newest[key] = max(newest.get(key, -1), s.spec.pool.generation)
        seen_slices: dict[tuple[str, str], int] = {}
        counters: dict[tuple[str, str], dict[str, dict[str, Fraction]]] = {}
        wanted: dict[tuple[str, str], int] = {}
        self.devices: dict[DeviceId, DeviceRecord] = {}
        self.kinds: list[DeviceKind] = []
        self.duplicates: list[DeviceId] = []
        kind_by_key: dict[tuple, DeviceKind] = {}
        for s in slices:
            spec = s.spec
            key = (spec.driver, spec.pool.name)
            if spec.pool.generation != newest[key]:
                continue
            seen_slices[key] = seen_slices.get(key, 0) + 1
            wanted[key] = spec.pool.resource_slice_count
            sets = counters.setdefault(key, {})
            for cs in spec.shared_counters:
                sets[cs.name] = {name: c.value for name, c in cs.counters.items()}
            for device in spec.devices:
                if spec.per_device_node_selection:
                    scope = Scope(device.node_name or None, device.node_selector)
                else:
                    scope = Scope(spec.node_name or None, spec.node_selector)
                record = DeviceRecord(spec.driver, spec.pool.name, device, scope)
                if record.id in self.devices:
                    self.duplicates.append(record.id)
                    continue
                kkey = (spec.driver, spec.pool.name, scope.key(), _device_shape(device))
                kind = kind_by_key.get(kkey)
                if kind is None:
                    kind = DeviceKind(len(self.kinds), spec.driver, spec.pool.name, device, scope)
                    kind_by_key[kkey] = kind
                    self.kinds.append(kind)
                record = DeviceRecord(spec.driver, spec.pool.name, device, scope, kind.index)
                kind.members.append(record)
                self.devices[record.id] = record
        self._on: dict[str, tuple[Node, list[DeviceKind]]] = {}
        self._local: Optional[dict[str, list[DeviceKind]]] = None
        self._wide: list[DeviceKind] = []
        self.pools: dict[tuple[str, str], PoolInfo] = {
            key: PoolInfo(key[0], key[1], newest[key], seen_slices.get(key, 0) >= wanted.get(key, 1),
                          counters.get(key, {}))
            for key in newest
        }

    def kinds_on(self, node: Node) -> list[DeviceKind]:
        """The kinds ``node`` can use, in the slices' order (read once per node)."""
        hit = self._on.get(node.name)
        if hit is None or hit[0] is not node:
            if self._local is None:
                self._local = {}
                self._wide = []
                for k in self.kinds:
                    if k.scope.node_name is not None:
                        self._local.setdefault(k.scope.node_name, []).append(k)
                    else:
                        self._wide.append(k)
            found = [*self._local.get(node.name, ()), *(k for k in self._wide if k.scope.admits(node))]
            found.sort(key=lambda k: k.index)
            hit = self._on[node.name] = (node, found)
        return hit[1]


def _device_shape(device: Device) -> str:
    """Everything about a device but its name, as text: equal text, interchangeable devices."""
    data: dict[str, Any] = device.model_dump(mode="json", by_alias=True, exclude={"name"}, exclude_none=True)
    return json.dumps(data, sort_keys=True, default=str)


def allocated_devices(claims: list[ResourceClaim] | tuple[ResourceClaim, ...]) -> dict[DeviceId, str]:
    """Devices already in a claim's ``status.allocation`` (admin access aside), with the claim
    that holds each."""
    taken: dict[DeviceId, str] = {}
    for claim in claims:
        allocation = claim.status.allocation
        if allocation is None:
            continue
        for r in allocation.devices.results:
            if not r.admin_access:
                taken.setdefault((r.driver, r.pool, r.device), claim.key)
    return taken


def allocation_devices(allocation: AllocationResult) -> list[DeviceId]:
    return [(r.driver, r.pool, r.device) for r in allocation.devices.results if not r.admin_access]

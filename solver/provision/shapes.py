"""Node shapes ``provision`` may add: labels, taints, allocatable, devices, a cost and how many.

From a file (``parse_shapes``: a list of mappings, each checked, an error naming the entry and
field; what an entry leaves out that every real node has — os and arch labels, pod slots, disk —
filled in by ``defaults``; an entry with ``zones:`` is one shape per zone, its ``maxCount``
bounding their nodes in all) or from the cluster's own nodes (``shapes_from_nodes``: nodes alike
in labels — less their name — taints, allocatable and own devices make one shape, costed by the
config's ``repack.instanceCost`` per instance type, else ``repack.defaultNodeCost``; they carry
their nodes' labels and allocatable as they are).

Costs are kept in thousandths (integers for CP-SAT): 0.192 is 192.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Iterable, Optional

from models.config import SchedulerConfig
from models.dra import ResourceSlice
from models.errors import InputError, clipped
from models.objects import Node
from models.resources import is_tracked_resource
from models.snapshot import ClusterSnapshot

from ..whatif.changes import rebuilt
from ..whatif.node_shape import kind_taints
from ..whatif.node_slices import copied_slices, node_slices
from .defaults import NO_ZONE, ZONE, Filled, cluster_defaults, filled_in
from .devices import devices_signature, parse_devices

COST_SCALE = 1000
HOSTNAME = "kubernetes.io/hostname"
# Labels a node carries for itself alone, left out when nodes are grouped into shapes.
NODE_OWN_LABELS = (HOSTNAME,)


@dataclass(frozen=True)
class Shape:
    name: str
    node: Node  # the shape as a Node named ``name`` (labels, taints, allocatable)
    cost: int  # thousandths
    max_count: int
    slices: tuple[ResourceSlice, ...] = ()  # its own devices' slices, as a node of it publishes them (``devices``)
    # The file entry it comes from ("": a shape of the cluster's nodes), and that entry's
    # maxCount: with ``zones:`` one entry is a shape per zone, and maxCount bounds them in all.
    entry: str = ""
    entry_max: Optional[int] = None
    filled: tuple[Filled, ...] = ()  # what the entry left out and the shape got instead (``defaults``)
    entry_at: int = -1  # the entry's place in the file (two entries may share a name: two node groups)

    @property
    def allocatable(self) -> dict[str, int]:
        return self.node.allocatable

    @property
    def device_count(self) -> int:
        return sum(len(s.spec.devices) for s in self.slices)

    def made_slices(self, name: str) -> tuple[ResourceSlice, ...]:
        """The slices a node of this shape named ``name`` publishes (its pools named after it)."""
        return copied_slices(self.slices, name)

    def made(self, name: str) -> Node:
        """A node of this shape named ``name``."""
        labels = dict(self.node.metadata.labels)
        labels[HOSTNAME] = name
        return Node.model_validate({
            "metadata": {"name": name, "labels": labels},
            "spec": {"taints": [t.model_dump(by_alias=True, exclude_none=True) for t in self.node.spec.taints]},
            "status": {"allocatable": {k: str(v) if k != "cpu" else f"{v}m" for k, v in self.allocatable.items()}},
        })


# The largest cost of one node: the model's objective sums costs in thousandths over every node
# it may add, in 64-bit integers (a cost of 1e18 made the model give up for first-fit-decreasing's
# plan without a word; 1e308 was an internal error).
MAX_COST = 1_000_000_000


def _cost(value: Any, where: str) -> int:
    try:
        cost = Decimal(str(value))
    except InvalidOperation:
        raise InputError(where, "cost", f'"{clipped(str(value))}" is not a number') from None
    if not cost.is_finite() or cost < 0:
        raise InputError(where, "cost", f"{clipped(str(value))} must be a number >= 0")
    if cost > MAX_COST:
        raise InputError(where, "cost", f"{clipped(str(value))} is above the largest cost taken, {MAX_COST:,}")
    return int((cost * COST_SCALE).to_integral_value())


def _count(value: Any, where: str, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(where, field, f'"{clipped(str(value))}" must be an integer >= 0')
    return value


def parse_shapes(entries: Any, *, default_max: int, nodes: Iterable[Node] = ()) -> list[Shape]:
    """Shapes from a file's list (see docs/operator-questions.md for the format); ``nodes``, the
    cluster's, give the os and arch labels and the disk an entry leaves out (``defaults``)."""
    if not isinstance(entries, list) or not entries:
        raise InputError("shapes", "", "expected a non-empty list of shapes (or a mapping with key shapes:)")
    defaults = cluster_defaults(nodes)
    out: list[Shape] = []
    for i, entry in enumerate(entries):
        where = f"shapes[{i}]"
        if not isinstance(entry, dict):
            raise InputError(where, "", "expected a mapping")
        unknown = set(entry) - {"name", "labels", "taints", "allocatable", "cost", "maxCount", "zones", "devices"}
        if unknown:
            raise InputError(where, sorted(unknown)[0], "unknown field")
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise InputError(where, "name", "a shape needs a name")
        where = f"shapes[{i}] ({name})"
        allocatable = entry.get("allocatable")
        if not isinstance(allocatable, dict) or not allocatable:
            raise InputError(where, "allocatable", "expected a mapping of resource to quantity")
        for resource in allocatable:
            if not is_tracked_resource(str(resource)):
                raise InputError(where, f"allocatable.{resource}", "unknown resource (cpu, memory, pods, "
                                 "ephemeral-storage, hugepages-*, or an extended resource domain/name)")
        cost = _cost(entry.get("cost", 1), where)
        max_count = _count(entry.get("maxCount", default_max), where, "maxCount")
        slices = parse_devices(entry["devices"], where) if "devices" in entry else ()
        labels = entry.get("labels") or {}
        if not isinstance(labels, dict):
            raise InputError(where, "labels", "expected a mapping of label to value")
        labels, allocatable, filled = filled_in(labels, allocatable, defaults)
        entry = dict(entry, labels=labels, allocatable=allocatable)
        zones = entry.get("zones")
        if zones is None:
            filled += (NO_ZONE,) if ZONE not in labels else ()
            out.append(Shape(name, _node(name, entry, where, None), cost, max_count, slices, name, max_count, filled, i))
            continue
        if not isinstance(zones, dict) or not zones:
            raise InputError(where, "zones", "expected a mapping of zone to the most nodes there")
        for zone, count in zones.items():
            zoned = f"{name}@{zone}"
            # A zone's own count bounds it there; maxCount bounds the entry's zones in all
            # (``entry_limits``), as a node group's maximum does.
            out.append(Shape(zoned, _node(zoned, entry, where, str(zone)), cost,
                             min(max_count, _count(count, where, f"zones.{zone}")), slices, name, max_count, filled, i))
    names = [s.name for s in out]
    if len(set(names)) != len(names):
        raise InputError("shapes", "name", "two shapes share a name")
    return out


def entry_limits(shapes: list[Shape]) -> list[tuple[list[int], int]]:
    """The shapes (indexes) of each file entry with zones whose ``maxCount`` is below what its
    zones allow together, and that maxCount: their nodes in all are at most it."""
    members: dict[int, list[int]] = {}
    for i, shape in enumerate(shapes):
        if shape.entry_at >= 0:
            members.setdefault(shape.entry_at, []).append(i)
    out = []
    for group in members.values():
        most = shapes[group[0]].entry_max
        if len(group) > 1 and most is not None and most < sum(shapes[i].max_count for i in group):
            out.append((group, most))
    return out


def _node(name: str, entry: dict, where: str, zone: Optional[str]) -> Node:
    labels = dict(entry["labels"])
    if zone is not None:
        labels[ZONE] = zone
    try:
        return Node.model_validate({"metadata": {"name": name, "labels": labels},
                                    "spec": {"taints": entry.get("taints") or []},
                                    "status": {"allocatable": entry["allocatable"]}})
    except ValueError as exc:
        first = str(exc).splitlines()
        raise InputError(where, "", " ".join(first[:3])[:300]) from None


def shapes_from_nodes(snapshot: ClusterSnapshot, config: SchedulerConfig, *, max_count: int) -> list[Shape]:
    """One shape per group of alike nodes, named after the group's first node."""
    seen: dict[tuple, Shape] = {}
    repack = config.repack
    for node in snapshot.nodes:
        labels = {k: v for k, v in node.metadata.labels.items() if k not in NODE_OWN_LABELS}
        kept = kind_taints(node.spec.taints)  # not its cordon, not-ready, ... (``node_shape``)
        taints = tuple((t.key, t.value, t.effect) for t in kept)
        slices = node_slices(snapshot, node.metadata.name)
        key = (tuple(sorted(labels.items())), taints, tuple(sorted(node.allocatable.items())),
               devices_signature(slices))
        if key in seen:
            continue
        instance = labels.get(repack.node_cost_label, "")
        cost = _cost(repack.instance_cost.get(instance, repack.default_node_cost), f"nodes/{node.metadata.name}")
        name = f"like-{node.metadata.name}"
        shaped = Node.model_validate({
            "metadata": {"name": name, "labels": labels},
            "spec": {"taints": [t.model_dump(by_alias=True, exclude_none=True) for t in kept]},
            "status": {"allocatable": {k: str(v) if k != "cpu" else f"{v}m" for k, v in node.allocatable.items()}},
        })
        seen[key] = Shape(name, shaped, cost, max_count, slices)
    return list(seen.values())


def with_new_nodes(base: ClusterSnapshot, new: list[tuple[Shape, str]]) -> ClusterSnapshot:
    """``base`` with a node of each ``(shape, name)`` added, and its devices' slices."""
    nodes = base.nodes + tuple(shape.made(name) for shape, name in new)
    slices = tuple(s for shape, name in new for s in shape.made_slices(name))
    return rebuilt(base, nodes=nodes, resource_slices=base.resource_slices + slices) if slices else rebuilt(base, nodes=nodes)

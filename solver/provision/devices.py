"""The DRA devices a node shape carries, and what a pod class takes of them.

A shape taken from an existing node carries that node's own ResourceSlices, copied to each new
node of it (``whatif.node_slices``). A shape from a file lists its devices (``devices:``, see
``parse_devices``), published as one slice per driver.

What a class takes (``class_devices``): per node it may go to, the devices one of its pods takes
of each kind, as every rule with a ``kind_room`` counts them (``plugin_api.KindRoom``; DRA's
devices of a node's own kinds, counted as the packing hint counts them). Where a rule cannot
count exactly the class takes no devices in the model; the validator then checks the placement
and the engine decides what it refuses.
"""

from __future__ import annotations

from typing import Any, Optional

from models.dra import ResourceSlice
from models.errors import InputError, clipped
from models.snapshot import ClusterSnapshot

from ..plugins import registry

# How a device kind shows up among a bin's resources in the model: "device:<kind index>".
DEVICE = "device:"
ATTRIBUTE_KINDS = {bool: "bool", int: "int", str: "string"}


def devices_signature(slices: tuple[ResourceSlice, ...]) -> tuple:
    """What two nodes' slices must share for the nodes to be one shape: drivers and devices."""
    return tuple(sorted(
        (s.spec.driver, tuple(d.model_dump_json(by_alias=True, exclude_none=True) for d in s.spec.devices))
        for s in slices))


# The most devices of one driver a shape's node publishes. A driver may spread more than one
# ResourceSlice's 128 over several slices of its pool (a device per CPU of a large node), but
# every device is a row of the model: 1,000,000 took 31 s and 1.7 GB to read.
MAX_SHAPE_DEVICES = 1024


def parse_devices(entries: Any, where: str) -> tuple[ResourceSlice, ...]:
    """A shape file's ``devices:``: a list of ``{driver, count, name?, attributes?, capacity?}``
    — ``count`` alike devices of ``driver`` named ``<name>-0..`` (``name`` defaults to
    ``device``), attributes as plain values (``model: a100``, ``memory: 80``) or as a slice
    writes them (``{string: a100}``), capacity as quantities (``memory: 80Gi``)."""
    if not isinstance(entries, list):
        raise InputError(where, "devices", "expected a list of {driver, count, attributes, capacity}")
    by_driver: dict[str, list[dict]] = {}
    for i, entry in enumerate(entries):
        at = f"devices[{i}]"
        if not isinstance(entry, dict):
            raise InputError(where, at, "expected a mapping")
        unknown = set(entry) - {"driver", "count", "name", "attributes", "capacity"}
        if unknown:
            raise InputError(where, f"{at}.{sorted(unknown)[0]}", "unknown field")
        driver, count = entry.get("driver"), entry.get("count", 1)
        if not isinstance(driver, str) or not driver:
            raise InputError(where, f"{at}.driver", "a device needs its driver's name")
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise InputError(where, f"{at}.count", f'"{clipped(str(count))}" must be an integer >= 1')
        total = len(by_driver.get(driver, ())) + count
        if total > MAX_SHAPE_DEVICES:
            # (a count of 10**8 once ran for minutes, then out of memory, with no answer)
            raise InputError(where, f"{at}.count", f"the devices of {driver} come to {clipped(str(total))} on one "
                             f"node: a shape takes at most {MAX_SHAPE_DEVICES} of one driver")
        attributes = {k: _attribute(v, where, f"{at}.attributes.{k}") for k, v in (entry.get("attributes") or {}).items()}
        capacity = {k: {"value": str(v)} for k, v in (entry.get("capacity") or {}).items()}
        prefix = str(entry.get("name") or "device")
        listed = by_driver.setdefault(driver, [])
        listed += [{"name": f"{prefix}-{len(listed) + j}", "attributes": attributes, "capacity": capacity}
                   for j in range(count)]
    out = []
    for driver, devices in by_driver.items():
        try:
            out.append(ResourceSlice.model_validate({"metadata": {"name": f"shape-{driver}"}, "spec": {
                "driver": driver, "nodeName": "shape", "pool": {"name": "shape", "generation": 0, "resourceSliceCount": 1},
                "devices": devices}}))
        except ValueError as exc:
            raise InputError(where, "devices", " ".join(str(exc).splitlines()[:3])[:300]) from None
    return tuple(out)


def _attribute(value: Any, where: str, field: str) -> dict:
    if isinstance(value, dict):
        return value
    kind = ATTRIBUTE_KINDS.get(type(value))
    if kind is None:
        raise InputError(where, field, f'"{clipped(str(value))}" must be a string, integer or boolean')
    return {kind: value}


def class_devices(ctx: Any, rep: Any, nodes: list[int]) -> Optional[dict[int, dict[str, int]]]:
    """Per node index of ``nodes`` (of ``ctx``), the devices one pod of ``rep``'s class takes
    there by kind (``DEVICE`` names); None when no rule counts them, or a count would not be exact."""
    if not registry.KIND_ROOMS:
        return None
    out: dict[int, dict[str, int]] = {n: {} for n in nodes}
    for room in registry.KIND_ROOMS:
        rows = room.taken(ctx.state, rep, [ctx.nodes[n] for n in nodes])
        if rows is None:
            return None
        for n, row in zip(nodes, rows):
            out[n].update((f"{DEVICE}{k}", v) for k, v in row.items())
    return out


def free_devices(ctx: Any, node: int) -> dict[str, int]:
    """The free devices of ``node``'s own kinds, by ``DEVICE`` name."""
    out: dict[str, int] = {}
    for room in registry.KIND_ROOMS:
        out.update((f"{DEVICE}{k}", v) for k, v in room.free(ctx.state, ctx.nodes[node]).items())
    return out

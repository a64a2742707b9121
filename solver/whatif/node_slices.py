"""A node's own DRA devices, copied to a new node like it (``what-if --add-nodes``, ``provision``'s
shapes): the ResourceSlices whose ``spec.nodeName`` is the node, each copied onto the new node
with its pool renamed after it (a pool is one node's; two nodes never share a device). Slices
that reach nodes by selector or ``allNodes`` are not copied: a new node whose labels match
reaches them as it is."""

from __future__ import annotations

from models.dra import ResourceSlice
from models.objects import copy_with
from models.snapshot import ClusterSnapshot


def node_slices(snapshot: ClusterSnapshot, node: str) -> tuple[ResourceSlice, ...]:
    """The slices of ``node``'s own devices (newest generation of each pool)."""
    own = [s for s in snapshot.resource_slices if s.spec.node_name == node]
    newest: dict[tuple[str, str], int] = {}
    for s in own:
        key = (s.spec.driver, s.spec.pool.name)
        newest[key] = max(newest.get(key, -1), s.spec.pool.generation)
    return tuple(s for s in own if s.spec.pool.generation == newest[(s.spec.driver, s.spec.pool.name)])


def copied_slices(slices: tuple[ResourceSlice, ...], node: str) -> tuple[ResourceSlice, ...]:
    """``slices`` as a new node ``node`` publishes them: on it, each pool renamed after it."""
    pools = sorted({(s.spec.driver, s.spec.pool.name) for s in slices})
    renamed = {p: (node if len(pools) == 1 else f"{node}-{i}") for i, p in enumerate(pools)}
    out = []
    for i, s in enumerate(slices):
        pool = copy_with(s.spec.pool, {"name": renamed[(s.spec.driver, s.spec.pool.name)], "generation": 0})
        spec = copy_with(s.spec, {"node_name": node, "pool": pool})
        out.append(copy_with(s, {"metadata": copy_with(s.metadata, {"name": f"{node}-slice-{i}"}), "spec": spec}))
    return tuple(out)

"""What every workload generator shares: the ``Workload`` it returns, the ``Part`` a builder
reports (its known placement and the evictions that needs), node counts per scale, and small
helpers that make nodes and hand out witness slots. The generators are one module per family
(``rule_workloads``, ``gang_workloads``, ``packing_workloads``, ``mixed_workload``,
``scale_workloads``, ``repack_workload``); ``workloads`` names them all."""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from models import ClusterSnapshot

from .objects import ZONES, Factory, paused_gc
from .parse import to_snapshot


SCALES = ("quick", "medium", "large")
# Nodes per workload at each scale; quick sizes are per workload (see ``_QUICK``).
_SCALE_NODES = {"medium": 1000, "large": 5000}
_QUICK = {
    "basic": 50,
    "node-affinity": 50,
    "anti-affinity": 48,
    "spread": 48,
    "preemption": 40,
    "gang": 40,
    "topology-gang": 24,
    "fragmentation": 50,
    "gpu-pools": 40,
    "mixed": 100,
}


@dataclass
class Workload:
    """One generated benchmark input.

    ``objects`` are API dicts (Nodes, Pods, PriorityClasses, PodDisruptionBudgets, PodGroups) in
    creation order. ``metadata`` holds at least: ``scale``, ``seed``, ``nodes`` (count), ``pods``
    (pending count), ``running`` (bound pod count), ``pending`` (keys ``ns/name`` of the pods
    waiting for cpsat-scheduler, in creation order), ``achievable`` (pending pods a known
    placement places, or None) and ``witness`` (that placement, pod key -> node name, or None)
    with ``witness_evictions`` (running pod keys it evicts).
    """

    name: str
    description: str
    objects: list[dict[str, Any]]
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def pending(self) -> list[str]:
        return self.metadata["pending"]

    def snapshot(self) -> ClusterSnapshot:
        return to_snapshot(self.objects)


@dataclass
class Part:
    """What a workload builder knows about its own pods: a placement of them, and its victims."""

    witness: dict[str, str] = field(default_factory=dict)
    evictions: list[str] = field(default_factory=list)


def gc_paused(fn: Callable[..., Workload]) -> Callable[..., Workload]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Workload:
        with paused_gc():
            return fn(*args, **kwargs)

    return wrapper


def pod_key(pod: dict[str, Any]) -> str:
    return f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"


def node_count(name: str, scale: str) -> int:
    if scale == "quick":
        return _QUICK[name]
    if scale not in _SCALE_NODES:
        raise ValueError(f"unknown scale {scale!r}; expected one of {', '.join(SCALES)}")
    return _SCALE_NODES[scale]


def make_nodes(f: Factory, prefix: str, count: int, **kwargs: Any) -> list[str]:
    """``count`` nodes named ``<prefix>-0000``..., zones round-robin."""
    width = max(4, len(str(count - 1)))
    names = []
    for i in range(count):
        name = f"{prefix}-{i:0{width}d}"
        f.node(name, zone=ZONES[i % len(ZONES)], **kwargs)
        names.append(name)
    return names


def assign(pods: list[dict[str, Any]], slots: list[str], witness: dict[str, str]) -> list[str]:
    """Put ``pods`` on the first slots (a slot is a node name, once per pod it can take); return
    the slots left over."""
    if len(pods) > len(slots):
        raise AssertionError("workload construction placed more pods than it made room for")
    for pod, node in zip(pods, slots):
        witness[pod_key(pod)] = node
    return slots[len(pods):]


def slots_each(nodes: list[str], per_node: int) -> list[str]:
    """``per_node`` slots on each node, taken round-robin across the nodes."""
    return [n for _ in range(per_node) for n in nodes]


def round_robin(nodes: list[str], room: dict[str, int]) -> list[str]:
    """``room[n]`` slots on each node, one per node per round."""
    return [n for r in range(max(room.values(), default=0)) for n in nodes if room[n] > r]


@gc_paused
def single(name: str, scale: str, seed: int, build: Callable[[Factory, int, str, str], Part],
           described_by: Callable[..., Workload]) -> Workload:
    """Workload ``name`` at ``scale``: ``build`` makes its nodes and pods in a namespace of that name, and
    ``described_by`` (the generator the registry names) gives its description."""
    n = node_count(name, scale)
    f = Factory(seed)
    part = build(f, n, name, name)
    doc = inspect.getdoc(described_by) or ""
    return finish(name, scale, seed, f, part, doc)


def finish(name: str, scale: str, seed: int, f: Factory, part: Optional[Part], description: str) -> Workload:
    """The workload ``f`` made, with ``part``'s known placement (None: no placement is known)."""
    nodes = sum(1 for o in f.objects if o["kind"] == "Node")
    pending = list(f.pending)
    witness = part.witness if part is not None else None
    metadata: dict[str, Any] = {
        "scale": scale,
        "seed": seed,
        "nodes": nodes,
        "pods": len(pending),
        "running": f.running,
        "pending": pending,
        "achievable": len(witness) if witness is not None else None,
        "witness": witness,
        "witness_evictions": list(part.evictions) if part is not None else [],
    }
    return Workload(name=name, description=description, objects=f.objects, metadata=metadata)

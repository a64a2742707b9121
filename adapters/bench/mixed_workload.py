"""``mixed``: every other benchmark workload on one cluster, their pending pods interleaved."""

from __future__ import annotations

from typing import Any

from . import gang_workloads, packing_workloads, rule_workloads
from .objects import Factory
from .workload_kit import Part, Workload, pod_key, single


# --------------------------------------------------------------------------- mixed

_BUILDERS = {**rule_workloads.BUILDERS, **gang_workloads.BUILDERS, **packing_workloads.BUILDERS}
# Share of the cluster's nodes given to each component of the blend.
_MIX = (
    ("basic", 0.20),
    ("node-affinity", 0.10),
    ("anti-affinity", 0.15),
    ("spread", 0.15),
    ("preemption", 0.10),
    ("gang", 0.10),
    ("fragmentation", 0.10),
    ("gpu-pools", 0.10),
)


def _mixed(f: Factory, n: int, ns: str, prefix: str) -> Part:
    part = Part()
    pending_by_component: list[list[dict[str, Any]]] = []
    for name, share in _MIX:
        build = _BUILDERS[name]
        start = len(f.objects)
        sub = build(f, max(12, round(share * n)), name, name)
        part.witness.update(sub.witness)
        part.evictions += sub.evictions
        pending_by_component.append(
            [o for o in f.objects[start:] if o["kind"] == "Pod" and "nodeName" not in o["spec"]]
        )
    # Pending pods of all components arrive interleaved (each component keeps its own order).
    remaining = [list(reversed(p)) for p in pending_by_component]
    f.pending.clear()
    while any(remaining):
        weights = [len(r) for r in remaining]
        pick = f.rng.choices(range(len(remaining)), weights=weights)[0]
        pod = remaining[pick].pop()
        pod["metadata"]["creationTimestamp"] = f.now()
        f.pending.append(pod_key(pod))
    return part


def mixed(scale: str = "quick", seed: int = 0) -> Workload:
    """All of the above on one cluster: each component gets a share of the nodes and its own
    namespace, and their pending pods arrive interleaved. Nothing keeps a component's pods on
    its own nodes, so the components compete for capacity (the high-priority preemption wave
    goes first and may preempt anyone's lower-priority pods).

    The witness is the union of the components' own placements, each on its own nodes; the
    engines are free to do better.
    """
    return single("mixed", scale, seed, _mixed, mixed)

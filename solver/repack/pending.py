"""Pending pods a re-packing plan would leave with nowhere to run.

A plan that frees the only nodes where a waiting pod could start turns "pending for now" into
"pending until someone adds a node". So each pending pod (whatever its scheduler) is checked on
its own against the cluster as it runs now and as it will run after the plan, with the freed
nodes gone (they are freed to be removed): a pod that fits now and nowhere after is *blocked*.

Pods are checked one at a time, not as a window: two pending pods that each fit alone may not
fit together, now or after; this check is about what the plan takes away.
"""

from __future__ import annotations

from models.config import SchedulerConfig
from models.snapshot import ClusterSnapshot

from ..context import build_context
from ..filtering import Cycle, StaticFilters


def blocked_pending(snapshot: ClusterSnapshot, config: SchedulerConfig, final: dict[str, str],
                    freed: list[str]) -> list[str]:
    """Keys of the pending pods that fit on some node now and on none after the plan
    (``final``: pod key → node for every pod that moves; ``freed``: nodes the plan frees)."""
    if not snapshot.pending_pods(all_pending=True):
        return []
    now = fitting(snapshot, config)
    if not now:
        return []
    after = fitting(_after(snapshot, final, set(freed)), config)
    return sorted(now - after)


def fitting(snapshot: ClusterSnapshot, config: SchedulerConfig) -> set[str]:
    """The pending pods with at least one node that passes every filter, each pod alone."""
    ctx = build_context(snapshot, config, all_pending=True)
    if not ctx.nodes:
        return set()
    static = StaticFilters(ctx.nodes, ctx.window)
    fits: set[str] = set()
    for cls in ctx.classes:
        if len(Cycle(cls.rep, ctx.state, static).feasible(limit=1)):
            fits.update(p.key for p in cls.pods)
    return fits


def _after(snapshot: ClusterSnapshot, final: dict[str, str], freed: set[str]) -> ClusterSnapshot:
    pods = []
    for pod in snapshot.pods:
        target = final.get(pod.key)
        if target is not None:
            pod = pod.model_copy(update={"spec": pod.spec.model_copy(update={"node_name": target})})
        elif pod.spec.node_name in freed:
            continue  # DaemonSet pods and the like leave with their node
        pods.append(pod)
    return ClusterSnapshot(
        nodes=tuple(n for n in snapshot.nodes if n.metadata.name not in freed),
        pods=tuple(pods),
        pdbs=snapshot.pdbs,
        priority_classes=snapshot.priority_classes,
        pod_groups=snapshot.pod_groups,
        namespaces=snapshot.namespaces,
    )

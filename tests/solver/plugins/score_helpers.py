"""What the score tests share (SEMANTICS.md §4): node and pod builders, a cluster state with its
score context, and the constants several plugins' tests use.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from models.config import SchedulerConfig
from models.objects import Node, Pod
from models.resources import is_tracked_resource
from solver.info import NodeInfo, PodInfo
from solver.scoring import ScoreContext
from solver.state import ClusterState

MI = 1024 * 1024
GI = 1024 * MI
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
PNS = "PreferNoSchedule"
NGINX = (["nginx:latest"], 500 * MI)

# --------------------------------------------------------------------------- builders


def node(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "8Gi",
    labels: Optional[dict[str, str]] = None,
    taints: Optional[list[dict[str, str]]] = None,
    images: Optional[list[tuple[list[str], int]]] = None,
    extra: Optional[dict[str, str]] = None,
) -> Node:
    allocatable = {"cpu": cpu, "memory": memory, "pods": "110", **(extra or {})}
    return Node.model_validate(
        {
            "metadata": {"name": name, "labels": labels or {}},
            "spec": {"taints": taints or []},
            "status": {
                "allocatable": allocatable,
                "images": [{"names": names, "sizeBytes": size} for names, size in images or []],
            },
        }
    )


def pod(
    name: str,
    *,
    namespace: str = "default",
    requests: Optional[dict[str, str]] = None,
    labels: Optional[dict[str, str]] = None,
    affinity: Optional[dict[str, Any]] = None,
    tolerations: Optional[list[dict[str, str]]] = None,
    spread: Optional[list[dict[str, Any]]] = None,
    owner: Optional[str] = None,
    image: str = "",
    init_image: Optional[str] = None,
    terminating: bool = False,
    node_selector: Optional[dict[str, str]] = None,
) -> PodInfo:
    container: dict[str, Any] = {"name": "c", "image": image}
    if requests is not None:
        container["resources"] = {"requests": requests}
    spec: dict[str, Any] = {"containers": [container]}
    if init_image is not None:
        spec["initContainers"] = [{"name": "init", "image": init_image}]
    if affinity:
        spec["affinity"] = affinity
    if node_selector:
        spec["nodeSelector"] = node_selector
    if tolerations:
        spec["tolerations"] = tolerations
    if spread:
        spec["topologySpreadConstraints"] = spread
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels or {}}
    if owner:
        metadata["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner, "name": "w", "controller": True}]
    if terminating:
        metadata["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    return PodInfo.of(Pod.model_validate({"metadata": metadata, "spec": spec}), {"kubernetes.io/metadata.name": namespace})


def cluster(
    nodes: list[Node], placed: Optional[list[tuple[PodInfo, str]]] = None, incoming: Optional[PodInfo] = None, **config: Any
) -> tuple[ClusterState, ScoreContext, np.ndarray]:
    """A state with ``placed`` pods assumed, its score context, and every node as feasible."""
    infos = [NodeInfo.of(i, n) for i, n in enumerate(nodes)]
    resources = {r for n in infos for r in n.allocatable if is_tracked_resource(r)}
    for p in [*(p for p, _ in placed or []), *([incoming] if incoming else [])]:
        resources.update(p.requests)
    state = ClusterState(infos, resources)
    for p, where in placed or []:
        state.add(p, state.node_index[where])
    sctx = ScoreContext.build(SchedulerConfig.model_validate(config), infos)
    return state, sctx, np.arange(len(nodes), dtype=np.int64)


def zone_nodes(*zones: Optional[str], **kw: Any) -> list[Node]:
    """``n1, n2, ...`` with hostname labels and the given zones (None: no zone label)."""
    out = []
    for i, z in enumerate(zones, start=1):
        labels = {HOST: f"n{i}"}
        if z is not None:
            labels[ZONE] = z
        out.append(node(f"n{i}", labels=labels, **kw))
    return out


def web(name: str, **kw: Any) -> PodInfo:
    return pod(name, labels={"app": "web"}, **kw)


def term(key: str, weight: int = 0, **labels: str) -> dict[str, Any]:
    """A pod (anti-)affinity term on ``labels``; weighted when ``weight`` is given."""
    t = {"labelSelector": {"matchLabels": labels}, "topologyKey": key}
    return {"weight": weight, "podAffinityTerm": t} if weight else t


def as_list(scores: Optional[np.ndarray]) -> Optional[list[int]]:
    return None if scores is None else [int(s) for s in scores]

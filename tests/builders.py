"""Tiny builders for tests: Kubernetes objects from a handful of keywords.

Every builder goes through the models' own ``model_validate`` on a small camelCase dict, so a
test object is parsed exactly like one read from ``kubectl get -o json``::

    node = make_node("n1", cpu="4", memory="8Gi", labels={"zone": "a"}, taints=["gpu=yes:NoSchedule"])
    pod = make_pod("default/web-1", cpu="500m", labels={"app": "web"}, node="n1")
    snap = make_snapshot([node], [pod])

``scene(...)`` goes one step further, to what the filters work on: the scheduling context (node
and pod infos, the state with bound pods assumed, the window) plus ``StaticFilters``, with
helpers to run a ``Cycle`` for a pending pod.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Iterable, Optional, Sequence, Union

from models.config import SchedulerConfig
from models.objects import Namespace, Node, Pod, PodDisruptionBudget, PodGroup, PriorityClass
from models.storage import CSINode, PersistentVolume, PersistentVolumeClaim, StorageClass
from models.snapshot import DEFAULT_SCHEDULER_NAME, POD_GROUP_LABEL, ClusterSnapshot
from solver.context import SchedulingContext, build_context
from solver.framework import Status
from solver.info import NodeInfo, PodInfo
from solver.filtering import Cycle, StaticFilters

T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)

TaintSpec = Union[str, dict]
PortSpec = Union[int, tuple, dict]


# --------------------------------------------------------------------------- small pieces


def taint(spec: TaintSpec) -> dict:
    """``"key=value:Effect"`` or ``"key:Effect"`` (empty value) as a taint dict; dicts pass through."""
    if isinstance(spec, dict):
        return spec
    head, _, effect = spec.rpartition(":")
    key, _, value = head.partition("=")
    return {"key": key, "value": value, "effect": effect}


def selector(labels: Optional[dict] = None, *, exprs: Sequence[tuple] = ()) -> dict:
    """A LabelSelector dict: ``selector({"app": "web"})``, ``selector(exprs=[("app", "In", ["a"])])``."""
    out: dict[str, Any] = {}
    if labels:
        out["matchLabels"] = dict(labels)
    if exprs:
        out["matchExpressions"] = [_requirement(e) for e in exprs]
    return out


def term(
    labels: Optional[dict] = None,
    key: str = "zone",
    *,
    label_selector: Any = "from-labels",
    namespaces: Optional[list[str]] = None,
    namespace_selector: Optional[dict] = None,
    match_label_keys: Optional[list[str]] = None,
) -> dict:
    """A PodAffinityTerm: ``term({"app": "web"}, "zone")``; ``label_selector=None`` is a nil selector."""
    out: dict[str, Any] = {"topologyKey": key}
    sel = selector(labels) if label_selector == "from-labels" else label_selector
    if sel is not None:
        out["labelSelector"] = sel
    if namespaces is not None:
        out["namespaces"] = namespaces
    if namespace_selector is not None:
        out["namespaceSelector"] = namespace_selector
    if match_label_keys:
        out["matchLabelKeys"] = match_label_keys
    return out


def spread(
    key: str = "zone",
    labels: Optional[dict] = None,
    *,
    max_skew: int = 1,
    hard: bool = True,
    label_selector: Any = "from-labels",
    min_domains: Optional[int] = None,
    node_affinity_policy: Optional[str] = None,
    node_taints_policy: Optional[str] = None,
    match_label_keys: Optional[list[str]] = None,
) -> dict:
    """A TopologySpreadConstraint (DoNotSchedule unless ``hard=False``)."""
    out: dict[str, Any] = {
        "maxSkew": max_skew,
        "topologyKey": key,
        "whenUnsatisfiable": "DoNotSchedule" if hard else "ScheduleAnyway",
    }
    sel = selector(labels) if label_selector == "from-labels" else label_selector
    if sel is not None:
        out["labelSelector"] = sel
    if min_domains is not None:
        out["minDomains"] = min_domains
    if node_affinity_policy is not None:
        out["nodeAffinityPolicy"] = node_affinity_policy
    if node_taints_policy is not None:
        out["nodeTaintsPolicy"] = node_taints_policy
    if match_label_keys:
        out["matchLabelKeys"] = match_label_keys
    return out


def node_term(*exprs: tuple, fields: Sequence[tuple] = ()) -> dict:
    """A NodeSelectorTerm: ``node_term(("zone", "In", ["a"]), ("gpu", "Exists"))``."""
    out: dict[str, Any] = {}
    if exprs:
        out["matchExpressions"] = [_requirement(e) for e in exprs]
    if fields:
        out["matchFields"] = [_requirement(f) for f in fields]
    return out


def _requirement(e: tuple) -> dict:
    key, op, *rest = e
    req: dict[str, Any] = {"key": key, "operator": op}
    if rest:
        req["values"] = list(rest[0])
    return req


def required_node_affinity(*terms: dict) -> dict:
    """An Affinity with required node affinity made of ``terms`` (ORed)."""
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


def _port(spec: PortSpec) -> dict:
    """``8080`` (TCP on every IP), ``(8080, "UDP")``, ``(8080, "TCP", "127.0.0.1")`` or a dict."""
    if isinstance(spec, dict):
        return spec
    if isinstance(spec, int):
        spec = (spec,)
    port, *rest = spec
    out: dict[str, Any] = {"containerPort": port, "hostPort": port}
    if len(rest) >= 1 and rest[0]:
        out["protocol"] = rest[0]
    if len(rest) >= 2 and rest[1]:
        out["hostIP"] = rest[1]
    return out


# --------------------------------------------------------------------------- objects


def make_node(
    name: str,
    *,
    cpu: Optional[str] = "4",
    memory: Optional[str] = "8Gi",
    pods: Optional[int] = 110,
    ephemeral_storage: Optional[str] = None,
    extra: Optional[dict[str, Any]] = None,
    labels: Optional[dict[str, str]] = None,
    taints: Iterable[TaintSpec] = (),
    unschedulable: bool = False,
    hostname_label: bool = True,
) -> Node:
    """A node; ``pods=None`` leaves ``pods`` out of allocatable (so no pod fits), and the
    ``kubernetes.io/hostname`` label is added unless ``hostname_label=False``."""
    allocatable: dict[str, Any] = {}
    if cpu is not None:
        allocatable["cpu"] = cpu
    if memory is not None:
        allocatable["memory"] = memory
    if pods is not None:
        allocatable["pods"] = str(pods)
    if ephemeral_storage is not None:
        allocatable["ephemeral-storage"] = ephemeral_storage
    allocatable.update(extra or {})
    node_labels = {"kubernetes.io/hostname": name} if hostname_label else {}
    node_labels.update(labels or {})
    return Node.model_validate(
        {
            "metadata": {"name": name, "labels": node_labels},
            "spec": {"unschedulable": unschedulable, "taints": [taint(t) for t in taints]},
            "status": {"allocatable": allocatable},
        }
    )


def make_pod(
    key: str,
    *,
    cpu: Optional[str] = None,
    memory: Optional[str] = None,
    requests: Optional[dict[str, Any]] = None,
    node: Optional[str] = None,
    labels: Optional[dict[str, str]] = None,
    priority: Optional[int] = None,
    preemption_policy: Optional[str] = None,
    scheduler: str = DEFAULT_SCHEDULER_NAME,
    node_selector: Optional[dict[str, str]] = None,
    affinity: Optional[dict] = None,
    pod_affinity: Sequence[dict] = (),
    pod_anti_affinity: Sequence[dict] = (),
    tolerations: Sequence[dict] = (),
    spread: Sequence[dict] = (),
    host_ports: Sequence[PortSpec] = (),
    sidecar_ports: Sequence[PortSpec] = (),
    group: Optional[str] = None,
    terminating: bool = False,
    phase: Optional[str] = None,
    created: Optional[datetime] = None,
    start_time: Optional[datetime] = None,
    nominated: Optional[str] = None,
    preempted: bool = False,
    claims: Sequence[str] = (),
    ephemeral: Sequence[str] = (),
    ready: Optional[bool] = None,
) -> Pod:
    """A pod named ``namespace/name``: one container with the given requests, bound when
    ``node`` is given, ours (``schedulerName: cpsat-scheduler``) by default.

    ``pod_affinity`` / ``pod_anti_affinity`` take required terms (see ``term``); ``affinity``
    is a raw Affinity dict merged underneath them. ``sidecar_ports`` go on a restartable init
    container. ``group`` sets the coscheduling pod-group label. ``nominated`` sets
    ``status.nominatedNodeName``; ``preempted`` marks a victim of scheduler preemption being
    deleted (a deletionTimestamp and DisruptionTarget=True, reason PreemptionByScheduler).
    ``ready`` writes the Ready condition (None: none, which reads as Ready).
    """
    namespace, _, name = key.rpartition("/")
    namespace = namespace or "default"
    req: dict[str, Any] = {}
    if cpu is not None:
        req["cpu"] = cpu
    if memory is not None:
        req["memory"] = memory
    req.update(requests or {})
    pod_labels = dict(labels or {})
    if group is not None:
        pod_labels[POD_GROUP_LABEL] = group
    aff: dict[str, Any] = dict(affinity or {})
    if pod_affinity:
        aff["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": list(pod_affinity)}
    if pod_anti_affinity:
        aff["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": list(pod_anti_affinity)}
    container: dict[str, Any] = {"name": "main", "image": "busybox", "resources": {"requests": req}}
    if host_ports:
        container["ports"] = [_port(p) for p in host_ports]
    spec: dict[str, Any] = {"containers": [container], "schedulerName": scheduler}
    if sidecar_ports:
        spec["initContainers"] = [
            {"name": "sidecar", "restartPolicy": "Always", "ports": [_port(p) for p in sidecar_ports]}
        ]
    volumes = [{"name": f"claim-{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]
    volumes += [{"name": v, "ephemeral": {"volumeClaimTemplate": {"spec": {}}}} for v in ephemeral]
    if volumes:
        spec["volumes"] = volumes
    if node is not None:
        spec["nodeName"] = node
    if priority is not None:
        spec["priority"] = priority
    if preemption_policy is not None:
        spec["preemptionPolicy"] = preemption_policy
    if node_selector:
        spec["nodeSelector"] = node_selector
    if aff:
        spec["affinity"] = aff
    if tolerations:
        spec["tolerations"] = list(tolerations)
    if spread:
        spec["topologySpreadConstraints"] = list(spread)
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": pod_labels,
        "creationTimestamp": (created or T0).isoformat(),
    }
    if terminating or preempted:
        metadata["deletionTimestamp"] = (T0 + timedelta(hours=1)).isoformat()
    status: dict[str, Any] = {}
    if phase is not None:
        status["phase"] = phase
    elif node is not None:
        status["phase"] = "Running"
    if start_time is not None:
        status["startTime"] = start_time.isoformat()
    if nominated is not None:
        status["nominatedNodeName"] = nominated
    conditions: list[dict[str, Any]] = []
    if preempted:
        conditions.append({"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"})
    if ready is not None:
        conditions.append({"type": "Ready", "status": "True" if ready else "False"})
    if conditions:
        status["conditions"] = conditions
    return Pod.model_validate({"metadata": metadata, "spec": spec, "status": status})


def make_namespace(name: str, labels: Optional[dict[str, str]] = None) -> Namespace:
    return Namespace.model_validate({"metadata": {"name": name, "labels": labels or {}}})


def make_pod_group(key: str, min_member: int, *, topology_key: Optional[str] = None,
                   preferred: Optional[str] = None) -> PodGroup:
    """``topology_key``: every member in one domain of that node label, as a v1alpha2 PodGroup's
    ``spec.schedulingConstraints.topology`` asks (``models.workloads``); ``preferred``: the
    ``cpsat-scheduler.io/preferred-topology`` annotation's value (keys widest first)."""
    namespace, _, name = key.rpartition("/")
    metadata: dict[str, Any] = {"name": name, "namespace": namespace or "default"}
    if preferred is not None:
        metadata["annotations"] = {"cpsat-scheduler.io/preferred-topology": preferred}
    group = PodGroup.model_validate({"metadata": metadata, "spec": {"minMember": min_member}})
    if topology_key is None:
        return group
    return group.model_copy(update={"spec": group.spec.model_copy(update={"topology_key": topology_key})})


def make_pdb(
    key: str,
    labels: Optional[dict[str, str]] = None,
    *,
    min_available: Union[int, str, None] = None,
    max_unavailable: Union[int, str, None] = None,
    allowed: Optional[int] = None,
    label_selector: Any = "from-labels",
    unhealthy_policy: Optional[str] = None,
    healthy: Optional[tuple[int, int]] = None,
) -> PodDisruptionBudget:
    """A PodDisruptionBudget; ``allowed`` sets ``status.disruptionsAllowed``, ``healthy``
    ``status.currentHealthy`` and ``desiredHealthy``, ``unhealthy_policy``
    ``spec.unhealthyPodEvictionPolicy``."""
    namespace, _, name = key.rpartition("/")
    spec: dict[str, Any] = {}
    sel = selector(labels) if label_selector == "from-labels" else label_selector
    if sel is not None:
        spec["selector"] = sel
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    if unhealthy_policy is not None:
        spec["unhealthyPodEvictionPolicy"] = unhealthy_policy
    status: dict[str, Any] = {"disruptionsAllowed": allowed} if allowed is not None else {}
    if healthy is not None:
        status["currentHealthy"], status["desiredHealthy"] = healthy
    return PodDisruptionBudget.model_validate(
        {"metadata": {"name": name, "namespace": namespace or "default"}, "spec": spec, "status": status}
    )


def make_priority_class(name: str, value: int, **extra: Any) -> PriorityClass:
    return PriorityClass.model_validate({"metadata": {"name": name}, "value": value, **extra})


def make_snapshot(
    nodes: Iterable[Node] = (),
    pods: Iterable[Pod] = (),
    *,
    pdbs: Iterable[PodDisruptionBudget] = (),
    pod_groups: Iterable[PodGroup] = (),
    namespaces: Iterable[Namespace] = (),
    priority_classes: Iterable[PriorityClass] = (),
    pvs: Iterable = (),
    pvcs: Iterable = (),
    storage_classes: Iterable = (),
    csi_nodes: Iterable = (),
) -> ClusterSnapshot:
    return ClusterSnapshot.build(
        storage_classes=storage_classes,
        csi_nodes=csi_nodes,
        nodes=nodes,
        pods=pods,
        pdbs=pdbs,
        pod_groups=pod_groups,
        namespaces=namespaces,
        priority_classes=priority_classes,
        pvs=pvs,
        pvcs=pvcs,
    )


# --------------------------------------------------------------------------- infos


def pod_info(pod: Pod, ns_labels: Optional[dict[str, str]] = None) -> PodInfo:
    ns = pod.metadata.namespace
    return PodInfo.of(pod, ns_labels if ns_labels is not None else {"kubernetes.io/metadata.name": ns})


def node_info(node: Node, index: int = 0) -> NodeInfo:
    return NodeInfo.of(index, node)


@dataclass
class Scene:
    """A snapshot turned into what the filters read, with shortcuts to run them."""

    ctx: SchedulingContext
    static: StaticFilters

    def pod(self, key: Optional[str] = None) -> PodInfo:
        if key is None:
            if len(self.ctx.window) != 1:
                raise ValueError(f"scene has {len(self.ctx.window)} pending pods: name one")
            return self.ctx.window[0]
        found = self.ctx.pod(key)
        if found is None:
            raise KeyError(key)
        return found

    def cycle(self, key: Optional[str] = None) -> Cycle:
        return Cycle(self.pod(key), self.ctx.state, self.static, version=self.ctx.config.kubernetes_version)

    def status(self, node: str, key: Optional[str] = None) -> Status:
        return self.cycle(key).status(self.ctx.nodes[self.ctx.state.node_index[node]])

    def statuses(self, key: Optional[str] = None) -> dict[str, Status]:
        cycle = self.cycle(key)
        return {n.name: cycle.status(n) for n in self.ctx.nodes}

    def feasible(self, key: Optional[str] = None) -> list[str]:
        return [self.ctx.nodes[int(i)].name for i in self.cycle(key).feasible()]


def scene(
    nodes: Iterable[Node],
    pods: Iterable[Pod] = (),
    *,
    config: Optional[SchedulerConfig] = None,
    **snapshot: Any,
) -> Scene:
    ctx = build_context(make_snapshot(nodes, pods, **snapshot), config or SchedulerConfig())
    return Scene(ctx, StaticFilters(ctx.nodes, ctx.window))


def describe(snapshot: ClusterSnapshot) -> str:
    """A compact, readable account of a snapshot, for property-test failure messages."""
    lines = []
    for n in snapshot.nodes:
        alloc = n.status.allocatable
        taints = [f"{t.key}={t.value}:{t.effect}" for t in n.spec.taints]
        lines.append(f"node {n.metadata.name} labels={n.metadata.labels} cpu={alloc.get('cpu')} pods={alloc.get('pods')} taints={taints}")
    for p in snapshot.pods:
        aff = p.spec.affinity
        rules = []
        if aff and aff.pod_affinity:
            rules += [f"affinity {t.label_selector.match_labels if t.label_selector else None}@{t.topology_key}"
                      for t in aff.pod_affinity.required_during_scheduling_ignored_during_execution]
        if aff and aff.pod_anti_affinity:
            rules += [f"anti {t.label_selector.match_labels if t.label_selector else None}@{t.topology_key}"
                      for t in aff.pod_anti_affinity.required_during_scheduling_ignored_during_execution]
        rules += [f"spread {c.topology_key}/{c.max_skew}/{c.when_unsatisfiable}" for c in p.spec.topology_spread_constraints]
        rules += [f"port {port.host_port}" for c in p.spec.containers for port in c.ports if port.host_port]
        lines.append(
            f"pod {p.key} node={p.spec.node_name or '-'} prio={p.spec.priority} "
            f"cpu={p.spec.containers[0].resources.requests.get('cpu')} labels={p.metadata.labels} "
            f"{'terminating ' if p.is_terminating else ''}{' '.join(rules)}"
        )
    for g in snapshot.pod_groups:
        lines.append(f"podgroup {g.key} minMember={g.spec.min_member}")
    for b in snapshot.pdbs:
        lines.append(f"pdb {b.key} allowed={b.status.disruptions_allowed}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- volumes


def make_pvc(key: str, *, storage_class: Optional[str] = "standard", volume: str = "", size: str = "10Gi",
             modes: Sequence[str] = ("ReadWriteOnce",), deleting: bool = False, **spec: Any) -> PersistentVolumeClaim:
    """A claim ``namespace/name``; bound to ``volume`` when given."""
    namespace, _, name = key.rpartition("/")
    body: dict[str, Any] = {"accessModes": list(modes), "resources": {"requests": {"storage": size}},
                            "storageClassName": storage_class, **spec}
    if volume:
        body["volumeName"] = volume
    meta: dict[str, Any] = {"name": name, "namespace": namespace or "default"}
    if deleting:
        meta["deletionTimestamp"] = T0.isoformat()
    return PersistentVolumeClaim.model_validate({"metadata": meta, "spec": body,
                                                 "status": {"phase": "Bound" if volume else "Pending"}})


def make_pv(name: str, *, storage_class: str = "standard", size: str = "10Gi", claim: Optional[str] = None,
            zone: Optional[str] = None, labels: Optional[dict[str, str]] = None, driver: Optional[str] = "disk.csi",
            modes: Sequence[str] = ("ReadWriteOnce",), node_affinity: Optional[dict] = None) -> PersistentVolume:
    """A volume; ``zone`` gives it node affinity for ``topology.kubernetes.io/zone``; ``claim``
    (``namespace/name``) its claimRef."""
    spec: dict[str, Any] = {"capacity": {"storage": size}, "accessModes": list(modes), "storageClassName": storage_class}
    if driver:
        spec["csi"] = {"driver": driver, "volumeHandle": f"vol-{name}"}
    if zone is not None:
        node_affinity = {"required": {"nodeSelectorTerms": [node_term(("topology.kubernetes.io/zone", "In", [zone]))]}}
    if node_affinity is not None:
        spec["nodeAffinity"] = node_affinity
    if claim is not None:
        ns, _, claim_name = claim.rpartition("/")
        spec["claimRef"] = {"namespace": ns or "default", "name": claim_name}
    return PersistentVolume.model_validate({"metadata": {"name": name, "labels": labels or {}}, "spec": spec,
                                            "status": {"phase": "Bound" if claim else "Available"}})


def make_storage_class(name: str = "standard", *, mode: str = "WaitForFirstConsumer", provisioner: str = "disk.csi",
                       zones: Sequence[str] = ()) -> StorageClass:
    body: dict[str, Any] = {"metadata": {"name": name}, "provisioner": provisioner, "volumeBindingMode": mode}
    if zones:
        body["allowedTopologies"] = [{"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone",
                                                                  "values": list(zones)}]}]
    return StorageClass.model_validate(body)


def make_csi_node(name: str, limits: dict[str, Optional[int]]) -> CSINode:
    drivers = [{"name": d, "nodeID": name, **({"allocatable": {"count": c}} if c is not None else {})}
               for d, c in limits.items()]
    return CSINode.model_validate({"metadata": {"name": name}, "spec": {"drivers": drivers}})

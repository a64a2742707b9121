"""Hypothesis strategies for whole scheduling windows: small clusters that mix every rule.

A window is a ``ClusterSnapshot`` plus the few config knobs that change which rules are hard
(PDB soft/hard, preemption on/off, scoring profile). Clusters stay small (at most a handful of
nodes and about a dozen pods) so that thousands of windows run through every engine in minutes,
while each window can still combine resources (cpu, memory, pods, an extended resource), taints
and tolerations, node selectors and required node affinity, pod affinity and anti-affinity by
hostname and zone, topology spread (hard and soft, minDomains), host ports, priorities with
preemption (and ``Never``), PodDisruptionBudgets and gangs with running members, and nominated
pods: victims of an earlier preemption still terminating, pending pods nominated to a node, and
another scheduler's pending pods whose nominated room the window must leave.

Pending pods come from *templates* with one to four replicas, as Deployments and Jobs make them,
so equivalence classes with several pods (count variables) are exercised as well as singletons.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Optional

from hypothesis import strategies as st

from models.config import SchedulerConfig
from models.objects import DISRUPTION_TARGET, PREEMPTION_BY_SCHEDULER, PodCondition
from models.snapshot import ClusterSnapshot
from tests.builders import (
    T0,
    make_csi_node,
    make_node,
    make_pdb,
    make_pod,
    make_pod_group,
    make_pv,
    make_pvc,
    make_snapshot,
    make_storage_class,
    node_term,
    required_node_affinity,
    spread,
    term,
)

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
GPU = "example.com/gpu"
APPS = ("a", "b", "c")
PRIORITIES = (0, 10, 100, 1000)
TAINTS = (
    "dedicated=batch:NoSchedule",
    "dedicated=batch:NoExecute",
    "noisy:PreferNoSchedule",
    f"{GPU}=present:NoSchedule",
)
TOLERATIONS = (
    {"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"},
    {"key": "dedicated", "operator": "Exists"},
    {"key": GPU, "operator": "Exists", "effect": "NoSchedule"},
    {"operator": "Exists"},
)


@dataclass(frozen=True)
class Window:
    """One generated input: the snapshot and the config it is scheduled with."""

    snapshot: ClusterSnapshot
    config: SchedulerConfig


def at(minutes: int):
    return T0 + timedelta(minutes=minutes)


def _node(draw: Any, i: int, zones: int):
    labels: dict[str, str] = {}
    if draw(st.integers(0, 5)):  # now and then a node without a zone label
        labels[ZONE] = f"z{draw(st.integers(0, zones - 1))}"
    if draw(st.booleans()):
        labels["disk"] = "ssd"
    taints = draw(st.lists(st.sampled_from(TAINTS), max_size=2, unique=True)) if draw(st.integers(0, 3)) == 0 else []
    extra = {GPU: str(draw(st.integers(0, 2)))} if draw(st.integers(0, 2)) == 0 else None
    return make_node(
        f"n{i}",
        cpu=draw(st.sampled_from(("1", "2", "2500m", "4", "4", "8", "8"))),
        memory=draw(st.sampled_from(("4Gi", "8Gi", "16Gi"))),
        pods=draw(st.sampled_from((2, 3, 110, 110, 110, 110))),
        extra=extra,
        labels=labels,
        taints=taints,
        unschedulable=draw(st.integers(0, 11)) == 0,
    )


def _rules(draw: Any, app: str) -> dict[str, Any]:
    """Scheduling rules for one pod template; each is present with a modest probability."""
    kw: dict[str, Any] = {}
    if draw(st.integers(0, 5)) == 0:
        kw["node_selector"] = {"disk": "ssd"}
    if draw(st.integers(0, 5)) == 0:
        zones = draw(st.lists(st.sampled_from(("z0", "z1", "z2")), min_size=1, max_size=2, unique=True))
        kw["affinity"] = required_node_affinity(node_term((ZONE, "In", zones)))
    if draw(st.integers(0, 3)) == 0:
        kw["tolerations"] = draw(st.lists(st.sampled_from(TOLERATIONS), min_size=1, max_size=2, unique_by=str))
    if draw(st.integers(0, 4)) == 0:
        target = draw(st.sampled_from(APPS))
        kw["pod_affinity"] = [term({"app": target}, draw(st.sampled_from((HOST, ZONE))))]
    if draw(st.integers(0, 3)) == 0:
        target = draw(st.sampled_from((app, app, *APPS)))
        kw["pod_anti_affinity"] = [term({"app": target}, draw(st.sampled_from((HOST, HOST, ZONE))))]
    if draw(st.integers(0, 3)) == 0:
        kw["spread"] = [
            spread(
                draw(st.sampled_from((ZONE, ZONE, HOST))),
                {"app": app},
                max_skew=draw(st.integers(1, 2)),
                hard=draw(st.integers(0, 3)) > 0,
                min_domains=draw(st.sampled_from((None, None, 2, 3))),
            )
        ]
    if draw(st.integers(0, 5)) == 0:
        kw["host_ports"] = draw(st.lists(st.sampled_from((80, 8080)), min_size=1, max_size=2, unique=True))
    return kw


def _requests(draw: Any, *, pending: bool) -> dict[str, Any]:
    cpus = ("0", "100m", "500m", "1", "2", "3") if pending else ("100m", "250m", "500m", "1", "2")
    kw: dict[str, Any] = {
        "cpu": draw(st.sampled_from(cpus)),
        "memory": draw(st.sampled_from(("0", "256Mi", "512Mi", "1Gi", "2Gi"))),
    }
    if draw(st.integers(0, 4)) == 0:
        kw["requests"] = {GPU: str(draw(st.integers(1, 2)))}
    return kw


@st.composite
def windows(draw: Any, *, max_nodes: int = 6, max_running: int = 6, max_templates: int = 4) -> Window:
    zones = draw(st.integers(1, 3))
    nodes = [_node(draw, i, zones) for i in range(draw(st.integers(1, max_nodes)))]
    names = [n.metadata.name for n in nodes]

    groups: dict[str, int] = {}  # PodGroup name -> members in existence (running + pending)
    group_names = ("g0", "g1")

    pods = []
    for j in range(draw(st.integers(0, max_running))):
        app = draw(st.sampled_from(APPS))
        kw: dict[str, Any] = {}
        if draw(st.integers(0, 5)) == 0:
            kw["pod_anti_affinity"] = [term({"app": draw(st.sampled_from(APPS))}, draw(st.sampled_from((HOST, ZONE))))]
        if draw(st.integers(0, 6)) == 0:
            kw["host_ports"] = [draw(st.sampled_from((80, 8080)))]
        if draw(st.integers(0, 5)) == 0:
            g = draw(st.sampled_from(group_names))
            kw["group"] = g
            groups[g] = groups.get(g, 0) + 1
        pods.append(
            make_pod(
                f"default/run-{j}",
                node=draw(st.sampled_from(names)),
                labels={"app": app},
                priority=draw(st.sampled_from(PRIORITIES[:3])),
                terminating=draw(st.integers(0, 9)) == 0,
                **_requests(draw, pending=False),
                **kw,
            )
        )

    created = 0
    for t in range(draw(st.integers(1, max_templates))):
        app = draw(st.sampled_from(APPS))
        replicas = draw(st.integers(1, 4))
        rules = _rules(draw, app)
        requests = _requests(draw, pending=True)
        priority = draw(st.sampled_from(PRIORITIES))
        policy = "Never" if draw(st.integers(0, 5)) == 0 else None
        group: Optional[str] = draw(st.sampled_from(group_names)) if draw(st.integers(0, 3)) == 0 else None
        if group is not None:
            groups[group] = groups.get(group, 0) + replicas
        for r in range(replicas):
            pods.append(
                make_pod(
                    f"default/t{t}-{r}",
                    labels={"app": app},
                    priority=priority,
                    preemption_policy=policy,
                    group=group,
                    created=at(created),
                    **requests,
                    **rules,
                )
            )
            created += 1

    # Sometimes a family of interchangeable gangs (same members, need and constraint, a group each):
    # the solver merges them into one gang kind, counted per zone when they require one zone.
    family: list = []
    if draw(st.integers(0, 3)) == 0:
        members, count = draw(st.integers(1, 2)), draw(st.integers(2, 3))
        how = draw(st.sampled_from(("zone", "zone", "preferred", None)))
        app, priority = draw(st.sampled_from(APPS)), draw(st.sampled_from(PRIORITIES))
        requests = _requests(draw, pending=True)
        need = draw(st.integers(1, members))
        for i in range(count):
            for r in range(members):
                pods.append(make_pod(f"default/fam{i}-{r}", labels={"app": app}, priority=priority, group=f"fam{i}",
                                     created=at(created), **requests))
                created += 1
            family.append(make_pod_group(f"default/fam{i}", need, topology_key=ZONE if how == "zone" else None,
                                         preferred=ZONE if how == "preferred" else None))

    pod_groups = list(family)
    for g, existing in sorted(groups.items()):
        if draw(st.integers(0, 5)) == 0:
            continue  # labelled pods whose PodGroup does not exist
        # Usually reachable, sometimes more members than exist (the group waits).
        # Sometimes all members in one zone (a v1alpha2 PodGroup's required topology).
        pod_groups.append(make_pod_group(f"default/{g}", draw(st.integers(1, existing + 1)),
                                         topology_key=draw(st.sampled_from((None, None, ZONE)))))

    pdbs = []
    for b in range(draw(st.integers(0, 2))):
        app = draw(st.sampled_from(APPS))
        how = draw(st.sampled_from(("min", "max", "allowed", "percent")))
        if how == "min":
            pdbs.append(make_pdb(f"default/pdb-{b}", {"app": app}, min_available=draw(st.integers(0, 3))))
        elif how == "max":
            pdbs.append(make_pdb(f"default/pdb-{b}", {"app": app}, max_unavailable=draw(st.integers(0, 2))))
        elif how == "percent":
            pdbs.append(make_pdb(f"default/pdb-{b}", {"app": app}, min_available=draw(st.sampled_from(("50%", "100%")))))
        else:
            pdbs.append(make_pdb(f"default/pdb-{b}", {"app": app}, allowed=draw(st.integers(0, 2))))

    config = SchedulerConfig.model_validate(
        {
            "profile": draw(st.sampled_from(("default", "default", "packing"))),
            "preemption": {
                "enabled": draw(st.integers(0, 7)) > 0,
                "pdb": draw(st.sampled_from(("soft", "hard"))),
            },
        }
    )
    pods = _nominations(draw, pods, names)
    # Volumes, drawn last so the windows drawn before them stay as they were.
    volumes = _volumes(draw, nodes, pods) if draw(st.integers(0, 3)) == 0 else {}
    pods = volumes.pop("pods", pods)
    snapshot = make_snapshot(nodes, pods, pdbs=pdbs, pod_groups=pod_groups, **volumes)
    return Window(snapshot, config)


def _volumes(draw: Any, nodes: list, pods: list) -> dict[str, Any]:
    """Claims for a few pods (running and pending): bound zonal volumes, WaitForFirstConsumer
    claims of a class that provisions (in some zones) or of local volumes (a few, pinned to
    nodes or zones), ReadWriteOncePod claims two pods share, a claim that does not exist; and
    CSINode limits on some nodes."""
    classes = [make_storage_class("wffc", zones=draw(st.sampled_from(((), ("z0",), ("z1", "z2"))))),
               make_storage_class("local", provisioner="kubernetes.io/no-provisioner"),
               make_storage_class("now", mode="Immediate")]
    pvs = []
    for i in range(draw(st.integers(0, 3))):
        where = draw(st.sampled_from(("zone", "host", "any")))
        kw: dict[str, Any] = {}
        if where == "zone":
            kw["zone"] = f"z{draw(st.integers(0, 2))}"
        elif where == "host":
            host = draw(st.sampled_from([n.metadata.name for n in nodes]))
            kw["node_affinity"] = {"required": {"nodeSelectorTerms": [node_term((HOST, "In", [host]))]}}
        pvs.append(make_pv(f"local-{i}", storage_class="local", size=draw(st.sampled_from(("5Gi", "10Gi", "20Gi"))), **kw))
    claims = []
    mounts: dict[str, list[str]] = {}
    candidates = [p.key for p in pods]
    for c in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(("bound", "bound", "wffc", "local", "local", "rwop", "missing", "immediate")))
        name = f"default/claim-{c}"
        users = draw(st.lists(st.sampled_from(candidates), min_size=1, max_size=2 if kind == "rwop" else 1, unique=True))
        if kind == "bound":
            zone = draw(st.sampled_from((None, "z0", "z1")))
            claims.append(make_pvc(name, volume=f"pv-{c}"))
            pvs.append(make_pv(f"pv-{c}", claim=name, zone=zone, labels={ZONE: zone} if zone else None,
                               driver=draw(st.sampled_from(("disk.csi", "disk.csi", "other.csi")))))
        elif kind == "rwop":
            claims.append(make_pvc(name, volume=f"pv-{c}", modes=["ReadWriteOncePod"]))
            pvs.append(make_pv(f"pv-{c}", claim=name, modes=["ReadWriteOncePod"]))
        elif kind == "wffc":
            claims.append(make_pvc(name, storage_class="wffc"))
        elif kind == "local":
            claims.append(make_pvc(name, storage_class="local", size=draw(st.sampled_from(("5Gi", "10Gi")))))
        elif kind == "immediate":
            claims.append(make_pvc(name, storage_class="now"))
        for user in users:
            mounts.setdefault(user, []).append(name.split("/", 1)[1])
    csi = [make_csi_node(n.metadata.name, {"disk.csi": draw(st.integers(0, 2))}) for n in nodes
           if draw(st.integers(0, 2)) == 0]

    def mounting(pod):
        if pod.key not in mounts:
            return pod
        volumes = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(mounts[pod.key])]
        return pod.model_copy(update={"spec": pod.spec.model_copy(update={"volumes": volumes})})

    return {"pods": [mounting(p) for p in pods], "pvcs": claims, "pvs": pvs, "storage_classes": classes,
            "csi_nodes": csi}


def _nominations(draw: Any, pods: list, names: list[str]) -> list:
    """Now and then (drawn last, so the windows drawn before stay as they were): a running pod
    being deleted as a victim of preemption (DisruptionTarget, PreemptionByScheduler), pending
    pods of ours nominated to a node (waiting for such victims, or not), and a pending pod of
    another scheduler nominated to a node, whose room the window must leave it."""
    if draw(st.integers(0, 2)):
        return pods
    out = list(pods)
    for i, p in enumerate(out):
        if p.spec.node_name and draw(st.integers(0, 3)) == 0:
            out[i] = p.model_copy(update={
                "metadata": p.metadata.model_copy(update={"deletion_timestamp": T0 + timedelta(hours=1)}),
                "status": p.status.model_copy(update={"conditions": [
                    PodCondition(type=DISRUPTION_TARGET, status="True", reason=PREEMPTION_BY_SCHEDULER)]}),
            })
        elif not p.spec.node_name and draw(st.integers(0, 2)) == 0:
            out[i] = p.model_copy(update={"status": p.status.model_copy(
                update={"nominated_node_name": draw(st.sampled_from(names))})})
    for k in range(draw(st.integers(0, 2))):
        port = {"host_ports": [draw(st.sampled_from((80, 8080)))]} if draw(st.integers(0, 3)) == 0 else {}
        out.append(make_pod(f"default/theirs-{k}", scheduler="default-scheduler", nominated=draw(st.sampled_from(names)),
                            priority=draw(st.sampled_from(PRIORITIES)), labels={"app": draw(st.sampled_from(APPS))},
                            **_requests(draw, pending=True), **port))
    return out


def dump(window: Window) -> str:
    """The window as JSON lines (non-default fields only): what a failure report needs to be rerun."""
    import json

    snap = window.snapshot
    objects = [*snap.nodes, *snap.pods, *snap.pdbs, *snap.pod_groups, *snap.storage_classes, *snap.pvs, *snap.pvcs,
               *snap.csi_nodes]
    # Each object names its kind (the models ignore the key): a reader tells a StorageClass from a
    # node without guessing from the fields left.
    lines = [json.dumps(_millicores({"kind": type(o).__name__,
                                     **o.model_dump(by_alias=True, exclude_defaults=True, mode="json")}))
             for o in objects]
    # A PodGroup's topology key is internal (never dumped with it): listed on its own.
    topology = {g.key: g.spec.topology_key for g in snap.pod_groups if g.spec.topology_key is not None}
    if topology:
        lines.append(json.dumps({"topology": topology}))
    lines.append(json.dumps({"config": window.config.model_dump(by_alias=True, exclude_defaults=True, mode="json")}))
    return "\n".join(lines)


def _millicores(item: Any) -> Any:
    """``item`` with every cpu amount written in millicores (``"1500m"``): the models keep cpu in
    millicores as a plain integer, which read back would count whole cores (a dump's 4000 would
    be 4,000 cpus). Every other resource is kept in its base unit, which reads back as it is."""
    if isinstance(item, dict):
        return {k: f"{v}m" if k == "cpu" and isinstance(v, int) else _millicores(v) for k, v in item.items()}
    if isinstance(item, list):
        return [_millicores(v) for v in item]
    return item

"""Obstacles in what a node holds beyond requests, and in what the targets carry with them:

* ``pod-count``: a node's pod slots (``status.allocatable.pods``) all taken — relaxed by giving
  the node as many more slots as there are targets;
* ``volume``: one PersistentVolumeClaim (or ephemeral volume) of the targets — its binding, its
  volume's zone, a node's attach limit, an access mode another pod holds — relaxed by the
  targets not mounting it;
* ``volume-limit``: a node's CSI attach limit for one driver (``CSINode spec.drivers[i]
  .allocatable.count``) — relaxed by lifting the limit;
* ``device-claim``: one ResourceClaim entry of the targets (DRA devices) — relaxed by the
  targets not asking for it;
* ``host-port``: a host port the targets ask for (two members of one gang cannot share a node
  with it, nor a target a node whose pod holds it) — relaxed by the targets not asking for it.

Each relaxation only removes a constraint (a slot more, a volume, claim or port less), as
``obstacles`` requires of all of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from models.objects import Container, Node, Pod, copy_with
from models.snapshot import ClusterSnapshot, holds_node
from models.storage import claim_names

from .obstacle import Obstacle

PODS = "pods"


def _who(targets: Sequence[Pod]) -> str:
    return targets[0].key if len(targets) == 1 else f"{len(targets)} pods of the gang"


def held_obstacles(base: ClusterSnapshot, targets: Sequence[Pod]) -> list[Obstacle]:
    return [*_pod_count(base, len(targets)), *_volumes(base, targets), *_volume_limits(base, targets),
            *_device_claims(targets), *_host_ports(targets)]


def _pod_count(base: ClusterSnapshot, wanted: int) -> list[Obstacle]:
    """Nodes without a slot for each of the ``wanted`` targets."""
    held: dict[str, int] = {}
    for pod in base.pods:
        if holds_node(pod):
            held[pod.spec.node_name] = held.get(pod.spec.node_name, 0) + 1
    out = []
    for node in base.nodes:
        name, slots, n = node.metadata.name, node.allocatable.get(PODS, 0), held.get(node.metadata.name, 0)
        if n + wanted > slots:
            out.append(Obstacle("pod-count", name, f"node {name} holds {n} pod(s), its pod slots: {slots}",
                                (f"nodes/{name}",), ("status.allocatable.pods",), 40, f"node {name}'s pod count"))
    return out


def _volume_names(pod: Pod) -> list[str]:
    """The claims a pod mounts: PVCs by name, ephemeral volumes as ``<pod>-<volume>``."""
    out = list(claim_names(pod.spec.volumes))
    out += [f"{pod.metadata.name}-{v['name']}" for v in pod.spec.volumes if "ephemeral" in v]
    return out


def _volumes(base: ClusterSnapshot, targets: Sequence[Pod]) -> list[Obstacle]:
    seen: dict[str, list[Pod]] = {}
    for t in targets:
        for name in _volume_names(t):
            seen.setdefault(f"{t.metadata.namespace}/{name}", []).append(t)
    out = []
    for key, pods in seen.items():
        what, objects, fields = _volume_facts(base, key, {p.key for p in pods})
        out.append(Obstacle("volume", key.partition("/")[2], f"{_who(pods)}: PersistentVolumeClaim {key} {what}",
                            tuple(objects) + tuple(f"pods/{p.key}" for p in pods), tuple(fields), 8,
                            f"its volume {key}"))
    return out


def _volume_facts(base: ClusterSnapshot, key: str, owners: set[str]) -> tuple[str, list[str], list[str]]:
    """What stands out about claim ``key``: missing, its volume and that volume's node affinity,
    an access mode another pod holds, or unbound with its StorageClass's binding mode."""
    claim = next((c for c in base.pvcs if c.key == key), None)
    objects = [f"persistentvolumeclaims/{key}"]
    fields = ["spec.volumes[*].persistentVolumeClaim"]
    if claim is None:
        return "does not exist yet", objects, fields
    facts = []
    if claim.spec.volume_name:
        pv = next((v for v in base.pvs if v.metadata.name == claim.spec.volume_name), None)
        facts.append(f"bound to volume {claim.spec.volume_name}")
        objects.append(f"persistentvolumes/{claim.spec.volume_name}")
        if pv is not None and pv.spec.node_affinity is not None:
            facts.append("whose spec.nodeAffinity limits the nodes that reach it")
            fields.append("spec.nodeAffinity")
    else:
        sc = next((c for c in base.storage_classes if c.metadata.name == claim.spec.storage_class_name), None)
        if sc is None:
            facts.append(f"unbound, StorageClass {claim.spec.storage_class_name or '(none)'}")
        else:
            facts.append(f"unbound, StorageClass {sc.metadata.name} (volumeBindingMode {sc.volume_binding_mode}"
                         + (", allowedTopologies" if sc.allowed_topologies else "") + ")")
            objects.append(f"storageclasses/{sc.metadata.name}")
            fields.append("volumeBindingMode")
    if "ReadWriteOncePod" in claim.spec.access_modes:
        name = key.partition("/")[2]
        users = [p.key for p in base.pods if holds_node(p) and p.key not in owners
                 and p.metadata.namespace == claim.metadata.namespace and name in claim_names(p.spec.volumes)]
        if users:
            facts.append(f"ReadWriteOncePod, in use by pod {users[0]}")
            fields.append("spec.accessModes")
    return ", ".join(facts), objects, fields


def _volume_limits(base: ClusterSnapshot, targets: Sequence[Pod]) -> list[Obstacle]:
    if not any(_volume_names(t) for t in targets):
        return []
    out = []
    for csi in base.csi_nodes:
        for i, driver in enumerate(csi.spec.drivers):
            count = driver.allocatable.count if driver.allocatable is not None else None
            if count is not None:
                name = csi.metadata.name
                out.append(Obstacle("volume-limit", (name, driver.name), f"node {name} attaches at most {count} "
                                    f"volume(s) of driver {driver.name}", (f"csinodes/{name}",),
                                    (f"spec.drivers[{i}].allocatable.count",), 15,
                                    f"node {name}'s {driver.name} volume limit"))
    return out


def _device_claims(targets: Sequence[Pod]) -> list[Obstacle]:
    entries: dict[str, tuple[int, str]] = {}
    for t in targets:
        for i, rc in enumerate(t.spec.resource_claims):
            source = (f"resourceclaims/{t.metadata.namespace}/{rc.resource_claim_name}" if rc.resource_claim_name
                      else f"resourceclaimtemplates/{t.metadata.namespace}/{rc.resource_claim_template_name}")
            entries.setdefault(rc.name, (i, source))
    owners = tuple(f"pods/{t.key}" for t in targets)
    return [Obstacle("device-claim", name, f"{_who(targets)}: ResourceClaim entry {name} ({source.split('/')[0][:-1]} "
                     f"{source.partition('/')[2]}): the DRA devices it asks for", (source,) + owners,
                     (f"spec.resourceClaims[{i}]", "spec.devices.requests"), 8, f"its device claim {name}")
            for name, (i, source) in entries.items()]


def _ports_of(pod: Pod) -> set[tuple[int, str]]:
    return {(p.host_port, p.protocol) for c in (*pod.spec.containers, *pod.spec.init_containers) for p in c.ports
            if p.host_port}


def _host_ports(targets: Sequence[Pod]) -> list[Obstacle]:
    ports = sorted({p for t in targets for p in _ports_of(t)})
    owners = tuple(f"pods/{t.key}" for t in targets)
    many = len(targets) > 1
    return [Obstacle("host-port", port, f"{_who(targets)}: hostPort {port[0]}/{port[1]}"
                     + (" (no two of them on one node)" if many else ""), owners,
                     ("spec.containers[*].ports[*].hostPort",), 8, f"its hostPort {port[0]}/{port[1]}")
            for port in ports]


# -- relaxing them ---------------------------------------------------------------------------


def relaxed_node(node: Node, by_kind: dict[str, set], targets: int) -> Node:
    """``node`` with ``targets`` more pod slots when its pod count is relaxed."""
    if node.metadata.name not in by_kind.get("pod-count", set()):
        return node
    allocatable = dict(node.allocatable)
    allocatable[PODS] = node.allocatable.get(PODS, 0) + targets
    return copy_with(node, {"status": copy_with(node.status, {"allocatable": allocatable})})


def relaxed_csi_nodes(base: ClusterSnapshot, by_kind: dict[str, set]) -> list:
    lifted = by_kind.get("volume-limit", set())
    out = []
    for csi in base.csi_nodes:
        if any(n == csi.metadata.name for n, _ in lifted):
            drivers = [copy_with(d, {"allocatable": None}) if (csi.metadata.name, d.name) in lifted else d
                       for d in csi.spec.drivers]
            csi = copy_with(csi, {"spec": copy_with(csi.spec, {"drivers": drivers})})
        out.append(csi)
    return out


def relaxed_target(pod: Pod, by_kind: dict[str, set]) -> Pod:
    """A target without the volumes, claims and host ports relaxed."""
    spec = pod.spec
    volumes = by_kind.get("volume", set())
    if volumes:
        kept = [v for v in spec.volumes if not (set(claim_names([v])) & volumes
                                                 or f"{pod.metadata.name}-{v['name']}" in volumes)]
        spec = copy_with(spec, {"volumes": kept})
    claims = by_kind.get("device-claim", set())
    ports = by_kind.get("host-port", set())
    if claims or ports:
        def bare(c: Container) -> Container:
            refs = [r for r in c.resources.claims if r.name not in claims]
            return copy_with(c, {"resources": copy_with(c.resources, {"claims": refs}),
                                 "ports": [p for p in c.ports if not (p.host_port and (p.host_port, p.protocol) in ports)]})

        spec = copy_with(spec, {"resource_claims": [rc for rc in spec.resource_claims if rc.name not in claims],
                                "containers": [bare(c) for c in spec.containers],
                                "init_containers": [bare(c) for c in spec.init_containers]})
    return pod if spec is pod.spec else copy_with(pod, {"spec": spec})


def released_claims(base: ClusterSnapshot, freed: set[str]) -> list:
    """The snapshot's claims, those reserved only for pods of ``freed`` deallocated (their
    devices free again), as when those pods' room is relaxed."""
    out = []
    for claim in base.resource_claims:
        users = {f"{claim.metadata.namespace}/{r.name}" for r in claim.status.reserved_for if r.resource == "pods"}
        if claim.status.allocation is not None and users and users <= freed:
            claim = copy_with(claim, {"status": copy_with(claim.status, {"allocation": None, "reserved_for": []})})
        out.append(claim)
    return out

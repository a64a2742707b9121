"""VolumeBinding's rule as pure functions over ``models.storage`` objects and node labels.

PreFilter (per pod): every claim must exist and not be being deleted; an unbound claim whose
class binds ``Immediate`` makes the pod unschedulable (the PV controller, not the scheduler,
binds it). Filter (per node): a bound claim's volume must exist and its node affinity admit the
node; an unbound ``WaitForFirstConsumer`` claim needs an available volume that matches it and
admits the node (the smallest wins; one volume serves one claim), or a class that can
provision there (a provisioner other than ``kubernetes.io/no-provisioner``, and
``allowedTopologies`` admitting the node's labels).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Optional

from models.storage import NO_PROVISIONER, PersistentVolume, PersistentVolumeClaim, StorageClass

from ....volume_catalog import VolumeCatalog, uses_node_state as uses_node_state

NAME = "VolumeBinding"

# PreFilter messages (UnschedulableAndUnresolvable; the FitError shows them instead of a histogram).
NOT_FOUND = 'persistentvolumeclaim "{}" not found'
BEING_DELETED = 'persistentvolumeclaim "{}" is being deleted'
CLASS_NOT_FOUND = 'storageclass.storage.k8s.io "{}" not found'
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
# Set on a claim by PreBind for its provisioner: the volume is being made for that node.
SELECTED_NODE = "volume.kubernetes.io/selected-node"
# Filter reasons (all UnschedulableAndUnresolvable). NODE_CONFLICT is the current text (events of
# 1.3x clusters show it); releases before said "node(s) had volume node affinity conflict", the
# string SEMANTICS.md §3.10 still lists.
NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"


@dataclass(frozen=True)
class Delayed:
    """An unbound WaitForFirstConsumer claim: the volumes that could serve it (smallest first,
    node affinity not yet checked) and its class (for provisioning)."""

    key: str
    candidates: tuple[PersistentVolume, ...]
    storage_class: StorageClass
    selected_node: str = ""  # provisioning for this node is under way: only it will do


@dataclass(frozen=True)
class PodVolumes:
    """A pod's claims sorted out once (PreFilter): the message if they fail outright, the
    volumes of its bound claims (None: the volume does not exist), its delayed claims."""

    error: Optional[str] = None
    bound: tuple[tuple[str, Optional[PersistentVolume]], ...] = ()
    delayed: tuple[Delayed, ...] = ()


def prefilter(namespace: str, claim_keys: tuple[str, ...], catalog: VolumeCatalog) -> PodVolumes:
    bound: list[tuple[str, Optional[PersistentVolume]]] = []
    delayed: list[Delayed] = []
    immediate = False
    for key in claim_keys:
        claim = catalog.claims.get(key)
        name = key.split("/", 1)[1]
        if claim is None:
            return PodVolumes(error=NOT_FOUND.format(name))
        if claim.metadata.deletion_timestamp is not None:
            return PodVolumes(error=BEING_DELETED.format(name))
        if claim.spec.volume_name:
            bound.append((key, catalog.bound_volume(claim)))
            continue
        class_name = catalog.class_name(claim)
        cls = catalog.classes.get(class_name) if class_name else None
        if class_name and cls is None:
            return PodVolumes(error=CLASS_NOT_FOUND.format(class_name))
        if cls is None or not catalog.delayed(claim):
            immediate = True
            continue
        selected = claim.metadata.annotations.get(SELECTED_NODE, "")
        delayed.append(Delayed(key, () if selected else candidates(claim, class_name, catalog), cls, selected))
    if immediate:
        return PodVolumes(error=UNBOUND_IMMEDIATE)
    return PodVolumes(bound=tuple(bound), delayed=tuple(delayed))


def volume_matches(pv: PersistentVolume, claim: PersistentVolumeClaim, class_name: str) -> bool:
    """Whether ``pv`` can serve ``claim`` wherever both may be used: available (no claimRef, or
    one naming this claim), same class and volume mode, every access mode asked for, big enough,
    and labels matching the claim's selector."""
    ref = pv.claim_key
    if ref is not None and ref != claim.key:
        return False
    if pv.metadata.deletion_timestamp is not None or pv.status.phase in ("Released", "Failed"):
        return False
    spec = pv.spec
    if spec.storage_class_name != class_name or spec.volume_mode != claim.spec.volume_mode:
        return False
    if not set(claim.spec.access_modes) <= set(spec.access_modes):
        return False
    if pv.size < claim.request:
        return False
    selector = claim.spec.selector
    return selector is None or selector.matches(pv.metadata.labels)


def candidates(claim: PersistentVolumeClaim, class_name: str, catalog: VolumeCatalog) -> tuple[PersistentVolume, ...]:
    """The volumes that match the claim, smallest first (then by name)."""
    found = [pv for pv in catalog.pvs.values() if volume_matches(pv, claim, class_name)]
    found.sort(key=lambda pv: (pv.size, pv.name))
    return tuple(found)


def admits(pv: PersistentVolume, node_name: str, labels: Mapping[str, str]) -> bool:
    """Whether the volume's required node affinity admits the node."""
    required = pv.required_nodes
    return required is None or required.matches(node_name, dict(labels))


def can_provision(cls: StorageClass, labels: Mapping[str, str]) -> bool:
    """Whether the class can create a volume for a claim on a node with these labels: it has a
    provisioner and its ``allowedTopologies`` (any term; every expression of it) admit them."""
    if not cls.provisioner or cls.provisioner == NO_PROVISIONER:
        return False
    if not cls.allowed_topologies:
        return True
    return any(
        all(labels.get(req.key) in req.values for req in term.match_label_expressions)
        for term in cls.allowed_topologies
    )


def choose(claims: PodVolumes, node_name: str, labels: Mapping[str, str],
           taken: Mapping[str, str]) -> Optional[dict[str, Optional[str]]]:
    """For each delayed claim, the volume it takes on this node (None: provisioned), or None when
    some claim has neither. ``taken``: volume -> the claim it went to already (in the window);
    the pod's own claims do not take one volume twice."""
    chosen: dict[str, Optional[str]] = {}
    used = set()
    held = {claim: volume for volume, claim in taken.items()}
    for d in claims.delayed:
        if d.selected_node:
            if d.selected_node != node_name or not can_provision(d.storage_class, labels):
                return None
            chosen[d.key] = None
            continue
        if d.key in held:  # another pod of the window already took a volume for this claim
            pv = next((pv for pv in d.candidates if pv.name == held[d.key]), None)
            if pv is None or not admits(pv, node_name, labels):
                return None
            chosen[d.key] = pv.name
            continue
        pick = next((pv.name for pv in d.candidates
                     if pv.name not in used and taken.get(pv.name, d.key) == d.key and admits(pv, node_name, labels)),
                    None)
        if pick is None and not can_provision(d.storage_class, labels):
            return None
        chosen[d.key] = pick
        if pick is not None:
            used.add(pick)
    return chosen


def reasons(claims: PodVolumes, node_name: str, labels: Mapping[str, str],
            taken: Mapping[str, str]) -> tuple[str, ...]:
    """The node's VolumeBinding reasons (empty: it passes)."""
    out: list[str] = []
    if any(pv is None for _, pv in claims.bound):
        return (PV_NOT_EXIST,)
    if not all(admits(pv, node_name, labels) for _, pv in claims.bound if pv is not None):
        out.append(NODE_CONFLICT)
    if claims.delayed and choose(claims, node_name, labels, taken) is None:
        out.append(BIND_CONFLICT)
    return tuple(out)


def fits_binding(claim_key: str, volume: Optional[str], catalog: VolumeCatalog, node_name: str,
                 labels: Mapping[str, str]) -> Optional[str]:
    """Why a plan's binding of a delayed claim on this node is wrong (None: it is right):
    ``volume`` must match the claim and admit the node, or (None) the class must provision there."""
    claim = catalog.claims[claim_key]
    cls = catalog.storage_class(claim)
    selected = claim.metadata.annotations.get(SELECTED_NODE, "")
    if selected and (volume is not None or selected != node_name):
        return f"its volume is being provisioned for node {selected} ({SELECTED_NODE})"
    if volume is None:
        if cls is None or not can_provision(cls, labels):
            return "its class cannot provision a volume on this node"
        return None
    pv = catalog.pvs.get(volume)
    if pv is None:
        return f"volume {volume} is not in the snapshot"
    if not volume_matches(pv, claim, catalog.class_name(claim)):
        return f"volume {volume} does not match the claim (class, size, access modes, volume mode or claimRef)"
    if not admits(pv, node_name, labels):
        return f"volume {volume}'s node affinity does not admit the node"
    return None


def delayed_claims(claim_keys: Collection[str], catalog: VolumeCatalog) -> list[str]:
    """The unbound WaitForFirstConsumer claims among ``claim_keys`` that exist."""
    out = []
    for key in claim_keys:
        claim = catalog.claims.get(key)
        if claim is not None and not claim.spec.volume_name and catalog.delayed(claim):
            out.append(key)
    return out


Use = tuple[str, Mapping[str, str]]  # (node name, node labels) where a claim is mounted


def plan_bindings(uses: Mapping[str, list[Use]], catalog: VolumeCatalog,
                  given: Optional[Mapping[str, Optional[str]]] = None) -> dict[str, Optional[str]]:
    """For the delayed claims in ``uses`` (claim -> the nodes of the pods mounting it), a volume
    each (None: provisioned), no volume twice: a maximum matching that binds every claim its
    nodes cannot provision for, and prefers an existing volume otherwise (as kube-scheduler
    looks for one before provisioning). ``given``: claims already decided (kept, their volumes
    taken). Claims with no way out are left out of the answer."""
    import networkx as nx

    given = dict(given or {})
    taken = {v for v in given.values() if v is not None}
    open_claims = sorted(k for k in uses if k not in given)
    must = {k for k in open_claims
            if not all((cls := catalog.storage_class(catalog.claims[k])) is not None and can_provision(cls, labels)
                       for _, labels in uses[k])}
    selected = {k: s for k in open_claims if (s := catalog.claims[k].metadata.annotations.get(SELECTED_NODE, ""))}
    graph = nx.Graph()
    heavy = len(open_claims) + 1
    for key in open_claims:
        if key in selected:
            continue  # provisioned for its node: no volume to match
        claim = catalog.claims[key]
        class_name = catalog.class_name(claim)
        for pv in candidates(claim, class_name, catalog):
            if pv.name in taken or not all(admits(pv, node, labels) for node, labels in uses[key]):
                continue
            # Heavier for claims that need a volume; a smaller volume weighs a little more.
            weight = (heavy if key in must else 1) * 4 * heavy - 1.0 / (2 + pv.size.bit_length())
            graph.add_edge(("claim", key), ("pv", pv.name), weight=weight)
    matched: dict[str, str] = {}
    for a, b in nx.max_weight_matching(graph):
        claim_side, pv_side = (a, b) if a[0] == "claim" else (b, a)
        matched[claim_side[1]] = pv_side[1]
    out: dict[str, Optional[str]] = dict(given)
    for key in open_claims:
        if key in selected:
            if key not in must and all(node == selected[key] for node, _ in uses[key]):
                out[key] = None
        elif key in matched:
            out[key] = matched[key]
        elif key not in must:
            out[key] = None
    return out

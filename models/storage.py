"""Where a pod's persistent data lives: PersistentVolumeClaims, PersistentVolumes, StorageClasses
and CSINodes, as ``kubectl get pv,pvc,storageclass,csinode -A -o yaml`` prints them, and which
claims a pod's ``spec.volumes`` mount.

Only what placement reads is parsed (``solver/plugins/volumes/``):
the claim's request, access modes, class, volume mode and binding; the volume's capacity,
access modes, class, node affinity, claimRef, CSI driver and zone labels; the class's binding
mode, provisioner and allowed topologies; the per-driver attach limits of each node. Sizes are
bytes (``resources.requests.storage``, ``capacity.storage``), parsed exactly as quantities.
"""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import Field, field_validator

from .errors import clipped
from .objects import ClusterObject, K8sModel, LabelSelector, ListOf, NamespacedObject, NodeSelector, ObjectMeta
from .quantity import QuantityError, parse_quantity, to_units

READ_WRITE_ONCE_POD = "ReadWriteOncePod"
ACCESS_MODES = frozenset({"ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", READ_WRITE_ONCE_POD})
IMMEDIATE = "Immediate"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
# The class a cluster gives claims that name none (set by the admission plugin; read for dumps
# of hand-written claims whose storageClassName is left out).
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"


def _storage_bytes(value: Any) -> Optional[int]:
    if value is None:
        return None
    try:
        quantity = parse_quantity(value)
    except QuantityError as exc:
        raise ValueError(str(exc)) from None
    if quantity < 0:
        raise ValueError(f'"{clipped(str(value))}" must be non-negative')
    return to_units("storage", quantity)


def _access_modes(value: Any) -> Any:
    if value is None:
        return []
    if isinstance(value, list):
        for mode in value:
            if mode not in ACCESS_MODES:
                raise ValueError(f"unknown access mode {clipped(repr(mode))} (one of {', '.join(sorted(ACCESS_MODES))})")
    return value


class StorageRequest(K8sModel):
    storage: Optional[int] = None

    _bytes = field_validator("storage", mode="before")(lambda cls, v: _storage_bytes(v))


class ClaimResources(K8sModel):
    requests: StorageRequest = StorageRequest()


class PersistentVolumeClaimSpec(K8sModel):
    access_modes: ListOf[str] = []
    resources: ClaimResources = ClaimResources()
    volume_name: str = ""
    storage_class_name: Optional[str] = None
    volume_mode: Literal["Filesystem", "Block"] = "Filesystem"
    selector: Optional[LabelSelector] = None

    _modes = field_validator("access_modes", mode="before")(lambda cls, v: _access_modes(v))
    _mode = field_validator("volume_mode", mode="before")(lambda cls, v: "Filesystem" if v is None else v)


class ClaimStatus(K8sModel):
    phase: str = ""


class PersistentVolumeClaim(NamespacedObject):
    api_version: str = "v1"
    kind: Literal["PersistentVolumeClaim"] = "PersistentVolumeClaim"
    metadata: ObjectMeta
    spec: PersistentVolumeClaimSpec = PersistentVolumeClaimSpec()
    status: ClaimStatus = ClaimStatus()

    @property
    def request(self) -> int:
        """Bytes asked for (0 when the claim names no size)."""
        return self.spec.resources.requests.storage or 0

    @property
    def read_write_once_pod(self) -> bool:
        return READ_WRITE_ONCE_POD in self.spec.access_modes


class VolumeNodeAffinity(K8sModel):
    required: Optional[NodeSelector] = None


class ClaimReference(K8sModel):
    namespace: str = ""
    name: str = ""
    uid: str = ""


class CSIVolumeSource(K8sModel):
    driver: str = Field(min_length=1)
    volume_handle: str = ""


class PersistentVolumeSpec(K8sModel):
    capacity: StorageRequest = StorageRequest()
    access_modes: ListOf[str] = []
    node_affinity: Optional[VolumeNodeAffinity] = None
    storage_class_name: str = ""
    claim_ref: Optional[ClaimReference] = None
    csi: Optional[CSIVolumeSource] = None
    volume_mode: Literal["Filesystem", "Block"] = "Filesystem"

    _modes = field_validator("access_modes", mode="before")(lambda cls, v: _access_modes(v))
    _mode = field_validator("volume_mode", mode="before")(lambda cls, v: "Filesystem" if v is None else v)
    _class = field_validator("storage_class_name", mode="before")(lambda cls, v: "" if v is None else v)


class VolumeStatus(K8sModel):
    phase: str = ""


class PersistentVolume(ClusterObject):
    api_version: str = "v1"
    kind: Literal["PersistentVolume"] = "PersistentVolume"
    spec: PersistentVolumeSpec = PersistentVolumeSpec()
    status: VolumeStatus = VolumeStatus()

    @property
    def size(self) -> int:
        return self.spec.capacity.storage or 0

    @property
    def claim_key(self) -> Optional[str]:
        """``namespace/name`` of the claim the volume is reserved for, if any."""
        ref = self.spec.claim_ref
        if ref is None or not ref.name:
            return None
        return f"{ref.namespace or 'default'}/{ref.name}"

    @property
    def required_nodes(self) -> Optional[NodeSelector]:
        """The nodes the volume can be used on; None when any node can reach it."""
        affinity = self.spec.node_affinity
        if affinity is None or affinity.required is None or not affinity.required.node_selector_terms:
            return None
        return affinity.required


class TopologySelectorRequirement(K8sModel):
    key: str = Field(min_length=1)
    values: ListOf[str] = []


class TopologySelectorTerm(K8sModel):
    match_label_expressions: ListOf[TopologySelectorRequirement] = []


class StorageClass(ClusterObject):
    api_version: str = "storage.k8s.io/v1"
    kind: Literal["StorageClass"] = "StorageClass"
    provisioner: str = ""
    volume_binding_mode: Literal["Immediate", "WaitForFirstConsumer"] = "Immediate"
    allowed_topologies: ListOf[TopologySelectorTerm] = []

    _mode = field_validator("volume_binding_mode", mode="before")(lambda cls, v: IMMEDIATE if v is None else v)

    @property
    def is_default(self) -> bool:
        return self.metadata.annotations.get(DEFAULT_CLASS_ANNOTATION) == "true"


class VolumeNodeResources(K8sModel):
    count: Optional[int] = Field(default=None, ge=0)


class CSINodeDriver(K8sModel):
    name: str = Field(min_length=1)
    node_id: str = ""
    allocatable: Optional[VolumeNodeResources] = None


class CSINodeSpec(K8sModel):
    drivers: ListOf[CSINodeDriver] = []


class CSINode(ClusterObject):
    """Named after its node; ``spec.drivers[].allocatable.count`` caps the volumes of a driver."""

    api_version: str = "storage.k8s.io/v1"
    kind: Literal["CSINode"] = "CSINode"
    spec: CSINodeSpec = CSINodeSpec()

    def limits(self) -> dict[str, int]:
        """Per CSI driver, how many volumes the node can attach (drivers with no count: no limit)."""
        return {d.name: d.allocatable.count for d in self.spec.drivers
                if d.allocatable is not None and d.allocatable.count is not None}


def claim_names(volumes: list[dict]) -> list[str]:
    """The PersistentVolumeClaims a pod's ``spec.volumes`` mount by name (ephemeral volumes'
    claims, named ``<pod>-<volume>``, are not listed: ``pod_claims`` adds them)."""
    names = []
    for volume in volumes:
        source = volume.get("persistentVolumeClaim")
        if isinstance(source, dict) and isinstance(source.get("claimName"), str) and source["claimName"]:
            names.append(source["claimName"])
    return names


def pod_claims(pod_name: str, volumes: list[dict]) -> list[str]:
    """Every claim the pod mounts, in ``spec.volumes`` order, once each: a
    ``persistentVolumeClaim`` volume's ``claimName``, and for a generic ephemeral volume the
    claim the ephemeral-volume controller creates for it, ``<pod name>-<volume name>``."""
    names: list[str] = []
    for volume in volumes:
        source = volume.get("persistentVolumeClaim")
        name = ""
        if isinstance(source, dict) and isinstance(source.get("claimName"), str):
            name = source["claimName"]
        elif isinstance(volume.get("ephemeral"), dict) and isinstance(volume.get("name"), str):
            name = f"{pod_name}-{volume['name']}"
        if name and name not in names:
            names.append(name)
    return names


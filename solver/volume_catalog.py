"""What the four volume plugins read of a snapshot, as plain lookups: claims by ``namespace/name``,
volumes and classes by name, and each node's per-driver CSI attach limit.

Pure data over ``models.storage`` objects; the rules themselves live in the volume plugins' family
(VolumeBinding, VolumeRestrictions, VolumeZone and NodeVolumeLimits). A pod's claims are
``PodInfo.claims`` (``models.storage.pod_claims``, namespaced).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

from models.storage import (
    NO_PROVISIONER,
    WAIT_FOR_FIRST_CONSUMER,
    CSINode,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)


@dataclass(frozen=True)
class VolumeCatalog:
    claims: Mapping[str, PersistentVolumeClaim] = field(default_factory=dict)
    pvs: Mapping[str, PersistentVolume] = field(default_factory=dict)
    classes: Mapping[str, StorageClass] = field(default_factory=dict)
    # node name -> CSI driver -> how many volumes of it the node can attach
    limits: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    @staticmethod
    def of(pvcs, pvs, classes, csi_nodes) -> "VolumeCatalog":
        return VolumeCatalog(
            claims={c.key: c for c in pvcs},
            pvs={v.name: v for v in pvs},
            classes={c.name: c for c in classes},
            limits={n.name: n.limits() for n in csi_nodes if n.limits()},
        )

    @property
    def default_class(self) -> Optional[StorageClass]:
        defaults = sorted((c for c in self.classes.values() if c.is_default), key=lambda c: c.name)
        return defaults[0] if defaults else None

    def class_name(self, claim: PersistentVolumeClaim) -> str:
        """The claim's class: ``storageClassName``; when it is left out (null), the cluster's
        default class, as the admission plugin would have set it; ``""`` names no class."""
        name = claim.spec.storage_class_name
        if name is None:
            default = self.default_class
            return default.name if default is not None else ""
        return name

    def storage_class(self, claim: PersistentVolumeClaim) -> Optional[StorageClass]:
        name = self.class_name(claim)
        return self.classes.get(name) if name else None

    def delayed(self, claim: PersistentVolumeClaim) -> bool:
        """Whether an unbound claim waits for its first consumer (its class says so)."""
        cls = self.storage_class(claim)
        return cls is not None and cls.volume_binding_mode == WAIT_FOR_FIRST_CONSUMER

    def bound_volume(self, claim: PersistentVolumeClaim) -> Optional[PersistentVolume]:
        return self.pvs.get(claim.spec.volume_name) if claim.spec.volume_name else None

    def driver(self, claim_key: str) -> Optional[str]:
        """The CSI driver whose attach limit the claim's volume counts against: the bound
        volume's ``spec.csi.driver``; for an unbound claim, its class's provisioner (what will
        create the volume; none for ``kubernetes.io/no-provisioner``)."""
        claim = self.claims.get(claim_key)
        if claim is None:
            return None
        if claim.spec.volume_name:
            pv = self.pvs.get(claim.spec.volume_name)
            return pv.spec.csi.driver if pv is not None and pv.spec.csi is not None else None
        cls = self.storage_class(claim)
        if cls is None or not cls.provisioner or cls.provisioner == NO_PROVISIONER:
            return None
        return cls.provisioner

    def rwop(self, claim_key: str) -> bool:
        claim = self.claims.get(claim_key)
        return claim is not None and claim.read_write_once_pod

    def __bool__(self) -> bool:
        return bool(self.claims or self.pvs or self.classes or self.limits)


EMPTY = VolumeCatalog()


# The volume sources that make a pod's room differ from node to node (claims bound or bindable
# only on some, generic ephemeral volumes, CSI attach limits).
_PER_NODE_SOURCES = ("persistentVolumeClaim", "ephemeral", "csi")


def uses_node_state(pod: Any) -> bool:
    """Whether the pod (a ``PodInfo``) mounts volumes whose rules read per-node state: a volume's
    node affinity may name the host and attach limits are counted per node, so nodes alike in
    every other way are not interchangeable for it (the four volume plugins' ``per_node_state``;
    here, below them, so that none of them imports another for it)."""
    return any(key in volume for volume in pod.pod.spec.volumes for key in _PER_NODE_SOURCES)

"""Where a pod's persistent data lives: PersistentVolumeClaims and the PersistentVolumes bound
to them, as ``kubectl get pv,pvc -A -o yaml`` prints them.

Only what placement needs is read: which volume a claim is bound to, and the node affinity of
that volume (a zonal disk can only be attached in its zone; a local volume only on its node).
A running pod whose claim's volume has such an affinity can only be re-created on nodes the
affinity admits.
"""

from __future__ import annotations

from typing import Literal, Optional

from .objects import K8sModel, NamespacedObject, NodeSelector, ObjectMeta


class PersistentVolumeClaimSpec(K8sModel):
    volume_name: str = ""
    storage_class_name: Optional[str] = None


class PersistentVolumeClaim(NamespacedObject):
    api_version: str = "v1"
    kind: Literal["PersistentVolumeClaim"] = "PersistentVolumeClaim"
    metadata: ObjectMeta
    spec: PersistentVolumeClaimSpec = PersistentVolumeClaimSpec()


class VolumeNodeAffinity(K8sModel):
    required: Optional[NodeSelector] = None


class PersistentVolumeSpec(K8sModel):
    node_affinity: Optional[VolumeNodeAffinity] = None
    storage_class_name: str = ""


class PersistentVolume(K8sModel):
    api_version: str = "v1"
    kind: Literal["PersistentVolume"] = "PersistentVolume"
    metadata: ObjectMeta
    spec: PersistentVolumeSpec = PersistentVolumeSpec()

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def required_nodes(self) -> Optional[NodeSelector]:
        """The nodes the volume can be used on; None when any node can reach it."""
        affinity = self.spec.node_affinity
        if affinity is None or affinity.required is None or not affinity.required.node_selector_terms:
            return None
        return affinity.required


def claim_names(volumes: list[dict]) -> list[str]:
    """The PersistentVolumeClaims a pod's ``spec.volumes`` mount (ephemeral volumes' claims,
    named ``<pod>-<volume>``, are not looked up: they are re-created with the pod)."""
    names = []
    for volume in volumes:
        source = volume.get("persistentVolumeClaim")
        if isinstance(source, dict) and isinstance(source.get("claimName"), str) and source["claimName"]:
            names.append(source["claimName"])
    return names

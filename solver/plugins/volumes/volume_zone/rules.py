"""VolumeZone, pure: for each bound claim of the pod, the volume's zone and region labels
(``topology.kubernetes.io/*`` and the legacy ``failure-domain.beta.kubernetes.io/*``; a value may
list several zones joined by ``__``) must each be matched by the node's label of that key (a
legacy key also by its GA twin on the node). A node with none of these labels passes; unbound
claims are skipped. Failure is UnschedulableAndUnresolvable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Optional

from models.storage import PersistentVolume

NAME = "VolumeZone"
REASON = "node(s) had no available volume zone"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
LEGACY_ZONE = "failure-domain.beta.kubernetes.io/zone"
LEGACY_REGION = "failure-domain.beta.kubernetes.io/region"
TOPOLOGY_LABELS = (LEGACY_ZONE, LEGACY_REGION, ZONE, REGION)
_GA = {LEGACY_ZONE: ZONE, LEGACY_REGION: REGION}

Topology = tuple[tuple[str, frozenset[str]], ...]


def topology(volumes: Iterable[Optional[PersistentVolume]]) -> Topology:
    """The (label, allowed values) the bound volumes ask of a node."""
    out = []
    for pv in volumes:
        if pv is None:
            continue
        for key in TOPOLOGY_LABELS:
            value = pv.metadata.labels.get(key)
            if value:
                out.append((key, frozenset(v for v in value.split("__") if v)))
    return tuple(out)


def fits(wanted: Topology, labels: Mapping[str, str]) -> bool:
    if not wanted or not any(key in labels for key in TOPOLOGY_LABELS):
        return True
    for key, values in wanted:
        value = labels.get(key)
        if value is None:
            value = labels.get(_GA.get(key, key))
        if value is None or value not in values:
            return False
    return True

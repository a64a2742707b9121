"""VolumeRestrictions' ReadWriteOncePod rule, pure: a claim with the ``ReadWriteOncePod`` access
mode may be used by one pod in the whole cluster. kube-scheduler finds the conflict in PreFilter
(any pod holding the claim, on any node) and fails every node with it as Unschedulable, so
preemption may evict the holder. Claims it cannot find make PreFilter fail with the
``not found`` message VolumeBinding would give too.

(The in-tree disk conflicts of the same plugin — GCE PD, AWS EBS, iSCSI, RBD volumes named inline
in two pods — are not read: inline cloud disks have been migrated to CSI and claims.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ....volume_catalog import VolumeCatalog

NAME = "VolumeRestrictions"
RWOP_CONFLICT = ("node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode "
                 "already in-use by another pod")
NOT_FOUND = 'persistentvolumeclaim "{}" not found'


def missing(claim_keys: Iterable[str], catalog: VolumeCatalog) -> str | None:
    """PreFilter's message for the first claim that does not exist, else None."""
    for key in claim_keys:
        if key not in catalog.claims:
            return NOT_FOUND.format(key.split("/", 1)[1])
    return None


def rwop_claims(claim_keys: Iterable[str], catalog: VolumeCatalog) -> tuple[str, ...]:
    return tuple(k for k in claim_keys if catalog.rwop(k))


def holders(pod_key: str, rwop: Iterable[str], users: Mapping[str, Mapping[str, int]]) -> list[str]:
    """The other pods using one of the pod's ReadWriteOncePod claims (``users``: claim -> pod -> node)."""
    return sorted({other for claim in rwop for other in users.get(claim, {}) if other != pod_key})

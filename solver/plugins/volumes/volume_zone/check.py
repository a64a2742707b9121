"""VolumeZone on a plan's final state: the zone and region labels of a placed pod's bound
volumes match its node's."""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import rules

if TYPE_CHECKING:
    from ....plugin_api import ReplayView as Replay


def check(replay: Replay) -> None:
    catalog = replay.final.volumes
    for pod, index in sorted(replay.placed(), key=lambda e: e[0].key):
        if not pod.claims:
            continue
        node = replay.nodes[index]
        for key in pod.claims:
            claim = catalog.claims.get(key)
            pv = catalog.bound_volume(claim) if claim is not None else None
            if pv is not None and not rules.fits(rules.topology([pv]), node.labels):
                labels = ", ".join(f"{k}={pv.metadata.labels[k]}" for k in rules.TOPOLOGY_LABELS if k in pv.metadata.labels)
                replay.report(f"VolumeZone: {pod.key} on node {node.name}: volume {pv.name} (claim {key}) is in "
                              f"{labels}, the node is not ({rules.REASON})")

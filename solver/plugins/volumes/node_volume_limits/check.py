"""NodeVolumeLimits on a plan's final state: on a node where the plan placed a pod with claims,
the unique volumes of each CSI driver do not exceed the node's CSINode limit, unless the node
already held more before the plan and the plan added none of that driver."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .rules import node_claims
from . import rules

if TYPE_CHECKING:
    from ....plugin_api import ReplayView as Replay


def check(replay: Replay) -> None:
    catalog = replay.final.volumes
    if not catalog.limits:
        return
    for index, pods in sorted(replay.placed_on.items()):
        if not any(p.claims for p in pods):
            continue
        limits = catalog.limits.get(replay.node_name(index))
        if not limits:
            continue
        final = rules.by_driver(node_claims(replay.final, index), catalog)
        before = rules.by_driver(node_claims(replay.base, index), catalog)
        for driver, claims in sorted(final.items()):
            limit = limits.get(driver)
            if limit is None or len(claims) <= limit or not claims - before.get(driver, set()):
                continue
            replay.report(f"NodeVolumeLimits: node {replay.node_name(index)} attaches {len(claims)} volumes of "
                          f"driver {driver} ({', '.join(sorted(claims))}), its CSINode allows {limit} ({rules.REASON})")

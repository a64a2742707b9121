"""VolumeBinding on a plan's final state: every claim of a placed pod exists and is not being
deleted, none is an unbound Immediate claim, bound claims' volumes exist and their node affinity
admits the node; every WaitForFirstConsumer claim of a placed pod gets a volume that matches it
and admits the nodes of all its pods, or a class that provisions there — the plan's
``volume_bindings`` when it names one (each volume once), else any volume left."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ..volume_restrictions import rules as restrictions
from . import rules
from .filter import claim_uses

if TYPE_CHECKING:
    from ....plugin_api import ReplayView as Replay


def check(replay: Replay) -> None:
    placed = sorted(((p, n) for p, n in replay.placed() if p.claims), key=lambda e: e[0].key)
    catalog = replay.final.volumes
    given = replay.plan.volume_bindings
    if not placed and not given:
        return
    for pod, index in placed:
        node = replay.nodes[index]
        error = restrictions.missing(pod.claims, catalog)
        claims = rules.prefilter(pod.namespace, pod.claims, catalog)
        error = error or claims.error
        if error is not None:
            replay.report(f"VolumeBinding: {pod.key} on node {node.name}: {error}")
            continue
        for key, pv in claims.bound:
            if pv is None:
                replay.report(f"VolumeBinding: {pod.key} on node {node.name}: claim {key} is bound to volume "
                              f"{catalog.claims[key].spec.volume_name}, which does not exist ({rules.PV_NOT_EXIST})")
            elif not rules.admits(pv, node.name, node.labels):
                replay.report(f"VolumeBinding: {pod.key} on node {node.name}: the node affinity of volume {pv.name} "
                              f"(claim {key}) does not admit the node ({rules.NODE_CONFLICT})")
    uses = claim_uses(((p, replay.nodes[n]) for p, n in placed), catalog)
    decided: dict[str, Optional[str]] = {}
    holder: dict[str, str] = {}
    for b in given:
        if b.claim not in uses:
            replay.report(f"VolumeBinding: volume_bindings names claim {b.claim}, which no pod the plan places "
                          "mounts unbound with a WaitForFirstConsumer class")
            continue
        if b.claim in decided:
            replay.report(f"VolumeBinding: claim {b.claim} is given a volume more than once")
            continue
        volume = None if b.provisioned and b.volume is None else b.volume
        if volume is not None and volume in holder:
            replay.report(f"VolumeBinding: volume {volume} is given to two claims, {holder[volume]} and {b.claim}")
            continue
        wrong = next((why for pod_key, node in uses[b.claim]
                      if (why := rules.fits_binding(b.claim, volume, catalog, node.name, node.labels)) is not None), None)
        if wrong is not None:
            replay.report(f"VolumeBinding: claim {b.claim} of {uses[b.claim][0][0]} on node {uses[b.claim][0][1].name}: "
                          f"{wrong}")
            continue
        decided[b.claim] = volume
        if volume is not None:
            holder[volume] = b.claim
    chosen = rules.plan_bindings({k: [(n.name, n.labels) for _, n in v] for k, v in uses.items()}, catalog,
                                 given=decided)
    for claim in sorted(set(uses) - set(chosen)):
        pod_key, node = uses[claim][0]
        replay.report(f"VolumeBinding: {pod_key} on node {node.name}: claim {claim} finds no volume left that "
                      f"matches it and admits the node, and its class cannot provision there ({rules.BIND_CONFLICT})")

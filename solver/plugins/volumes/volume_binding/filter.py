"""The four volume filters against the engines' state, in kube-scheduler's order
(VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone): the PreFilter of a pod with
claims once per cycle (``VolumeCycle``), then one node at a time. Each rule is its plugin's
``rules`` module; this module only reads ``PodInfo``/``NodeInfo``/``ClusterState`` for them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Optional

from models.plan import VolumeBinding

from ....framework import SUCCESS, Status, unresolvable, unschedulable
from ....info import NodeInfo, PodInfo
from ....plugin_api import NodeByNode, StaticView
from ....state import ClusterState
from ..node_volume_limits import rules as limits
from ..node_volume_limits.rules import node_claims as node_claims
from ..volume_restrictions import rules as restrictions
from ..volume_restrictions.book import volume_book
from ....volume_catalog import VolumeCatalog
from ..volume_zone import rules as zone
from . import rules as binding


class VolumeCycle(NodeByNode):
    """One pod's volume PreFilters against one state; ``status(node)`` runs the four filters
    (``plugin_api.CycleFilter``: greedy's cycle runs them together, as one, at VolumeBinding's
    place; the other three plugins have no ``cycle`` hook of their own)."""

    def __init__(self, pod: PodInfo, state: ClusterState, nodes: Optional[list[NodeInfo]] = None) -> None:
        self.pod, self.state = pod, state
        self.book = volume_book(state)
        self.nodes = nodes if nodes is not None else state.nodes
        catalog = state.volumes
        # PreFilter, in plugin order: VolumeRestrictions (a claim it cannot find), VolumeBinding.
        self.error: Optional[str] = restrictions.missing(pod.claims, catalog)
        self.error_plugin = restrictions.NAME
        self.binding = binding.prefilter(pod.namespace, pod.claims, catalog)
        if self.error is None and self.binding.error is not None:
            self.error, self.error_plugin = self.binding.error, binding.NAME
        rwop = restrictions.rwop_claims(pod.claims, catalog)
        self.holders = restrictions.holders(pod.key, rwop, self.book.claim_users)
        self.new = limits.by_driver(pod.claims, catalog)
        self.zone = zone.topology(pv for _, pv in self.binding.bound)
        self.failed = unresolvable(self.error_plugin, self.error) if self.error is not None else None
        self._rwop = unschedulable(restrictions.NAME, restrictions.RWOP_CONFLICT)

    def status(self, node: NodeInfo) -> Status:
        if self.failed is not None:
            return self.failed
        if self.holders:
            return self._rwop
        node_limits = self.state.volumes.limits.get(node.name)
        if node_limits and self.new:
            present = limits.by_driver(node_claims(self.state, node.index), self.state.volumes)
            if limits.over(self.new, present, node_limits):
                return unschedulable(limits.NAME, limits.REASON)
        reasons = binding.reasons(self.binding, node.name, node.labels, self.book.pv_taken)
        if reasons:
            return unresolvable(binding.NAME, *reasons)
        if not zone.fits(self.zone, node.labels):
            return unresolvable(zone.NAME, zone.REASON)
        return SUCCESS


def cycle(pod: PodInfo, state: ClusterState, static: StaticView, version: str) -> VolumeCycle | None:
    """The ``cycle`` hook: the volume PreFilters, only for a pod that mounts claims."""
    return VolumeCycle(pod, state, static.nodes) if pod.claims else None


class Reserve:
    """VolumeBinding's Reserve on a snapshot's volumes (``VolumeReserve``, which the volume book
    calls as pods are added): the volumes a pod's delayed claims take on its node (the smallest
    that fits each), so no later pod of the window takes them too."""

    def __init__(self, catalog: VolumeCatalog, nodes: list[NodeInfo]) -> None:
        self.catalog, self.nodes = catalog, nodes

    def reserve(self, pod: PodInfo, node: int, taken: dict[str, str]) -> None:
        if not pod.claims or not self.catalog:
            return
        claims = binding.prefilter(pod.namespace, pod.claims, self.catalog)
        if claims.error is not None or not claims.delayed:
            return
        at = self.nodes[node]
        chosen = binding.choose(claims, at.name, at.labels, taken) or {}
        for claim, volume in chosen.items():
            if volume is not None and claim not in taken.values():
                taken[volume] = claim


def attach_volumes(state: ClusterState, catalog: VolumeCatalog) -> None:
    """A snapshot with volumes: its catalog on the state, and the Reserve on its volume book."""
    state.volumes = catalog
    volume_book(state).binder = Reserve(catalog, state.nodes)


def plan_volumes(ctx, placements: Mapping[str, int], victims, engine_state: Optional[ClusterState]) -> tuple[VolumeBinding, ...]:
    """The plan's ``volume_bindings`` (none without a snapshot's volumes): greedy's Reserve kept
    (``engine_state``: the state greedy placed into), the other claims matched."""
    if volume_book(ctx.state).binder is None:
        return ()
    taken = volume_book(engine_state).pv_taken if engine_state is not None else None
    nodes = ctx.nodes
    return bindings_of(((ctx.pod(k), nodes[n]) for k, n in placements.items()), ctx.state.volumes, taken)


def claim_uses(placed: Iterable[tuple[PodInfo, NodeInfo]], catalog: VolumeCatalog) -> dict[str, list[tuple[str, NodeInfo]]]:
    """The delayed claims of the placed pods: claim -> [(pod key, node)] in the order given."""
    uses: dict[str, list[tuple[str, NodeInfo]]] = {}
    for pod, node in placed:
        for claim in binding.delayed_claims(pod.claims, catalog):
            uses.setdefault(claim, []).append((pod.key, node))
    return uses


def bindings_of(placed: Iterable[tuple[PodInfo, NodeInfo]], catalog: VolumeCatalog,
                taken: Optional[Mapping[str, str]] = None) -> tuple[VolumeBinding, ...]:
    """The plan's ``volume_bindings``: a volume (or provisioning) for every delayed claim of the
    placed pods, sorted by claim. ``taken`` (volume -> claim): what the engine reserved as it
    placed them (greedy: kube-scheduler's Reserve), kept; the other claims are matched
    (``rules.plan_bindings``; the model's choice is one such matching)."""
    if not catalog:
        return ()
    uses = claim_uses(placed, catalog)
    if not uses:
        return ()
    given = {claim: volume for volume, claim in (taken or {}).items() if claim in uses}
    chosen = binding.plan_bindings({k: [(n.name, n.labels) for _, n in v] for k, v in uses.items()}, catalog,
                                   given=given)
    out = []
    for claim in sorted(chosen):
        pod, node = uses[claim][0]
        volume = chosen[claim]
        out.append(VolumeBinding(claim=claim, pod=pod, node=node.name, volume=volume, provisioned=volume is None))
    return tuple(out)

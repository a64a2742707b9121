"""Coscheduling's view of a whole window for CP-SAT (``plugin_api.WindowPart``): the window's
gangs, its kinds of interchangeable gangs (their members share classes: the model follows the
variety of gangs, not their number), and the gangs whose minResources admissions are ordered."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

from ...info import PodInfo
from ...plugin_api import WindowPart
from ...state import ClusterState
from . import min_resources, topology
from .hint import HintedGangEncoding
from .group import Gang, GangKind, rejected
from .permit import collect, kinds, merge_classes


@dataclass
class GangWindow(WindowPart):
    ctx: Any
    gangs: dict[str, Gang]
    kinds: list[GangKind]

    @staticmethod
    def of(ctx) -> "GangWindow":
        gangs = collect(ctx)
        return GangWindow(ctx, gangs, kinds(ctx, gangs))

    def merge(self, classes: list[Any]) -> tuple[list[Any], dict[int, int]]:
        return merge_classes(classes, self.kinds)

    def why_blocked(self, pod: PodInfo) -> Optional[str]:
        gang = self.gangs.get(pod.group) if pod.group else None
        return gang.blocked(pod) if gang is not None else None

    def left_out(self, pod: PodInfo, placements: Mapping[str, int], final: ClusterState,
                 feasible_now: bool) -> Optional[str]:
        """A gang none of whose members the plan places and whose minResources the room it
        leaves the group does not cover (its running members' own requests counted as room, as
        PreFilter counts them); or, where the pod fits, a gang short of minMember."""
        gang = self.gangs.get(pod.group) if pod.group else None
        if gang is None:
            return None
        placed = sum(1 for m in gang.members if m.key in placements)
        if gang.group is not None and not placed:
            refused = min_resources.refusal(gang.group, gang.key, final,
                                            [p for p in self.ctx.bound if p.group == gang.key])
            if refused is not None:
                return f"0/{len(self.ctx.nodes)} nodes are available: {refused}."
        if feasible_now and not gang.reaches(placed):
            key = topology.key_of(gang.group)
            return (rejected(gang.key, placed, gang.need) if key is None
                    else topology.rejected(gang.key, key, gang.need, gang.min_member))
        return None

    def linked(self, classes: list[Any]) -> list[list[int]]:
        gated = min_resources.gated(self.gangs)
        return [[c.id for c in classes if c.rep.group in gated]] if len(gated) > 1 else []

    def encoding(self) -> HintedGangEncoding:
        return HintedGangEncoding(self.gangs, list(self.kinds))

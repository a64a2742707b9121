"""Coscheduling's view of a whole window for CP-SAT (``plugin_api.WindowPart``): the window's
gangs, its kinds of interchangeable gangs (their members share classes: the model follows the
variety of gangs, not their number), and the gangs whose minResources admissions are ordered."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...info import PodInfo
from ...plugin_api import WindowPart
from . import min_resources
from .encoding import GangEncoding
from .group import Gang, GangKind
from .permit import collect, kinds, merge_classes


@dataclass
class GangWindow(WindowPart):
    gangs: dict[str, Gang]
    kinds: list[GangKind]

    @staticmethod
    def of(ctx) -> "GangWindow":
        gangs = collect(ctx)
        return GangWindow(gangs, kinds(ctx, gangs))

    def merge(self, classes: list[Any]) -> tuple[list[Any], dict[int, int]]:
        return merge_classes(classes, self.kinds)

    def blocked(self, pod: PodInfo) -> bool:
        gang = self.gangs.get(pod.group) if pod.group else None
        return gang is not None and bool(gang.blocked(pod))

    def linked(self, classes: list[Any]) -> list[list[int]]:
        gated = min_resources.gated(self.gangs)
        return [[c.id for c in classes if c.rep.group in gated]] if len(gated) > 1 else []

    def encoding(self) -> GangEncoding:
        return GangEncoding(self.gangs, list(self.kinds))

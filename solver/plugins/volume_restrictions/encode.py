"""VolumeRestrictions (ReadWriteOncePod) in the CP-SAT model: the window's pods mounting one
ReadWriteOncePod claim place at most one pod between them. A claim a running pod holds already
prunes every node (``volume_binding.encode.prune``), so only the window's own pods count here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ortools.sat.python import cp_model

from . import rules

if TYPE_CHECKING:
    from ...cpsat.model import WindowModel


def encode(wm: WindowModel) -> None:
    catalog = wm.state.volumes
    users: dict[str, list] = {}
    for cls in wm.classes:
        if cls.rep.claims and not isinstance(wm.placed[cls.id], int):
            for claim in rules.rwop_claims(cls.rep.claims, catalog):
                users.setdefault(claim, []).append(wm.placed[cls.id])
    for placed in users.values():
        wm.model.add(cp_model.LinearExpr.sum(placed) <= 1)

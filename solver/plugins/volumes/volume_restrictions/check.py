"""VolumeRestrictions on a plan's final state: a ReadWriteOncePod claim is used by one pod, when
the plan placed one of its users (two running pods already sharing one are not the plan's doing)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import rules
from .book import volume_book

if TYPE_CHECKING:
    from ....plugin_api import ReplayView as Replay


def check(replay: Replay) -> None:
    placed = {p.key for p, _ in replay.placed() if p.claims}
    if not placed:
        return
    catalog = replay.final.volumes
    for claim, users in sorted(volume_book(replay.final).claim_users.items()):
        if len(users) > 1 and catalog.rwop(claim) and placed & set(users):
            pods = ", ".join(f"{k} on {replay.node_name(n)}" for k, n in sorted(users.items()))
            replay.report(f"VolumeRestrictions: claim {claim} has access mode ReadWriteOncePod but {len(users)} pods "
                          f"use it: {pods} ({rules.RWOP_CONFLICT})")

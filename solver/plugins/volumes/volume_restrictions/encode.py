"""VolumeRestrictions (ReadWriteOncePod) in the CP-SAT model: the window's pods mounting one
ReadWriteOncePod claim place at most one pod between them; where a running pod holds the claim
(its node is the only candidate left, ``volume_binding.encode.prune``) a pod goes there only if
the holder is evicted: x[k, n] ≤ ub · evict[holder]."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ortools.sat.python import cp_model

from . import rules
from .book import volume_book

if TYPE_CHECKING:
    from ....plugin_api import EncodeModel as WindowModel


def encode(wm: WindowModel) -> None:
    catalog = wm.state.volumes
    users: dict[str, list] = {}
    for cls in wm.classes:
        if cls.rep.claims and not isinstance(wm.placed[cls.id], int):
            for claim in rules.rwop_claims(cls.rep.claims, catalog):
                users.setdefault(claim, []).append(wm.placed[cls.id])
    for placed in users.values():
        wm.model.add(cp_model.LinearExpr.sum(placed) <= 1)
    state = wm.state
    for cls in wm.classes:
        if not cls.rep.claims:
            continue
        holders = rules.holders(cls.rep.key, rules.rwop_claims(cls.rep.claims, catalog), volume_book(state).claim_users)
        for key in holders:
            node = state.where.get(key)
            for n, x in wm.by_class.get(cls.id, []):
                evict = wm.evict.get(key) if n == node else None
                wm.model.add(x == 0 if evict is None else x <= wm.ub_of(cls.id, n) * evict)

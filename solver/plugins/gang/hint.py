"""Coscheduling in the CP-SAT hints (``cpsat/hint.py`` asks the gang encoding, never this module
by name): the packing places whole gangs, a gang with required topology inside one domain of its
key (the tightest that could hold it), and a hint names how many gangs of each kind run (per
domain for a topology kind)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from . import topology
from .decode import domain_runs
from .encoding import GangEncoding
from .permit import runs_in

if TYPE_CHECKING:
    from ...plugin_api import EncodeModel


def topology_key(wm: EncodeModel, cls) -> Optional[str]:
    """The required topology key of the gang a class's pods belong to (None: none)."""
    group = cls.rep.group
    return topology.key_of(wm.ctx.pod_groups.get(group)) if group is not None else None


def domains_to_try(wm: EncodeModel, members, need: int, key: str, free: np.ndarray) -> Iterator[np.ndarray]:
    """Masks of the domains of ``key`` whose free room could hold ``need`` of a topology unit's
    members (``topology.room_by_domain`` over their candidate nodes), the tightest first: best
    fit at the domain's scale, which keeps roomy domains whole for wide gangs."""
    ids = wm.state.domains(key)[0]
    allowed = np.zeros(len(ids), dtype=bool)
    for cls, _ in members:
        allowed[wm.cand[cls.id]] = True
    room = topology.room_by_domain(wm.state, key, [wm.vec[c.id] for c, _ in members], free, allowed)
    for d in sorted((d for d in range(len(room)) if room[d] >= max(need, 1)), key=lambda d: (room[d], d)):
        yield allowed & (ids == d)


def packing_units(enc: GangEncoding, wm: EncodeModel) -> list[tuple[int, list, int, Any]]:
    """Whole-gang units: (need, [(class, members per gang)], gangs of the kind, where) with
    ``where`` None (anywhere) or, for a gang with required topology, (free) -> the domain
    masks to try in turn."""
    out = []
    for need, members, repeats in enc.units:
        key = topology_key(wm, members[0][0])
        where = None if key is None else (
            lambda free, members=members, need=need, key=key: domains_to_try(wm, members, need, key, free))
        out.append((need, members, repeats, where))
    return out


def hint(enc: GangEncoding, wm: EncodeModel, by_class: dict[int, list[tuple[int, int]]], placed: dict[int, int],
         placements: Optional[dict[str, int]]) -> None:
    """Hint the gangs of each kind that run (per domain and in sum for a topology kind): from
    ``placements`` when given, else the fewest gangs that hold the counts."""
    per_domain_of = {id(kind): per_domain for kind, per_domain in enc.domain_runs}
    for kind, var in enc.runs:
        per_domain = per_domain_of.get(id(kind))
        if per_domain is not None:  # a topology kind: its gangs per domain, and their sum
            ids = wm.state.domains(kind.topology_key)[0]
            runs_at = domain_runs(kind, by_class, ids, placements)
            for d, dvar in per_domain.items():
                wm.model.add_hint(dvar, runs_at.get(d, 0))
            runs = sum(runs_at.get(d, 0) for d in per_domain)
        elif placements is not None:
            runs = runs_in(kind, placements)
        else:  # counts built whole gang by whole gang: the fewest gangs that hold them
            runs = kind.runs_needed({c.id: placed.get(c.id, 0) for c in kind.classes})
        wm.model.add_hint(var, runs)


class HintedGangEncoding(GangEncoding):
    """The gang encoding a scheduling window's model starts with (``window.GangWindow``), with
    its part in the hints: the packing's whole-gang units (``plugin_api.PacksWhole``) and the
    hint of its run counts (``plugin_api.HintsItself``)."""

    def packing_units(self, wm: EncodeModel) -> list[tuple[int, list, int, Any]]:
        return packing_units(self, wm)

    def packing_leaves_out(self, wm: EncodeModel, cls) -> bool:
        """A class outside the units the packing leaves out: a topology gang's."""
        return topology_key(wm, cls) is not None

    def hint(self, wm: EncodeModel, by_class: dict[int, list[tuple[int, int]]], placed: dict[int, int],
             placements: Optional[dict[str, int]]) -> None:
        hint(self, wm, by_class, placed, placements)

"""Coscheduling's part of a window model (``GangEncoding``): what the window part starts it with
(the window's gangs and kinds) and the variables the gang encoders make, which the hint and the
decoding read. The plugin's encoder returns it; the engine keeps it under the plugin's name,
apart from what every rule shares."""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Callable, Hashable, Iterator, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ortools.sat.python import cp_model

    from ...plugin_api import EncodeModel
    from .group import Gang, GangKind

NAME = "Coscheduling"


@dataclass
class GangEncoding:
    # The window's gangs by key, and its kinds of interchangeable gangs (``permit.kinds``).
    gangs: dict[str, Gang] = field(default_factory=dict)
    kinds: list[GangKind] = field(default_factory=list)
    # Per kind, the number of its gangs that run (``permit.encode``).
    runs: list[tuple] = field(default_factory=list)  # (GangKind, IntVar)
    # Topology kinds: per domain, the number of the kind's gangs that run there.
    domain_runs: list[tuple] = field(default_factory=list)  # (GangKind, {domain: IntVar})
    # Whole-gang units for hints: (need, [(class, members per gang)], number of such gangs).
    units: list[tuple] = field(default_factory=list)

    @property
    def in_kinds(self) -> set[str]:
        """The keys of the gangs merged into a kind (their encodings are the kinds')."""
        return {g.key for kind in self.kinds for g in kind.gangs}

    # Decoding (``plugin_api.PlacementDecoder``): the kinds' classes are decoded as whole gangs.
    def decoded_classes(self) -> set[int]:
        return {c.id for kind, _ in self.runs for c in kind.classes}

    def decode(self, wm: EncodeModel, counts) -> dict[str, int]:
        """Pod key -> node for the pods of the kinds' classes (``decode.decode``, kind by kind)."""
        from .decode import decode

        out: dict[str, int] = {}
        for kind, _ in self.runs:
            ids = wm.state.domains(kind.topology_key)[0] if kind.topology_key is not None else None
            preferred_ids = tuple(wm.state.domains(key)[0] for key in kind.preferred_keys)
            out.update(decode(kind, counts, ids, preferred_ids))
        return out

    # Trading (``plugin_api.UnitTrades``): the same counts, two gangs of a kind on each other's places.
    def trades(self, wm: EncodeModel, placements: Mapping[str, int], key: str
               ) -> Iterator[tuple[str, Hashable, Callable[[], dict[str, int]]]]:
        """Other deals of the same counts for the gang of pod ``key``, if it is in one of the
        model's kinds (``decode.trades``, lazily): its gang's places traded with another gang's,
        or the pod's node swapped with a pod of its class in its own or another running gang."""
        from .decode import trades

        for kind, _ in self.runs:
            if any(p.key == key for g in kind.gangs for p in g.members):
                keys = (*((kind.topology_key,) if kind.topology_key is not None else ()), *kind.preferred_keys)
                yield from trades(kind, placements, key, tuple(wm.state.domains(k)[0] for k in keys))
                return

    def hint_vars(self) -> list[cp_model.IntVar]:
        """Every run count, the kinds' first, then per domain: what a solution's hint repeats."""
        out = [var for _, var in self.runs]
        for _, per_domain in self.domain_runs:
            out.extend(per_domain.values())
        return out

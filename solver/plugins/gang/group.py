"""A gang and a kind of interchangeable gangs, as data: what coscheduling reads of a PodGroup in
one window (``permit.collect``, ``permit.kinds``) and the one minMember rule
(``reaches_min_member``). Every other gang module reads these; this one reads none of them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from models.objects import PodGroup

from ...info import PodInfo
from ...plugin_api import ClassView as PodClass


def not_enough_siblings(pod: PodInfo, count: int, min_member: int) -> str:
    """Coscheduling PreFilter's message when fewer group pods exist than minMember."""
    return (
        f"pre-filter pod {pod.pod.metadata.name} cannot find enough sibling pods, "
        f"current pods number: {count}, minMember of group: {min_member}"
    )


# A pod labelled for a PodGroup that does not exist (Permit rejects it).
REASON_NOT_FOUND = "PodGroup not found"


def rejected(group: str, placed: int, need: int) -> str:
    """Why a gang placed nothing: the whole group could not land together."""
    return (
        f"PodGroup {group} gets rejected: only {placed} of the {need} member(s) it still needs "
        f"could be placed together, so none is placed (all-or-nothing)"
    )


def reaches_min_member(placed: int, running: int, min_member: int) -> bool:
    """The coscheduling Permit rule, in one place: a PodGroup's members placed now plus those
    running (less any being evicted) reach its minMember. Greedy's Permit, the gang messages and
    the validator ask it; the CP-SAT encoding (``encode``) states the same sum as a constraint."""
    return placed + running >= min_member


@dataclass(eq=False)
class Gang:
    key: str
    group: Optional[PodGroup]
    running: int  # members already bound (non-terminal)
    existing: int  # members in existence (bound or pending, non-terminal)
    members: list[PodInfo] = field(default_factory=list)  # window members, queue order
    own: list[PodInfo] = field(default_factory=list)  # members in the state (running, or terminating)
    # Why PreFilter refuses the group for lack of room (``min_resources``), None if it is admitted
    # or sets no minResources. ``collect`` asks at the window's start; greedy asks again at the
    # gang's turn and keeps that answer here.
    refused: Optional[str] = None

    @property
    def min_member(self) -> int:
        return self.group.spec.min_member if self.group is not None else 0

    @property
    def need(self) -> int:
        """Window members that must place for the group to reach minMember (0: any number)."""
        return max(0, self.min_member - self.running)

    def reaches(self, placed: int, evicted: int = 0) -> bool:
        """Whether ``placed`` window members bring the group to minMember, with ``evicted`` of its
        running members gone (``reaches_min_member``)."""
        return reaches_min_member(placed, self.running - evicted, self.min_member)

    def blocked(self, pod: PodInfo) -> Optional[str]:
        """Why no member can be placed in this window at all, if that is so."""
        if self.group is None:
            return REASON_NOT_FOUND
        if self.existing < self.min_member:
            return not_enough_siblings(pod, self.existing, self.min_member)
        if len(self.members) < self.need:
            return not_enough_siblings(pod, self.running + len(self.members), self.min_member)
        return self.refused


@dataclass(eq=False)
class GangKind:
    """Gangs that are interchangeable for every rule, modelled as one.

    Every gang of a kind has the same window members up to the group itself (``per_gang``:
    members of each model class per gang), the same ``need``, and no running member. The model
    places T_c pods of each class c of the kind and runs ``runs`` of its gangs; a placement
    splits into whole gangs exactly when runs·need ≤ Σ_c T_c and T_c ≤ runs·per_gang[c] for
    every c. Handing the pods out one at a time, round robin over the running gangs, gives each
    gang ⌊T/runs⌋ or ⌈T/runs⌉ pods in all, and at most ⌈T_c/runs⌉ ≤ per_gang[c] of class c.
    """

    gangs: list[Gang]  # queue order
    need: int
    base_of: dict[int, int]  # context class id of a member -> its signature without the group
    # The required topology key every gang of the kind shares (``topology``), None if none: the
    # model then counts the kind's gangs per domain, and each gang lands in one domain.
    topology_key: Optional[str] = None
    # The preferred topology keys every gang of the kind shares (``preferred``), widest first.
    preferred_keys: tuple[str, ...] = ()
    per_gang: dict[int, int] = field(default_factory=dict)  # model class id -> members per gang
    model_of: dict[int, int] = field(default_factory=dict)  # context class id -> model class id
    classes: list[PodClass] = field(default_factory=list)  # the kind's model classes

    @property
    def name(self) -> str:
        return self.gangs[0].key

    def runs_needed(self, totals: dict[int, int]) -> int:
        """Fewest gangs that hold ``totals`` pods per model class: each runs as complete as it
        can (an elastic gang gets its members above minMember before another gang starts)."""
        return max((-(-t // self.per_gang[c]) for c, t in totals.items() if t), default=0)

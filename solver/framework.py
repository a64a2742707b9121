"""Scheduling framework basics shared by every plugin: status codes, statuses, the FitError text.

Mirrors kube-scheduler's framework: a filter answers Success, Unschedulable (preemption may
help), UnschedulableAndUnresolvable (it would not) or Error, with fixed reason strings; the
"0/N nodes are available: ..." message is built from a sorted histogram of those reasons.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum


class Code(IntEnum):
    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    UNRESOLVABLE = 3  # UnschedulableAndUnresolvable: preemption on this node would not help
    SKIP = 4


@dataclass(frozen=True, slots=True)
class Status:
    code: Code = Code.SUCCESS
    reasons: tuple[str, ...] = ()
    plugin: str = ""

    @property
    def ok(self) -> bool:
        return self.code == Code.SUCCESS or self.code == Code.SKIP

    @property
    def resolvable(self) -> bool:
        """Whether removing pods (preemption) could make this node fit."""
        return self.code == Code.UNSCHEDULABLE


SUCCESS = Status()


def unschedulable(plugin: str, *reasons: str) -> Status:
    return Status(Code.UNSCHEDULABLE, tuple(reasons), plugin)


def unresolvable(plugin: str, *reasons: str) -> Status:
    return Status(Code.UNRESOLVABLE, tuple(reasons), plugin)


NO_NODES_MESSAGE = "no nodes available to schedule pods"


def reason_histogram(statuses: Iterable[Status], *, failed_only: bool = False) -> Counter[str]:
    """Every reason of every failed node, counted (a node may give several). ``failed_only``
    skips the statuses that pass, so a whole cycle's list can be given as it is."""
    # Nodes failing alike share one Status object: count the objects (in C), then their reasons.
    statuses = list(statuses)
    by_id = dict(zip(map(id, statuses), statuses))
    hist: Counter[str] = Counter()
    for key, count in Counter(map(id, statuses)).items():
        status = by_id[key]
        if failed_only and status.ok:
            continue
        for reason in status.reasons:
            hist[reason] += count
    return hist


def format_histogram(hist: Counter[str]) -> str:
    """``"1 Insufficient cpu, 2 node(s) had ..."``: entries sorted as strings, like kube-scheduler."""
    return ", ".join(sorted(f"{count} {reason}" for reason, count in hist.items()))


def fit_error_message(
    num_nodes: int,
    hist: Counter[str],
    *,
    prefilter: str | None = None,
    postfilter: str | None = None,
) -> str:
    """kube-scheduler's FitError text: ``0/N nodes are available: <histogram>.[ <postfilter>]``."""
    if num_nodes == 0:
        return NO_NODES_MESSAGE
    text = f"0/{num_nodes} nodes are available:"
    if prefilter:
        text += f" {prefilter}."
    else:
        text += f" {format_histogram(hist)}."
    if postfilter:
        text += f" {postfilter}"
    return text


# How many pods a message lists before it says "and N more".
LIST_LIMIT = 5


def names(keys: Iterable[str]) -> str:
    """Pod keys for a message, sorted: the first few, then how many more."""
    keys = sorted(keys)
    head = ", ".join(keys[:LIST_LIMIT])
    return head if len(keys) <= LIST_LIMIT else f"{head} and {len(keys) - LIST_LIMIT} more"

"""A minimal set of obstacles, found by deletion over feasibility checks.

Given obstacles O such that relaxing all of O lets the targets fit, find S ⊆ O with: relaxing
S lets them fit (sufficient) and relaxing S less any one of its obstacles does not (minimal).
The search keeps a set that fits and tries to drop chunks of it, halving a chunk that cannot go
(QuickXplain's divide and conquer, used here as a deletion filter): an obstacle is kept only
after the check "everything kept so far but this one" failed. Since relaxing more can only help
(``obstacles``), that check failing on a superset of the final set less the obstacle proves
minimality; sufficiency is the last check that succeeded. With k obstacles kept out of n, the
search makes O(k log n) checks rather than n.

A check the solver could not finish (no plan placing the targets, but no proof either) counts
as "does not fit" and marks the answer unproven.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Optional, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Verdict:
    fits: bool
    proven: bool  # a "does not fit" the solver proved (a "fits" is always a validated plan)


@dataclass(frozen=True)
class Found(Generic[T]):
    kept: tuple[T, ...]
    checks: int
    proven: bool


def minimal_subset(items: Sequence[T], fits: Callable[[tuple[T, ...]], Verdict], *,
                   none_fails: bool = False, chunks: Optional[Sequence[Sequence[T]]] = None) -> Found[T]:
    """A minimal subset of ``items`` whose relaxation fits; ``fits(items)`` must hold.
    ``none_fails``: the caller already knows that relaxing nothing does not fit (proven).
    ``chunks``: a partition of ``items`` to try dropping first, one chunk at a time (obstacles
    of one kind: most of them go together), before halving what could not go."""
    kept = list(items)
    checks = 0
    proven = True

    def drop(chunk: list[T]) -> None:
        nonlocal checks, proven
        if not chunk:
            return
        trial = tuple(x for x in kept if not any(x is c for c in chunk))
        checks += 1
        verdict = fits(trial)
        if verdict.fits:
            kept[:] = list(trial)
            return
        proven = proven and verdict.proven
        if len(chunk) == 1:
            return
        half = len(chunk) // 2
        drop(chunk[:half])
        drop([c for c in chunk[half:] if any(c is k for k in kept)])

    if chunks is not None:
        for chunk in chunks:
            drop([c for c in chunk if any(c is k for k in kept)])
    elif none_fails and len(items) > 1:
        half = len(items) // 2
        drop(list(items[:half]))
        drop([c for c in items[half:] if any(c is k for k in kept)])
    elif not none_fails:
        drop(list(items))
    return Found(tuple(kept), checks, proven)

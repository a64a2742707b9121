"""Two ``what-if`` changes that cannot both hold, found before either is applied.

Each change says what it does to the objects of the snapshot as it was (``Reach``), objects
named ``nodes/NAME``, ``pods/NS/NAME``, ``poddisruptionbudgets/NS/NAME``, ``podgroups/NS/NAME``.
Two changes cannot both hold when

* one changes an object another deletes: ``--relax-pdb B=1`` with ``--delete-pdb B`` (or with
  ``--remove-namespace`` of B's namespace), ``--priority X=5`` with ``--remove-pod X`` (or a
  ``--drain``/``--remove-node`` that deletes X: a pod without a controller, or a DaemonSet's pod
  of a removed node);
* two give one object different values: ``--relax-pdb B=1 --relax-pdb B=2``, or ``--priority``
  of a gang and of one of its pods with different values.

Applied one after the other, such a pair either failed on an object the first had deleted ("no
such PodDisruptionBudget", although the snapshot has it) or let the order of the flags decide;
refusing it names both flags and the object. Deleting one object twice (``--remove-pod X`` with
``--remove-namespace`` of X's namespace), setting it twice to one value, or draining a node that is
also removed (the removal drains it too) is no conflict: both hold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Optional

from models.errors import InputError


@dataclass(frozen=True)
class Reach:
    """What one change does to the snapshot as it was: the object it changes and so needs to be
    there (None for a change that deletes or only reads), the objects it deletes, and the value
    it gives each object it sets."""

    needs: Optional[str] = None
    deletes: frozenset[str] = frozenset()
    sets: dict[str, object] = field(default_factory=dict)


def refuse_conflicts(changes: Sequence[tuple[str, Reach]]) -> None:
    """Raise ``InputError`` for the first pair of changes (each given as its flag's text and its
    reach) that cannot both hold, naming the object and both flags."""
    for i, (given, reach) in enumerate(changes):
        for j, (other, other_reach) in enumerate(changes):
            if i == j:
                continue
            if reach.needs is not None and reach.needs in other_reach.deletes:
                raise InputError(reach.needs, given, f"{other} deletes it; the two cannot both hold (give one)")
            if j > i:
                _refuse_two_values(given, reach, other, other_reach)


def _refuse_two_values(given: str, reach: Reach, other: str, other_reach: Reach) -> None:
    for obj in sorted(reach.sets.keys() & other_reach.sets.keys()):
        if reach.sets[obj] != other_reach.sets[obj]:
            raise InputError(obj, given, f"{other} sets it otherwise; the two cannot both hold (give one)")

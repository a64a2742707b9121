"""NodeResourcesFit on a plan's final state (the validator's reading).

Only what the plan causes counts: every resource some placed pod requests, the pod count
included, must fit on its node after the plan. A resource the snapshot already shows
overcommitted on a node is reported only where a placed pod requests it: kube-scheduler places a
pod asking for a resource only where it fits, so such a pod needs evictions that end the
overcommit (the model and greedy read it so too); a pod not asking for it may still land.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from models.quantity import format_quantity
from models.resources import PODS

from ...framework import names

if TYPE_CHECKING:
    from ...plugin_api import ReplayView as Replay


def check(replay: Replay) -> None:
    """Every resource some placed pod requests, the pod count included, fits the final state."""
    state = replay.final
    for index, pods in sorted(replay.placed_on.items()):
        free_before = replay.before.alloc[index] - replay.before.used[index]
        free_after = state.alloc[index] - state.used[index]
        vectors = {p.key: state.vector(p) for p in pods}
        for r, name in enumerate(state.resources):
            wanting = [k for k, vec in vectors.items() if vec[r] > 0]
            if not wanting or free_after[r] >= 0:
                continue
            line = (
                f"capacity: node {replay.node_name(index)} {name} over by "
                f"{_amount(name, -int(free_after[r]))} after placing {names(wanting)}"
            )
            if free_before[r] < 0:
                line += (
                    f" (already over by {_amount(name, -int(free_before[r]))} before the plan;"
                    " a pod asking for it fits only once it is not)"
                )
            replay.report(line)


def _amount(resource: str, units: int) -> str:
    return str(units) if resource == PODS else format_quantity(resource, units)

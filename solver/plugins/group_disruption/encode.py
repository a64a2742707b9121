"""The model's part: the running members of a ``disruptionMode: all`` PodGroup share one fate.

Each member's ``evict[v]`` equals the others'; the objective's victim and budget levels count
every member, so evicting such a group costs what its members cost together. A member the
window model has no ``evict[v]`` for (no preemptor may reach its node in this component) cannot
go, so none of its group can: their variables are fixed to 0. That is stricter than 1.37's
kube-scheduler, which evicts a whole group for one preemptor; greedy's plan (which does) is
compared with the solver's, and the better kept.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...group_disruption import any_unit, running_members

if TYPE_CHECKING:
    from ...plugin_api import EncodeModel


def encode(wm: EncodeModel) -> None:
    if not wm.evict or not any_unit(wm.ctx.pod_groups):
        return
    for members in running_members(wm.ctx.pod_groups, wm.state.pods()).values():
        evicts = [wm.evict.get(p.key) for p, _ in members]
        present = [e for e in evicts if e is not None]
        if not present:
            continue
        # A running member of a disruptionMode-all group is evicted exactly when all are.
        if len(present) < len(evicts):
            for e in present:
                wm.model.add(e == 0)
            continue
        for e in present[1:]:
            wm.model.add(e == present[0])

"""The validator's reading: a plan that evicts a running member of a ``disruptionMode: all``
PodGroup evicts every running member of it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...framework import names
from ...group_disruption import any_unit, running_members

if TYPE_CHECKING:
    from ...plugin_api import ReplayView as Replay


def check(replay: Replay) -> None:
    if not replay.victims or not any_unit(replay.ctx.pod_groups):
        return
    evicted = {v.pod.key for v in replay.victims}
    for unit, members in sorted(running_members(replay.ctx.pod_groups, replay.before.pods()).items()):
        gone = [p.key for p, _ in members if p.key in evicted]
        kept = [p.key for p, _ in members if p.key not in evicted]
        if gone and kept:
            replay.report(
                f"disruption: {unit} (disruptionMode all) loses {len(gone)} of its {len(members)} running "
                f"member(s) ({names(gone)}) while {names(kept)} keep running: its members go together or not at all")

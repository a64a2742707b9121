"""``what-if``: the same snapshot with changes applied (``changes``), decided by the same
``decide`` as today's, and the two plans compared (``compare``)."""

from __future__ import annotations

from dataclasses import dataclass

from models.config import SchedulerConfig
from models.snapshot import ClusterSnapshot

from ..api import Decision, ScheduleRequest, decide
from .changes import (AddNodes, Change, DeletePdb, Drain, RelaxPdb, RemoveNamespace, RemoveNode, RemovePod,
                      SetPriority, apply_all)
from .compare import Difference, Outcome, difference, outcome

__all__ = ["AddNodes", "Change", "DeletePdb", "Drain", "RelaxPdb", "RemoveNamespace", "RemoveNode", "RemovePod",
           "SetPriority", "WhatIf", "what_if"]


@dataclass(frozen=True)
class WhatIf:
    changes: tuple[Change, ...]
    today: Outcome
    changed: Outcome
    difference: Difference
    decisions: tuple[Decision, Decision]


def what_if(snapshot: ClusterSnapshot, changes: list[Change], config: SchedulerConfig, *,
            all_pending: bool = False) -> WhatIf:
    """Decide ``snapshot`` as it is and with ``changes`` applied; compare the two plans. The
    changes are checked (every name they give exists) before anything is decided."""
    changed_snapshot = apply_all(snapshot, changes, config.scheduler_name)
    decisions = []
    for snap in (snapshot, changed_snapshot):
        decision = decide(ScheduleRequest(snap, config, all_pending=all_pending))
        if not decision.validated:
            raise RuntimeError("a plan failed validation (a bug): " + "; ".join(decision.problems[:3]))
        decisions.append(decision)
    today = outcome(snapshot, decisions[0].plan)
    changed = outcome(changed_snapshot, decisions[1].plan)
    return WhatIf(tuple(changes), today, changed, difference(snapshot, today, changed_snapshot, changed), (decisions[0], decisions[1]))

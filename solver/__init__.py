"""Decisions: predicates, scores, greedy scheduleOne, the CP-SAT window model, preemption, gangs,
re-packing and the independent plan validator. Pure functions of a snapshot: no network, no files.
"""

from __future__ import annotations

from .api import ENGINES, schedule

# Imported eagerly: importing the submodule binds ``solver.validate`` to the module, and the
# function below must rebind the name after that, not before (else a later import wins).
from .validate import validate as _validate


def validate(snapshot, plan, config=None, *, all_pending: bool = False) -> list[str]:
    """Every hard rule the plan breaks, one line each; [] when valid (see ``solver.validate``)."""
    from models.config import SchedulerConfig

    return _validate(snapshot, plan, config or SchedulerConfig(), all_pending=all_pending)


__all__ = ["ENGINES", "schedule", "validate"]

"""Decisions: predicates, scores, greedy scheduleOne, the CP-SAT window model, preemption, gangs,
re-packing and the independent plan validator. Pure functions of a snapshot: no network, no files.
"""

from __future__ import annotations

from .api import ENGINES, Decision, PlanSource, Rejected, ScheduleRequest, decide, schedule
from .memory import SolverMemory

# Imported here, at package import, so that the name ``solver.validate`` is and stays the
# function (a later ``import solver.validate`` finds the module loaded and rebinds nothing).
from .validate import validate

__all__ = ["ENGINES", "Decision", "PlanSource", "Rejected", "ScheduleRequest", "SolverMemory", "decide", "schedule",
           "validate"]

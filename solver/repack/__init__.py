"""Offline re-packing: which running pods to move where, in which order, so that nodes empty out.

``plan_repack(snapshot, config, options)`` is the entry point (``api``); ``movable`` says which
pods may move, ``model`` finds the final placement with CP-SAT, ``order`` numbers the moves so
that each is safe when it runs, ``replay`` checks the result independently, ``bounds`` says how
many nodes the workload needs at the least.
"""

from __future__ import annotations

from .api import NodeReport, OrderError, RepackInfeasible, RepackOptions, RepackResult, RepackUnsafe, plan_repack
from .model import OBJECTIVES

__all__ = [
    "NodeReport", "OBJECTIVES", "OrderError", "RepackInfeasible", "RepackOptions", "RepackResult", "RepackUnsafe",
    "plan_repack",
]

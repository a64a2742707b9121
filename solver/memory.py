"""``SolverMemory``: what the solver keeps from one decision to the next, owned by its caller.

Deciding a window costs most in assuming every bound pod of the snapshot on its node. The next
window's snapshot differs from the last in a few pods, so the state is brought up to date from
the last one instead (``context.build_context``); and replicas of one workload share what is
derived from their spec (``info.SpecMemo``). Both are kept here, in an object the caller makes
and hands to every decision (``ScheduleRequest.memory``): the CLI run, the live scheduler, a
bench run, a repack. The solver itself keeps nothing between calls at module level.

What is derived from a list of nodes alone is kept on the list (``info.NodeList``), which the
kept state holds: a new list of nodes starts with nothing derived.

Thread-safe: contexts may be built from several threads at once (greedy runs in its own thread
beside the solve and the validator builds one too); ``lock`` guards ``assumed``, and the other
parts are memos whose entries never change once made.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from .info import SpecMemo


@dataclass(eq=False)
class SolverMemory:
    # The last snapshot's bound pods assumed on its nodes (``context._Assumed``), None: none yet.
    assumed: Any = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    specs: SpecMemo = field(default_factory=SpecMemo)
    contexts_built: int = 0  # how many contexts were built with it (what the live bench counts)

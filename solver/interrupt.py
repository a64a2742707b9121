"""Stopping a decision on the user's request (Ctrl-C), so it ends at once and says so.

CP-SAT's solve runs in C++ with the GIL released, and a Python signal handler only runs when the
main thread is back in Python: a Ctrl-C during a solve used to be caught by CP-SAT itself, which
stopped the search and returned its incumbent as an ordinary FEASIBLE plan (exit 0). Instead, the
command line hands the signal to ``request`` (from a thread of its own), which stops every
running solve (``CpSolver.stop_search``) and greedy run (their cancel events); the decision then
raises ``Interrupted`` instead of returning a plan made of what was cut short.

No signal handling lives here (the solver does no I/O); ``adapters.interrupts`` does that.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from models.errors import Interrupted


_requested = threading.Event()
_lock = threading.Lock()
_solvers: set[Any] = set()
_cancels: set[threading.Event] = set()


def new_solver():
    """A CpSolver that leaves SIGINT alone: an interrupt stops it through ``request``, never
    through CP-SAT's own handler (which ends the search as if it were a result)."""
    from ortools.sat.python import cp_model

    solver = cp_model.CpSolver()
    solver.parameters.catch_sigint_signal = False
    return solver


def request() -> None:
    """Stop every decision in progress (safe from any thread)."""
    _requested.set()
    with _lock:
        for solver in _solvers:
            solver.stop_search()
        for cancel in _cancels:
            cancel.set()


def reset() -> None:
    _requested.clear()


def requested() -> bool:
    return _requested.is_set()


def check() -> None:
    """Raise ``Interrupted`` if a stop was requested."""
    if _requested.is_set():
        raise Interrupted("interrupted")


@contextmanager
def stoppable(solver: Any = None, cancel: threading.Event | None = None) -> Iterator[None]:
    """While inside, ``request`` stops ``solver`` (a CpSolver) and sets ``cancel``."""
    with _lock:
        if solver is not None:
            _solvers.add(solver)
        if cancel is not None:
            _cancels.add(cancel)
    try:
        if _requested.is_set():
            if solver is not None:
                solver.stop_search()
            if cancel is not None:
                cancel.set()
        yield
    finally:
        with _lock:
            _solvers.discard(solver)
            if cancel is not None:
                _cancels.discard(cancel)

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
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

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
    _stop_registered()
    # CpSolver.stop_search is a no-op until solve() has made its wrapper: a solver registered
    # just before its solve starts would miss the request, and run to its time limit. Asking
    # again until every registered solver has left makes the stop stick.
    threading.Thread(target=_keep_stopping, name="interrupt-stopper", daemon=True).start()


# How often, and for how long at most, registered solvers are asked again to stop.
RESTOP_SECONDS = 0.05
RESTOP_FOR_SECONDS = 30.0


def _stop_registered() -> bool:
    """Ask every registered solver and greedy run to stop; whether any is still registered."""
    with _lock:
        for solver in _solvers:
            solver.stop_search()
        for cancel in _cancels:
            cancel.set()
        return bool(_solvers or _cancels)


def _keep_stopping() -> None:
    ends = time.monotonic() + RESTOP_FOR_SECONDS
    while _requested.is_set() and time.monotonic() < ends and _stop_registered():
        time.sleep(RESTOP_SECONDS)


def reset() -> None:
    _requested.clear()


def requested() -> bool:
    return _requested.is_set()


def check() -> None:
    """Raise ``Interrupted`` if a stop was requested."""
    if _requested.is_set():
        raise Interrupted("interrupted")


# Items of a long loop between two looks at ``check`` (``checked``): a few milliseconds of work.
CHECK_EVERY = 256

_Item = TypeVar("_Item")


def checked(items: Iterable[_Item], every: int = CHECK_EVERY) -> Iterator[_Item]:
    """``items``, with ``check()`` before the first and after every ``every`` of them: a long
    loop in Python (building a context or a model) stops within a fraction of a second of
    Ctrl-C instead of running to its end (the signal handler only takes note)."""
    for i, item in enumerate(items):
        if not i % every:
            check()
        yield item


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
            if cancel is not None:
                cancel.set()
            check()  # a solve not yet started would not see stop_search
        yield
    finally:
        with _lock:
            _solvers.discard(solver)
            if cancel is not None:
                _cancels.discard(cancel)

"""Greedy ``scheduleOne`` in a thread beside the CP-SAT build and solve (``GreedyRun``), and the
estimate that decides whether it goes first, its plan the solver's hint."""

from __future__ import annotations

import threading
import time
from typing import Optional

from .. import interrupt, progress as stages
from ..context import SchedulingContext
from ..filtering import StaticFilters
from ..greedy import PROGRESS_SECONDS, GreedyResult, progress_line, schedule_greedy


class GreedyRun:
    """Greedy scheduleOne in a thread beside the model build and the solve.

    CP-SAT's solve releases the GIL, so the two overlap. Greedy works on its own copy of the
    state and its own score context; it stops early when asked (the solver proved optimality,
    so greedy cannot do better)."""

    def __init__(self, ctx: SchedulingContext, static: StaticFilters) -> None:
        self.cancel = threading.Event()
        self.progress = [0]
        self.result: Optional[GreedyResult] = None
        self.error: Optional[BaseException] = None
        self.started = time.monotonic()
        self.finished: Optional[float] = None
        self.total = len(ctx.window)
        state = ctx.state.copy()  # copied here, before the main thread registers counters
        self._thread = threading.Thread(
            target=self._run, args=(ctx, static, state), name="greedy-scheduleOne", daemon=True
        )
        self._thread.start()

    def _run(self, ctx, static, state) -> None:
        try:
            with interrupt.stoppable(cancel=self.cancel):
                self.result = schedule_greedy(ctx, static=static, state=state, cancel=self.cancel, progress=self.progress)
        except BaseException as exc:  # re-raised in the caller's thread by wait()
            self.error = exc
        finally:
            self.finished = time.monotonic()

    @property
    def done(self) -> bool:
        return self.finished is not None

    def wait(self, timeout: Optional[float] = None) -> Optional[GreedyResult]:
        """Greedy's plan once it is done, waited for at most ``timeout`` (None: as long as it takes,
        saying how far the pass is every ``PROGRESS_SECONDS`` to whoever listens)."""
        if timeout is None:
            every = stages.Every(PROGRESS_SECONDS)
            while self._thread.is_alive():
                self._thread.join(PROGRESS_SECONDS)
                if self._thread.is_alive() and not self.cancel.is_set() and every.due():
                    stages.stage(progress_line(self.progress[0], self.total))
        else:
            self._thread.join(timeout)
        if self.error is not None:
            raise self.error
        return self.result if self.done else None

    def plan(self) -> GreedyResult:
        """Greedy's plan, waited for as long as it takes (what greedy raised is raised here)."""
        result = self.wait()
        interrupt.check()
        assert result is not None  # finished without raising: it has its plan
        return result

    @property
    def seconds(self) -> float:
        return (self.finished or time.monotonic()) - self.started


# Greedy goes first (its plan is the hint) when it should take at most this share of the limit;
# a larger window is built first, hinted by first fit, and greedy runs beside the solve.
GREEDY_FIRST_SHARE = 0.25
# ... and is waited for at most this share of the limit before the build starts without it.
GREEDY_FIRST_WAIT_SHARE = 0.4
# Rough cost of greedy per pod and node looked at (filter and score), measured on 2 cores.
GREEDY_SECONDS_PER_NODE_CHECK = 2e-6


def estimated_greedy_seconds(ctx: SchedulingContext) -> float:
    from ..node_order import num_feasible_nodes_to_find

    looked_at = num_feasible_nodes_to_find(len(ctx.nodes), ctx.config.percentage_of_nodes_to_score)
    return len(ctx.window) * looked_at * GREEDY_SECONDS_PER_NODE_CHECK


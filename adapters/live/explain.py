"""`why`'s answer in the live scheduler's conditions (``live.explain``).

A pod (or gang) a window leaves out gets kube-scheduler's message in its `PodScheduled=False`
condition, as before; with ``live.explain.enabled`` the condition then also gets the short form of
`why`'s answer, after kube's message, which stays exactly as it was at the start:
"0/3 nodes are available: 3 Insufficient cpu.; obstacles: PodDisruptionBudget ml/batch allows 0
disruption(s)". A v1alpha2 PodGroup's `PodGroupScheduled=False` message gets the same.

Explaining never slows the decision loop or the binds: the cycle only hands its snapshot and
decision over (``offer``, no work); one background thread explains at most ``maxPerCycle`` pods
or gangs of the latest cycle (a newer cycle replaces what an older one left unexplained), runs
each feasibility check with one solver worker, and waits before each check while a window is
being decided or pods are being bound (the time spent waiting does not count against
``secondsPerTarget``, up to ``MAX_WAIT_SECONDS``). An explanation past its time, one whose pod
was bound or deleted meanwhile, or one that fails, writes nothing: kube's message stays, the
failure is logged. ("Never slows" up to one check: a check already running when a window starts
shares the interpreter with it until it ends.)

The answer is kept per pod with the kube message it was worked out for: a later cycle that
leaves the pod out with the same message writes the same condition (``annotate``), so nothing
is written again, and nothing is worked out again until the message changes or
``REFRESH_SECONDS`` pass.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

import solver
from models import ClusterSnapshot, Pod, SchedulerConfig
from solver.explain import Stopped, Unit, explain, units_of

from .events import UNSCHEDULABLE, Reporter

log = logging.getLogger(__name__)

# An answer older than this is worked out again the next time its pod is left out (seconds):
# the cluster around a pod that keeps the same kube message may still have changed.
REFRESH_SECONDS = 300.0
# While a window is being decided, the explainer looks again this often before its next check.
BUSY_POLL_SECONDS = 0.05
# How long one explanation may wait, in all, for windows and binds to finish before its checks
# (seconds): under a steady stream of pods it gives up rather than hold its snapshot for ever.
MAX_WAIT_SECONDS = 60.0
# Answers kept at most (pods come and go: never let it grow without bound).
MAX_ANSWERS = 10_000


@dataclass(frozen=True)
class _Answer:
    message: str  # kube-scheduler's message the answer was worked out for
    suffix: str  # "obstacles: ..."; empty when none could be given (time out, failure)
    at: float  # time.monotonic() when worked out


@dataclass(frozen=True)
class _Job:
    snapshot: ClusterSnapshot
    decision: solver.Decision
    units: tuple[Unit, ...]


class Explainer:
    def __init__(self, config: SchedulerConfig, reporter: Reporter, *, metrics: Any,
                 waiting: Callable[[str], Optional[Pod]], busy: Callable[[], bool]) -> None:
        """``waiting(key)``: the pod as the cache shows it if it still waits to be scheduled
        (not bound, not assumed, not deleted), else None; ``busy()``: a window is being decided or
        binds are in flight (checks wait for it to clear)."""
        settings = config.live.explain
        self.max_per_cycle = settings.max_per_cycle
        self.seconds = settings.seconds_per_target
        # Each check is a one-target decision: one worker, never longer than the whole budget.
        self.config = config.with_overrides(time_limit_seconds=min(config.solver.time_limit_seconds, self.seconds),
                                            workers=1)
        self.reporter = reporter
        self.metrics = metrics
        self.waiting = waiting
        self.busy = busy
        self.explained = 0  # answers written (for tests and logs)
        self._answers: dict[str, _Answer] = {}  # pod key or podgroup/<gang> -> its answer
        self._job: Optional[_Job] = None
        self._lock = threading.Condition()
        self._stopping = threading.Event()
        self._thread: Optional[threading.Thread] = None
        reporter.annotate = self.annotate

    def start(self) -> None:
        self._thread = threading.Thread(target=self._work, name="cpsat-live-explain", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            self._lock.notify_all()
        if self._thread is not None:
            self._thread.join(self.seconds * 2 + 1.0)

    # --- what the cycle and the reporter call ------------------------------------------------------

    def annotate(self, key: str, message: str) -> str:
        """The condition message for ``key`` left out with kube's ``message``."""
        with self._lock:
            answer = self._answers.get(key)
        if answer is None or answer.message != message or not answer.suffix:
            return message
        return f"{message}; {answer.suffix}"

    def forget(self, pod_key: str) -> None:
        with self._lock:
            self._answers.pop(pod_key, None)

    def offer(self, snapshot: ClusterSnapshot, decision: solver.Decision) -> None:
        """A cycle's snapshot and decision: its left-out pods and gangs not explained yet (at most
        ``max_per_cycle``) become the next job, replacing one not started."""
        try:
            self._offer(snapshot, decision)
        except Exception:  # noqa: BLE001 - called by the cycle: an explanation must never stop scheduling
            log.warning("could not pick the pods to explain", exc_info=True)

    def _offer(self, snapshot: ClusterSnapshot, decision: solver.Decision) -> None:
        plan = decision.plan
        if not plan.unschedulable:
            return
        now = time.monotonic()
        chosen = []
        with self._lock:
            for unit in units_of(snapshot, plan, None, self.config.scheduler_name):
                first = next(u.message for u in plan.unschedulable if u.pod in unit.pods)
                answer = self._answers.get(unit.name)
                if answer is not None and answer.message == first and now - answer.at < REFRESH_SECONDS:
                    continue
                chosen.append(unit)
                if len(chosen) == self.max_per_cycle:
                    break
            if chosen:
                self._job = _Job(snapshot, decision, tuple(chosen))
                self._lock.notify_all()

    # --- the background thread -----------------------------------------------------------------------

    def _work(self) -> None:
        while not self._stopping.is_set():
            with self._lock:
                while self._job is None and not self._stopping.is_set():
                    self._lock.wait(1.0)
                job, self._job = self._job, None
            if job is None:
                return
            for unit in job.units:
                if self._stopping.is_set():
                    return
                try:
                    self._explain(job, unit)
                except Exception:  # noqa: BLE001 - an explanation must never stop scheduling
                    log.warning("could not explain %s; its condition keeps kube-scheduler's message", unit.name,
                                exc_info=True)
                    self.metrics.explanations.labels(result="failed").inc()
                    self._remember(job, unit, "")

    def _explain(self, job: _Job, unit: Unit) -> None:
        start = time.monotonic()
        deadline = start + self.seconds  # moved on by the time spent waiting for the loop and binds
        give_up = start + MAX_WAIT_SECONDS

        def gate() -> bool:
            nonlocal deadline
            began = time.monotonic()
            while self.busy() and time.monotonic() < give_up and not self._stopping.is_set():
                self._stopping.wait(BUSY_POLL_SECONDS)
            now = time.monotonic()
            deadline += now - began
            return (now < min(deadline, give_up) and not self._stopping.is_set()
                    and all(self.waiting(k) is not None for k in unit.pods))

        try:
            [found] = explain(job.snapshot, self.config, unit.name, today=job.decision, gate=gate)
        except Stopped as why:
            log.info("not explaining %s: %s (out of time, or it no longer waits)", unit.name, why)
            self.metrics.explanations.labels(result="stopped").inc()
            self._remember(job, unit, "")
            return
        suffix = found.short_form()
        self._remember(job, unit, suffix)
        self.metrics.explanations.labels(result="answered").inc()
        if not suffix:
            return
        for key, message in found.reasons.items():
            pod = self.waiting(key)
            if pod is not None and self.reporter.explained(pod, message, still=self._still(key)):
                self.explained += 1
        if unit.kind == "gang" and not found.placed and all(self.waiting(k) is not None for k in unit.pods):
            gang = unit.name.split("/", 1)[1]
            self.reporter.pod_group_scheduled(gang, scheduled=False, reason=UNSCHEDULABLE,
                                              message=next(iter(found.reasons.values())))
        log.info("%s: %s", unit.name, suffix)

    def _still(self, key: str) -> Callable[[], bool]:
        return lambda: self.waiting(key) is not None

    def _remember(self, job: _Job, unit: Unit, suffix: str) -> None:
        now = time.monotonic()
        messages = {u.pod: u.message for u in job.decision.plan.unschedulable if u.pod in unit.pods}
        if not messages:
            return
        with self._lock:
            if len(self._answers) >= MAX_ANSWERS:
                self._answers.clear()
            self._answers[unit.name] = _Answer(next(iter(messages.values())), suffix, now)
            for key, message in messages.items():
                self._answers[key] = _Answer(message, suffix, now)

"""The live scheduler: one window at a time, told the way kube-scheduler's scheduleOne is.

`run_cycle` is the story (schedule_one.go, for a window instead of a pod):

1. **window** — take the next pods from the queue: up to the window size, or whatever
   arrived within the window wait (adaptive: pods that need no joint decision do not wait). The window comes first and the snapshot after it, so the
   decision sees the cluster as it is once the wait is over, not as it was before.
2. **snapshot** — freeze the cache, assumed pods included, into a `ClusterSnapshot`.
3. **decide** — one `solver.decide` call with the configured engine and time limit. CP-SAT
   returns its best plan or, at the limit, the greedy `scheduleOne` plan, so a window never
   stalls; if the solver fails outright, the window is decided greedily. A *quick* window — few pods
   (`quick_window`), none needing a joint decision: the light-load case — is decided by
   `scheduleOne` whatever the engine, as kube-scheduler would decide each of its pods: a model
   costs a second where the pods gain little from it. A larger window of such pods (a backlog)
   is decided by `scheduleOne` first as well, and its plan kept when it places every pod without
   preempting (`greedy_whole`): no model places more. The model decides the rest.
4. **check** — `solver.decide` has replayed every plan it returns through `solver.validate`
   against this very snapshot (a model's plan it rejects is replaced by greedy's there); the
   decision says in typed fields whether the plan passed. One it did not is never acted on: the
   pods back off.
5. **assume** — every decision goes into the cache before any API call, so the next window
   already counts it; victims are shown as terminating so no room is promised twice.
6. **report** — pods left out go back to the queue as unschedulable, with a
   `FailedScheduling` event carrying the "0/N nodes are available: ..." message.
7. **bind / evict** — asynchronously, on the binder's bounded pool (`binder.py`). This is
   safe *because* of step 5: the cache already shows what the binds will do.

Only the leader acts, and it checks again right before assuming and before every API write:
losing the lease stops scheduling at once, and units still waiting for victims give their room
back. Each leadership term starts with a fresh list of pods and nodes (the previous leader's
last binds may not have reached our watch yet), and a window decided in one term is not acted
on in the next.
"""

from __future__ import annotations

import gc
import logging
import sys
import threading
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator, Optional, Union

import solver
from models import ClusterSnapshot, InputError, Plan, Pod, SchedulerConfig, pod_group_key
from solver.plugins import registry

from .binder import Binder, BinderSettings, BindUnit, Placement, Victim
from .cache import BINDING, DRY_RUN, ClusterCache, node_feasibility
from .clock import Clock, SystemClock
from .events import SCHEDULER_ERROR, Reporter
from .explain import Explainer
from .events import UNSCHEDULABLE as UNSCHEDULABLE_REASON
from .handlers import QueueFeeder
from .informer import Informer
from .api_client import NODES, PODS, WATCHED, KubeApi
from .leader import AlwaysLeader, LeaderElector
from .metrics import Metrics
from .options import STALL_GRACE_SECONDS, LiveOptions
from .queue import (ACTIVE, BACKOFF, GATED, IN_FLIGHT, UNSCHEDULABLE, QueuedPod, SchedulingQueue,
                    needs_joint_decision)
from .serving import StatusServer
from .units import form_units

log = logging.getLogger(__name__)

# The collector's first threshold while the scheduler runs (allocations less deallocations
# between young collections; Python's default is 700). Parsing one pod event makes hundreds of
# objects, so at 700 a collection ran every event or two and promoted what was only half parsed.
QUIET_GEN0_THRESHOLD = 10_000


class InterpreterTuning:
    """The process-wide settings a running scheduler wants (`LiveOptions.switch_interval`,
    `quiet_collector`): set by the first scheduler started in the process, given back as they
    were by the last one stopped (tests and `--simulate` run several in one process)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._switch_before = 0.0
        self._gc_before: Optional[tuple[int, ...]] = None

    def acquire(self, switch_interval: Optional[float], quiet_collector: bool) -> None:
        with self._lock:
            self._users += 1
            if self._users > 1:
                return
            self._switch_before = sys.getswitchinterval()
            if switch_interval is not None:
                sys.setswitchinterval(switch_interval)
            if quiet_collector:
                self._gc_before = gc.get_threshold()
                gc.freeze()
                gc.set_threshold(QUIET_GEN0_THRESHOLD, *self._gc_before[1:])

    def release(self) -> None:
        with self._lock:
            self._users -= 1
            if self._users > 0:
                return
            sys.setswitchinterval(self._switch_before)
            if self._gc_before is not None:
                gc.set_threshold(*self._gc_before)
                gc.unfreeze()  # back in the collector's sight: the process may go on without us
                self._gc_before = None


_INTERPRETER = InterpreterTuning()


class GcClock:
    """Seconds spent in the cyclic collector, per generation (debug logs only: a pause of the
    whole process shows on whichever window or bind it falls)."""

    def __init__(self) -> None:
        self.spent = [0.0, 0.0, 0.0]
        self._start = 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.spent[info.get("generation", 2)] += time.perf_counter() - self._start

# After an unexpected error in a cycle, pause this long (seconds) so a persistent bug cannot spin.
CYCLE_ERROR_PAUSE_SECONDS = 1.0
# A standby (or a leader whose cache is not synced yet) looks again this often (seconds).
STANDBY_POLL_SECONDS = 0.1
# How long `stop` waits for a window being decided (seconds), beyond the solver's time limit.
STOP_GRACE_SECONDS = 10.0


def with_hard_budgets(config: SchedulerConfig) -> SchedulerConfig:
    """The config with `preemption.pdb: hard`. Victims are evicted through the Eviction API, which
    refuses (429) any eviction a PodDisruptionBudget does not allow; a plan counting on such an
    eviction could never be carried out, and its preemptor would retry it for ever."""
    if config.preemption.pdb == "hard":
        return config
    log.info("planning with preemption.pdb: hard (the Eviction API enforces PodDisruptionBudgets)")
    data = config.model_dump()
    data["preemption"]["pdb"] = "hard"
    return SchedulerConfig.model_validate(data)


@dataclass
class CycleResult:
    """What one cycle did (for tests, logs and the simulation's output)."""

    window: list[str]
    plan: Optional[Plan] = None
    units: int = 0
    unschedulable: int = 0
    dropped: list[str] = field(default_factory=list)  # in the window, but no longer waiting
    acted: bool = False
    timings: dict[str, float] = field(default_factory=dict)  # seconds per phase


class Scheduler:
    def __init__(self, api: KubeApi, config: SchedulerConfig, options: LiveOptions = LiveOptions(), *,
                 clock: Optional[Clock] = None,
                 on_bound: Callable[[Placement], None] = lambda p: None,
                 on_evicted: Callable[[Victim], None] = lambda v: None,
                 on_unschedulable: Callable[[str, str], None] = lambda key, message: None) -> None:
        self.api = api
        self.config = with_hard_budgets(config)
        self.options = options
        self.clock = clock or SystemClock()
        self.metrics = Metrics()
        self.on_unschedulable = on_unschedulable
        self.queue = SchedulingQueue(clock=self.clock, settings=options.queue)
        self.elector: Union[LeaderElector, AlwaysLeader]
        if options.leader_elect and not options.dry_run:
            self.elector = LeaderElector(api, options.lease, clock=self.clock, on_started=self._started_leading,
                                         on_stopped=lambda: self.binder.leadership_lost(), metrics=self.metrics)
        else:
            self.elector = AlwaysLeader(on_started=self._started_leading, metrics=self.metrics)
        self.reporter = Reporter(api, component=config.scheduler_name, instance=self.elector.identity,
                                 clock=self.clock, metrics=self.metrics, enabled=not options.dry_run)
        self.cache = ClusterCache()
        self.queue.tree_of = lambda gang: self.cache.trees.tree_gangs.get(gang, frozenset())
        # `why`'s answers after kube's message in left-out pods' conditions (`explain.py`), if enabled
        self.explainer: Optional[Explainer] = None
        if self.config.live.explain.enabled and not options.dry_run:
            self.explainer = Explainer(self.config, self.reporter, metrics=self.metrics, waiting=self._still_waiting,
                                       busy=lambda: self._busy_since is not None or self.binder.binding)
        # What the solver keeps from one window's decision to the next (its kept state): ours.
        self.memory = solver.SolverMemory()
        self.reporter.group_conditions = self.cache.core_group_conditions
        self.binder = Binder(api, self.cache, self.queue, self.reporter, metrics=self.metrics, clock=self.clock,
                             settings=BinderSettings(concurrency=options.bind_concurrency,
                                                     preemption_timeout=options.preemption_timeout,
                                                     uncertain_ttl=options.uncertain_bind_ttl,
                                                     backoffs=options.retry_backoffs, dry_run=options.dry_run),
                             is_leader=self.elector.is_leader, on_bound=on_bound, on_evicted=on_evicted)
        self.feeder = QueueFeeder(self.queue, scheduler_name=config.scheduler_name, cache=lambda: self.cache,
                                  victim_gone=self.binder.victim_gone, pod_gone=self._pod_gone)
        self.cache.listener = self.feeder
        self.informers = [Informer(api, self.cache, r, clock=self.clock, backoffs=options.watch_backoffs,
                                   watch_timeout=options.watch_timeout, metrics=self.metrics) for r in WATCHED]
        self.status_server: Optional[StatusServer] = None
        if options.metrics_addr is not None:
            self.status_server = StatusServer(options.metrics_addr, health=self.health, ready=self.ready,
                                              metrics=self.metrics.exposition)
        self._stopping = threading.Event()
        self._failure: Optional[str] = None  # why the current window could not be decided
        self._window: list[QueuedPod] = []  # the window being decided, until the binder takes it
        self._marked: list[str] = []  # victims the window marked as evicting, until the binder takes them
        self._threads: list[threading.Thread] = []
        # Progress, for /healthz: when the loop took the window it is on (None between windows)
        # and the phase it is in.
        self._busy_since: Optional[float] = None
        self._busy_phase = ""
        self.stall_timeout = (options.stall_timeout if options.stall_timeout is not None
                              else 3 * self.config.solver.time_limit_seconds + STALL_GRACE_SECONDS)
        self._started = False
        self._stopped = False
        self._gc_clock: Optional[GcClock] = None
        self._tuned = False  # the interpreter's settings are ours (`InterpreterTuning`) until stop
        self._froze_synced = False  # the cluster as first listed was put out of the collector's sight
        # Leadership terms: a window decided in one term is not acted on in another (another
        # leader may have acted in between), and a new term first lists pods and nodes afresh.
        self._term = 0
        self._catching_up: list[tuple[Informer, int]] = []

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self) -> "Scheduler":
        """Start watching, electing, serving and scheduling; returns at once."""
        self._started = True
        if self.options.switch_interval is not None or self.options.quiet_collector:
            # Every full collection walks every tracked object: the client's thousands of model
            # classes, the solver's and pydantic's, then the whole cluster, and holds every thread
            # meanwhile (the watch included: a pod's latency started before its ADDED event was
            # read). None of that is garbage in a cycle; refcounting still frees what is dropped.
            _INTERPRETER.acquire(self.options.switch_interval, self.options.quiet_collector)
            self._tuned = True
        if log.isEnabledFor(logging.DEBUG) and self._gc_clock is None:
            self._gc_clock = GcClock()
            gc.callbacks.append(self._gc_clock)
        self.reporter.start()
        if self.explainer is not None:
            self.explainer.start()
        for informer in self.informers:
            informer.start()
        if self.status_server is not None:
            self.status_server.start()
        self.elector.start()
        for name, target in (("loop", self._loop), ("housekeeping", self._housekeep)):
            thread = threading.Thread(target=target, name=f"cpsat-live-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self, *, release_lease: bool = True) -> None:
        """Stop taking windows, finish the binds in flight, release the lease, close everything.

        `release_lease=False` leaves the lease to expire, as a crashed process would."""
        if self._stopped:
            return
        self._stopped = True
        self._stopping.set()
        self.queue.close()
        for thread in self._threads:
            thread.join(self.config.solver.time_limit_seconds * 2 + STOP_GRACE_SECONDS)
        self.binder.shutdown()
        self.elector.stop(release=release_lease)
        if self.explainer is not None:
            self.explainer.stop()
        self.reporter.stop()
        for informer in self.informers:
            informer.stop()
        for informer in self.informers:
            informer.join(5.0)
        if self.status_server is not None:
            self.status_server.stop()
        if self._gc_clock is not None and self._gc_clock in gc.callbacks:
            gc.callbacks.remove(self._gc_clock)
        if self._tuned:
            self._tuned = False
            _INTERPRETER.release()
        log.info("scheduler stopped")

    def wait_synced(self, timeout: float) -> bool:
        return self.cache.wait_until(lambda: self.cache.synced, timeout)

    def _started_leading(self) -> None:
        if isinstance(self.elector, LeaderElector):
            # The leader before us may have bound pods our watch has not shown yet: deciding on
            # that view would give their room away again. A list is the server's state now.
            self._catching_up = [(i, i.relist()) for i in self.informers if i.resource in (PODS, NODES)]
        self._term += 1  # after the catch-up is set: a loop that reads the new term waits for it
        self.queue.move_all()  # a new leader gives every waiting pod a fresh try

    def _caught_up(self) -> bool:
        """The lists the current leadership term asked for are in the cache (never cleared here:
        the elector may start a new term at any moment, and its request must not be lost)."""
        return all(informer.listed_since(ticket) for informer, ticket in self._catching_up)

    def may_act(self) -> bool:
        """Leading, and not shutting down: the condition for every write."""
        return self.elector.is_leader() and not self._stopping.is_set()

    # --- the loop --------------------------------------------------------------------------------

    def _loop(self) -> None:
        while not self._stopping.is_set():
            term = self._term  # before the checks: a term begun after them fails at `may_act`
            if not (self.elector.is_leader() and self.cache.synced and self._caught_up()):
                self._stopping.wait(STANDBY_POLL_SECONDS)
                continue
            if self._tuned and self.options.quiet_collector and not self._froze_synced:
                self._froze_synced = True
                gc.freeze()  # the cluster as first listed: long-lived, walked by no collection now
            try:
                self.run_cycle(term)
            except Exception:  # noqa: BLE001 - the loop must outlive a bug in one cycle
                log.exception("scheduling cycle failed")
                self._recover_window()
                self._stopping.wait(CYCLE_ERROR_PAUSE_SECONDS)
            finally:
                self._window, self._marked = [], []
                self._busy_since = None

    def _pod_gone(self, key: str) -> None:
        self.reporter.forget(key)
        if self.explainer is not None:
            self.explainer.forget(key)

    def _still_waiting(self, key: str) -> Optional[Pod]:
        """The pod as the cache shows it while it still waits for us (None: bound, assumed,
        deleted or terminating)."""
        pod = self.cache.pod(key)
        if pod is None or pod.spec.node_name or pod.is_terminating or self.cache.is_assumed(key):
            return None
        return pod

    def _recover_window(self) -> None:
        """After a failed cycle: the window's pods not yet handed to the binder go back to the
        queue, their assumptions forgotten, so none is left in flight for ever; victims marked as
        evicting run on as before (no eviction was sent), or no later window could use them."""
        for key in self._marked:
            self.cache.unmark_evicting(key)
        for qp in self._window:
            if self.queue.where(qp.key) == IN_FLIGHT:
                self.cache.forget(qp.key)
                self.queue.requeue_error(qp.key)

    def _housekeep(self) -> None:
        while not self._stopping.wait(self.options.housekeeping):
            self.feeder.settle()
            self.queue.flush()
            self.binder.expire()
            self.update_gauges()

    def update_gauges(self) -> None:
        counts = self.queue.counts()
        for pool in (ACTIVE, BACKOFF, UNSCHEDULABLE, GATED, IN_FLIGHT):
            self.metrics.pending.labels(queue=pool).set(counts[pool])
        self.metrics.assumed.set(len(self.cache.assumed()))

    def run_cycle(self, term: Optional[int] = None) -> Optional[CycleResult]:
        """One window through the whole story (see the module docstring); None when idle.
        `term`: the leadership term the cycle began in (by default, the current one)."""
        term = self._term if term is None else term
        window = self.next_window()
        if not window:
            return None
        self._window = window
        self._busy_since, self._busy_phase = self.clock.now(), "window"
        result = CycleResult([qp.key for qp in window])
        with self._phase("snapshot", result):
            window, snapshot = self.take_snapshot(window, result)
        if not window or snapshot is None:
            return result
        with self._phase("decide", result):
            decision = self.decide(snapshot, window)
        with self._phase("check", result):
            plan = self.check(window, decision) if decision is not None else None
        result.plan = plan
        if plan is None:
            self.give_back(window, error=True, message=self._failure)
            return result
        if not self.may_act() or term != self._term:  # not leading, or leading again since the snapshot
            self.give_back(window, error=False)
            return result
        with self._phase("assume", result):
            units = self.assume(snapshot, window, plan)
            self._marked = [v.key for u in units for v in u.victims]
            result.unschedulable += self.report_unschedulable(snapshot, window, plan)
        self._window, self._marked = [], []  # from here on, the binder answers for the window
        self._busy_phase = "bind"
        self.bind_or_evict(units)
        result.units, result.acted = len(units), True
        if self.explainer is not None and decision is not None and plan.unschedulable:
            self.explainer.offer(snapshot, decision)  # worked out off the loop, after the cycle's writes
        if log.isEnabledFor(logging.DEBUG):  # its arguments are built before log.debug could drop them
            self._log_window(window, result, plan)
        return result

    def _log_window(self, window: list[QueuedPod], result: CycleResult, plan: Plan) -> None:
        log.debug("window of %d pods: %s; %d placed, %d unschedulable, %d preempted (%s)%s", len(window),
                  ", ".join(f"{k} {v:.3f}s" for k, v in result.timings.items()), len(plan.assignments),
                  result.unschedulable, len(plan.preemptions), plan.stats.status,
                  "; collector so far " + "/".join(f"{t:.2f}" for t in self._gc_clock.spent) + " s"
                  if self._gc_clock is not None else "")

    @contextmanager
    def _phase(self, name: str, result: CycleResult) -> Iterator[None]:
        start = self.clock.now()
        self._busy_phase = name
        try:
            yield
        finally:
            elapsed = self.clock.now() - start
            result.timings[name] = elapsed
            self.metrics.phase_latency.labels(phase=name).observe(elapsed)

    # --- the phases ------------------------------------------------------------------------------

    def next_window(self) -> list[QueuedPod]:
        window = self.queue.pop_window(self.options.window_size, self.options.window_wait, self._stopping,
                                      adaptive=self.options.adaptive_window, batch_wait=self.options.batch_wait)
        if window:
            self.metrics.window_size.observe(len(window))
        return window

    def take_snapshot(self, window: list[QueuedPod],
                      result: CycleResult) -> tuple[list[QueuedPod], Optional[ClusterSnapshot]]:
        """The window's pods that still wait, and the cache frozen around them."""
        waiting = []
        refused: dict[str, str] = {}  # gang -> why its group tree was refused
        for qp in window:
            pod = self.cache.pod(qp.key)
            if pod is None or pod.spec.node_name or pod.is_terminating or self.cache.is_assumed(qp.key) \
                    or pod.spec.scheduler_name != self.config.scheduler_name:
                self.queue.done(qp.key)
                result.dropped.append(qp.key)
            elif (gang := qp.gang) is not None and (problem := self.cache.group_problem(gang)) is not None:
                self._wait_for_tree(pod, gang, problem, refused)
                result.unschedulable += 1
            else:
                waiting.append(qp)
        if not waiting:
            return [], None
        try:
            return waiting, self.cache.snapshot(qp.key for qp in waiting)
        except InputError as exc:
            log.error("cannot build a snapshot for this window: %s", exc)
            self.give_back(waiting, error=True, message=f"scheduler error: {exc}")
            return [], None

    def _wait_for_tree(self, pod: Pod, gang: str, problem: str, refused: dict[str, str]) -> None:
        """A pod of a gang whose group tree was refused (``group_trees.py``) waits, saying why,
        as a dump of the same objects is refused: no part of a tree is placed as if it were
        ungrouped. Its PodGroup says so too, once per window."""
        self.queue.requeue_unschedulable(pod.key, problem)
        self.metrics.attempts.labels(result="unschedulable").inc()
        self.reporter.failed_scheduling(pod, problem)
        log.info("%s is unschedulable: %s", pod.key, problem)
        self.on_unschedulable(pod.key, problem)
        if gang not in refused:
            refused[gang] = problem
            self.reporter.pod_group_scheduled(gang, scheduled=False, reason=UNSCHEDULABLE_REASON, message=problem)

    def decide(self, snapshot: ClusterSnapshot, window: list[QueuedPod]) -> Optional[solver.Decision]:
        """One `solver.decide` call for the window: it validates whatever plan it returns and
        falls back to greedy's when the model's cannot be used; None when it refused the window."""
        keys = tuple(qp.key for qp in window)
        joint = any(needs_joint_decision(qp.pod) for qp in window)
        engine = "greedy" if self.is_quick(window, joint) else self.options.engine
        greedy_first = engine != "greedy" and not joint and self.options.greedy_whole and self.options.quick_window > 0
        start = self.clock.now()
        self._failure = "scheduler error: the window could not be decided (see the scheduler's log)"
        request = solver.ScheduleRequest(snapshot, self.config, engine=engine, window_keys=keys,
                                         greedy_first=greedy_first, fall_back_on_error=True, memory=self.memory)
        try:
            decision = solver.decide(request)
        except InputError as exc:  # the window breaks a configured limit: not worth a retry now
            log.error("window of %d pods refused: %s", len(keys), exc)
            self._failure = f"scheduler error: {exc}"
            return None
        except Exception:  # noqa: BLE001 - greedy failed too (a model's failure falls back inside)
            log.exception("scheduling a window of %d pods failed", len(keys))
            return None
        self.metrics.solver_latency.labels(engine="cpsat" if decision.solver_ran else "greedy").observe(
            self.clock.now() - start)
        self.metrics.solver_status.labels(status=decision.plan.stats.status).inc()
        if decision.fallback_reason is not None and decision.solver_ran:
            log.warning("window of %d pods: greedy's plan instead of the model's: %s", len(keys),
                        decision.fallback_reason)
        if decision.greedy_instead_of_solver:
            self.metrics.fallbacks.inc()
        return decision

    def is_quick(self, window: list[QueuedPod], joint: Optional[bool] = None) -> bool:
        """A light-load window that scheduleOne decides as well as a model would: at most
        `quick_window` pods (a backlog makes larger windows), none needing a joint decision
        (``joint``: whether one does, when already known)."""
        if joint is None:
            joint = any(needs_joint_decision(qp.pod) for qp in window)
        return len(window) <= self.options.quick_window and not joint

    def check(self, window: list[QueuedPod], decision: solver.Decision) -> Optional[Plan]:
        """The decision's plan if the validator accepted it (`solver.decide` replayed every plan
        it tried on this very snapshot); the plans it refused are counted and logged."""
        for rejected in decision.rejected:
            self.metrics.invalid_plans.inc()
            log.error("the %s plan for %d pods failed validation and is not acted on: %s", rejected.source.value,
                      len(window), "; ".join(rejected.problems[:5]))
        if not decision.validated:
            self._failure = f"scheduler error: no valid plan for this window ({decision.problems[0]})"
            return None
        return decision.plan

    def assume(self, snapshot: ClusterSnapshot, window: list[QueuedPod], plan: Plan) -> list[BindUnit]:
        """Put every decision into the cache, as units that are bound together (`units.py`).

        A unit whose victims cannot be evicted now, or one of whose pods left meanwhile, is not
        acted on; nor is any unit that waits for the victims of a unit not acted on."""
        now = self.clock.now()
        state = DRY_RUN if self.options.dry_run else BINDING
        kept: list[BindUnit] = []
        dropped_victims: set[str] = set()
        for unit in form_units(plan, window, snapshot):
            problem = self._node_problem(unit.placements, snapshot) or self._victim_problem(unit.victims)
            assumed = [] if problem else [p for p in unit.placements
                                          if self.cache.assume(p.key, p.node, state=state, now=now)]
            if problem is None and len(assumed) < len(unit.placements):
                problem = "a pod of the unit left meanwhile"
            if problem is not None:
                self._drop_unit(unit, assumed, problem)
                dropped_victims |= {v.key for v in unit.victims}
                continue
            kept.append(unit)
            for p in unit.placements:  # what the PreBinds take (devices) stays taken until the watch shows it
                if p.writes:
                    self.binder.writers.assume(self.cache, p.key, p.writes)
        while dropped_victims:  # units counting on victims that nobody will evict now
            waiting = [u for u in kept if u.waits_for & dropped_victims]
            dropped_victims = set()
            for unit in waiting:
                kept.remove(unit)
                self._drop_unit(unit, unit.placements, "it counted on victims that are not evicted now")
                dropped_victims |= {v.key for v in unit.victims}
        if not self.options.dry_run:
            for unit in kept:
                for v in unit.victims:
                    self.cache.mark_evicting(v.key)
        return kept

    def _drop_unit(self, unit: BindUnit, assumed: list[Placement], why: str) -> None:
        log.info("not acting on %s: %s; trying again after backoff", ", ".join(p.key for p in unit.placements), why)
        for p in assumed:
            self.cache.forget(p.key)
        for p in unit.placements:
            self.queue.requeue_error(p.key)

    def _node_problem(self, placements: list[Placement], snapshot: ClusterSnapshot) -> Optional[str]:
        """Why these placements' nodes are no longer the ones the decision read, if so. A window
        takes seconds to decide; a node cordoned, tainted, relabelled or shrunk meanwhile may take
        none of its pods, and binding them anyway would overcommit it or break its rules."""
        for p in placements:
            seen, read = self.cache.node(p.node), snapshot.node_by_name[p.node]
            if seen is None or seen is read:  # the same object: no event since the snapshot
                continue
            if node_feasibility(seen) != node_feasibility(read):
                return f"node {p.node} changed after the decision"
        return None  # a node gone is caught when assuming

    def _victim_problem(self, victims: list[Victim]) -> Optional[str]:
        """Why these victims cannot be evicted for this decision, if so."""
        for v in victims:
            if self.cache.is_assumed(v.key):
                return f"victim {v.key} is not running yet (its own bind is in flight)"
            if self.cache.is_evicting(v.key):
                return f"victim {v.key} is already being evicted for another pod"
            # The snapshot shows assumed pods on their nodes; one whose bind was given up since is
            # pending again, and the Eviction API deletes a pending pod outright. Only a pod the
            # watch shows bound there may be evicted (a binding is never undone, so this holds).
            # One gone already is no problem: its room is free.
            seen = self.cache.pod(v.key)
            if seen is not None and (seen.spec.node_name != v.node or seen.metadata.uid != v.pod.metadata.uid):
                return f"victim {v.key} is not running on {v.node} (its bind was given up after the decision)"
        return None

    def report_unschedulable(self, snapshot: ClusterSnapshot, window: list[QueuedPod], plan: Plan) -> int:
        rejected: dict[str, str] = {}  # gang -> the message of its first member left out
        for u in plan.unschedulable:
            pod = snapshot.pod(u.pod)  # not `pod_by_key`: a dict of every pod, each window, for a few
            assert pod is not None  # a validated plan names only the snapshot's pods
            self.queue.requeue_unschedulable(u.pod, u.message)
            self.metrics.attempts.labels(result="unschedulable").inc()
            self.reporter.failed_scheduling(pod, u.message, clear_nomination=self._nomination_lapses(pod, u.message))
            log.info("%s is unschedulable: %s", u.pod, u.message)
            self.on_unschedulable(u.pod, u.message)
            gang = pod_group_key(pod)
            if gang is not None:
                rejected.setdefault(gang, u.message)
        if rejected:
            self._report_rejected_gangs(snapshot, plan, rejected)
        return len(plan.unschedulable)

    def _nomination_lapses(self, pod: Pod, message: str) -> bool:
        """Whether a left-out pod's `nominatedNodeName` goes, as kube-scheduler clears it: the
        pod tried preemption and found no node. A pod still waiting for its victims keeps it
        (it was not eligible to preempt: the nomination stands), and so does every pod while
        preemption is off (kube-scheduler then runs no PostFilter)."""
        postfilter = registry.POSTFILTER
        return (bool(pod.status.nominated_node_name) and self.config.preemption.enabled and postfilter is not None
                and postfilter.REASON_TERMINATING not in message)

    def _report_rejected_gangs(self, snapshot: ClusterSnapshot, plan: Plan, rejected: dict[str, str]) -> None:
        """A gang the window tried and rejected says so on its PodGroup too. Not one that placed
        members (those left out beyond its minimum do not unschedule it), and not one with fewer
        pods in existence than its minimum: kube-scheduler does not try such a gang (its pods wait
        before the queue), so it has no verdict to report yet."""
        pods = snapshot.pod_by_key
        placed = {pod_group_key(pods[a.pod]) for a in plan.assignments if a.pod in pods}
        existing = Counter(key for p in snapshot.pods if not p.is_terminal and (key := pod_group_key(p)) in rejected)
        for gang, message in rejected.items():
            group = snapshot.pod_group_by_key.get(gang)
            if gang in placed or group is None or existing[gang] < group.spec.min_member:
                continue
            self.reporter.pod_group_scheduled(gang, scheduled=False, reason=UNSCHEDULABLE_REASON, message=message)

    def bind_or_evict(self, units: list[BindUnit]) -> None:
        self.binder.submit(units)

    def give_back(self, window: list[QueuedPod], *, error: bool, message: Optional[str] = None) -> None:
        """Return a window's pods undecided: with backoff after an error (reported on each pod
        as a FailedScheduling event when `message` says why), as new otherwise."""
        for qp in window:
            if error:
                self.metrics.attempts.labels(result="error").inc()
                if message:
                    self.reporter.failed_scheduling(qp.pod, message, reason=SCHEDULER_ERROR)
                self.queue.requeue_error(qp.key)
            else:
                self.queue.requeue_active(qp.key)

    # --- status ------------------------------------------------------------------------------

    def health(self) -> Optional[str]:
        """None when healthy, else what is wrong (for /healthz): a thread that should run has
        died, or the loop has been on one window past the stall timeout (hung: in a call that
        never returns, or a lock never released). Either way only a restart brings it back."""
        if not self._started or self._stopped:
            return None
        names = ("scheduling loop", "housekeeping loop")
        for name, thread in zip(names, self._threads):
            if not thread.is_alive():
                return f"the {name} has stopped"
        if self.elector.died:
            return "the leader election loop has stopped"
        for informer in self.informers:
            if informer.died:
                return f"the watch of {informer.resource.name} has stopped"
        since = self._busy_since
        if since is not None and self.stall_timeout > 0:
            busy = self.clock.now() - since
            if busy > self.stall_timeout:
                return (f"the scheduling loop has been on one window for {busy:.0f}s (phase {self._busy_phase}), "
                        f"past the stall timeout of {self.stall_timeout:g}s")
        return None

    def ready(self) -> tuple[bool, str]:
        if not self.cache.synced:
            return False, "cache not synced"
        return True, "ok (leader)" if self.elector.is_leader() else "ok (standby)"

    def idle(self) -> bool:
        """Nothing to do until the cluster changes: no pod active, backing off, in flight or
        being bound, and every decision confirmed by the watch."""
        counts = self.queue.counts()
        if counts[ACTIVE] or counts[BACKOFF] or counts[IN_FLIGHT] or not self.binder.idle:
            return False
        if self.options.dry_run:
            return True
        return not self.cache.assumed()

    @property
    def status_address(self) -> Optional[tuple[str, int]]:
        return self.status_server.address if self.status_server is not None else None

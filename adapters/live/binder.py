"""Acting on a decision: bind, or evict victims first and bind once their room is free.

Binds run concurrently on a bounded pool, after the window's decisions were assumed in the
cache (so the next window already counts them; kube-scheduler binds asynchronously for the
same reason). A unit of binding is one pod, or a gang's members in the window: every member
is assumed before any is bound, and they are bound together.

A bind that fails cannot be half-believed. For a clear refusal the pod is read back: bound
to our node (an earlier attempt's answer was lost, or our retry hit our own bind: 409) is
success; bound elsewhere means another scheduler won, and the cache takes the pod as it is;
unbound means the assumption is forgotten and the pod backs off. If even reading it back
fails, the assumption is kept as *uncertain* for a while (binding it elsewhere meanwhile could
double-book the node), and dropped when the watch shows the truth or the time runs out.

A bound pod cannot be unbound. So if some members of a gang bind and others fail, the gang
is left part-bound: the failures are counted (`gang_partial_binds_total`), logged, reported
on the failed members as a `FailedScheduling` event, and those members go back to the queue,
where the solver sees the bound ones as running members and places the rest on their own.

Preemption: the preemptor's `status.nominatedNodeName` is set, each victim is evicted
through the Eviction API (so the API server enforces PodDisruptionBudgets) and the unit
waits until every victim is gone from the watch before binding. An eviction refused (429)
or failing gives the room back: the assumptions are forgotten and the preemptors back off.
Victims that do not go within the preemption timeout do the same.
"""

from __future__ import annotations

import itertools
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from models import Pod

from .cache import AWAITING_VICTIMS, BINDING, BOUND, DRY_RUN, UNCERTAIN, ClusterCache
from .clock import Clock
from .errors import KubeError, NotFound, TooManyRequests
from .events import SCHEDULER_ERROR, Reporter
from .kube import KubeApi
from .queue import QueuedPod, SchedulingQueue
from .retry import call_with_retries

log = logging.getLogger(__name__)


@dataclass
class Placement:
    qp: QueuedPod
    pod: Pod  # as the window's snapshot saw it (its UID is the bind precondition)
    node: str
    nominated: bool = False  # a preemptor: its nominatedNodeName is set before evicting

    @property
    def key(self) -> str:
        return self.qp.key


@dataclass
class Victim:
    pod: Pod
    node: str
    preemptor: str

    @property
    def key(self) -> str:
        return self.pod.key


@dataclass(eq=False)
class BindUnit:
    """Pods bound together (one pod, or a gang's window members) and the victims they need gone."""

    placements: list[Placement]
    victims: list[Victim] = field(default_factory=list)
    gang: Optional[str] = None
    deadline: float = 0.0  # when waiting for the victims stops
    id: int = 0
    _left: int = 0
    _failed: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class BinderSettings:
    concurrency: int
    preemption_timeout: float
    uncertain_ttl: float
    backoffs: tuple[float, ...]
    dry_run: bool = False


class Binder:
    def __init__(self, api: KubeApi, cache: ClusterCache, queue: SchedulingQueue, reporter: Reporter, *,
                 metrics: Any, clock: Clock, settings: BinderSettings, is_leader: Callable[[], bool],
                 on_bound: Callable[[Placement], None] = lambda p: None,
                 on_evicted: Callable[[Victim], None] = lambda v: None) -> None:
        self.api = api
        self.cache = cache
        self.queue = queue
        self.reporter = reporter
        self.metrics = metrics
        self.clock = clock
        self.settings = settings
        self.is_leader = is_leader
        self.on_bound = on_bound
        self.on_evicted = on_evicted
        self._pool = ThreadPoolExecutor(max_workers=max(1, settings.concurrency), thread_name_prefix="cpsat-live-bind")
        self._lock = threading.Lock()
        self._waiting: dict[int, BindUnit] = {}
        self._ids = itertools.count(1)
        self._closed = False
        self._busy = 0  # units submitted and not finished

    # --- entry points ------------------------------------------------------------------------

    def submit(self, unit: BindUnit) -> None:
        unit.id = next(self._ids)
        with self._lock:
            self._busy += 1
            closed = self._closed
        if closed:
            self._abandon(unit, "shutting down")
        elif unit.victims and not self.settings.dry_run:
            self._pool.submit(self._guard, self._preempt, unit)
        else:
            for victim in unit.victims:
                log.info("dry run: would evict %s from %s for %s", victim.key, victim.node, victim.preemptor)
            self._bind_unit(unit)

    def victim_gone(self) -> None:
        """A pod was deleted: units whose victims are all gone may bind now."""
        with self._lock:
            if not self._waiting:
                return
            ready = [u for u in self._waiting.values() if self._victims_gone(u)]
            for unit in ready:
                del self._waiting[unit.id]
        for unit in ready:
            self._bind_unit(unit)

    def expire(self) -> None:
        """Housekeeping: give up on victims that did not go in time; end uncertain assumptions."""
        now = self.clock.now()
        with self._lock:
            late = [u for u in self._waiting.values() if now >= u.deadline]
            for unit in late:
                del self._waiting[unit.id]
        for unit in late:
            left = [v.key for v in unit.victims if self.cache.pod(v.key) is not None]
            why = f"preemption: victims {', '.join(left)} did not leave within {self.settings.preemption_timeout:.0f}s"
            log.warning("%s; giving the room of %s back", why, ", ".join(p.key for p in unit.placements))
            self._give_back(unit, requeue=self.queue.requeue_error, message=why)
        for key, assumption in self.cache.assumed().items():
            if assumption.state == UNCERTAIN and assumption.expires is not None and now >= assumption.expires:
                if self.cache.forget(key):
                    log.warning("bind of %s to %s is still unconfirmed; forgetting it and trying again",
                                key, assumption.node)
                    self.queue.requeue_error(key)

    @property
    def idle(self) -> bool:
        with self._lock:
            return self._busy == 0 and not self._waiting

    def shutdown(self) -> None:
        """Finish the binds in flight; units still waiting for victims are given back."""
        with self._lock:
            self._closed = True
            waiting = list(self._waiting.values())
            self._waiting.clear()
        for unit in waiting:
            self._abandon(unit, "shutting down")
        self._pool.shutdown(wait=True)

    # --- binding -----------------------------------------------------------------------------

    def _bind_unit(self, unit: BindUnit) -> None:
        unit._left = len(unit.placements)
        for placement in unit.placements:
            try:
                self._pool.submit(self._guard, self._bind_member, unit, placement)
            except RuntimeError:  # the pool has shut down under us: give this pod back
                self.cache.forget(placement.key)
                self.queue.requeue_active(placement.key)
                with unit._lock:
                    unit._left -= 1
                    unit._failed.append(placement.key)
                    last = unit._left == 0
                if last:
                    self._unit_done(unit)

    def _guard(self, fn: Callable[..., None], *args: Any) -> None:
        try:
            fn(*args)
        except Exception:  # noqa: BLE001 - a bug in one bind must not lose the pool
            log.exception("binder: unexpected error")

    def _bind_member(self, unit: BindUnit, placement: Placement) -> None:
        ok = False
        try:
            ok = self._bind_one(placement)
        except Exception:
            self.cache.forget(placement.key)  # never leave an assumption behind a bug
            self.queue.requeue_error(placement.key)
            raise
        finally:
            with unit._lock:
                unit._left -= 1
                if not ok:
                    unit._failed.append(placement.key)
                last = unit._left == 0
            if last:
                self._unit_done(unit)

    def _unit_done(self, unit: BindUnit) -> None:
        failed = len(unit._failed)
        if unit.gang and 0 < failed < len(unit.placements):
            bound = len(unit.placements) - failed
            self.metrics.gang_partial.inc()
            message = (f"gang {unit.gang} is partly bound: {bound} of {len(unit.placements)} members bound, binding "
                       f"failed for {', '.join(sorted(unit._failed))}; a bound pod cannot be unbound, so those "
                       "members are retried on their own")
            log.warning("%s", message)
            for placement in unit.placements:
                if placement.key in unit._failed:
                    self.reporter.failed_scheduling(placement.pod, message)
        self._finished()

    def _finished(self) -> None:
        with self._lock:
            self._busy = max(0, self._busy - 1)

    def _bind_one(self, p: Placement) -> bool:
        key = p.key
        if self.settings.dry_run:
            log.info("dry run: would bind %s to %s", key, p.node)
            self.cache.set_state(key, DRY_RUN)
            self.queue.done(key)
            self.on_bound(p)
            return True
        if not self.is_leader():
            self.cache.forget(key)
            self.queue.requeue_active(key)
            return False
        if not self.cache.has_node(p.node):
            log.info("not binding %s: node %s is gone", key, p.node)
            self.cache.forget(key)
            self.metrics.binds.labels(result="node-gone").inc()
            self.queue.requeue_error(key)
            return False
        self.cache.set_state(key, BINDING)
        ns, name = p.pod.metadata.namespace, p.pod.metadata.name
        try:
            call_with_retries(lambda: self.api.bind(ns, name, p.pod.metadata.uid, p.node), what=f"bind {key} to {p.node}",
                              backoffs=self.settings.backoffs, sleep=self.clock.sleep, should_continue=self.is_leader)
        except KubeError as exc:
            return self._after_failed_bind(p, exc)
        self._bound(p)
        return True

    def _bound(self, p: Placement) -> None:
        self.cache.set_state(p.key, BOUND)
        self.queue.done(p.key)
        self.metrics.binds.labels(result="bound").inc()
        self.metrics.attempts.labels(result="scheduled").inc()
        self.metrics.e2e_latency.observe(max(0.0, self.clock.now() - p.qp.initial))
        self.reporter.scheduled(p.pod, p.node)
        self.on_bound(p)

    def _after_failed_bind(self, p: Placement, exc: KubeError) -> bool:
        """Read the pod back to learn what the failed bind left behind."""
        key = p.key
        ns, name = p.pod.metadata.namespace, p.pod.metadata.name
        try:
            current = call_with_retries(lambda: self.api.read_pod(ns, name), what=f"read back {key}",
                                        backoffs=self.settings.backoffs, sleep=self.clock.sleep)
        except NotFound:
            log.info("bind of %s failed (%s): the pod is gone", key, exc.message)
            self.cache.forget(key)
            self.metrics.binds.labels(result="gone").inc()
            self.queue.done(key)
            return False
        except KubeError as read_exc:
            log.warning("bind of %s to %s failed (%s) and the pod cannot be read back (%s); keeping the node "
                        "reserved for %.0fs until the watch shows the outcome", key, p.node, exc.message,
                        read_exc.message, self.settings.uncertain_ttl)
            self.cache.set_state(key, UNCERTAIN, expires=self.clock.now() + self.settings.uncertain_ttl)
            self.metrics.binds.labels(result="uncertain").inc()
            return False
        spec = current.get("spec") or {}
        meta = current.get("metadata") or {}
        bound_to = spec.get("nodeName")
        if bound_to == p.node and meta.get("uid") == p.pod.metadata.uid:
            log.info("bind of %s reported %s, but the pod is bound to %s: done", key, exc.message, p.node)
            self._bound(p)
            return True
        self.cache.forget(key)
        if bound_to:
            log.info("bind of %s failed: it is bound to %s by someone else (%s)", key, bound_to, exc.message)
            self.cache.observe_pod(current)
            self.metrics.binds.labels(result="conflict").inc()
            self.queue.done(key)
        else:
            log.info("bind of %s to %s failed (%s); retrying after backoff", key, p.node, exc.message)
            self.metrics.binds.labels(result="error").inc()
            self.metrics.attempts.labels(result="error").inc()
            self.reporter.failed_scheduling(p.pod, f"Binding rejected: {exc.message}", reason=SCHEDULER_ERROR)
            self.queue.requeue_error(key)
        return False

    # --- preemption --------------------------------------------------------------------------

    def _preempt(self, unit: BindUnit) -> None:
        try:
            self._preempt_unit(unit)
        except Exception:  # noqa: BLE001 - a bug: give the room back rather than leak the assumptions
            log.exception("preemption for %s failed unexpectedly", ", ".join(p.key for p in unit.placements))
            with self._lock:
                self._waiting.pop(unit.id, None)
            self._give_back(unit, requeue=self.queue.requeue_error, untouched=unit.victims)

    def _preempt_unit(self, unit: BindUnit) -> None:
        self.metrics.preemption_attempts.inc()
        for p in unit.placements:
            if p.nominated:
                self._nominate(p)
        for victim in unit.victims:
            if not self.is_leader():
                self._give_back(unit, requeue=self.queue.requeue_active)
                return
            refusal = self._evict(victim)
            if refusal is not None:
                log.info("eviction of %s for %s refused (%s); the preemptor backs off", victim.key,
                         victim.preemptor, refusal)
                rest = unit.victims[unit.victims.index(victim):]  # this victim and those not tried
                self._give_back(unit, requeue=self.queue.requeue_error, untouched=rest,
                                message=f"preemption: eviction of {victim.key} refused: {refusal}")
                return
        for p in unit.placements:
            self.cache.set_state(p.key, AWAITING_VICTIMS)
        unit.deadline = self.clock.now() + self.settings.preemption_timeout
        with self._lock:
            closed = self._closed
            if not closed:
                self._waiting[unit.id] = unit
                ready = self._victims_gone(unit)
                if ready:
                    del self._waiting[unit.id]
        if closed:  # shutting down: nobody would bind it once the victims are gone
            self._give_back(unit, requeue=self.queue.requeue_active)
        elif ready:
            self._bind_unit(unit)

    def _nominate(self, p: Placement) -> None:
        ns, name = p.pod.metadata.namespace, p.pod.metadata.name
        try:
            call_with_retries(lambda: self.api.patch_pod_status(ns, name, {"nominatedNodeName": p.node}),
                              what=f"nominate {p.key} to {p.node}", backoffs=self.settings.backoffs,
                              sleep=self.clock.sleep)
        except KubeError as exc:  # the nomination informs other schedulers; preemption goes on without it
            log.info("could not set nominatedNodeName of %s: %s", p.key, exc.message)

    def _evict(self, victim: Victim) -> Optional[str]:
        """Evict one victim; None when it is evicted or gone, else why it was refused."""
        ns, name = victim.pod.metadata.namespace, victim.pod.metadata.name
        try:
            call_with_retries(lambda: self.api.evict(ns, name, victim.pod.metadata.uid), what=f"evict {victim.key}",
                              backoffs=self.settings.backoffs, sleep=self.clock.sleep, should_continue=self.is_leader)
        except NotFound:
            self.metrics.evictions.labels(result="gone").inc()
            return None
        except TooManyRequests as exc:
            self.metrics.evictions.labels(result="refused").inc()
            return exc.message
        except KubeError as exc:
            self.metrics.evictions.labels(result="error").inc()
            return exc.message
        self.metrics.evictions.labels(result="evicted").inc()
        self.metrics.preemption_victims.inc()
        log.info("evicted %s from %s for %s", victim.key, victim.node, victim.preemptor)
        self.reporter.preempted(victim.pod, victim.preemptor, victim.node)
        self.on_evicted(victim)
        return None

    def _victims_gone(self, unit: BindUnit) -> bool:
        return all(self.cache.pod(v.key) is None for v in unit.victims)

    def _give_back(self, unit: BindUnit, *, requeue: Callable[[str], None], untouched: list[Victim] = (),
                   message: Optional[str] = None) -> None:
        for victim in untouched:
            self.cache.unmark_evicting(victim.key)
        for p in unit.placements:
            self.cache.forget(p.key)
            if message:
                self.reporter.failed_scheduling(p.pod, message, reason=SCHEDULER_ERROR)
            requeue(p.key)
        self.metrics.attempts.labels(result="error").inc(len(unit.placements))
        self._finished()

    def _abandon(self, unit: BindUnit, why: str) -> None:
        log.info("not binding %s: %s", ", ".join(p.key for p in unit.placements), why)
        self._give_back(unit, requeue=self.queue.requeue_active, untouched=unit.victims)

"""Acting on a decision: bind, or evict victims first and bind once their room is free.

Binds run concurrently on a bounded pool, after the window's decisions were assumed in the
cache (so the next window already counts them; kube-scheduler binds asynchronously for the
same reason). A unit of binding is one pod, or a gang's members in the window: every member
is assumed before any is bound, and they are bound together.

A bind that fails cannot be half-believed. For a clear refusal the pod is read back: bound
to our node (an earlier attempt's answer was lost, or our retry hit our own bind: 409) is
success; bound elsewhere means another scheduler won, and the cache takes the pod as it is;
unbound means the assumption is forgotten and the pod backs off — unless an attempt went
unanswered (timed out or cut after it was sent): that request may still land, so "unbound"
is not yet the truth. Then, as when the pod cannot even be read back, the assumption is kept
as *uncertain* (giving its room to another pod meanwhile could overcommit the node), and the
attempt ends when the watch shows the pod bound or deleted, or when the time to live runs
out: the pod is then read back once more (the watch may only lag), and the cache takes it
bound, or forgets it and tries again.

A bound pod cannot be unbound. So if some members of a gang bind and others fail, the gang
is left part-bound: the failures are counted (`gang_partial_binds_total`), logged, reported
on the failed members as a `FailedScheduling` event, and those members go back to the queue,
where the solver sees the bound ones as running members and places the rest on their own.

Preemption: the preemptor's `status.nominatedNodeName` is set and each of its victims is
evicted through the Eviction API (so the API server enforces PodDisruptionBudgets). Units
wait until every victim they count on (`units.py`: the preemptor's own, and any on the nodes
they land on) is gone from the watch before binding. An eviction refused (429) or failing
gives the room back: every unit counting on that victim forgets its assumptions and backs
off. Units whose victims do not go within the preemption timeout do the same.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections import defaultdict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from models import Pod, pod_group_key
from solver.plugin_api import BindWrite
from models.objects import DISRUPTION_TARGET, PREEMPTION_BY_SCHEDULER

from .cache import AWAITING_VICTIMS, BINDING, BOUND, DRY_RUN, UNCERTAIN, ClusterCache
from .clock import Clock
from .errors import ConnectionFailure, KubeError, NotFound, TooManyRequests
from .events import SCHEDULER_ERROR, Reporter
from .prebind import Calls, Writers
from .api_client import KubeApi, now_micro
from .queue import QueuedPod, SchedulingQueue
from .retry import call_with_retries

log = logging.getLogger(__name__)
# One line per successful bind, on its own logger: at full speed that is hundreds a second, so
# `run` shows them only when asked (`-v`), as kube-scheduler logs its binds at -v=2.
bind_log = logging.getLogger(__name__ + ".binds")

# When an unconfirmed bind's pod cannot be read back at the end of its time to live, how long
# until it is asked for again (seconds).
UNCERTAIN_RECHECK_SECONDS = 1.0


@dataclass
class Placement:
    qp: QueuedPod
    pod: Pod  # as the window's snapshot saw it (its UID is the bind precondition)
    node: str
    nominated: bool = False  # a preemptor: its nominatedNodeName is set before evicting
    # The rules' PreBind (``Plugin.prebind``), in the rules' order: (plugin name, what it writes
    # before the bind), each written by the writer of its kind (`prebind.py`)
    writes: tuple[tuple[str, BindWrite], ...] = ()

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
    """Pods bound together (one pod, or a gang's window members), the victims they evict and
    the victims (theirs or other preemptors') that must be gone first (see `units.py`)."""

    placements: list[Placement]
    victims: list[Victim] = field(default_factory=list)  # what this unit evicts (its preemptors' victims)
    gang: Optional[str] = None
    waits_for: set[str] = field(default_factory=set)  # victims (keys) that must be gone before binding
    deadline: float = 0.0  # when waiting for the victims stops
    remaining: set[str] = field(default_factory=set)  # of `waits_for`, those not seen gone yet
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
        # Lock order: the cache's lock, then this one (deletions arrive from the watch under the
        # cache's lock). So nothing may read the cache while holding this lock.
        self._lock = threading.Lock()
        self._waiting: dict[int, BindUnit] = {}  # units waiting for victims, by id
        self._waiters: dict[str, set[int]] = defaultdict(set)  # victim key -> ids of units waiting for it
        self._ids = itertools.count(1)
        self._closed = False
        self._busy = 0  # units submitted and not finished
        self._uncertain: dict[str, float] = {}  # pods whose bind outcome is unknown -> when to give up
        self._settling: set[str] = set()  # of those, the ones being read back now (`_settle_uncertain`)
        # The writers of the rules' PreBind records, one per kind (`prebind.py`).
        self.writers = Writers(Calls(api, settings.backoffs, lambda s: self.clock.sleep(s), lambda: self.is_leader()))

    # --- entry points ------------------------------------------------------------------------

    def submit(self, units: list[BindUnit]) -> None:
        """Act on a window's units. Every unit that waits for victims is registered before any
        eviction starts, so a refused eviction finds every unit that counted on it."""
        now = self.clock.now()
        waiting = [u for u in units if u.waits_for and not self.settings.dry_run]
        waits = {id(u) for u in waiting}
        for unit in waiting:  # before registering: from then on, a deletion may bind the unit at once
            for p in unit.placements:
                self.cache.set_state(p.key, AWAITING_VICTIMS)
        with self._lock:
            closed = self._closed
            for unit in units:
                unit.id = next(self._ids)
                self._busy += 1
            if not closed:
                for unit in waiting:
                    unit.deadline = now + self.settings.preemption_timeout
                    self._register(unit)
        for unit in units:
            if closed:
                self._abandon(unit, "shutting down")
            elif id(unit) not in waits:
                for victim in unit.victims:
                    log.info("dry run: would evict %s from %s for %s", victim.key, victim.node, victim.preemptor)
                self._bind_unit(unit)
            elif unit.victims:
                self._pool.submit(self._guard, self._preempt, unit)
        if waiting and not closed:
            # victims gone before their units were registered (deleted meanwhile): no event will come
            self._gone({k for u in waiting for k in u.waits_for if self.cache.pod(k) is None})

    def victim_gone(self, key: str) -> None:
        """A pod was deleted (told by the watch, under the cache's lock): units that waited for it
        and for nothing else still there may bind now."""
        self._gone({key})

    def _gone(self, keys: set[str]) -> None:
        ready = []
        with self._lock:
            for key in keys:
                for unit_id in list(self._waiters.get(key, ())):
                    unit = self._waiting[unit_id]
                    unit.remaining.discard(key)
                    if not unit.remaining:
                        self._unregister(unit)
                        ready.append(unit)
        for unit in ready:
            self._bind_unit(unit)

    def _register(self, unit: BindUnit) -> None:
        """Under the lock: the unit waits for its victims."""
        unit.remaining = set(unit.waits_for)
        self._waiting[unit.id] = unit
        for key in unit.waits_for:
            self._waiters[key].add(unit.id)

    def _unregister(self, unit: BindUnit) -> bool:
        """Under the lock: the unit waits no more (False if it had stopped already)."""
        if self._waiting.pop(unit.id, None) is None:
            return False
        for key in unit.waits_for:
            ids = self._waiters.get(key)
            if ids is not None:
                ids.discard(unit.id)
                if not ids:
                    del self._waiters[key]
        return True

    def expire(self) -> None:
        """Housekeeping: give up on victims that did not go in time; end uncertain assumptions."""
        now = self.clock.now()
        with self._lock:
            late = [u for u in self._waiting.values() if now >= u.deadline]
            for unit in late:
                self._unregister(unit)
        for unit in late:
            left = sorted(unit.remaining)
            why = f"preemption: victims {', '.join(left)} did not leave within {self.settings.preemption_timeout:g}s"
            log.warning("%s; giving the room of %s back", why, ", ".join(p.key for p in unit.placements))
            self._give_back(unit, requeue=self.queue.requeue_error, message=why)
        with self._lock:
            uncertain = [(k, e) for k, e in self._uncertain.items() if k not in self._settling]
        for key, expires in uncertain:
            assumption = self.cache.assumption(key)
            if assumption is None or assumption.state != UNCERTAIN:
                # The watch showed it bound or gone: the attempt is over, and the queue drops the pod.
                # Not `done`: a pod created again under the name since then must still be tried.
                self.queue.requeue_error(key)
            elif now >= expires:
                with self._lock:
                    self._settling.add(key)
                try:
                    self._pool.submit(self._guard, self._settle_uncertain, key, assumption.node,
                                      assumption.pod.metadata.uid)
                except RuntimeError:  # shutting down: the assumption goes with the cache
                    with self._lock:
                        self._settling.discard(key)
                continue
            else:
                continue
            with self._lock:
                self._uncertain.pop(key, None)

    def _settle_uncertain(self, key: str, node: str, uid: Optional[str]) -> None:
        """An unconfirmed bind's time to live ran out: ask the server rather than guess. Forgetting
        a bind that did land while our watch lags would give its room away a second time. Bound:
        the cache takes the pod as the server has it; not bound (or gone): the assumption is
        forgotten and the pod tried again; unreadable: asked again a little later."""
        try:
            try:
                current: Optional[dict[str, Any]] = self._read_back(key)
            except NotFound:
                current = None
            except KubeError as exc:
                log.warning("bind of %s to %s is still unconfirmed and the pod cannot be read (%s); asking again "
                            "in %.0fs", key, node, exc.message, UNCERTAIN_RECHECK_SECONDS)
                with self._lock:
                    if key in self._uncertain:
                        self._uncertain[key] = self.clock.now() + UNCERTAIN_RECHECK_SECONDS
                return
            spec, meta = (current or {}).get("spec") or {}, (current or {}).get("metadata") or {}
            if current is not None and spec.get("nodeName") and meta.get("uid") == uid:
                log.info("bind of %s was unconfirmed; the server has it bound to %s", key, spec["nodeName"])
                self.cache.observe_pod(current)  # ends the assumption, keeps the room
            elif self.cache.forget(key):
                log.warning("bind of %s to %s did not land; forgetting it and trying again", key, node)
                self.writers.unreserve(key)
            self.queue.requeue_error(key)  # the queue drops a pod bound or deleted meanwhile
            with self._lock:
                self._uncertain.pop(key, None)
        finally:
            with self._lock:
                self._settling.discard(key)

    def leadership_lost(self) -> None:
        """Units waiting for victims give their room back: whoever leads next (perhaps another
        scheduler, perhaps us after it) decides again on the cluster as it is then, and a unit
        bound later under a new term could collide with what was decided in between."""
        for unit in self._take_waiting():
            self._abandon(unit, "the lease was lost while waiting for victims")

    @property
    def binding(self) -> bool:
        """Units being bound or evicted for right now (not those waiting for victims to go)."""
        with self._lock:
            return self._busy > 0

    @property
    def idle(self) -> bool:
        with self._lock:
            return self._busy == 0 and not self._waiting and not self._uncertain

    def shutdown(self) -> None:
        """Finish the binds in flight; units still waiting for victims are given back."""
        with self._lock:
            self._closed = True
        for unit in self._take_waiting():
            self._abandon(unit, "shutting down")
        self._pool.shutdown(wait=True)

    def _take_waiting(self) -> list[BindUnit]:
        """Every unit waiting for victims, which waits no more."""
        with self._lock:
            waiting = list(self._waiting.values())
            self._waiting.clear()
            self._waiters.clear()
        return waiting

    # --- binding -----------------------------------------------------------------------------

    def _bind_unit(self, unit: BindUnit) -> None:
        if unit.gang:
            # A member deleted since it was assumed (while the gang waited for its victims, say):
            # binding the others would split the gang, and nothing is bound yet, so give it all back.
            left = [p.key for p in unit.placements if not self.cache.is_assumed(p.key)]
            if left:
                why = (f"gang {unit.gang}: {', '.join(sorted(left))} left before the gang was bound; "
                       "the others are not bound without them")
                log.info("%s", why)
                self._give_back(unit, requeue=self.queue.requeue_error, message=why)
                return
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
        elif unit.gang and not failed and not self.settings.dry_run and self.is_leader():
            self.reporter.pod_group_scheduled(unit.gang, scheduled=True)
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
        unanswered: list[ConnectionFailure] = []  # attempts that may still land at the server

        def bind() -> None:
            try:
                self.api.bind(ns, name, p.pod.metadata.uid, p.node)
            except ConnectionFailure as exc:
                if exc.maybe_delivered:
                    unanswered.append(exc)
                raise

        if p.writes and not self._prebind(p):
            return False
        sent = self.clock.now()
        try:
            call_with_retries(bind, what=f"bind {key} to {p.node}", backoffs=self.settings.backoffs,
                              sleep=self.clock.sleep, should_continue=self.is_leader)
        except KubeError as exc:
            ok = self._after_failed_bind(p, exc, unanswered=bool(unanswered))
            if p.writes and not ok and not self.cache.is_assumed(key):  # not bound, nor maybe bound
                self.writers.unreserve(key)
            return ok
        self._bound(p, sent)
        return True

    def _prebind(self, p: Placement) -> bool:
        """The rules' PreBind, before the pod is bound: each record written by the writer of its
        kind, in the rules' order. A write that fails undoes what the others wrote and sends the
        pod back to the queue unbound, as kube-scheduler's Unreserve does."""
        failed = self.writers.write(p.key, p.pod, p.node, p.writes)
        if failed is not None:
            self._prebind_failed(p, *failed)
            return False
        return True

    def _prebind_failed(self, p: Placement, plugin: str, why: str) -> None:
        """A PreBind write failed: the pod goes back to the queue unbound, with the event
        kube-scheduler reports for it."""
        self.cache.forget(p.key)
        self.metrics.binds.labels(result="prebind-failed").inc()
        self.reporter.failed_scheduling(p.pod, f"running PreBind plugin \"{plugin}\": {why}", reason=SCHEDULER_ERROR)
        self.queue.requeue_error(p.key)

    def _bound(self, p: Placement, sent: Optional[float] = None) -> None:
        bind_log.info("bound %s to %s", p.key, p.node)
        self.writers.settled(p.key)
        self.cache.set_state(p.key, BOUND)
        self.queue.done(p.key)
        self.metrics.binds.labels(result="bound").inc()
        self.metrics.attempts.labels(result="scheduled").inc()
        now = self.clock.now()
        self.metrics.e2e_latency.observe(max(0.0, now - p.qp.initial))
        if log.isEnabledFor(logging.DEBUG):  # where a pod's latency went: queued, decided, bound
            log.debug("latency of %s: %.1f ms in the queue, %.1f ms from window to bound (the bind call %.1f ms); "
                      "queued at %.4f, bound at %.4f (monotonic)",
                      p.key, 1000 * (p.qp.taken - p.qp.initial), 1000 * (now - p.qp.taken),
                      1000 * (now - sent) if sent is not None else float("nan"), p.qp.initial, now)
        self.reporter.scheduled(p.pod, p.node)
        self.on_bound(p)

    def _after_failed_bind(self, p: Placement, exc: KubeError, *, unanswered: bool) -> bool:
        """Read the pod back to learn what the failed bind left behind. `unanswered`: an attempt
        got no answer, so a pod read back unbound may still be bound by it a moment later."""
        key = p.key
        try:
            current = self._read_back(key)
        except NotFound:
            log.info("bind of %s failed (%s): the pod is gone", key, exc.message)
            self.cache.forget(key)
            self.metrics.binds.labels(result="gone").inc()
            self.queue.done(key)
            return False
        except KubeError as read_exc:
            self._keep_uncertain(p, f"bind of {key} to {p.node} failed ({exc.message}) and the pod cannot be read "
                                    f"back ({read_exc.message})")
            return False
        spec = current.get("spec") or {}
        meta = current.get("metadata") or {}
        bound_to = spec.get("nodeName")
        if bound_to == p.node and meta.get("uid") == p.pod.metadata.uid:
            log.info("bind of %s reported %s, but the pod is bound to %s: done", key, exc.message, p.node)
            self._bound(p)
            return True
        if not bound_to and unanswered and meta.get("uid") == p.pod.metadata.uid:
            # Forgetting now would hand the room to another pod while the lost request can still land.
            self._keep_uncertain(p, f"bind of {key} to {p.node} failed ({exc.message}); the pod reads back unbound, "
                                    "but an earlier attempt went unanswered and may still land")
            return False
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

    def _read_back(self, key: str) -> dict[str, Any]:
        """The pod as the server has it now (bounded retries; NotFound when it is gone)."""
        ns, name = key.split("/", 1)
        return call_with_retries(lambda: self.api.read_pod(ns, name), what=f"read back {key}",
                                 backoffs=self.settings.backoffs, sleep=self.clock.sleep)

    def _keep_uncertain(self, p: Placement, why: str) -> None:
        """The bind's outcome is unknown: keep the node reserved until the watch shows the pod
        bound or deleted (`expire` then ends the attempt), or the time to live runs out."""
        log.warning("%s; keeping %s reserved for %.0fs until the watch shows the outcome", why, p.node,
                    self.settings.uncertain_ttl)
        expires = self.clock.now() + self.settings.uncertain_ttl
        if self.cache.set_state(p.key, UNCERTAIN, expires=expires):
            with self._lock:
                self._uncertain[p.key] = expires  # settled by `expire`, from the watch or the clock
        else:  # the watch has already shown what happened (see `expire`)
            self.queue.requeue_error(p.key)
        self.metrics.binds.labels(result="uncertain").inc()

    # --- preemption --------------------------------------------------------------------------

    def _preempt(self, unit: BindUnit) -> None:
        try:
            self._preempt_unit(unit)
        except Exception:  # noqa: BLE001 - a bug: give the room back rather than leak the assumptions
            log.exception("preemption for %s failed unexpectedly", ", ".join(p.key for p in unit.placements))
            self._cancel({v.key for v in unit.victims}, unit.victims, "preemption failed (see the scheduler's log)")

    def _preempt_unit(self, unit: BindUnit) -> None:
        """Nominate, then evict each victim; the unit binds once everything it waits for is gone."""
        self.metrics.preemption_attempts.inc()
        if not self.is_leader():  # lost since the unit was assumed: not even the nomination is written
            self._cancel({v.key for v in unit.victims}, unit.victims, None, requeue=self.queue.requeue_active)
            return
        for p in unit.placements:
            if p.nominated:
                self._nominate(p)
                self._clear_lower_nominations(p)
        for i, victim in enumerate(unit.victims):
            with self._lock:
                given_up = unit.id not in self._waiting  # timed out, cancelled or shut down meanwhile
            if given_up:  # the victims not asked to go yet keep running, and may be chosen again
                for untouched in unit.victims[i:]:
                    self.cache.unmark_evicting(untouched.key)
                return
            if not self.is_leader():
                self._cancel({v.key for v in unit.victims[i:]}, unit.victims[i:], None, requeue=self.queue.requeue_active)
                return
            refusal = self._evict(victim)
            if refusal is not None:
                log.info("eviction of %s for %s refused (%s); the pods counting on it back off", victim.key,
                         victim.preemptor, refusal)
                rest = unit.victims[i:]  # this victim and those not tried: they stay
                self._cancel({v.key for v in rest}, rest, f"preemption: eviction of {victim.key} refused: {refusal}")
                return

    def _cancel(self, victims: set[str], untouched: list[Victim], message: Optional[str], *,
                requeue: Optional[Callable[[str], None]] = None) -> None:
        """Victims that will not go (now): every unit waiting for any of them gives its room back."""
        with self._lock:
            units = [self._waiting[i] for i in sorted({i for k in victims for i in self._waiters.get(k, ())})]
            for unit in units:
                self._unregister(unit)
        for victim in untouched:
            self.cache.unmark_evicting(victim.key)
        for unit in units:
            self._give_back(unit, requeue=requeue or self.queue.requeue_error, message=message)

    def _nominate(self, p: Placement) -> None:
        ns, name = p.pod.metadata.namespace, p.pod.metadata.name
        try:
            call_with_retries(lambda: self.api.patch_pod_status(ns, name, {"nominatedNodeName": p.node}),
                              what=f"nominate {p.key} to {p.node}", backoffs=self.settings.backoffs,
                              sleep=self.clock.sleep, should_continue=self.is_leader)
        except KubeError as exc:  # the nomination informs other schedulers; preemption goes on without it
            log.info("could not set nominatedNodeName of %s: %s", p.key, exc.message)

    def _clear_lower_nominations(self, p: Placement) -> None:
        """Pods of ours nominated to the node a preemptor now takes, of lower priority, lose the
        nomination, as kube-scheduler clears them: the room they waited for is this pod's now."""
        for other in self.cache.nominated_below(p.node, p.pod.spec.priority or 0, p.pod.spec.scheduler_name):
            if other.key == p.key:
                continue
            ns, name = other.metadata.namespace, other.metadata.name
            try:
                call_with_retries(lambda: self.api.patch_pod_status(ns, name, {"nominatedNodeName": None}),
                                  what=f"clear the nomination of {other.key}", backoffs=self.settings.backoffs,
                                  sleep=self.clock.sleep, should_continue=self.is_leader)
            except NotFound:
                pass
            except KubeError as exc:
                log.info("could not clear the nomination of %s: %s", other.key, exc.message)

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
        self._mark_preempted(victim)
        self.reporter.preempted(victim.pod, victim.preemptor, victim.node)
        gang = pod_group_key(victim.pod)
        if gang:
            self.reporter.pod_group_disrupted(gang, victim.key, victim.preemptor, victim.node)
        self.on_evicted(victim)
        return None

    def _mark_preempted(self, victim: Victim) -> None:
        """Say on the terminating victim that the scheduler's preemption removes it, as
        kube-scheduler does: ``DisruptionTarget=True``, reason ``PreemptionByScheduler``. The
        Eviction API has just set that condition with reason ``EvictionByEvictionAPI``; set after
        it, this reason stays. Whoever schedules next — this scheduler after a restart or a
        hand-over, or kube-scheduler — reads it to let the preemptor wait for its victims instead
        of preempting again (PodEligibleToPreemptOthers). A pod gone already needs nothing."""
        ns, name = victim.pod.metadata.namespace, victim.pod.metadata.name
        condition = {"type": DISRUPTION_TARGET, "status": "True", "reason": PREEMPTION_BY_SCHEDULER,
                     "message": f"preempting to accommodate a higher priority pod ({victim.preemptor})",
                     "lastTransitionTime": now_micro()[:19] + "Z"}
        try:
            call_with_retries(lambda: self.api.patch_pod_status(ns, name, {"conditions": [condition]}),
                              what=f"mark {victim.key} preempted", backoffs=self.settings.backoffs,
                              sleep=self.clock.sleep, should_continue=self.is_leader)
        except NotFound:
            pass
        except KubeError as exc:  # informative: the eviction itself went through
            log.info("could not mark %s as preempted: %s", victim.key, exc.message)

    def _give_back(self, unit: BindUnit, *, requeue: Callable[[str], None], untouched: Sequence[Victim] = (),
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

"""The scheduling queue, kept as kube-scheduler keeps it (SEMANTICS.md §7).

Three pools. *Active*: pods ready to be tried, highest priority first, then the longest
waiting (the queue timestamp, reset whenever a pod comes back after a failure). *Backoff*:
pods that failed recently and wait 1 s, 2 s, 4 s, ... up to 10 s (doubling with each
failure) before they may be tried again, so one pod that cannot bind does not spin the loop.
*Unschedulable*: pods for which no node fits; trying them again is pointless until the
cluster changes, so they wait for a relevant event (a node added or changed, a bound pod
deleted, ...) or, as a safety net, five minutes. Pods with scheduling gates are held apart
until their gates are removed.

A window is taken from the active pool: up to `max_size` pods, or whatever arrives within
the window wait after the first one. The wait is adaptive: it is only worth paying when a
waiting pod needs a joint decision with pods that may still arrive (`needs_joint_decision`: a
gang member, required inter-pod (anti-)affinity, a hard topology spread). Pods that need none
are taken at once, as kube-scheduler takes one pod at a time; under a backlog the window is
still large, because pods pile up while the previous window is decided. A gang is never split across windows: when one member
is taken, its queued siblings come along, wherever they wait.

Pods taken into a window are *in flight* until the scheduler reports the outcome: done
(bound, or gone), an error (back off), or unschedulable. If a relevant event arrived while a
pod was in flight, an unschedulable verdict may already be stale, so the pod goes to backoff
instead, as kube-scheduler does. Time comes from an injected clock.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections import defaultdict, deque
from dataclasses import dataclass
from typing import Callable, Optional

from models import Pod, pod_group_key
from solver.coupling import reaches_other_nodes

from .clock import Clock

ACTIVE, BACKOFF, UNSCHEDULABLE, IN_FLIGHT, GATED = "active", "backoff", "unschedulable", "in-flight", "gated"
POOLS = (ACTIVE, BACKOFF, UNSCHEDULABLE, GATED)

# kube-scheduler's defaults (podInitialBackoffSeconds, podMaxBackoffSeconds).
INITIAL_BACKOFF_SECONDS = 1.0
MAX_BACKOFF_SECONDS = 10.0
# DefaultPodMaxInUnschedulablePodsDuration: an unschedulable pod is retried after this long
# even if no event suggested it might fit now (events can be missed, hints can be wrong).
MAX_UNSCHEDULABLE_SECONDS = 300.0
# How long an idle `pop_window` sleeps at most before looking at the pools again.
IDLE_POLL_SECONDS = 1.0


@dataclass(eq=False)
class QueuedPod:
    key: str
    pod: Pod
    timestamp: float  # queue time: ordering among equal priorities, start of backoff
    initial: float  # when the pod first entered the queue (end-to-end latency starts here)
    attempts: int = 0  # times taken into a window
    taken: float = 0.0  # when it was last taken into a window (for the latency breakdown in debug logs)
    failures: int = 0  # failed attempts (unschedulable or error), for the backoff length
    message: str = ""  # why it was last found unschedulable
    # a relevant change (of the pod, or an event that may help it) came while it was in flight
    changed_in_flight: bool = False
    deleted_in_flight: bool = False
    seq: int = 0

    @property
    def priority(self) -> int:
        return self.pod.spec.priority or 0

    @property
    def gang(self) -> Optional[str]:
        return pod_group_key(self.pod)


# ``needs_joint_decision``'s answers per Pod object (the queue asks about the same pods again at
# every wait): bounded, and locked, as the queue's threads ask at once.
_JOINT_KEPT = 8192
_joint: dict[int, tuple[Pod, bool]] = {}
_joint_lock = threading.Lock()


def needs_joint_decision(pod: Pod) -> bool:
    """Whether deciding `pod` together with pods that arrive soon can give a better (or the
    only) plan: a gang member (placed all together or not at all), or a pod whose required
    inter-pod affinity or anti-affinity, or hard topology spread, reads where its peers go — as
    the rules declare it (``solver.coupling``). Any other pod is decided as well on its own, the
    moment it is ready."""
    with _joint_lock:
        hit = _joint.get(id(pod))
    if hit is not None and hit[0] is pod:
        return hit[1]
    answer = reaches_other_nodes(pod)
    with _joint_lock:
        if len(_joint) >= _JOINT_KEPT:
            _joint.clear()
        _joint[id(pod)] = (pod, answer)
    return answer


def _gated(pod: Pod) -> bool:
    return bool(pod.spec.scheduling_gates)


@dataclass
class QueueSettings:
    initial_backoff: float = INITIAL_BACKOFF_SECONDS
    max_backoff: float = MAX_BACKOFF_SECONDS
    max_unschedulable: float = MAX_UNSCHEDULABLE_SECONDS


class SchedulingQueue:
    def __init__(self, *, clock: Clock, settings: QueueSettings = QueueSettings()) -> None:
        self.clock = clock
        self.settings = settings
        self._cond = threading.Condition()
        self._pods: dict[str, QueuedPod] = {}
        self._where: dict[str, str] = {}
        # the keys in each pool (and in flight), so that events and flushes touch only the
        # pools they concern, not a backlog of thousands of active pods
        self._pools: dict[str, set[str]] = {pool: set() for pool in (*POOLS, IN_FLIGHT)}
        self._active: list[tuple[int, float, int, str]] = []
        self._gangs: dict[str, set[str]] = defaultdict(set)
        # The gangs of a gang's group tree (Kubernetes 1.37's CompositePodGroups), itself included;
        # none outside a tree. Set by the scheduler to read the cache's index, which it may
        # read without the cache's lock (the cache tells the queue of changes under that lock).
        self.tree_of: Callable[[str], frozenset[str]] = lambda gang: frozenset()
        self._seq = itertools.count()
        self._closed = False
        self._arrivals: deque[float] = deque(maxlen=2)  # when the last two new pods came

    # --- pods arriving, changing, leaving --------------------------------------------------------

    def add(self, pod: Pod) -> None:
        """A pending pod of ours appeared (or is pending again)."""
        with self._cond:
            if pod.key in self._pods:
                # Deleted while in flight and created again under the same name (a StatefulSet's
                # pod): the new pod waits too, so the old attempt's failure must not drop it.
                self._pods[pod.key].deleted_in_flight = False
                self._update_locked(pod, relevant=True)
                return
            now = self.clock.now()
            qp = QueuedPod(pod.key, pod, now, now)
            self._pods[pod.key] = qp
            self._arrivals.append(now)
            gang = qp.gang
            if gang:
                self._gangs[gang].add(pod.key)
            if _gated(pod):
                self._set(pod.key, GATED)
            else:
                self._push_active(qp)
                self._cond.notify_all()

    def update(self, pod: Pod, *, relevant: bool) -> None:
        """A queued pod changed; `relevant` when the change can alter its placement."""
        with self._cond:
            self._update_locked(pod, relevant=relevant)

    def _update_locked(self, pod: Pod, *, relevant: bool) -> None:
        qp = self._pods.get(pod.key)
        if qp is None:
            return
        qp.pod = pod
        where = self._where[pod.key]
        if where == IN_FLIGHT:
            qp.changed_in_flight = qp.changed_in_flight or relevant
        elif where == GATED:
            if not _gated(pod):
                qp.timestamp = self.clock.now()
                self._push_active(qp)
                self._cond.notify_all()
        elif where == UNSCHEDULABLE and relevant:
            self._move_locked(qp, self.clock.now())
            self._cond.notify_all()

    def delete(self, key: str) -> None:
        """The pod is bound, terminating or deleted: it leaves the queue."""
        with self._cond:
            qp = self._pods.get(key)
            if qp is None:
                return
            if self._where[key] == IN_FLIGHT:
                qp.deleted_in_flight = True
                return
            self._drop(key)

    def _set(self, key: str, pool: str) -> None:
        old = self._where.get(key)
        if old is not None:
            self._pools[old].discard(key)
        self._where[key] = pool
        self._pools[pool].add(key)

    def _drop(self, key: str) -> None:
        qp = self._pods.pop(key)
        old = self._where.pop(key, None)
        if old is not None:
            self._pools[old].discard(key)
        gang = qp.gang
        if gang:
            self._gangs[gang].discard(key)
            if not self._gangs[gang]:
                del self._gangs[gang]

    # --- windows ---------------------------------------------------------------------------------

    def pop_window(self, max_size: int, wait: float, stop: Optional[threading.Event] = None, *,
                   adaptive: bool = False, batch_wait: float = 0.0) -> list[QueuedPod]:
        """Block until a pod is active; then take up to `max_size` pods, waiting at most `wait`
        seconds for the window to fill. `adaptive`: wait only while some active pod needs a joint
        decision (`needs_joint_decision`), or, when pods are streaming in (`streaming`), at most
        `batch_wait` seconds (never past `wait`). Returns [] when the queue is closed or `stop` is set."""
        def stopped() -> bool:
            return self._closed or (stop is not None and stop.is_set())

        with self._cond:
            while True:
                if stopped():
                    return []
                now = self.clock.now()
                self.flush_locked(now)
                if self._active:
                    break
                self._cond.wait(self._idle_timeout(now))
            start = self.clock.now()
            deadline = start + wait
            batch_deadline = start + min(batch_wait, wait) if self.streaming(start, batch_wait) else start
            while len(self._active) < max_size and not stopped():
                limit = deadline if not adaptive or self._active_couples_locked() else batch_deadline
                left = limit - self.clock.now()
                if left <= 0:
                    break
                self._cond.wait(left)
                self.flush_locked(self.clock.now())
            if stopped():
                return []
            return self._take_locked(max_size)

    def streaming(self, now: float, gap: float) -> bool:
        """Pods are arriving one after another, each within `gap` seconds of the one before, and
        the last just now: more will come within `gap`. A lone pod, or the first after a lull,
        is not streaming."""
        arrivals = self._arrivals
        return gap > 0 and len(arrivals) == 2 and arrivals[1] - arrivals[0] <= gap and now - arrivals[1] <= gap

    def _active_couples_locked(self) -> bool:
        return any(needs_joint_decision(self._pods[key].pod) for key in self._pools[ACTIVE])

    def _take_locked(self, max_size: int) -> list[QueuedPod]:
        window: list[QueuedPod] = []
        taken: set[str] = set()
        while self._active and len(window) < max_size:
            _, _, seq, key = heapq.heappop(self._active)
            qp = self._pods.get(key)
            if qp is None or self._where.get(key) != ACTIVE or qp.seq != seq:
                continue  # a stale heap entry
            self._start(qp, window, taken)
        # A gang travels whole, and so does a tree of gangs (placed all together or not at all):
        # bring every queued sibling along.
        brought: set[str] = set()
        for qp in list(window):
            gang = qp.gang
            if not gang or gang in brought:
                continue
            gangs = sorted(self.tree_of(gang) | {gang})
            brought.update(gangs)
            for sibling in (s for g in gangs for s in sorted(self._gangs.get(g, ()))):
                if sibling not in taken and self._where.get(sibling) in (ACTIVE, BACKOFF, UNSCHEDULABLE):
                    self._start(self._pods[sibling], window, taken)
        return window

    def _start(self, qp: QueuedPod, window: list[QueuedPod], taken: set[str]) -> None:
        self._set(qp.key, IN_FLIGHT)
        qp.attempts += 1
        qp.taken = self.clock.now()
        qp.changed_in_flight = False
        window.append(qp)
        taken.add(qp.key)

    def _idle_timeout(self, now: float) -> float:
        timeout = IDLE_POLL_SECONDS
        for key in self._pools[BACKOFF]:
            timeout = min(timeout, max(0.0, self.backoff_expiry(self._pods[key]) - now))
        return max(timeout, 0.001)

    # --- outcomes of an attempt ------------------------------------------------------------------

    def done(self, key: str) -> None:
        """The pod's attempt succeeded (bound) or it no longer needs one."""
        with self._cond:
            if self._where.get(key) == IN_FLIGHT:
                self._drop(key)

    def requeue_error(self, key: str) -> None:
        """The attempt failed for a reason other than fit (bind error, conflict): back off."""
        with self._cond:
            qp = self._finish(key)
            if qp is None:
                return
            self._set(key, BACKOFF)
            self._cond.notify_all()

    def requeue_unschedulable(self, key: str, message: str) -> None:
        """No node fits: wait for a relevant cluster event (or the leftover flush)."""
        with self._cond:
            qp = self._finish(key)
            if qp is None:
                return
            qp.message = message
            if qp.changed_in_flight:
                self._move_locked(qp, self.clock.now())  # the verdict may be stale already
            else:
                self._set(key, UNSCHEDULABLE)
            self._cond.notify_all()

    def requeue_active(self, key: str) -> None:
        """The attempt was abandoned without a verdict (leadership lost, shutdown): retry as new."""
        with self._cond:
            qp = self._pods.get(key)
            if qp is None or self._where.get(key) != IN_FLIGHT:
                return
            if qp.deleted_in_flight:
                self._drop(key)
                return
            qp.attempts = max(0, qp.attempts - 1)
            self._push_active(qp)
            self._cond.notify_all()

    def _finish(self, key: str) -> Optional[QueuedPod]:
        qp = self._pods.get(key)
        if qp is None or self._where.get(key) != IN_FLIGHT:
            return None
        if qp.deleted_in_flight:
            self._drop(key)
            return None
        qp.failures += 1
        qp.timestamp = self.clock.now()
        return qp

    # --- moving unschedulable pods ---------------------------------------------------------------

    def move_all(self, predicate: Optional[Callable[[QueuedPod], bool]] = None) -> int:
        """A cluster event that may help: unschedulable pods (those `predicate` picks) move on,
        and pods in flight that it may help will not be parked as unschedulable afterwards."""
        with self._cond:
            now = self.clock.now()
            for key in self._pools[IN_FLIGHT]:
                qp = self._pods[key]
                if predicate is None or predicate(qp):
                    qp.changed_in_flight = True
            chosen = [k for k in self._pools[UNSCHEDULABLE] if predicate is None or predicate(self._pods[k])]
            for key in chosen:
                self._move_locked(self._pods[key], now)
            if chosen:
                self._cond.notify_all()
            return len(chosen)

    def activate_gang(self, gang: str) -> None:
        """Something changed for a gang (a member or its PodGroup appeared): retry its members."""
        self.move_all(lambda qp: qp.gang == gang)

    def _move_locked(self, qp: QueuedPod, now: float) -> None:
        if qp.failures and self.backoff_expiry(qp) > now:
            self._set(qp.key, BACKOFF)
        else:
            self._push_active(qp)

    def backoff_duration(self, failures: int) -> float:
        if failures <= 0 or self.settings.max_backoff <= 0:
            return 0.0
        return min(self.settings.max_backoff, self.settings.initial_backoff * 2 ** (failures - 1))

    def backoff_expiry(self, qp: QueuedPod) -> float:
        return qp.timestamp + self.backoff_duration(qp.failures)

    def flush(self) -> None:
        with self._cond:
            self.flush_locked(self.clock.now())

    def flush_locked(self, now: float) -> None:
        """Backed-off pods whose time is up become active; unschedulable pods left for longer
        than the maximum are moved as if an event had come."""
        moved = False
        for key in [k for k in self._pools[BACKOFF] if self.backoff_expiry(self._pods[k]) <= now]:
            self._push_active(self._pods[key])
            moved = True
        for key in [k for k in self._pools[UNSCHEDULABLE]
                    if now - self._pods[k].timestamp >= self.settings.max_unschedulable]:
            self._move_locked(self._pods[key], now)
            moved = True
        if moved:
            self._cond.notify_all()

    def _push_active(self, qp: QueuedPod) -> None:
        qp.seq = next(self._seq)
        self._set(qp.key, ACTIVE)
        heapq.heappush(self._active, (-qp.priority, qp.timestamp, qp.seq, qp.key))

    # --- inspection and shutdown -----------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        with self._cond:
            return {pool: len(keys) for pool, keys in self._pools.items()}

    def where(self, key: str) -> Optional[str]:
        with self._cond:
            return self._where.get(key)

    def get(self, key: str) -> Optional[QueuedPod]:
        with self._cond:
            return self._pods.get(key)

    def unschedulable(self) -> dict[str, str]:
        """Unschedulable pods and their last message."""
        with self._cond:
            return {k: self._pods[k].message for k in self._pools[UNSCHEDULABLE]}

    def keys(self) -> set[str]:
        with self._cond:
            return set(self._pods)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

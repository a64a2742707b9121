"""Events and pod conditions that tell people what the scheduler decided.

kube-scheduler records `Scheduled` ("Successfully assigned ns/name to node"),
`FailedScheduling` (the "0/N nodes are available: ..." message, also written to the pod's
`PodScheduled=False` condition) and, on victims, `Preempted`. So does this scheduler, with
the same reasons and messages, so `kubectl describe pod` and event-based tooling read the
same as with the default scheduler.

A gang of a ``scheduling.k8s.io/v1alpha2`` PodGroup also gets that group's
``PodGroupScheduled`` condition, as kube-scheduler 1.36 writes it: ``True`` once the gang is
bound, ``False`` with reason ``Unschedulable`` and the window's message when no placement of it
fits; and ``DisruptionTarget`` (``True``, reason ``PreemptionByScheduler``) once the scheduler
evicts one of its running members for a preemptor. Other gang shapes have no such conditions. It is merge-patched through the status
subresource with the group's other conditions kept as the watch last showed them (a merge
patch replaces the list), and written only when it differs from what the watch shows.

Reporting must never slow scheduling down: writes are queued and sent by a background
worker, with the bounded retries of `retry.py`. If the API server cannot take them, they
are dropped and counted (`events_dropped_total`), never retried forever or allowed to
block a bind. A pod's condition is only patched when its message changes.

An event like one still waiting to be sent (same pod, reason and message: a pod found
unschedulable again and again) is folded into it, its `count` raised and `lastTimestamp`
moved, as client-go's recorder aggregates repeats, so a backlog of retries is one write per
pod. On shutdown what is queued is flushed, with more writers, within `DRAIN_SECONDS`: the
`Scheduled` events of the last binds trail them, and a prompt SIGTERM must not lose them.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

from models import Pod

from .clock import Clock
from .errors import KubeError
from .api_client import PODGROUP_DISRUPTION_TARGET, PODGROUP_SCHEDULED, KubeApi, now_micro
from .retry import call_with_retries

log = logging.getLogger(__name__)

# Writes waiting to be sent; beyond this they are dropped (and counted) rather than kept.
MAX_PENDING_WRITES = 10_000
# Background writers: two keep up with a few hundred events per second on a small API server.
WRITERS = 2
# On shutdown, how long pending writes may take before the rest are dropped (seconds): well
# within a pod's default termination grace (30 s), which also covers finishing the binds.
DRAIN_SECONDS = 15.0
# Writers while draining on shutdown: nothing else competes for the API server then.
DRAIN_WRITERS = 8
# Retry delays of one event write: events are worth little once stale, so few and short.
EVENT_BACKOFFS = (0.2, 0.5)

SCHEDULED, FAILED_SCHEDULING, PREEMPTED = "Scheduled", "FailedScheduling", "Preempted"
# PodScheduled=False condition reasons, as kube-scheduler sets them.
UNSCHEDULABLE, SCHEDULER_ERROR = "Unschedulable", "SchedulerError"
# PodGroupScheduled=True: its reason and message (one message, so a gang bound in several
# windows is not written again for each).
GROUP_SCHEDULED, GROUP_SCHEDULED_MESSAGE = "Scheduled", "the pod group's gang is bound"
# DisruptionTarget=True on a v1alpha2 PodGroup whose member the scheduler evicted: its reason.
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"


def scheduled_message(pod_key: str, node: str) -> str:
    return f"Successfully assigned {pod_key} to {node}"


def preempted_message(preemptor: str, node: str) -> str:
    return f"Preempted by pod {preemptor} on node {node}"


@dataclass
class _Write:
    what: str
    namespace: str
    name: str
    event: Optional[dict[str, Any]] = None
    status: Optional[dict[str, Any]] = None
    group_status: Optional[dict[str, Any]] = None  # a v1alpha2 PodGroup's status, not a pod's
    same: Optional[tuple[str, ...]] = None  # what makes a later event the same as this one
    still: Optional[Callable[[], bool]] = None  # asked right before sending: false drops the write
    seq: int = 0  # a pod status write's place among the writes of its pod (``Reporter._order``)


class Reporter:
    def __init__(self, api: KubeApi, *, component: str, instance: str, clock: Clock, metrics: Any,
                 enabled: bool = True,
                 group_conditions: Callable[[str], Optional[tuple[str, list[dict[str, Any]]]]] = lambda key: None
                 ) -> None:
        self.api = api
        self.component = component
        self.instance = instance
        self.clock = clock
        self.metrics = metrics
        self.enabled = enabled
        # gang key -> the UID and conditions of its v1alpha2 PodGroup as watched (None: not such a gang)
        self.group_conditions = group_conditions
        # (pod key or podgroup/<gang key>, kube-scheduler's message) -> the condition message to
        # write: kube's, or kube's with `why`'s obstacles after it (`explain.py`, when enabled)
        self.annotate: Callable[[str, str], str] = lambda key, message: message
        # gang key -> (PodGroup UID, status, reason, message) last queued: not queued again while
        # the watch has not shown it yet (a gang retried meanwhile would write it twice)
        # Per gang, the group's uid and the conditions queued for it, by type: not written again
        # while unchanged, and merged into the next write (the watch may not show one yet, and a
        # merge patch replaces the whole list).
        self._group_sent: dict[str, tuple[str, dict[str, dict[str, Any]]]] = {}
        self._queue: "queue.Queue[Optional[_Write]]" = queue.Queue(MAX_PENDING_WRITES)
        self._ids = itertools.count()
        self._reported: dict[str, str] = {}  # pod key -> last message written to its condition
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()
        # Events queued and not yet taken by a writer, by what makes two of them the same.
        self._pending: dict[tuple[str, ...], _Write] = {}
        # A pod's status writes land in the order they were made: two writers could send a
        # pod's kube message after the same pod's later message with `why`'s obstacles, which
        # then vanished. Per pod with writes not yet done: the last write made, the last sent,
        # how many are not done, and whether one of those clears the nomination (the next one
        # made carries that on, as a write sent past is dropped). Sending holds a lock of the
        # pod's stripe.
        self._order = itertools.count(1)
        self._status: dict[str, list] = {}  # pod key -> [last made, last sent, not done, clears]
        self._send_locks = [threading.Lock() for _ in range(16)]

    def start(self) -> None:
        self._add_writers(WRITERS)

    def _add_writers(self, count: int) -> None:
        for _ in range(count):
            thread = threading.Thread(target=self._work, name=f"cpsat-live-events-{len(self._threads)}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        """Send what is queued (bounded by DRAIN_SECONDS), then stop the writers."""
        deadline = time.monotonic() + DRAIN_SECONDS
        if self._threads and not self._queue.empty():
            self._add_writers(DRAIN_WRITERS - len(self._threads))
            log.info("flushing %d queued event and status writes", self._queue.qsize())
        for _ in self._threads:
            try:
                self._queue.put(None, timeout=max(0.01, deadline - time.monotonic()))
            except queue.Full:
                break
        for thread in self._threads:
            thread.join(max(0.01, deadline - time.monotonic()))
        self._stopping.set()  # writers still busy give up their retries and drop the rest
        for thread in self._threads:
            thread.join(2.0)
        self._threads.clear()

    # --- what is reported ----------------------------------------------------------------------

    def scheduled(self, pod: Pod, node: str) -> None:
        with self._lock:
            self._reported.pop(pod.key, None)
        self._event(pod, SCHEDULED, scheduled_message(pod.key, node), "Normal", "Binding")

    def failed_scheduling(self, pod: Pod, message: str, *, reason: str = UNSCHEDULABLE,
                          clear_nomination: bool = False) -> None:
        """A `FailedScheduling` event and the `PodScheduled=False` condition: `Unschedulable`
        when no node fits, `SchedulerError` when the attempt failed otherwise (a bind error).
        `clear_nomination`: the same status write removes `nominatedNodeName`, as kube-scheduler
        does when a preemption finds no node for the pod (a stale nomination keeps room others
        may not take)."""
        self._event(pod, FAILED_SCHEDULING, message, "Warning", "Scheduling")
        shown = self.annotate(pod.key, message) if reason == UNSCHEDULABLE else message
        self._pod_condition(pod, shown, reason, clear_nomination=clear_nomination)

    def explained(self, pod: Pod, message: str, still: Callable[[], bool]) -> bool:
        """Write the `PodScheduled=False` (`Unschedulable`) condition of `pod` again with
        `message` annotated (`annotate`: kube-scheduler's message and the obstacles after it), no
        event; only when that changes what was written, and only if `still()` holds right before
        the write is sent (the pod still waits: one bound meanwhile is not touched)."""
        return self._pod_condition(pod, self.annotate(pod.key, message), UNSCHEDULABLE, clear_nomination=False,
                                   still=still)

    def _pod_condition(self, pod: Pod, message: str, reason: str, *, clear_nomination: bool,
                       still: Optional[Callable[[], bool]] = None) -> bool:
        with self._lock:
            if self._reported.get(pod.key) == message and not clear_nomination:
                return False
            self._reported[pod.key] = message
            entry = self._status.setdefault(pod.key, [0, 0, 0, False])
            clear_nomination = clear_nomination or entry[3]
            seq = next(self._order)
            entry[0], entry[2], entry[3] = seq, entry[2] + 1, clear_nomination
        condition = {"type": "PodScheduled", "status": "False", "reason": reason, "message": message,
                     "lastTransitionTime": now_micro()[:19] + "Z", "lastProbeTime": None}
        status: dict[str, Any] = {"conditions": [condition]}
        if clear_nomination:
            status["nominatedNodeName"] = None
        if self._put(_Write(f"condition of {pod.key}", pod.metadata.namespace, pod.metadata.name, status=status,
                            still=still, seq=seq)):
            return True
        self._status_done(pod.key, seq, sent=False)
        return False

    def _status_done(self, key: str, seq: int, *, sent: bool) -> None:
        with self._lock:
            entry = self._status.get(key)
            if entry is None:
                return
            if sent:
                entry[1] = max(entry[1], seq)
                if seq == entry[0]:
                    entry[3] = False  # the newest write went out: nothing left to carry on
            entry[2] -= 1
            if entry[2] <= 0:
                del self._status[key]

    def _superseded(self, key: str, seq: int) -> bool:
        """A later status write of the pod went out already (this one is older: dropped)."""
        with self._lock:
            entry = self._status.get(key)
            return entry is not None and entry[1] > seq

    def preempted(self, victim: Pod, preemptor: str, node: str) -> None:
        self._event(victim, PREEMPTED, preempted_message(preemptor, node), "Normal", "Preempting")

    def pod_group_scheduled(self, gang: str, *, scheduled: bool, message: str = GROUP_SCHEDULED_MESSAGE,
                            reason: str = GROUP_SCHEDULED) -> None:
        """The `PodGroupScheduled` condition of gang `gang`'s v1alpha2 PodGroup, or
        `PodGroupInitiallyScheduled` of a 1.37 (v1beta1) one (nothing for a gang of another
        shape), unless the watch already shows it so. As 1.37's kube-scheduler does, an
        `InitiallyScheduled` True is never turned back to False (more pods came later)."""
        if not scheduled and reason == UNSCHEDULABLE:
            message = self.annotate(f"podgroup/{gang}", message)
        ctype = self.api.pod_group_condition()
        self._group_condition(gang, ctype, "True" if scheduled else "False", reason, message,
                              keep_true=ctype != PODGROUP_SCHEDULED)

    def pod_group_disrupted(self, gang: str, victim: str, preemptor: str, node: str) -> None:
        """The `DisruptionTarget` condition (reason `PreemptionByScheduler`) of gang `gang`'s
        v1alpha2 PodGroup: a member of it was evicted to make room for a preemptor."""
        self._group_condition(gang, PODGROUP_DISRUPTION_TARGET, "True", PREEMPTION_BY_SCHEDULER,
                              f"member {victim} preempted by pod {preemptor} on node {node}")

    def _group_condition(self, gang: str, ctype: str, status: str, reason: str, message: str, *,
                         keep_true: bool = False) -> None:
        found = self.group_conditions(gang)
        if found is None:
            return
        uid, conditions = found
        current = next((c for c in conditions if c.get("type") == ctype), None)
        if keep_true and current is not None and current.get("status") == "True" and status != "True":
            return
        if current is not None and (current.get("status"), current.get("reason"), current.get("message")) \
                == (status, reason, message):
            return
        with self._lock:
            sent_uid, sent = self._group_sent.get(gang, (uid, {}))
            if sent_uid != uid:
                sent = {}  # a new PodGroup of the same name
            queued = sent.get(ctype)
            if queued is not None and (queued["status"], queued["reason"], queued["message"]) == (status, reason, message):
                return
            if len(self._group_sent) >= MAX_PENDING_WRITES:  # groups come and go: never let it grow
                self._group_sent.clear()
            stamp = now_micro()[:19] + "Z"
            if current is not None and current.get("status") == status and current.get("lastTransitionTime"):
                stamp = current["lastTransitionTime"]  # the status stays: only reason or message change
            condition = {"type": ctype, "status": status, "reason": reason, "message": message,
                         "lastTransitionTime": stamp}
            # The other conditions as the watch shows them, or as queued since when newer.
            merged = {c.get("type"): c for c in conditions}
            merged.update(sent)
            others = [c for t, c in merged.items() if t != ctype]
            self._group_sent[gang] = (uid, {**sent, ctype: condition})
        namespace, name = gang.split("/", 1)
        self._put(_Write(f"{ctype} condition of podgroup {gang}", namespace, name,
                         group_status={"conditions": [*others, condition]}))

    def forget(self, pod_key: str) -> None:
        """The pod is gone or bound: no condition of it to keep track of."""
        with self._lock:
            self._reported.pop(pod_key, None)

    # --- sending ---------------------------------------------------------------------------------

    def _event(self, pod: Pod, reason: str, message: str, etype: str, action: str) -> None:
        now = now_micro()
        stamp = now[:19] + "Z"
        meta = pod.metadata
        event = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{meta.name}.{self.clock_id()}", "namespace": meta.namespace},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": meta.namespace, "name": meta.name,
                               "uid": meta.uid},
            "reason": reason, "message": message, "type": etype, "action": action,
            "source": {"component": self.component},
            "reportingComponent": self.component, "reportingInstance": self.instance,
            "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
        }
        same = (meta.namespace, meta.name, meta.uid or "", reason, message)
        with self._lock:
            queued = self._pending.get(same)
            if queued is not None and queued.event is not None:  # not taken by a writer yet: fold it in
                queued.event["count"] += 1
                queued.event["lastTimestamp"] = stamp
                return
            write = _Write(f"{reason} event for {pod.key}", meta.namespace, meta.name, event=event, same=same)
            if self._put(write):
                self._pending[same] = write

    def clock_id(self) -> str:
        """A name suffix unique within this process: time in ns and a counter, in hex."""
        return f"{time.time_ns():x}{next(self._ids):x}"

    def _put(self, write: _Write) -> bool:
        if not self.enabled:
            return False
        try:
            self._queue.put_nowait(write)
        except queue.Full:
            self.metrics.events_dropped.inc()
            return False
        return True

    def _work(self) -> None:
        while True:
            try:
                write = self._queue.get(timeout=0.1)
            except queue.Empty:
                if self._stopping.is_set():
                    return
                continue
            if write is None:
                return
            if write.same is not None:
                with self._lock:  # from here on a like event is a new write, not folded into this one
                    if self._pending.get(write.same) is write:
                        del self._pending[write.same]
            if write.status is not None and write.seq:
                key = f"{write.namespace}/{write.name}"
                sent = False
                try:
                    with self._send_locks[hash(key) % len(self._send_locks)]:
                        if not self._superseded(key, write.seq):
                            sent = self._write(write)
                finally:
                    self._status_done(key, write.seq, sent=sent)
                continue
            self._write(write)

    def _write(self, write: _Write) -> bool:
        """Send one write (True when it went out)."""
        if self._stopping.is_set():  # past the drain deadline: what is left is dropped
            self.metrics.events_dropped.inc()
            return False
        if write.still is not None and not write.still():
            with self._lock:
                self._reported.pop(f"{write.namespace}/{write.name}", None)
            return False
        # the one body this write has, named before the calls below read it
        event, group_status, status = write.event, write.group_status, write.status
        try:
            if event is not None:
                call_with_retries(lambda: self.api.create_event(write.namespace, event),
                                  what=write.what, backoffs=EVENT_BACKOFFS, sleep=self.clock.sleep,
                                  should_continue=lambda: not self._stopping.is_set())
            elif group_status is not None:
                call_with_retries(lambda: self.api.patch_pod_group_status(write.namespace, write.name,
                                                                          group_status),
                                  what=write.what, backoffs=EVENT_BACKOFFS, sleep=self.clock.sleep,
                                  should_continue=lambda: not self._stopping.is_set())
            elif status is not None:
                call_with_retries(lambda: self.api.patch_pod_status(write.namespace, write.name, status),
                                  what=write.what, backoffs=EVENT_BACKOFFS, sleep=self.clock.sleep,
                                  should_continue=lambda: not self._stopping.is_set())
            return True
        except KubeError as exc:
            self.metrics.events_dropped.inc()
            log.debug("not recorded: %s", exc.message)
            if write.status is not None:
                with self._lock:  # not written: the next verdict on the pod may write it again
                    self._reported.pop(f"{write.namespace}/{write.name}", None)
            if write.group_status is not None:
                with self._lock:  # not written: the next verdict on the gang may write it again
                    ctype = write.group_status["conditions"][-1]["type"]
                    _, sent = self._group_sent.get(f"{write.namespace}/{write.name}", ("", {}))
                    sent.pop(ctype, None)
        except Exception:  # noqa: BLE001 - a reporting bug must not kill the writer
            self.metrics.events_dropped.inc()
            log.exception("writing %s failed", write.what)
        return False

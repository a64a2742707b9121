"""Leader election on a `coordination.k8s.io/v1` Lease, as client-go's leaderelection does it.

Several replicas run for availability; only the one holding the lease schedules, since two
schedulers deciding from two caches would double-book nodes. The holder renews the lease
every retry period; the others read it and take it over once it has not changed for a full
lease duration *as measured on their own clock* (the lease's timestamps are only compared
for change, never trusted across machines). Writes use the lease's resourceVersion, so of
two candidates only one wins (the other gets a 409).

Safety comes from the ordering of the three durations (15 s lease, 10 s renew deadline,
2 s retry by default): a leader that could not renew for the renew deadline stops scheduling
— at once: `is_leader()` also checks the time since the last successful renewal, so even a
stuck elector thread cannot keep an old leader binding — while the others wait for the
longer lease duration before taking over. On a clean shutdown the leader releases the lease
(empties its holder), so a standby takes over in one retry period instead of a full lease
duration.
"""

from __future__ import annotations

import logging
import socket
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from .clock import Clock
from .defaults import (  # re-exported: client-go's defaults, kept where they load cheaply
    LEASE_DURATION_SECONDS as LEASE_DURATION_SECONDS,
    LEASE_NAME as LEASE_NAME,
    RENEW_DEADLINE_SECONDS as RENEW_DEADLINE_SECONDS,
    RETRY_PERIOD_SECONDS as RETRY_PERIOD_SECONDS,
)
from .errors import Conflict, KubeError, NotFound
from .api_client import KubeApi, now_micro

log = logging.getLogger(__name__)


def default_identity() -> str:
    """hostname_uuid, as client-go names a candidate: unique even for two processes on one host."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


@dataclass(frozen=True)
class LeaseSettings:
    namespace: str = "kube-system"
    name: str = LEASE_NAME
    duration: float = LEASE_DURATION_SECONDS
    renew_deadline: float = RENEW_DEADLINE_SECONDS
    retry_period: float = RETRY_PERIOD_SECONDS
    identity: str = field(default_factory=default_identity)

    def __post_init__(self) -> None:
        if not (self.duration > self.renew_deadline > self.retry_period > 0):
            raise ValueError("leader election needs lease duration > renew deadline > retry period > 0, got "
                             f"{self.duration}, {self.renew_deadline}, {self.retry_period}")


class LeaderElector:
    def __init__(self, api: KubeApi, settings: LeaseSettings, *, clock: Clock,
                 on_started: Callable[[], None] = lambda: None, on_stopped: Callable[[], None] = lambda: None,
                 metrics: Any = None) -> None:
        self.api = api
        self.settings = settings
        self.clock = clock
        self.on_started = on_started
        self.on_stopped = on_stopped
        self.metrics = metrics
        self._leading = threading.Event()
        self._last_renew = float("-inf")
        self._observed: Optional[tuple] = None  # (holder, renewTime, duration) last seen
        self._observed_at = float("-inf")
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._lock = threading.Lock()

    @property
    def identity(self) -> str:
        return self.settings.identity

    def is_leader(self) -> bool:
        """Holding the lease, and renewed within the renew deadline by our own clock."""
        with self._lock:
            return self._leading.is_set() and self.clock.now() - self._last_renew <= self.settings.renew_deadline

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="cpsat-live-leader", daemon=True)
        self._thread.start()

    def stop(self, *, release: bool = True) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.settings.retry_period + 10.0)
        if self._leading.is_set():
            self._lose("shutting down", expected=True)
            if release:
                self._release()

    def wait_leading(self, timeout: float) -> bool:
        return self._leading.wait(timeout)

    @property
    def died(self) -> bool:
        """Started, not told to stop, and yet its thread is gone: nobody renews or acquires."""
        return self._thread is not None and not self._thread.is_alive() and not self._stop.is_set()

    # --- the loop --------------------------------------------------------------------------------

    def _run(self) -> None:
        s = self.settings
        log.info("leader election: candidate %s for lease %s/%s", s.identity, s.namespace, s.name)
        while not self._stop.is_set():
            renewed = self._try_acquire_or_renew()
            now = self.clock.now()
            if renewed:
                with self._lock:
                    self._last_renew = now
                    was_leading = self._leading.is_set()
                    self._leading.set()
                if not was_leading:
                    log.info("leader election: %s became the leader", s.identity)
                    if self.metrics is not None:
                        self.metrics.leader.set(1)
                    self.on_started()
            elif self._leading.is_set() and now - self._last_renew > s.renew_deadline:
                self._lose(f"could not renew the lease for {s.renew_deadline:.1f}s")
            self.clock.wait(self._stop, s.retry_period)

    def _lose(self, why: str, *, expected: bool = False) -> None:
        with self._lock:
            if not self._leading.is_set():
                return
            self._leading.clear()
        log.log(logging.INFO if expected else logging.WARNING, "leader election: %s stopped leading: %s",
                self.settings.identity, why)
        if self.metrics is not None:
            self.metrics.leader.set(0)
        self.on_stopped()

    def _try_acquire_or_renew(self) -> bool:
        s = self.settings
        try:
            lease = self.api.read_lease(s.namespace, s.name)
        except NotFound:
            return self._create()
        except KubeError as exc:
            log.info("leader election: cannot read lease %s/%s: %s", s.namespace, s.name, exc.message)
            return False
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        record = (holder, spec.get("renewTime"), spec.get("leaseDurationSeconds"))
        now = self.clock.now()
        if record != self._observed:
            self._observed, self._observed_at = record, now
        held_for = float(spec.get("leaseDurationSeconds") or s.duration)
        if holder and holder != s.identity and now < self._observed_at + held_for:
            if self._leading.is_set():  # someone else holds it now: we lost it
                self._lose(f"the lease is held by {holder}")
            return False
        stamp = now_micro()
        new_spec = dict(spec)
        new_spec.update(holderIdentity=s.identity, leaseDurationSeconds=max(1, int(round(s.duration))),
                        renewTime=stamp)
        if holder != s.identity:
            new_spec["acquireTime"] = stamp
            new_spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (1 if holder else 0)
        updated = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                   "metadata": {"name": s.name, "namespace": s.namespace,
                                "resourceVersion": (lease.get("metadata") or {}).get("resourceVersion")},
                   "spec": new_spec}
        try:
            self.api.replace_lease(s.namespace, updated)
        except Conflict:
            return False  # someone else wrote it first; look again next period
        except KubeError as exc:
            log.info("leader election: cannot update lease %s/%s: %s", s.namespace, s.name, exc.message)
            return False
        self._observed = (s.identity, stamp, new_spec["leaseDurationSeconds"])
        self._observed_at = now
        return True

    def _create(self) -> bool:
        s = self.settings
        stamp = now_micro()
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                 "metadata": {"name": s.name, "namespace": s.namespace},
                 "spec": {"holderIdentity": s.identity, "leaseDurationSeconds": max(1, int(round(s.duration))),
                          "acquireTime": stamp, "renewTime": stamp, "leaseTransitions": 0}}
        try:
            self.api.create_lease(s.namespace, lease)
        except KubeError as exc:  # 409: another candidate created it first
            if not isinstance(exc, Conflict):
                log.info("leader election: cannot create lease %s/%s: %s", s.namespace, s.name, exc.message)
            return False
        return True

    def _release(self) -> None:
        """Empty the lease's holder so a standby need not wait for it to expire."""
        s = self.settings
        try:
            lease = self.api.read_lease(s.namespace, s.name)
            spec = dict(lease.get("spec") or {})
            if spec.get("holderIdentity") != s.identity:
                return
            spec.update(holderIdentity="", leaseDurationSeconds=1, renewTime=now_micro())
            self.api.replace_lease(s.namespace, {
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": s.name, "namespace": s.namespace,
                             "resourceVersion": (lease.get("metadata") or {}).get("resourceVersion")},
                "spec": spec})
            log.info("leader election: %s released lease %s/%s", s.identity, s.namespace, s.name)
        except KubeError as exc:
            log.warning("leader election: could not release lease %s/%s: %s", s.namespace, s.name, exc.message)


class AlwaysLeader:
    """What runs without leader election (`--no-leader-elect`, dry runs): always leading."""

    identity = "standalone"

    def __init__(self, on_started: Callable[[], None] = lambda: None, metrics: Any = None) -> None:
        self.on_started = on_started
        self.metrics = metrics

    def is_leader(self) -> bool:
        return True

    def start(self) -> None:
        if self.metrics is not None:
            self.metrics.leader.set(1)
        self.on_started()

    def stop(self, *, release: bool = True) -> None:
        if self.metrics is not None:
            self.metrics.leader.set(0)

    def wait_leading(self, timeout: float) -> bool:
        return True

    died = False

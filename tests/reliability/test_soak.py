"""Soak: the live scheduler under continuous churn and random faults, checked all along.

Two scheduler replicas (leader election on) run against the in-memory API server while a
seeded generator plays users, controllers and a hostile control plane at once: pods of mixed
sizes and priorities arrive while fewer than MAX_BACKLOG wait (some with required
anti-affinity, some pinned to a zone, some too big for any node) and are deleted, bound or not; nodes join and leave (their pods then
deleted as the pod garbage collector would); and faults are injected at random — watches cut,
history compacted, the API server restarted, binds failed, delayed, cut or refused with 409,
evictions throttled, read-backs and events failed, the lease stolen or left unrenewable, the
leader restarted.

Every few seconds the server's state is replayed through the validator (no overcommit at any
moment, not only at the end); once the churn stops and the faults are lifted, the four
invariants of the fault matrix are checked (`test_live_faults.judge`). The report — pods
scheduled, faults injected, violations — is printed; violations must be 0.

The default run lasts about 25 s; `pytest -m long` runs the long one (4 minutes by default,
`SOAK_SECONDS` to change it, at most 300).
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Optional

import pytest

from adapters.apiserver.api import Request
from adapters.apiserver.errors import ApiError
from adapters.live import Scheduler
from adapters.live.api_client import now_micro
from adapters.live.queue import QueueSettings
from tests.adapters.live_harness import (
    NS,
    Cluster,
    fast_config,
    fast_options,
    live_threads,
    node,
    pdb,
    pod,
    priority_class,
    wait_for,
)
from tests.reliability.test_live_faults import Ledger, collect_orphans, is_pending, judge, leaked, overcommit

DEFAULT_SECONDS = 25.0
LONG_SECONDS = min(300.0, float(os.environ.get("SOAK_SECONDS", "240")))
# Seconds between two replays of the whole state through the validator while the churn goes on.
CHECK_EVERY = 3.0
# Node pool bounds: the churn keeps between these many nodes.
MIN_NODES, MAX_NODES = 3, 8
# Users stop adding pods while this many of ours wait for a node: the nodes hold a few dozen
# pods, and an ever-growing backlog would turn the soak into a throughput race rather than a test of
# what faults do to decisions.
MAX_BACKLOG = 300
# How long the invariants may take to hold once the churn stops (seconds): time to decide the
# whole backlog again, on two busy cores.
SETTLE_SECONDS = 45.0
# A soak-sized queue: an unschedulable pod whose event was lost is retried (and reported again)
# within seconds, not the default five minutes.
SOAK_QUEUE = QueueSettings(initial_backoff=0.05, max_backoff=0.5, max_unschedulable=3.0)
PRIORITIES = [None, None, "low", "low", "mid", "high"]
CPUS = ["100m", "250m", "250m", "500m", "500m", "1", "1500m"]


@dataclass
class SoakReport:
    seconds: float = 0.0
    pods_created: int = 0
    pods_deleted: int = 0
    nodes_added: int = 0
    nodes_removed: int = 0
    orphans_collected: int = 0
    scheduled: int = 0  # successful binding POSTs
    evicted: int = 0  # successful evictions (preemption)
    checks: int = 0  # replays of the whole state through the validator
    settle: float = 0.0  # seconds from the end of the churn until the invariants held (or gave up)
    leader_back: float = 0.0  # of which: until a replica led again (a stolen lease must expire first)
    backlog: int = 0  # our pods pending when the churn stopped: what the settling had to work through
    faults: Counter[str] = field(default_factory=Counter)  # fault actions, by kind
    applied: Counter[str] = field(default_factory=Counter)  # what the server's injector did to requests
    violations: list[str] = field(default_factory=list)

    @property
    def faults_injected(self) -> int:
        return sum(self.faults.values())

    def summary(self) -> str:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(self.faults.items()))
        applied = ", ".join(f"{k} {v}" for k, v in sorted(self.applied.items()))
        return (f"soak {self.seconds:.0f}s: {self.pods_created} pods created, {self.scheduled} scheduled, "
                f"{self.evicted} evicted by preemption, {self.pods_deleted} deleted; nodes +{self.nodes_added} "
                f"-{self.nodes_removed} ({self.orphans_collected} orphans collected); {self.faults_injected} faults "
                f"injected ({kinds}; at the server: {applied}); {self.checks} mid-run validations; {self.backlog} pods "
                f"pending at the end of the churn, settled in {self.settle:.1f}s (a leader after "
                f"{self.leader_back:.1f}s); {len(self.violations)} violations")


class Soak:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.cluster = Cluster([priority_class("low", 10), priority_class("mid", 100), priority_class("high", 1000),
                                pdb("batch", min_available=2, app="batch")]
                               + [self._node_object(i) for i in range(4)])
        self.ledger = Ledger(self.cluster.server)
        self.report = SoakReport()
        self.running: list[Scheduler] = []
        self.nodes = [f"node-{i}" for i in range(4)]
        self.next_node = 4
        self.next_pod = 0
        self.lock = threading.Lock()

    # --- the actors ------------------------------------------------------------------------------

    def _node_object(self, i: int) -> dict[str, Any]:
        return node(f"node-{i}", cpu="4", memory="8Gi", zone="ab"[i % 2])

    def _call(self, method: str, path: str, body: Optional[dict[str, Any]] = None, **query: str) -> bool:
        """A user's or controller's request, straight to the API (faults are for the scheduler)."""
        try:
            self.cluster.server.api.handle(Request(method, path, query, body=json.dumps(body or {}).encode()
                                                   if body is not None else b""))
            return True
        except ApiError:
            return False

    def start_scheduler(self) -> Scheduler:
        options = fast_options(engine="cpsat", leader_elect=True, queue=SOAK_QUEUE, bind_concurrency=4)
        sched = self.cluster.scheduler(fast_config(), options)
        self.running.append(sched)
        return sched

    def new_pod(self) -> None:
        if self.pending() >= MAX_BACKLOG:
            return
        self.next_pod += 1
        name = f"p{self.next_pod}"
        rng = self.rng
        kind = rng.random()
        labels = {"app": rng.choice(["web", "api", "batch", "cache"])}
        obj = pod(name, cpu=rng.choice(CPUS), memory=rng.choice(["64Mi", "256Mi", "1Gi"]),
                  priority_class=rng.choice(PRIORITIES), labels=labels)
        if kind < 0.15:  # one per node for its group
            obj["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"spread": labels["app"]}}, "topologyKey": "kubernetes.io/hostname"}]}}
            obj["metadata"]["labels"]["spread"] = labels["app"]
        elif kind < 0.25:
            obj["spec"]["nodeSelector"] = {"topology.kubernetes.io/zone": rng.choice("ab")}
        elif kind < 0.28:
            obj["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "16"  # fits nowhere
        if self._call("POST", f"/api/v1/namespaces/{NS}/pods", obj):
            self.report.pods_created += 1

    def pending(self) -> int:
        """Our pods waiting for a node (not being deleted)."""
        store = self.cluster.server.store
        with store.lock:
            return sum(1 for o in store.items("pods", NS) if is_pending(o))

    def delete_pod(self) -> None:
        pods = self.cluster.server.store.list("pods", NS)
        if not pods:
            return
        victim = self.rng.choice(pods)["metadata"]["name"]
        query = {"gracePeriodSeconds": "0"} if self.rng.random() < 0.5 else {}
        if self._call("DELETE", f"/api/v1/namespaces/{NS}/pods/{victim}", **query):
            self.report.pods_deleted += 1

    def add_node(self) -> None:
        if len(self.nodes) >= MAX_NODES:
            return
        i, self.next_node = self.next_node, self.next_node + 1
        if self._call("POST", "/api/v1/nodes", self._node_object(i)):
            self.nodes.append(f"node-{i}")
            self.report.nodes_added += 1

    def remove_node(self) -> None:
        if len(self.nodes) <= MIN_NODES:
            return
        name = self.rng.choice(self.nodes)
        if self._call("DELETE", f"/api/v1/nodes/{name}"):
            self.nodes.remove(name)
            self.report.nodes_removed += 1
            self.report.orphans_collected += collect_orphans(self.cluster)

    def fault(self) -> None:
        faults = self.cluster.server.faults
        rng = self.rng
        kind = rng.choice(["drop-watches", "compact", "restart", "bind-500", "bind-delay", "bind-cut", "bind-409",
                           "evict-429", "read-back-503", "events-500", "lease-stolen", "lease-unrenewable",
                           "leader-restart"])
        if kind == "drop-watches":
            faults.drop_watches()
        elif kind == "compact":
            faults.fail("GET", r"/pods$", watch=True, status=503, count=2)
            faults.drop_watches()
            faults.compact()
        elif kind == "restart":
            faults.restart(keep_store=True, down_seconds=rng.uniform(0.05, 0.3))
        elif kind == "bind-500":
            faults.fail("POST", r"/binding$", status=rng.choice([500, 503]), count=rng.randint(1, 6))
        elif kind == "bind-delay":
            faults.delay("POST", r"/binding$", seconds=rng.uniform(0.1, 0.5), count=rng.randint(1, 8))
        elif kind == "bind-cut":
            faults.disconnect("POST", r"/binding$", count=rng.randint(1, 2))
        elif kind == "bind-409":
            faults.fail("POST", r"/binding$", status=409, count=1, reason="Conflict")
        elif kind == "evict-429":
            faults.fail("POST", r"/eviction$", status=429, count=rng.randint(1, 3))
        elif kind == "read-back-503":
            faults.fail("GET", r"/namespaces/[^/]+/pods/[^/]+$", status=503, count=rng.randint(1, 4))
        elif kind == "events-500":
            faults.fail("POST", r"/events$", status=500, count=rng.randint(1, 6))
        elif kind == "lease-stolen":
            self._steal_lease()
        elif kind == "lease-unrenewable":
            faults.fail("PUT", r"/leases/", status=500, count=rng.randint(5, 15))
        elif kind == "leader-restart":
            leaders = [s for s in self.running if s.elector.is_leader()]
            if leaders:
                leaders[0].stop()
                self.running.remove(leaders[0])
                self.report.violations += [f"at {self.report.seconds:.1f}s: leaked assumption at stop: {k}"
                                           for k in leaked(self.cluster.server, leaders[0:1], stopped=True)]
                self.start_scheduler()
        self.report.faults[kind] += 1

    def _steal_lease(self) -> None:
        lease = self.cluster.server.store.get("leases", NS, "cpsat-scheduler")
        if lease is None:
            return
        lease["spec"]["holderIdentity"] = "intruder"
        lease["spec"]["renewTime"] = now_micro()
        self._call("PUT", f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/cpsat-scheduler", lease)

    # --- the run ----------------------------------------------------------------------------------

    def check(self) -> None:
        """The whole state, as it is now, through the validator."""
        self.report.orphans_collected += collect_orphans(self.cluster)
        problems = overcommit(self.cluster.server, fast_config())
        self.report.checks += 1
        self.report.violations += [f"at {self.report.seconds:.1f}s: {p}" for p in problems]

    def run(self, seconds: float) -> SoakReport:
        started = time.monotonic()
        self.start_scheduler()
        self.start_scheduler()
        actions = [(self.new_pod, 12), (self.delete_pod, 4), (self.add_node, 1), (self.remove_node, 1),
                   (self.fault, 2)]
        funcs, weights = zip(*actions)
        next_check = started + CHECK_EVERY
        try:
            while time.monotonic() - started < seconds:
                self.rng.choices(funcs, weights)[0]()
                if self.rng.random() < 0.05:  # a burst: a Deployment scaling up
                    for _ in range(self.rng.randint(3, 10)):
                        self.new_pod()
                self.report.seconds = time.monotonic() - started
                if time.monotonic() >= next_check:
                    self.check()
                    next_check = time.monotonic() + CHECK_EVERY
                time.sleep(self.rng.uniform(0.01, 0.06))
            # quiet: lift every fault, let the lease settle, then judge
            quiet = time.monotonic()
            self.report.backlog = self.pending()
            self.cluster.server.faults.clear()
            assert wait_for(lambda: any(s.elector.is_leader() for s in self.running), timeout=10.0)
            self.report.leader_back = time.monotonic() - quiet
            self.report.orphans_collected += collect_orphans(self.cluster)
            verdict = judge(self.cluster, self.ledger, running=self.running, settle=SETTLE_SECONDS)
            self.report.settle = time.monotonic() - quiet
            self.report.violations += verdict.violations
            self.report.orphans_collected += collect_orphans(self.cluster)  # binds in flight at the very end
            self.report.checks += 1
        finally:
            self.report.seconds = time.monotonic() - started
            self.report.scheduled = sum(self.ledger.successful_binds().values())
            self.report.evicted = sum(1 for _, status in self.ledger.evictions if status == 201)
            self.report.applied.update(self.cluster.server.faults.injected)
            self.cluster.close()
        return self.report


def _soak(seconds: float, seed: int) -> SoakReport:
    report = Soak(seed).run(seconds)
    print("\n" + report.summary())
    kinds = Counter(v.split(":", 1)[0] for v in report.violations)
    for kind, count in sorted(kinds.items()):
        print(f"  {count} × {kind}, e.g.:")
        for line in [v for v in report.violations if v.startswith(kind)][:5]:
            print("    " + line)
    assert wait_for(lambda: not live_threads(), timeout=10.0), live_threads()
    return report


def _verdict(report: SoakReport) -> None:
    """Every violation fails the test: each is a broken invariant of the fault matrix."""
    assert report.violations == []


def test_soak_short() -> None:
    report = _soak(DEFAULT_SECONDS, seed=8)
    assert report.scheduled >= 50 and report.faults_injected >= 10 and report.checks >= 3
    _verdict(report)


@pytest.mark.long
def test_soak_long() -> None:
    report = _soak(LONG_SECONDS, seed=int(os.environ.get("SOAK_SEED", "2024")))
    assert report.scheduled >= 500
    _verdict(report)

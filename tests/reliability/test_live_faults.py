"""The fault matrix of `cpsat-scheduler run`: one fault per case, the same four invariants after each.

Every case runs the unchanged live scheduler against the in-memory API server over HTTP,
creates pending pods, injects one fault at the moment it hurts most (while pods are assumed,
while a bind is in flight, while a window is being decided), lifts the fault, and then asks
the server — not the scheduler — whether anything went wrong:

1. **no double binding**: per pod, at most one `POST pods/{name}/binding` was answered 201
   (counted from the server's request log) and `spec.nodeName` changed at most once (counted
   from the store's own change feed);
2. **no overcommit**: at every bind the server commits, the pods on that node (terminating ones
   included) fit its allocatable; and at the end every bound pod of ours is taken off its node
   and replayed through the independent validator (`solver.validate`) on the final state, with
   every hard rule checked;
3. **no pod lost**: every pod of ours still pending carries a `FailedScheduling` event (for
   this very pod, by UID), and the scheduler is idle — nothing active, backing off or in flight;
   and no eviction the scheduler asked for removed a pod that was not running (the Eviction API
   deletes an unbound pod at once: a pending pod evicted is a pod lost);
4. **no leaked assumption**: each pod the scheduler still assumes is bound, on that node, at the
   server.

All waits are bounded; durations are the harness's test-sized ones (see
`tests/adapters/live_harness.py`). `LEDGER` helpers here are shared with the soak test.
"""

from __future__ import annotations

import functools
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional

import pytest
from kubernetes import client

import adapters.live.api_client as api_client
from adapters.apiserver import FakeApiServer, RequestRecord
from adapters.apiserver.api import Request
from adapters.apiserver.handler import Handler
from adapters.live import Scheduler
from adapters.live.cache import AWAITING_VICTIMS, BINDING, UNCERTAIN
from adapters.live.api_client import now_micro
from adapters.live.queue import ACTIVE, BACKOFF, IN_FLIGHT, QueueSettings
from adapters.live.convert import parse_object
from adapters.live.simulate import final_state_violations
from models import SchedulerConfig
from models.resources import pod_requests
from tests.adapters.live_harness import (
    NS,
    SCHEDULER,
    Cluster,
    fast_config,
    fast_options,
    live_threads,
    node,
    pdb,
    pod,
    pod_group,
    priority_class,
    wait_for,
)

ROOT = Path(__file__).resolve().parents[2]
BINDING_PATH = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/binding$")
EVICTION_PATH = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/eviction$")
# How long a case may take to settle once its fault is lifted (seconds): backoffs are capped at
# 0.2 s and the uncertain-bind TTL at 2 s in the test options, so this is generous.
SETTLE_SECONDS = 15.0


# --- what the server saw ---------------------------------------------------------------------

@dataclass(frozen=True)
class BindAttempt:
    pod: str  # namespace/name
    node: str
    status: Optional[int]  # None: cut without an answer
    started: float  # time.monotonic() at arrival


class Ledger:
    """The server's own account of binds and evictions, from its request log and change feed.

    It also checks every bind the moment the store commits it: the pods then on the node (those
    terminating included: they hold their room until they are gone) must fit its allocatable.
    The final-state replay cannot see an overcommit that lasted only while a victim terminated."""

    def __init__(self, server: FakeApiServer) -> None:
        self._lock = threading.Lock()
        self._store = server.store
        self.binds: list[BindAttempt] = []
        self.evictions: list[tuple[str, Optional[int]]] = []
        self.node_changes: Counter[str] = Counter()  # pod -> times spec.nodeName went from unset to set
        self.overcommitted: list[str] = []  # binds that left their node over its allocatable
        self.evicted_pending: list[str] = []  # evictions answered 201 that deleted a pod with no node
        self._deleted_unbound: dict[str, float] = {}  # pod -> when it was deleted without a node
        self._requests: dict[str, dict[str, int]] = {}  # pod uid -> effective requests
        server.requests.add_listener(self._request)
        server.store.add_listener(self._change)

    def _request(self, r: RequestRecord) -> None:
        if r.method != "POST":
            return
        bind = BINDING_PATH.match(r.path)
        if bind:
            try:
                target = str(json.loads(r.body or b"{}").get("target", {}).get("name", ""))
            except ValueError:
                target = ""
            with self._lock:
                self.binds.append(BindAttempt(f"{bind[1]}/{bind[2]}", target, r.status, r.started))
            return
        evict = EVICTION_PATH.match(r.path)
        if evict:
            key = f"{evict[1]}/{evict[2]}"
            with self._lock:
                self.evictions.append((key, r.status))
                # the store's change feed runs inside the request, so a deletion it caused is known here
                if r.status == 201 and self._deleted_unbound.get(key, -1.0) >= r.started:
                    self.evicted_pending.append(key)

    def _change(self, key: str, event: str, obj: dict[str, Any], prev: Optional[dict[str, Any]]) -> None:
        if key == "pods" and event == "DELETED" and not (obj.get("spec") or {}).get("nodeName"):
            with self._lock:
                self._deleted_unbound[f"{obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}"] = \
                    time.monotonic()
            return
        if key != "pods" or event != "MODIFIED" or prev is None:
            return
        if (obj.get("spec") or {}).get("nodeName") and not (prev.get("spec") or {}).get("nodeName"):
            meta = obj["metadata"]
            with self._lock:
                self.node_changes[f"{meta['namespace']}/{meta['name']}"] += 1
            self._check_fit(f"{meta['namespace']}/{meta['name']}", obj["spec"]["nodeName"])

    def _pod_requests(self, obj: dict[str, Any]) -> dict[str, int]:
        uid = obj["metadata"].get("uid") or ""
        if uid not in self._requests:
            requests = pod_requests(parse_object(obj, "Pod"))  # type: ignore[arg-type]
            self._requests[uid] = {**requests, "pods": 1}
        return self._requests[uid]

    def _check_fit(self, key: str, node_name: str) -> None:
        """Called under the store's lock, so the pods and node read here are one consistent state."""
        node_obj = self._store.peek("nodes", "", node_name)
        if node_obj is None:
            return  # bound to a deleted node (a bind in flight): the pod garbage collector's business
        allocatable = parse_object(node_obj, "Node").allocatable  # type: ignore[attr-defined]
        used: Counter[str] = Counter()
        for other in self._store.items("pods"):
            if (other.get("spec") or {}).get("nodeName") == node_name \
                    and (other.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                used.update(self._pod_requests(other))
        over = [f"{r} {used[r]} > {allocatable.get(r, 0)}" for r in sorted(used) if used[r] > allocatable.get(r, 0)]
        if over:
            with self._lock:
                self.overcommitted.append(f"binding {key} overcommitted {node_name}: {', '.join(over)}")

    def successful_binds(self) -> Counter[str]:
        with self._lock:
            return Counter(b.pod for b in self.binds if b.status == 201)

    def attempts(self) -> list[BindAttempt]:
        with self._lock:
            return list(self.binds)

    def double_binds(self) -> list[str]:
        with self._lock:
            posted = Counter(b.pod for b in self.binds if b.status == 201)
            changed = Counter(self.node_changes)
        return sorted({k for k, n in posted.items() if n > 1} | {k for k, n in changed.items() if n > 1})


# --- the invariants --------------------------------------------------------------------------

STUCK = "stuck in flight"

def _ours(obj: dict[str, Any]) -> bool:
    return (obj.get("spec") or {}).get("schedulerName") == SCHEDULER


def is_pending(obj: dict[str, Any]) -> bool:
    spec, meta, status = obj.get("spec") or {}, obj.get("metadata") or {}, obj.get("status") or {}
    return (_ours(obj) and not spec.get("nodeName") and not meta.get("deletionTimestamp")
            and not spec.get("schedulingGates") and status.get("phase") not in ("Succeeded", "Failed"))


def cluster_objects(server: FakeApiServer) -> list[dict[str, Any]]:
    """A consistent copy of everything a snapshot is built from."""
    with server.store.lock:
        return [o for key in ("nodes", "pods", "poddisruptionbudgets", "priorityclasses", "podgroups")
                for o in server.store.list(key)]


def orphans(objects: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Pods bound to a node that no longer exists (a bind in flight when the node was deleted):
    the pod garbage collector deletes these in a real cluster."""
    objects = list(objects)
    nodes = {o["metadata"]["name"] for o in objects if o.get("kind") == "Node"}
    return [o for o in objects if o.get("kind") == "Pod" and (o.get("spec") or {}).get("nodeName")
            and o["spec"]["nodeName"] not in nodes]


def collect_orphans(cluster: Cluster) -> int:
    """Do what PodGC does for pods on deleted nodes: delete them. Returns how many."""
    gone = 0
    for obj in orphans(cluster_objects(cluster.server)):
        try:
            cluster.core.delete_namespaced_pod(obj["metadata"]["name"], obj["metadata"]["namespace"],
                                               grace_period_seconds=0)
            gone += 1
        except client.ApiException as exc:
            if exc.status != 404:
                raise
    return gone


def overcommit(server: FakeApiServer, config: SchedulerConfig) -> list[str]:
    """Every bound pod of ours replayed through the validator on the server's current state."""
    objects = cluster_objects(server)
    stray = {id(o) for o in orphans(objects)}
    objects = [o for o in objects if id(o) not in stray]
    bound = {f"{o['metadata']['namespace']}/{o['metadata']['name']}": o["spec"]["nodeName"]
             for o in objects if o.get("kind") == "Pod" and _ours(o) and (o.get("spec") or {}).get("nodeName")
             and not o["metadata"].get("deletionTimestamp")}
    return final_state_violations(objects, bound, config)


def unresolved(server: FakeApiServer) -> list[str]:
    """Pending pods of ours without a FailedScheduling event of their own."""
    store = server.store
    with store.lock:  # read in place: copying every event on each look would starve the scheduler
        told = {(e.get("involvedObject") or {}).get("uid") for e in store.items("events")
                if e.get("reason") == "FailedScheduling"}
        return sorted(f"{o['metadata']['namespace']}/{o['metadata']['name']}" for o in store.items("pods")
                      if is_pending(o) and o["metadata"].get("uid") not in told)


def leaked(server: FakeApiServer, schedulers: Iterable[Scheduler], *, stopped: bool = False) -> list[str]:
    """Assumptions the server does not back: the pod is not bound, or bound elsewhere. For a
    stopped scheduler, binds it could not settle (uncertain) died with it and do not count."""
    out = []
    for sched in schedulers:
        for key, assumption in sched.cache.assumed().items():
            if stopped and assumption.state == UNCERTAIN:
                continue
            ns, name = key.split("/", 1)
            obj = server.store.get("pods", ns, name)
            if obj is None or (obj.get("spec") or {}).get("nodeName") != assumption.node:
                out.append(f"{key} assumed on {assumption.node} ({assumption.state})")
    return sorted(out)


def stuck_in_flight(sched: Scheduler) -> list[str]:
    """Pods the queue holds "in flight" although their attempt is over: bound or deleted meanwhile,
    no assumption left, no bind under way. Nothing will ever take them out of the queue."""
    if not sched.binder.idle:
        return []
    out = []
    for key in sched.queue.keys():
        qp = sched.queue.get(key)
        if sched.queue.where(key) == IN_FLIGHT and qp is not None and qp.deleted_in_flight \
                and not sched.cache.is_assumed(key):
            out.append(key)
    return sorted(out)


@dataclass
class Verdict:
    stuck: list[str] = field(default_factory=list)  # in flight for ever (see stuck_in_flight)
    double_binds: list[str] = field(default_factory=list)
    overcommit: list[str] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)
    leaked: list[str] = field(default_factory=list)
    busy: list[str] = field(default_factory=list)  # running schedulers that never went idle
    evicted_pending: list[str] = field(default_factory=list)  # pending pods deleted by an eviction

    @property
    def violations(self) -> list[str]:
        return ([f"double bind: {k}" for k in self.double_binds] + [f"overcommit: {v}" for v in self.overcommit]
                + [f"pending without FailedScheduling: {k}" for k in self.unresolved]
                + [f"pending pod evicted: {k}" for k in self.evicted_pending]
                + [f"leaked assumption: {k}" for k in self.leaked] + [f"not idle: {k}" for k in self.busy]
                + [f"{STUCK}: {k}" for k in self.stuck])


def judge(cluster: Cluster, ledger: Ledger, *, running: Iterable[Scheduler] = (),
          config: Optional[SchedulerConfig] = None, settle: float = SETTLE_SECONDS) -> Verdict:
    """Wait (bounded) for the running schedulers to settle, then check the four invariants.

    A scheduler stopped on the way is checked for leaked assumptions when it stops (`leaked`
    with `stopped=True`): what its dead cache says later is nobody's concern."""
    running = list(running)
    server = cluster.server

    def busy() -> list[str]:
        """Leaders with work left (a standby's queue holds pods it will never pop: not work), pods
        stuck in flight (`stuck_in_flight`) apart."""
        out = []
        for s in running:
            counts = s.queue.counts()
            if not s.elector.is_leader():
                continue
            if counts[ACTIVE] or counts[BACKOFF] or counts[IN_FLIGHT] > len(stuck_in_flight(s)) \
                    or not s.binder.idle or s.cache.assumed():
                out.append(f"{s.elector.identity}: queue {counts}, binder idle {s.binder.idle}, "
                           f"{len(s.cache.assumed())} assumed")
        return out

    def leaderless() -> list[str]:
        """Schedulers run but none leads (a successor still acquiring the lease): their queues
        are not being drained, so nothing can be judged idle."""
        return ["no running scheduler leads"] if running and not any(s.elector.is_leader() for s in running) else []

    last: dict[str, list[str]] = {}

    def look(*, full: bool) -> bool:
        """One look at the liveness invariants, kept: the verdict is the last look, so a moment
        where everything held counts even if leadership moves on right after (it may, under
        load). Stops at the first one broken unless `full`."""
        last.clear()
        for name, check in (("busy", lambda: leaderless() or busy()), ("leaked", lambda: leaked(server, running)),
                            ("unresolved", lambda: unresolved(server))):
            last[name] = check()
            if last[name] and not full:
                return False
        return not any(last.values())

    if not wait_for(lambda: look(full=False), timeout=settle, interval=0.02):
        look(full=True)
    return Verdict(stuck=sorted(k for s in running for k in stuck_in_flight(s)),
                   double_binds=ledger.double_binds(),
                   overcommit=list(ledger.overcommitted) + overcommit(server, config or fast_config()),
                   unresolved=last["unresolved"], leaked=last["leaked"], busy=last["busy"],
                   evicted_pending=list(ledger.evicted_pending))


# --- the cases -------------------------------------------------------------------------------

# Three nodes of 2 CPU (6 CPU). The workload takes 4.5 CPU; `huge` fits nowhere, so each case also
# proves that an unschedulable pod is reported rather than forgotten.
NODES = [node("n1", cpu="2"), node("n2", cpu="2"), node("n3", cpu="2", zone="b")]


def workload(prefix: str = "web", count: int = 8, cpu: str = "500m") -> list[dict[str, Any]]:
    return [pod(f"{prefix}-{i}", cpu=cpu, labels={"app": prefix}) for i in range(count)]


def toleration_pod(name: str, *, cpu: str, node_name: Optional[str] = None, priority: str = "low",
                   running: bool = False, labels: Optional[dict[str, str]] = None) -> dict[str, Any]:
    obj = pod(name, cpu=cpu, priority_class=priority, node_name=node_name, running=running, labels=labels)
    obj["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}]
    obj["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "batch"}
    return obj


@dataclass
class Run:
    """One case's cluster, scheduler and ledger, and what the case wants to say about itself."""

    cluster: Cluster
    ledger: Ledger
    monkeypatch: pytest.MonkeyPatch
    tmp_path: Path
    running: list[Scheduler] = field(default_factory=list)
    stopped: list[Scheduler] = field(default_factory=list)
    outcome: str = ""

    @property
    def server(self) -> FakeApiServer:
        return self.cluster.server

    def start(self, **overrides: Any) -> Scheduler:
        overrides.setdefault("engine", "cpsat")
        overrides.setdefault("quick_window", 0)  # every window to CP-SAT: the matrix exercises its plans
        sched = self.cluster.scheduler(fast_config(), fast_options(**overrides))
        self.running.append(sched)
        return sched

    def stop(self, sched: Scheduler) -> None:
        sched.stop()
        self.running.remove(sched)
        self.stopped.append(sched)

    def create(self, *objects: dict[str, Any]) -> None:
        self.cluster.create(*objects)

    def bind_behind_the_schedulers_back(self, name: str, node_name: str) -> None:
        """Bind as another scheduler would, straight to the API (no fault, no request log)."""
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "namespace": NS},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node_name}}
        answer = self.server.api.handle(Request("POST", f"/api/v1/namespaces/{NS}/pods/{name}/binding",
                                                body=json.dumps(body).encode()))
        assert answer.code == 201, answer


def _hold(run: Run, method: str, path: str) -> tuple[threading.Event, threading.Event]:
    """The first `method` request whose path matches `path` waits at the server until the second
    returned event is set (at most 30 s); the first is set when it arrives. A slow request that
    lasts until the test has done its part, where a fixed delay could end first on a loaded machine."""
    handle = run.server.api.handle
    release, seen = threading.Event(), threading.Event()

    def holding(request: Request) -> Any:
        if request.method == method and re.search(path, request.path) and not seen.is_set():
            seen.set()
            release.wait(30)
        return handle(request)

    run.monkeypatch.setattr(run.server.api, "handle", holding)
    return seen, release


def _assumed_in_state(sched: Scheduler, state: str) -> list[str]:
    return [k for k, a in sched.cache.assumed().items() if a.state == state]


def watch_cut_mid_event(run: Run) -> None:
    """A pods watch is cut halfway through the JSON of one event: the informer resumes from the
    last complete event and gets the cut one again."""
    armed = threading.Event()
    armed.set()
    original = Handler._write_event

    def cut_once(self: Handler, type_: str, obj: dict[str, Any]) -> None:
        if armed.is_set() and (obj.get("metadata") or {}).get("name") == "cut-me":
            armed.clear()
            data = json.dumps({"type": type_, "object": obj}).encode() + b"\n"
            self.wfile.write(b"%x\r\n%s" % (len(data), data[: len(data) // 2]))
            self.wfile.flush()
            raise ConnectionResetError("watch cut mid-event")
        original(self, type_, obj)

    run.monkeypatch.setattr(Handler, "_write_event", cut_once)
    sched = run.start()
    run.create(*workload(count=4), pod("cut-me", cpu="500m"), *workload("late", count=3), pod("huge", cpu="3"))
    assert wait_for(lambda: run.cluster.node_of("cut-me"))
    assert not armed.is_set()
    restarts = sched.metrics.watch_restarts.labels(resource="pods", reason="error")._value.get()
    assert restarts >= 1
    run.outcome = f"stream cut inside an event; {restarts:.0f} watch restart, event received again on resume"


def watch_dropped(run: Run) -> None:
    """Every watch is cut during a burst of pods, and the first reconnects fail."""
    sched = run.start()
    run.create(*workload(count=4))
    run.server.faults.fail("GET", r"/pods$", watch=True, status=500, count=3)
    dropped = run.server.faults.drop_watches()
    run.create(*workload("during", count=4), pod("huge", cpu="3"))
    assert wait_for(lambda: len(run.cluster.bound()) == 8)
    assert sched.metrics.watch_restarts.labels(resource="pods", reason="error")._value.get() >= 1
    run.outcome = f"{dropped} watches cut, 3 reconnects refused; resumed from the last resourceVersion"


def history_compacted(run: Run) -> None:
    """410 Gone: while the watches are down, pods come and go and the history is compacted, so
    resuming is impossible and the informers list again (seeing the deletions they missed)."""
    sched = run.start()
    run.create(*workload(count=6, cpu="1"))  # fills 6 CPU: nothing else fits until something leaves
    assert wait_for(lambda: len(run.cluster.bound()) == 6)
    run.server.faults.fail("GET", r"/pods$", watch=True, status=503, count=4)
    run.server.faults.drop_watches()
    run.cluster.core.delete_namespaced_pod("web-0", NS, grace_period_seconds=0)  # room the relist must show
    run.create(pod("after-gone", cpu="1"), pod("huge", cpu="3"))
    run.server.faults.compact()
    assert wait_for(lambda: run.cluster.node_of("after-gone"))
    expired = sched.metrics.watch_restarts.labels(resource="pods", reason="expired")._value.get()
    assert expired >= 1
    run.outcome = "relisted after 410; the deletion missed meanwhile freed the room for a new pod"


def apiserver_restart(run: Run) -> None:
    """The API server restarts (store kept) while binds are held in flight: they are cut unanswered."""
    sched = run.start()
    delay = run.server.faults.delay("POST", r"/binding$", seconds=1.0)
    run.create(*workload(count=6), pod("huge", cpu="3"))
    assert wait_for(lambda: len(_assumed_in_state(sched, BINDING)) >= 2)
    time.sleep(0.1)  # let the binds reach the server
    delay.remaining = 0
    run.server.faults.restart(keep_store=True, down_seconds=0.3)
    assert wait_for(lambda: len(run.cluster.bound()) == 6, timeout=SETTLE_SECONDS)
    cut = sum(1 for b in run.ledger.attempts() if b.status is None)
    assert cut >= 1
    run.outcome = f"{cut} binds cut unanswered by the restart; read back or kept uncertain, then bound once"


def bind_server_errors(run: Run) -> None:
    """500 on binding, more times in a row than one bind retries."""
    sched = run.start()
    run.server.faults.fail("POST", r"/binding$", status=500, count=10)
    run.create(*workload(count=6), pod("huge", cpu="3"))
    assert wait_for(lambda: len(run.cluster.bound()) == 6)
    errors = sched.metrics.binds.labels(result="error")._value.get()
    assert run.server.faults.injected["fail"] == 10 and errors >= 1
    run.outcome = f"10 × 500; {errors:.0f} binds gave up and were requeued, all bound later"


def bind_timeouts(run: Run) -> None:
    """Binds answered after the client's read timeout: the server commits them anyway, the retry
    gets a 409 for the scheduler's own bind, and reading the pod back shows it done."""
    run.monkeypatch.setattr(api_client, "REQUEST_TIMEOUT", (2.0, 0.25))
    sched = run.start()
    run.server.faults.delay("POST", r"/binding$", seconds=0.6, count=3)
    run.create(*workload(count=6), pod("huge", cpu="3"))
    assert wait_for(lambda: len(run.cluster.bound()) == 6 and sched.idle())
    timed_out = run.server.faults.injected["delay"]
    assert timed_out == 3
    run.outcome = f"{timed_out} binds timed out client-side but landed; retries got 409, read back as ours"


def bind_timeout_then_server_errors(run: Run) -> None:
    """A bind times out client-side and lands late at the server; meanwhile its retries get 500s, the
    read-back shows the pod still unbound, and the scheduler forgets the assumption. The room must
    not be handed to another pod while the timed-out request can still land."""
    run.monkeypatch.setattr(api_client, "REQUEST_TIMEOUT", (2.0, 0.25))
    first, commit = threading.Event(), threading.Event()
    handle = run.server.api.handle

    def slow_first_bind(request: Request) -> Any:
        if request.path.endswith("/pods/slow/binding") and not first.is_set():
            first.set()
            run.server.faults.fail("POST", r"/pods/slow/binding$", status=500, count=2)  # the retries
            # The server is slow: this one commits long after the client gave up, once the test has
            # seen the scheduler give up (a fixed 1.2 s here was outrun by a loaded machine's retries).
            commit.wait(30)
        return handle(request)

    run.monkeypatch.setattr(run.server.api, "handle", slow_first_bind)
    # the uncertain room is kept until the watch shows the outcome or this long: longer than a
    # loaded machine takes to decide the rival, so the rival meets the reservation
    sched = run.start(queue=QueueSettings(initial_backoff=1.0, max_backoff=2.0, max_unschedulable=30.0),
                      uncertain_bind_ttl=30.0)
    run.create(pod("filler", cpu="2"))  # one of the two nodes is full: one 2-CPU room is left
    assert wait_for(lambda: len(run.cluster.bound()) == 1)
    run.create(pod("slow", cpu="2"))

    def bind_gave_up() -> bool:
        refused = [b for b in run.ledger.attempts() if b.pod == f"{NS}/slow" and b.status == 500]
        assumption = sched.cache.assumption(f"{NS}/slow")
        return len(refused) == 2 and (assumption is None or assumption.state != BINDING)

    try:
        assert wait_for(bind_gave_up, timeout=10.0)
        assert run.cluster.node_of("slow") is None  # the first attempt has not landed yet
        assert _assumed_in_state(sched, UNCERTAIN) == [f"{NS}/slow"]  # its room stays reserved
        run.create(pod("rival", cpu="2"))  # arrives while the timed-out bind is still being processed
        assert wait_for(lambda: f"{NS}/rival" in sched.queue.unschedulable())  # it never got slow's room
    finally:
        commit.set()
    assert wait_for(lambda: run.cluster.node_of("slow"), timeout=10.0)  # the late commit
    assert wait_for(lambda: f"{NS}/rival" in sched.queue.unschedulable())
    assert run.cluster.node_of("rival") is None
    run.outcome = ("bind timed out, its retries got 500 and the read-back showed it unbound: kept uncertain, "
                   "so the rival was refused the room; then the first attempt landed late")


def _lose_bind_answer(run: Run, name: str, commit: Optional[threading.Event] = None) -> None:
    """The first bind of pod `name` is answered too late (the client times out, the server commits
    it 0.6 s later, or once `commit` is set), its retries get 503 and so does every read-back: its
    outcome is unknown."""
    run.monkeypatch.setattr(api_client, "REQUEST_TIMEOUT", (2.0, 0.25))
    handle = run.server.api.handle
    first = threading.Event()

    def slow_first_bind(request: Request) -> Any:
        if request.path.endswith(f"/pods/{name}/binding") and not first.is_set():
            first.set()
            run.server.faults.fail("POST", rf"/pods/{name}/binding$", status=503, count=2)  # the retries
            run.server.faults.fail("GET", rf"/pods/{name}$", status=503, count=3)  # every read-back attempt
            if commit is None:
                time.sleep(0.6)
            else:
                commit.wait(30)
        return handle(request)

    run.monkeypatch.setattr(run.server.api, "handle", slow_first_bind)


def bind_answer_lost_and_unreadable(run: Run) -> None:
    """A bind's answer is lost (the client times out; the server commits it late), its retries get
    503 and so does every read-back: the node stays reserved (uncertain) until the watch shows the
    pod bound. The pod's attempt must then end, or it stays "in flight" in the queue for ever and
    the scheduler never goes idle."""
    _lose_bind_answer(run, "unlucky")
    sched = run.start()
    run.create(*workload(count=4), pod("unlucky", cpu="500m"), pod("huge", cpu="3"))
    assert wait_for(lambda: sched.metrics.binds.labels(result="uncertain")._value.get() == 1)
    assert wait_for(lambda: run.cluster.node_of("unlucky"))  # the late commit
    assert wait_for(lambda: not sched.cache.is_assumed(f"{NS}/unlucky"))  # seen bound: the reservation ends
    run.outcome = "bind answer lost, retries and read-backs 503: kept uncertain until the watch showed it bound"


def bind_uncertain_past_ttl_watch_lagging(run: Run) -> None:
    """A bind's answer is lost and its read-backs fail (the commit lands late), and the pods watch
    stalls right at that commit for longer than the uncertain-bind time to live: when the time
    runs out, the pod is read back again and found bound, so its room is kept — not forgotten and
    given away while the watch catches up — and the bind is not sent again."""
    _lose_bind_answer(run, "unlucky")
    sched = run.start()
    gate, stalled = threading.Event(), threading.Event()
    gate.set()
    apply = sched.cache.apply

    def stalling(resource: Any, event_type: str, obj: dict[str, Any], **kw: Any) -> None:
        if not kw and resource is api_client.PODS and obj["metadata"]["name"] == "unlucky" \
                and (obj.get("spec") or {}).get("nodeName") and not stalled.is_set():
            stalled.set()
            gate.clear()
            gate.wait()  # the watch stalls here: the commit and everything after it wait
        apply(resource, event_type, obj, **kw)

    run.monkeypatch.setattr(sched.cache, "apply", stalling)
    key = f"{NS}/unlucky"
    run.create(pod("unlucky", cpu="500m"))
    assert wait_for(lambda: sched.metrics.binds.labels(result="uncertain")._value.get() == 1)
    assert wait_for(lambda: not gate.is_set())  # the late commit reached the watch, which stalls on it
    ttl = sched.options.uncertain_bind_ttl
    assert wait_for(lambda: not sched.cache.is_assumed(key), timeout=ttl + 3.0)  # the time ran out
    node = (sched.cache.pod(key) or None) and sched.cache.pod(key).spec.node_name  # type: ignore[union-attr]
    attempts = len([b for b in run.ledger.attempts() if b.pod == key])
    time.sleep(0.5)  # a forgotten pod would be decided and bound again by now
    again = len([b for b in run.ledger.attempts() if b.pod == key]) - attempts
    gate.set()
    assert node == run.cluster.node_of("unlucky") and again == 0
    run.outcome = (f"watch stalled past the {ttl:g}s time to live: read back at expiry, kept on {node}, "
                   "not bound again")


def pod_recreated_while_bind_uncertain(run: Run) -> None:
    """A bind's outcome is unknown (answer lost, read-backs 503), and meanwhile the pod is deleted and
    created again under the same name: the uncertain attempt ends with the deletion, and the new pod
    must then be scheduled, not dropped from the queue with the old attempt."""
    # The lost bind reaches the server only once the new pod is bound (it then meets a bound pod):
    # landing 0.6 s after it was sent, it could end the uncertainty (the watch shows the old pod
    # bound) before a loaded machine's test even saw it.
    late = threading.Event()
    _lose_bind_answer(run, "phoenix", commit=late)
    sched = run.start()
    run.create(pod("phoenix", cpu="500m"))
    try:
        assert wait_for(lambda: _assumed_in_state(sched, UNCERTAIN) == [f"{NS}/phoenix"])
        old = run.cluster.pod("phoenix")["metadata"]["uid"]  # type: ignore[index]
        run.cluster.core.delete_namespaced_pod("phoenix", NS, grace_period_seconds=0)
        run.create(pod("phoenix", cpu="500m"))
        assert wait_for(lambda: run.cluster.node_of("phoenix"), timeout=10.0)
    finally:
        late.set()
    assert run.cluster.pod("phoenix")["metadata"]["uid"] != old  # type: ignore[index]
    run.create(*workload(count=4), pod("huge", cpu="3"))
    run.outcome = "bind uncertain, the pod re-created under its name: the attempt ended, the new pod bound"


def bind_conflict(run: Run) -> None:
    """409: another scheduler really binds the pod (to another node) while ours is deciding it."""
    sched = run.start()
    sent, slow = _hold(run, "POST", r"/pods/contested/binding$")   # until the other scheduler has bound it
    run.create(*workload(count=4), pod("contested", cpu="100m"), pod("huge", cpu="3"))
    try:
        assert wait_for(sent.is_set)   # our bind is at the server
        ours = sched.cache.assumption(f"{NS}/contested").node  # type: ignore[union-attr]
        theirs = next(n for n in ("n1", "n2", "n3") if n != ours)
        run.bind_behind_the_schedulers_back("contested", theirs)
    finally:
        slow.set()
    assert wait_for(lambda: sched.metrics.binds.labels(result="conflict")._value.get() == 1)
    assert run.cluster.node_of("contested") == theirs
    assert [b.status for b in run.ledger.attempts() if b.pod == f"{NS}/contested"] == [409]
    run.outcome = f"409 (bound to {theirs} by another scheduler); read back, the winner's binding kept"


def pod_deleted_while_deciding(run: Run, *, read_back_fails: bool = False) -> None:
    """404: the pod is deleted while its window is being decided, and the scheduler's pods watch is
    down, so the bind is the first to find out (with `read_back_fails`, reading it back fails too:
    the node stays reserved until the watch shows the deletion, and the pod's attempt must end)."""
    sched = run.start()
    if read_back_fails:
        run.server.faults.fail("GET", r"/pods/doomed$", status=503, count=3)
    decide = sched.decide
    state: dict[str, Any] = {}

    def deciding(snapshot: Any, window: list[Any]) -> Any:
        if any(qp.key == f"{NS}/doomed" for qp in window) and "blocked" not in state:
            state["blocked"] = run.server.faults.fail("GET", r"/pods$", watch=True, status=500, count=None)
            run.server.faults.drop_watches()
            run.cluster.core.delete_namespaced_pod("doomed", NS, grace_period_seconds=0)
        return decide(snapshot, window)

    run.monkeypatch.setattr(sched, "decide", deciding)
    run.create(pod("doomed", cpu="500m"))
    assert wait_for(lambda: any(b.pod == f"{NS}/doomed" and b.status == 404 for b in run.ledger.attempts()))
    state["blocked"].remaining = 0  # the watch may come back now
    run.create(*workload(count=4), pod("huge", cpu="3"))
    if read_back_fails:
        assert wait_for(lambda: sched.metrics.binds.labels(result="uncertain")._value.get() == 1)
        assert wait_for(lambda: not sched.cache.is_assumed(f"{NS}/doomed"))  # the watch showed the deletion
        run.outcome = "bind answered 404, read-back 503 ×3: kept uncertain until the watch showed the deletion"
        return
    assert wait_for(lambda: sched.metrics.binds.labels(result="gone")._value.get() == 1)
    assert not sched.cache.is_assumed(f"{NS}/doomed")
    run.outcome = "bind answered 404, read back 404: assumption dropped, pod forgotten"


def pod_recreated_while_deciding(run: Run) -> None:
    """A pending pod is deleted and created again under the same name (as a StatefulSet does) while
    its window is being decided: the decision was made for the old pod, so its bind is refused (the
    UID is a precondition). The new pod must still be scheduled: it is a pending pod of ours. The
    status patch that would bring it back by accident (a pod update re-adds a pod the queue does
    not hold) fails here, as it may."""
    sched = run.start()
    decide = sched.decide
    state: dict[str, Any] = {}

    def deciding(snapshot: Any, window: list[Any]) -> Any:
        plan = decide(snapshot, window)
        if any(qp.key == f"{NS}/phoenix" for qp in window) and "old" not in state:
            state["old"] = snapshot.pod_by_key[f"{NS}/phoenix"].metadata.uid
            run.server.faults.fail("PATCH", r"/pods/phoenix/status$", status=500, count=None)
            run.cluster.core.delete_namespaced_pod("phoenix", NS, grace_period_seconds=0)
            run.create(pod("phoenix", cpu="500m"))
            assert wait_for(lambda: (p := sched.cache.pod(f"{NS}/phoenix")) is not None
                            and p.metadata.uid != state["old"])
        return plan

    run.monkeypatch.setattr(sched, "decide", deciding)
    run.create(pod("phoenix", cpu="500m"))
    assert wait_for(lambda: "old" in state)
    assert wait_for(lambda: run.cluster.node_of("phoenix"), timeout=5.0)
    assert run.cluster.pod("phoenix")["metadata"]["uid"] != state["old"]  # type: ignore[index]
    run.create(*workload(count=4), pod("huge", cpu="3"))
    run.outcome = "the pod was re-created under its name while deciding: the old decision refused, the new pod bound"


PREEMPTION = [priority_class("low", 10), priority_class("high", 1000),
              {**node("batch", cpu="2"), "spec": {"taints": [{"key": "dedicated", "value": "batch",
                                                                 "effect": "NoSchedule"}]}},
              toleration_pod("victim-0", cpu="1", node_name="batch", running=True, labels={"app": "victim"}),
              toleration_pod("victim-1", cpu="1", node_name="batch", running=True, labels={"app": "victim"}),
              pdb("victims", min_available=1, app="victim")]


def eviction_throttled(run: Run) -> None:
    """429 on eviction (as a PodDisruptionBudget refusal says it): the preemptor gives its room back,
    backs off, and preempts once the eviction goes through."""
    sched = run.start()
    run.server.faults.fail("POST", r"/eviction$", status=429, count=2,
                           message="Cannot evict pod as it would violate the pod's disruption budget.")
    run.create(*workload(count=4), toleration_pod("urgent", cpu="1", priority="high"), pod("huge", cpu="3"))
    assert wait_for(lambda: run.cluster.node_of("urgent") == "batch")
    refused = sched.metrics.evictions.labels(result="refused")._value.get()
    assert refused == 2
    victims = [v for v in ("victim-0", "victim-1") if run.cluster.pod(v) is None]
    assert len(victims) == 1  # one victim was enough; the refusals did not make it evict both
    run.outcome = f"{refused:.0f} evictions refused (429), preemptor backed off; then 1 victim evicted, preemptor bound"


SHARED_ROOM = [priority_class("low", 10), priority_class("mid", 100), priority_class("high", 1000),
               node("solo", cpu="2"),
               pod("victim", cpu="1", priority_class="low", node_name="solo", running=True),
               pod("keeper", cpu="1", priority_class="mid", node_name="solo", running=True)]


def eviction_throttled_room_shared(run: Run) -> None:
    """429 on eviction when the window gave the victim's room to two pods: the preemptor, and a pod
    that could not preempt anything itself. Neither may be bound while the victim still runs."""
    sched = run.start()
    run.server.faults.fail("POST", r"/eviction$", status=429, count=3,
                           message="Cannot evict pod as it would violate the pod's disruption budget.")
    run.create(pod("urgent", cpu="500m", priority_class="high"), pod("rider", cpu="500m"))
    assert wait_for(lambda: sched.metrics.evictions.labels(result="refused")._value.get() >= 1)
    assert wait_for(lambda: run.cluster.node_of("urgent") == "solo", timeout=10.0)
    assert run.cluster.pod("victim") is None
    run.outcome = "3 evictions refused; the preemptor and the pod sharing the victim's room bound after it left"


GIVEN_BACK = [priority_class("low", 10), priority_class("high", 1000), node("solo", cpu="2")]


def victim_given_back_while_deciding(run: Run) -> None:
    """500 on every attempt of a bind, while the next window is being decided: that window's
    snapshot showed the pod on its node (assumed), so the plan evicts it for a higher-priority pod;
    by the time the plan is acted on, the failed bind has given the pod back and it is pending.
    It must not be evicted then (the Eviction API would delete it), and the preemptor is retried.
    Windows wait for company here, as they all did before the adaptive window: the two pods then
    come back from their backoff into one window and the preemptor, of higher priority, goes
    first. (Taken at once, the given-back pod's shorter backoff ends first, it is bound, and the
    preemptor then evicts it, bound: legal too, but not the outcome this case pins down.)"""
    sched = run.start(adaptive_window=False)
    run.server.faults.delay("POST", r"/pods/waiting/binding$", seconds=0.3, count=1)
    run.server.faults.fail("POST", r"/pods/waiting/binding$", status=500, count=3)
    decide = sched.decide
    seen: dict[str, Any] = {}

    def deciding(snapshot: Any, window: list[Any]) -> Any:
        decision = decide(snapshot, window)
        if "victims" not in seen and any(qp.key == f"{NS}/urgent" for qp in window):
            seen["on node"] = snapshot.pod_by_key[f"{NS}/waiting"].spec.node_name
            seen["victims"] = [v.pod for v in decision.plan.preemptions] if decision is not None else []
            seen["given back"] = wait_for(lambda: not sched.cache.is_assumed(f"{NS}/waiting"))
        return decision

    run.monkeypatch.setattr(sched, "decide", deciding)
    run.create(pod("waiting", cpu="1500m", priority_class="low"))
    assert wait_for(lambda: sched.cache.is_assumed(f"{NS}/waiting"))
    run.create(pod("urgent", cpu="1", priority_class="high"))
    assert wait_for(lambda: run.cluster.node_of("urgent") == "solo")
    # the race was set up: the plan counted on evicting the assumed pod, given back before acting
    assert seen == {"on node": "solo", "victims": [f"{NS}/waiting"], "given back": True}
    assert run.cluster.pod("waiting") is not None and not run.cluster.node_of("waiting")
    assert [k for k, _ in run.ledger.evictions] == []
    run.outcome = ("the plan's victim had been given back (bind 500 ×3) before acting: not evicted, the "
                   "preemptor retried and bound without evicting anything, the pod left pending")


GANG_PREEMPTION = [priority_class("low", 10), priority_class("high", 1000), node("solo", cpu="2"),
                   pod("big", cpu="2", priority_class="low", node_name="solo", running=True),
                   pod_group("pair", min_member=2)]


def gang_member_deleted_while_awaiting_victims(run: Run) -> None:
    """A gang of two (minMember 2) preempts; while its eviction is slow, one member is deleted. The
    other must not be bound alone (a split gang): the gang is whole or not at all. Once the job
    creates the member again, the gang is placed whole."""
    sched = run.start()
    _, slow = _hold(run, "POST", r"/pods/big/eviction$")   # until the member is deleted
    run.create(pod("pair-0", cpu="1", priority_class="high", gang="pair"),
               pod("pair-1", cpu="1", priority_class="high", gang="pair"))
    try:
        assert wait_for(lambda: len(_assumed_in_state(sched, AWAITING_VICTIMS)) == 2)
        run.cluster.core.delete_namespaced_pod("pair-1", NS, grace_period_seconds=0)
    finally:
        slow.set()
    assert wait_for(lambda: run.cluster.pod("big") is None)  # the victim is gone: the room is free
    assert wait_for(lambda: f"{NS}/pair-0" in sched.queue.unschedulable(), timeout=5.0)
    assert run.cluster.node_of("pair-0") is None
    run.create(pod("pair-1", cpu="1", priority_class="high", gang="pair"))
    assert wait_for(lambda: run.cluster.node_of("pair-0") == "solo" and run.cluster.node_of("pair-1") == "solo")
    run.outcome = ("a gang member deleted while the gang awaited its victim: the other not bound alone; "
                   "the gang bound whole once the member was back")


def node_changed_while_deciding(run: Run) -> None:
    """The only node is cordoned and shrunk (a drain begins, the kubelet reserves more) while a window
    placing pods on it is being decided: the plan read the node as it was, and binding it now would
    put pods on a node that takes none and overcommit what it has left. The pods are decided again
    against the node as it is, and reported unschedulable."""
    sched = run.start()
    decide = sched.decide
    changed: list[bool] = []

    def deciding(snapshot: Any, window: list[Any]) -> Any:
        plan = decide(snapshot, window)
        if not changed:
            run.cluster.core.patch_node("solo", {"spec": {"unschedulable": True}})
            run.cluster.core.patch_node_status("solo", {"status": {"allocatable": {"cpu": "1"}}})
            assert wait_for(lambda: (n := sched.cache.node("solo")) is not None and n.spec.unschedulable
                            and n.allocatable["cpu"] == 1000)
            changed.append(True)
        return plan

    run.monkeypatch.setattr(sched, "decide", deciding)
    run.create(pod("late-0", cpu="800m"), pod("late-1", cpu="800m"))
    assert wait_for(lambda: changed)
    assert wait_for(lambda: set(sched.queue.unschedulable()) == {f"{NS}/late-0", f"{NS}/late-1"}, timeout=5.0)
    assert run.cluster.bound() == {}
    run.cluster.core.patch_node("solo", {"spec": {"unschedulable": False}})  # the drain is called off
    assert wait_for(lambda: len(run.cluster.bound()) == 1, timeout=5.0)  # 1 CPU left: room for one of them
    run.outcome = ("node cordoned and shrunk while deciding: the plan's binds withheld, pods reported unschedulable; "
                   "uncordoned, one bound in the room left")


def cycle_fails_after_assuming(run: Run) -> None:
    """A bug makes a cycle fail after its preemption was assumed (victims marked as evicting) and
    before the binder took it: the window goes back to the queue, and the victims, never asked to
    go, must be usable again, or every later attempt to preempt them is refused for ever."""
    sched = run.start()
    report = sched.report_unschedulable
    failed: list[str] = []

    def failing(snapshot: Any, window: list[Any], plan: Any) -> int:
        if plan.preemptions and not failed:
            failed.append(plan.preemptions[0].pod)
            raise RuntimeError("injected bug after assume")
        return report(snapshot, window, plan)

    run.monkeypatch.setattr(sched, "report_unschedulable", failing)
    run.create(toleration_pod("urgent", cpu="1", priority="high"))
    assert wait_for(lambda: run.cluster.node_of("urgent") == "batch", timeout=SETTLE_SECONDS)
    assert failed and [k for k, status in run.ledger.evictions if status == 201] == failed
    run.outcome = "cycle failed after assuming a preemption: victims unmarked, preempted on the next try"


def node_deleted_with_assumed_pods(run: Run) -> None:
    """A node is deleted while pods are assumed on it and their binds wait their turn (one bind at a
    time, each slow): none is sent to the node once the scheduler has seen it go, but the one
    already past its check."""
    sched = run.start(bind_concurrency=1)
    delay = run.server.faults.delay("POST", r"/binding$", seconds=0.15)
    run.create(*workload(count=6), pod("huge", cpu="3"))
    assert wait_for(lambda: len(sched.cache.assumed()) == 6)
    by_node = Counter(a.node for a in sched.cache.assumed().values())
    doomed = by_node.most_common(1)[0][0]
    run.cluster.core.delete_node(doomed)
    assert wait_for(lambda: not sched.cache.has_node(doomed))
    seen_gone = time.monotonic()
    delay.remaining = 0
    assert wait_for(lambda: sched.idle(), timeout=SETTLE_SECONDS)
    late = [b for b in run.ledger.attempts() if b.node == doomed and b.started > seen_gone]
    # A bind checks the node just before it is sent, so the one bind in flight (one at a time here)
    # may have passed its check a moment before the cache saw the node go and reach the server
    # after: on a loaded machine that moment is long enough. No bind is *decided* after it.
    assert len(late) <= 1, late
    landed = collect_orphans(run.cluster)  # binds already in flight landed on the deleted node
    gone = sched.metrics.binds.labels(result="node-gone")._value.get()
    assert gone >= 1
    run.outcome = (f"{by_node[doomed]} pods assumed on {doomed}; {gone:.0f} binds withheld and rescheduled, "
                   f"{landed} in flight landed (collected as PodGC would)")


LEASE_PATH = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/cpsat-scheduler"


def lease_lost(run: Run) -> None:
    """Mid-window, another holder takes the Lease by updating it: the scheduler stops binding within
    a retry period, lets the binds already sent finish, and leads again once the intruder's lease
    expires (it never renews)."""
    sched = run.start(leader_elect=True, bind_concurrency=1)
    assert wait_for(lambda: sched.elector.is_leader())
    run.server.faults.delay("POST", r"/binding$", seconds=0.1)
    run.create(*workload(count=8), pod("huge", cpu="3"))
    assert wait_for(lambda: len(sched.cache.assumed()) >= 6)
    _take_lease(run, "intruder")
    taken = time.monotonic()
    assert wait_for(lambda: not sched.elector.is_leader(), timeout=2.0)
    lost = time.monotonic()
    settings = sched.options.lease
    assert lost - taken <= settings.retry_period + 0.5
    assert wait_for(lambda: sched.elector.is_leader(), timeout=settings.duration + 3.0)
    back = time.monotonic()
    # nothing was sent while someone else held the lease, beyond a bind already on its way
    silent = [b for b in run.ledger.attempts() if lost + 0.05 < b.started < back]
    assert silent == []
    run.server.faults.clear()
    assert wait_for(lambda: len(run.cluster.bound()) == 8, timeout=SETTLE_SECONDS)
    run.outcome = (f"lost the lease {lost - taken:.2f}s after the takeover; no bind sent while not leading; "
                   f"led again after {back - taken:.1f}s")


FAILOVER = [priority_class("low", 10), priority_class("high", 1000), node("solo", cpu="2")]


def failover_with_lagging_watch(run: Run) -> None:
    """The leader binds a pod and hands over (stop, lease released) while the standby's pods watch
    lags behind: the standby's cache still shows that pod pending and its node empty. A new leader
    must not decide on such a view (here it would bind a second 1.5-CPU pod to a 2-CPU node): it
    lists the pods afresh before its first window, and so preempts the bound pod instead."""
    first = run.start(leader_elect=True)
    assert wait_for(lambda: first.elector.is_leader())
    second = run.start(leader_elect=True)
    gate = threading.Event()  # cleared: the second's pods watch is stuck (events wait, in order)
    gate.set()
    apply = second.cache.apply

    def lagging(resource: Any, event_type: str, obj: dict[str, Any], **kw: Any) -> None:
        if resource is api_client.PODS:
            gate.wait()
        apply(resource, event_type, obj, **kw)

    run.monkeypatch.setattr(second.cache, "apply", lagging)
    decide = first.decide

    def deciding(snapshot: Any, window: list[Any]) -> Any:
        if any(qp.key == f"{NS}/early" for qp in window) and gate.is_set():
            run.create(pod("urgent", cpu="1500m", priority_class="high"))  # not in this window
            assert wait_for(lambda: second.cache.pod(f"{NS}/urgent") is not None)
            gate.clear()  # from here on, the second sees nothing more of the pods
        return decide(snapshot, window)

    run.monkeypatch.setattr(first, "decide", deciding)
    run.create(pod("early", cpu="1500m", priority_class="low"))
    assert wait_for(lambda: run.cluster.node_of("early") == "solo")
    run.stop(first)
    assert wait_for(lambda: second.elector.is_leader())
    time.sleep(1.0)  # a new leader deciding on its stale view would have bound "urgent" by now
    overcommitted = list(run.ledger.overcommitted)
    gate.set()
    assert overcommitted == []
    assert wait_for(lambda: run.cluster.node_of("urgent") == "solo", timeout=SETTLE_SECONDS)
    assert run.cluster.pod("early") is None  # preempted: the room was early's, as the server knows
    run.outcome = ("handed over while the standby's pods watch lagged: the new leader listed the pods "
                   "before deciding, then preempted the bound pod instead of binding onto its room")


def lease_lost_while_deciding(run: Run) -> None:
    """The lease is taken while a window is being decided (before anything is assumed): the plan
    is dropped unacted — nothing assumed, no nomination, no bind — and the window's pods are
    decided again once the scheduler leads again."""
    sched = run.start(leader_elect=True)
    assert wait_for(lambda: sched.elector.is_leader())
    decide = sched.decide
    lost: list[float] = []

    def deciding(snapshot: Any, window: list[Any]) -> Any:
        plan = decide(snapshot, window)
        if not lost:
            _take_lease(run, "intruder")
            assert wait_for(lambda: not sched.elector.is_leader(), timeout=2.0)
            lost.append(time.monotonic())
        return plan

    run.monkeypatch.setattr(sched, "decide", deciding)
    run.create(*workload(count=6), pod("huge", cpu="3"))
    assert wait_for(lambda: lost, timeout=5.0)
    assert wait_for(lambda: sched.elector.is_leader(), timeout=sched.options.lease.duration + 3.0)
    back = time.monotonic()
    assert [b for b in run.ledger.attempts() if lost[0] < b.started < back] == []
    assert wait_for(lambda: len(run.cluster.bound()) == 6, timeout=SETTLE_SECONDS)
    run.outcome = f"lease taken during the decision: plan dropped unacted; led again after {back - lost[0]:.1f}s"


def lease_lost_before_preempting(run: Run) -> None:
    """The lease is taken right after a preemptor's unit was assumed, before the binder acts on it:
    nothing of that unit is written — no nomination, no eviction — until the scheduler leads again."""
    sched = run.start(leader_elect=True)
    assert wait_for(lambda: sched.elector.is_leader())
    act = sched.bind_or_evict
    lost: list[float] = []

    def acting(units: list[Any]) -> None:
        if not lost and any(u.victims for u in units):
            _take_lease(run, "intruder")
            assert wait_for(lambda: not sched.elector.is_leader(), timeout=2.0)
            lost.append(time.monotonic())
        act(units)

    run.monkeypatch.setattr(sched, "bind_or_evict", acting)
    run.create(pod("urgent", cpu="2", priority_class="high"))
    assert wait_for(lambda: lost, timeout=5.0)
    assert wait_for(lambda: sched.elector.is_leader(), timeout=sched.options.lease.duration + 3.0)
    back = time.monotonic()
    writes = [f"{r.method} {r.path} {r.body.decode()}" for r in run.server.requests.records
              if lost[0] < r.started < back and (r.path.endswith("/eviction") or b"nominatedNodeName" in r.body)]
    assert writes == []
    assert wait_for(lambda: run.cluster.node_of("urgent") == "solo", timeout=SETTLE_SECONDS)
    run.outcome = "lease taken between assume and acting: no nomination or eviction written until leading again"


def _take_lease(run: Run, holder: str) -> None:
    """Another candidate takes the lease by updating it (as after a missed renewal). A renewal by
    the scheduler between our read and our write makes the write conflict (409), as it would for a
    real rival: read again and retry, as a rival candidate does."""
    coordination = client.CoordinationV1Api(run.cluster.core.api_client)
    for _ in range(20):
        lease = coordination.read_namespaced_lease("cpsat-scheduler", NS)
        lease.spec.holder_identity = holder
        lease.spec.renew_time = now_micro()
        try:
            coordination.replace_namespaced_lease("cpsat-scheduler", NS, lease)
            return
        except client.ApiException as err:
            if err.status != 409:
                raise
    raise AssertionError("the lease kept changing under 20 attempts to take it")


def lease_lost_awaiting_victims(run: Run) -> None:
    """The lease is taken while a preemptor waits for its victim to terminate: the wait ends at
    once (the assumption is dropped, nothing is bound when the victim goes), since whoever leads
    next decides afresh; once the scheduler leads again, the preemptor is bound."""
    sched = run.start(leader_elect=True)
    assert wait_for(lambda: sched.elector.is_leader())
    run.server.kubelet.grace_seconds = 5.0  # the victim takes its time to stop
    run.create(toleration_pod("urgent", cpu="1", priority="high"))
    key = f"{NS}/urgent"
    assert wait_for(lambda: any(status == 201 for _, status in run.ledger.evictions))
    assert sched.cache.is_assumed(key)  # waiting for the victim, which is still terminating
    _take_lease(run, "intruder")
    assert wait_for(lambda: not sched.elector.is_leader(), timeout=2.0)
    assert wait_for(lambda: not sched.cache.is_assumed(key), timeout=2.0)  # not after the 5 s grace
    run.server.kubelet.grace_seconds = 0.05
    assert wait_for(lambda: sched.elector.is_leader(), timeout=sched.options.lease.duration + 3.0)
    assert wait_for(lambda: run.cluster.node_of("urgent") == "batch", timeout=SETTLE_SECONDS)
    run.outcome = "lease lost while the preemptor waited for its victim: the wait ended at once; bound after leading again"


def stop_mid_bind(run: Run) -> None:
    """`stop()` (what SIGTERM calls) while slow binds are in flight: they finish, nothing is left
    assumed that the server does not show bound, and a successor finishes the rest."""
    sched = run.start(leader_elect=True, bind_concurrency=2)
    assert wait_for(lambda: sched.elector.is_leader())
    run.server.faults.delay("POST", r"/binding$", seconds=0.3)
    run.create(*workload(count=8), pod("huge", cpu="3"))
    assert wait_for(lambda: run.server.faults.injected["delay"] >= 2)  # two binds reached the server
    on_the_wire = run.server.faults.injected["delay"]
    decided = set(sched.cache.assumed())
    run.stop(sched)
    assert decided <= set(run.cluster.bound())  # every decision taken was carried out, none cut
    assert all(b.status is not None for b in run.ledger.attempts())
    assert leaked(run.server, [sched], stopped=True) == []
    run.server.faults.clear()
    run.start(leader_elect=True)
    run.outcome = (f"stop with {on_the_wire} binds on the wire and {len(decided) - on_the_wire} queued: all "
                   "finished before stop returned; a successor took the lease")


def sigterm_mid_bind(run: Run) -> None:
    """SIGTERM to a `cpsat-scheduler run` process while slow binds are in flight."""
    server = run.server
    config = server.kubeconfig()
    path = run.tmp_path / "kubeconfig"
    path.write_text(json.dumps(config))
    proc = subprocess.Popen(
        [sys.executable, "-m", "adapters", "run", "--kubeconfig", str(path), "--engine", "cpsat", "--time-limit", "2",
         "--metrics-addr", "127.0.0.1:0", "--lease-namespace", NS, "--lease-duration", "3", "--renew-deadline", "2",
         "--retry-period", "0.2", "--window-wait", "20", "--bind-concurrency", "2"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "CPSAT_DEBUG": ""})
    try:
        # a new process on a loaded 2-core machine takes 10-20 s to import and take the lease
        assert wait_for(lambda: (server.store.get("leases", NS, "cpsat-scheduler") or {}).get("spec", {})
                        .get("holderIdentity"), timeout=120.0)
        server.faults.delay("POST", r"/binding$", seconds=0.5)
        run.create(*workload(count=8), pod("huge", cpu="3"))
        assert wait_for(lambda: server.faults.injected["delay"] >= 2, timeout=15.0)
        on_the_wire = server.faults.injected["delay"]
        term = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        exited = time.monotonic() - term
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "received SIGTERM; shutting down" in err and "scheduler stopped" in err
    attempts = run.ledger.attempts()
    assert attempts and all(b.status in (201, 409) for b in attempts)
    # the process waited for each answer: every pod it bound got its Scheduled event
    told = {(e.get("involvedObject") or {}).get("name") for e in run.cluster.events("Scheduled")}
    landed = [b.pod.split("/", 1)[1] for b in attempts if b.status == 201]
    assert set(landed) <= told
    assert server.store.get("leases", NS, "cpsat-scheduler")["spec"]["holderIdentity"] == ""  # released
    server.faults.clear()
    run.start(leader_elect=True)  # the successor
    run.outcome = (f"SIGTERM with {on_the_wire} binds on the wire: exit 0 after {exited:.1f}s, {len(landed)} binds "
                   "answered and reported before exit, lease released; a successor took over")


@dataclass(frozen=True)
class Case:
    name: str
    scenario: Callable[[Run], None]
    objects: tuple[dict[str, Any], ...] = tuple(NODES)


CASES = [
    Case("watch-cut-mid-event", watch_cut_mid_event),
    Case("watch-dropped", watch_dropped),
    Case("410-gone", history_compacted),
    Case("apiserver-restart", apiserver_restart),
    Case("bind-500", bind_server_errors),
    Case("bind-timeout", bind_timeouts),
    Case("bind-timeout-then-500", bind_timeout_then_server_errors, tuple(NODES[:2])),
    Case("bind-answer-lost-read-back-fails", bind_answer_lost_and_unreadable),
    Case("bind-uncertain-past-ttl-watch-lagging", bind_uncertain_past_ttl_watch_lagging),
    Case("pod-recreated-while-bind-uncertain", pod_recreated_while_bind_uncertain),
    Case("bind-409-other-scheduler", bind_conflict),
    Case("bind-404-deleted-while-deciding", pod_deleted_while_deciding),
    Case("bind-404-read-back-fails", functools.partial(pod_deleted_while_deciding, read_back_fails=True)),
    Case("pod-recreated-while-deciding", pod_recreated_while_deciding),
    Case("eviction-429", eviction_throttled, tuple(NODES + PREEMPTION)),
    Case("eviction-429-room-shared", eviction_throttled_room_shared, tuple(SHARED_ROOM)),
    Case("victim-given-back-while-deciding", victim_given_back_while_deciding, tuple(GIVEN_BACK)),
    Case("gang-member-deleted-awaiting-victims", gang_member_deleted_while_awaiting_victims,
         tuple(GANG_PREEMPTION)),
    Case("node-changed-while-deciding", node_changed_while_deciding, tuple(GIVEN_BACK)),
    Case("cycle-fails-after-assuming", cycle_fails_after_assuming, tuple(NODES + PREEMPTION)),
    Case("node-deleted-while-assumed", node_deleted_with_assumed_pods),
    Case("lease-lost-mid-window", lease_lost),
    Case("lease-lost-while-deciding", lease_lost_while_deciding),
    Case("failover-with-lagging-watch", failover_with_lagging_watch, tuple(FAILOVER)),
    Case("lease-lost-awaiting-victims", lease_lost_awaiting_victims, tuple(NODES + PREEMPTION)),
    Case("lease-lost-before-preempting", lease_lost_before_preempting,
         tuple(GIVEN_BACK + [pod("big", cpu="2", priority_class="low", node_name="solo", running=True)])),
    Case("stop-mid-bind", stop_mid_bind),
    Case("sigterm-mid-bind", sigterm_mid_bind),
]


@pytest.fixture
def run(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Run]:
    case: Case = request.param
    cluster = Cluster(case.objects)
    cluster.server.requests.keep()
    r = Run(cluster, Ledger(cluster.server), monkeypatch, tmp_path)
    yield r
    cluster.close()
    assert wait_for(lambda: not live_threads(), timeout=5.0), live_threads()


@pytest.mark.parametrize("run", [pytest.param(c, id=c.name) for c in CASES], indirect=True)
def test_fault(run: Run, request: pytest.FixtureRequest) -> None:
    case = request.node.callspec.params["run"]
    started = time.monotonic()
    case.scenario(run)
    run.server.faults.clear()
    verdict = judge(run.cluster, run.ledger, running=run.running)
    binds = sum(run.ledger.successful_binds().values())
    print(f"\nFAULT {case.name}: {run.outcome}; {binds} binds, {len(verdict.violations)} violations "
          f"{verdict.violations}, {time.monotonic() - started:.1f}s")
    assert verdict.violations == []
    assert binds >= 1


# --- the request log itself ------------------------------------------------------------------

def test_request_log_records_answers_and_cut_requests() -> None:
    cluster = Cluster([node("n1")])
    try:
        log = cluster.server.requests.keep()
        cluster.create(pod("a"), pod("b"))
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "a"}, "target": {"kind": "Node", "name": "n1"}}
        cluster.server.faults.disconnect("POST", r"/pods/b/binding$")
        cluster.core.create_namespaced_pod_binding("a", NS, body, _preload_content=False)
        with pytest.raises(Exception):
            cluster.core.create_namespaced_pod_binding("b", NS, {**body, "metadata": {"name": "b"}},
                                                       _preload_content=False, _request_timeout=2)
        binds = [(r.path.rsplit("/", 2)[1], r.status, r.fault) for r in log.records if r.path.endswith("/binding")]
        assert binds[0] == ("a", 201, None)
        assert binds[1] == ("b", None, "disconnect")
        assert [r.status for r in log.records if r.method == "POST" and r.path.endswith("/pods")] == [201, 201]
    finally:
        cluster.close()

"""The peer bench on contended snapshots, with preemption (issue 38): the same snapshot decided by
the real kube-scheduler 1.36 and by the project, on a real server.

    python -m tests.e2e.kube_peer SNAPSHOT.json [--limit 300] [--json OUT]
    python -m tests.e2e.kube_peer --nodes 20 --seed 3 [--no-live]      # a generated contended window

(starts and stops its own control plane; SNAPSHOT is a JSON List, e.g. written by
``python -m adapters.bench.workloads contended --scale quick --compact FILE``).

The snapshot is loaded (``Loader``): its PriorityClasses, Nodes (made Ready with its allocatable),
running pods bound as in the snapshot and Running, PodDisruptionBudgets with their status,
PodGroups (a ``scheduling.x-k8s.io`` PodGroup and its pods' label become the 1.36
``scheduling.k8s.io/v1alpha2`` PodGroup and ``spec.schedulingGroup``), then its pending pods.
Every loaded node carries the run's label and every pending pod a node selector on it, so other
nodes of the server are never candidates; both schedulers see the same objects. An object the
server refuses is reported with the server's message and the scenario is skipped.

Then one scheduler decides:

- ``kube-scheduler``: the real one, started once the scenario is loaded (profile ``kube-peer``,
  ``percentageOfNodesToScore: 100``);
- ``schedule`` (offline): the project's plan (``solver.schedule``, what ``cpsat-scheduler schedule``
  runs) on the objects as read back from the server before any scheduler ran, at 1 s and 10 s;
- ``run`` (live): ``cpsat-scheduler run`` as its own process, with its service account.

Without a kubelet, evicted pods would stay Terminating: the bench's watch finishes each graceful
deletion (``harness.PodRecorder``) and does nothing else. A scheduler has settled when every
pending pod is bound or marked unschedulable, no pod is terminating, and nothing changed for
``QUIET`` seconds; at ``--limit`` seconds it is stopped and reported as "did not settle".

Per scheduler (``Outcome``): pods running at the end per priority tier and the pending pods placed
per tier, evictions per priority, PDB violations (evictions beyond a budget's
``disruptionsAllowed``), gangs whole (placed at ``minCount`` or more) and broken, time to settle,
CPU seconds, and for kube-scheduler its evictions whose preemptor did not end up on the victim's
node (its asynchronous preemption: the room went to another pod, or to none).
"""

from __future__ import annotations

import argparse
import copy
import io
import json
import re
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

from kubernetes import client, config as kube_config
from kubernetes.client.exceptions import ApiException

from tests.e2e.controlplane import ControlPlane
from tests.e2e.controlplane.cluster import ensure_default_service_account
from tests.e2e.harness import LiveScheduler, PodRecorder, kube_scheduler_profile, settle, stop_process
from tests.e2e.kubelet_admission import plan_refusals

PROFILE = "kube-peer"              # the real kube-scheduler's profile (and the pending pods' schedulerName)
LIVE = "cpsat-scheduler"           # the live run's scheduler name
RUN_LABEL = "peer.cpsat.example/run"
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
QUIET = 4.0                        # seconds without change: settled
# kube-scheduler's client: its default 50 requests a second would make the bench measure the
# throttle on thousands of bindings, not the scheduler (the live bench's peer runs at 1000 too)
CLIENT = {"qps": 1000.0, "burst": 2000}
LIMIT = 300.0                      # seconds at most per scheduler
_PREEMPTED = re.compile(r"Preempted by pod (\S+) on node (\S+)")


# --------------------------------------------------------------------------- results


@dataclass
class Outcome:
    """What one scheduler did with one scenario."""

    scheduler: str                       # "kube-scheduler", "schedule 1s", "schedule 10s", "run"
    placed: dict[str, str] = field(default_factory=dict)        # pending pod key -> node
    evicted: list[str] = field(default_factory=list)           # pod keys: running, or pending placed then evicted
    settled: bool = True
    seconds: float = 0.0                 # to settle (kube-scheduler, run) or the solve's wall time
    cpu_seconds: Optional[float] = None
    status: str = ""                     # the plan's status (schedule): OPTIMAL, FEASIBLE, GREEDY_BETTER, ...
    solver_status: str = ""              # CP-SAT's own (OPTIMAL also when greedy's equal plan was returned)
    degraded: str = ""                   # the step the model degraded to at this size, if any
    misdirected: list[dict[str, str]] = field(default_factory=list)  # kube: victim, preemptor, node, preemptor's end
    preemptors: dict[str, list[str]] = field(default_factory=dict)   # kube: victim -> [preemptor, node] (its event)
    rule_breaks: list[str] = field(default_factory=list)  # kube: the project's validator on its outcome as a plan
    kubelet: list[str] = field(default_factory=list)           # pods a kubelet would refuse
    unsettled: list[str] = field(default_factory=list)         # did not settle: pods neither bound nor marked, terminating
    # filled by ``Scenario.summarize``
    tiers: dict[int, int] = field(default_factory=dict)        # priority -> pods running at the end
    placed_tiers: dict[int, int] = field(default_factory=dict)  # priority -> pending pods placed
    evicted_tiers: dict[int, int] = field(default_factory=dict)
    pdb_violations: int = 0
    placed_then_evicted: int = 0         # pending pods the scheduler bound, then evicted for others
    gangs_whole: int = 0
    gangs_broken: int = 0

    def vector(self) -> list[tuple[int, int]]:
        """The tiers from the highest priority down: what the lexicographic comparison reads."""
        return sorted(self.tiers.items(), key=lambda kv: -kv[0])


def compare(ours: Outcome, theirs: Outcome) -> int:
    """+1 if ``ours`` places more pending pods in the highest priority tier where the two differ,
    -1 if fewer, 0 if every tier is equal (lexicographic by priority, highest first)."""
    tiers = sorted(set(ours.placed_tiers) | set(theirs.placed_tiers), reverse=True)
    for t in tiers:
        a, b = ours.placed_tiers.get(t, 0), theirs.placed_tiers.get(t, 0)
        if a != b:
            return 1 if a > b else -1
    return 0


# --------------------------------------------------------------------------- scenarios


@dataclass
class Scenario:
    """A snapshot's objects, made loadable, and what the comparison needs to know of them."""

    name: str
    objects: list[dict[str, Any]]
    run: str = field(default_factory=lambda: uuid.uuid4().hex[:6])

    def pods(self) -> list[dict[str, Any]]:
        return [o for o in self.objects if o.get("kind") == "Pod"]

    def pending(self) -> list[dict[str, Any]]:
        return [p for p in self.pods() if not p["spec"].get("nodeName")]

    def running(self) -> list[dict[str, Any]]:
        return [p for p in self.pods() if p["spec"].get("nodeName")]

    def priority_of(self) -> dict[str, int]:
        classes = {o["metadata"]["name"]: int(o.get("value", 0)) for o in self.objects if o.get("kind") == "PriorityClass"}
        classes.setdefault("system-node-critical", 2000001000)
        classes.setdefault("system-cluster-critical", 2000000000)
        out = {}
        for p in self.pods():
            spec = p["spec"]
            value = spec.get("priority")
            if value is None:
                value = classes.get(spec.get("priorityClassName", ""), 0)
            out[key(p)] = int(value)
        return out

    def summarize(self, outcome: Outcome) -> Outcome:
        priority = self.priority_of()
        gone = set(outcome.evicted)
        outcome.tiers, outcome.placed_tiers, outcome.evicted_tiers = {}, {}, {}
        for p in self.running():
            if key(p) not in gone:
                _count(outcome.tiers, priority[key(p)])
        for k in outcome.evicted:
            _count(outcome.evicted_tiers, priority.get(k, 0))
        for k in outcome.placed:
            _count(outcome.tiers, priority[k])
            _count(outcome.placed_tiers, priority[k])
        outcome.placed_then_evicted = len(gone & {key(p) for p in self.pending()})
        outcome.pdb_violations = self._pdb_violations(gone)
        outcome.gangs_whole, outcome.gangs_broken = self._gangs(set(outcome.placed))
        return outcome

    def _pdb_violations(self, gone: set[str]) -> int:
        out = 0
        for pdb in (o for o in self.objects if o.get("kind") == "PodDisruptionBudget"):
            ns = pdb["metadata"]["namespace"]
            want = (pdb["spec"].get("selector") or {}).get("matchLabels") or {}
            hit = sum(1 for p in self.running() if key(p) in gone and p["metadata"]["namespace"] == ns
                      and all((p["metadata"].get("labels") or {}).get(k) == v for k, v in want.items()))
            out += max(0, hit - int((pdb.get("status") or {}).get("disruptionsAllowed", 0)))
        return out

    def _gangs(self, placed: set[str]) -> tuple[int, int]:
        whole = broken = 0
        for group in (o for o in self.objects if o.get("kind") == "PodGroup"):
            name, ns = group["metadata"]["name"], group["metadata"]["namespace"]
            need = int(group["spec"]["schedulingPolicy"]["gang"]["minCount"])
            members = [key(p) for p in self.pending() if p["metadata"]["namespace"] == ns
                       and (p["spec"].get("schedulingGroup") or {}).get("podGroupName") == name]
            got = sum(1 for m in members if m in placed)
            whole += got >= need
            broken += 0 < got < need
        return whole, broken


def _count(into: dict[int, int], tier: int) -> None:
    into[tier] = into.get(tier, 0) + 1


def key(pod: dict[str, Any]) -> str:
    return f"{pod['metadata'].get('namespace') or 'default'}/{pod['metadata']['name']}"


_SERVER_FIELDS = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "selfLink")


def prepare(name: str, items: Iterable[dict[str, Any]], run: Optional[str] = None) -> Scenario:
    """A snapshot's objects as the bench loads them: the server's own metadata fields dropped,
    coscheduling PodGroups made 1.36 PodGroups, every node labelled with the run and every pending
    pod selecting those nodes. Kinds the bench does not load (Deployments, ...) are left out."""
    scenario = Scenario(name, [])
    if run:
        scenario.run = run
    label = {RUN_LABEL: scenario.run}
    for item in items:
        obj = copy.deepcopy(item)
        meta = obj.setdefault("metadata", {})
        for f in _SERVER_FIELDS:
            meta.pop(f, None)
        kind = obj.get("kind")
        if kind == "Node":
            meta["labels"] = {**(meta.get("labels") or {}), **label}
        elif kind == "Pod":
            meta["labels"] = {**(meta.get("labels") or {}), **label}
            group = meta["labels"].pop(GROUP_LABEL, None)
            spec = obj["spec"]
            if group:
                spec["schedulingGroup"] = {"podGroupName": group}
            if not spec.get("nodeName"):
                spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **label}
                spec["schedulerName"] = PROFILE
                obj.pop("status", None)
        elif kind == "PodGroup":
            minimum = int((obj.get("spec") or {}).get("minMember") or
                          ((obj.get("spec") or {}).get("schedulingPolicy") or {}).get("gang", {}).get("minCount") or 1)
            obj = {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
                   "metadata": {"name": meta["name"], "namespace": meta.get("namespace") or "default"},
                   "spec": {"schedulingPolicy": {"gang": {"minCount": minimum}}}}
        elif kind not in ("PriorityClass", "PodDisruptionBudget"):
            continue
        scenario.objects.append(obj)
    return scenario


def with_scheduler(scenario: Scenario, scheduler: str) -> Scenario:
    """The same scenario with its pending pods named for ``scheduler``."""
    objects = copy.deepcopy(scenario.objects)
    for o in objects:
        if o.get("kind") == "Pod" and not o["spec"].get("nodeName"):
            o["spec"]["schedulerName"] = scheduler
    return Scenario(scenario.name, objects, scenario.run)


# --------------------------------------------------------------------------- loading


class Refused(Exception):
    """The server refused an object of the snapshot: ``str`` names it with the server's message."""


def _message(exc: ApiException) -> str:
    try:
        return str(json.loads(exc.body).get("message") or exc.reason)
    except (TypeError, ValueError):
        return str(exc.reason)


class Loader:
    """Puts scenarios on a running control plane and takes them off again."""

    def __init__(self, plane: ControlPlane) -> None:
        self.api = kube_config.new_client_from_config(str(plane.admin_kubeconfig))
        self.api.configuration.connection_pool_maxsize = 16
        self.api.rest_client.pool_manager.connection_pool_kw["maxsize"] = 16
        self.core = client.CoreV1Api(self.api)
        self.policy = client.PolicyV1Api(self.api)
        self.scheduling = client.SchedulingV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        self.pool = ThreadPoolExecutor(8)

    def close(self) -> None:
        self.pool.shutdown()
        self.api.close()

    def _each(self, fn: Callable[[dict[str, Any]], None], objs: list[dict[str, Any]]) -> None:
        for _ in self.pool.map(fn, objs):
            pass

    def load(self, scenario: Scenario) -> None:
        """Everything but the pending pods; raises ``Refused`` at the first object refused."""
        objs = scenario.objects
        try:
            self._classes([o for o in objs if o["kind"] == "PriorityClass"])
            for ns in sorted({o["metadata"].get("namespace") or "default" for o in objs if o["kind"] != "Node"
                              and o["kind"] != "PriorityClass"}):
                self._namespace(ns)
            self._each(self._node, [o for o in objs if o["kind"] == "Node"])
            self._each(self._running, [o for o in objs if o["kind"] == "Pod" and o["spec"].get("nodeName")])
            for o in objs:
                if o["kind"] == "PodDisruptionBudget":
                    self._pdb(o)
                elif o["kind"] == "PodGroup":
                    self.custom.create_namespaced_custom_object("scheduling.k8s.io", "v1alpha2",
                                                                o["metadata"]["namespace"], "podgroups", o)
        except _Named as exc:
            raise Refused(str(exc)) from None

    def pending(self, scenario: Scenario) -> None:
        """The pending pods, in the snapshot's order (creation order is the queue's tie-break)."""
        for o in scenario.pending():
            self._create_pod(o)

    def _classes(self, classes: list[dict[str, Any]]) -> None:
        for o in classes:
            try:
                self.scheduling.create_priority_class(o)
            except ApiException as exc:
                if exc.status != 409:
                    raise _Named(f"PriorityClass {o['metadata']['name']}: {_message(exc)}") from None
                found = self.scheduling.read_priority_class(o["metadata"]["name"])
                if found.value != o.get("value"):
                    raise _Named(f"PriorityClass {o['metadata']['name']}: exists with value {found.value}, "
                                 f"the snapshot has {o.get('value')}") from None

    def _namespace(self, ns: str) -> None:
        try:
            self.core.create_namespace({"metadata": {"name": ns}})
        except ApiException as exc:
            if exc.status != 409:
                raise _Named(f"Namespace {ns}: {_message(exc)}") from None
        ensure_default_service_account(self.core, ns)

    def _node(self, o: dict[str, Any]) -> None:
        name = o["metadata"]["name"]
        try:
            self.core.create_node({k: v for k, v in o.items() if k != "status"})
            status = o.get("status") or {}
            now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            self.core.patch_node_status(name, {"status": {
                **{k: v for k, v in status.items() if k in ("capacity", "allocatable", "images", "nodeInfo")},
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "peer bench",
                                "lastHeartbeatTime": now, "lastTransitionTime": now}]}})
            spec = o.get("spec") or {}
            self.core.patch_node(name, {"spec": {"taints": spec.get("taints") or None,
                                                 "unschedulable": spec.get("unschedulable")}})
        except ApiException as exc:
            raise _Named(f"Node {name}: {_message(exc)}") from None

    def _create_pod(self, o: dict[str, Any]) -> None:
        ns = o["metadata"].get("namespace") or "default"
        try:
            self.core.create_namespaced_pod(ns, {k: v for k, v in o.items() if k != "status"})
        except ApiException as exc:
            raise Refused(f"Pod {ns}/{o['metadata']['name']}: {_message(exc)}") from None

    def _running(self, o: dict[str, Any]) -> None:
        ns, name = o["metadata"].get("namespace") or "default", o["metadata"]["name"]
        try:
            self.core.create_namespaced_pod(ns, {k: v for k, v in o.items() if k != "status"})
            now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            status = o.get("status") or {}
            self.core.patch_namespaced_pod_status(name, ns, {"status": {
                "phase": "Running", "startTime": status.get("startTime") or now,
                "conditions": status.get("conditions") or [{"type": "Ready", "status": "True", "lastTransitionTime": now}]}})
        except ApiException as exc:
            raise _Named(f"Pod {ns}/{name}: {_message(exc)}") from None

    def _pdb(self, o: dict[str, Any]) -> None:
        ns, name = o["metadata"]["namespace"], o["metadata"]["name"]
        try:
            self.policy.create_namespaced_pod_disruption_budget(ns, {k: v for k, v in o.items() if k != "status"})
            status = dict(o.get("status") or {})
            status["observedGeneration"] = 1
            self.policy.patch_namespaced_pod_disruption_budget_status(name, ns, {"status": status})
        except ApiException as exc:
            raise _Named(f"PodDisruptionBudget {ns}/{name}: {_message(exc)}") from None

    def read_back(self, scenario: Scenario) -> list[dict[str, Any]]:
        """The scenario's objects as the server holds them: what the project's plan reads."""
        sel = f"{RUN_LABEL}={scenario.run}"
        out: list[dict[str, Any]] = []
        for pc in self.scheduling.list_priority_class().items:
            out.append(self._plain(pc, "PriorityClass", "scheduling.k8s.io/v1"))
        out += [self._plain(n, "Node", "v1") for n in self.core.list_node(label_selector=sel).items]
        out += [self._plain(p, "Pod", "v1") for p in self.core.list_pod_for_all_namespaces(label_selector=sel).items]
        for ns in self._namespaces(scenario):
            out += [self._plain(b, "PodDisruptionBudget", "policy/v1")
                    for b in self.policy.list_namespaced_pod_disruption_budget(ns).items]
            for g in self.custom.list_namespaced_custom_object("scheduling.k8s.io", "v1alpha2", ns, "podgroups")["items"]:
                out.append({**g, "kind": "PodGroup", "apiVersion": "scheduling.k8s.io/v1alpha2"})
        return out

    def _plain(self, obj: Any, kind: str, api_version: str) -> dict[str, Any]:
        out = self.api.sanitize_for_serialization(obj)
        out["kind"], out["apiVersion"] = kind, api_version
        return dict(out)

    @staticmethod
    def _namespaces(scenario: Scenario) -> list[str]:
        return sorted({o["metadata"].get("namespace") or "default" for o in scenario.objects
                       if o["kind"] in ("Pod", "PodDisruptionBudget", "PodGroup")})

    def pods(self, scenario: Scenario) -> dict[str, Any]:
        return {key(self._plain(p, "Pod", "v1")): p
                for p in self.core.list_pod_for_all_namespaces(label_selector=f"{RUN_LABEL}={scenario.run}").items}

    def clear(self, scenario: Scenario) -> None:
        """Every object of the scenario gone (PriorityClasses and namespaces stay)."""
        sel = f"{RUN_LABEL}={scenario.run}"
        for ns in self._namespaces(scenario):
            _quietly(lambda: self.core.delete_collection_namespaced_pod(ns, label_selector=sel, grace_period_seconds=0))
            for b in self.policy.list_namespaced_pod_disruption_budget(ns).items:
                _quietly(lambda: self.policy.delete_namespaced_pod_disruption_budget(b.metadata.name, ns))
            _quietly(lambda: self.custom.delete_collection_namespaced_custom_object(
                "scheduling.k8s.io", "v1alpha2", ns, "podgroups"))
        _quietly(lambda: self.core.delete_collection_node(label_selector=sel))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.core.list_pod_for_all_namespaces(label_selector=sel, limit=1).items:
            time.sleep(0.3)


class _Named(Exception):
    pass


def _quietly(call: Callable[[], Any]) -> None:
    try:
        call()
    except ApiException:
        pass


# --------------------------------------------------------------------------- the schedulers


def _pod_state(loader: Loader, scenario: Scenario) -> Callable[[], tuple[Any, ...]]:
    """A reading of the scenario's pods: (pending pods bound, pending pods marked unschedulable,
    pods gone, pods terminating). A pending pod gone was bound by the scheduler, then evicted
    for a pod of higher priority (without its controller, nothing creates it again)."""
    pending = {key(p) for p in scenario.pending()}
    running = {key(p) for p in scenario.running()}

    def read() -> tuple[Any, ...]:
        pods = loader.pods(scenario)
        bound = frozenset((k, p.spec.node_name) for k, p in pods.items() if k in pending and p.spec.node_name)
        marked = frozenset(k for k, p in pods.items() if k in pending and not p.spec.node_name and any(
            c.type == "PodScheduled" and c.status == "False" for c in (p.status.conditions or [])))
        gone = frozenset(k for k in running | pending if k not in pods)
        terminating = sum(1 for p in pods.values() if p.metadata.deletion_timestamp)
        return bound, marked, gone, terminating
    return read


def _settled(scenario: Scenario) -> Callable[[tuple[Any, ...]], bool]:
    pending = {key(p) for p in scenario.pending()}
    return lambda now: {k for k, _ in now[0]} | set(now[1]) | (set(now[2]) & pending) == pending and now[3] == 0


def _recorders(loader: Loader, scenario: Scenario) -> list[PodRecorder]:
    """The kubelet's part: each graceful deletion in the scenario's namespaces finished."""
    out = [PodRecorder(loader.api, ns) for ns in loader._namespaces(scenario)]
    for r in out:
        r.start()
    return out


def _watch(loader: Loader, scenario: Scenario, started: float, limit: float,
           cpu: Callable[[], Optional[float]], name: str) -> Outcome:
    """Settle and read what the scheduler did (its evictions: running pods gone)."""
    reading, since = settle(_pod_state(loader, scenario), _settled(scenario), quiet=QUIET, limit=limit)
    bound, marked, gone, terminating = reading
    done = _settled(scenario)(reading)
    outcome = Outcome(name, placed=dict(bound), evicted=sorted(gone), settled=done,
                      seconds=round((since if done else time.monotonic()) - started, 2), cpu_seconds=cpu())
    if not done:
        waiting = {key(p) for p in scenario.pending()} - {k for k, _ in bound} - set(marked) - set(gone)
        outcome.unsettled = sorted(waiting)[:20] + ([f"{terminating} terminating"] if terminating else [])
        outcome.unsettled.append(f"last change {round(time.monotonic() - since, 1)} s before the limit")
    return outcome


def _cpu_of(pid: int) -> Callable[[], Optional[float]]:
    from adapters.bench.live_target import process_cpu_seconds

    return lambda: process_cpu_seconds(pid)


def kube_decides(plane: ControlPlane, loader: Loader, scenario: Scenario, workdir: Path, *, limit: float = LIMIT,
                 loaded: bool = False) -> Outcome:
    """The real kube-scheduler, started once every pending pod exists, left to settle.
    ``loaded``: the caller loaded the scenario (its pending pods named for ``PROFILE``)."""
    if not loaded:
        loader.load(scenario)
        loader.pending(scenario)
    recorders = _recorders(loader, scenario)
    uids = {p.metadata.uid: k for k, p in loader.pods(scenario).items()}
    proc = None
    try:
        with open(workdir / f"kube-scheduler-{scenario.run}.log", "wb") as log:
            started = time.monotonic()
            proc = kube_scheduler_profile(plane, PROFILE, workdir, log, verbosity=1, percentageOfNodesToScore=100,
                                          clientConnection=CLIENT | {"kubeconfig": str(plane.kube_scheduler_kubeconfig)})
        outcome = _watch(loader, scenario, started, limit, _cpu_of(proc.pid), "kube-scheduler")
    finally:
        stop_process(proc)
        for r in recorders:
            r.stop()
    outcome.preemptors = _preemptors(loader, scenario, uids)
    outcome.misdirected = [{"victim": v, "preemptor": p, "node": n, "preemptor_ended": outcome.placed.get(p) or "pending"}
                           for v, (p, n) in sorted(outcome.preemptors.items())
                           if v in outcome.evicted and outcome.placed.get(p) != n]
    outcome.kubelet = [r.line() for r in _final_refusals(loader, scenario)]
    return scenario.summarize(outcome)


def _preemptors(loader: Loader, scenario: Scenario, uids: dict[str, str]) -> dict[str, list[str]]:
    """Each victim's preemptor and node, from its Preempted event ("Preempted by pod UID on node
    N"). An eviction whose preemptor did not end up bound on N (``Outcome.misdirected``) gave its
    room to another pod, or to none: kube-scheduler's asynchronous preemption."""
    out: dict[str, list[str]] = {}
    for ns in loader._namespaces(scenario):
        for e in loader.core.list_namespaced_event(ns).items:
            found = _PREEMPTED.match(e.message or "") if e.reason == "Preempted" else None
            if found:
                preemptor = uids.get(found.group(1)) or (f"{ns}/{e.related.name}" if e.related else found.group(1))
                out[f"{ns}/{e.involved_object.name}"] = [preemptor, found.group(2)]
    return out


def rule_breaks(scenario: Scenario, items: list[dict[str, Any]], kube: Outcome) -> list[str]:
    """The project's validator on kube-scheduler's outcome as a plan (its placements, its
    evictions with the preemptors their events name): the rules, as the project reads them,
    that kube's end state breaks (e.g. a hard spread skewed by a later pod or an eviction, which
    kube-scheduler checks only when the pod is placed)."""
    from models.plan import Assignment, Plan, PlanStats, Preemption, Unschedulable
    from solver import validate

    pending = {key(p) for p in scenario.pending()}
    running = {key(p) for p in scenario.running()}
    plan = Plan(assignments=tuple(Assignment(pod=k, node=n) for k, n in kube.placed.items()),
                preemptions=tuple(Preemption(pod=v, node=kube.preemptors.get(v, ["", ""])[1],
                                             preemptor=kube.preemptors.get(v, ["", ""])[0])
                                  for v in kube.evicted if v in running),
                unschedulable=tuple(Unschedulable(pod=k, message="left pending by kube-scheduler")
                                    for k in sorted(pending - set(kube.placed))),
                stats=PlanStats(engine="kube-scheduler", status="FEASIBLE"))
    return validate(_snapshot(scenario, items), plan, _config(1.0))


def _snapshot(scenario: Scenario, items: list[dict[str, Any]]) -> Any:
    from adapters.snapshot_io import read_snapshot

    text = json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    return read_snapshot(io.StringIO(text), label=scenario.name).snapshot


def _config(limit: float) -> Any:
    from models.config import SchedulerConfig

    return SchedulerConfig(scheduler_name=PROFILE).with_overrides(time_limit_seconds=limit)


def _final_refusals(loader: Loader, scenario: Scenario) -> list[Any]:
    from tests.e2e.kubelet_admission import refusals

    sel = f"{RUN_LABEL}={scenario.run}"
    nodes = [loader._plain(n, "Node", "v1") for n in loader.core.list_node(label_selector=sel).items]
    pods = [loader._plain(p, "Pod", "v1") for p in loader.pods(scenario).values()]
    return refusals(nodes, pods)


def project_plans(scenario: Scenario, items: list[dict[str, Any]], limits: Iterable[float]) -> list[Outcome]:
    """The project's offline plan (``solver.schedule``, as ``cpsat-scheduler schedule`` runs it)
    on the objects read back from the server, at each time limit."""
    from solver import schedule

    snapshot = _snapshot(scenario, items)
    nodes = [o for o in items if o["kind"] == "Node"]
    pods = [o for o in items if o["kind"] == "Pod"]
    out: list[Outcome] = []
    for limit in sorted(limits):
        proven = next((o for o in out if o.solver_status == "OPTIMAL" and not o.degraded), None)
        if proven is not None:
            # proven optimal at a shorter limit: a longer one cannot place more; not solved again
            out.append(replace(proven, scheduler=f"schedule {limit:g}s"))
            continue
        cfg = _config(limit)
        cpu = time.process_time()
        plan = schedule(snapshot, cfg)
        outcome = Outcome(f"schedule {limit:g}s", placed=plan.assignment_map(),
                          evicted=sorted({v.pod for v in plan.preemptions}), seconds=round(plan.stats.wall_time_s, 2),
                          cpu_seconds=round(time.process_time() - cpu, 2), status=plan.stats.status,
                          solver_status=plan.stats.solver_status or "", degraded=plan.stats.degraded or "")
        outcome.kubelet = [r.line() for r in plan_refusals(nodes, pods, outcome.placed, outcome.evicted)]
        out.append(scenario.summarize(outcome))
    return out


def live_decides(plane: ControlPlane, loader: Loader, scenario: Scenario, workdir: Path, *,
                 limit: float = LIMIT, time_limit: float = 10.0) -> Outcome:
    """``cpsat-scheduler run``, ready before the pending pods (named for it) are created."""
    live = with_scheduler(scenario, LIVE)
    loader.load(live)
    recorders = _recorders(loader, live)
    sched = None
    try:
        sched = LiveScheduler(plane, workdir / f"run-{scenario.run}.log", f"--time-limit={time_limit:g}")
        deadline = time.monotonic() + 180
        while not sched.ready() and time.monotonic() < deadline:
            time.sleep(0.5)
        started = time.monotonic()
        loader.pending(live)
        outcome = _watch(loader, live, started, limit, _cpu_of(sched.proc.pid), "run")
    finally:
        if sched is not None:
            sched.stop()
        for r in recorders:
            r.stop()
    outcome.kubelet = [r.line() for r in _final_refusals(loader, live)]
    return scenario.summarize(outcome)


# --------------------------------------------------------------------------- generated windows


def contended_window(nodes: int, seed: int) -> list[dict[str, Any]]:
    """A contended cluster of ``nodes`` nodes from the realistic generator of issue 34
    (``adapters.bench.contended_workload.cluster``: node pools, zones, racks, apps in four
    priority classes, spread, anti-affinity, node affinity, GPU pods, a gang per 40 nodes), made
    compact so that it loads in seconds: up to 14 running pods per node (6 past 100 nodes; the
    generator's ~30 would take many minutes to create on a server), each node's cpu and memory allocatable then cut
    to what its pods use over a random 70-90% (the generator's fill), about six pending pods per
    node, and a PodDisruptionBudget on a third of the apps with two or more running pods
    (``maxUnavailable: 1`` or ``minAvailable: 80%``, all pods healthy)."""
    import random

    from adapters.bench.contended_workload import cluster

    pending = max(12, 6 * nodes)
    per_node = 8 if nodes <= 100 else 4          # past 100 nodes, fewer running pods per node: it loads in minutes
    f = cluster(nodes, per_node, pending, max(3, pending // 12), max(3, nodes // 3), nodes // 40, seed)
    items = list(f.objects)
    rng = random.Random(seed)
    _fill(items, rng)
    apps: dict[str, int] = {}
    for o in items:
        if o["kind"] == "Pod" and o["spec"].get("nodeName") and o["metadata"]["namespace"] == "prod":
            app = (o["metadata"].get("labels") or {}).get("app")
            if app:
                apps[app] = apps.get(app, 0) + 1
    for app, count in sorted(apps.items()):
        if count < 2 or rng.random() > 1 / 3:
            continue
        spec: dict[str, Any] = {"selector": {"matchLabels": {"app": app}}}
        if rng.random() < 0.5:
            spec["maxUnavailable"], desired = 1, count - 1
        else:
            spec["minAvailable"], desired = "80%", -(-count * 4 // 5)
        items.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                      "metadata": {"name": f"{app}-pdb", "namespace": "prod"}, "spec": spec,
                      "status": {"currentHealthy": count, "desiredHealthy": desired, "expectedPods": count,
                                 "disruptionsAllowed": max(0, count - desired)}})
    return items


def _fill(items: list[dict[str, Any]], rng: Any) -> None:
    """Each node's cpu and memory allocatable (and capacity) cut to its pods' requests over a
    random 70-90%; the GPU pool keeps its GPUs."""
    from tests.e2e.kubelet_admission import pod_requests

    used: dict[str, dict[str, int]] = {}
    for o in items:
        if o["kind"] == "Pod" and o["spec"].get("nodeName"):
            into = used.setdefault(o["spec"]["nodeName"], {})
            for r, q in pod_requests(o).items():
                into[r] = into.get(r, 0) + q
    for o in items:
        if o["kind"] != "Node":
            continue
        fill = rng.uniform(0.70, 0.90)
        mine = used.get(o["metadata"]["name"], {})
        status = o["status"]
        cut = {"cpu": f"{max(1000, int(mine.get('cpu', 0) / fill))}m",
               "memory": str(max(2**30, int(mine.get("memory", 0) / fill)))}
        status["allocatable"] = {**status["allocatable"], **cut}
        status["capacity"] = {**status.get("capacity", status["allocatable"]), **cut}


# --------------------------------------------------------------------------- the bench


@dataclass
class BenchReport:
    scenario: str
    nodes: int
    running: int
    pending: int
    outcomes: list[Outcome] = field(default_factory=list)
    refused: str = ""           # the server's message naming the object it refused

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def bench(plane: ControlPlane, scenario: Scenario, workdir: Path, *, limits: Iterable[float] = (1.0, 10.0),
          live: bool = True, limit: float = LIMIT) -> BenchReport:
    """kube-scheduler, the offline plans and (``live``) ``run``, one after the other, each on
    the scenario loaded afresh."""
    report = BenchReport(scenario.name, sum(o["kind"] == "Node" for o in scenario.objects),
                         len(scenario.running()), len(scenario.pending()))
    loader = Loader(plane)
    try:
        try:
            loader.load(scenario)
            loader.pending(scenario)
        except Refused as exc:
            report.refused = str(exc)
            return report
        items = loader.read_back(scenario)
        kube = kube_decides(plane, loader, scenario, workdir, limit=limit, loaded=True)
        kube.rule_breaks = rule_breaks(scenario, items, kube)
        report.outcomes.append(kube)
        loader.clear(scenario)
        report.outcomes += project_plans(scenario, items, limits)
        if live:
            report.outcomes.append(live_decides(plane, loader, scenario, workdir, limit=limit))
    finally:
        loader.clear(scenario)
        loader.close()
    return report


def _tiers(values: dict[int, int], tiers: list[int]) -> str:
    return " / ".join(str(values.get(t, 0)) for t in tiers)


def render(report: BenchReport) -> str:
    if report.refused:
        return f"{report.scenario}: skipped, the server refused {report.refused}"
    tiers = sorted({t for o in report.outcomes for t in (*o.placed_tiers, *o.evicted_tiers)}, reverse=True)
    lines = [f"{report.scenario}: {report.nodes} nodes, {report.running} running pods, {report.pending} pending",
             f"tiers (priority, highest first): {' / '.join(map(str, tiers))}",
             f"{'scheduler':<15} {'placed per tier':<24} {'placed':>6} {'evicted per tier':<22} {'PDB viol.':>9} "
             f"{'gangs whole/broken':>18} {'settle s':>9} {'CPU s':>6} {'status':<10} {'kubelet':>7}"]
    for o in report.outcomes:
        settle_s = f"{o.seconds:.1f}" if o.settled else f"did not settle ({o.seconds:.0f})"
        cpu = "-" if o.cpu_seconds is None else f"{o.cpu_seconds:.1f}"
        lines.append(f"{o.scheduler:<15} {_tiers(o.placed_tiers, tiers):<24} {len(o.placed):>6} "
                     f"{_tiers(o.evicted_tiers, tiers):<22} {o.pdb_violations:>9} "
                     f"{f'{o.gangs_whole}/{o.gangs_broken}':>18} {settle_s:>9} {cpu:>6} {o.status:<10} {len(o.kubelet):>7}")
    kube = next((o for o in report.outcomes if o.scheduler == "kube-scheduler"), None)
    if kube and kube.rule_breaks:
        lines.append(f"kube-scheduler: its end state breaks {len(kube.rule_breaks)} rule(s) as the project reads "
                     f"them, e.g. {kube.rule_breaks[0]}")
    if kube and kube.misdirected:
        lines.append(f"kube-scheduler: {len(kube.misdirected)} eviction(s) whose preemptor did not end on the "
                     f"victim's node, e.g. {kube.misdirected[0]}")
    for o in report.outcomes:
        if o.placed_then_evicted:
            lines.append(f"{o.scheduler}: {o.placed_then_evicted} pending pod(s) placed, then evicted for others "
                         "(counted among the evictions, not among the placed)")
        if not o.settled:
            lines.append(f"{o.scheduler}: did not settle in the limit; waiting: {', '.join(o.unsettled)}")
        for line in o.kubelet[:3]:
            lines.append(f"{o.scheduler}: {line}")
    return "\n".join(lines)


def _read_items(path: str) -> list[dict[str, Any]]:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise SystemExit(_usage(f"{path}: cannot read a JSON snapshot: {exc}"))
    items = data.get("items") if isinstance(data, dict) else data
    if not isinstance(items, list) or not all(isinstance(i, dict) and "kind" in i for i in items):
        raise SystemExit(_usage(f"{path}: items: expected a list of Kubernetes objects (a JSON List)"))
    return items


def _usage(line: str) -> int:
    print(f"kube_peer: {line}", file=sys.stderr)
    return 2


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.e2e.kube_peer", description=__doc__.split("\n\n")[0])
    parser.add_argument("snapshot", nargs="?", help="a JSON List of the cluster's objects")
    parser.add_argument("--nodes", type=int, default=20, help="without a snapshot: a generated contended window")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit", type=float, default=LIMIT, help="seconds a scheduler may take to settle")
    parser.add_argument("--time-limit", dest="limits", type=float, action="append",
                        help="the offline plan's CP-SAT limits (default 1 and 10)")
    parser.add_argument("--no-live", action="store_true", help="leave out cpsat-scheduler run")
    parser.add_argument("--json", help="write the report as JSON here")
    args = parser.parse_args(argv)
    if args.nodes < 1 or args.limit <= 0 or any(t <= 0 for t in args.limits or []):
        return _usage("--nodes, --limit and --time-limit must be positive")
    if args.snapshot:
        name, items = Path(args.snapshot).name, _read_items(args.snapshot)
    else:
        name, items = f"contended-{args.nodes}n-s{args.seed}", contended_window(args.nodes, args.seed)
    scenario = prepare(name, items)
    with tempfile.TemporaryDirectory(prefix="kube-peer-") as tmp:
        plane = ControlPlane(Path(tmp) / "plane")
        try:
            plane.start()
            report = bench(plane, scenario, Path(tmp), limits=args.limits or (1.0, 10.0), live=not args.no_live,
                           limit=args.limit)
        finally:
            plane.stop()
    print(render(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report.to_json(), indent=1))
    return 3 if report.refused else 0


if __name__ == "__main__":
    sys.exit(main())

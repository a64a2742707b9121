"""A contended scenario of the peer bench (``kube_peer``) and the peer table (``peer_table``):
a snapshot's objects made loadable on a real server (``prepare``), generated contended windows
(``contended_window``), and how what a scheduler did with one is counted (``Outcome``,
``Scenario.summarize``, ``compare``)."""

from __future__ import annotations

import copy
import uuid
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional

PROFILE = "kube-peer"              # the real kube-scheduler's profile (and the pending pods' schedulerName)
RUN_LABEL = "peer.cpsat.example/run"
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


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
    pod selecting those nodes, and the ReplicaSet each pod names as its controller (``_owners``).
    Kinds the bench does not load (Deployments, ...) are left out."""
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
        elif kind == "ReplicaSet":
            meta["labels"] = {**(meta.get("labels") or {}), **label}
            obj.pop("status", None)
        elif kind not in ("PriorityClass", "PodDisruptionBudget"):
            continue
        scenario.objects.append(obj)
    scenario.objects += _owners(scenario.objects, label)
    return scenario


def _owners(objects: list[dict[str, Any]], label: dict[str, str]) -> list[dict[str, Any]]:
    """A ReplicaSet for each one the pods name as their controller and the snapshot lacks.
    kube-scheduler gives a pod the system default spread (PodTopologySpread's scores) only when
    it finds that ReplicaSet, and takes its selector; the project, whose snapshots hold no
    ReplicaSets, takes the pod's own labels (``pod_topology_spread.score.default_selector``).
    Without these, the two scored the same pod differently (issue 38). Each one selects the
    labels its pods all share, with ``replicas: 0``: no controller runs, and it makes no pod."""
    have = {(o["metadata"].get("namespace") or "default", o["metadata"]["name"])
            for o in objects if o.get("kind") == "ReplicaSet"}
    shared: dict[tuple[str, str], dict[str, str]] = {}
    for pod in objects:
        if pod.get("kind") != "Pod":
            continue
        meta = pod["metadata"]
        owner = next((r for r in meta.get("ownerReferences") or [] if r.get("controller")), None)
        if owner is None or owner.get("kind") != "ReplicaSet" or owner.get("apiVersion") != "apps/v1":
            continue
        at = (meta.get("namespace") or "default", owner["name"])
        if at in have:
            continue
        labels = meta.get("labels") or {}
        before = shared.get(at)
        shared[at] = dict(labels) if before is None else {k: v for k, v in before.items() if labels.get(k) == v}
    return [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
             "metadata": {"name": name, "namespace": ns, "labels": dict(label)},
             "spec": {"replicas": 0, "selector": {"matchLabels": labels},
                      "template": {"metadata": {"labels": labels},
                                   "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]}}}}
            for (ns, name), labels in sorted(shared.items()) if labels]


def with_scheduler(scenario: Scenario, scheduler: str) -> Scenario:
    """The same scenario with its pending pods named for ``scheduler``."""
    objects = copy.deepcopy(scenario.objects)
    for o in objects:
        if o.get("kind") == "Pod" and not o["spec"].get("nodeName"):
            o["spec"]["schedulerName"] = scheduler
    return Scenario(scenario.name, objects, scenario.run)


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

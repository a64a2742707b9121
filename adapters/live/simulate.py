"""`cpsat-scheduler run --simulate SNAPSHOT`: the live scheduler against a local API server.

Someone without a cluster should still see the live scheduler work. The simulation starts
the in-memory API server (`adapters.apiserver`) with the snapshot's nodes and running pods,
lets the snapshot's pending pods for this scheduler arrive over time (through the API
server's own create path, admission included) and runs the unchanged scheduler against it
over HTTP with the official client — the very code that runs in a cluster. Bindings,
evictions and unschedulable pods are printed as they happen.

The server serves the gang APIs of the snapshot's Kubernetes release (``served_gang_apis``):
1.36's by default, 1.37's (``scheduling.k8s.io/v1beta1`` and ``v1alpha3``) when the snapshot
holds a PodGroup, Workload or CompositePodGroup of those versions, so the scheduler reads the
groups in the version it would pick on that cluster.

It ends by itself once every pod has arrived and nothing is left to do (every remaining pod
is unschedulable), or after `--duration`. At the end the final state is replayed through the
plan validator: every pod this scheduler bound, on its node, must pass every hard rule.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Optional, TextIO

from models import Assignment, ClusterSnapshot, InputError, Plan, PlanStats, Pod, SchedulerConfig, Unschedulable
from models.group_api import WorkloadTemplates
from models.group_claims import group_claims, share_group_claims
from models.snapshot import pod_group_key
from models.workloads import CorePodGroup, Workload, workload_pod_groups

from .binder import Placement, Victim
from .convert import parse_object
from .group_trees import GroupTrees, Resolved
from .defaults import DEFAULT_ARRIVAL_RATE as DEFAULT_ARRIVAL_RATE  # re-exported
from .api_client import KubeApi, configured_client
from .options import LiveOptions
from .scheduler import Scheduler

# The scheduler must stay idle this long before the simulation calls it finished (seconds):
# long enough for a bind's watch event or a requeue to show up.
SETTLE_SECONDS = 0.5
# How long the simulated kubelet takes to start a bound pod and to stop a deleted one (seconds).
KUBELET_START_SECONDS = 0.05
KUBELET_GRACE_SECONDS = 0.5
# Kubernetes' own gang API (``adapters.gang_api``) and what the in-memory server serves of it
# (``adapters.apiserver.resources``): a 1.36 server's v1alpha2 PodGroup and v1alpha1 Workload, or
# a 1.37 server's v1beta1 PodGroup and Workload with v1alpha3 (CompositePodGroup). Volcano's
# PodGroup CRD beside either.
_GANG_GROUP = "scheduling.k8s.io"
_GANG_KINDS = frozenset({"PodGroup", "Workload", "CompositePodGroup"})
_VOLCANO_API = "scheduling.volcano.sh/v1beta1"
_GANG_APIS_1_36 = (f"{_GANG_GROUP}/v1alpha2", f"{_GANG_GROUP}/v1alpha1", _VOLCANO_API)
_GANG_APIS_1_37 = (f"{_GANG_GROUP}/v1beta1", f"{_GANG_GROUP}/v1alpha3", _VOLCANO_API)
_NEWER_VERSIONS = (f"{_GANG_GROUP}/v1beta1", f"{_GANG_GROUP}/v1alpha3")
# The version each release's PodGroups are stored in here (the first of its gang APIs).
_POD_GROUP_VERSIONS = ("v1beta1", "v1alpha2")
# Fields the API server sets; a pod submitted again must not carry them.
_SERVER_SET = ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generation", "deletionTimestamp",
               "deletionGracePeriodSeconds", "selfLink")


@dataclass
class SimulationResult:
    bound: dict[str, str] = field(default_factory=dict)
    evicted: list[str] = field(default_factory=list)
    unschedulable: dict[str, str] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)  # pods the API server did not accept
    violations: list[str] = field(default_factory=list)
    elapsed: float = 0.0
    ended: str = ""


def _is_pending_pod_of(obj: dict[str, Any], scheduler_name: str) -> bool:
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    meta = obj.get("metadata") or {}
    return (obj.get("kind") == "Pod" and spec.get("schedulerName") == scheduler_name and not spec.get("nodeName")
            and not meta.get("deletionTimestamp") and status.get("phase") not in ("Succeeded", "Failed"))


def _as_submitted(pod: dict[str, Any]) -> dict[str, Any]:
    """The pod as a user would create it: no server-set metadata, no status."""
    out = json.loads(json.dumps(pod))
    meta = out.setdefault("metadata", {})
    for key in _SERVER_SET:
        meta.pop(key, None)
    meta.setdefault("namespace", "default")
    out.pop("status", None)
    return out


def _creation_order(pod: dict[str, Any]) -> tuple:
    meta = pod.get("metadata") or {}
    return (str(meta.get("creationTimestamp") or ""), str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def served_gang_apis(objects: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], tuple[str, ...]]:
    """The gang APIs the in-memory server serves for `objects`, and `objects` as it stores them.

    A snapshot with a 1.37 group object (a ``scheduling.k8s.io`` PodGroup, Workload or
    CompositePodGroup in ``v1beta1`` or ``v1alpha3``) is served as a 1.37 server serves it: v1beta1
    PodGroups and Workloads, v1alpha3 CompositePodGroups. A real server keeps one object and
    serves it in every version it has on, so the scheduler reads each PodGroup and Workload in
    v1beta1 whatever version it was dumped in; the in-memory server keeps one storage per
    version, so a v1alpha3 PodGroup or Workload is stored as v1beta1 (the two read alike). 1.37
    no longer serves v1alpha2 PodGroups: such objects in a 1.37 snapshot are not loaded (the
    server says so on stderr) and their pods wait, as on that cluster. Any other snapshot is
    served 1.36's versions, as before.
    """
    newer = any(o.get("kind") in _GANG_KINDS and o.get("apiVersion") in _NEWER_VERSIONS for o in objects)
    if not newer:
        return objects, _GANG_APIS_1_36
    relabel = f"{_GANG_GROUP}/v1alpha3"
    stored = [{**o, "apiVersion": f"{_GANG_GROUP}/v1beta1"}
              if o.get("apiVersion") == relabel and o.get("kind") in ("PodGroup", "Workload") else o
              for o in objects]
    return stored, _GANG_APIS_1_37


def check_gang_api(asked: Optional[str], gang_apis: tuple[str, ...], snapshot: str) -> None:
    """`--gang-api` beside `--simulate`: the PodGroup version asked for must be the one the
    in-memory server stores this snapshot's PodGroups in (`served_gang_apis`: v1beta1 for a 1.37
    snapshot, v1alpha2 for 1.36's); any other is an InputError naming both, as against a cluster
    that does not serve it, rather than a run whose gangs all wait for a PodGroup never listed."""
    if asked is None:
        return
    served = next(api.rpartition("/")[2] for api in gang_apis
                  if api.startswith(f"{_GANG_GROUP}/") and api.rpartition("/")[2] in _POD_GROUP_VERSIONS)
    if asked != served:
        release = "1.37" if gang_apis == _GANG_APIS_1_37 else "1.36"
        raise InputError(snapshot, "--gang-api",
                         f"{_GANG_GROUP}/{asked} is not served by the simulated server, which serves this snapshot's"
                         f" PodGroups in {_GANG_GROUP}/{served} (Kubernetes {release}'s); drop --gang-api or pick"
                         f" {served}")


def final_state_violations(objects: list[dict[str, Any]], bound: dict[str, str], config: SchedulerConfig) -> list[str]:
    """Replay what this scheduler bound on the cluster's final state through the validator.

    The pods it bound (and that still run where it put them) are taken off their nodes and
    handed to the validator as a plan that puts them back: an overcommitted node, a broken
    affinity or spread constraint or a split gang produced by the live binds is reported,
    one line each. Namespaces give the labels a namespaceSelector matches, as the live cache
    reads them. Kubernetes' own PodGroups are read as the live cache reads them: their
    trees and own priority classes resolved (``_group_trees``), their members' entries of a
    group-owned claim pointed at the group's claim (``models.group_claims``).
    """
    import solver

    parsed: dict[str, list[Any]] = {"Node": [], "Pod": [], "PodDisruptionBudget": [], "PriorityClass": [],
                                    "PodGroup": [], "Workload": [], "PersistentVolumeClaim": [],
                                    "PersistentVolume": [], "StorageClass": [], "CSINode": [], "DeviceClass": [],
                                    "ResourceSlice": [], "ResourceClaim": [], "ResourceClaimTemplate": [],
                                    "CompositePodGroup": [], "Namespace": []}
    replayed: dict[str, str] = {}
    for obj in objects:
        kind = str(obj.get("kind"))
        if kind not in parsed:
            continue
        model = parse_object(obj, kind)
        if kind == "Pod":
            pod: Pod = model  # type: ignore[assignment]
            if bound.get(pod.key) == pod.spec.node_name and not pod.is_terminating:
                replayed[pod.key] = pod.spec.node_name
                model = pod.model_copy(update={"spec": pod.spec.model_copy(update={"node_name": ""})})
        parsed[kind].append(model)
    refs = {(p.metadata.namespace, r.name, r.pod_group, r.pod_group_replica_key)
            for p in parsed["Pod"] if (r := p.spec.workload_ref) is not None}
    workloads = [w for w in parsed["Workload"] if isinstance(w, Workload)]  # 1.35's (1.37's hold templates only)
    core, trees = _group_trees(parsed)
    shared, made = group_claims(core, {t.key: t for t in parsed["ResourceClaimTemplate"]},
                                {c.key: c for c in parsed["ResourceClaim"]})
    groups = [*(g for g in parsed["PodGroup"] if not isinstance(g, CorePodGroup)),
              *(trees.groups.get(g.key) or g.pod_group() for g in core if g.key not in trees.problems),
              *workload_pod_groups(workloads, refs)]
    snapshot = ClusterSnapshot.build(nodes=parsed["Node"], pods=share_group_claims(parsed["Pod"], shared, pod_group_key),
                                     pdbs=parsed["PodDisruptionBudget"],
                                     priority_classes=parsed["PriorityClass"], pod_groups=groups,
                                     composite_groups=trees.composites, namespaces=parsed["Namespace"],
                                     pvcs=parsed["PersistentVolumeClaim"], pvs=parsed["PersistentVolume"],
                                     storage_classes=parsed["StorageClass"], csi_nodes=parsed["CSINode"],
                                     device_classes=parsed["DeviceClass"], resource_slices=parsed["ResourceSlice"],
                                     resource_claims=[*parsed["ResourceClaim"], *made],
                                     resource_claim_templates=parsed["ResourceClaimTemplate"])
    left = [p.key for p in snapshot.pending_pods(config.scheduler_name) if p.key not in replayed]
    plan = Plan(assignments=tuple(Assignment(pod=k, node=n) for k, n in sorted(replayed.items())),
                unschedulable=tuple(Unschedulable(pod=k, message="still pending") for k in sorted(left)),
                stats=PlanStats(engine="live", status="REPLAY"))
    return solver.validate(snapshot, plan, config)


def _group_trees(parsed: dict[str, list[Any]]) -> tuple[list[CorePodGroup], Resolved]:
    """Kubernetes' own PodGroups of ``parsed``, and their trees and own priority classes resolved
    as the live cache resolves them (``group_trees``: a dump's reader's code, a refused tree left
    out, its pods left pending)."""
    core = [g for g in parsed["PodGroup"] if isinstance(g, CorePodGroup)]
    trees = GroupTrees()
    for group in core:
        trees.put_group(group.key, group)
    for composite in parsed["CompositePodGroup"]:
        trees.put_composite(composite.key, composite)
    templates = [w for w in parsed["Workload"] if isinstance(w, WorkloadTemplates)]
    classes = {c.metadata.name: c for c in parsed["PriorityClass"]}
    return core, trees.resolve((), lambda: templates, lambda: classes)


# The kinds the final state is replayed with (``final_state_violations``).
_REPLAYED_KINDS = frozenset({"Node", "Pod", "PodDisruptionBudget", "PriorityClass", "PodGroup", "Workload",
                             "CompositePodGroup", "PersistentVolumeClaim", "PersistentVolume", "StorageClass",
                             "CSINode", "DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate",
                             "Namespace"})


def _final_listing(server: Any) -> list[dict[str, Any]]:
    """Every object of a replayed kind the server stores, from every resource it serves: each
    gang API's storage too (scheduler-plugins', Volcano's, Kubernetes' own in the versions served),
    so the replay sees the groups the scheduler read. Each object keeps its apiVersion, which
    tells apart the kinds two APIs name alike (PodGroup)."""
    keys = list(dict.fromkeys(r.key for r in server.registry.resources if r.kind in _REPLAYED_KINDS))
    return [o for key in keys for o in server.store.list(key)]


class Simulation:
    """One simulated run; `run()` blocks until it ends and returns what happened."""

    def __init__(self, objects: list[dict[str, Any]], config: SchedulerConfig, options: LiveOptions, *,
                 arrival_rate: float = DEFAULT_ARRIVAL_RATE, duration: Optional[float] = None,
                 out: Optional[TextIO] = None, stop: Optional[threading.Event] = None,
                 gang_api: Optional[str] = None) -> None:
        self.config = config
        self.gang_api = gang_api  # the PodGroup version --gang-api asked for (check_gang_api), else None
        self.options = options
        self.arrival_rate = arrival_rate
        self.duration = duration
        self.out = out
        self.stop_event = stop or threading.Event()
        name = config.scheduler_name
        streamed = arrival_rate > 0
        objects, self.gang_apis = served_gang_apis(objects)
        self.arrivals = sorted((o for o in objects if streamed and _is_pending_pod_of(o, name)), key=_creation_order)
        self.preload = [o for o in objects if not (streamed and _is_pending_pod_of(o, name))]
        # the arriving pods' namespaces must exist before they do, as in a real cluster
        have = {(o.get("metadata") or {}).get("name") for o in objects if o.get("kind") == "Namespace"}
        for ns in sorted({(p.get("metadata") or {}).get("namespace") or "default" for p in self.arrivals} - have):
            self.preload.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        self.result = SimulationResult()
        self._print_lock = threading.Lock()
        self._t0 = time.monotonic()
        self._arrived: dict[str, float] = {}
        self._arrivals_done = threading.Event()

    def _say(self, line: str) -> None:
        if self.out is None:
            return
        with self._print_lock:
            self.out.write(f"{time.monotonic() - self._t0:7.2f}s  {line}\n")
            self.out.flush()

    def _bound(self, p: Placement) -> None:
        self.result.bound[p.key] = p.node
        self.result.unschedulable.pop(p.key, None)
        since = time.monotonic() - self._arrived.get(p.key, self._t0)
        verb = "would bind" if self.options.dry_run else "bound"
        self._say(f"{verb:<13} {p.key} -> {p.node}  ({since:.2f}s after arrival)")

    def _evicted(self, v: Victim) -> None:
        self.result.evicted.append(v.key)
        self._say(f"{'evicted':<13} {v.key} from {v.node} for {v.preemptor}")

    def _unschedulable(self, key: str, message: str) -> None:
        if self.result.unschedulable.get(key) != message:
            self._say(f"{'unschedulable':<13} {key}: {message}")
        self.result.unschedulable[key] = message

    def run(self) -> SimulationResult:
        from adapters.apiserver import FakeApiServer
        from adapters.apiserver.api import Request
        from adapters.apiserver.errors import ApiError

        server = FakeApiServer(self.preload, kubelet_start_seconds=KUBELET_START_SECONDS,
                               kubelet_grace_seconds=KUBELET_GRACE_SECONDS, resourceclaim_controller=True,
                               gang_apis=self.gang_apis).start()
        api = KubeApi(configured_client(server.client_configuration()))
        api.gang_api = self.gang_api
        scheduler = Scheduler(api, self.config, self.options, on_bound=self._bound, on_evicted=self._evicted,
                              on_unschedulable=self._unschedulable)
        nodes = sum(1 for o in self.preload if o.get("kind") == "Node")
        preloaded = sum(1 for o in self.preload if _is_pending_pod_of(o, self.config.scheduler_name))
        if self.out is not None:
            self.out.write(f"simulating {server.url}: {nodes} nodes; {preloaded} pending pods for "
                           f"{self.config.scheduler_name} at the start, {len(self.arrivals)} arriving at "
                           f"{self.arrival_rate:g}/s; serving {', '.join(self._gang_versions())}\n")
        try:
            scheduler.start()
            scheduler.wait_synced(10.0)
            self._t0 = time.monotonic()
            feeder = threading.Thread(target=self._feed, args=(server, Request, ApiError), name="cpsat-live-sim-feed",
                                      daemon=True)
            feeder.start()
            self.result.ended = self._wait(scheduler)
            self.stop_event.set()
            feeder.join(5.0)
        finally:
            scheduler.stop()
            self.result.elapsed = time.monotonic() - self._t0
            objects = _final_listing(server)
            api.close()
            server.stop()
        if not self.options.dry_run:
            self.result.violations = final_state_violations(objects, self.result.bound, self.config)
        return self.result

    def _gang_versions(self) -> list[str]:
        """What the header line names of the served gang APIs: `scheduling.k8s.io/v1beta1, ...`."""
        return [api for api in self.gang_apis if api != _VOLCANO_API]

    def _feed(self, server: Any, request_cls: Any, api_error: Any) -> None:
        try:
            self._feed_all(server, request_cls, api_error)
        finally:
            self._arrivals_done.set()

    def _feed_all(self, server: Any, request_cls: Any, api_error: Any) -> None:
        interval = 1.0 / self.arrival_rate if self.arrival_rate > 0 else 0.0
        for i, pod in enumerate(self.arrivals):
            due = self._t0 + i * interval
            if self.stop_event.wait(max(0.0, due - time.monotonic())):
                break
            body = _as_submitted(pod)
            meta = body["metadata"]
            key = f"{meta['namespace']}/{meta.get('name')}"
            try:
                server.api.handle(request_cls("POST", f"/api/v1/namespaces/{meta['namespace']}/pods",
                                              body=json.dumps(body).encode()))
                self._arrived[key] = time.monotonic()
            except api_error as exc:
                message = str(exc.status.get("message") or exc)
                self.result.refused[key] = message
                self._say(f"{'not created':<13} {key}: {message}")

    def _wait(self, scheduler: Scheduler) -> str:
        idle_since: Optional[float] = None
        while True:
            if self.stop_event.wait(0.05):
                return "interrupted"
            now = time.monotonic()
            if self.duration is not None and now - self._t0 >= self.duration:
                return f"--duration {self.duration:g}s reached"
            if self._arrivals_done.is_set() and scheduler.idle():
                idle_since = idle_since or now
                if now - idle_since >= SETTLE_SECONDS:
                    return "every pod that can be placed is bound"
            else:
                idle_since = None

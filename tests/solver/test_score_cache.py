"""``ScoreCache`` against ``score_nodes``: the same totals for every pod greedy scores, and the
same greedy decisions with the cache on and off.

The check runs inside real greedy runs (the cache sees the state change pod by pod, through
preemption and gang rollbacks), over the benchmark workloads and over generated small clusters
that put every scoring input in play: PreferNoSchedule taints and tolerations, preferred node
affinity (``Gt`` included), images on nodes, extended resources and ephemeral storage (with nodes
that have none), soft spread with its policies and the system defaults, preferred pod affinity
both ways, every NodeResourcesFit strategy with random shapes, random plugin weights (0 too),
three-resource BalancedAllocation, every Kubernetes version and tie-break seeds. Each run is
repeated with the cache's small-update paths turned off, so both ways of bringing a cache up to
date are compared.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import solver.greedy as greedy_mod
from adapters.bench.parse import to_snapshot
from adapters.bench.workloads import WORKLOADS, generate
from models.config import SchedulerConfig
from models.objects import Node, Pod
from models.snapshot import DEFAULT_SCHEDULER_NAME, ClusterSnapshot
from solver.context import build_context
from solver.greedy import GreedyResult, schedule_greedy
from solver.scoring import score_nodes
from solver.scoring.cache import ScoreCache
from tests.builders import T0, make_snapshot, node_term, spread, term

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
RACK = "rack"
GPU = "example.com/gpu"
STORAGE = "ephemeral-storage"
MI = 1024 * 1024
APPS = ("a", "b", "c")


# --------------------------------------------------------------------------- the check


def _checking(scalar_refresh: int, recount_after: int) -> tuple[type, list[int]]:
    """A ScoreCache that compares every total with ``score_nodes`` and counts the pods."""
    calls = [0]

    class Checking(ScoreCache):
        def totals(self, pod, nodes):
            got = super().totals(pod, nodes)
            want = score_nodes(pod, nodes, self.state, self.sctx)
            calls[0] += 1
            assert got.dtype == want.dtype == np.int64
            assert got.tolist() == want.tolist(), f"{pod.key} on {np.asarray(nodes).tolist()}"
            return got

    Checking.scalar_refresh = scalar_refresh
    Checking.recount_after = recount_after
    return Checking, calls


def _decisions(result: GreedyResult) -> tuple:
    return (
        result.placements,
        result.unschedulable,
        [(v.pod.key, v.node, v.preemptor) for v in result.victims],
        result.nominations,
    )


def check_greedy(snapshot: ClusterSnapshot, config: SchedulerConfig, monkeypatch, window: Optional[list[str]] = None) -> int:
    """Greedy with the checking cache (both update paths) equals greedy without it; returns how
    many pods were scored. ``window``: only these pending pods."""
    ctx = build_context(snapshot, config, window_keys=window)
    reference = _decisions(schedule_greedy(ctx, score_cache=False))
    scored = 0
    for scalar_refresh, recount_after in ((ScoreCache.scalar_refresh, ScoreCache.recount_after), (0, 0)):
        checking, calls = _checking(scalar_refresh, recount_after)
        monkeypatch.setattr(greedy_mod, "ScoreCache", checking)
        assert _decisions(schedule_greedy(ctx)) == reference
        scored = calls[0]
    monkeypatch.undo()
    assert _decisions(schedule_greedy(ctx)) == reference  # the real cache, unpatched
    return scored


# --------------------------------------------------------------------------- benchmark workloads


@pytest.mark.parametrize("profile", ["default", "packing"])
@pytest.mark.parametrize("name", list(WORKLOADS))
def test_workloads_quick(name: str, profile: str, monkeypatch) -> None:
    snapshot = to_snapshot(generate(name, "quick").objects)
    scored = check_greedy(snapshot, SchedulerConfig(profile=profile), monkeypatch)
    assert scored > 0 or name == "preemption"


def test_workloads_quick_random_tie_break(monkeypatch) -> None:
    snapshot = to_snapshot(generate("mixed", "quick").objects)
    assert check_greedy(snapshot, SchedulerConfig(tie_break_seed=3), monkeypatch) > 0


@pytest.mark.parametrize("name", ["basic", "fragmentation", "mixed"])
def test_workloads_medium_sampled(name: str, monkeypatch) -> None:
    """About 1,000 nodes, so each pod scores only a sample of the feasible nodes (the walk
    rotating between pods); the first 300 pending pods keep the run short."""
    workload = generate(name, "medium")
    scored = check_greedy(to_snapshot(workload.objects), SchedulerConfig(), monkeypatch, window=workload.pending[:300])
    assert scored > 0


@pytest.mark.long
@pytest.mark.parametrize("name", ["fragmentation", "scale-3k"])
def test_workloads_medium_full(name: str, monkeypatch) -> None:
    snapshot = to_snapshot(generate(name, "medium").objects)
    assert check_greedy(snapshot, SchedulerConfig(), monkeypatch) > 0


# --------------------------------------------------------------------------- generated clusters

TAINTS = (
    {"key": "noisy", "value": "", "effect": "PreferNoSchedule"},
    {"key": "spot", "value": "yes", "effect": "PreferNoSchedule"},
    {"key": "old", "value": "", "effect": "PreferNoSchedule"},
    {"key": "dedicated", "value": "batch", "effect": "NoSchedule"},
)
TOLERATIONS = (
    {"key": "noisy", "operator": "Exists", "effect": "PreferNoSchedule"},
    {"key": "spot", "operator": "Equal", "value": "yes"},
    {"key": "old", "operator": "Exists", "effect": "NoSchedule"},  # does not cover PreferNoSchedule
    {"key": "dedicated", "operator": "Exists"},
    {"operator": "Exists"},
)
# Node-side names exactly as reported; pods name some untagged (":latest" is added).
NODE_IMAGES = (("nginx:1.25", 30 * MI), ("redis:latest", 300 * MI), ("busybox:latest", 2 * MI), ("reg.io/ml/model:v2", 2500 * MI))
POD_IMAGES = ("nginx:1.25", "redis", "busybox", "reg.io/ml/model:v2", "absent:1")


def _node(draw: Any, i: int) -> Node:
    labels: dict[str, str] = {}
    if draw(st.integers(0, 9)):
        labels[HOST] = f"n{i}"
    if draw(st.integers(0, 4)):
        labels[ZONE] = draw(st.sampled_from(("z0", "z1", "z2")))
    if draw(st.booleans()):
        labels[RACK] = draw(st.sampled_from(("r0", "r1")))
    if draw(st.booleans()):
        labels["disk"] = "ssd"
    labels["gen"] = draw(st.sampled_from(("3", "5", "7")))
    allocatable = {
        "cpu": draw(st.sampled_from(("1", "2", "2500m", "4", "8"))),
        "memory": draw(st.sampled_from(("2Gi", "4Gi", "8Gi", "32Gi"))),
        "pods": str(draw(st.sampled_from((3, 110, 110)))),
    }
    if draw(st.integers(0, 2)) == 0:
        allocatable[GPU] = str(draw(st.integers(0, 4)))
    if draw(st.integers(0, 2)) == 0:
        allocatable[STORAGE] = draw(st.sampled_from(("0", "10Gi", "100Gi")))
    taints = draw(st.lists(st.sampled_from(TAINTS), max_size=3, unique_by=lambda t: t["key"]))
    images = draw(st.lists(st.sampled_from(NODE_IMAGES), max_size=3, unique=True))
    return Node.model_validate(
        {
            "metadata": {"name": f"n{i}", "labels": labels},
            "spec": {"taints": taints, "unschedulable": draw(st.integers(0, 14)) == 0},
            "status": {"allocatable": allocatable, "images": [{"names": [n], "sizeBytes": s} for n, s in images]},
        }
    )


def _requests(draw: Any) -> dict[str, str]:
    out = {
        "cpu": draw(st.sampled_from(("0", "100m", "500m", "1", "2"))),
        "memory": draw(st.sampled_from(("0", "128Mi", "1Gi", "3Gi"))),
    }
    if draw(st.integers(0, 3)) == 0:
        out[GPU] = str(draw(st.integers(1, 2)))
    if draw(st.integers(0, 3)) == 0:
        out[STORAGE] = draw(st.sampled_from(("1Gi", "20Gi")))
    return {k: v for k, v in out.items() if v != "0" or draw(st.booleans())}


def _pod_affinity(draw: Any, app: str) -> dict[str, Any]:
    """Preferred (and now and then required) pod affinity / anti-affinity."""
    out: dict[str, Any] = {}
    for kind in ("podAffinity", "podAntiAffinity"):
        group: dict[str, Any] = {}
        if draw(st.integers(0, 3)) == 0:
            group["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {
                    "weight": draw(st.integers(1, 100)),
                    "podAffinityTerm": term({"app": draw(st.sampled_from((app, *APPS)))}, draw(st.sampled_from((HOST, ZONE, RACK)))),
                }
                for _ in range(draw(st.integers(1, 2)))
            ]
        if kind == "podAffinity" and draw(st.integers(0, 7)) == 0:
            group["requiredDuringSchedulingIgnoredDuringExecution"] = [term({"app": draw(st.sampled_from(APPS))}, ZONE)]
        if group:
            out[kind] = group
    return out


def _node_preferences(draw: Any) -> dict[str, Any]:
    choices = (
        node_term((ZONE, "In", ["z0", "z1"])),
        node_term(("disk", "Exists")),
        node_term(("gen", "Gt", ["4"])),
        node_term((RACK, "NotIn", ["r0"])),
        {},  # an empty term matches nothing
    )
    terms = draw(st.lists(st.sampled_from(choices), min_size=1, max_size=3))
    return {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": draw(st.integers(1, 100)), "preference": t} for t in terms
            ]
        }
    }


def _pod(
    name: str,
    *,
    app: str,
    requests: dict[str, str],
    node: Optional[str] = None,
    extra_labels: Optional[dict[str, str]] = None,
    owner: bool = False,
    images: tuple[str, ...] = ("",),
    init_image: Optional[str] = None,
    affinity: Optional[dict[str, Any]] = None,
    tolerations: tuple = (),
    spread_constraints: tuple = (),
    priority: int = 0,
    created: int = 0,
    terminating: bool = False,
) -> Pod:
    containers = [{"name": f"c{i}", "image": image} for i, image in enumerate(images)]
    containers[0]["resources"] = {"requests": requests}
    spec: dict[str, Any] = {"containers": containers, "schedulerName": DEFAULT_SCHEDULER_NAME, "priority": priority}
    if init_image is not None:
        spec["initContainers"] = [{"name": "init", "image": init_image}]
    if node is not None:
        spec["nodeName"] = node
    if affinity:
        spec["affinity"] = affinity
    if tolerations:
        spec["tolerations"] = list(tolerations)
    if spread_constraints:
        spec["topologySpreadConstraints"] = list(spread_constraints)
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": "default",
        "labels": {"app": app, **(extra_labels or {})},
        "creationTimestamp": (T0.replace(minute=created % 60, hour=created // 60)).isoformat(),
    }
    if owner:
        metadata["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"{app}-rs", "uid": app, "controller": True}]
    if terminating:
        metadata["deletionTimestamp"] = T0.isoformat()
    status = {"phase": "Running"} if node is not None else {}
    return Pod.model_validate({"metadata": metadata, "spec": spec, "status": status})


def _scoring(draw: Any) -> dict[str, Any]:
    strategy = draw(st.sampled_from(("LeastAllocated", "MostAllocated", "RequestedToCapacityRatio")))
    out: dict[str, Any] = {"strategy": strategy}
    if strategy == "RequestedToCapacityRatio":
        utils = sorted(draw(st.sets(st.integers(0, 100), min_size=1, max_size=4)))
        out["shape"] = [{"utilization": u, "score": draw(st.integers(0, 10))} for u in utils]
    names = ("cpu", "memory", GPU, STORAGE, "pods")  # "pods" is not scored: left out
    if draw(st.booleans()):
        chosen = draw(st.lists(st.sampled_from(names), min_size=1, max_size=4, unique=True))
        out["resources"] = [{"name": n, "weight": draw(st.integers(1, 3))} for n in chosen]
    if draw(st.booleans()):
        chosen = draw(st.lists(st.sampled_from(names[:4]), min_size=1, max_size=4, unique=True))
        out["balancedResources"] = [{"name": n} for n in chosen]
    if draw(st.booleans()):
        plugins = ("TaintToleration", "NodeAffinity", "PodTopologySpread", "InterPodAffinity",
                   "NodeResourcesFit", "NodeResourcesBalancedAllocation", "ImageLocality")
        out["weights"] = {p: draw(st.integers(0, 4)) for p in plugins}
    out["hardPodAffinityWeight"] = draw(st.integers(0, 2))
    return out


@st.composite
def scoring_windows(draw: Any) -> tuple[ClusterSnapshot, SchedulerConfig]:
    nodes = [_node(draw, i) for i in range(draw(st.integers(1, 8)))]
    names = [n.metadata.name for n in nodes]
    pods: list[Pod] = []
    for j in range(draw(st.integers(0, 6))):
        app = draw(st.sampled_from(APPS))
        pods.append(
            _pod(
                f"run-{j}",
                app=app,
                node=draw(st.sampled_from(names)),
                requests=_requests(draw),
                owner=draw(st.booleans()),
                affinity=_pod_affinity(draw, app),
                priority=draw(st.sampled_from((0, 10))),
                terminating=draw(st.integers(0, 9)) == 0,
            )
        )
    created = 0
    for t in range(draw(st.integers(1, 4))):
        app = draw(st.sampled_from(APPS))
        affinity = _pod_affinity(draw, app)
        if draw(st.integers(0, 2)) == 0:
            affinity.update(_node_preferences(draw))
        constraints = []
        for _ in range(draw(st.sampled_from((0, 0, 1, 2)))):
            constraints.append(
                spread(
                    draw(st.sampled_from((ZONE, HOST, RACK))),
                    {"app": draw(st.sampled_from((app, *APPS)))},
                    max_skew=draw(st.integers(1, 4)),
                    hard=draw(st.integers(0, 4)) == 0,
                    node_affinity_policy=draw(st.sampled_from((None, "Honor", "Ignore"))),
                    node_taints_policy=draw(st.sampled_from((None, "Honor", "Ignore"))),
                )
            )
        kw = dict(
            app=app,
            requests=_requests(draw),
            owner=draw(st.integers(0, 2)) > 0,
            images=tuple(draw(st.lists(st.sampled_from(("", *POD_IMAGES)), min_size=1, max_size=2))),
            init_image=draw(st.sampled_from((None, None, "busybox", "redis"))),
            affinity=affinity,
            tolerations=tuple(draw(st.lists(st.sampled_from(TOLERATIONS), max_size=2, unique_by=str))),
            spread_constraints=tuple(constraints),
            priority=draw(st.sampled_from((0, 10, 100))),
        )
        # Replicas that differ in a label no selector reads share a class but not the system
        # default spread selector (made of all their labels).
        hashes = draw(st.booleans())
        for r in range(draw(st.integers(1, 4))):
            extra = {"pod-template-hash": f"h{r % 2}"} if hashes else None
            pods.append(_pod(f"t{t}-{r}", extra_labels=extra, created=created, **kw))
            created += 1
    config = SchedulerConfig.model_validate(
        {
            "profile": draw(st.sampled_from(("default", "packing"))),
            "kubernetesVersion": draw(st.sampled_from(("1.31", "1.33", "1.34", "1.36"))),
            "scoring": _scoring(draw),
            "tieBreakSeed": draw(st.sampled_from((None, None, 1, 7))),
            "preemption": {"enabled": draw(st.booleans())},
        }
    )
    return make_snapshot(nodes, pods), config


@settings(
    max_examples=150,
    deadline=None,
    # monkeypatch is undone by check_greedy itself after every example.
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
@given(window=scoring_windows())
def test_generated_clusters(window, monkeypatch) -> None:
    snapshot, config = window
    check_greedy(snapshot, config, monkeypatch)

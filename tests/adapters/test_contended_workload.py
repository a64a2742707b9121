"""The contended real-shaped cluster (issue 34): a small instance is valid, shaped as stated, and
fixed by its seed; the benchmarked sizes are what the bench and its dump writer announce."""

from __future__ import annotations

from collections import Counter
from functools import lru_cache

import pytest

from adapters.bench import dump, generate, to_snapshot
from adapters.bench.bounds import statically_feasible
from adapters.bench.contended_workload import (
    AFFINITY_SHARE, ANTI_SHARE, GPU, POOL, PRIORITY_CLASSES, RACK, SPREAD_SHARE, cluster,
)
from adapters.bench.workloads import _main as write_workload
from adapters.snapshot_io import load_snapshot
from models import DEFAULT_SCHEDULER_NAME, POD_GROUP_LABEL, pod_requests

from .test_workloads import check_placement

# 60 nodes, ~30 running pods each, 600 pending pods of 40 Deployments, 20 running-only apps, 2 gangs.
SMALL = (60, 30, 600, 40, 20, 2)


@lru_cache(maxsize=None)
def small(seed: int = 0):
    objects = cluster(*SMALL, seed=seed).objects
    return objects, to_snapshot(objects)


def _share(pods, has) -> float:
    return sum(1 for p in pods if has(p)) / len(pods)


def _affinity(pod):
    return pod.spec.affinity


def test_small_instance_parses_and_running_pods_fit_their_nodes() -> None:
    """Capacity, taints, node affinity and hostname anti-affinity hold for the running pods."""
    _, snapshot = small()
    assert len(snapshot.nodes) == 60
    check_placement(snapshot, {}, set())
    nodes = snapshot.node_by_name
    for pod in snapshot.bound_pods():
        assert statically_feasible(pod, nodes[pod.spec.node_name]), pod.key


def test_nodes_are_filled_to_70_to_90_percent_by_about_30_pods() -> None:
    _, snapshot = small()
    used: Counter = Counter()
    count: Counter = Counter()
    for pod in snapshot.bound_pods():
        used[pod.spec.node_name] += pod_requests(pod)["cpu"]
        count[pod.spec.node_name] += 1
    cpu_nodes = [n for n in snapshot.nodes if GPU not in n.allocatable]
    fills = [used[n.name] / n.allocatable["cpu"] for n in cpu_nodes]
    assert max(fills) <= 0.9
    assert 0.6 <= sum(fills) / len(fills) <= 0.9
    assert 20 <= sum(count.values()) / len(snapshot.nodes) <= 40


def test_pools_zones_racks_and_a_tainted_gpu_pool() -> None:
    _, snapshot = small()
    labels = [n.metadata.labels for n in snapshot.nodes]
    assert len({lab["topology.kubernetes.io/zone"] for lab in labels}) == 3
    assert len({lab[RACK] for lab in labels}) >= 3
    assert {lab[POOL] for lab in labels} == {"general", "compute", "memory", "large", "gpu"}
    for node in snapshot.nodes:
        gpu = node.metadata.labels[POOL] == "gpu"
        assert (GPU in node.allocatable) == gpu
        assert [t.key for t in node.spec.taints] == ([GPU] if gpu else [])


def test_pending_pods_have_the_stated_shares_and_exceed_the_room() -> None:
    """About 20% zone spread, 10% hostname anti-affinity, 15% node affinity, GPU pods tolerating
    the taint, a few PodGroups, four priority classes; each Deployment its own request shape; the
    pending CPU requests exceed the free CPU."""
    objects, snapshot = small()
    pending = snapshot.pending_pods(DEFAULT_SCHEDULER_NAME)
    assert len(pending) == 600
    spread = _share(pending, lambda p: any(c.when_unsatisfiable == "DoNotSchedule" for c in p.spec.topology_spread_constraints))
    anti = _share(pending, lambda p: _affinity(p) is not None and _affinity(p).pod_anti_affinity is not None)
    node_affinity = _share(pending, lambda p: _affinity(p) is not None and _affinity(p).node_affinity is not None)
    assert spread == pytest.approx(SPREAD_SHARE, abs=0.05)
    assert anti == pytest.approx(ANTI_SHARE, abs=0.05)
    assert node_affinity == pytest.approx(AFFINITY_SHARE, abs=0.05)
    gpu = [p for p in pending if GPU in pod_requests(p)]
    assert gpu and all(any(t.key == GPU for t in p.spec.tolerations) for p in gpu)
    assert {p.metadata.labels.get(POD_GROUP_LABEL) for p in pending} - {None} == {"train-00", "train-01"}
    assert {p.spec.priority for p in pending} == {v for _, v in PRIORITY_CLASSES}
    assert {o["metadata"]["name"] for o in objects if o["kind"] == "PriorityClass"} == {n for n, _ in PRIORITY_CLASSES}
    apps = [p for p in pending if POD_GROUP_LABEL not in p.metadata.labels]
    shapes = {p.metadata.labels["app"]: tuple(sorted(pod_requests(p).items())) for p in apps}
    assert len(set(shapes.values())) == len(shapes) >= 30
    free = sum(n.allocatable["cpu"] for n in snapshot.nodes) - sum(pod_requests(p)["cpu"] for p in snapshot.bound_pods())
    assert sum(pod_requests(p)["cpu"] for p in pending) > free


def test_same_seed_same_objects_other_seed_other_objects() -> None:
    objects, _ = small(0)
    assert cluster(*SMALL, seed=0).objects == objects
    assert cluster(*SMALL, seed=1).objects != objects


def test_dump_is_a_snapshot_schedule_reads(tmp_path) -> None:
    objects, snapshot = small()
    path = dump(objects, tmp_path / "contended.yaml")
    loaded = load_snapshot(path)
    assert [p.key for p in loaded.pods] == [p.key for p in snapshot.pods]
    assert len(loaded.pod_groups) == 2


@pytest.mark.long
def test_quick_scale_is_the_300_node_cluster(tmp_path, capsys) -> None:
    """What ``python -m adapters.bench.workloads contended FILE`` writes (and ``bench -w contended``
    runs): 300 nodes, about 9,000 running pods, 3,000 pending."""
    meta = generate("contended", "quick", 0).metadata
    assert (meta["nodes"], meta["pods"]) == (300, 3000)
    assert 8000 <= meta["running"] <= 10000
    write_workload(["contended", str(tmp_path / "c.json"), "--compact"])
    assert "300 nodes" in capsys.readouterr().out

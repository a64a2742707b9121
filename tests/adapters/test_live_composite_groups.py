"""The live scheduler and Kubernetes 1.37's CompositePodGroups (``scheduling.k8s.io/v1alpha3``):
the cache watches them and gives a snapshot the trees a dump of the same objects gives; a tree
the dump's reader refuses is left out whole, logged once, and its pods wait saying why; and,
end to end over HTTP against the in-memory API server, a tree of two gangs is bound all or
nothing, its pods waiting for a CompositePodGroup created after them."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import pytest

from adapters.live.api_client import (COMPOSITE_PODGROUPS, CORE_PODGROUPS, DRA_RESOURCES, GANG_RESOURCES, NODES, PDBS,
                                      PODS, PRIORITY_CLASSES, VOLUME_RESOURCES, WORKLOADS)
from adapters.live.cache import ClusterCache
from adapters.live.group_trees import refused
from adapters.snapshot_io import read_snapshot
from models import InputError
from tests.adapters.live_harness import NS, Cluster, cluster_factory, fast_config, fast_options, node, pod, wait_for

V137 = ["scheduling.k8s.io/v1beta1", "scheduling.k8s.io/v1alpha3"]


def composite(name: str, *, min_groups: int = 0, parent: Optional[str] = None, ns: str = NS,
              topology_key: Optional[str] = None) -> dict[str, Any]:
    """A CompositePodGroup: ``gang`` of ``min_groups`` child groups (``basic`` for 0)."""
    policy: dict[str, Any] = {"gang": {"minGroupCount": min_groups}} if min_groups else {"basic": {}}
    spec: dict[str, Any] = {"schedulingPolicy": policy}
    if parent:
        spec["parentCompositePodGroupName"] = parent
    if topology_key:
        spec["schedulingConstraints"] = {"topology": [{"key": topology_key}]}
    return {"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
            "metadata": {"name": name, "namespace": ns}, "spec": spec}


def child(name: str, min_count: int, parent: str) -> dict[str, Any]:
    """A v1beta1 PodGroup naming CompositePodGroup ``parent``."""
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": name, "namespace": NS},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}, "parentCompositePodGroupName": parent}}


class Trees:
    """A listener that records what the cache says of group trees and gangs."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def pod_added(self, p: Any) -> None: ...
    def pod_updated(self, old: Any, new: Any) -> None: ...
    def pod_deleted(self, p: Any) -> None: ...
    def node_changed(self, old: Any, new: Any) -> None: ...
    def pdb_changed(self, old: Any, new: Any) -> None: ...
    def workload_changed(self, w: Any) -> None: ...

    def pod_group_changed(self, g: Any) -> None:
        self.calls.append(("group", g.key))

    def group_tree_changed(self, gangs: frozenset[str]) -> None:
        self.calls.append(("tree", sorted(gangs)))


def synced_cache(objects: list[dict[str, Any]]) -> ClusterCache:
    cache = ClusterCache()
    by_kind = {"Node": NODES, "Pod": PODS, "CompositePodGroup": COMPOSITE_PODGROUPS, "PodGroup": CORE_PODGROUPS}
    for resource in (NODES, PODS, PDBS, PRIORITY_CLASSES, *GANG_RESOURCES, COMPOSITE_PODGROUPS, *VOLUME_RESOURCES,
                     *DRA_RESOURCES):
        cache.replace(resource, [o for o in objects if by_kind.get(o["kind"]) is resource])
    return cache


def tree_objects() -> list[dict[str, Any]]:
    """Two gangs of two under a composite wanting both, inside a basic root."""
    return [composite("block"), composite("workers", min_groups=2, parent="block", topology_key="example.com/rack"),
            child("rank-0", 2, "workers"), child("rank-1", 2, "workers"),
            *[pod(f"rank-{g}-{i}", scheduling_group=f"rank-{g}") for g in range(2) for i in range(2)]]


def window(objects: list[dict[str, Any]]) -> list[str]:
    return [f"{NS}/{o['metadata']['name']}" for o in objects if o["kind"] == "Pod"]


def test_a_snapshot_holds_the_trees_a_dump_of_the_same_objects_gives(tmp_path: Path) -> None:
    objects = [node("n1"), *tree_objects()]
    path = tmp_path / "snap.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    from_file = read_snapshot(path).snapshot
    live = synced_cache(objects).snapshot(window(objects))
    assert live.composite_groups == from_file.composite_groups
    assert sorted(c.key for c in live.composite_groups) == [f"{NS}/block", f"{NS}/workers"]
    assert {g.key: g.spec for g in live.pod_groups} == {g.key: g.spec for g in from_file.pod_groups}
    assert live.pod_group_by_key[f"{NS}/rank-0"].spec.parent == f"{NS}/workers"


@pytest.mark.parametrize("name, broken, problem", [
    ("unknown parent", [composite("workers", min_groups=2, parent="nowhere")],
     'compositepodgroups/default/workers: spec.parentCompositePodGroupName: no CompositePodGroup "nowhere" in '
     "namespace default in the input"),
    ("cycle", [composite("workers", min_groups=2, parent="loop"), composite("loop", parent="workers")],
     "spec.parentCompositePodGroupName: the parents form a cycle: "),
    ("parent in another namespace", [composite("workers", min_groups=2), composite("top", ns="other"),
                                     composite("workers", ns="other", parent="top")],
     None),
    ("minGroupCount above the children", [composite("workers", min_groups=3)],
     "compositepodgroups/default/workers: spec.schedulingPolicy.gang.minGroupCount: 3 is above the 2 child group(s) "
     "naming it as their parent"),
])
def test_a_refused_tree_is_left_out_whole_and_its_pods_told_why(
        caplog: pytest.LogCaptureFixture, name: str, broken: list[dict[str, Any]], problem: Optional[str]) -> None:
    members = [child("rank-0", 2, "workers"), child("rank-1", 2, "workers"),
               *[pod(f"rank-{g}-{i}", scheduling_group=f"rank-{g}") for g in range(2) for i in range(2)]]
    alone = [child("solo", 1, "top-solo"), composite("top-solo"), pod("solo-0", scheduling_group="solo")]
    objects = [node("n1"), *broken, *members, *alone]
    with caplog.at_level(logging.WARNING, logger="adapters.live"):
        cache = synced_cache(objects)
        snapshot = cache.snapshot(window(objects))  # one bad tree stops no window
        cache.snapshot(window(objects))
    keys = {g.key for g in snapshot.pod_groups}
    if problem is None:  # the tree in the other namespace is fine; this one is whole and valid
        assert {f"{NS}/rank-0", f"{NS}/rank-1"} <= keys and cache.group_problem(f"{NS}/rank-0") is None
        return
    assert f"{NS}/rank-0" not in keys and f"{NS}/rank-1" not in keys
    assert [c.key for c in snapshot.composite_groups] == [f"{NS}/top-solo"]  # the other tree stays
    assert f"{NS}/solo" in keys and cache.group_problem(f"{NS}/solo") is None
    why = cache.group_problem(f"{NS}/rank-1")
    assert why is not None and why.startswith(f"PodGroup {NS}/rank-1 is in a group tree the scheduler cannot use")
    assert problem in why and cache.group_problem(f"{NS}/rank-0") == why.replace("rank-1 is", "rank-0 is")
    with pytest.raises(InputError) as dump:  # what the offline reader says of the same objects
        from adapters.reading.groups import read_groups
        read_groups([o for o in objects if o["kind"] != "Pod" and o["kind"] != "Node"], {})
    assert why == refused(f"{NS}/rank-1", str(dump.value))
    assert caplog.text.count("ignoring the group tree of") == 1  # logged once, not per snapshot
    assert any(name.startswith(COMPOSITE_PODGROUPS.name) for name, _ in cache.invalid)


def test_a_tree_fixed_is_used_again_and_forgotten_as_invalid() -> None:
    objects = [node("n1"), composite("workers", min_groups=2, parent="gone"), *tree_objects()[2:]]
    cache = synced_cache(objects)
    listener = Trees()
    cache.listener = listener
    assert cache.group_problem(f"{NS}/rank-0") is not None and cache.invalid
    cache.apply(COMPOSITE_PODGROUPS, "MODIFIED", composite("workers", min_groups=2))
    assert listener.calls == [("tree", [f"{NS}/rank-0", f"{NS}/rank-1"])]
    assert cache.group_problem(f"{NS}/rank-0") is None and not cache.invalid
    snapshot = cache.snapshot(window(objects))
    assert [c.key for c in snapshot.composite_groups] == [f"{NS}/workers"]
    cache.apply(COMPOSITE_PODGROUPS, "DELETED", composite("workers"))  # its children wait for it again
    assert listener.calls[-1] == ("tree", [f"{NS}/rank-0", f"{NS}/rank-1"])
    assert cache.group_problem(f"{NS}/rank-1") is not None


def test_the_queue_is_told_each_gangs_tree() -> None:
    cache = synced_cache([node("n1"), *tree_objects(), child("other", 1, "elsewhere")])
    both = frozenset({f"{NS}/rank-0", f"{NS}/rank-1"})
    assert cache.trees.tree_gangs[f"{NS}/rank-0"] == both == cache.trees.tree_gangs[f"{NS}/rank-1"]
    assert cache.trees.tree_gangs[f"{NS}/other"] == {f"{NS}/other"}
    cache.apply(CORE_PODGROUPS, "DELETED", child("rank-1", 2, "workers"))
    assert cache.trees.tree_gangs[f"{NS}/rank-0"] == {f"{NS}/rank-0"} and f"{NS}/rank-1" not in cache.trees.tree_gangs


def test_a_1_37_workload_of_templates_is_read_and_checks_the_tree() -> None:
    """A v1beta1 Workload is read as templates (not as 1.35's Workload): a PodGroup naming a
    template it lacks refuses its tree, as a dump's reader does."""
    workload = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload", "metadata": {"name": "job", "namespace": NS},
                "spec": {"podGroupTemplates": [{"name": "rank", "schedulingPolicy": {"gang": {"minCount": 2}}}]}}
    group = child("rank-0", 2, "workers")
    group["spec"]["workloadRef"] = {"workloadName": "job", "templateName": "nope"}
    cache = synced_cache([node("n1"), composite("workers"), group])
    cache.replace(WORKLOADS, [workload])
    assert not cache.invalid.get((WORKLOADS.name, f"{NS}/job"))
    why = cache.group_problem(f"{NS}/rank-0")
    assert why is not None and 'Workload default/job has no podGroupTemplate named "nope"' in why
    listener = Trees()
    cache.listener = listener
    workload["spec"]["podGroupTemplates"].append({"name": "nope", "schedulingPolicy": {"basic": {}}})
    cache.apply(WORKLOADS, "MODIFIED", workload)  # the template comes: the refused tree's pods try again
    assert listener.calls == [("tree", [f"{NS}/rank-0"])] and cache.group_problem(f"{NS}/rank-0") is None


@pytest.fixture
def make_cluster() -> Iterator[Callable[..., Cluster]]:
    yield from cluster_factory()


def test_a_tree_of_two_gangs_is_bound_all_or_nothing(make_cluster: Callable[..., Cluster]) -> None:
    """Two nodes of 2 CPUs and a tree of two gangs of two 1-CPU pods: all four are bound. Then a
    third node of 2 CPUs and a tree of two one-pod gangs of 1.5 CPUs: one would fit, so none is
    bound (as plain gangs, one would be) until a fourth node makes room for both."""
    cluster = make_cluster([node("n1", cpu="2"), node("n2", cpu="2"),
                            composite("workers", min_groups=2), child("rank-0", 2, "workers"),
                            child("rank-1", 2, "workers"), composite("big", min_groups=2),
                            child("big-0", 1, "big"), child("big-1", 1, "big")], gang_apis=V137)
    sched = cluster.scheduler(fast_config(), fast_options(engine="cpsat", window_wait=0.2))
    names = [f"rank-{g}-{i}" for g in range(2) for i in range(2)]
    cluster.create(*[pod(n, cpu="1", scheduling_group=n.rsplit("-", 1)[0]) for n in names])
    assert wait_for(lambda: all(cluster.node_of(n) for n in names))
    cluster.create(node("n3", cpu="2"))
    big = ["big-0-0", "big-1-0"]
    cluster.create(*[pod(n, cpu="1500m", scheduling_group=n.rsplit("-", 1)[0]) for n in big])
    assert wait_for(lambda: all(sched.queue.where(f"{NS}/{n}") == "unschedulable" for n in big))
    assert [cluster.node_of(n) for n in big] == [None, None]
    cluster.create(node("n4", cpu="2"))
    assert wait_for(lambda: all(cluster.node_of(n) for n in big))
    assert cluster.violations() == [] and cluster.double_binds() == []


def test_pods_wait_for_their_composite_and_go_once_it_is_created(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster([node("n1", cpu="2"), node("n2", cpu="2"), child("rank-0", 2, "workers"),
                            child("rank-1", 2, "workers")], gang_apis=V137)
    sched = cluster.scheduler()
    assert not any(i.absent for i in sched.informers if i.resource is COMPOSITE_PODGROUPS)
    names = [f"rank-{g}-{i}" for g in range(2) for i in range(2)]
    cluster.create(*[pod(n, cpu="1", scheduling_group=n.rsplit("-", 1)[0]) for n in names])
    assert wait_for(lambda: all(sched.queue.where(f"{NS}/{n}") == "unschedulable" for n in names))
    assert cluster.bound() == {}  # not placed as if they were plain gangs
    assert wait_for(lambda: len({e["involvedObject"]["name"] for e in cluster.events("FailedScheduling")}) == 4)
    messages = [e["message"] for e in cluster.events("FailedScheduling")]
    assert all("is in a group tree the scheduler cannot use" in m and 'CompositePodGroup "workers"' in m
                            for m in messages)
    cluster.create(composite("workers", min_groups=2))  # the composite appearing retries them at once
    assert wait_for(lambda: all(cluster.node_of(n) for n in names), timeout=5.0)
    assert cluster.violations() == []


def test_a_server_without_composite_pod_groups_is_fine(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster([node("n1")])  # 1.36's gang APIs only
    sched = cluster.scheduler()
    assert [i.absent for i in sched.informers if i.resource is COMPOSITE_PODGROUPS] == [True]
    cluster.create(pod("plain"))
    assert wait_for(lambda: cluster.node_of("plain"))

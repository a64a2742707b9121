"""The live scheduler (`cpsat-scheduler run`, a process of its own, with exactly the RBAC of
examples/deploy/rbac.yaml) and a CompositePodGroup on a real 1.37 kube-apiserver: two child
PodGroups under a composite wanting both (``minGroupCount: 2``).

Their pods, created before the composite, wait (their tree names a parent that does not exist
yet) and say so; once the composite is created they are bound, all four. A second tree of two
one-pod groups of 1.5 CPUs, with room for one: none is bound until a node makes room for both."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.e2e.harness import Cluster, wait_for
from tests.e2e.test_live import _no_denials

G = "scheduling.k8s.io"


def _workload(cluster: Cluster) -> None:
    """The Workload the groups are made from: two composite templates, each of one PodGroup template."""
    cluster.custom.create_namespaced_custom_object(G, cluster.gang_version, cluster.ns, "workloads", {
        "apiVersion": f"{G}/{cluster.gang_version}", "kind": "Workload", "metadata": {"name": "job"},
        "spec": {"podGroupTemplates": [], "compositePodGroupTemplates": [
            {"name": name, "schedulingPolicy": {"gang": {"minGroupCount": 2}},
             "podGroupTemplates": [{"name": f"{name}-rank", "schedulingPolicy": {"gang": {"minCount": size}}}]}
            for name, size in (("workers", 2), ("big", 1))]}})


def _composite(cluster: Cluster, name: str) -> None:
    version = cluster.plane.features.composite_api
    assert version is not None
    cluster.custom.create_namespaced_custom_object(G, version.rpartition("/")[2], cluster.ns, "compositepodgroups", {
        "apiVersion": version, "kind": "CompositePodGroup", "metadata": {"name": name},
        "spec": {"workloadRef": {"workloadName": "job", "templateName": name},
                 "schedulingPolicy": {"gang": {"minGroupCount": 2}}}})


def _children(cluster: Cluster, parent: str, size: int) -> list[str]:
    names = [f"{parent}-{g}" for g in range(2)]
    extra: dict[str, Any] = {"parentCompositePodGroupName": parent}
    for name in names:
        cluster.pod_group(name, size, template=("job", f"{parent}-rank"), extra=extra)
    return names


def test_a_tree_of_two_gangs_waits_for_its_composite_and_is_bound_all_or_nothing(cluster: Cluster) -> None:
    if cluster.plane.features.composite_api is None:
        pytest.skip("CompositePodGroup is 1.37's")
    cluster.node("n1", cpu="2", memory="4Gi")
    cluster.node("n2", cpu="2", memory="4Gi")
    _workload(cluster)
    groups = _children(cluster, "workers", 2)
    sched = cluster.scheduler()
    names = [f"{g}-{i}" for g in groups for i in range(2)]
    for name in names:
        cluster.pod(name, cpu="1", group=name.rsplit("-", 1)[0])
    # no composite yet: the tree is refused, its pods wait (never placed as two plain gangs)
    assert wait_for(lambda: {e.involved_object.name for e in cluster.events("FailedScheduling")} == set(names),
                    timeout=60), sched.text()[-3000:]
    assert all("is in a group tree the scheduler cannot use" in e.message and 'CompositePodGroup "workers"' in e.message
               for e in cluster.events("FailedScheduling"))
    assert cluster.bound() == {}
    _composite(cluster, "workers")              # its creation retries the tree's pods at once
    assert wait_for(lambda: set(cluster.bound()) == set(names), timeout=60), sched.text()[-3000:]

    # a tree of two one-pod gangs of 1.5 CPUs and room for one: none of it is bound
    cluster.node("n3", cpu="2", memory="4Gi")
    _composite(cluster, "big")
    big = [f"{g}-0" for g in _children(cluster, "big", 1)]
    for name in big:
        cluster.pod(name, cpu="1500m", group=name.rsplit("-", 1)[0])
    assert wait_for(lambda: {e.involved_object.name for e in cluster.events("FailedScheduling")} >= set(big),
                    timeout=60), sched.text()[-3000:]
    time.sleep(3)
    assert [cluster.node_of(n) for n in big] == [None, None]
    cluster.node("n4", cpu="2", memory="4Gi")      # room for both: the whole tree goes
    assert wait_for(lambda: all(cluster.node_of(n) for n in big), timeout=60), sched.text()[-3000:]
    assert cluster.overcommitted() == []
    _no_denials(sched.text())

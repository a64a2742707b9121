"""The live scheduler with gangs in every shape it reads, end to end over HTTP.

Kubernetes 1.36's `scheduling.k8s.io/v1alpha2` PodGroup (pods join with
`spec.schedulingGroup`), 1.35's `scheduling.k8s.io/v1alpha1` Workload (pods join with
`spec.workloadRef`) and Volcano's `scheduling.volcano.sh/v1beta1` PodGroup (pods join with an
annotation) are watched like scheduler-plugins' PodGroup: a gang is bound whole or not at all,
waits for its group object and its last member, and a v1alpha2 PodGroup carries the
`PodGroupScheduled` condition. A server that serves none of these APIs is fine.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, Optional

import pytest

from adapters.apiserver.resources import CORE_PODGROUPS
from adapters.live.api_client import CORE_PODGROUPS as WATCHED_CORE_PODGROUPS
from adapters.live.api_client import COMPOSITE_PODGROUPS, GANG_RESOURCES, VOLCANO_PODGROUPS, WORKLOADS
from tests.adapters.live_harness import (
    cluster_factory,
    NS,
    Cluster,
    core_pod_group,
    fast_config,
    fast_options,
    node,
    pod,
    volcano_pod_group,
    wait_for,
    workload,
)


@pytest.fixture
def make_cluster() -> Iterator[Callable[..., Cluster]]:
    yield from cluster_factory()


def scheduled_condition(cluster: Cluster, name: str) -> Optional[dict[str, Any]]:
    group = cluster.server.store.get(CORE_PODGROUPS.key, NS, name) or {}
    conditions = (group.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == "PodGroupScheduled"), None)


def all_bound(cluster: Cluster, names: list[str]) -> bool:
    return all(cluster.node_of(n) for n in names)


def test_core_podgroup_gang_is_bound_whole_and_marked_scheduled(make_cluster: Callable[..., Cluster]) -> None:
    group = core_pod_group("train", 3)
    # a condition someone else wrote stays when the scheduler writes its own (a merge patch
    # replaces the whole list)
    group["status"] = {"conditions": [{"type": "DisruptionTarget", "status": "False", "reason": "None",
                                       "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    cluster = make_cluster([node("n1", cpu="2"), node("n2", cpu="2"), group])
    sched = cluster.scheduler(fast_config(), fast_options(engine="cpsat", window_wait=0.2))
    names = [f"train-{i}" for i in range(3)]
    cluster.create(*[pod(n, cpu="1", scheduling_group="train") for n in names[:2]])
    # two of three: minCount is not reached, nothing is bound
    assert wait_for(lambda: sched.queue.where(f"{NS}/train-1") == "unschedulable")
    assert cluster.bound() == {}
    assert scheduled_condition(cluster, "train") is None  # not tried yet: no verdict on the group
    cluster.create(pod(names[2], cpu="1", scheduling_group="train"))
    assert wait_for(lambda: all_bound(cluster, names))
    assert wait_for(lambda: (scheduled_condition(cluster, "train") or {}).get("status") == "True")
    types = [c["type"] for c in cluster.server.store.get(CORE_PODGROUPS.key, NS, "train")["status"]["conditions"]]
    assert types == ["DisruptionTarget", "PodGroupScheduled"]
    assert cluster.violations() == []
    assert cluster.double_binds() == []


def test_core_podgroup_gang_that_cannot_fit_is_marked_unschedulable(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster([node("n1", cpu="2"), node("n2", cpu="2"), core_pod_group("big", 3)])
    cluster.server.requests.keep()
    cluster.scheduler(fast_config(), fast_options(engine="cpsat", window_wait=0.2))
    names = [f"big-{i}" for i in range(3)]
    cluster.create(*[pod(n, cpu="1500m", scheduling_group="big") for n in names])  # two fit, three do not
    assert wait_for(lambda: scheduled_condition(cluster, "big"))
    condition = scheduled_condition(cluster, "big")
    assert condition is not None
    assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")
    assert condition["message"]
    assert wait_for(lambda: len({e["involvedObject"]["name"] for e in cluster.events("FailedScheduling")}) == 3)
    assert [cluster.node_of(n) for n in names] == [None, None, None]
    # the condition is written once, not again for each retry of the gang
    patches = [r for r in cluster.server.requests.records
               if r.method == "PATCH" and r.path.endswith("/podgroups/big/status")]
    assert len(patches) == 1


def test_workload_gang_is_bound_whole(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster([node("n1", cpu="2"), node("n2", cpu="2"), workload("job", {"workers": 3})])
    sched = cluster.scheduler(fast_config(), fast_options(engine="cpsat", window_wait=0.2))
    names = [f"w-{i}" for i in range(3)]
    cluster.create(*[pod(n, cpu="1", workload_ref=("job", "workers")) for n in names[:2]])
    assert wait_for(lambda: sched.queue.where(f"{NS}/w-1") == "unschedulable")
    assert cluster.bound() == {}
    cluster.create(pod(names[2], cpu="1", workload_ref=("job", "workers")))
    assert wait_for(lambda: all_bound(cluster, names))
    assert cluster.violations() == []


def test_volcano_gang_is_bound_whole(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster([node("n1", cpu="2"), node("n2", cpu="2"), volcano_pod_group("vc", 3)])
    sched = cluster.scheduler(fast_config(), fast_options(engine="cpsat", window_wait=0.2))
    names = [f"vc-{i}" for i in range(3)]
    cluster.create(*[pod(n, cpu="1", volcano_group="vc") for n in names[:2]])
    assert wait_for(lambda: sched.queue.where(f"{NS}/vc-1") == "unschedulable")
    assert cluster.bound() == {}
    cluster.create(pod(names[2], cpu="1", volcano_group="vc"))
    assert wait_for(lambda: all_bound(cluster, names))
    assert cluster.violations() == []


@pytest.mark.parametrize("shape", ["core", "workload", "volcano"])
def test_a_group_created_after_its_pods_lets_them_be_bound(make_cluster: Callable[..., Cluster], shape: str) -> None:
    cluster = make_cluster([node("n1", cpu="2"), node("n2", cpu="2")])
    sched = cluster.scheduler()
    joins: dict[str, Any] = {"core": {"scheduling_group": "g"}, "workload": {"workload_ref": ("g", "all")},
                             "volcano": {"volcano_group": "g"}}[shape]
    names = [f"m-{i}" for i in range(2)]
    cluster.create(*[pod(n, cpu="1", **joins) for n in names])
    assert wait_for(lambda: all(sched.queue.where(f"{NS}/{n}") == "unschedulable" for n in names))
    assert cluster.bound() == {}
    group = {"core": core_pod_group("g", 2), "workload": workload("g", {"all": 2}),
             "volcano": volcano_pod_group("g", 2)}[shape]
    cluster.create(group)  # the group appearing retries its waiting members at once
    assert wait_for(lambda: all_bound(cluster, names), timeout=5.0)


def test_gang_apis_not_served_are_fine(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster([node("n1")], podgroups_crd=False, gang_apis=())
    sched = cluster.scheduler()
    assert all(i.absent for i in sched.informers if i.resource in GANG_RESOURCES)
    assert sched.ready()[0] and sched.health() is None
    cluster.create(pod("plain"), pod("member", scheduling_group="nowhere"))
    assert wait_for(lambda: cluster.node_of("plain"))
    # a member of a group that cannot exist waits for it, saying so
    assert wait_for(lambda: sched.queue.where(f"{NS}/member") == "unschedulable")
    assert cluster.node_of("member") is None


def test_one_gang_api_absent_leaves_the_others_working(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster([node("n1", cpu="2"), node("n2", cpu="2"), core_pod_group("c", 2)],
                           gang_apis=["scheduling.k8s.io/v1alpha2"])
    sched = cluster.scheduler()
    absent = {i.resource for i in sched.informers if i.absent}
    assert absent == {WORKLOADS, VOLCANO_PODGROUPS, COMPOSITE_PODGROUPS}  # a 1.36 server: no CompositePodGroups
    assert WATCHED_CORE_PODGROUPS not in absent
    cluster.create(*[pod(f"c-{i}", cpu="1", scheduling_group="c") for i in range(2)])
    assert wait_for(lambda: all_bound(cluster, ["c-0", "c-1"]))


def test_core_podgroup_topology_is_kept_live(make_cluster: Callable[..., Cluster]) -> None:
    # Zone a has two nodes of 1 CPU, zone b one of 4: a gang of three 1-CPU pods that must share a
    # zone fits only in b, although a and b together have room enough.
    cluster = make_cluster([node("a1", cpu="1", zone="a"), node("a2", cpu="1", zone="a"), node("b1", cpu="4", zone="b"),
                            core_pod_group("rack", 3, topology_key="topology.kubernetes.io/zone")])
    cluster.scheduler(fast_config(), fast_options(engine="cpsat", window_wait=0.2))
    names = [f"rack-{i}" for i in range(3)]
    cluster.create(*[pod(n, cpu="1", scheduling_group="rack") for n in names])
    assert wait_for(lambda: all_bound(cluster, names))
    assert {cluster.node_of(n) for n in names} == {"b1"}
    assert cluster.violations() == []


def test_a_refused_condition_write_is_dropped_and_scheduling_goes_on(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster([node("n1", cpu="2"), core_pod_group("g", 2), core_pod_group("h", 1)])
    sched = cluster.scheduler()
    cluster.server.faults.fail("PATCH", r"/podgroups/g/status$", status=409, count=1)  # not retried: dropped
    cluster.create(pod("g-0", scheduling_group="g"), pod("g-1", scheduling_group="g"))
    assert wait_for(lambda: all_bound(cluster, ["g-0", "g-1"]))
    assert wait_for(lambda: sched.metrics.events_dropped._value.get() >= 1)
    assert scheduled_condition(cluster, "g") is None
    cluster.create(pod("h-0", scheduling_group="h"))  # the next gang's condition is written as usual
    assert wait_for(lambda: (scheduled_condition(cluster, "h") or {}).get("status") == "True")


def test_each_replica_key_of_a_workload_is_a_gang_of_its_own(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster([node("n1", cpu="2"), workload("job", {"workers": 2})])
    cluster.scheduler()

    def member(name: str, replica: str) -> dict[str, Any]:
        obj = pod(name, cpu="500m", workload_ref=("job", "workers"))
        obj["spec"]["workloadRef"]["podGroupReplicaKey"] = replica
        return obj

    cluster.create(member("r0-0", "0"), member("r0-1", "0"), member("r1-0", "1"))
    assert wait_for(lambda: all_bound(cluster, ["r0-0", "r0-1"]))
    assert cluster.node_of("r1-0") is None  # replica 1 has one of its two members
    cluster.create(member("r1-1", "1"))
    assert wait_for(lambda: all_bound(cluster, ["r1-0", "r1-1"]))


def test_a_core_podgroup_whose_member_is_preempted_is_marked_a_disruption_target(
        make_cluster: Callable[..., Cluster]) -> None:
    from tests.adapters.live_harness import priority_class

    group = core_pod_group("batch", 1)
    group["status"] = {"conditions": [{"type": "PodGroupScheduled", "status": "True", "reason": "Scheduled",
                                       "message": "bound earlier", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    cluster = make_cluster([node("n1", cpu="2"), priority_class("low", 10), priority_class("high", 1000), group,
                            *[pod(f"batch-{i}", cpu="1", priority_class="low", node_name="n1", running=True,
                                  scheduling_group="batch") for i in range(2)]])
    cluster.scheduler(fast_config(), fast_options(engine="cpsat"))
    cluster.create(pod("urgent", cpu="2", priority_class="high"))
    assert wait_for(lambda: cluster.node_of("urgent") == "n1")

    def conditions() -> dict[str, dict[str, Any]]:
        found = cluster.server.store.get(CORE_PODGROUPS.key, NS, "batch") or {}
        return {c["type"]: c for c in (found.get("status") or {}).get("conditions") or []}

    assert wait_for(lambda: "DisruptionTarget" in conditions())
    target = conditions()["DisruptionTarget"]
    assert (target["status"], target["reason"]) == ("True", "PreemptionByScheduler")
    assert "preempted by pod default/urgent on node n1" in target["message"]
    assert conditions()["PodGroupScheduled"]["message"] == "bound earlier"  # kept beside it
    assert cluster.violations() == []

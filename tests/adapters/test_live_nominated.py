"""Nominated pods in the live scheduler (issue 23, item 3), end to end against the in-memory API
server: a pod waiting for the victims of its preemption keeps its `nominatedNodeName` and preempts
nothing more, whether the scheduler preempted for it a moment ago or another scheduler (or an
earlier leader) did; the victims say who evicted them, as kube-scheduler's do; a nomination that
no preemption backs any longer is cleared, and so are lower pods' nominations to a node a
preemptor takes; and the room a pod outside the window is nominated to stays its own."""

from __future__ import annotations

from typing import Any, Callable, Iterator

import pytest

from solver.plugins.preemption.nominated import REASON_TERMINATING
from tests.adapters.live_harness import Cluster, NS, cluster_factory, fast_config, fast_options, node, pod, \
    priority_class, wait_for


@pytest.fixture
def make_cluster() -> Iterator[Callable[..., Cluster]]:
    yield from cluster_factory()


def _evictions(cluster: Cluster) -> list[str]:
    """The pods whose eviction the API server was asked for, in order."""
    asked: list[str] = []
    handle = cluster.server.api.handle

    def recording(request: Any) -> Any:
        if request.method == "POST" and request.path.endswith("/eviction"):
            asked.append(request.path.split("/")[-2])
        return handle(request)

    cluster.server.api.handle = recording  # type: ignore[method-assign]
    return asked


def _disruption(obj: dict[str, Any]) -> dict[str, Any]:
    return next((c for c in (obj.get("status") or {}).get("conditions", []) if c.get("type") == "DisruptionTarget"), {})


def _failed_messages(cluster: Cluster, name: str) -> list[str]:
    return [e["message"] for e in cluster.events("FailedScheduling") if e["involvedObject"]["name"] == name]


def _two_nodes_of_victims() -> list[dict[str, Any]]:
    return [node("n1", cpu="2"), node("n2", cpu="2"), priority_class("low", 10), priority_class("high", 1000),
            pod("low-1", cpu="2", priority_class="low", node_name="n1", running=True),
            pod("low-2", cpu="2", priority_class="low", node_name="n2", running=True)]


@pytest.mark.parametrize("engine", ["greedy", "cpsat"])
def test_a_preemptor_whose_victims_are_slow_to_leave_does_not_preempt_again(
        make_cluster: Callable[..., Cluster], engine: str) -> None:
    # The kubelet takes its time: the preemptor gives up waiting (preemption timeout) while its
    # victim still terminates, and goes back to the queue. Its next attempts must wait, as
    # kube-scheduler's would: evicting low-2 on n2 as well would be a second victim for one pod.
    cluster = make_cluster(_two_nodes_of_victims(), kubelet_grace_seconds=1.5)
    asked = _evictions(cluster)
    sched = cluster.scheduler(fast_config(), fast_options(engine=engine, preemption_timeout=0.2))
    cluster.create(pod("high", cpu="2", priority_class="high"))
    assert wait_for(lambda: len(asked) == 1)
    first = asked[0]
    victim = cluster.pod(first)
    assert victim is not None and victim["metadata"].get("deletionTimestamp")
    # Marked as kube-scheduler marks its victims (after the Eviction API's own reason).
    assert wait_for(lambda: _disruption(cluster.pod(first) or {}).get("reason") == "PreemptionByScheduler")
    nominated = (cluster.pod("high") or {}).get("status", {}).get("nominatedNodeName")
    assert nominated == {"low-1": "n1", "low-2": "n2"}[first]
    assert wait_for(lambda: any(REASON_TERMINATING in m for m in _failed_messages(cluster, "high")), timeout=5.0)
    assert (cluster.pod("high") or {})["status"].get("nominatedNodeName") == nominated  # kept while it waits
    assert wait_for(lambda: cluster.node_of("high") == nominated, timeout=10.0)
    assert asked == [first]  # one preemption, never a second
    assert cluster.violations() == []


def test_a_pod_nominated_before_this_scheduler_started_waits_for_its_victims(
        make_cluster: Callable[..., Cluster]) -> None:
    # What a new leader (or this scheduler after a restart) finds: the victim terminating with
    # DisruptionTarget/PreemptionByScheduler on n1, the preemptor pending with nominatedNodeName n1.
    # It must not preempt low-2 on n2; once the victim is gone it binds on n1.
    victim = pod("low-1", cpu="2", priority_class="low", node_name="n1", running=True)
    victim["metadata"]["deletionTimestamp"] = "2030-01-01T00:00:00Z"
    victim["status"]["conditions"].append({"type": "DisruptionTarget", "status": "True",
                                           "reason": "PreemptionByScheduler"})
    waiter = pod("high", cpu="2", priority_class="high")
    waiter["status"] = {"nominatedNodeName": "n1"}
    objects = [o for o in _two_nodes_of_victims() if o["metadata"]["name"] != "low-1"] + [victim, waiter]
    cluster = make_cluster(objects, kubelet_grace_seconds=60.0)
    asked = _evictions(cluster)
    sched = cluster.scheduler(fast_config(), fast_options(engine="cpsat"))
    assert wait_for(lambda: any(m == "0/2 nodes are available: 2 Insufficient cpu. preemption: " + REASON_TERMINATING
                                for m in _failed_messages(cluster, "high")))
    assert wait_for(lambda: sched.queue.where(f"{NS}/high") == "unschedulable")
    assert asked == [] and cluster.pod("low-2") is not None
    assert (cluster.pod("high") or {})["status"]["nominatedNodeName"] == "n1"
    cluster.server.store.delete("pods", NS, "low-1")  # the kubelet is done with the victim
    assert wait_for(lambda: cluster.node_of("high") == "n1")
    assert asked == [] and cluster.violations() == []


def test_a_nomination_no_preemption_backs_is_cleared(make_cluster: Callable[..., Cluster]) -> None:
    # Nominated to n1 once, but nothing there (or anywhere) can be preempted for it now: as
    # kube-scheduler does when preemption finds no node, the nomination goes, so the room on n1
    # is no longer held for it.
    important = pod("important", cpu="2", priority_class="top", node_name="n1", running=True)
    waiter = pod("high", cpu="2", priority_class="high")
    waiter["status"] = {"nominatedNodeName": "n1"}
    cluster = make_cluster([node("n1", cpu="2"), priority_class("high", 1000), priority_class("top", 5000),
                            important, waiter])
    cluster.scheduler(fast_config(), fast_options())
    assert wait_for(lambda: _failed_messages(cluster, "high"))
    assert wait_for(lambda: not (cluster.pod("high") or {}).get("status", {}).get("nominatedNodeName"))


def test_room_a_pod_of_another_scheduler_is_nominated_to_stays_its_own(make_cluster: Callable[..., Cluster]) -> None:
    # kube-scheduler preempted on n1 for `theirs` (priority 1000), which waits for its room; our
    # `ours` (priority 10) may not take it, and goes to n2 although n1 is the emptier node.
    theirs = pod("theirs", cpu="3", priority_class="high", scheduler="default-scheduler")
    theirs["status"] = {"nominatedNodeName": "n1"}
    cluster = make_cluster([node("n1", cpu="4"), node("n2", cpu="2"), priority_class("low", 10),
                            priority_class("high", 1000), theirs])
    cluster.scheduler(fast_config(), fast_options(engine="cpsat"))
    cluster.create(pod("ours", cpu="2", priority_class="low"))
    assert wait_for(lambda: cluster.node_of("ours") == "n2")
    assert cluster.node_of("theirs") is None


def test_a_preemptor_clears_the_nominations_of_lower_pods_to_its_node(make_cluster: Callable[..., Cluster]) -> None:
    # `mid` (priority 500) waits on n1 for a victim of its own preemption; `high` (priority 1000)
    # now preempts on n1 too. As kube-scheduler does, `mid` loses its nomination: n1's room is
    # `high`'s now, and `mid` must look again.
    victim = pod("low-1", cpu="1", priority_class="low", node_name="n1", running=True)
    victim["metadata"]["deletionTimestamp"] = "2030-01-01T00:00:00Z"
    victim["status"]["conditions"].append({"type": "DisruptionTarget", "status": "True",
                                           "reason": "PreemptionByScheduler"})
    mid = pod("mid", cpu="1", priority_class="mid")
    mid["status"] = {"nominatedNodeName": "n1"}
    cluster = make_cluster([node("n1", cpu="2"), priority_class("low", 10), priority_class("mid", 500),
                            priority_class("high", 1000), victim,
                            pod("low-2", cpu="1", priority_class="low", node_name="n1", running=True),
                            mid, pod("high", cpu="2", priority_class="high")], kubelet_grace_seconds=60.0)
    cluster.scheduler(fast_config(), fast_options(window_size=1))
    assert wait_for(lambda: (cluster.pod("high") or {}).get("status", {}).get("nominatedNodeName") == "n1")
    assert wait_for(lambda: not (cluster.pod("mid") or {}).get("status", {}).get("nominatedNodeName"))

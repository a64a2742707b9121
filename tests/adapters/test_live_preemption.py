"""Preemption through the Eviction API, end to end against the in-memory API server.

A high-priority pod that fits nowhere gets room by evicting lower-priority pods: its
`status.nominatedNodeName` is set, the victims are evicted through `pods/eviction` (so the API
server enforces PodDisruptionBudgets, answering 429 when a budget forbids it), each victim gets a
`Preempted` event, and the preemptor is bound on the nominated node only once its victims are
gone. A refused eviction gives the room back and the preemptor backs off and tries again.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Iterator

import pytest

from tests.adapters.live_harness import (
    NS,
    Cluster,
    fast_config,
    fast_options,
    live_threads,
    node,
    pdb,
    pod,
    priority_class,
    wait_for,
)


def cluster_with_victims(extra: list[dict[str, Any]] = ()) -> list[dict[str, Any]]:  # type: ignore[assignment]
    return [node("n1", cpu="2"), priority_class("low", 10), priority_class("high", 1000),
            pod("low-0", cpu="1", priority_class="low", node_name="n1", running=True, labels={"app": "batch"}),
            pod("low-1", cpu="1", priority_class="low", node_name="n1", running=True, labels={"app": "batch"}),
            *extra]


@pytest.fixture
def make_cluster() -> Iterator[Callable[..., Cluster]]:
    clusters: list[Cluster] = []

    def make(objects: list[dict[str, Any]], **kwargs: Any) -> Cluster:
        cluster = Cluster(objects, **kwargs)
        clusters.append(cluster)
        return cluster

    yield make
    for cluster in clusters:
        cluster.close()
    assert wait_for(lambda: not live_threads(), timeout=5.0), live_threads()


def _order_recorder(cluster: Cluster) -> list[tuple[str, str]]:
    """(what, pod) in the order the API server committed it: deletions and binds."""
    seen: list[tuple[str, str]] = []

    def record(key: str, event: str, obj: dict[str, Any], prev: Any) -> None:
        if key != "pods":
            return
        name = obj["metadata"]["name"]
        if event == "DELETED":
            seen.append(("deleted", name))
        elif prev is not None and obj["spec"].get("nodeName") and not prev["spec"].get("nodeName"):
            seen.append(("bound", name))

    cluster.server.store.add_listener(record)
    return seen


@pytest.mark.parametrize("engine", ["cpsat", "greedy"])
def test_victims_are_evicted_and_the_preemptor_bound_on_the_nominated_node(make_cluster: Callable[..., Cluster],
                                                                           engine: str) -> None:
    cluster = make_cluster(cluster_with_victims())
    order = _order_recorder(cluster)
    patches: list[dict[str, Any]] = []
    handle = cluster.server.api.handle

    def recording(request: Any) -> Any:
        if request.method == "PATCH" and request.path.endswith("/pods/high/status"):
            import json

            patches.append(json.loads(request.body))
        return handle(request)

    cluster.server.api.handle = recording  # type: ignore[method-assign]
    sched = cluster.scheduler(fast_config(), fast_options(engine=engine))
    cluster.create(pod("high", cpu="2", priority_class="high"))
    assert wait_for(lambda: cluster.node_of("high") == "n1")
    assert {"status": {"nominatedNodeName": "n1"}} in patches
    assert cluster.pod("low-0") is None and cluster.pod("low-1") is None
    assert order.index(("bound", "high")) > max(order.index(("deleted", "low-0")), order.index(("deleted", "low-1")))
    preempted = sorted((e["involvedObject"]["name"], e["message"]) for e in cluster.events("Preempted"))
    assert preempted == [("low-0", "Preempted by pod default/high on node n1"),
                         ("low-1", "Preempted by pod default/high on node n1")]
    assert sched.metrics.preemption_victims._value.get() == 2
    assert wait_for(lambda: not sched.cache.assumed())
    assert cluster.violations() == []


def test_budget_refusal_429_requeues_the_preemptor(make_cluster: Callable[..., Cluster],
                                                   caplog: pytest.LogCaptureFixture) -> None:
    cluster = make_cluster(cluster_with_victims([pdb("batch", min_available=2, app="batch")]))
    sched = cluster.scheduler()
    with caplog.at_level(logging.INFO, logger="adapters.live"):
        cluster.create(pod("high", cpu="2", priority_class="high"))
        assert wait_for(lambda: sched.metrics.evictions.labels(result="refused")._value.get() >= 2)
    assert "Cannot evict pod as it would violate the pod's disruption budget" in caplog.text
    assert "the preemptor backs off" in caplog.text
    assert cluster.pod("low-0") is not None and cluster.pod("low-1") is not None  # nobody evicted
    assert cluster.node_of("high") is None
    assert not sched.cache.is_evicting(f"{NS}/low-0") and not sched.cache.is_evicting(f"{NS}/low-1")
    assert wait_for(lambda: any(e["message"].startswith("preemption: eviction of default/low-") and
                                e["involvedObject"]["name"] == "high" for e in cluster.events("FailedScheduling")))
    condition = wait_for(lambda: [c for c in cluster.pod("high")["status"].get("conditions") or []
                                  if c["type"] == "PodScheduled" and c["reason"] == "SchedulerError"])
    assert condition
    # Once the budget goes, the next attempt gets its room.
    cluster.server.store.delete("poddisruptionbudgets", NS, "batch")
    assert wait_for(lambda: cluster.node_of("high") == "n1")


def test_injected_429_on_eviction_is_retried_later(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster(cluster_with_victims())
    sched = cluster.scheduler()
    cluster.server.faults.fail("POST", r"/eviction$", status=429, count=1)
    cluster.create(pod("high", cpu="2", priority_class="high"))
    assert wait_for(lambda: cluster.node_of("high") == "n1")
    assert sched.metrics.evictions.labels(result="refused")._value.get() == 1
    assert cluster.double_binds() == []


def test_victims_that_never_leave_give_the_room_back(make_cluster: Callable[..., Cluster],
                                                     caplog: pytest.LogCaptureFixture) -> None:
    # The kubelet is slow to stop the victims: the preemptor gives up waiting, forgets its
    # assumption and tries again (and binds once they are finally gone).
    cluster = make_cluster(cluster_with_victims(), kubelet_grace_seconds=1.0)
    sched = cluster.scheduler(options=fast_options(preemption_timeout=0.3))
    with caplog.at_level(logging.WARNING, logger="adapters.live"):
        cluster.create(pod("high", cpu="2", priority_class="high"))
        assert wait_for(lambda: "did not leave within" in caplog.text)
        assert wait_for(lambda: cluster.node_of("high") == "n1")
    assert cluster.violations() == []


def test_room_being_freed_is_not_promised_twice(make_cluster: Callable[..., Cluster]) -> None:
    # Two preemptors, room for one: the second must not count the first one's victims again.
    cluster = make_cluster(cluster_with_victims(), kubelet_grace_seconds=0.3)
    sched = cluster.scheduler(options=fast_options(window_wait=0.0))
    cluster.create(pod("high-a", cpu="2", priority_class="high"))
    assert wait_for(lambda: sched.cache.is_evicting(f"{NS}/low-0"))
    cluster.create(pod("high-b", cpu="2", priority_class="high"))
    assert wait_for(lambda: cluster.node_of("high-a") == "n1")
    assert wait_for(lambda: sched.queue.where(f"{NS}/high-b") == "unschedulable")
    assert cluster.node_of("high-b") is None
    assert cluster.violations() == []

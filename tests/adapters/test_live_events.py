"""Events through the real client against the in-memory API server: like ones folded while
queued, and what is queued at shutdown flushed rather than dropped."""

from __future__ import annotations

from typing import Any, Callable, Iterator

import pytest

from adapters.live.clock import SystemClock
from adapters.live.events import Reporter
from adapters.live.api_client import KubeApi, configured_client
from adapters.live.metrics import Metrics
from models import Pod
from tests.adapters.live_harness import Cluster, node, pod


@pytest.fixture
def make_cluster() -> Iterator[Callable[..., Cluster]]:
    clusters: list[Cluster] = []

    def make(**kwargs: Any) -> Cluster:
        cluster = Cluster([node("n1")], **kwargs)
        clusters.append(cluster)
        return cluster

    yield make
    for cluster in clusters:
        cluster.close()


def _reporter(cluster: Cluster) -> tuple[Reporter, Metrics]:
    metrics = Metrics()
    api = KubeApi(configured_client(cluster.server.client_configuration()))
    return Reporter(api, component="cpsat-scheduler", instance="test", clock=SystemClock(), metrics=metrics), metrics


def test_like_events_still_queued_are_one_event_with_a_count(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster()
    cluster.create(pod("stuck"), pod("other"))  # their PodScheduled conditions are patched too
    reporter, metrics = _reporter(cluster)
    stuck = Pod.model_validate(pod("stuck"))
    other = Pod.model_validate(pod("other"))
    for _ in range(3):  # retried three times before any writer ran: one write
        reporter.failed_scheduling(stuck, "0/1 nodes are available: 1 Insufficient cpu.")
    reporter.failed_scheduling(stuck, "0/1 nodes are available: 1 node(s) had untolerated taint.")
    reporter.failed_scheduling(other, "0/1 nodes are available: 1 Insufficient cpu.")
    reporter.start()
    reporter.stop()
    events = sorted((e["involvedObject"]["name"], e["message"], e["count"]) for e in cluster.events("FailedScheduling"))
    assert events == [("other", "0/1 nodes are available: 1 Insufficient cpu.", 1),
                      ("stuck", "0/1 nodes are available: 1 Insufficient cpu.", 3),
                      ("stuck", "0/1 nodes are available: 1 node(s) had untolerated taint.", 1)]
    assert metrics.events_dropped._value.get() == 0


def test_events_queued_at_shutdown_are_flushed(make_cluster: Callable[..., Cluster]) -> None:
    # Each event write takes 50 ms: 300 of them are 15 s for the two writers of normal
    # operation, past the drain deadline; the writers added for the flush send them all.
    cluster = make_cluster()
    cluster.server.faults.delay("POST", r"/events$", seconds=0.05)
    reporter, metrics = _reporter(cluster)
    reporter.start()
    for i in range(300):
        reporter.scheduled(Pod.model_validate(pod(f"p-{i}")), "n1")
    reporter.stop()
    assert len(cluster.events("Scheduled")) == 300
    assert metrics.events_dropped._value.get() == 0

"""Namespace labels in the live scheduler: a pod-affinity term's ``namespaceSelector`` matches
the labels of the namespaces the scheduler watches, as kube-scheduler's does.

Each test runs the scheduler against the in-memory API server over HTTP. The pod placed prefers
(softly) the node the selected pod runs on, so a term that selected nothing would send it there:
only the required term, read with the namespace's real labels, keeps it away.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Iterator, Optional

import pytest

from tests.adapters.live_harness import NS, Cluster, cluster_factory, node, pod, wait_for

TEAM_A = {"team": "a"}
SELECTED = "team-a"  # the namespace a term selects by its label


@pytest.fixture
def make_cluster() -> Iterator[Callable[..., Cluster]]:
    yield from cluster_factory([node("n1"), node("n2")])


def namespace(name: str, labels: Optional[dict[str, str]] = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(labels or {})}}


def db(node_name: str, ns: str = SELECTED) -> dict[str, Any]:
    """A running pod of another scheduler, labelled app=db, in namespace ``ns``."""
    return pod("db", ns=ns, labels={"app": "db"}, node_name=node_name, running=True, scheduler="other")


def web(name: str, kind: str, ns: str = NS, *, prefers: str = "n1",
        namespaces: Optional[dict[str, str]] = None) -> dict[str, Any]:
    """A pod with a required pod ``kind`` term (podAffinity or podAntiAffinity) on app=db pods in
    the namespaces labelled ``namespaces`` (team=a unless given), per node; preferring ``prefers``."""
    obj = pod(name, ns=ns, labels={"app": "web"})
    term = {"labelSelector": {"matchLabels": {"app": "db"}},
            "namespaceSelector": {"matchLabels": namespaces if namespaces is not None else TEAM_A},
            "topologyKey": "kubernetes.io/hostname"}
    obj["spec"]["affinity"] = {
        kind: {"requiredDuringSchedulingIgnoredDuringExecution": [term]},
        "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "preference": {
            "matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [prefers]}]}}]}}
    return obj


def relabel(cluster: Cluster, name: str, labels: dict[str, Optional[str]]) -> None:
    """Patch a namespace's labels (None removes one), as `kubectl label ns` does."""
    cluster.core.patch_namespace(name, {"metadata": {"labels": labels}})


@pytest.mark.parametrize("kind, db_on, lands", [
    pytest.param("podAntiAffinity", "n1", "n2", id="anti-affinity keeps away from pods in a namespace selected by label"),
    pytest.param("podAffinity", "n2", "n2", id="affinity finds its only support in a namespace selected by label"),
])
def test_a_namespace_selector_reads_the_namespaces_labels(make_cluster: Callable[..., Cluster],
                                                          kind: str, db_on: str, lands: str) -> None:
    cluster = make_cluster([node("n1"), node("n2"), namespace(SELECTED, TEAM_A), db(db_on)])
    cluster.scheduler()
    cluster.create(web("web", kind))
    assert wait_for(lambda: cluster.node_of("web")) == lands
    assert cluster.violations() == []


def test_a_namespace_relabelled_at_runtime_changes_where_a_later_pod_goes(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster([node("n1"), node("n2"), namespace(SELECTED, TEAM_A), db("n1")])
    sched = cluster.scheduler()
    cluster.create(web("web-1", "podAntiAffinity"))
    assert wait_for(lambda: cluster.node_of("web-1")) == "n2"
    relabel(cluster, SELECTED, {"team": "b"})  # the db pod's namespace is no longer selected
    assert wait_for(lambda: sched.cache.snapshot().namespace_labels[SELECTED].get("team") == "b")
    cluster.create(web("web-2", "podAntiAffinity"))
    assert wait_for(lambda: cluster.node_of("web-2")) == "n1"
    assert cluster.violations() == []


def test_a_pod_waiting_for_its_affinity_is_tried_again_when_a_namespace_gets_the_label(
        make_cluster: Callable[..., Cluster]) -> None:
    """The unschedulable pod is moved by the namespace's change, not by the five-minute flush."""
    cluster = make_cluster([node("n1"), node("n2"), namespace("data"), db("n2", ns="data")])
    sched = cluster.scheduler()
    cluster.create(web("web", "podAffinity"))
    assert wait_for(lambda: sched.queue.where(f"{NS}/web") == "unschedulable")
    relabel(cluster, "data", TEAM_A)
    assert wait_for(lambda: cluster.node_of("web")) == "n2"


def test_a_pod_kept_out_by_a_running_pods_anti_affinity_is_tried_again_when_its_namespace_loses_the_label(
        make_cluster: Callable[..., Cluster]) -> None:
    """The running pod's term selects the waiting pod's namespace by label: when that label
    goes, the waiting pod (whose own spec selects no namespace) is moved."""
    guard = pod("guard", labels={"app": "guard"}, node_name="n1", running=True, scheduler="other")
    guard["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": {"app": "web"}}, "namespaceSelector": {"matchLabels": TEAM_A},
        "topologyKey": "kubernetes.io/hostname"}]}}
    cluster = make_cluster([node("n1"), namespace(SELECTED, TEAM_A), guard])
    sched = cluster.scheduler()
    cluster.create(pod("web", ns=SELECTED, labels={"app": "web"}))
    assert wait_for(lambda: sched.queue.where(f"{SELECTED}/web") == "unschedulable")
    relabel(cluster, SELECTED, {"team": None})
    assert wait_for(lambda: cluster.node_of("web", SELECTED)) == "n1"


def test_a_scheduler_not_granted_namespaces_runs_with_their_name_labels_alone(
        make_cluster: Callable[..., Cluster], caplog: pytest.LogCaptureFixture) -> None:
    """A ClusterRole from before the scheduler read namespaces (403 on their list): it syncs and
    schedules, and a namespaceSelector sees only each namespace's kubernetes.io/metadata.name."""
    cluster = make_cluster([node("n1"), node("n2"), namespace(SELECTED, TEAM_A), db("n1")])
    cluster.server.faults.fail("GET", r"^/api/v1/namespaces$", status=403, count=None, reason="Forbidden")
    with caplog.at_level(logging.WARNING, logger="adapters.live"):
        sched = cluster.scheduler()
        assert wait_for(lambda: "namespaces may not be listed by this scheduler" in caplog.text)
    by_name = web("by-name", "podAntiAffinity", namespaces={"kubernetes.io/metadata.name": SELECTED})
    cluster.create(by_name)
    assert wait_for(lambda: cluster.node_of("by-name")) == "n2"  # the name label is known
    cluster.create(web("by-team", "podAntiAffinity"))
    assert wait_for(lambda: cluster.node_of("by-team")) == "n1"  # team=a is not: nothing selected
    assert sched.cache.snapshot().namespace_labels[SELECTED] == {"kubernetes.io/metadata.name": SELECTED}


def test_a_scheduler_that_may_list_namespaces_but_not_watch_them_keeps_their_labels(
        make_cluster: Callable[..., Cluster], caplog: pytest.LogCaptureFixture) -> None:
    """Found by a review: a role granting `list` but not `watch` emptied the namespaces at each
    recheck after listing them, so their labels (and every choice reading them) flipped."""
    cluster = make_cluster([node("n1"), node("n2"), namespace(SELECTED, TEAM_A), db("n1")])
    cluster.server.faults.fail("GET", r"^/api/v1/namespaces$", status=403, count=None, reason="Forbidden", watch=True)
    with caplog.at_level(logging.WARNING, logger="adapters.live"):
        sched = cluster.scheduler()
        assert wait_for(lambda: "namespaces may be listed but not watched" in caplog.text)
    for _ in range(3):
        assert sched.cache.snapshot().namespace_labels[SELECTED].get("team") == "a"
        cluster.create(web(f"by-team-{_}", "podAntiAffinity"))
        assert wait_for(lambda: cluster.node_of(f"by-team-{_}")) == "n2"

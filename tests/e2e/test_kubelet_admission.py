"""The kubelet's admission check (``tests/e2e/kubelet_admission.py``) on small cases: it refuses
exactly the pod that over-commits a node, in the kubelet's words, and counts requests as the
kubelet does (sidecars, init containers, overhead, pod-level resources, limits as requests)."""

from __future__ import annotations

from typing import Any, Optional

import pytest

from tests.e2e.kubelet_admission import plan_refusals, pod_requests, refusals


def node(name: str, cpu: str = "2", memory: str = "4Gi", pods: str = "110", **extra: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": pods, **extra}}}


def pod(name: str, on: Optional[str] = None, *, phase: str = "Running", other: Optional[dict[str, str]] = None,
        **requests: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {**requests, **(other or {})}}}]}
    if on:
        spec["nodeName"] = on
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": spec, "status": {"phase": phase}}


@pytest.mark.parametrize("case, pods, reason", [
    ("exactly at capacity", [pod("a", "n", cpu="1"), pod("b", "n", cpu="1")], None),
    ("one millicore over", [pod("a", "n", cpu="1"), pod("b", "n", cpu="1001m")], "OutOfcpu"),
    ("memory over", [pod("a", "n", memory="3Gi"), pod("b", "n", memory="1025Mi")], "OutOfmemory"),
    ("pod slots", [pod("a", "n"), pod("b", "n")], None),
    ("a finished pod holds nothing", [pod("a", "n", cpu="2", phase="Succeeded"), pod("b", "n", cpu="2")], None),
])
def test_a_node_refuses_the_pod_that_overcommits_it(case: str, pods: list[dict[str, Any]], reason: Optional[str]) -> None:
    found = refusals([node("n")], pods)
    assert [r.reason for r in found] == ([reason] if reason else []), case
    if reason:
        assert found[0].pod == "ns/b" and found[0].node == "n"


def test_pods_and_extended_resources_and_hugepages() -> None:
    small = node("n", pods="1", **{"example.com/gpu": "1", "hugepages-2Mi": "4Mi"})
    assert [r.reason for r in refusals([small], [pod("a", "n"), pod("b", "n")])] == ["OutOfpods"]
    roomy = node("n", **{"example.com/gpu": "1", "hugepages-2Mi": "4Mi"})
    gpus = [pod(name, "n", other={"example.com/gpu": "1"}) for name in "ab"]
    assert [r.reason for r in refusals([roomy], gpus)] == ["OutOfexample.com/gpu"]
    huge = [pod(name, "n", other={"hugepages-2Mi": "4Mi"}) for name in "ab"]
    assert [r.reason for r in refusals([roomy], huge)] == ["OutOfhugepages-2Mi"]
    # a resource the node does not have at all
    assert [r.reason for r in refusals([node("n")], gpus[:1])] == ["OutOfexample.com/gpu"]


def test_a_plan_that_overcommits_a_node_is_refused() -> None:
    nodes = [node("n1"), node("n2")]
    running = [pod("old", "n1", cpu="1500m"), pod("low", "n2", cpu="2")]
    pending = [pod("p1", cpu="1"), pod("p2", cpu="1")]
    good = plan_refusals(nodes, running + pending, {"ns/p1": "n2", "ns/p2": "n2"}, evicted={"ns/low"})
    assert good == []
    # the same plan without its eviction, or a pod on the nearly full node: over-committed
    assert [r.line() for r in plan_refusals(nodes, running + pending, {"ns/p1": "n2"})] == [
        "node n2: the kubelet refuses pod ns/p1 (OutOfcpu: requests 1000, 2000 in use, 2000 allocatable)"]
    assert [r.pod for r in plan_refusals(nodes, running + pending, {"ns/p1": "n1", "ns/p2": "n2"},
                                         evicted={"ns/low"})] == ["ns/p1"]


def test_requests_as_the_kubelet_counts_them() -> None:
    body = {"spec": {
        "containers": [{"name": "a", "resources": {"requests": {"cpu": "500m"}}},
                       {"name": "b", "resources": {"limits": {"cpu": "250m", "memory": "1Gi"}}}],
        "initContainers": [{"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}},
                           {"name": "big", "resources": {"requests": {"cpu": "2", "memory": "512Mi"}}}],
        "overhead": {"cpu": "10m"}}}
    # containers 750m + sidecar 100m = 850m; the big init container runs beside the sidecar: 2100m
    assert pod_requests(body) == {"cpu": 2110, "memory": 2**30}
    body["spec"]["resources"] = {"requests": {"cpu": "3", "memory": "2Gi"}}
    assert pod_requests(body) == {"cpu": 3010, "memory": 2 * 2**30}

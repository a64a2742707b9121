"""Effective pod requests (SEMANTICS.md §1.2), scoring-only non-zero requests (§1.3), host ports."""

from __future__ import annotations

from typing import Any, Optional

import pytest

from models import Pod, pod_host_ports, pod_nonzero_requests, pod_requests

GI = 2**30
MI = 2**20


def ctr(name: str, requests: Optional[dict] = None, *, limits: Optional[dict] = None, sidecar: bool = False,
        ports: Optional[list] = None) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": "registry.example/app:1"}
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    if resources:
        c["resources"] = resources
    if sidecar:
        c["restartPolicy"] = "Always"
    if ports:
        c["ports"] = ports
    return c


def pod(containers: list, init: Optional[list] = None, **spec: Any) -> Pod:
    body: dict[str, Any] = {"containers": containers, **spec}
    if init:
        body["initContainers"] = init
    return Pod.model_validate({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}, "spec": body})


REQUESTS = [
    pytest.param(
        pod([ctr("c1", {"cpu": "2", "memory": "1G"}), ctr("c2", {"cpu": "1", "memory": "1G"})],
            init=[ctr("ic1", {"cpu": "2"}), ctr("ic2", {"cpu": "2", "memory": "3G"})]),
        {"cpu": 3000, "memory": 3 * 10**9},
        id="semantics-worked-example",
    ),
    pytest.param(pod([ctr("a", {"cpu": "250m", "memory": "64Mi"}), ctr("b", {"cpu": "250m"})]),
                 {"cpu": 500, "memory": 64 * MI}, id="containers-summed"),
    pytest.param(pod([ctr("a", {"cpu": "500m"})], init=[ctr("init", {"cpu": "2", "memory": "1Gi"})]),
                 {"cpu": 2000, "memory": GI}, id="init-container-max"),
    pytest.param(pod([ctr("a", {"cpu": "1"})], init=[ctr("proxy", {"cpu": "1"}, sidecar=True), ctr("migrate", {"cpu": "2"})]),
                 {"cpu": 3000}, id="init-after-sidecar-runs-beside-it"),
    pytest.param(pod([ctr("a", {"cpu": "1"})], init=[ctr("migrate", {"cpu": "2"}), ctr("proxy", {"cpu": "1"}, sidecar=True)]),
                 {"cpu": 2000}, id="init-before-sidecar-runs-alone"),
    pytest.param(pod([ctr("a", {"cpu": "1", "memory": "1Gi"})], init=[ctr("proxy", {"cpu": "500m", "memory": "128Mi"}, sidecar=True)]),
                 {"cpu": 1500, "memory": GI + 128 * MI}, id="sidecar-added-to-containers"),
    pytest.param(pod([ctr("a", {"cpu": "1"})], overhead={"cpu": "250m", "memory": "120Mi"}),
                 {"cpu": 1250, "memory": 120 * MI}, id="overhead-added"),
    pytest.param(pod([ctr("a", {"cpu": "1", "memory": "1Gi"}), ctr("b", {"cpu": "1"})], resources={"requests": {"cpu": "4"}}),
                 {"cpu": 4000, "memory": GI}, id="pod-level-cpu-replaces-aggregate"),
    pytest.param(pod([ctr("a", limits={"cpu": "1", "memory": "2Gi"})]),
                 {"cpu": 1000, "memory": 2 * GI}, id="limits-only-default-requests"),
    pytest.param(pod([ctr("a", {"cpu": "100m"}, limits={"cpu": "1", "memory": "2Gi"})]),
                 {"cpu": 100, "memory": 2 * GI}, id="request-kept-missing-one-from-limit"),
    pytest.param(pod([ctr("a", limits={"nvidia.com/gpu": "1"})]), {"nvidia.com/gpu": 1}, id="extended-resource-from-limit"),
    pytest.param(pod([ctr("a", {"hugepages-2Mi": "4Mi", "ephemeral-storage": "10Gi", "example": "3"})]),
                 {"hugepages-2Mi": 4 * MI, "ephemeral-storage": 10 * GI}, id="unprefixed-unknown-ignored"),
    pytest.param(pod([ctr("a", {"cpu": "0", "memory": "0"})]), {}, id="zeros-dropped"),
    pytest.param(pod([ctr("a")]), {}, id="best-effort"),
]


@pytest.mark.parametrize(("the_pod", "expected"), REQUESTS)
def test_pod_requests(the_pod: Pod, expected: dict[str, int]) -> None:
    assert pod_requests(the_pod) == expected


NONZERO = [
    pytest.param(pod([ctr("a")]), (100, 200 * MI), id="nothing-requested-gets-defaults"),
    pytest.param(pod([ctr("a", {"cpu": "0"})]), (0, 200 * MI), id="explicit-zero-stays-zero"),
    pytest.param(pod([ctr("a", {"cpu": "1", "memory": "1Gi"})]), (1000, GI), id="requests-as-they-are"),
    pytest.param(pod([ctr("a", {"cpu": "50m", "memory": "10Mi"}), ctr("b")]), (150, 210 * MI), id="default-per-container"),
    pytest.param(pod([ctr("a", {"cpu": "50m", "memory": "10Mi"})], init=[ctr("init")]), (100, 200 * MI), id="init-container-defaults"),
    pytest.param(pod([ctr("a", {"cpu": "50m", "memory": "10Mi"})], init=[ctr("proxy", sidecar=True)]),
                 (150, 210 * MI), id="sidecar-defaults"),
    pytest.param(pod([ctr("a")], overhead={"cpu": "10m", "memory": "1Mi"}), (110, 201 * MI), id="overhead-included"),
    pytest.param(pod([ctr("a")], resources={"requests": {"cpu": "2"}}), (2000, 200 * MI), id="pod-level-cpu-memory-defaulted"),
]


@pytest.mark.parametrize(("the_pod", "expected"), NONZERO)
def test_pod_nonzero_requests(the_pod: Pod, expected: tuple[int, int]) -> None:
    assert pod_nonzero_requests(the_pod) == expected


@pytest.mark.parametrize(
    ("the_pod", "sidecars", "expected"),
    [
        pytest.param(pod([ctr("a", ports=[{"containerPort": 80}])]), True, (), id="container-port-only"),
        pytest.param(pod([ctr("a", ports=[{"containerPort": 80, "hostPort": 8080}])]), True, (("0.0.0.0", "TCP", 8080),), id="host-port-defaults"),
        pytest.param(pod([ctr("a", ports=[{"containerPort": 53, "hostPort": 53, "protocol": "UDP", "hostIP": "10.0.0.1"}])]), True,
                     (("10.0.0.1", "UDP", 53),), id="explicit-ip-protocol"),
        pytest.param(pod([ctr("a")], init=[ctr("s", sidecar=True, ports=[{"containerPort": 9, "hostPort": 9}])]), True,
                     (("0.0.0.0", "TCP", 9),), id="sidecar-counts-from-1.34"),
        pytest.param(pod([ctr("a")], init=[ctr("s", sidecar=True, ports=[{"containerPort": 9, "hostPort": 9}])]), False,
                     (), id="sidecar-ignored-before-1.34"),
    ],
)
def test_pod_host_ports(the_pod: Pod, sidecars: bool, expected: tuple) -> None:
    assert pod_host_ports(the_pod, include_sidecars=sidecars) == expected

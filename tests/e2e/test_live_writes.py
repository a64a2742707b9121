"""The scheduler's two per-pod writes (binding, `Scheduled` event) on the direct path
(`api_client._DirectWrites`), as the scheduler's own identity against the real kube-apiserver:
its TLS, its bearer-token authentication, its RBAC and its uid precondition."""

from __future__ import annotations

from typing import Any

import pytest

import adapters.live.api_client as api_client
from adapters.live.api_client import KubeApi, load_api_client
from adapters.live.errors import ClientError, Conflict, KubeError
from tests.e2e.harness import Cluster


def _event(ns: str, pod: str, uid: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": f"{pod}.e2e", "namespace": ns},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": ns, "name": pod, "uid": uid},
            "reason": "Scheduled", "message": f"Successfully assigned {ns}/{pod}", "type": "Normal",
            "source": {"component": "cpsat-scheduler"}, "count": 1}


def test_bind_and_event_on_the_direct_path(cluster: Cluster) -> None:
    node = cluster.node("n1")
    cluster.pod("stale")
    cluster.pod("fresh")
    uid = cluster.core.read_namespaced_pod("fresh", cluster.ns).metadata.uid
    api = KubeApi(load_api_client(str(cluster.plane.scheduler_kubeconfig)))
    try:
        assert api._direct is not None  # TLS with a CA and a bearer token: the direct path is taken
        with pytest.raises(Conflict):  # a pod of that name, but not the one the decision was for
            api.bind(cluster.ns, "stale", "0b5c6a4e-2f55-4c55-9d0a-7d1f3e9a1c11", node)
        assert cluster.node_of("stale") is None
        api.bind(cluster.ns, "fresh", uid, node)
        assert cluster.node_of("fresh") == node
        api.create_event(cluster.ns, _event(cluster.ns, "fresh", uid))
        assert [e.involved_object.name for e in cluster.events("Scheduled")] == ["fresh"]
    finally:
        api.close()


def test_a_rejected_token_is_the_same_error_on_both_paths(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster.pod("p")
    api = KubeApi(load_api_client(str(cluster.plane.scheduler_kubeconfig)))
    try:
        configuration = api.api_client.configuration
        configuration.refresh_api_key_hook = None  # the kubeconfig's hook would put the good token back
        configuration.api_key = {"BearerToken": "Bearer not-a-token"}
        monkeypatch.setattr(api_client, "AUTH_REUSE_SECONDS", 0.0)
        seen: list[KubeError] = []
        for direct in (api._direct, None):
            api._direct = direct
            with pytest.raises(ClientError) as refused:
                api.create_event(cluster.ns, _event(cluster.ns, "p", ""))
            seen.append(refused.value)
        assert [e.status for e in seen] == [401, 401]
        assert seen[0].message == seen[1].message
    finally:
        api.close()

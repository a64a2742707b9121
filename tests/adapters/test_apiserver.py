"""The fake API server, exercised through the official `kubernetes` client.

Every test talks HTTP to a real socket on 127.0.0.1 with the same client calls the live
scheduler makes, and checks what the client sees: status codes, Status bodies, watch
events and how `Watch.stream` surfaces errors, as a real kube-apiserver would produce.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from datetime import datetime, timezone
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Iterator

import pytest
import urllib3
import yaml
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from adapters.apiserver import FakeApiServer

NS = "default"


# --- builders ------------------------------------------------------------------------------

def node(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}


def pod(name: str, *, node_name: str | None = None, phase: str | None = None, scheduler: str | None = None,
        **labels: str) -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod",
                           "metadata": {"name": name, "namespace": NS, "labels": labels},
                           "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    if node_name:
        obj["spec"]["nodeName"] = node_name
    if scheduler:
        obj["spec"]["schedulerName"] = scheduler
    if phase:
        obj["status"] = {"phase": phase,
                         "conditions": [{"type": "Ready", "status": "True" if phase == "Running" else "False"}]}
    return obj


def pdb(name: str, *, min_available: int | str | None = None, max_unavailable: int | str | None = None,
        unhealthy: str | None = None, **match: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"selector": {"matchLabels": match}}
    if unhealthy is not None:
        spec["unhealthyPodEvictionPolicy"] = unhealthy
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": NS}, "spec": spec}


def binding(pod_name: str, node_name: str) -> client.V1Binding:
    return client.V1Binding(metadata=client.V1ObjectMeta(name=pod_name),
                            target=client.V1ObjectReference(kind="Node", name=node_name))


def eviction(pod_name: str) -> client.V1Eviction:
    return client.V1Eviction(metadata=client.V1ObjectMeta(name=pod_name, namespace=NS))


def lease(name: str, holder: str) -> client.V1Lease:
    return client.V1Lease(metadata=client.V1ObjectMeta(name=name, namespace=NS),
                          spec=client.V1LeaseSpec(holder_identity=holder, lease_duration_seconds=15))


def raw(resp: Any) -> Any:
    """The JSON body of a `_preload_content=False` answer, with its connection given back."""
    try:
        return json.loads(resp.data)
    finally:
        resp.release_conn()


def bind(core: client.CoreV1Api, pod_name: str, node_name: str) -> tuple[int, Any]:
    """Bind as the live scheduler must: without reading the answer as a Binding."""
    resp = core.create_namespaced_pod_binding(pod_name, NS, binding(pod_name, node_name), _preload_content=False)
    return resp.status, raw(resp)


def evict(core: client.CoreV1Api, pod_name: str) -> tuple[int, Any]:
    resp = core.create_namespaced_pod_eviction(pod_name, NS, eviction(pod_name), _preload_content=False)
    return resp.status, raw(resp)


def wait_for(condition: Callable[[], Any], timeout: float = 2.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.01)


def fake_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("fake-apiserver")]


# --- fixtures ------------------------------------------------------------------------------

_open_clients: list[client.ApiClient] = []


@pytest.fixture(autouse=True)
def no_leaked_threads() -> Iterator[None]:
    yield
    while _open_clients:
        _open_clients.pop().close()
    assert wait_for(lambda: not fake_threads(), timeout=3.0), fake_threads()


@pytest.fixture
def make_server() -> Iterator[Callable[..., FakeApiServer]]:
    servers: list[FakeApiServer] = []

    def make(objects: list[dict[str, Any]] = (), **kwargs: Any) -> FakeApiServer:  # type: ignore[assignment]
        kwargs.setdefault("kubelet_start_seconds", 0)
        kwargs.setdefault("kubelet_grace_seconds", 0)
        server = FakeApiServer(objects, **kwargs).start()
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()


@pytest.fixture
def server(make_server: Callable[..., FakeApiServer]) -> FakeApiServer:
    return make_server([node("n1"), node("n2")])


def api_client(server: FakeApiServer) -> client.ApiClient:
    """A client for `server`, closed after the test."""
    api = client.ApiClient(server.client_configuration())
    _open_clients.append(api)
    return api


@pytest.fixture
def core(server: FakeApiServer) -> client.CoreV1Api:
    return client.CoreV1Api(api_client(server))


def status_of(exc: ApiException) -> dict[str, Any]:
    return json.loads(exc.body)


# --- CRUD ----------------------------------------------------------------------------------

def test_list_get_create_delete(server: FakeApiServer, core: client.CoreV1Api) -> None:
    assert [n.metadata.name for n in core.list_node().items] == ["n1", "n2"]
    created = core.create_namespaced_pod(NS, pod("web-1", app="web"))
    assert created.metadata.uid and created.metadata.creation_timestamp
    assert int(created.metadata.resource_version) > 0
    assert created.status.phase == "Pending"  # status is the server's on create
    assert created.spec.scheduler_name == "default-scheduler"
    assert core.read_namespaced_pod("web-1", NS).metadata.uid == created.metadata.uid
    assert [p.metadata.name for p in core.list_pod_for_all_namespaces().items] == ["web-1"]
    assert server.store.get("pods", NS, "web-1")["metadata"]["uid"] == created.metadata.uid

    deleted = core.delete_namespaced_pod("web-1", NS)  # unbound: gone at once, answered with the pod
    assert deleted.metadata.name == "web-1"
    assert core.list_namespaced_pod(NS).items == []
    with pytest.raises(ApiException) as err:
        core.delete_namespaced_pod("web-1", NS)
    assert err.value.status == 404
    assert status_of(err.value)["message"] == 'pods "web-1" not found'


def test_delete_collection(server: FakeApiServer, core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("a", app="web"))
    core.create_namespaced_pod(NS, pod("b", app="db"))
    core.delete_collection_namespaced_pod(NS, label_selector="app=web")
    assert [p.metadata.name for p in core.list_namespaced_pod(NS).items] == ["b"]


def test_errors_are_status_objects(server: FakeApiServer, core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("p"))
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(NS, pod("p"))
    assert err.value.status == 409
    assert status_of(err.value) == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'pods "p" already exists', "reason": "AlreadyExists",
        "details": {"name": "p", "kind": "pods"}, "code": 409,
    }
    with pytest.raises(ApiException) as err:
        core.read_namespaced_pod("absent", NS)
    assert (err.value.status, status_of(err.value)["reason"]) == (404, "NotFound")
    request = urllib.request.Request(f"{server.url}/api/v1/nodes", data=json.dumps(pod("not-a-node")).encode(),
                                     method="POST")  # the typed client would refuse to send this
    with pytest.raises(urllib.error.HTTPError) as http_err:
        urllib.request.urlopen(request, timeout=2)
    assert (http_err.value.code, json.loads(http_err.value.read())["reason"]) == (400, "BadRequest")
    http_err.value.close()
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod("nowhere", {**pod("p"), "metadata": {"name": "p"}})
    assert status_of(err.value)["message"] == 'namespaces "nowhere" not found'


def test_every_write_bumps_one_global_resource_version(server: FakeApiServer, core: client.CoreV1Api) -> None:
    before = server.store.resource_version
    a = core.create_namespaced_pod(NS, pod("a"))
    n = core.create_node(node("n3"))
    assert int(a.metadata.resource_version) == before + 1
    assert int(n.metadata.resource_version) == before + 2
    assert core.list_node().metadata.resource_version == str(before + 2)


def test_delete_of_other_resources_answers_a_status(core: client.CoreV1Api) -> None:
    answer = raw(core.delete_node("n2", _preload_content=False))
    assert (answer["kind"], answer["status"], answer["details"]["name"]) == ("Status", "Success", "n2")


def test_list_items_carry_no_kind_but_watch_objects_do(server: FakeApiServer, core: client.CoreV1Api) -> None:
    listed = raw(core.list_node(_preload_content=False))
    assert listed["kind"] == "NodeList" and listed["apiVersion"] == "v1"
    assert "kind" not in listed["items"][0]
    stream = watch.Watch().stream(core.list_node, resource_version="0", timeout_seconds=1)
    assert next(stream)["raw_object"]["kind"] == "Node"
    stream.close()


def test_list_paging(server: FakeApiServer, core: client.CoreV1Api) -> None:
    for i in range(5):
        core.create_namespaced_pod(NS, pod(f"p{i}"))
    first = core.list_namespaced_pod(NS, limit=2)
    assert [p.metadata.name for p in first.items] == ["p0", "p1"]
    assert first.metadata.remaining_item_count == 3
    rest = core.list_namespaced_pod(NS, limit=10, _continue=first.metadata._continue)
    assert [p.metadata.name for p in rest.items] == ["p2", "p3", "p4"]
    assert not rest.metadata._continue


def test_label_and_field_selectors(server: FakeApiServer, core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("a", app="web", tier="front"))
    core.create_namespaced_pod(NS, pod("b", app="db", scheduler="cpsat"))
    core.create_namespaced_pod(NS, pod("c", node_name="n1"))

    def names(**kw: str) -> list[str]:
        return [p.metadata.name for p in core.list_namespaced_pod(NS, **kw).items]

    assert names(label_selector="app=web") == ["a"]
    assert names(label_selector="app!=web") == ["b", "c"]
    assert names(label_selector="app in (web,db),!tier") == ["b"]
    assert names(label_selector="tier") == ["a"]
    assert names(field_selector="spec.nodeName=") == ["a", "b"]
    assert names(field_selector="spec.schedulerName=cpsat,spec.nodeName=") == ["b"]
    assert names(field_selector="metadata.name!=a,status.phase!=Running") == ["b"]  # c was started
    assert [n.metadata.name for n in core.list_node(field_selector="metadata.name=n2").items] == ["n2"]
    with pytest.raises(ApiException) as err:
        core.list_namespaced_pod(NS, field_selector="spec.priority=3")
    assert err.value.status == 400
    assert status_of(err.value)["message"] == "field label not supported: spec.priority"


def test_preloaded_objects_keep_status_and_lists_are_flattened(make_server: Callable[..., FakeApiServer]) -> None:
    server = make_server([{"apiVersion": "v1", "kind": "List", "items": [node("n1"),
                                                                         pod("run", node_name="n1", phase="Running")]},
                          {**pod("other"), "metadata": {"name": "other", "namespace": "team-a"}}])
    core = client.CoreV1Api(api_client(server))
    assert core.read_namespaced_pod("run", NS).status.phase == "Running"
    assert "team-a" in [n.metadata.name for n in core.list_namespace().items]
    assert core.read_namespaced_pod("other", "team-a").metadata.uid


def test_priority_admission(server: FakeApiServer, core: client.CoreV1Api) -> None:
    client.SchedulingV1Api(api_client(server)).create_priority_class(
        client.V1PriorityClass(metadata=client.V1ObjectMeta(name="high"), value=1000))
    p = core.create_namespaced_pod(NS, {**pod("p"), "spec": {**pod("p")["spec"], "priorityClassName": "high"}})
    assert (p.spec.priority, p.spec.preemption_policy) == (1000, "PreemptLowerPriority")
    assert core.create_namespaced_pod(NS, pod("q")).spec.priority == 0
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(NS, {**pod("r"), "spec": {**pod("r")["spec"], "priorityClassName": "nope"}})
    assert err.value.status == 403


def test_pod_update_cannot_set_node_name(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("p"))
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_pod("p", NS, {"spec": {"nodeName": "n1"}})
    assert err.value.status == 422


# --- watch ---------------------------------------------------------------------------------

def test_watch_delivers_added_modified_deleted_in_order(core: client.CoreV1Api) -> None:
    rv = core.list_namespaced_pod(NS).metadata.resource_version
    core.create_namespaced_pod(NS, pod("p"))
    bind(core, "p", "n1")
    core.delete_namespaced_pod("p", NS)
    seen = []
    w = watch.Watch()
    for event in w.stream(core.list_namespaced_pod, NS, resource_version=rv, timeout_seconds=2):
        obj = event["object"]
        seen.append((event["type"], obj.spec.node_name, obj.status.phase, bool(obj.metadata.deletion_timestamp)))
        if event["type"] == "DELETED":
            w.stop()
    assert seen == [
        ("ADDED", None, "Pending", False),
        ("MODIFIED", "n1", "Pending", False),  # the bind
        ("MODIFIED", "n1", "Running", False),  # the kubelet
        ("MODIFIED", "n1", "Running", True),  # graceful deletion
        ("DELETED", "n1", "Running", True),  # the kubelet finishes it
    ]


def test_watch_from_zero_starts_with_current_objects(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("a"))
    core.create_namespaced_pod(NS, pod("b"))
    w = watch.Watch()
    events = []
    for event in w.stream(core.list_namespaced_pod, NS, resource_version="0", timeout_seconds=1):
        events.append((event["type"], event["object"].metadata.name))
        if len(events) == 2:
            w.stop()
    assert events == [("ADDED", "a"), ("ADDED", "b")]


def test_watch_with_selector_sees_objects_leave_and_enter(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("p"))
    rv = core.list_namespaced_pod(NS).metadata.resource_version
    bind(core, "p", "n1")
    core.create_namespaced_pod(NS, pod("q"))
    w = watch.Watch()
    events = []
    for event in w.stream(core.list_namespaced_pod, NS, resource_version=rv, field_selector="spec.nodeName=",
                          timeout_seconds=1):
        events.append((event["type"], event["object"].metadata.name))
        if len(events) == 2:
            w.stop()
    assert events == [("DELETED", "p"), ("ADDED", "q")]


def test_watch_times_out_cleanly_and_sends_bookmarks(make_server: Callable[..., FakeApiServer]) -> None:
    server = make_server([node("n1")], bookmark_interval=0.05)
    core = client.CoreV1Api(api_client(server))
    rv = core.list_node().metadata.resource_version
    w = watch.Watch()
    start, types = time.monotonic(), []
    for event in w.stream(core.list_node, resource_version=rv, allow_watch_bookmarks=True, timeout_seconds=1):
        types.append(event["type"])
        if len(types) == 3:
            server.store.create("nodes", node("n2"))  # moves the resourceVersion on
        if len(types) == 5:
            w.stop()
    assert types == ["BOOKMARK"] * 3 + ["ADDED", "BOOKMARK"]
    assert w.resource_version == str(int(rv) + 1)  # the client follows the bookmarks
    assert time.monotonic() - start < 1
    # without stop(), the stream ends by itself at timeoutSeconds
    start = time.monotonic()
    assert list(watch.Watch().stream(core.list_node, resource_version=str(int(rv) + 1), timeout_seconds=1)) == []
    assert 0.9 < time.monotonic() - start < 1.5


@pytest.mark.parametrize("timeout", [{"timeout_seconds": 2}, {}], ids=["with-timeout", "retrying-client"])
def test_watch_from_compacted_version_surfaces_410(server: FakeApiServer, core: client.CoreV1Api,
                                                    timeout: dict[str, int]) -> None:
    rv = core.list_namespaced_pod(NS).metadata.resource_version
    core.create_namespaced_pod(NS, pod("p"))
    floor = server.faults.compact()
    with pytest.raises(ApiException) as err:
        for _ in watch.Watch().stream(core.list_namespaced_pod, NS, resource_version=rv, **timeout):
            pass
    assert err.value.status == 410
    assert err.value.reason == f"Expired: too old resource version: {rv} ({floor})"
    assert server.faults.injected["compact"] == 1


def test_raw_410_is_an_error_event_on_a_200_stream(server: FakeApiServer, core: client.CoreV1Api) -> None:
    rv = core.list_namespaced_pod(NS).metadata.resource_version
    core.create_namespaced_pod(NS, pod("p"))
    server.faults.compact()
    resp = core.list_namespaced_pod(NS, watch=True, resource_version=rv, _preload_content=False)
    assert resp.status == 200
    lines = resp.data.decode().splitlines()
    resp.release_conn()
    assert [json.loads(line)["type"] for line in lines] == ["ERROR"]
    assert json.loads(lines[0])["object"]["code"] == 410
    assert json.loads(lines[0])["object"]["reason"] == "Expired"


def test_short_history_expires_old_versions(make_server: Callable[..., FakeApiServer]) -> None:
    server = make_server([], history_limit=3)
    core = client.CoreV1Api(api_client(server))
    rv = core.list_namespaced_pod(NS).metadata.resource_version
    for i in range(4):
        core.create_namespaced_pod(NS, pod(f"p{i}"))
    with pytest.raises(ApiException) as err:
        list(watch.Watch().stream(core.list_namespaced_pod, NS, resource_version=rv, timeout_seconds=1))
    assert err.value.status == 410


# --- binding -------------------------------------------------------------------------------

def test_binding_answers_201_with_a_status(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("p", scheduler="cpsat"))
    assert bind(core, "p", "n1") == (201, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                           "status": "Success", "code": 201})
    bound = core.read_namespaced_pod("p", NS)
    assert bound.spec.node_name == "n1"
    assert any(c.type == "PodScheduled" and c.status == "True" for c in bound.status.conditions)


def test_binding_without_preload_raises_although_the_pod_is_bound(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("p"))
    with pytest.raises(ValueError):  # the client cannot read a Status as a Binding
        core.create_namespaced_pod_binding("p", NS, binding("p", "n1"))
    assert core.read_namespaced_pod("p", NS).spec.node_name == "n1"


def test_double_bind_is_409_and_missing_pod_404(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("p"))
    bind(core, "p", "n1")
    with pytest.raises(ApiException) as err:
        bind(core, "p", "n2")
    assert err.value.status == 409
    assert status_of(err.value)["message"] == \
        'Operation cannot be fulfilled on pods/binding "p": pod p is already assigned to node "n1"'
    with pytest.raises(ApiException) as err:
        bind(core, "ghost", "n1")
    assert err.value.status == 404


def test_binding_to_a_missing_node_succeeds_and_the_pod_never_starts(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("p"))
    assert bind(core, "p", "no-such-node")[0] == 201
    assert core.read_namespaced_pod("p", NS).status.phase == "Pending"


def test_kubelet_starts_bound_pods_after_its_delay(make_server: Callable[..., FakeApiServer]) -> None:
    server = make_server([node("n1")], kubelet_start_seconds=0.05)
    core = client.CoreV1Api(api_client(server))
    core.create_namespaced_pod(NS, pod("p"))
    bind(core, "p", "n1")
    assert core.read_namespaced_pod("p", NS).status.phase == "Pending"
    running = wait_for(lambda: core.read_namespaced_pod("p", NS).status.phase == "Running")
    assert running
    status = core.read_namespaced_pod("p", NS).status
    assert status.start_time and {c.type for c in status.conditions if c.status == "True"} >= {"Ready", "PodScheduled"}


def test_without_kubelet_bound_pods_stay_pending(make_server: Callable[..., FakeApiServer]) -> None:
    server = make_server([node("n1")], kubelet=False)
    core = client.CoreV1Api(api_client(server))
    core.create_namespaced_pod(NS, pod("p"))
    bind(core, "p", "n1")
    assert core.read_namespaced_pod("p", NS).status.phase == "Pending"


# --- deletion ------------------------------------------------------------------------------

def test_graceful_deletion_waits_for_the_kubelet(make_server: Callable[..., FakeApiServer]) -> None:
    server = make_server([node("n1"), pod("p", node_name="n1", phase="Running")], kubelet_grace_seconds=0.1)
    core = client.CoreV1Api(api_client(server))
    terminating = core.delete_namespaced_pod("p", NS)
    assert terminating.metadata.deletion_timestamp is not None
    assert core.read_namespaced_pod("p", NS).metadata.deletion_timestamp is not None  # still holds its node
    assert wait_for(lambda: server.store.get("pods", NS, "p") is None)


def test_zero_grace_period_deletes_at_once(make_server: Callable[..., FakeApiServer]) -> None:
    server = make_server([node("n1"), pod("p", node_name="n1", phase="Running")], kubelet_grace_seconds=5)
    core = client.CoreV1Api(api_client(server))
    core.delete_namespaced_pod("p", NS, grace_period_seconds=0)
    assert server.store.get("pods", NS, "p") is None


# --- eviction and PodDisruptionBudgets -----------------------------------------------------

def test_eviction_honours_the_disruption_budget(make_server: Callable[..., FakeApiServer]) -> None:
    objects = [node("n1")] + [pod(f"w{i}", node_name="n1", phase="Running", app="web") for i in range(3)]
    server = make_server(objects + [pdb("web", min_available=2, app="web")])
    c = api_client(server)
    core, policy = client.CoreV1Api(c), client.PolicyV1Api(c)
    status = policy.read_namespaced_pod_disruption_budget("web", NS).status
    assert (status.current_healthy, status.desired_healthy, status.expected_pods, status.disruptions_allowed) == \
        (3, 2, 3, 1)

    assert evict(core, "w0")[0] == 201
    assert policy.read_namespaced_pod_disruption_budget("web", NS).status.disruptions_allowed == 0

    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod_eviction("w1", NS, eviction("w1"))
    assert err.value.status == 429
    body = status_of(err.value)
    assert body["reason"] == "TooManyRequests"
    assert body["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert body["details"]["causes"][0]["message"] == "The disruption budget web needs 2 healthy pods and has 2 currently"
    assert server.store.get("pods", NS, "w1") is not None


def test_pending_pods_are_evicted_without_a_budget_check(make_server: Callable[..., FakeApiServer]) -> None:
    server = make_server([node("n1"), pod("w0", app="web"), pdb("web", min_available=5, app="web")])
    core = client.CoreV1Api(api_client(server))
    assert evict(core, "w0")[0] == 201
    assert server.store.get("pods", NS, "w0") is None


def test_an_empty_selector_guards_a_pod_without_labels(make_server: Callable[..., FakeApiServer]) -> None:
    # policy/v1: `selector: {}` selects every pod of the namespace, labels or none, and the
    # eviction subresource checks it for an unlabeled pod too (the old shortcut that let any
    # unlabeled pod go without looking at budgets is gone from the real server).
    guard = pdb("all", min_available=1)
    guard["spec"]["selector"] = {}
    server = make_server([node("n1"), pod("bare", node_name="n1", phase="Running"), guard])
    core = client.CoreV1Api(api_client(server))
    assert server.store.get("poddisruptionbudgets", NS, "all")["status"]["disruptionsAllowed"] == 0
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod_eviction("bare", NS, eviction("bare"))
    assert err.value.status == 429
    assert server.store.get("pods", NS, "bare") is not None


def budget(name: str, allowed: int, healthy: tuple[int, int], *, unhealthy: str | None = None,
           observed: int = 1, **match: str) -> dict[str, Any]:
    """A budget whose status is as given (the disruption controller off): `healthy` is
    (currentHealthy, desiredHealthy); `observed` its status.observedGeneration (generation 1)."""
    obj = pdb(name, unhealthy=unhealthy, **match)
    obj["metadata"]["generation"] = 1
    obj["status"] = {"observedGeneration": observed, "disruptionsAllowed": allowed,
                     "currentHealthy": healthy[0], "desiredHealthy": healthy[1]}
    return obj


# As the real server's eviction reads a pod that is not Ready, covered by one budget: it goes
# without the budget being checked or spent under AlwaysAllow, or under IfHealthyBudget (the
# default) while currentHealthy >= desiredHealthy > 0 (observedGeneration is not looked at
# then); otherwise the budget decides as for any pod. Two budgets refuse it, Ready or not. Each
# case: the pod (s: not Ready, w: Ready), its budgets, the answer's status code, and the
# disruptionsAllowed each budget is left with.
UNREADY_EVICTIONS = [
    pytest.param("s", [budget("web", 0, (1, 1), unhealthy="AlwaysAllow", app="web")], 201, [0], id="always-allow"),
    pytest.param("s", [budget("web", 0, (1, 1), unhealthy="AlwaysAllow", observed=0, app="web")], 201, [0],
                 id="always-allow-budget-just-edited"),
    pytest.param("s", [budget("web", 0, (2, 2), app="web")], 201, [0], id="if-healthy-budget-healthy-enough"),
    pytest.param("s", [budget("web", 1, (3, 2), unhealthy="IfHealthyBudget", app="web")], 201, [1],
                 id="if-healthy-budget-spends-nothing"),
    pytest.param("s", [budget("web", 0, (1, 2), unhealthy="IfHealthyBudget", app="web")], 429, [0],
                 id="if-healthy-budget-not-healthy-enough"),
    pytest.param("s", [budget("web", 0, (0, 0), app="web")], 429, [0], id="budget-desiring-none"),
    pytest.param("s", [budget("web", 1, (1, 0), app="web")], 201, [0], id="budget-desiring-none-spent"),
    pytest.param("w", [budget("web", 0, (1, 1), unhealthy="AlwaysAllow", app="web")], 429, [0], id="ready-always-allow"),
    pytest.param("s", [budget("web", 3, (3, 0), unhealthy="AlwaysAllow", app="web"),
                       budget("tier", 3, (3, 0), unhealthy="AlwaysAllow", tier="x")], 500, [3, 3], id="two-budgets"),
]


@pytest.mark.parametrize(("evicted", "budgets", "code", "left"), UNREADY_EVICTIONS)
def test_eviction_of_a_pod_that_is_not_ready(make_server: Callable[..., FakeApiServer], evicted: str,
                                             budgets: list[dict[str, Any]], code: int, left: list[int]) -> None:
    ready = pod("w", node_name="n1", phase="Running", app="web", tier="x")
    unready = pod("s", node_name="n1", phase="Running", app="web", tier="x")
    unready["status"]["conditions"] = [{"type": "Ready", "status": "False", "reason": "ContainersNotReady"}]
    server = make_server([node("n1"), ready, unready, *budgets], disruption_controller=False)
    core = client.CoreV1Api(api_client(server))
    if code == 201:
        assert evict(core, evicted)[0] == 201
        assert server.store.get("pods", NS, evicted) is None
    else:
        with pytest.raises(ApiException) as err:
            core.create_namespaced_pod_eviction(evicted, NS, eviction(evicted))
        assert err.value.status == code
        assert server.store.get("pods", NS, evicted) is not None
    assert [server.store.get("poddisruptionbudgets", NS, b["metadata"]["name"])["status"]["disruptionsAllowed"]
            for b in budgets] == left


def test_budget_status_tracks_pods(make_server: Callable[..., FakeApiServer]) -> None:
    server = make_server([node("n1"), pdb("web", max_unavailable="50%", app="web")])
    core = client.CoreV1Api(api_client(server))
    for i in range(4):
        core.create_namespaced_pod(NS, pod(f"w{i}", node_name="n1", app="web"))
    status = server.store.get("poddisruptionbudgets", NS, "web")["status"]
    assert (status["expectedPods"], status["currentHealthy"], status["desiredHealthy"],
            status["disruptionsAllowed"]) == (4, 4, 2, 2)


# --- status, leases, events, podgroups ------------------------------------------------------

def test_status_patch_sets_nominated_node_and_merges_conditions(server: FakeApiServer,
                                                                core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("p"))
    core.patch_namespaced_pod_status("p", NS, {"status": {"conditions": [
        {"type": "Initialized", "status": "True"}]}})
    seen: list[str] = []
    handle = server.api.handle

    def recording(request: Any) -> Any:
        seen.append(request.content_type)
        return handle(request)

    server.api.handle = recording  # type: ignore[method-assign]
    patched = core.patch_namespaced_pod_status("p", NS, {"status": {"nominatedNodeName": "n2", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}})
    assert seen == ["application/strategic-merge-patch+json"]  # what the client sends for a dict
    assert patched.status.nominated_node_name == "n2"
    assert sorted(c.type for c in patched.status.conditions) == ["Initialized", "PodScheduled"]
    assert patched.spec.node_name is None


def test_json_and_merge_patches(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("p", app="web"))
    p = core.patch_namespaced_pod("p", NS, [{"op": "add", "path": "/metadata/labels/tier", "value": "front"}])
    assert p.metadata.labels == {"app": "web", "tier": "front"}
    p = core.patch_namespaced_pod("p", NS, {"metadata": {"labels": {"app": None}}},
                                  _content_type="application/merge-patch+json")
    assert p.metadata.labels == {"tier": "front"}


def test_json_patch_pointers_reach_into_objects_and_lists() -> None:
    """RFC 6902 paths: escaped `~1`/`~0` tokens, list indices and `-`, and 422 for a member that
    is not there (400 for a pointer that is not one)."""
    from adapters.apiserver.errors import ApiError
    from adapters.apiserver.patches import json_patch

    doc = {"metadata": {"annotations": {"a/b": "1", "m~n": "2"}},
           "spec": {"tolerations": [{"key": "x"}, {"key": "y"}]}}
    out = json_patch(doc, [
        {"op": "replace", "path": "/metadata/annotations/a~1b", "value": "one"},
        {"op": "remove", "path": "/metadata/annotations/m~0n"},
        {"op": "add", "path": "/spec/tolerations/1", "value": {"key": "between"}},
        {"op": "add", "path": "/spec/tolerations/-", "value": {"key": "last"}},
        {"op": "move", "from": "/spec/tolerations/0", "path": "/spec/first"},
        {"op": "copy", "from": "/spec/first/key", "path": "/metadata/annotations/copied"},
        {"op": "test", "path": "/spec/tolerations/2/key", "value": "last"},
    ])
    assert out == {"metadata": {"annotations": {"a/b": "one", "copied": "x"}},
                   "spec": {"tolerations": [{"key": "between"}, {"key": "y"}, {"key": "last"}], "first": {"key": "x"}}}
    assert doc["spec"]["tolerations"] == [{"key": "x"}, {"key": "y"}]  # the target is not changed
    for operations in ([{"op": "remove", "path": "/spec/tolerations/2"}],
                       [{"op": "replace", "path": "/spec/missing/key", "value": 1}],
                       [{"op": "add", "path": "/spec/tolerations/0/key/deeper", "value": 1}],
                       [{"op": "test", "path": "/spec/tolerations/0/key", "value": "nope"}]):
        with pytest.raises(ApiError) as err:
            json_patch(doc, operations)
        assert err.value.code == 422, operations
    with pytest.raises(ApiError) as err:
        json_patch(doc, [{"op": "add", "path": "spec", "value": 1}])
    assert err.value.code == 400


def test_lease_update_with_stale_version_is_409(server: FakeApiServer) -> None:
    leases = client.CoordinationV1Api(api_client(server))
    created = leases.create_namespaced_lease(NS, lease("sched", "a"))
    renewed = leases.replace_namespaced_lease("sched", NS, client.V1Lease(
        metadata=client.V1ObjectMeta(name="sched", namespace=NS, resource_version=created.metadata.resource_version),
        spec=client.V1LeaseSpec(holder_identity="a", lease_duration_seconds=15, lease_transitions=1)))
    assert int(renewed.metadata.resource_version) > int(created.metadata.resource_version)
    with pytest.raises(ApiException) as err:
        leases.replace_namespaced_lease("sched", NS, client.V1Lease(
            metadata=client.V1ObjectMeta(name="sched", namespace=NS,
                                         resource_version=created.metadata.resource_version),
            spec=client.V1LeaseSpec(holder_identity="b")))
    assert err.value.status == 409
    assert status_of(err.value)["reason"] == "Conflict"
    with pytest.raises(ApiException) as err:
        leases.replace_namespaced_lease("sched", NS, lease("sched", "b"))  # no resourceVersion at all
    assert err.value.status == 422
    assert leases.read_namespaced_lease("sched", NS).spec.holder_identity == "a"


def test_events_are_accepted_and_listable_in_both_apis(server: FakeApiServer, core: client.CoreV1Api) -> None:
    answer = core.create_namespaced_event(NS, client.CoreV1Event(
        metadata=client.V1ObjectMeta(name="p.1"), reason="Scheduled", message="assigned default/p to n1",
        event_time=datetime.now(timezone.utc),  # events.k8s.io/v1 cannot be read by this client without it
        type="Normal", involved_object=client.V1ObjectReference(kind="Pod", name="p", namespace=NS)))
    assert answer.metadata.uid
    assert [e.reason for e in core.list_namespaced_event(NS, field_selector="reason=Scheduled").items] == ["Scheduled"]
    events_v1 = client.EventsV1Api(api_client(server)).list_namespaced_event(NS)
    assert [(e.reason, e.note, e.regarding.name) for e in events_v1.items] == \
        [("Scheduled", "assigned default/p to n1", "p")]


PODGROUP = ("scheduling.x-k8s.io", "v1alpha1", NS, "podgroups")


def test_podgroups_crd(server: FakeApiServer) -> None:
    custom = client.CustomObjectsApi(api_client(server))
    custom.create_namespaced_custom_object(*PODGROUP, {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": "job"}, "spec": {"minMember": 3}})
    patched = custom.patch_namespaced_custom_object(*PODGROUP, "job", {"spec": {"minMember": 4}})
    assert patched["spec"]["minMember"] == 4 and patched["metadata"]["generation"] == 2
    listed = custom.list_namespaced_custom_object(*PODGROUP)
    assert [(i["kind"], i["metadata"]["name"]) for i in listed["items"]] == [("PodGroup", "job")]


def test_podgroups_absent_without_the_crd(make_server: Callable[..., FakeApiServer]) -> None:
    server = make_server([], podgroups_crd=False)
    custom = client.CustomObjectsApi(api_client(server))
    with pytest.raises(ApiException) as err:
        custom.list_namespaced_custom_object(*PODGROUP)
    assert err.value.status == 404
    assert status_of(err.value)["message"] == "the server could not find the requested resource"


CORE_PODGROUP = ("scheduling.k8s.io", "v1alpha2", NS, "podgroups")
WORKLOAD = ("scheduling.k8s.io", "v1alpha1", NS, "workloads")
VOLCANO_PODGROUP = ("scheduling.volcano.sh", "v1beta1", NS, "podgroups")


def test_gang_apis_are_served_apart_from_one_another(server: FakeApiServer) -> None:
    """Three `podgroups` resources and `workloads`: each its own storage, a v1alpha2 PodGroup's
    status written only through its status subresource (a merge patch, as the scheduler sends)."""
    custom = client.CustomObjectsApi(api_client(server))
    for where, kind, spec in ((PODGROUP, "PodGroup", {"minMember": 2}),
                              (CORE_PODGROUP, "PodGroup", {"schedulingPolicy": {"gang": {"minCount": 3}}}),
                              (WORKLOAD, "Workload", {"podGroups": [{"name": "a", "policy": {"basic": {}}}]}),
                              (VOLCANO_PODGROUP, "PodGroup", {"minMember": 4})):
        custom.create_namespaced_custom_object(*where, {"apiVersion": f"{where[0]}/{where[1]}", "kind": kind,
                                                        "metadata": {"name": "job"}, "spec": spec})
    assert custom.list_namespaced_custom_object(*VOLCANO_PODGROUP)["items"][0]["spec"] == {"minMember": 4}
    assert [i["spec"] for i in custom.list_cluster_custom_object(*CORE_PODGROUP[:2], "podgroups")["items"]] == \
        [{"schedulingPolicy": {"gang": {"minCount": 3}}}]
    condition = {"type": "PodGroupScheduled", "status": "True", "reason": "Scheduled", "message": "bound",
                 "lastTransitionTime": "2026-01-01T00:00:00Z"}
    patched = custom.patch_namespaced_custom_object_status(*CORE_PODGROUP, "job",
                                                           {"status": {"conditions": [condition]}, "spec": {}})
    assert patched["status"]["conditions"] == [condition]
    assert patched["spec"] == {"schedulingPolicy": {"gang": {"minCount": 3}}}  # spec untouched by a status write
    with pytest.raises(ApiException) as err:
        custom.patch_namespaced_custom_object_status(*WORKLOAD, "job", {"status": {}})
    assert err.value.status == 404  # a Workload has no status subresource here


def test_gang_apis_left_out_answer_404(make_server: Callable[..., FakeApiServer]) -> None:
    server = make_server([], gang_apis=["scheduling.volcano.sh/v1beta1"])
    custom = client.CustomObjectsApi(api_client(server))
    for where in (CORE_PODGROUP, WORKLOAD):
        with pytest.raises(ApiException) as err:
            custom.list_namespaced_custom_object(*where)
        assert err.value.status == 404
    assert custom.list_namespaced_custom_object(*VOLCANO_PODGROUP)["items"] == []
    with pytest.raises(ValueError, match="unknown gang APIs"):
        FakeApiServer([], gang_apis=["scheduling.k8s.io/v9"])


# --- faults --------------------------------------------------------------------------------

def test_fail_the_next_requests(server: FakeApiServer, core: client.CoreV1Api) -> None:
    server.faults.fail("GET", r"/nodes$", status=500, count=2)
    for _ in range(2):
        with pytest.raises(ApiException) as err:
            core.list_node()
        assert (err.value.status, status_of(err.value)["reason"]) == (500, "InternalError")
    assert len(core.list_node().items) == 2
    assert server.faults.injected["fail"] == 2


def test_injected_bind_conflict_and_throttling(server: FakeApiServer, core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("p"))
    server.faults.fail("POST", r"/binding$", status=409)
    server.faults.fail("POST", r"/eviction$", status=429, retry_after=2)
    with pytest.raises(ApiException) as err:
        bind(core, "p", "n1")
    assert err.value.status == 409
    assert core.read_namespaced_pod("p", NS).spec.node_name is None  # the fault hit before the API
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod_eviction("p", NS, eviction("p"))
    assert err.value.status == 429 and err.value.headers["Retry-After"] == "2"
    assert server.faults.total == 2


def test_delay(server: FakeApiServer, core: client.CoreV1Api) -> None:
    server.faults.delay("GET", r"/nodes$", seconds=0.2, count=1)
    start = time.monotonic()
    core.list_node()
    assert time.monotonic() - start >= 0.2
    start = time.monotonic()
    core.list_node()
    assert time.monotonic() - start < 0.2


def test_disconnect(server: FakeApiServer, core: client.CoreV1Api) -> None:
    server.faults.disconnect("POST", r"/pods$")
    with pytest.raises(urllib3.exceptions.ProtocolError):  # urllib3 does not retry a POST
        core.create_namespaced_pod(NS, pod("p"), _request_timeout=2)
    assert server.store.get("pods", NS, "p") is None
    server.faults.disconnect("GET", r"/nodes$")
    assert len(core.list_node().items) == 2  # but it silently retries a GET once the connection drops
    assert server.faults.injected["disconnect"] == 2


def test_faults_can_target_watches_only(server: FakeApiServer, core: client.CoreV1Api) -> None:
    server.faults.fail("GET", r"/pods$", watch=True, status=500)
    assert core.list_namespaced_pod(NS).items == []  # a plain list is not a watch
    with pytest.raises(ApiException) as err:
        list(watch.Watch().stream(core.list_namespaced_pod, NS, timeout_seconds=1))
    assert err.value.status == 500


def test_drop_watches_cuts_the_stream(server: FakeApiServer, core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("p"))
    stream = watch.Watch().stream(core.list_namespaced_pod, NS, resource_version="0", timeout_seconds=5)
    assert next(stream)["type"] == "ADDED"
    assert server.faults.drop_watches() == 1
    with pytest.raises(urllib3.exceptions.ProtocolError):
        next(stream)


def test_restart_on_the_same_port_keeping_the_store(server: FakeApiServer, core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("p"))
    url = server.url
    server.faults.restart(keep_store=True)
    assert server.url == url
    assert [p.metadata.name for p in core.list_namespaced_pod(NS).items] == ["p"]
    assert server.faults.injected["restart"] == 1


def test_restart_wiping_the_store_expires_old_versions(server: FakeApiServer, core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("p"))
    rv = core.list_namespaced_pod(NS).metadata.resource_version
    server.restart(keep_store=False, down_seconds=0.05)
    assert core.list_namespaced_pod(NS).items == []
    assert [n.metadata.name for n in core.list_namespace().items] == \
        ["default", "kube-node-lease", "kube-public", "kube-system"]
    with pytest.raises(ApiException) as err:
        list(watch.Watch().stream(core.list_namespaced_pod, NS, resource_version=rv, timeout_seconds=1))
    assert err.value.status == 410


def test_requests_fail_while_the_server_is_down(server: FakeApiServer, core: client.CoreV1Api) -> None:
    server.faults.restart(keep_store=True, down_seconds=0.3, wait=False)
    # a request may also be cut mid-answer as the server goes; once it is down, connections are refused
    refused = wait_for(lambda: isinstance(_failure(core.list_node), urllib3.exceptions.MaxRetryError))
    assert refused
    assert len(wait_for(lambda: _try(core.list_node), timeout=3)) == 2


def _failure(call: Callable[[], Any]) -> Exception | None:
    try:
        call(_request_timeout=0.5)
    except Exception as exc:
        return exc
    return None


def test_faults_over_http(server: FakeApiServer, core: client.CoreV1Api) -> None:
    def admin(spec: dict[str, Any] | None = None) -> dict[str, Any]:
        data = json.dumps(spec).encode() if spec is not None else None
        request = urllib.request.Request(f"{server.url}/_faults", data=data, method="POST" if data else "GET")
        with urllib.request.urlopen(request, timeout=2) as resp:
            return json.loads(resp.read())

    admin({"action": "fail", "method": "GET", "path": "/nodes$", "status": 503})
    with pytest.raises(ApiException) as err:
        core.list_node()
    assert err.value.status == 503
    assert admin()["injected"] == {"fail": 1}
    admin({"action": "restart", "keep_store": True})
    assert wait_for(lambda: server.faults.injected["restart"] == 1)
    assert len(wait_for(lambda: _try(core.list_node))) == 2


def _try(call: Callable[[], Any]) -> Any:
    try:
        return call().items
    except Exception:
        return None


def test_stop_ends_open_watches_and_threads(make_server: Callable[..., FakeApiServer]) -> None:
    server = make_server([node("n1")])
    core = client.CoreV1Api(api_client(server))
    stream = watch.Watch().stream(core.list_node, resource_version="0", timeout_seconds=30)
    assert next(stream)["type"] == "ADDED"
    url = server.url
    start = time.monotonic()
    server.stop()
    assert time.monotonic() - start < 2
    assert not fake_threads()
    with pytest.raises(urllib3.exceptions.ProtocolError):
        next(stream)
    assert server.start().url == url  # and it can start again, on the same port, with its store
    assert [n.metadata.name for n in core.list_node().items] == ["n1"]


# --- ways in ----------------------------------------------------------------------------------

def test_kubeconfig(server: FakeApiServer, tmp_path: Any) -> None:
    loaded = config.new_client_from_config(config_file=server.kubeconfig_path(tmp_path))
    _open_clients.append(loaded)
    api = client.CoreV1Api(loaded)
    assert [n.metadata.name for n in api.list_node().items] == ["n1", "n2"]


def test_discovery(server: FakeApiServer) -> None:
    def get(path: str) -> dict[str, Any]:
        with urllib.request.urlopen(server.url + path, timeout=2) as resp:
            return json.loads(resp.read())

    assert "scheduling.x-k8s.io" in [g["name"] for g in get("/apis")["groups"]]
    assert "pods/binding" in [r["name"] for r in get("/api/v1")["resources"]]
    assert get("/version")["major"] == "1"


def test_standalone(tmp_path: Any) -> None:
    snapshot = tmp_path / "cluster.yaml"
    snapshot.write_text(yaml.safe_dump_all([node("a"), {"apiVersion": "v1", "kind": "List", "items": [node("b")]}]))
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.Popen([sys.executable, "-m", "adapters.apiserver", "--snapshot", str(snapshot)],
                            cwd=root, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        with urllib.request.urlopen(f"{url}/api/v1/nodes", timeout=5) as resp:
            assert [n["metadata"]["name"] for n in json.loads(resp.read())["items"]] == ["a", "b"]
    finally:
        proc.terminate()
        proc.wait(5)
        if proc.stdout is not None:
            proc.stdout.close()

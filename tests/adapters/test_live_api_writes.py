"""The two writes every scheduled pod makes — its binding and its `Scheduled` event — sent
straight on the client's connection pool (`api_client._DirectWrites`), against the in-memory
API server: what lands, which error class each failure becomes (the same as through the
generated client), and which credential each request carries."""

from __future__ import annotations

import http.server
import json
import threading
from typing import Any, Iterator, Optional

import pytest
from kubernetes import client

import adapters.live.api_client as api_client
from adapters.apiserver import FakeApiServer
from adapters.live.api_client import KubeApi, configured_client, direct_writes
from adapters.live.errors import ClientError, Conflict, ConnectionFailure, KubeError, NotFound, ServerError, TooManyRequests
from tests.adapters.live_harness import NS, node, pod

EVENT = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "p.1", "namespace": NS},
         "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": NS, "name": "p"},
         "reason": "Scheduled", "message": "Successfully assigned default/p to n1", "type": "Normal"}


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    s = FakeApiServer([node("n1"), node("n2"), pod("p"), pod("q")], kubelet_start_seconds=0).start()
    s.requests.keep()
    yield s
    s.stop()


@pytest.fixture
def api(server: FakeApiServer) -> Iterator[KubeApi]:
    a = KubeApi(configured_client(server.client_configuration()))
    assert a._direct is not None  # the path under test is the one taken
    yield a
    a.close()


def _uid(server: FakeApiServer, name: str) -> str:
    return str(server.store.get("pods", NS, name)["metadata"]["uid"])


def _node_of(server: FakeApiServer, name: str) -> Optional[str]:
    return (server.store.get("pods", NS, name).get("spec") or {}).get("nodeName")


def test_a_bind_lands_the_pod_on_its_node(server: FakeApiServer, api: KubeApi) -> None:
    api.bind(NS, "p", _uid(server, "p"), "n2")
    assert _node_of(server, "p") == "n2"
    posts = [r for r in server.requests.records if r.method == "POST"]
    assert [(r.path, r.status) for r in posts] == [("/api/v1/namespaces/default/pods/p/binding", 201)]
    assert json.loads(posts[0].body)["target"] == {"apiVersion": "v1", "kind": "Node", "name": "n2"}


def test_a_stale_uid_is_a_conflict_and_binds_nothing(server: FakeApiServer, api: KubeApi) -> None:
    with pytest.raises(Conflict) as stale:
        api.bind(NS, "p", "not-the-uid-of-p", "n1")
    assert "Precondition failed" in stale.value.message and stale.value.status == 409
    assert _node_of(server, "p") is None


def test_an_event_write_creates_the_event(server: FakeApiServer, api: KubeApi) -> None:
    api.create_event(NS, EVENT)
    made = server.store.get("events", NS, "p.1")
    assert made["reason"] == "Scheduled" and made["involvedObject"]["name"] == "p"


def test_sequential_writes_share_one_connection(server: FakeApiServer, api: KubeApi) -> None:
    # each answer is read to the end and its connection given back, or every write would open one
    for i in range(5):
        api.create_event(NS, {**EVENT, "metadata": {"name": f"p.{i}", "namespace": NS}})
    api.bind(NS, "p", "", "n1")
    assert api._direct is not None and api._direct._pool.num_connections == 1


def _failure(api: KubeApi, action: str) -> KubeError:
    with pytest.raises(KubeError) as err:
        if action == "bind ghost":
            api.bind(NS, "ghost", "", "n1")
        elif action == "bind again":
            api.bind(NS, "q", "", "n1")
        elif action == "bind p":
            api.bind(NS, "p", "", "n1")
        else:
            api.create_event(NS, EVENT)
    return err.value


@pytest.mark.parametrize("action, fault, expected", [
    ("bind ghost", None, NotFound),
    ("bind again", None, Conflict),
    ("bind p", ("POST", r"/binding$", 429, 3), TooManyRequests),
    ("bind p", ("POST", r"/binding$", 503, None), ServerError),
    ("event", ("POST", r"/events$", 403, None), ClientError),
], ids=["404", "409", "429-retry-after", "503", "403"])
def test_errors_are_the_classes_the_generated_client_path_gives(server: FakeApiServer, api: KubeApi, action: str,
                                                                fault: Optional[tuple[str, str, int, Any]],
                                                                expected: type[KubeError]) -> None:
    if action == "bind again":  # q is bound first, so each path's bind of it is refused
        KubeApi(configured_client(server.client_configuration())).bind(NS, "q", "", "n2")
    seen = []
    for direct in (api._direct, None):  # the direct path, then the generated client's
        api._direct = direct
        if fault is not None:
            method, path, status, retry_after = fault
            server.faults.fail(method, path, status=status, retry_after=retry_after, message="refused for the test")
        seen.append(_failure(api, action))
    ours, theirs = seen
    assert type(ours) is type(theirs) is expected
    assert (ours.message, ours.status, ours.reason, ours.retry_after) == \
        (theirs.message, theirs.status, theirs.reason, theirs.retry_after)


def test_a_server_that_is_gone_is_a_connection_failure_never_delivered(server: FakeApiServer, api: KubeApi) -> None:
    server.stop()
    with pytest.raises(ConnectionFailure) as err:
        api.bind(NS, "p", "", "n1")
    assert err.value.retriable and not err.value.maybe_delivered


def test_writes_go_on_after_the_client_let_its_pools_go(server: FakeApiServer, api: KubeApi) -> None:
    api.api_client.rest_client.pool_manager.clear()  # closes the pool the direct path held
    api.bind(NS, "p", "", "n1")
    assert _node_of(server, "p") == "n1"


def test_a_proxy_keeps_the_generated_client_path(server: FakeApiServer) -> None:
    configuration = server.client_configuration()
    configuration.proxy = "http://127.0.0.1:9"
    assert direct_writes(configured_client(configuration)) is None
    assert direct_writes(configured_client(server.client_configuration())) is not None


class _Recorder(http.server.BaseHTTPRequestHandler):
    """Answers every POST 201 and keeps the Authorization header each carried."""

    seen: list[Optional[str]] = []

    def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).seen.append(self.headers.get("Authorization"))
        body = b'{"kind":"Status","apiVersion":"v1","status":"Success","code":201}'
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_a_refreshed_bearer_token_is_sent_by_the_next_write(monkeypatch: pytest.MonkeyPatch) -> None:
    # The in-memory server checks no credentials: a server that records them stands in.
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    _Recorder.seen = []
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        configuration = client.Configuration()
        configuration.host = f"http://127.0.0.1:{httpd.server_address[1]}"
        configuration.api_key = {"authorization": "Bearer first"}
        tokens = iter(["Bearer second", "Bearer third"])

        def refresh(conf: client.Configuration) -> None:  # as an exec credential or a token file would
            conf.api_key["authorization"] = next(tokens, conf.api_key["authorization"])

        api = KubeApi(configured_client(configuration))
        assert api._direct is not None
        api.bind(NS, "p", "", "n1")
        api.create_event(NS, EVENT)  # within AUTH_REUSE_SECONDS: the header asked for by the bind
        configuration.refresh_api_key_hook = refresh
        monkeypatch.setattr(api_client, "AUTH_REUSE_SECONDS", 0.0)
        api.bind(NS, "p", "", "n1")
        api.create_event(NS, EVENT)
        assert _Recorder.seen == ["Bearer first", "Bearer first", "Bearer second", "Bearer third"]
        api.close()
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_a_failing_credential_refresh_is_our_error(server: FakeApiServer, api: KubeApi) -> None:
    def refresh(conf: client.Configuration) -> None:  # an exec credential plugin that cannot run
        raise RuntimeError("exec plugin gcloud not found")

    configuration = api.api_client.configuration
    configuration.api_key = {"authorization": "Bearer first"}
    configuration.refresh_api_key_hook = refresh
    with pytest.raises(KubeError) as err:
        api.bind(NS, "p", "", "n1")
    assert err.value.message == "bind default/p to n1: RuntimeError: exec plugin gcloud not found"
    assert _node_of(server, "p") is None


def test_a_configuration_pointed_elsewhere_is_followed(server: FakeApiServer, api: KubeApi) -> None:
    other = FakeApiServer([node("n1"), pod("p")], kubelet_start_seconds=0).start()
    try:
        api.api_client.configuration.host = other.url  # the direct path's pool is for the first server
        api.bind(NS, "p", "", "n1")
        assert (other.store.get("pods", NS, "p").get("spec") or {}).get("nodeName") == "n1"
        assert _node_of(server, "p") is None
    finally:
        other.stop()

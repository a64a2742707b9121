"""The adapter's error classes and its bounded retries.

Errors come from the real client talking to the in-memory API server (no patched client
method): each HTTP failure becomes our own class, chained to the client's exception, with the
Status message and nothing of the response headers. Retries are checked with the sleep
injected, and their log lines asserted (kopf's `test_error_retries.py` habit).
"""

from __future__ import annotations

import logging
from typing import Any, Iterator

import pytest
from kubernetes.client.rest import ApiException

from adapters.apiserver import FakeApiServer
from adapters.live.errors import (
    ClientError,
    Conflict,
    ConnectionFailure,
    Gone,
    KubeError,
    NotFound,
    ServerError,
    TooManyRequests,
)
from adapters.live.api_client import PODS, KubeApi, configured_client
from adapters.live.retry import call_with_retries
from tests.adapters.live_harness import NS, node, pod


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    s = FakeApiServer([node("n1"), pod("p")], kubelet_start_seconds=0).start()
    yield s
    s.stop()


@pytest.fixture
def api(server: FakeApiServer) -> Iterator[KubeApi]:
    a = KubeApi(configured_client(server.client_configuration()))
    yield a
    a.close()


def test_http_errors_become_our_classes_chained_to_the_clients(server: FakeApiServer, api: KubeApi) -> None:
    with pytest.raises(NotFound) as err:
        api.bind(NS, "ghost", "", "n1")
    assert err.value.status == 404 and err.value.message == 'bind default/ghost to n1: pods "ghost" not found'
    assert isinstance(err.value.__cause__, ApiException)
    api.bind(NS, "p", "", "n1")
    with pytest.raises(Conflict) as conflict:
        api.bind(NS, "p", "", "n1")
    assert 'pod p is already assigned to node "n1"' in conflict.value.message
    server.faults.fail("POST", r"/eviction$", status=429, retry_after=3)
    with pytest.raises(TooManyRequests) as throttled:
        api.evict(NS, "p", "")
    assert throttled.value.retry_after == 3.0 and throttled.value.retriable
    server.faults.fail("PATCH", r"/status$", status=503)
    with pytest.raises(ServerError) as failed:
        api.patch_pod_status(NS, "p", {"nominatedNodeName": "n1"})
    assert failed.value.status == 503 and failed.value.retriable
    server.faults.fail("POST", r"/events$", status=403, message="forbidden by policy")
    with pytest.raises(ClientError) as forbidden:
        api.create_event(NS, {"metadata": {"name": "e"}, "involvedObject": {"name": "p"}})
    assert forbidden.value.status == 403 and not forbidden.value.retriable
    assert "HTTP response headers" not in str(forbidden.value)  # the client's own str() prints them


def test_no_server_is_a_connection_failure(server: FakeApiServer, api: KubeApi) -> None:
    server.stop()
    with pytest.raises(ConnectionFailure) as err:
        api.read_pod(NS, "p")
    assert err.value.retriable and err.value.status is None
    assert not err.value.maybe_delivered  # refused before a byte was sent: it cannot take effect


@pytest.mark.parametrize("cut", ["disconnect", "timeout"])
def test_a_request_cut_after_it_was_sent_may_have_been_delivered(server: FakeApiServer, api: KubeApi,
                                                                  monkeypatch: Any, cut: str) -> None:
    # The server may have committed a write whose answer never came: the caller must not take
    # a later refusal, or an unbound read-back, as the whole truth.
    import adapters.live.api_client as api_client

    if cut == "disconnect":
        server.faults.disconnect("POST", r"/binding$")
    else:
        monkeypatch.setattr(api_client, "REQUEST_TIMEOUT", (2.0, 0.1))
        server.faults.delay("POST", r"/binding$", seconds=0.5)
    with pytest.raises(ConnectionFailure) as err:
        api.bind(NS, "p", "", "n1")
    assert err.value.retriable and err.value.maybe_delivered


def test_watch_from_a_compacted_version_raises_gone(server: FakeApiServer, api: KubeApi) -> None:
    _, version = api.list(PODS)
    server.store.create("pods", pod("q"))
    server.faults.compact()
    with pytest.raises(Gone):
        for _ in api.watch(PODS, version, timeout_seconds=1):
            pass


def test_list_pages_through_large_results(server: FakeApiServer, api: KubeApi, monkeypatch: Any) -> None:
    import adapters.live.api_client as api_client

    for i in range(7):
        server.store.create("pods", pod(f"extra-{i}"))
    monkeypatch.setattr(api_client, "LIST_PAGE_SIZE", 3)
    items, version = api.list(PODS)
    assert len(items) == 8 and int(version) == server.store.resource_version
    assert all(item["kind"] == "Pod" and item["apiVersion"] == "v1" for item in items)


class Flaky:
    """Fails with the given errors in turn, then returns "done"."""

    def __init__(self, *errors: KubeError) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "done"


def test_retries_what_can_heal_and_logs_each_attempt(caplog: pytest.LogCaptureFixture) -> None:
    sleeps: list[float] = []
    fn = Flaky(ConnectionFailure("bind default/p to n1: connection refused"),
               ServerError("bind default/p to n1: etcd timeout", status=500),
               TooManyRequests("bind default/p to n1: slow down", retry_after=2.0))
    with caplog.at_level(logging.INFO, logger="adapters.live.retry"):
        assert call_with_retries(fn, what="bind default/p to n1", backoffs=(0.1, 0.3, 0.6), sleep=sleeps.append) == "done"
    assert sleeps == [0.1, 0.3, 2.0]  # the Retry-After wins over a shorter backoff
    assert caplog.messages == [
        "bind default/p to n1 failed (bind default/p to n1: connection refused); retrying in 0.1s (attempt 2 of 4)",
        "bind default/p to n1 failed (bind default/p to n1: etcd timeout); retrying in 0.3s (attempt 3 of 4)",
        "bind default/p to n1 failed (bind default/p to n1: slow down); retrying in 2.0s (attempt 4 of 4)",
    ]


def test_gives_up_after_the_last_delay(caplog: pytest.LogCaptureFixture) -> None:
    sleeps: list[float] = []
    fn = Flaky(*[ServerError("evict default/v: boom", status=500)] * 3)
    with caplog.at_level(logging.INFO, logger="adapters.live.retry"), pytest.raises(ServerError):
        call_with_retries(fn, what="evict default/v", backoffs=(0.1, 0.2), sleep=sleeps.append)
    assert fn.calls == 3 and sleeps == [0.1, 0.2]
    assert caplog.messages[-1] == "evict default/v failed after 3 attempts, giving up: evict default/v: boom"


@pytest.mark.parametrize("error", [
    Conflict("409"), NotFound("404"), ClientError("403", status=403),
    TooManyRequests("429 from a disruption budget"),  # no Retry-After: it will not heal by waiting
], ids=["409", "404", "403", "429-without-retry-after"])
def test_does_not_retry_what_cannot_heal(error: KubeError, caplog: pytest.LogCaptureFixture) -> None:
    sleeps: list[float] = []
    fn = Flaky(error)
    with caplog.at_level(logging.INFO, logger="adapters.live.retry"), pytest.raises(type(error)):
        call_with_retries(fn, what="x", backoffs=(0.1,), sleep=sleeps.append)
    assert fn.calls == 1 and sleeps == [] and caplog.messages == []


def test_a_long_retry_after_is_not_waited_for(caplog: pytest.LogCaptureFixture) -> None:
    sleeps: list[float] = []
    with caplog.at_level(logging.INFO, logger="adapters.live.retry"), pytest.raises(TooManyRequests):
        call_with_retries(Flaky(TooManyRequests("busy", retry_after=60)), what="evict default/v", backoffs=(0.1,),
                          sleep=sleeps.append)
    assert sleeps == []
    assert caplog.messages == ["evict default/v: server asks to retry after 60s, too long to wait: busy"]


def test_stops_retrying_when_told(caplog: pytest.LogCaptureFixture) -> None:
    sleeps: list[float] = []
    with pytest.raises(ConnectionFailure):
        call_with_retries(Flaky(ConnectionFailure("down")), what="bind", backoffs=(0.1,), sleep=sleeps.append,
                          should_continue=lambda: False)  # e.g. the lease was lost
    assert sleeps == []

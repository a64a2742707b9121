"""The direct bind and event writes (`api_client._DirectWrites`) against the wire conditions a
user meets — a server that never answers, one that resets after reading the request, an idle
keep-alive connection the server closed, TLS (no verification, a CA, a client certificate),
an in-cluster token file that rotates, 16 concurrent writers, a host URL behind a path prefix
and an IPv6 host — each run through the direct path and then through the generated client's,
on the same server: the same requests reach it, and the same error (class, message,
maybe-delivered) comes back."""

from __future__ import annotations

import http.server
import os
import re
import socket
import ssl
import struct
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import pytest
from kubernetes import client
from kubernetes.config.incluster_config import InClusterConfigLoader

import adapters.live.api_client as api_client
from adapters.live.api_client import KubeApi, configured_client
from adapters.live.errors import ConnectionFailure, KubeError
from tests.e2e.controlplane.certs import Authority

EVENT = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "p.1", "namespace": "default"},
         "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": "default", "name": "p"},
         "reason": "Scheduled", "message": "Successfully assigned default/p to n1", "type": "Normal"}
OK_BODY = b'{"kind":"Status","apiVersion":"v1","status":"Success","code":201}'


class _Handler(http.server.BaseHTTPRequestHandler):
    """HTTP/1.1 with keep-alive; each request takes the next behaviour of its server's script
    ("answer" once the script is used up)."""

    protocol_version = "HTTP/1.1"
    server: "_Server"

    def setup(self) -> None:
        super().setup()
        with self.server.lock:
            self.server.connections += 1

    def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        srv = self.server
        with srv.lock:
            srv.seen.append((self.path, self.headers.get("Authorization"), body))
            srv.headers.append(sorted((k.lower(), v) for k, v in self.headers.items()))
            mode = srv.script.pop(0) if srv.script else "answer"
        if mode == "hang":
            srv.release.wait(10)
            self.close_connection = True
            return
        if mode == "reset":  # the request was read: the connection dies with a RST, no answer
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            self.close_connection = True
            return
        if mode == "corrupt-tls":  # the answer's head goes out, then bytes that are no TLS record
            self.send_response(201)
            self.send_header("Content-Length", str(len(OK_BODY)))
            self.end_headers()
            self.wfile.flush()
            raw = socket.socket(fileno=os.dup(self.connection.fileno()))
            raw.sendall(b"\x17\x03\x03\x00\x40" + b"\x00" * 64)
            raw.close()
            self.close_connection = True
            return
        if mode == "conflict-not-utf8":  # a Status whose message is not UTF-8 (a proxy re-encoding it)
            body = b'{"kind":"Status","apiVersion":"v1","status":"Failure","message":"d\xe9j\xe0 li\xe9",' \
                   b'"reason":"AlreadyExists","code":409}'
            self.send_response(409)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if mode == "redirect":
            self.send_response(307)
            self.send_header("Location", "/moved" + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(OK_BODY)))
        self.end_headers()
        self.wfile.write(OK_BODY)
        self.wfile.flush()
        if mode == "answer-then-idle-close":  # the server's idle timeout, after the answer went out
            time.sleep(0.05)
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True

    def log_message(self, *args: Any) -> None:
        pass


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64  # 16 writers connect at once

    def __init__(self, host: str = "127.0.0.1", tls: Optional[ssl.SSLContext] = None) -> None:
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        super().__init__((host, 0), _Handler)
        if tls is not None:
            self.socket = tls.wrap_socket(self.socket, server_side=True)
        self.lock = threading.Lock()
        self.seen: list[tuple[str, Optional[str], bytes]] = []
        self.headers: list[list[tuple[str, str]]] = []  # every header of each request, sorted
        self.script: list[str] = []
        self.connections = 0  # accepted so far
        self.release = threading.Event()
        self.tls = tls is not None
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def url(self, prefix: str = "") -> str:
        host, port = self.server_address[:2]
        host = f"[{host}]" if ":" in host else host
        return f"{'https' if self.tls else 'http'}://{host}:{port}{prefix}"

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a reset or a failed handshake is the test's doing

    def stop(self) -> None:
        self.release.set()
        self.shutdown()
        self.server_close()


@pytest.fixture
def server() -> Iterator[_Server]:
    s = _Server()
    yield s
    s.stop()


def _api(configuration: client.Configuration) -> KubeApi:
    configuration.proxy = None
    api = KubeApi(configured_client(configuration))
    assert api._direct is not None  # the path under test is taken
    return api


def _plain(host: str) -> client.Configuration:
    configuration = client.Configuration()
    configuration.host = host
    configuration.api_key = {"authorization": "Bearer t0"}
    return configuration


def _outcome(write: Callable[[], None]) -> tuple[Any, ...]:
    try:
        write()
    except ConnectionFailure as exc:
        return (type(exc).__name__, exc.message, exc.maybe_delivered)
    except KubeError as exc:
        return (type(exc).__name__, exc.message, exc.status, exc.reason, exc.retry_after)
    return ("ok",)


def _both(api: KubeApi, server: _Server, write: Callable[[KubeApi], None],
          script: tuple[str, ...] = ()) -> list[tuple[tuple[Any, ...], list[tuple[str, Optional[str], bytes]]]]:
    """(outcome, requests the server saw) through the direct path, then the generated client's."""
    results = []
    direct = api._direct
    for path in (direct, None):
        api._direct = path
        with server.lock:
            server.seen.clear()
            server.script[:] = list(script)
        outcome = _outcome(lambda: write(api))
        results.append((outcome, list(server.seen)))
    api._direct = direct
    return results


def _bind(api: KubeApi) -> None:
    api.bind("default", "p", "u-1", "n1")


def _event(api: KubeApi) -> None:
    api.create_event("default", EVENT)


def test_both_paths_send_the_same_requests(server: _Server) -> None:
    api = _api(_plain(server.url()))
    for write in (_bind, _event):
        server.headers.clear()
        ours, theirs = _both(api, server, write)
        assert ours == theirs and ours[0] == ("ok",) and len(ours[1]) == 1
        direct_headers, client_headers = server.headers  # every header, Host to User-Agent
        # The one difference: the direct path names its JSON body's type, which the generated
        # client leaves out (the API server takes a body without one as JSON).
        assert ("content-type", "application/json") in direct_headers
        assert [h for h in direct_headers if h[0] != "content-type"] == client_headers
        assert ("authorization", "Bearer t0") in direct_headers
    api.close()


def test_a_server_that_never_answers_times_out_alike(server: _Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(api_client, "REQUEST_TIMEOUT", (2.0, 0.4))
    api = _api(_plain(server.url()))
    started = time.monotonic()
    ours, theirs = _both(api, server, _bind, script=("hang",))
    assert time.monotonic() - started < 3.0  # the read timeout, not the 30 s default
    assert ours == theirs
    assert ours[0][0] == "ConnectionFailure" and ours[0][2] is True  # it was sent: it may have landed
    assert "timed out" in ours[0][1]
    api.close()


def test_a_reset_after_the_request_was_read_may_have_been_delivered(server: _Server) -> None:
    api = _api(_plain(server.url()))
    ours, theirs = _both(api, server, _bind, script=("reset",))
    assert ours == theirs
    assert ours[0][0] == "ConnectionFailure" and ours[0][2] is True and len(ours[1]) == 1
    api.close()


@pytest.mark.parametrize("tls", [False, True], ids=["http", "https"])
def test_an_idle_connection_the_server_closed_is_not_a_failure(server: _Server, pki: dict[str, Path],
                                                               tls: bool) -> None:
    if tls:
        server = _tls_server(pki, client_certs=False)
    configuration = _plain(server.url())
    configuration.ssl_ca_cert = str(pki["ca"])
    api = _api(configuration)
    for path in (api._direct, None):
        api._direct = path
        with server.lock:
            server.seen.clear()
            server.script[:] = ["answer-then-idle-close"] * 2
            server.connections = 0
        assert _outcome(lambda: _bind(api)) == ("ok",)
        time.sleep(0.3)  # the server has closed the kept connection by now
        assert _outcome(lambda: _event(api)) == ("ok",)
        time.sleep(0.3)
        assert len(server.seen) == 2 and server.connections == 2  # each write found the last one's closed
    api.close()
    if tls:
        server.stop()


def test_a_redirect_is_followed_by_neither_path(server: _Server) -> None:
    # A proxy in front of the API server answering 307. With urllib3's retries off (configured_client)
    # the client's pool manager does not follow it either ("too many redirects", reported as a
    # transport failure); the direct path reports the answer itself, a refusal naming the status.
    # Neither sends the write a second time.
    api = _api(_plain(server.url()))
    ours, theirs = _both(api, server, _bind, script=("redirect", "redirect"))
    assert ours[0][:3] == ("ClientError", "bind default/p to n1: Temporary Redirect", 307)
    assert theirs[0][0] == "ConnectionFailure" and "too many redirects" in theirs[0][1]
    assert [p for p, _, _ in ours[1]] == [p for p, _, _ in theirs[1]] == ["/api/v1/namespaces/default/pods/p/binding"]
    api.close()


@pytest.mark.parametrize("prefix", ["/k8s/clusters/c-1", "/k8s/clusters/c-1/", "/"])
def test_a_host_behind_a_path_prefix(server: _Server, prefix: str) -> None:
    api = _api(_plain(server.url(prefix)))
    for write in (_bind, _event):
        ours, theirs = _both(api, server, write)
        assert ours == theirs and ours[0] == ("ok",)
        assert ours[1][0][0].startswith(prefix) and "/api/v1/namespaces/default/" in ours[1][0][0]
    api.close()


def test_unusual_names_are_quoted_as_the_client_quotes_them(server: _Server) -> None:
    api = _api(_plain(server.url()))
    for name in ["p-1.a", "a b", "x:y@z", "ü", "q%2F", "a/b?c#d"]:
        ours, theirs = _both(api, server, lambda a: a.bind("ns-1", name, "", "n1"))
        assert ours == theirs and ours[0] == ("ok",)
    api.close()


def test_an_ipv6_host() -> None:
    try:
        s = _Server("::1")
    except OSError:
        pytest.skip("no IPv6 loopback here")
    try:
        api = _api(_plain(s.url()))
        ours, theirs = _both(api, s, _bind)
        assert ours == theirs and ours[0] == ("ok",)
        api.close()
    finally:
        s.stop()


# --- TLS -----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("pki")
    ca = Authority(directory)
    other = Authority(directory / "other")
    serving_cert, serving_key = ca.issue("serving", "127.0.0.1", server=True)
    client_cert, client_key = ca.issue("scheduler", "system:kube-scheduler")
    return {"ca": ca.cert_path, "other-ca": other.cert_path, "serving.crt": serving_cert,
            "serving.key": serving_key, "client.crt": client_cert, "client.key": client_key}


def _tls_server(pki: dict[str, Path], *, client_certs: bool) -> _Server:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(pki["serving.crt"], pki["serving.key"])
    if client_certs:
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(pki["ca"])
    return _Server(tls=ctx)


@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")  # verify_ssl false is a case
@pytest.mark.parametrize("case", ["ca", "no-verify", "wrong-ca", "client-cert", "no-client-cert"])
def test_tls_settings(pki: dict[str, Path], case: str) -> None:
    s = _tls_server(pki, client_certs=case in ("client-cert", "no-client-cert"))
    try:
        configuration = _plain(s.url())
        configuration.ssl_ca_cert = str(pki["other-ca" if case == "wrong-ca" else "ca"])
        configuration.verify_ssl = case != "no-verify"
        if case == "client-cert":
            configuration.cert_file, configuration.key_file = str(pki["client.crt"]), str(pki["client.key"])
        api = _api(configuration)
        ours, theirs = _both(api, s, _bind)
        api.close()
    finally:
        s.stop()
    if case in ("wrong-ca", "no-client-cert"):
        assert ours[0][0] == theirs[0][0] == "ConnectionFailure" and ours[1] == theirs[1] == []
        # the same cause named; the handshake's own text may differ between two attempts
        assert ours[0][1].split(":")[0:2] == theirs[0][1].split(":")[0:2]
    else:
        assert ours == theirs and ours[0] == ("ok",) and len(ours[1]) == 1


# --- credentials ---------------------------------------------------------------------------------

def test_an_in_cluster_token_file_that_rotates(server: _Server, tmp_path: Path, pki: dict[str, Path],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    token = tmp_path / "token"
    token.write_text("first")
    loader = InClusterConfigLoader(str(token), str(pki["ca"]), environ={
        "KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(server.server_address[1])})
    configuration = client.Configuration()
    loader.load_and_set(configuration)
    configuration.host = server.url()  # the test server speaks plain HTTP
    loader.host = configuration.host  # (the loader sets the host again on each refresh)
    api = _api(configuration)
    _bind(api)
    token.write_text("second")  # the kubelet rotates the file; the loader reads it within a minute
    loader.token_expires_at = loader.token_expires_at.min
    _event(api)  # within AUTH_REUSE_SECONDS of the bind: the header it had
    time.sleep(api_client.AUTH_REUSE_SECONDS + 0.05)
    _event(api)
    api._direct = None
    _bind(api)
    assert [a for _, a, _ in server.seen] == ["bearer first", "bearer first", "bearer second", "bearer second"]
    api.close()


def test_sixteen_concurrent_writers_always_send_a_current_token(server: _Server,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(api_client, "AUTH_REUSE_SECONDS", 0.001)
    configuration = _plain(server.url())
    issued = ["Bearer t0"]
    lock = threading.Lock()

    def refresh(conf: client.Configuration) -> None:  # a new token every few asks, as a fast rotation
        with lock:
            if len(issued) < 200:
                issued.append(f"Bearer t{len(issued)}")
            conf.api_key = {"authorization": issued[-1]}

    configuration.refresh_api_key_hook = refresh
    api = _api(configuration)
    failures: list[BaseException] = []

    def writer(i: int) -> None:
        try:
            for j in range(25):
                (_bind if j % 2 else _event)(api)
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            failures.append(exc)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert len(server.seen) == 16 * 25
    sent = [a for _, a, _ in server.seen]
    assert all(a in issued for a in sent)
    assert len(set(sent)) > 1  # the token did change under the writers
    assert api._direct is not None and api._direct._pool.num_connections <= 16
    api.close()


def test_a_tls_record_broken_inside_the_answer(pki: dict[str, Path]) -> None:
    # The server took the write and its answer's head arrived: the body then fails TLS. Both
    # paths report the same transport failure (maybe delivered) in the same words.
    s = _tls_server(pki, client_certs=False)
    try:
        configuration = _plain(s.url())
        configuration.ssl_ca_cert = str(pki["ca"])
        api = _api(configuration)
        ours, theirs = _both(api, s, _bind, script=("corrupt-tls",))
        api.close()
    finally:
        s.stop()
    assert ours[0][0] == "ConnectionFailure" and ours[0][2] is True and len(ours[1]) == 1
    assert ours == theirs


def test_a_connect_that_times_out_was_never_delivered(monkeypatch: pytest.MonkeyPatch) -> None:
    # A listener whose accept queue is full: the connection is never made, so the binder may
    # take a later refusal or an unbound read-back as the whole truth.
    monkeypatch.setattr(api_client, "REQUEST_TIMEOUT", (0.3, 1.0))
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(4):
        filler = socket.socket()
        filler.setblocking(False)
        try:
            filler.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        fillers.append(filler)
    time.sleep(0.2)
    try:
        api = _api(_plain(f"http://127.0.0.1:{port}"))
        seen = []
        for path in (api._direct, None):
            api._direct = path
            outcome = _outcome(lambda: _bind(api))
            seen.append((outcome[0], re.sub(r" at 0x[0-9a-f]+", "", outcome[1]), outcome[2]))
        api.close()
    finally:
        for s in fillers + [listener]:
            s.close()
    ours, theirs = seen
    if "ConnectTimeoutError" not in ours[1]:
        pytest.skip(f"this kernel did not hold the connect back: {ours[1]}")
    assert ours == theirs and ours[0] == "ConnectionFailure" and ours[2] is False


def test_an_error_answer_that_is_not_utf8(server: _Server) -> None:
    api = _api(_plain(server.url()))
    ours, theirs = _both(api, server, _bind, script=("conflict-not-utf8", "conflict-not-utf8"))
    assert ours == theirs and ours[0][:3] == ("Conflict", "bind default/p to n1: Conflict", 409)
    api.close()

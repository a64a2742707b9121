"""HTTP for the fake API server: one thread per connection, JSON in and out, chunked watches.

Keep-alive HTTP/1.1 as the official client's urllib3 pool expects. The server keeps
track of its connections and their threads so it can cut them all (a restart, a
dropped watch) and so `stop()` returns with no thread left behind. Faults are applied
here, before a request reaches the API, because they are about the transport.
"""

from __future__ import annotations

import json
import logging
import select
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

from .api import Request, Response, WatchSpec
from .errors import ApiError, status_object
from .faults import FAULTS_PATH
from .request_log import RequestRecord
from .store import Watcher

if TYPE_CHECKING:
    from .server import FakeApiServer

log = logging.getLogger(__name__)

# how often a quiet watch checks whether its client went away
WATCH_POLL_SECONDS = 0.2
# annotation on the bookmark that closes the initial events of a streaming list
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


class HttpServer(ThreadingHTTPServer):
    """A threading HTTP server that can close every open connection on demand."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], app: "FakeApiServer") -> None:
        self.app = app
        self._conn_lock = threading.Lock()
        self._connections: dict[socket.socket, threading.Thread] = {}
        super().__init__(address, Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(target=self._serve_connection, args=(request, client_address),
                                  name="fake-apiserver-conn", daemon=True)
        with self._conn_lock:
            self._connections[request] = thread
        thread.start()

    def _serve_connection(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:
            log.debug("fake apiserver: connection error", exc_info=True)
        finally:
            self.shutdown_request(request)
            with self._conn_lock:
                self._connections.pop(request, None)

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("fake apiserver: error serving %s", client_address, exc_info=True)

    def close_connections(self, timeout: float = 2.0) -> None:
        """Shut every open connection down and wait (bounded) for their threads."""
        with self._conn_lock:
            connections = list(self._connections.items())
        for sock, _ in connections:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        deadline = time.monotonic() + timeout
        for _, thread in connections:
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "cpsat-fake-apiserver"
    server: HttpServer

    def setup(self) -> None:
        super().setup()
        # headers and body leave in separate writes; without this, Nagle's algorithm and the
        # client's delayed ACK add ~40 ms to every keep-alive request
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        log.debug("fake apiserver: " + format, *args)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    # --- one request ------------------------------------------------------------------------

    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _serve(self, method: str) -> None:
        app = self.server.app
        url = urlsplit(self.path)
        query = dict(parse_qsl(url.query, keep_blank_values=True))
        body = self._read_body()
        if url.path == FAULTS_PATH:
            self._admin(method, body)
            return
        is_watch = method == "GET" and query.get("watch", "").lower() in ("true", "1")
        started = time.monotonic()

        def served(status: int | None, fault: str | None = None) -> None:
            app.requests.record(RequestRecord(method, url.path, query, is_watch, body, status, fault, started))

        decision = app.faults.decide(method, url.path, is_watch)
        if decision.delay > 0 and app.wait_interrupted(decision.delay):
            served(None, "cut during delay")
            self._abort()
            return
        if decision.disconnect:
            served(None, "disconnect")
            self._abort()
            return
        if decision.status is not None:
            served(decision.status, "fail")
            self._send_json(decision.status, decision.body or {}, decision.headers)
            return
        request = Request(method, url.path, query, self.headers.get("Content-Type") or "", body)
        try:
            result = app.api.handle(request)
        except ApiError as exc:
            served(exc.code)
            self._send_json(exc.code, exc.status, exc.headers)
            return
        except Exception as exc:  # a bug here must still answer like a server, not hang the client
            log.exception("fake apiserver: %s %s failed", method, self.path)
            served(500)
            self._send_json(500, status_object(500, f"fake apiserver internal error: {exc}"))
            return
        if isinstance(result, WatchSpec):
            served(200)
            self._watch(result)
        else:
            served(result.code)
            self._send_response(result)

    def _admin(self, method: str, body: bytes) -> None:
        faults = self.server.app.faults
        if method == "GET":
            self._send_json(200, faults.describe())
            return
        try:
            spec = json.loads(body or b"{}")
            if not isinstance(spec, dict):
                raise ValueError("the body must be a JSON object")
            self._send_json(200, faults.apply(spec))
        except (ValueError, TypeError) as exc:
            self._send_json(400, status_object(400, str(exc)))

    def _send_response(self, response: Response) -> None:
        self._send_json(response.code, response.body, response.headers)

    def _send_json(self, code: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body, separators=(",", ":")).encode()
        try:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except OSError:
            self.close_connection = True

    def _abort(self) -> None:
        """Close the connection with no (further) response bytes."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # --- watch ------------------------------------------------------------------------------

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _write_event(self, type_: str, obj: dict[str, Any]) -> None:
        self._write_chunk(json.dumps({"type": type_, "object": obj}, separators=(",", ":")).encode() + b"\n")

    def _client_gone(self) -> bool:
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True

    def _watch(self, spec: WatchSpec) -> None:
        app = self.server.app
        try:
            watcher = app.store.watch(spec.resource.key, namespace=spec.namespace, predicate=spec.predicate,
                                      since=spec.since)
        except ApiError as exc:
            # as the watch cache answers a too-old resourceVersion: a 200 stream whose only event is the error
            self._start_stream()
            self._write_event("ERROR", exc.status)
            self._end_stream()
            return
        self._start_stream()
        try:
            if self._stream(watcher, spec):
                self._end_stream()
            else:
                self._abort()
        except OSError:
            self.close_connection = True
        finally:
            watcher.close()

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _end_stream(self) -> None:
        try:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            self.close_connection = True

    def _bookmark(self, spec: WatchSpec, rv: int, initial_end: bool = False) -> None:
        obj: dict[str, Any] = {"kind": spec.resource.kind, "apiVersion": spec.resource.api_version,
                               "metadata": {"resourceVersion": str(rv)}}
        if initial_end:
            obj["metadata"]["annotations"] = {INITIAL_EVENTS_END: "true"}
        self._write_event("BOOKMARK", obj)

    def _stream(self, watcher: Watcher, spec: WatchSpec) -> bool:
        """Send events until the watch times out or is closed; False when it must be cut."""
        app = self.server.app
        timeout = spec.timeout_seconds if spec.timeout_seconds is not None else app.watch_timeout_seconds
        now = time.monotonic()
        deadline = now + max(0.0, timeout)
        interval = max(0.01, app.bookmark_interval)
        next_bookmark = now + interval if spec.bookmarks else float("inf")
        initial_pending = spec.send_initial_events and spec.bookmarks
        while True:
            now = time.monotonic()
            wait = min(deadline, next_bookmark, now + WATCH_POLL_SECONDS) - now
            events, closed, rv = watcher.next(0.0 if initial_pending else wait)
            for type_, obj in events:
                self._write_event(type_, spec.resource.view(obj))
            if closed == "dropped":
                self.wfile.flush()
                return False
            if initial_pending:
                self._bookmark(spec, rv, initial_end=True)
                initial_pending = False
            if closed:
                return True
            now = time.monotonic()
            if now >= next_bookmark:
                self._bookmark(spec, rv)
                next_bookmark = now + interval
            self.wfile.flush()
            if now >= deadline:
                return True
            if not events and self._client_gone():
                self.close_connection = True
                return True

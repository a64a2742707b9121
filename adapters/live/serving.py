"""`/healthz`, `/readyz` and `/metrics` over plain HTTP, on the configured address only.

Kubernetes probes need two answers: *alive* (restart me if not) and *ready* (send me
traffic, or here: count me as a working replica). A standby replica is ready — its cache is
synced and it can take over at once — so readiness does not depend on leadership;
`/readyz` says which it is. Liveness fails when a thread that must run has died (scheduling
loop, housekeeping, leader election, a watch), or when the loop has been on one window past the
stall timeout (`Scheduler.health`). A leader that cannot renew its lease stops acting by itself
(`LeaderElector.is_leader`), so that alone is no reason to restart.
The server binds exactly `--metrics-addr` (host and port), never all interfaces by default.
"""

from __future__ import annotations

import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Optional

log = logging.getLogger(__name__)

CONTENT_TYPE_METRICS = "text/plain; version=0.0.4; charset=utf-8"


def parse_addr(text: str) -> tuple[str, int]:
    """HOST:PORT (IPv6 as [::1]:PORT); raises ValueError with the reason."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{text!r} is not HOST:PORT")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not host:
        raise ValueError(f"{text!r} names no host (use 0.0.0.0 to listen on every interface)")
    return host, int(port)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class StatusServer:
    def __init__(self, addr: tuple[str, int], *, health: Callable[[], Optional[str]],
                 ready: Callable[[], tuple[bool, str]], metrics: Callable[[], bytes]) -> None:
        self._health, self._ready, self._metrics = health, ready, metrics
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                outer._serve(self)

            def log_message(self, fmt: str, *args: Any) -> None:
                log.debug("status server: " + fmt, *args)

        if ":" in addr[0]:
            import socket

            class _Server6(_Server):
                address_family = socket.AF_INET6

            self._http: ThreadingHTTPServer = _Server6(addr, Handler)
        else:
            self._http = _Server(addr, Handler)
        self._thread: Optional[threading.Thread] = None

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._http.server_address[:2]
        return str(host), int(port)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._http.serve_forever, kwargs={"poll_interval": 0.1},
                                        name="cpsat-live-status", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()
        if self._thread is not None:
            self._thread.join(2.0)

    def _serve(self, req: BaseHTTPRequestHandler) -> None:
        path = req.path.split("?", 1)[0]
        if path == "/healthz":
            problem = self._health()
            self._send(req, 200 if problem is None else 500, (problem or "ok").encode())
        elif path == "/readyz":
            ok, text = self._ready()
            self._send(req, 200 if ok else 503, text.encode())
        elif path == "/metrics":
            self._send(req, 200, self._metrics(), CONTENT_TYPE_METRICS)
        else:
            self._send(req, 404, b"not found")

    @staticmethod
    def _send(req: BaseHTTPRequestHandler, code: int, body: bytes, ctype: str = "text/plain; charset=utf-8") -> None:
        req.send_response(code)
        req.send_header("Content-Type", ctype)
        req.send_header("Content-Length", str(len(body)))
        req.end_headers()
        req.wfile.write(body)

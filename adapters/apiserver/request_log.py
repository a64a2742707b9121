"""What the fake API server was asked, and what it answered: a request log for tests.

Some properties are only visible at the server: how many binding POSTs for one pod *succeeded*
(never more than one, or the scheduler double-bound it), which verbs on which resources a
client used (what its RBAC role must grant), what was sent while a client should have been
silent. Every request that reaches the HTTP layer (the fault admin path excepted) is recorded
once its answer is decided: the status code the client was sent — or, for a request cut by a
fault, None — and whether a fault answered it instead of the API. A watch is recorded when its
stream starts. Listeners are called on the serving thread, after the API committed the request.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Callable


@dataclass(frozen=True)
class RequestRecord:
    method: str
    path: str  # without the query string
    query: dict[str, str] = field(default_factory=dict)
    watch: bool = False
    body: bytes = b""
    status: int | None = None  # None: the connection was cut without an answer
    fault: str | None = None  # what fault injection did to it, if anything
    started: float = 0.0  # time.monotonic() when the request arrived


class RequestLog:
    """Listeners told about each request; `records` when the log is kept (`keep()`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: list[Callable[[RequestRecord], None]] = []
        self._kept: list[RequestRecord] | None = None

    def add_listener(self, listener: Callable[[RequestRecord], None]) -> None:
        with self._lock:
            self._listeners.append(listener)

    def keep(self) -> "RequestLog":
        """Keep every request from now on (off by default: a long simulation would pile them up)."""
        with self._lock:
            if self._kept is None:
                self._kept = []
        return self

    @property
    def records(self) -> list[RequestRecord]:
        with self._lock:
            return list(self._kept or ())

    def record(self, entry: RequestRecord) -> None:
        with self._lock:
            listeners = list(self._listeners)
            if self._kept is not None:
                self._kept.append(entry)
        for listener in listeners:
            listener(entry)

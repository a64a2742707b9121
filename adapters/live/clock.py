"""Time, injected: the queue's backoffs, the lease's expiry and the retries all ask a `Clock`.

A scheduler is full of waits (1 s doubling to 10 s of backoff, five minutes before an
unschedulable pod is retried, a 15 s lease). Tests must not sit through them, so every
component takes a clock: `SystemClock` in production, `ManualClock` in tests, whose time
moves only when the test says so and whose `sleep` returns at once (and is recorded).
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Monotonic seconds."""

    def sleep(self, seconds: float) -> None:
        """Pause the calling thread."""

    def wait(self, event: threading.Event, seconds: float) -> bool:
        """Wait up to `seconds` for `event`; True if it is set."""


class SystemClock:
    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    def wait(self, event: threading.Event, seconds: float) -> bool:
        return event.wait(max(0.0, seconds))


class ManualClock:
    """A clock for tests: `advance` moves it; `sleep` and `wait` advance it instead of blocking."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._lock = threading.Lock()
        self.sleeps: list[float] = []

    def now(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.advance(max(0.0, seconds))

    def wait(self, event: threading.Event, seconds: float) -> bool:
        if event.is_set():
            return True
        self.sleep(seconds)
        return event.is_set()

"""Where a long decision is: one short line per stage, for a person watching a terminal.

The solver does no I/O. A stage is announced with ``stage(...)``; nothing happens unless an
adapter is listening (``listening(callback)``), as the command line does when stderr is a
terminal or ``--progress`` is given. A listener is per thread: a live scheduler deciding in a
thread of its own never hears another thread's stages.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Listener = Callable[[str], None]

_local = threading.local()


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """While inside, this thread's stages go to ``listener``."""
    previous = getattr(_local, "listener", None)
    _local.listener = listener
    try:
        yield
    finally:
        _local.listener = previous


def stage(message: str) -> None:
    """Announce the stage a decision has reached (cheap when nobody listens)."""
    listener = getattr(_local, "listener", None)
    if listener is not None:
        listener(message)


class Every:
    """Whether a repeated stage is due: at most once per ``seconds``, and only while someone listens
    (cheap to ask for every item of a long loop)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.next = time.monotonic() + seconds

    def due(self) -> bool:
        if getattr(_local, "listener", None) is None:
            return False
        now = time.monotonic()
        if now < self.next:
            return False
        self.next = now + self.seconds
        return True


def listener() -> Listener | None:
    """The current thread's listener, to hand to a helper thread (``listening`` there)."""
    return getattr(_local, "listener", None)

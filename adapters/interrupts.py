"""Ctrl-C during a decision: stop it at once and exit 130, never print what was cut short.

A Python signal handler runs only when the main thread is back in Python, and during a solve the
main thread sits in CP-SAT's C++ code. CP-SAT could catch SIGINT itself, but it then returns its
incumbent as an ordinary plan (and its handler is not safe across solves), so the solver asks it
not to (``catch_sigint_signal: false``). Instead, while a command decides, Python's own C-level
handler writes the signal to a wakeup socket from whichever thread the kernel picked, and a
watcher thread reading that socket calls ``solver.interrupt.request()``: the solve and greedy stop,
the decision raises ``Interrupted``, and the command line turns it into exit 130.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Optional, TypeVar

# How often the watcher looks up from its socket to see whether the decision is over.
POLL_SECONDS = 0.2

# While a decision runs under ``sigint_stops_decisions``: ``solver.interrupt.check``.
_check: Optional[Callable[[], None]] = None
# Whether the command under way has written its result whole (``write_result``): a Ctrl-C that
# comes after that finds nothing to stop, and the command ends as it would have.
_delivered = False


def checkpoint() -> None:
    """Raise ``Interrupted`` if Ctrl-C was pressed during the decision under way; nothing outside
    one. For long work in the adapters (reading a large snapshot), called between chunks of it:
    the signal handler only takes note, so work that never looks would run to its end first."""
    if _check is not None:
        _check()


_Item = TypeVar("_Item")


def checked(items: Iterable[_Item], every: int = 256) -> Iterator[_Item]:
    """``items``, with ``checkpoint()`` before the first and after every ``every`` of them: the
    adapters' long loops (generating a bench cluster, its bounds) stop on Ctrl-C within a
    fraction of a second, as the solver's do. (``solver.interrupt.checked`` is the same loop, but
    importing ``solver`` costs about a second, which the reader and the bench's maker do not pay.)"""
    for i, item in enumerate(items):
        if not i % every:
            checkpoint()
        yield item


def write_result(text: str) -> None:
    """Write a command's result (its plan, report or answer) to stdout, unless Ctrl-C came
    first: then ``Interrupted`` and nothing is written. Once it is written the result stands: a
    Ctrl-C after it no longer turns the exit into 130 ("no plan printed") with the plan out."""
    global _delivered
    checkpoint()
    _delivered = True
    _write_whole(text)


def _write_whole(text: str) -> None:
    """``text`` on stdout, every byte or ``BrokenPipeError``. A reader that goes away in the
    middle of a large write (``schedule -o json | head -c 10``) leaves the kernel's write short;
    written through ``sys.stdout``, that went unseen and the command ended 0 with its result cut
    short. Written to the descriptor in a loop, the next write after a short one finds the pipe
    closed, and the command line turns that into 141. Where stdout is no real file (a test's
    capture), it is written the ordinary way."""
    stream = sys.stdout
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        stream.write(text)
        return
    stream.flush()  # what was printed before goes first
    data = text.encode(stream.encoding or "utf-8", stream.errors or "strict")
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:  # a descriptor left non-blocking by whoever started us: wait
            select.select([], [fd], [])


@contextmanager
def sigint_stops_decisions() -> Iterator[None]:
    """While inside, Ctrl-C stops the decision (``solver.interrupt``) instead of ending it as a plan."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signals reach only the main thread's handlers; tests calling main() elsewhere
        return
    from solver import interrupt  # the solver loads only for commands that decide

    interrupt.reset()
    done = threading.Event()
    reader, writer = socket.socketpair()
    reader.setblocking(False)
    writer.setblocking(False)

    def watch() -> None:
        while not done.is_set():
            ready, _, _ = select.select([reader], [], [], POLL_SECONDS)
            if not ready:
                continue
            try:
                data = reader.recv(64)
            except BlockingIOError:
                continue
            if signal.SIGINT in data:
                interrupt.request()

    global _check, _delivered
    _check = interrupt.check
    _delivered = False
    previous_fd = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    # The Python-level handler only notes the signal: raising KeyboardInterrupt in the main thread
    # would cut the decision at an arbitrary point instead of stopping it in order.
    previous_handler = signal.signal(signal.SIGINT, lambda signum, frame: interrupt.request())
    watcher = threading.Thread(target=watch, name="sigint-watcher", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        _check = None
        done.set()
        watcher.join()
        signal.signal(signal.SIGINT, previous_handler)
        signal.set_wakeup_fd(previous_fd)
        reader.close()
        writer.close()
        delivered, _delivered = _delivered, False
        if interrupt.requested():
            interrupt.reset()
            if not delivered:
                raise KeyboardInterrupt

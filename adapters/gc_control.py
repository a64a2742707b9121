"""The cyclic garbage collector around large inputs.

Reading a dump of tens of thousands of pods makes millions of small objects, none of which can
form a cycle; each time enough of them are made, the collector walks every object made so far.
On a 50,000-pod dump that was half of the reading time, and later, while the model is built,
every collection still walks the whole snapshot. Reference counting frees everything as usual
either way; only the search for cycles is put off.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc() -> Iterator[None]:
    """No cyclic collection while inside (the previous setting is restored on the way out).

    In a command that keeps what it makes (``keep_for_good``), what was made inside is moved
    out of the collector's sight on the way out too: the first collection after the pause walked
    every object made during it (1.7 s after a 5,000-node decision, 1 s after reading its dump)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            if _frozen:
                gc.freeze()
            gc.enable()


_frozen = False


def keep_for_good() -> None:
    """Move every object alive now out of the collector's sight, for a command that holds its
    input until it is done: later collections walk only what is made after (``gc.freeze``).
    ``release()`` (the command line calls it when the command returns) puts them back."""
    global _frozen
    gc.freeze()
    _frozen = True


def kept() -> bool:
    """Whether a command moved its input out of the collector's sight (and it is still there)."""
    return _frozen


def release() -> None:
    global _frozen
    if _frozen:
        _frozen = False
        gc.unfreeze()

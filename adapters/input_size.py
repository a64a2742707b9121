"""Reading an input file with a bound on its size, checked before anything is parsed.

Parsing YAML or JSON into Python objects, and those into models, takes several times the text's
size in memory, so a multi-gigabyte dump would exhaust memory in the parser, before any limit on
nodes or pods could be looked at. A regular file is measured (``fstat``) and refused before a
byte of it is read; a pipe or stdin, whose size is unknown, is read in chunks and refused as
soon as it passes the bound, so no more than the bound is ever held. (An open text stream is
bounded in characters rather than bytes.)
"""

from __future__ import annotations

import io
import os
import select
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

from models import InputError
from models.config import DEFAULT_MAX_SNAPSHOT_BYTES, LIMITS_HINT

from .interrupts import checkpoint

# Read size for inputs of unknown length: large enough to be fast, small next to any bound.
CHUNK_BYTES = 1 << 24
# A scheduler config is a few kilobytes; it is read before the limits it sets are known.
MAX_CONFIG_BYTES = 1 << 24


@dataclass(frozen=True)
class SizeLimit:
    """At most ``max_bytes``; ``setting`` is the config key that raises it, else ``why`` says
    why the bound is fixed."""

    max_bytes: int
    setting: str = ""
    why: str = ""

    def refuse(self, label: str, size: Optional[int] = None) -> InputError:
        """The error for an input of ``size`` bytes, or of unknown size past the bound (None)."""
        amount = f"{size} bytes" if size is not None else f"more than {self.max_bytes} bytes"
        size_note = f"{_human(self.max_bytes)}; " if self.max_bytes >= 1024 else ""
        if self.setting:
            bound = f"{self.setting}={self.max_bytes} ({size_note}{LIMITS_HINT})"
        else:
            bound = f"{self.max_bytes} bytes ({size_note}{self.why})"
        return InputError(label, "", f"{amount} exceed {bound}")


SNAPSHOT_LIMIT = SizeLimit(DEFAULT_MAX_SNAPSHOT_BYTES, "limits.maxSnapshotBytes")
CONFIG_LIMIT = SizeLimit(MAX_CONFIG_BYTES, why="a scheduler config is a few kilobytes")


def snapshot_limit(max_bytes: int) -> SizeLimit:
    """The bound ``limits.maxSnapshotBytes`` sets on snapshots and plans."""
    return SizeLimit(max_bytes, SNAPSHOT_LIMIT.setting)


def read_bounded(source: Union[str, Path, Any], label: str, limit: SizeLimit) -> Union[bytearray, str]:
    """The whole content of a path (``-`` is stdin) or an open file, refused past ``limit``.

    ``OSError`` is left to the caller, which names the file.
    """
    if isinstance(source, (str, Path)):
        if str(source) == "-":
            stream = sys.stdin
            return _read_stream(_polled(stream) or getattr(stream, "buffer", stream), label, limit)
        with open(source, "rb") as f:
            info = os.fstat(f.fileno())
            # A regular file says its size: refused unread. A pipe, FIFO or device does not.
            if stat.S_ISREG(info.st_mode) and info.st_size > limit.max_bytes:
                raise limit.refuse(label, info.st_size)
            return _read_stream(f, label, limit)
    return _read_stream(source, label, limit)


# How long a read of a pipe or terminal waits for data before it looks for Ctrl-C again.
POLL_SECONDS = 0.2


class _Polled:
    """A pipe or terminal read through its descriptor, waiting for data in ``select`` and looking
    for Ctrl-C between waits. A plain read of a pipe whose writer is silent (``kubectl get`` still
    listing, a terminal nobody types in) waits in the kernel: Python restarts it after its signal
    handler has only taken note, so Ctrl-C went unheard until the writer wrote or closed."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def read(self, size: int) -> bytes:
        while True:
            checkpoint()
            ready, _, _ = select.select([self.fd], [], [], POLL_SECONDS)
            if ready:
                return os.read(self.fd, size)  # what is there, up to ``size``; b"" at the end


def _polled(stream: Any) -> Optional[_Polled]:
    """``stream`` (standard input) read by ``_Polled`` when it is a pipe, FIFO or terminal; None
    for a regular file (read as one) or a stream without a descriptor (a test's stand-in). Its
    descriptor is read directly: nothing reads standard input before the one input it holds
    (a command takes at most one input from ``-``), so its buffer holds nothing to skip."""
    try:
        fd = stream.fileno()
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return None
    return None if regular else _Polled(fd)


def _read_stream(stream: Any, label: str, limit: SizeLimit) -> Union[bytearray, str]:
    """Read ``stream`` to its end in chunks, stopping as soon as it passes ``limit``."""
    texts: list[str] = []
    data = bytearray()
    total = 0
    while True:
        checkpoint()  # Ctrl-C stops the read of a large dump between chunks, not at its end
        chunk = stream.read(min(CHUNK_BYTES, limit.max_bytes + 1 - total))
        if not chunk:
            break
        nul = chunk.find("\0" if isinstance(chunk, str) else b"\0")
        if nul >= 0:
            # YAML and JSON text never hold a NUL byte: this is binary data (or /dev/zero), and
            # reading on to the size bound would only cost time and memory.
            raise InputError(label, "", f"not a YAML or JSON text: a NUL byte at offset {total + nul}")
        total += len(chunk)
        if total > limit.max_bytes:
            raise limit.refuse(label)
        if isinstance(chunk, str):
            texts.append(chunk)
        else:
            data += chunk
    return "".join(texts) if texts else data


def _human(size: float) -> str:
    """``2 GiB``, ``16 MiB``, ``1.5 KiB``: a byte count as people read it (at least 1 KiB)."""
    unit = "KiB"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        size /= 1024
        if size < 1024:
            break
    return f"{size:.1f}".removesuffix(".0") + f" {unit}"

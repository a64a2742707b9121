"""Peak resident memory of the benchmark process, per workload.

Issue 8 asks for the solver's peak RSS on the large benchmark. ``getrusage`` only ever grows,
so on its own it would credit every workload with the largest one before it. Linux keeps the
same high-water mark as ``VmHWM`` in ``/proc/self/status`` and lets a process reset it (write
``5`` to ``/proc/self/clear_refs``, Linux 4.0+), which gives a figure per workload. Elsewhere
the figure is the process's peak so far, and says so.
"""

from __future__ import annotations

import resource
import sys
from pathlib import Path
from typing import Optional

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def reset_peak() -> bool:
    """Start a new high-water mark; False when this system cannot (the peak then spans the run)."""
    try:
        _CLEAR_REFS.write_text("5")
        return True
    except OSError:
        return False


def peak_rss_mib(beside: float = 0.0) -> Optional[float]:
    """The resident-set high-water mark in MiB: since the last ``reset_peak`` on Linux, since
    the process started elsewhere; None when neither source is readable. ``beside``: the private
    memory a decision's forked child held beside the process (``stats.lns_start_child_mib``,
    ``solver/cpsat/small_first.py``), added (the pages the two share count once, in the
    process's)."""
    own = _own_peak_mib()
    return None if own is None else round(own + beside, 1)


def _own_peak_mib() -> Optional[float]:
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    try:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    except (OSError, ValueError):
        return None
    return peak / (1024 * 1024 if sys.platform == "darwin" else 1024)  # bytes on macOS, kB elsewhere

"""The configured size limits (``limits`` in the config), checked before a context is built.

Building a context costs memory per node and per window pod (infos, the cluster state's
per-node rows, candidate masks), and the CP-SAT model grows with their product. A snapshot
past ``limits.maxNodes`` or a window past ``limits.maxWindowPods`` is therefore refused with
an ``InputError`` (exit 2 from the command line) while all that exists is the parsed snapshot,
never halfway through building structures that may not fit. The entry points check:
``schedule`` (and through it the live scheduler, per window), ``repack``, and the ``validate``
command. The file itself is bounded earlier, before it is parsed, by
``limits.maxSnapshotBytes`` (``adapters/input_size.py``).

The limit is on one decision, not on the backlog: with ``window_keys`` only the window counts.
"""

from __future__ import annotations

from typing import Optional

from models.config import LIMITS_HINT, LimitsConfig, SchedulerConfig
from models.errors import InputError
from models.snapshot import ClusterSnapshot

from .context import window_pods


def check_snapshot(
    snapshot: ClusterSnapshot,
    config: SchedulerConfig,
    *,
    all_pending: bool = False,
    window_keys: Optional[list[str]] = None,
) -> None:
    """Refuse a snapshot whose nodes, or whose window (as ``build_context`` would cut it), are
    past the limits."""
    check_nodes(snapshot, config.limits)
    window = window_pods(snapshot, config, all_pending=all_pending, window_keys=window_keys)
    check_window(len(window), config.limits, what="pending pods" if window_keys is None else "pods in the window")


def check_nodes(snapshot: ClusterSnapshot, limits: LimitsConfig) -> None:
    """Refuse a snapshot with more nodes than ``limits.maxNodes``."""
    count = len(snapshot.nodes)
    if count > limits.max_nodes:
        raise InputError("snapshot", "nodes", f"{count} nodes exceed limits.maxNodes={limits.max_nodes} ({LIMITS_HINT})")


def check_window(count: int, limits: LimitsConfig, *, what: str = "pending pods", why: str = "") -> None:
    """Refuse a window of ``count`` pods (described as ``what``) above ``limits.maxWindowPods``;
    ``why`` says, where it is not obvious, why these pods make one window."""
    if count > limits.max_window_pods:
        hint = f"{why}; {LIMITS_HINT}" if why else LIMITS_HINT
        raise InputError("snapshot", "pods", f"{count} {what} exceed limits.maxWindowPods={limits.max_window_pods} ({hint})")

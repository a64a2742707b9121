"""The static filters on a plan's final state: NodeUnschedulable, NodeName, TaintToleration and
NodeAffinity (with its PreFilter) read only the pod and the node, so the validator asks the same
cached verdicts the scheduler used (``filtering.StaticFilters``) for every placed pod's node."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..plugin_api import ReplayView as Replay


def check(replay: Replay) -> None:
    """Every placed pod passes the static filters on its node; the first failure is reported."""
    for pod, index in replay.placed():
        status = replay.static.statuses(pod)[index]
        if not status.ok:
            replay.report(f"{status.plugin}: {pod.key} on node {replay.node_name(index)}: {'; '.join(status.reasons)}")

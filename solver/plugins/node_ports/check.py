"""NodePorts on a plan's final state: no two pods of a node share a host port, one of them placed
by the plan (two running pods already sharing one are not the plan's business)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...info import PodInfo
from ..shared.host_ports import WILDCARD, conflicts

if TYPE_CHECKING:
    from ...plugin_api import ReplayView as Replay


def check(replay: Replay) -> None:
    """No two pods of a node share a host port in the final state, one of them placed now."""
    for index, placed in sorted(replay.placed_on.items()):
        if not any(p.host_ports for p in placed):
            continue
        placed_keys = {p.key for p in placed}
        holders = [p for p in replay.final.pods_on[index].values() if p.host_ports]
        for i, a in enumerate(holders):
            for b in holders[i + 1 :]:
                if a.key not in placed_keys and b.key not in placed_keys:
                    continue
                port = _shared_port(a, b)
                if port is not None:
                    first, second = sorted((a.key, b.key))
                    replay.report(
                        f"ports: node {replay.node_name(index)}: {first} and {second} both use host port {port}"
                    )


def _shared_port(a: PodInfo, b: PodInfo) -> str | None:
    """The first host port of ``a`` that collides with one of ``b``, as ``80/TCP`` (with its IP
    when it is not the wildcard)."""
    for ip, proto, port in a.host_ports:
        if conflicts((ip, proto, port), b.host_ports):
            return f"{port}/{proto}" + ("" if ip == WILDCARD else f" on {ip}")
    return None

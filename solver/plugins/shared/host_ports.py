"""When two host ports collide: NodePorts' rule, asked by its filter, encoding and check, by
preemption (nominated pods' ports, putting victims back) and by provisioning (``Plugin.apart``).

``(ip, protocol, port)`` conflicts with a used one of the same protocol and port when either
side binds the wildcard ``0.0.0.0`` or both bind the same IP.
"""

from __future__ import annotations

from collections.abc import Iterable

WILDCARD = "0.0.0.0"

Port = tuple[str, str, int]


def conflicts(wanted: Port, used: Iterable[Port]) -> bool:
    ip, proto, port = wanted
    for uip, uproto, uport in used:
        if uport == port and uproto == proto and (ip == WILDCARD or uip == WILDCARD or uip == ip):
            return True
    return False


def ports_conflict(a: Iterable[Port], b: Iterable[Port]) -> bool:
    """Whether two pods' host ports collide (symmetric)."""
    b = tuple(b)
    return any(conflicts(p, b) for p in a)

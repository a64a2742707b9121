"""What the filter tests share: status codes, the reason strings several plugins' tests assert,
and the small case/verdict helpers (SEMANTICS.md §3).

The reason strings are written out on purpose, not imported from the plugins: they are API.
"""

from __future__ import annotations

import pytest

from solver.framework import Code, Status

OK = Code.SUCCESS
U = Code.UNSCHEDULABLE
UU = Code.UNRESOLVABLE

UNSCHEDULABLE = "node(s) were unschedulable"
NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
PORTS = "node(s) didn't have free ports for the requested pod ports"


def untolerated(key: str, value: str) -> str:
    return f"node(s) had untolerated taint {{{key}: {value}}}"


def verdict(status: Status) -> tuple[Code, tuple[str, ...]]:
    return (status.code if not status.ok else OK), status.reasons


def case(id_: str, *values):
    return pytest.param(*values, id=id_)

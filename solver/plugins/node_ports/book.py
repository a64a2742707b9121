"""NodePorts' own bookkeeping on a state: the host ports held on each node (its Reserve and
Unreserve as pods come and go). Copies share the per-node counters until one side writes one."""

from __future__ import annotations

from collections import Counter
from typing import Optional

from ...info import PodInfo
from ...state import Book, ClusterState
from ..shared.host_ports import Port

NAME = "NodePorts"


class PortBook(Book):
    def __init__(self, nodes: int) -> None:
        self.on: list[Counter[Port]] = [Counter() for _ in range(nodes)]
        # Copy on write: the nodes whose counter is this book's own (None: every one is).
        self._owned: Optional[set[int]] = None

    @staticmethod
    def make(state: ClusterState) -> PortBook:
        return PortBook(len(state.nodes))

    def _own(self, node: int) -> Counter[Port]:
        owned = self._owned
        if owned is not None and node not in owned:
            self.on[node] = Counter(self.on[node])
            owned.add(node)
        return self.on[node]

    def reserve(self, pod: PodInfo, node: int) -> None:
        if pod.host_ports:
            self._own(node).update(pod.host_ports)

    def unreserve(self, pod: PodInfo, node: int) -> None:
        if pod.host_ports:
            held = self._own(node)
            held.subtract(pod.host_ports)
            self.on[node] = +held

    def copy(self) -> PortBook:
        other = PortBook.__new__(PortBook)
        other.on = list(self.on)
        self._owned, other._owned = set(), set()
        return other

    def merged(self, members: list[list[int]]) -> PortBook:
        out = PortBook(len(members))
        for k, group in enumerate(members):
            for n in group:
                if self.on[n]:
                    out.on[k].update(self.on[n])
        return out


def ports_on(state: ClusterState) -> list[Counter[Port]]:
    """The host ports held per node in ``state`` (its book is made here for a state made before
    the registry gave it one)."""
    book = state.books.get(NAME)
    if book is None:
        book = PortBook.make(state)
        book.reserve_many(list(state.pods()))
        state.attach(NAME, book)
    assert isinstance(book, PortBook)
    return book.on

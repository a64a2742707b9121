"""The volume rules' bookkeeping on a state: which pods use each claim (claim -> pod -> node), read
by VolumeRestrictions (ReadWriteOncePod) and VolumeBinding, and the volumes the window's delayed
claims took so far (volume -> claim), which VolumeBinding's Reserve writes through the
``VolumeReserve`` its ``prepare`` gives the book when the snapshot has volumes."""

from __future__ import annotations

from typing import Optional, Protocol

from ....info import PodInfo
from ....state import Book, ClusterState

NAME = "VolumeRestrictions"  # the plugin owning the book: its key in ``ClusterState.books``


class VolumeReserve(Protocol):
    """VolumeBinding's Reserve: the volumes ``pod``'s delayed claims take on ``node``, written into
    ``taken`` (volume -> claim)."""

    def reserve(self, pod: PodInfo, node: int, taken: dict[str, str]) -> None: ...


class VolumeBook(Book):
    def __init__(self) -> None:
        self.claim_users: dict[str, dict[str, int]] = {}  # each value is replaced, never changed
        self.pv_taken: dict[str, str] = {}
        self.binder: Optional[VolumeReserve] = None

    @staticmethod
    def make(state: ClusterState) -> VolumeBook:
        return VolumeBook()

    def reserve(self, pod: PodInfo, node: int) -> None:
        for claim in pod.claims:
            self.claim_users[claim] = {**self.claim_users.get(claim, {}), pod.key: node}
        if pod.claims and self.binder is not None:
            self.binder.reserve(pod, node, self.pv_taken)

    def unreserve(self, pod: PodInfo, node: int) -> None:
        for claim in pod.claims:
            users = {k: v for k, v in self.claim_users.get(claim, {}).items() if k != pod.key}
            if users:
                self.claim_users[claim] = users
            else:
                self.claim_users.pop(claim, None)
        if pod.claims and self.pv_taken and self.binder is not None:
            # Unreserve: the volumes of claims no pod in the state uses any more are free again.
            gone = {c for c in pod.claims if c not in self.claim_users}
            if gone:
                self.pv_taken = {v: c for v, c in self.pv_taken.items() if c not in gone}

    def copy(self) -> VolumeBook:
        other = VolumeBook()
        other.claim_users = self.claim_users.copy()
        other.pv_taken = self.pv_taken.copy()
        other.binder = self.binder
        return other

    def merged(self, members: list[list[int]]) -> VolumeBook:
        """The claims' users on the merged nodes (no volume reserved: node classes leave windows
        with claims alone)."""
        to = {n: k for k, group in enumerate(members) for n in group}
        out = VolumeBook()
        out.claim_users = {claim: {key: to[n] for key, n in users.items()} for claim, users in self.claim_users.items()}
        return out


def volume_book(state: ClusterState) -> VolumeBook:
    """The state's volume book (made here for a state made before the registry gave it one)."""
    book = state.books.get(NAME)
    if book is None:
        book = VolumeBook()
        book.reserve_many(list(state.pods()))
        state.attach(NAME, book)
    assert isinstance(book, VolumeBook)
    return book

"""The rules' PreBind in the live scheduler: one writer per kind of record a rule declares.

A rule's ``Plugin.prebind`` says WHAT it writes before a pod is bound (a ``BindWrite`` record:
annotations and labels on the pod, the volumes a pod's claims take, the pod's ResourceClaims);
how that is written to the API server is this module's, since the solver's plugins never talk
to a cluster. The binder runs a placement's records in the rules' order, each through the
writer of its kind (``WRITERS``), and names no rule. A write that fails sends the pod back to
the queue unbound, after every writer has undone what it wrote for the pod (kube-scheduler's
Unreserve).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional, Protocol, TypeVar

from models import Pod
from solver.plugin_api import BindWrite, ClaimWrites, PodWrite, VolumeWrites

from .api_client import KubeApi
from .dra_writes import ClaimWriteError, ClaimWriter
from .errors import KubeError
from .retry import call_with_retries

if TYPE_CHECKING:
    from .cache import ClusterCache

log = logging.getLogger(__name__)

R = TypeVar("R", bound=BindWrite, contravariant=True)


@dataclass(frozen=True)
class Calls:
    """How a writer calls the API server: the client, and the bounded retries of every call."""

    api: KubeApi
    backoffs: Sequence[float]
    sleep: Callable[[float], None]
    should_continue: Callable[[], bool]

    def retried(self, fn: Callable[[], Any], what: str) -> None:
        call_with_retries(fn, what=what, backoffs=self.backoffs, sleep=self.sleep, should_continue=self.should_continue)


class BindWriter(Protocol[R]):
    """Writes one kind of PreBind record for a pod about to be bound."""

    def assume(self, cache: ClusterCache, key: str, record: R) -> None:
        """The window's decision is assumed: what the record takes stays taken in the cache until
        the watch shows it written."""
        ...

    def write(self, key: str, pod: Pod, node: str, plugin: str, record: R) -> Optional[str]:
        """Write ``record`` for ``pod`` (``key``) going to ``node``: None when written, else why
        not (the writer has logged it and undone its own part)."""
        ...

    def unreserve(self, key: str) -> None:
        """The pod is not bound: undo what was written for it (nothing when nothing was)."""
        ...

    def settled(self, key: str) -> None:
        """The pod is bound: what was written for it stays."""
        ...


class _KeepsNothing:
    """A writer whose writes the cache need not hold and no Unreserve undoes (the API server
    keeps them, and what they point at is released by their owner)."""

    def __init__(self, calls: Calls) -> None:
        self.calls = calls

    def assume(self, cache: ClusterCache, key: str, record: Any) -> None:
        return None

    def unreserve(self, key: str) -> None:
        return None

    def settled(self, key: str) -> None:
        return None


class PodMetadataWriter(_KeepsNothing):
    """``PodWrite``: one merge patch of the pod's metadata (annotations, labels)."""

    def write(self, key: str, pod: Pod, node: str, plugin: str, record: PodWrite) -> Optional[str]:
        ns, name = pod.metadata.namespace, pod.metadata.name
        metadata = {part: dict(values) for part, values in
                    (("annotations", record.annotations), ("labels", record.labels)) if values}

        def send() -> None:
            self.calls.api.patch_pod_metadata(ns, name, metadata)
        try:
            self.calls.retried(send, f"PreBind {plugin} of {key}")
        except KubeError as exc:
            log.warning("not binding %s: PreBind %s failed: %s", key, plugin, exc)
            return exc.message
        return None


class VolumeWriter(_KeepsNothing):
    """``VolumeWrites``: each first-time claim's chosen volume gets the claim as its claimRef, or
    the claim gets the node to provision for (its ``volume.kubernetes.io/selected-node``). The
    PV controller and the provisioner finish the binding; the kubelet waits for it."""

    def write(self, key: str, pod: Pod, node: str, plugin: str, record: VolumeWrites) -> Optional[str]:
        api = self.calls.api
        for choice in record.claims:
            ns, _, name = choice.claim.partition("/")
            volume, uid = choice.volume, choice.uid
            if volume is not None:
                def write() -> None:
                    api.reserve_volume(volume, ns, name, uid)
                what = f"reserve volume {volume} for {choice.claim}"
            else:
                def write() -> None:
                    api.select_node(ns, name, node)
                what = f"select node {node} for {choice.claim}"
            try:
                self.calls.retried(write, what)
            except KubeError as exc:
                log.warning("not binding %s: %s failed: %s", key, what, exc)
                return exc.message
        return None


class ClaimsWriter:
    """``ClaimWrites``: each claim's allocation and the pod in its ``reservedFor``
    (``dra_writes.ClaimWriter``, made on first use); a failed write releases what was written."""

    def __init__(self, calls: Calls) -> None:
        self.calls = calls
        self._writer: Optional[ClaimWriter] = None

    @property
    def writer(self) -> ClaimWriter:
        if self._writer is None:
            c = self.calls
            self._writer = ClaimWriter(c.api, backoffs=c.backoffs, sleep=c.sleep, should_continue=c.should_continue)
        return self._writer

    def assume(self, cache: ClusterCache, key: str, record: ClaimWrites) -> None:
        cache.assume_claims(key, [(c.claim, c.allocation) for c in record.uses])

    def write(self, key: str, pod: Pod, node: str, plugin: str, record: ClaimWrites) -> Optional[str]:
        try:
            self.writer.reserve(key, pod.metadata.uid or "", record.uses)
        except (ClaimWriteError, KubeError) as exc:
            why = exc.message if isinstance(exc, KubeError) else str(exc)
            log.warning("not binding %s: writing its resourceclaims failed: %s", key, why)
            self.writer.release(key)
            return why
        return None

    def unreserve(self, key: str) -> None:
        if self._writer is not None and self._writer.has_written(key):
            self._writer.release(key)

    def settled(self, key: str) -> None:
        if self._writer is not None:
            self._writer.settled(key)


# Each kind of record, and how its writer is made: a rule with a new kind of record adds its
# writer here (the binder names neither).
WRITERS: dict[type[BindWrite], Callable[[Calls], BindWriter[Any]]] = {
    PodWrite: PodMetadataWriter,
    VolumeWrites: VolumeWriter,
    ClaimWrites: ClaimsWriter,
}


class Writers:
    """A binder's writers, one per kind of record, made from ``WRITERS``."""

    def __init__(self, calls: Calls) -> None:
        self._of = {kind: make(calls) for kind, make in WRITERS.items()}

    def of(self, record: BindWrite) -> BindWriter[Any]:
        return self._of[type(record)]

    def assume(self, cache: ClusterCache, key: str, writes: Sequence[tuple[str, BindWrite]]) -> None:
        for _, record in writes:
            self.of(record).assume(cache, key, record)

    def write(self, key: str, pod: Pod, node: str, writes: Sequence[tuple[str, BindWrite]]) -> Optional[tuple[str, str]]:
        """Every record in order: None when all were written, else (the rule, why) of the first
        that failed, after every writer undid what it wrote for the pod."""
        for plugin, record in writes:
            why = self.of(record).write(key, pod, node, plugin, record)
            if why is not None:
                self.unreserve(key)
                return plugin, why
        return None

    def unreserve(self, key: str) -> None:
        """The pod is not bound: every writer undoes what it wrote for it."""
        for writer in self._of.values():
            writer.unreserve(key)

    def settled(self, key: str) -> None:
        """The pod is bound: every writer keeps what it wrote for it."""
        for writer in self._of.values():
            writer.settled(key)

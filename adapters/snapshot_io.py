"""Files in: cluster snapshots, scheduler configs and plans, read into ``models``.

A snapshot is whatever ``kubectl get nodes,pods,pdb,priorityclasses,podgroups -A -o yaml`` (or
``-o json``) prints: a ``List``, a typed ``PodList``-style list, a multi-document YAML stream, a
stream of JSON objects (``jq -c '.items[]'``), or one object. Items are dispatched by ``kind``;
kinds the scheduler does not read (Services, ReplicaSets, ...) are counted and skipped.

Every problem becomes one ``models.InputError`` that names the object and the field
(``pods/default/web-1: spec.containers[0].resources.requests.cpu: "12x" is not a quantity``);
nothing is returned from an input that did not parse completely.

This module puts the readers of ``adapters/reading`` together — text and documents
(``documents``), the YAML event assembler (``yaml_events``), the kind table (``kinds``), one
object's validation (``validation``), pydantic errors (``errors``), the config and the plan
(``config_file``, ``plan_file``) — and streams a dump's objects into a ``ClusterSnapshot``. The
names other modules have always imported from here still are (re-exported below).
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Optional

from pydantic import BaseModel

from models import ClusterSnapshot, InputError, Pod
from models.config import DEFAULT_MAX_SNAPSHOT_BYTES
from models.objects import PodSpec
from models.workloads import workload_pod_groups

from . import item_stream
from .gc_control import paused_gc
from .input_size import snapshot_limit
from .interrupts import checkpoint
from .reading.config_file import load_config
from .reading.documents import (
    HELM_HINT,
    HELM_MARKER,
    SURROGATE_ESCAPE,
    Source,
    flat_objects,
    json_documents,
    label_of,
    parsed_text,
    read_documents,
    read_text,
)
from .reading.errors import validate_model
from .reading.groups import groups_of
from .reading.kinds import ALSO, KINDS, VERSIONED, Kind, group_of, kind_of, object_name
from .reading.plan_file import load_plan
from .reading.validation import shared_view, spec_key, validate_object, validate_pod, validate_pod_with
from .reading.yaml_events import CHECK_EVERY, MAX_ALIAS_EXPANSION, MAX_DEPTH, ItemSink, yaml_documents

__all__ = [
    "CHECK_EVERY",
    "HELM_HINT",
    "HELM_MARKER",
    "ItemSink",
    "LoadedSnapshot",
    "MAX_ALIAS_EXPANSION",
    "MAX_DEPTH",
    "Source",
    "load_config",
    "load_plan",
    "load_snapshot",
    "read_documents",
    "read_snapshot",
    "shared_view",
]

# Names other modules (the live watch's converter, tests) import from here, as they were called
# before the readers moved to ``adapters/reading``.
_KINDS, _ALSO, _Kind = KINDS, ALSO, Kind
_kind_of, _group, _object_name = kind_of, group_of, object_name
_validate_object, _validate_pod, _validate_pod_with = validate_object, validate_pod, validate_pod_with
_spec_key, _validate_model = spec_key, validate_model
_label, _read_text, _parsed_text, _items = label_of, read_text, parsed_text, flat_objects
_json_documents, _yaml_documents, _SURROGATE_ESCAPE = json_documents, yaml_documents, SURROGATE_ESCAPE

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoadedSnapshot:
    """A parsed snapshot and what was left out of it (kinds the scheduler does not read)."""

    snapshot: ClusterSnapshot
    source: str
    skipped: dict[str, int] = field(default_factory=dict)

    def require_nodes_or_pods(self) -> "LoadedSnapshot":
        """Refuse an input with neither a Node nor a Pod (a Deployment manifest, an empty List):
        what a command would decide from it is nothing, which is no answer to give."""
        if self.snapshot.nodes or self.snapshot.pods:
            return self
        read = ", ".join(f"{kind} ({n})" for kind, n in sorted(self.skipped.items())) or "nothing but an empty list"
        raise InputError(
            self.source, "",
            f"no Node and no Pod in the input (read: {read}); a snapshot is what "
            "`kubectl get nodes,pods,pdb,priorityclasses -A -o yaml` prints",
        )

    def decidable(self, scheduler_name: str, *, all_pending: bool = False) -> "LoadedSnapshot":
        """``require_nodes_or_pods``, and refuse pending pods with no Node to place them on."""
        self.require_nodes_or_pods()
        pending = self.snapshot.pending_pods(scheduler_name, all_pending=all_pending)
        if pending and not self.snapshot.nodes:
            raise InputError(
                self.source, "nodes",
                f"{len(pending)} pending pod(s) but no Node to place them on; dump the nodes too "
                "(kubectl get nodes,pods,pdb,priorityclasses -A -o yaml)",
            )
        return self

    def require_nodes(self, why: str) -> "LoadedSnapshot":
        """``require_nodes_or_pods``, and refuse pods with no Node at all: ``why`` says what the
        command would do with nodes (a plan computed on no node is nothing, however it is printed)."""
        self.require_nodes_or_pods()
        if not self.snapshot.nodes:
            raise InputError(
                self.source, "nodes",
                f"{len(self.snapshot.pods)} pod(s) but no Node: {why}; dump the nodes too "
                "(kubectl get nodes,pods,pdb,priorityclasses -A -o yaml)",
            )
        return self

    def require_pending(self, scheduler_name: str) -> "LoadedSnapshot":
        """``require_nodes``, and refuse a snapshot with no pending pod of ``scheduler_name``."""
        self.require_nodes("there is nowhere to schedule")
        if self.snapshot.pending_pods(scheduler_name):
            return self
        others = len(self.snapshot.pending_pods(all_pending=True))
        hint = (f"{others} pending pod(s) name another scheduler (set their spec.schedulerName, or "
                "--scheduler-name)" if others else "every pod is bound already")
        raise InputError(
            self.source, "pods",
            f'no pending pod with schedulerName "{scheduler_name}", so nothing to schedule: {hint}',
        )

    def note(self) -> Optional[str]:
        """One line naming the skipped kinds, or None when every object was read."""
        if not self.skipped:
            return None
        total = sum(self.skipped.values())
        kinds = ", ".join(f"{kind} ({n})" for kind, n in sorted(self.skipped.items()))
        noun = "object" if total == 1 else "objects"
        return f"{self.source}: skipped {total} {noun} of kinds the scheduler does not read: {kinds}"


def load_snapshot(source: Source, *, label: Optional[str] = None,
                  max_bytes: int = DEFAULT_MAX_SNAPSHOT_BYTES) -> ClusterSnapshot:
    """Read a snapshot (path, ``-`` for stdin, or an open file); skipped kinds are logged."""
    loaded = read_snapshot(source, label=label, max_bytes=max_bytes)
    note = loaded.note()
    if note:
        log.info("%s", note)
    return loaded.snapshot


def read_snapshot(source: Source, *, label: Optional[str] = None,
                  max_bytes: int = DEFAULT_MAX_SNAPSHOT_BYTES) -> LoadedSnapshot:
    """Read a snapshot and report which kinds were skipped; raises ``InputError`` on bad input,
    and on an input of more than ``max_bytes`` (``limits.maxSnapshotBytes``) before parsing it."""
    label = label or label_of(source)
    text = read_text(source, label, snapshot_limit(max_bytes))
    with paused_gc():  # millions of small objects, no cycle among them
        return _read_objects(text, label)


def _read_objects(text: str, label: str) -> LoadedSnapshot:
    objects = _Objects()
    try:
        _stream_objects(text, label, objects)
    except _Unstreamable:
        # Not a dump's shape, or something in it is wrong: read it whole, which names the
        # problem exactly as it always has (the text is still here).
        objects = _Objects()
        documents = parsed_text(text, label)
        if not documents:
            raise InputError(label, "", "empty input: expected a List or Kubernetes objects") from None
        for order, (position, item, kind) in enumerate(flat_objects(documents, label)):
            objects.take(position, item, kind, (order,))
    return objects.loaded(label)


class _Objects:
    """The objects of a snapshot as they are read, by kind, and the kinds skipped."""

    def __init__(self) -> None:
        # Each object with its place in the input, (document, item): the order objects are read
        # in is not always the input's (a List's kindless items wait for the List's kind).
        self.by_kind: dict[str, list[tuple[tuple, BaseModel]]] = {
            kind: [] for kind in [*KINDS, *(spec.slot for spec in (*ALSO.values(), *VERSIONED.values()))]}
        self.skipped: Counter[str] = Counter()
        self.kindless: list[tuple[int, str, Any, tuple]] = []  # list items waiting for their list's kind
        self.shared: dict = {}  # equal leaf objects, one instance (``models.objects.compact``)
        self.taken = 0
        # Pod specs read so far, by their text less ``nodeName`` and ``affinity``, each with the
        # text of its affinity (``validate_pod``): the replicas of a workload have
        # one spec, which is validated (its quantities parsed, its terms built) once and shared.
        self.specs: dict[bytes, tuple[PodSpec, bytes]] = {}

    def take(self, position: str, item: dict, kind: str, order: tuple) -> None:
        self.taken += 1
        if not self.taken % CHECK_EVERY:
            checkpoint()  # Ctrl-C stops a long read within a fraction of a second
        spec = kind_of(kind, item.get("apiVersion"))
        group = group_of(item.get("apiVersion"))
        if spec is None or (group is not None and group not in spec.groups):
            self.skipped[kind if spec is None else f"{kind} ({item['apiVersion']})"] += 1
            return
        if spec.model is Pod:
            obj = validate_pod(item, position, self.shared, self.specs)
        else:
            obj = validate_object(spec, item, position, self.shared)
        self.by_kind[spec.slot or kind].append((order, obj))

    def list_item(self, document: int, index: int, position: str, item: Any) -> None:
        """An element of a List whose own kind may not be known yet (kubectl writes ``kind``
        after ``items``); any doubt sends the input to the whole reading."""
        if not isinstance(item, dict):
            raise _Unstreamable
        kind = item.get("kind")
        if kind is None:
            self.kindless.append((document, position, item, (document, index)))
            return
        if not isinstance(kind, str) or not kind or kind.endswith("List"):
            raise _Unstreamable
        self.take(position, item, kind, (document, index))

    def list_done(self, document: int, list_kind: Any) -> None:
        """The List of ``document`` ended with kind ``list_kind``: its kindless items are read."""
        if not isinstance(list_kind, str) or not list_kind.endswith("List"):
            raise _Unstreamable
        item_kind = list_kind[: -len("List")]
        waiting = [entry for entry in self.kindless if entry[0] == document]
        if waiting and not item_kind:
            raise _Unstreamable  # a plain List's items must name their kind
        self.kindless = [entry for entry in self.kindless if entry[0] != document]
        for _, position, item, order in waiting:
            self.take(position, item, item_kind, order)

    def loaded(self, label: str) -> LoadedSnapshot:
        objects: dict[str, list[Any]] = {kind: [obj for _, obj in sorted(entries, key=lambda e: e[0])]
                                         for kind, entries in self.by_kind.items()}  # each kind's own model
        # Each step below is a pass over every object (a fraction of a second each at 5,000
        # nodes and 175,000 pods): Ctrl-C is looked for between them.
        checkpoint()
        groups = groups_of(objects["CorePodGroup"], objects["WorkloadTemplates"], objects["CompositePodGroup"],
                           {c.metadata.name: c for c in objects["PriorityClass"]},
                           {t.key: t for t in objects["ResourceClaimTemplate"]}, {c.key: c for c in objects["ResourceClaim"]})
        checkpoint()
        snapshot = ClusterSnapshot.build(
            nodes=objects["Node"],
            pods=groups.pods(objects["Pod"]),
            pdbs=objects["PodDisruptionBudget"],
            priority_classes=objects["PriorityClass"],
            pod_groups=[*objects["PodGroup"], *groups.pod_groups,
                        *workload_pod_groups(objects["Workload"], _workload_refs(objects["Pod"]))],
            composite_groups=groups.composites,
            namespaces=objects["Namespace"],
            pvs=objects["PersistentVolume"],
            pvcs=objects["PersistentVolumeClaim"],
            device_classes=objects["DeviceClass"],
            resource_slices=objects["ResourceSlice"],
            resource_claims=[*objects["ResourceClaim"], *groups.made_claims],
            resource_claim_templates=objects["ResourceClaimTemplate"],
            storage_classes=objects["StorageClass"],
            csi_nodes=objects["CSINode"],
        )
        checkpoint()
        return LoadedSnapshot(snapshot=snapshot, source=label, skipped=dict(self.skipped))


def _workload_refs(pods: list[Pod]) -> set[tuple[str, str, str, str]]:
    return {(p.metadata.namespace, r.name, r.pod_group, r.pod_group_replica_key)
            for p in pods if (r := p.spec.workload_ref) is not None}


class _Unstreamable(Exception):
    """The input is read whole instead (see ``read_snapshot``)."""


def _stream_objects(text: str, label: str, objects: _Objects) -> None:
    """Read a dump's objects one at a time into ``objects`` (``adapters.item_stream`` for a
    JSON List, the YAML assembler's sink for YAML), or raise ``_Unstreamable``."""
    stripped = text.lstrip()
    try:
        if stripped[:1] == "{":
            if SURROGATE_ESCAPE.search(stripped):
                raise _Unstreamable
            rest = item_stream.json_list(stripped, lambda i, item: objects.list_item(0, i, f"items[{i}]", item))
            objects.list_done(0, rest.get("kind"))
            return
        if not stripped or stripped[:1] == "[":
            raise _Unstreamable
        streamed: set[int] = set()

        def sink(document: int, index: int, item: Any) -> None:
            streamed.add(document)
            position = f"documents[{document}].items[{index}]" if document else f"items[{index}]"
            objects.list_item(document, index, position, item)

        documents = yaml_documents(text, label, sink)
        if not documents:
            raise _Unstreamable
        for i, doc in enumerate(documents):
            if not isinstance(doc, dict):
                raise _Unstreamable
            if i in streamed:
                objects.list_done(i, doc.get("kind"))
                continue
            kind = doc.get("kind")
            if not isinstance(kind, str) or not kind or kind.endswith("List"):
                raise _Unstreamable  # an empty or odd List, or no kind: the whole reading says what
            objects.take(f"documents[{i}]", doc, kind, (i, -1))
        if objects.kindless:
            raise _Unstreamable
    except (InputError, item_stream.NotAList, json.JSONDecodeError, RecursionError, ValueError):
        raise _Unstreamable from None

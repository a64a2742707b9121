"""Files in: cluster snapshots, scheduler configs and plans, read into ``models``.

A snapshot is whatever ``kubectl get nodes,pods,pdb,priorityclasses,podgroups -A -o yaml`` (or
``-o json``) prints: a ``List``, a typed ``PodList``-style list, a multi-document YAML stream, a
stream of JSON objects (``jq -c '.items[]'``), or one object. Items are dispatched by ``kind``;
kinds the scheduler does not read (Services, ReplicaSets, ...) are counted and skipped.

Every problem becomes one ``models.InputError`` that names the object and the field
(``pods/default/web-1: spec.containers[0].resources.requests.cpu: "12x" is not a quantity``);
nothing is returned from an input that did not parse completely.

The input may be hostile. YAML is not read with ``yaml.load``: the C loader recurses once per
nesting level and crashes the interpreter on deep input, and aliases can expand exponentially
(billion laughs). Instead the libyaml *event* stream (an iterative parser) is assembled here with
a depth limit and a budget on alias expansion; this is also about three times faster than
``CSafeLoader`` on large dumps.
"""

from __future__ import annotations

import json
import logging
import marshal
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable
from typing import IO, Any, Optional, Union

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails
from yaml import events as ev
from yaml.nodes import ScalarNode

from models import (
    Assignment,
    ClusterSnapshot,
    Gated,
    InputError,
    Namespace,
    Node,
    Nomination,
    Plan,
    PlanStats,
    Pod,
    PodDisruptionBudget,
    PodGroup,
    Preemption,
    PriorityClass,
    SchedulerConfig,
    Unschedulable,
)
from models.config import DEFAULT_MAX_SNAPSHOT_BYTES
from models.objects import Affinity, Container, PodSpec, compact, compact_pod, copy_with, unread_volume
from models.storage import PersistentVolume, PersistentVolumeClaim
from models.dra import DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice
from models.plan import DeviceAllocation
from models.storage import CSINode, PersistentVolume, PersistentVolumeClaim, StorageClass
from models.workloads import CorePodGroup, Workload, workload_pod_groups

from . import item_stream
from .gc_control import paused_gc
from .interrupts import checkpoint
from .input_size import CONFIG_LIMIT, SizeLimit, read_bounded, snapshot_limit

__all__ = [
    "LoadedSnapshot",
    "MAX_DEPTH",
    "load_config",
    "load_plan",
    "load_snapshot",
    "read_documents",
    "read_snapshot",
]

log = logging.getLogger(__name__)

Source = Union[str, Path, IO[str], IO[bytes]]

# Deepest nesting accepted. Kubernetes objects stay under ~30 levels (managedFields included);
# the limit keeps every later step (pydantic, repr, json) far from Python's recursion limit.
MAX_DEPTH = 500
# Nodes that YAML aliases may add by expansion, in total. Linear in anything a person writes by
# hand, and far below what an exponential alias bomb needs.
MAX_ALIAS_EXPANSION = 1_000_000

_YAML_PARSER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# Objects read (or YAML collections closed) between two looks at whether Ctrl-C was pressed:
# a few milliseconds of work.
CHECK_EVERY = 256


# --------------------------------------------------------------------------- kinds


@dataclass(frozen=True)
class _Kind:
    plural: str  # how an error names the object: pods/default/web-1
    model: type[BaseModel]
    groups: frozenset[str]  # API groups accepted for this kind ("" is the core group)
    namespaced: bool
    slot: str = ""  # where its objects are collected, when not under the kind's own name


_KINDS: dict[str, _Kind] = {
    "Node": _Kind("nodes", Node, frozenset({""}), False),
    "Pod": _Kind("pods", Pod, frozenset({""}), True),
    "PodDisruptionBudget": _Kind("poddisruptionbudgets", PodDisruptionBudget, frozenset({"policy"}), True),
    "PriorityClass": _Kind("priorityclasses", PriorityClass, frozenset({"scheduling.k8s.io"}), False),
    # scheduler-plugins coscheduling (older releases served it as scheduling.sigs.k8s.io), and
    # Volcano's, which has the same minMember and minResources.
    "PodGroup": _Kind("podgroups", PodGroup,
                      frozenset({"scheduling.x-k8s.io", "scheduling.sigs.k8s.io", "scheduling.volcano.sh"}), True),
    # Kubernetes' own gang API, 1.35 (Workload) and 1.36 (PodGroup): ``models.workloads``.
    "Workload": _Kind("workloads", Workload, frozenset({"scheduling.k8s.io"}), True),
    "Namespace": _Kind("namespaces", Namespace, frozenset({""}), False),
    "PersistentVolume": _Kind("persistentvolumes", PersistentVolume, frozenset({""}), False),
    "PersistentVolumeClaim": _Kind("persistentvolumeclaims", PersistentVolumeClaim, frozenset({""}), True),
    # Dynamic Resource Allocation (``models.dra``): resource.k8s.io/v1 (GA in 1.34).
    "DeviceClass": _Kind("deviceclasses", DeviceClass, frozenset({"resource.k8s.io"}), False),
    "ResourceSlice": _Kind("resourceslices", ResourceSlice, frozenset({"resource.k8s.io"}), False),
    "ResourceClaim": _Kind("resourceclaims", ResourceClaim, frozenset({"resource.k8s.io"}), True),
    "ResourceClaimTemplate": _Kind("resourceclaimtemplates", ResourceClaimTemplate, frozenset({"resource.k8s.io"}), True),
    "StorageClass": _Kind("storageclasses", StorageClass, frozenset({"storage.k8s.io"}), False),
    "CSINode": _Kind("csinodes", CSINode, frozenset({"storage.k8s.io"}), False),
}


# Kinds whose name another API group uses too: (kind, group) -> how to read it.
_ALSO: dict[tuple[str, str], _Kind] = {
    ("PodGroup", "scheduling.k8s.io"): _Kind("podgroups", CorePodGroup, frozenset({"scheduling.k8s.io"}), True,
                                            slot="CorePodGroup"),
}


def _kind_of(kind: Any, api_version: Any) -> Optional[_Kind]:
    group = _group(api_version)
    return _ALSO.get((kind, group)) if group is not None and (kind, group) in _ALSO else _KINDS.get(kind)


# --------------------------------------------------------------------------- results


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


# --------------------------------------------------------------------------- public entry points


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
    label = label or _label(source)
    text = _read_text(source, label, snapshot_limit(max_bytes))
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
        documents = _parsed_text(text, label)
        if not documents:
            raise InputError(label, "", "empty input: expected a List or Kubernetes objects") from None
        for order, (position, item, kind) in enumerate(_items(documents, label)):
            objects.take(position, item, kind, (order,))
    return objects.loaded(label)


class _Objects:
    """The objects of a snapshot as they are read, by kind, and the kinds skipped."""

    def __init__(self) -> None:
        # Each object with its place in the input, (document, item): the order objects are read
        # in is not always the input's (a List's kindless items wait for the List's kind).
        self.by_kind: dict[str, list[tuple[tuple, BaseModel]]] = {
            kind: [] for kind in [*_KINDS, *(spec.slot for spec in _ALSO.values())]}
        self.skipped: Counter[str] = Counter()
        self.kindless: list[tuple[int, str, Any, tuple]] = []  # list items waiting for their list's kind
        self.shared: dict = {}  # equal leaf objects, one instance (``models.objects.compact``)
        self.taken = 0
        # Pod specs read so far, by their text less ``nodeName`` and ``affinity``, each with the
        # text of its affinity (``_validate_pod``): the replicas of a workload have
        # one spec, which is validated (its quantities parsed, its terms built) once and shared.
        self.specs: dict[bytes, tuple[PodSpec, bytes]] = {}

    def take(self, position: str, item: dict, kind: str, order: tuple) -> None:
        self.taken += 1
        if not self.taken % CHECK_EVERY:
            checkpoint()  # Ctrl-C stops a long read within a fraction of a second
        spec = _kind_of(kind, item.get("apiVersion"))
        group = _group(item.get("apiVersion"))
        if spec is None or (group is not None and group not in spec.groups):
            self.skipped[kind if spec is None else f"{kind} ({item['apiVersion']})"] += 1
            return
        if spec.model is Pod:
            obj = _validate_pod(item, position, self.shared, self.specs)
        else:
            obj = _validate_object(spec, item, position, self.shared)
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
        snapshot = ClusterSnapshot.build(
            nodes=objects["Node"],
            pods=objects["Pod"],
            pdbs=objects["PodDisruptionBudget"],
            priority_classes=objects["PriorityClass"],
            pod_groups=[*objects["PodGroup"], *(g.pod_group() for g in objects["CorePodGroup"]),
                        *workload_pod_groups(objects["Workload"], _workload_refs(objects["Pod"]))],
            namespaces=objects["Namespace"],
            pvs=objects["PersistentVolume"],
            pvcs=objects["PersistentVolumeClaim"],
            device_classes=objects["DeviceClass"],
            resource_slices=objects["ResourceSlice"],
            resource_claims=objects["ResourceClaim"],
            resource_claim_templates=objects["ResourceClaimTemplate"],
            storage_classes=objects["StorageClass"],
            csi_nodes=objects["CSINode"],
        )
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
            if _SURROGATE_ESCAPE.search(stripped):
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

        documents = _yaml_documents(text, label, sink)
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


def load_config(path: Union[str, Path, IO[str], IO[bytes]]) -> SchedulerConfig:
    """A ``SchedulerConfig`` from one YAML/JSON mapping; an empty file means all defaults."""
    data = _single_mapping(path, what="config", empty={}, limit=CONFIG_LIMIT)
    return _validate_model(SchedulerConfig, data, "config")


def load_plan(path: Union[str, Path, IO[str], IO[bytes]], *, max_bytes: int = DEFAULT_MAX_SNAPSHOT_BYTES) -> Plan:
    """A plan as printed by ``schedule --output json|yaml``.

    Keys the contract may add later are ignored, and ``stats`` may be left out, so plans written
    by other tools (``{"assignments": [...]}``) can be checked too. A plan is bounded like the
    snapshot it is checked against (``max_bytes``).
    """
    data = _single_mapping(path, what="plan", empty=None, limit=snapshot_limit(max_bytes))
    if "assignments" not in data:
        kind = data.get("kind")
        looks = f" (this looks like a snapshot, kind {kind!s}, not a plan)" if kind or "items" in data else ""
        raise InputError(
            "plan", "assignments",
            f"missing: a plan is what `cpsat-scheduler schedule -o json` prints, with at least "
            f"'assignments'{looks}",
        )
    data = {k: v for k, v in data.items() if k in Plan.model_fields}
    for key, model in _PLAN_ENTRIES.items():
        entries = data.get(key)
        if isinstance(entries, list):
            data[key] = [_known_keys(e, model) for e in entries]
    if data.get("stats") is None:
        data["stats"] = {"engine": "external", "status": "UNKNOWN"}
    data["stats"] = _known_keys(data["stats"], PlanStats)
    return _validate_model(Plan, data, "plan")


_PLAN_ENTRIES: dict[str, type[BaseModel]] = {
    "assignments": Assignment,
    "preemptions": Preemption,
    "unschedulable": Unschedulable,
    "nominations": Nomination,
    "gated": Gated,
    "allocations": DeviceAllocation,
}


def _known_keys(value: Any, model: type[BaseModel]) -> Any:
    """Drop keys a newer version of the contract may have added; anything else is left to fail."""
    if not isinstance(value, dict):
        return value
    return {k: v for k, v in value.items() if k in model.model_fields}


def _single_mapping(source: Any, *, what: str, empty: Optional[dict], limit: SizeLimit) -> dict:
    label = _label(source)
    documents = _documents(source, label, limit)
    if not documents:
        if empty is not None:
            return dict(empty)
        raise InputError(label, "", f"empty input: expected a {what}")
    if len(documents) > 1:
        raise InputError(label, "", f"expected one {what} document, found {len(documents)}")
    data = documents[0]
    if not isinstance(data, dict):
        raise InputError(what, "", f"expected a mapping, got {_describe(data)}")
    return data


# --------------------------------------------------------------------------- reading text


def read_documents(source: Source, *, label: Optional[str] = None,
                   max_bytes: int = DEFAULT_MAX_SNAPSHOT_BYTES) -> list[Any]:
    """Every non-empty document of a JSON or YAML input of at most ``max_bytes``, as plain
    Python data."""
    label = label or _label(source)
    return _documents(source, label, snapshot_limit(max_bytes))


def _documents(source: Source, label: str, limit: SizeLimit) -> list[Any]:
    return _parsed_text(_read_text(source, label, limit), label)


def _parsed_text(text: str, label: str) -> list[Any]:
    try:
        return _parse_documents(text, label)
    except InputError as exc:
        if HELM_MARKER in text:
            raise InputError(label, "", f"{exc.problem} — {HELM_HINT}") from None
        raise


# A Helm chart's templates are not Kubernetes objects until rendered.
HELM_MARKER = "{{"
HELM_HINT = "this looks like a Helm template ({{ ... }}): render it first (helm template ...) and pass the output"


def _parse_documents(text: str, label: str) -> list[Any]:
    stripped = text.lstrip()
    if not stripped:
        return []
    if stripped[0] in "{[":
        try:
            documents = _json_documents(stripped)
            if _SURROGATE_ESCAPE.search(stripped):
                _refuse_lone_surrogates(documents, label)
            return documents
        except RecursionError:
            raise InputError(label, "", "invalid JSON: nested too deeply") from None
        except json.JSONDecodeError as exc:
            # Flow-style YAML also starts with a bracket; only if it is not YAML either is the
            # JSON error the one to show.
            try:
                return _yaml_documents(text, label)
            except InputError:
                offset = len(text) - len(stripped)
                line = text.count("\n", 0, offset) + exc.lineno
                raise InputError(label, "", f"invalid JSON: line {line}, column {exc.colno}: {exc.msg}") from None
    return _yaml_documents(text, label)


# A JSON escape of a UTF-16 surrogate. Paired ones make one character; a lone one decodes to a
# string that is not valid Unicode, which pydantic-core and a UTF-8 stdout refuse later (YAML's
# scanner refuses such escapes itself).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _refuse_lone_surrogates(documents: list[Any], label: str) -> None:
    """``InputError`` naming the object and field of the first string holding a lone surrogate."""
    several = len(documents) > 1
    for i, doc in enumerate(documents):
        position = f"documents[{i}]" if several else label
        items = doc.get("items") if isinstance(doc, dict) else None
        objects = [(position, doc)]
        if isinstance(items, list):
            prefix = f"{position}." if several else ""
            objects = [(f"{prefix}items[{j}]", item) for j, item in enumerate(items)]
            objects.append((position, {k: v for k, v in doc.items() if k != "items"}))
        for where, obj in objects:
            path = _surrogate_path(obj) if isinstance(obj, dict) else None  # non-objects fail later
            if path is None:
                continue
            kind = obj.get("kind") if isinstance(obj, dict) else None
            spec = _kind_of(kind, obj.get("apiVersion")) if isinstance(kind, str) else None
            name = _object_name(spec, obj, where) if spec is not None else where
            if _has_surrogate(name):
                name = where
            raise InputError(name, path, "not valid Unicode: a lone UTF-16 surrogate (\\ud800-\\udfff escape)")


def _surrogate_path(data: Any) -> Optional[str]:
    """JSON path of the first key or string holding a lone surrogate (iterative), or None."""
    pending: list[tuple[str, Any]] = [("", data)]
    while pending:
        path, node = pending.pop()
        if isinstance(node, str):
            if _has_surrogate(node):
                return path
        elif isinstance(node, dict):
            for key, value in reversed(list(node.items())):
                text = str(key)
                if _SIMPLE_KEY.match(text):
                    step = f".{text}" if path else text
                else:  # json.dumps escapes the surrogate, so the path stays printable
                    step = f"[{json.dumps(text)}]"
                if _has_surrogate(text):
                    return path + step
                pending.append((path + step, value))
        elif isinstance(node, list):
            for i in range(len(node) - 1, -1, -1):
                pending.append((f"{path}[{i}]", node[i]))
    return None


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


def _label(source: Any) -> str:
    if isinstance(source, Path):
        return str(source)
    if isinstance(source, str):
        return "<stdin>" if source == "-" else source
    return str(getattr(source, "name", "<input>"))


def _read_text(source: Any, label: str, limit: SizeLimit) -> str:
    try:
        data = read_bounded(source, label, limit)
    except FileNotFoundError:
        raise InputError(label, "", "cannot read: no such file") from None
    except IsADirectoryError:
        raise InputError(label, "", "cannot read: is a directory") from None
    except OSError as exc:
        raise InputError(label, "", f"cannot read: {exc.strerror or exc}") from None
    if isinstance(data, (bytes, bytearray)):
        try:
            return data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise InputError(label, "", f"not UTF-8 text (invalid byte at offset {exc.start})") from None
    return data.lstrip("\ufeff")


def _json_documents(text: str) -> list[Any]:
    """One JSON value, or several separated by whitespace (what ``jq`` prints)."""
    decoder = json.JSONDecoder()
    documents = []
    pos, end = 0, len(text)
    while pos < end:
        value, pos = decoder.raw_decode(text, pos)
        if value is not None:
            documents.append(value)
        while pos < end and text[pos] in " \t\r\n":
            pos += 1
    return documents


_STR_TAG = "tag:yaml.org,2002:str"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_MAP_TAGS = (None, "!", "tag:yaml.org,2002:map")
_SEQ_TAGS = (None, "!", "tag:yaml.org,2002:seq")


class _Frame:
    """An open mapping or sequence while its events stream in."""

    __slots__ = ("value", "is_map", "key", "has_key", "size", "anchor", "merges")

    def __init__(self, value: Any, is_map: bool, anchor: Optional[str]) -> None:
        self.value = value
        self.is_map = is_map
        self.key: Any = None
        self.has_key = False
        self.size = 1  # nodes in this subtree, alias expansions included
        self.anchor = anchor
        self.merges: list[dict] = []


def _yaml_documents(text: str, label: str, sink: Optional[ItemSink] = None) -> list[Any]:
    try:
        return _assemble(yaml.parse(text, Loader=_YAML_PARSER), label, sink)
    except yaml.YAMLError as exc:
        raise InputError(label, "", f"invalid YAML: {_yaml_problem(exc)}") from None


# Takes each finished element of a top-level mapping's ``items`` sequence: (document, index, value).
ItemSink = Callable[[int, int, Any], None]


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or getattr(exc, "context", None) or str(exc)
    if mark is not None:
        return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"
    if isinstance(exc, yaml.reader.ReaderError):  # its str() spans two lines
        char = exc.character if isinstance(exc.character, int) else ord(exc.character[:1] or b"\0")
        return f"character {exc.position}: unacceptable character #x{char:04x}: {exc.reason}"
    return " ".join(str(problem).split())  # one line, whatever the library wrote


def _assemble(events: Any, label: str, sink: Optional[ItemSink] = None) -> list[Any]:
    """Build documents from YAML events without recursion, bounding depth and alias expansion.

    With a ``sink``, each element of a top-level mapping's ``items`` sequence goes to it as soon
    as it is finished, and the sequence keeps only a ``None`` in its place: a dump is then never
    held whole as Python objects."""
    resolver = yaml.resolver.Resolver()
    constructor = yaml.constructor.SafeConstructor()
    plain_cache: dict[str, Any] = {}
    anchors: dict[str, tuple[Any, int]] = {}
    expanded = closed = 0
    documents: list[Any] = []
    stack: list[_Frame] = []

    def fail(event: Any, problem: str) -> InputError:
        mark = getattr(event, "start_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        return InputError(label, "", f"invalid YAML: {where}{problem}")

    for event in events:
        cls = event.__class__
        if cls is ev.ScalarEvent:
            value = _scalar(event, resolver, constructor, plain_cache, fail)
            size = 1
            if event.anchor:
                anchors[event.anchor] = (value, 1)
        elif cls is ev.MappingStartEvent or cls is ev.SequenceStartEvent:
            is_map = cls is ev.MappingStartEvent
            if event.tag not in (_MAP_TAGS if is_map else _SEQ_TAGS):
                raise fail(event, f"unsupported tag {event.tag}")
            if len(stack) >= MAX_DEPTH:
                raise fail(event, f"nested deeper than {MAX_DEPTH} levels")
            stack.append(_Frame({} if is_map else [], is_map, event.anchor))
            continue
        elif cls is ev.MappingEndEvent or cls is ev.SequenceEndEvent:
            closed += 1
            if not closed % CHECK_EVERY:
                checkpoint()
            frame = stack.pop()
            value, size = frame.value, frame.size
            for merged in frame.merges:  # explicit keys win over merged ones
                for k, v in merged.items():
                    value.setdefault(k, v)
            if frame.anchor:
                anchors[frame.anchor] = (value, size)
        elif cls is ev.AliasEvent:
            if event.anchor not in anchors:
                # An alias to an open collection (a cycle) is unknown here too.
                raise fail(event, f"alias *{event.anchor} does not name a finished anchor")
            value, size = anchors[event.anchor]
            expanded += size
            if expanded > MAX_ALIAS_EXPANSION:
                raise fail(event, f"aliases expand to more than {MAX_ALIAS_EXPANSION} nodes")
        else:  # stream and document boundaries
            continue

        if value is _MERGE and not (stack and stack[-1].is_map and not stack[-1].has_key):
            value = "<<"  # only a mapping key merges; elsewhere it is the plain string
        if not stack:
            if value is not None:
                documents.append(value)
            continue
        parent = stack[-1]
        parent.size += size
        if not parent.is_map:
            if sink is not None and len(stack) == 2 and stack[0].is_map and stack[0].key == "items":
                sink(len(documents), len(parent.value), value)
                value = None
            parent.value.append(value)
        elif not parent.has_key:
            if isinstance(value, (dict, list)):
                raise fail(event, "a mapping key must be a scalar")
            parent.key, parent.has_key = value, True
        else:
            key = parent.key
            parent.has_key = False
            if key is _MERGE:
                merges = value if isinstance(value, list) else [value]
                if not all(isinstance(m, dict) for m in merges):
                    raise fail(event, "a merge key (<<) needs a mapping or a list of mappings")
                parent.merges.extend(merges)
            else:
                parent.value[key] = value
    return documents


class _MergeKey:
    """The ``<<`` key of YAML's merge feature."""


_MERGE = _MergeKey()


def _scalar(event: Any, resolver: Any, constructor: Any, cache: dict[str, Any], fail: Any) -> Any:
    tag = event.tag
    raw = event.value
    # A plain scalar without a tag is typed by its text (5, true, null); a quoted one is a string.
    implicit_plain = tag in (None, "!") and event.implicit[0]
    if implicit_plain:
        hit = cache.get(raw, cache)
        if hit is not cache:
            return hit
        tag = resolver.resolve(ScalarNode, raw, (True, False))
    elif tag in (None, "!"):
        return raw
    if tag == _STR_TAG:
        value: Any = raw
    elif tag == _MERGE_TAG:
        value = _MERGE
    else:
        build = constructor.yaml_constructors.get(tag)
        if build is None or tag.endswith((":map", ":seq", ":omap", ":pairs", ":set")):
            raise fail(event, f"unsupported tag {tag}")
        try:
            value = build(constructor, ScalarNode(tag, raw, event.start_mark, event.end_mark, event.style))
        except (yaml.YAMLError, ValueError, TypeError) as exc:
            raise fail(event, f"{raw!r} is not a valid {tag.rsplit(':', 1)[-1]}: {exc}") from None
    if implicit_plain and len(cache) < 100_000:
        cache[raw] = value
    return value


# --------------------------------------------------------------------------- objects


def _items(documents: list[Any], label: str):
    """Yield ``(position, object, kind)`` for every object, flattening Lists.

    A position names an object that has no usable name: ``items[3]`` in a List,
    ``documents[1]`` (or ``documents[1].items[3]``) in a multi-document stream, and the input's
    own label for a single top-level object.
    """
    several = len(documents) > 1
    # (position, object, the kind its List gives it)
    pending: list[tuple[str, Any, Optional[str]]] = [
        (f"documents[{i}]" if several else label, doc, None) for i, doc in enumerate(documents)]
    pending.reverse()
    while pending:
        position, obj, inferred_kind = pending.pop()
        if not isinstance(obj, dict):
            raise InputError(position, "", f"expected a Kubernetes object (a mapping), got {_describe(obj)}")
        kind = obj.get("kind", inferred_kind)
        if kind is None:
            raise InputError(position, "kind", "required field is missing")
        if not isinstance(kind, str) or not kind:
            raise InputError(position, "kind", f"{_describe(kind)} is not a kind")
        if kind == "List" or (kind.endswith("List") and "items" in obj):
            items = obj.get("items", _MISSING)
            if items is _MISSING:
                raise InputError(position, "items", "required field is missing")
            if items is None:
                items = []
            if not isinstance(items, list):
                raise InputError(position, "items", f"expected a list, got {_describe(items)}")
            item_kind = kind[: -len("List")] or None  # PodList items carry no kind of their own
            prefix = f"{position}." if several and position.startswith("documents[") else ""
            for i in range(len(items) - 1, -1, -1):
                pending.append((f"{prefix}items[{i}]", items[i], item_kind))
            continue
        yield position, obj, kind


_MISSING = object()


def _group(api_version: Any) -> Optional[str]:
    """API group of an apiVersion (``policy/v1`` → ``policy``, ``v1`` → ``""``); None if absent."""
    if not isinstance(api_version, str) or not api_version:
        return None
    return api_version.rpartition("/")[0] if "/" in api_version else ""


def _object_name(spec: _Kind, item: dict, position: str) -> str:
    meta = item.get("metadata")
    if not isinstance(meta, dict):
        return position
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        return position
    if not spec.namespaced:
        return f"{spec.plural}/{name}"
    namespace = meta.get("namespace")
    if not isinstance(namespace, str) or not namespace:
        namespace = "default"
    return f"{spec.plural}/{namespace}/{name}"


def _validate_object(spec: _Kind, item: dict, position: str, shared: Optional[dict] = None) -> BaseModel:
    return compact(_validate_model(spec.model, item, _object_name(spec, item, position)), shared)


def _validate_pod(item: dict, position: str, shared: dict, specs: dict[bytes, tuple[PodSpec, bytes]]) -> BaseModel:
    """A Pod, its spec shared with every earlier pod whose spec is the same but for ``nodeName``
    and ``affinity``.

    A spec seen for the first time is validated with its pod as any object is, so a problem in
    it is reported exactly as before; a spec equal to one read already is valid as that one was
    and is not validated again (only ``nodeName`` differs: the shared spec is copied with it). A
    DaemonSet's pods differ in their node affinity too (a ``matchFields`` term naming the node):
    then only the affinity is validated, and the shared spec copied with it; an affinity that
    does not validate sends the pod to the full validation, which names the field."""
    raw = item.get("spec")
    key = _spec_key(raw) if type(raw) is dict else None
    cached = specs.get(key[0]) if key is not None else None
    if cached is None:
        pod = _validate_object(_KINDS["Pod"], item, position, shared)
        if key is not None:
            specs[key[0]] = (pod.spec, key[1])  # type: ignore[attr-defined]
        return pod
    spec, affinity_key = cached
    node_name = raw.get("nodeName") or ""  # type: ignore[union-attr]
    update: dict[str, Any] = {}
    if affinity_key != key[1]:  # type: ignore[index]
        affinity = _affinity(raw.get("affinity"), shared)  # type: ignore[union-attr]
        if affinity is False:
            return _validate_object(_KINDS["Pod"], item, position, shared)
        update["affinity"] = affinity
    if spec.node_name != node_name:
        update["node_name"] = node_name
    if update:
        spec = copy_with(spec, update)
    return _validate_pod_with(item, spec, position, shared)


def _validate_pod_with(item: dict, spec: PodSpec, position: str, shared: Optional[dict]) -> BaseModel:
    """A Pod whose spec was read already (a shared ``PodSpec``, compacted when first read): the
    rest of ``item`` validated, and only the rest compacted (``compact_pod``), since walking the
    shared spec again would only find it as it was left."""
    pod = _validate_model(Pod, {**item, "spec": spec}, lambda: _object_name(_KINDS["Pod"], item, position))
    return compact_pod(pod, shared)


def _affinity(raw: Any, shared: dict) -> Any:
    """``spec.affinity`` read on its own (None when null or absent), or False when it does not
    validate (the caller reads the whole pod, to name the field)."""
    if raw is None:
        return None
    try:
        return compact(Affinity.model_validate(raw), shared)
    except Exception:  # noqa: BLE001 - whatever it is, the full validation reports it
        return False


def _spec_key(raw: dict) -> Optional[tuple[bytes, bytes]]:
    """What the model reads of ``raw`` less ``nodeName`` and ``affinity`` (``shared_view``), and
    its ``affinity``, as bytes (marshal's version 0 writes no back-references, so equal values
    give equal bytes), or None when the view is None or something in it has no bytes in marshal
    (a YAML date): such a spec is not shared."""
    view = shared_view(raw)
    if view is None:
        return None
    affinity = view.pop("affinity", None)
    try:
        return marshal.dumps(view, 0), marshal.dumps(affinity, 0)
    except ValueError:
        return None  # a value JSON has not (YAML's unquoted dates): read this pod in full


def _model_keys(model: type[BaseModel]) -> frozenset[str]:
    """The keys a model reads from its input: each field's alias and, since models are
    populated by name too, its name."""
    return frozenset(key for name, info in model.model_fields.items() for key in (name, info.alias or name))


_SPEC_KEYS = _model_keys(PodSpec)
_CONTAINER_KEYS = _model_keys(Container)


def shared_view(raw: dict) -> Optional[dict]:
    """Raw pod ``spec`` as ``PodSpec`` reads it, less its node name: the spec's fields, each
    container's, and the volumes it keeps (``models.objects.unread_volume``). Two specs with
    equal views validate alike and to equal models, but for the node name: the rest (environment,
    mounts, probes, the service account token's randomly named volume that every pod of a real
    cluster has, ...) is never read, and a problem in it is never reported. The parsers share one
    parsed spec among pods whose views are equal (here for files, ``adapters/live/convert.py``
    for the watch). None when the pod is to be read in full: a ``nodeName`` that is not a string
    or null (the full validation names it), or a node name under the model's Python name, which
    the sharing would not carry over."""
    node_name = raw.get("nodeName")
    if (node_name is not None and type(node_name) is not str) or "node_name" in raw:
        return None
    view = {key: value for key, value in raw.items() if key in _SPEC_KEYS and key != "nodeName"}
    for key in ("containers", "initContainers", "init_containers"):
        containers = view.get(key)
        if type(containers) is list:
            view[key] = [{k: v for k, v in c.items() if k in _CONTAINER_KEYS} if type(c) is dict else c
                         for c in containers]
    volumes = view.get("volumes")
    if type(volumes) is list and any(map(unread_volume, volumes)):
        view["volumes"] = [v for v in volumes if not unread_volume(v)]
    return view


def _validate_model(model: type[BaseModel], data: Any, obj: Union[str, Callable[[], str]]) -> Any:
    """``model`` read from ``data``, or an InputError naming ``obj`` (or what ``obj()`` gives:
    the name is worked out only when there is a problem to name)."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise _input_error(exc, data, _name(obj)) from None
    except RecursionError:
        raise InputError(_name(obj), "", "nested too deeply") from None
    except InputError:
        raise
    except Exception as exc:  # a validator tripped over a value of an unexpected type
        raise InputError(_name(obj), "", f"cannot be read ({type(exc).__name__}: {exc})") from None


def _name(obj: Union[str, Callable[[], str]]) -> str:
    return obj if isinstance(obj, str) else obj()


# --------------------------------------------------------------------------- pydantic errors


_SIMPLE_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def _input_error(exc: ValidationError, data: Any, obj: str) -> InputError:
    """The first problem of a ValidationError, as ``InputError(obj, json.path, problem)``."""
    error = exc.errors(include_url=False)[0]
    path = _json_path(error["loc"], data, error["type"])
    return InputError(obj, path, _problem(error))


def _json_path(loc: tuple, data: Any, error_type: str) -> str:
    """``('spec', 'containers', 0, 'name')`` → ``spec.containers[0].name``.

    Steps pydantic adds that are not in the input (union member names such as ``int``,
    validator tags) are dropped by walking the input alongside the location.
    """
    out = ""
    node = data
    last = len(loc) - 1
    for i, step in enumerate(loc):
        if isinstance(node, dict) and step in node:
            node = node[step]
        elif isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node):
            node = node[step]
        elif step == "[key]":
            continue  # the error is about the key itself, which the path already ends in
        elif not (i == last and error_type == "missing"):
            continue
        if isinstance(step, int):
            out += f"[{step}]"
        elif _SIMPLE_KEY.match(str(step)):
            out += f".{step}" if out else str(step)
        else:
            out += f"[{json.dumps(str(step))}]"
    return out


_PREFIXES = ("Value error, ", "Assertion failed, ")


def _problem(error: ErrorDetails) -> str:
    kind = error["type"]
    value = error.get("input")
    ctx = error.get("ctx") or {}
    shown = _describe(value)
    if kind == "missing":
        return "required field is missing"
    if kind in ("value_error", "assertion_error"):
        msg = error["msg"]
        for prefix in _PREFIXES:
            if msg.startswith(prefix):
                return msg[len(prefix):]
        return msg
    if kind == "literal_error":
        expected = ctx.get("expected", "")
        if isinstance(value, (int, float)) and not isinstance(value, bool) and f"'{value}'" in expected:
            # YAML read `1.34` as a number; the allowed value is the string.
            return f"{value} was read as a number; quote it (\"{value}\"): expected {expected}"
        return f"unknown value {shown}, expected {expected}".rstrip(", ")
    if kind.startswith("int_"):
        return f"{shown} is not an integer"
    if kind.startswith("bool_"):
        return f"{shown} is not a boolean"
    if kind.startswith("float_"):
        return f"{shown} is not a number"
    if kind.startswith("string_type"):
        return f"{shown} is not a string"
    if kind.startswith(("datetime_", "date_")):
        return f"{shown} is not a timestamp"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return f"expected a mapping, got {shown}"
    if kind in ("list_type", "tuple_type"):
        return f"expected a list, got {shown}"
    if kind in ("too_short", "string_too_short"):
        minimum = ctx.get("min_length")
        return "must not be empty" if minimum == 1 else f"needs at least {minimum} items"
    if kind == "too_long":
        return f"takes at most {ctx.get('max_length')} items"
    if kind == "greater_than_equal":
        return f"{shown} is below the minimum {_number(ctx.get('ge'))}"
    if kind == "greater_than":
        return f"{shown} must be greater than {_number(ctx.get('gt'))}"
    if kind == "less_than_equal":
        return f"{shown} is above the maximum {_number(ctx.get('le'))}"
    if kind == "less_than":
        return f"{shown} must be less than {_number(ctx.get('lt'))}"
    if kind == "extra_forbidden":
        return "unknown key"
    return f"{error['msg']} (got {shown})"


def _number(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _describe(value: Any) -> str:
    """A short rendering of an input value, never recursing into containers."""
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    if value is None or isinstance(value, (bool, int, float, str)):
        text = json.dumps(value, ensure_ascii=False)
        return text if len(text) <= 80 else text[:77] + "..."
    return type(value).__name__

"""``PodInfo`` and ``NodeInfo``: what the solver knows about one pod or node, computed once.

Everything a filter or score needs from a pod (effective requests, ports, resolved affinity and
spread terms, tolerations, priority, group) is derived here a single time per pod, so the hot
paths never re-walk pydantic objects. ``PodInfo.class_key`` is the pod's scheduling signature:
pods with equal keys are interchangeable for every rule and share the solver's count variables.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime, timezone
from typing import Any, Optional, TypeVar

from models.objects import Node, NodeSelector, NodeSelectorTerm, Pod, PodSpec, Taint, Toleration
from models.resources import pod_host_ports, pod_nonzero_requests, pod_requests
from models.snapshot import pod_group_key
from models.storage import pod_claims

from .terms import AffinityTerm, SpreadConstraint, labels_read

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def normalize_image(name: str) -> str:
    """Pod-side image name as ImageLocality compares it: ``:latest`` added when no tag is given."""
    if ":" not in name.rsplit("/", 1)[-1] and "@" not in name:
        return name + ":latest"
    return name


@dataclass(frozen=True, slots=True)
class _SpecDerived:
    """What a PodInfo derives from the pod's spec alone (read-only, shared between pods)."""

    requests: dict[str, int]
    nonzero_cpu: int
    nonzero_mem: int
    score_cpu: int
    score_mem: int
    host_ports: tuple[tuple[str, str, int], ...]
    node_selector: dict[str, str]
    preferred_node_terms: tuple[tuple[int, NodeSelectorTerm], ...]
    tolerations: tuple[Toleration, ...]
    images: tuple[str, ...]
    containers: int
    # The pod's affinity and tolerations as the scheduling signature compares them (JSON text):
    # serialising them is most of a signature's cost, and replicas share them.
    spec_text: "_SpecText"


class _SpecText:
    """A spec's affinity and tolerations as JSON text, made when a scheduling signature first
    asks (window pods only: made for every running pod too, it cost more than it saved where
    pods do not share their spec's parts) and kept for the replicas sharing the spec."""

    __slots__ = ("_affinity", "_tolerations", "_text")

    def __init__(self, affinity: Any, tolerations: Iterable[Toleration]) -> None:
        self._affinity = affinity
        self._tolerations = tuple(tolerations)
        self._text: Optional[tuple[str, tuple[str, ...]]] = None

    def text(self) -> tuple[str, tuple[str, ...]]:
        """(affinity, each toleration), as JSON text. Two threads asking at once both make it:
        the same text either way."""
        if self._text is None:
            self._text = (self._affinity.model_dump_json() if self._affinity else "",
                          tuple(t.model_dump_json() for t in self._tolerations))
        return self._text


# The replicas of a workload share their spec's parts (``adapters.snapshot_io`` reads one spec
# per workload; a pod on another node is a copy that differs in nodeName alone), so what is
# derived from those parts is worked out once per workload, not once per pod: by the identity
# of every spec field but nodeName. Each entry holds the field values, so an id in a key cannot
# be reused while the entry lives. Started over past SPEC_DERIVED_KEPT entries.
SPEC_DERIVED_KEPT = 8192
_SPEC_FIELDS = tuple(name for name in PodSpec.model_fields if name != "node_name")
_spec_values = operator.itemgetter(*_SPEC_FIELDS)  # a spec's __dict__ -> those fields' values


class SpecMemo:
    """What ``PodInfo.of`` derived from each spec seen, kept by its caller (``SolverMemory``).
    Safe to share between threads: an entry never changes once made, and a lookup that misses
    while another thread starts over only works the value out again."""

    def __init__(self) -> None:
        self._entries: dict[tuple, tuple[tuple, _SpecDerived]] = {}
        # What a PodInfo takes from its spec, namespace and labels together (``_Shape``), by
        # (namespace, labels, namespace labels, spec values): the running replicas of a workload have
        # one shape, so 150,000 running pods resolve their terms a few thousand times. Each entry
        # holds the objects whose ids are in its key.
        self._shapes: dict[tuple, tuple[tuple, _Shape]] = {}
        # ``infos``' last window: by id(pod), the pod, ``sidecar_ports`` and its PodInfo's
        # values as ``PodInfo.of`` made them (before a context marked the PodInfo).
        self._window: dict[int, tuple[Pod, bool, tuple]] = {}

    def infos(self, pods: Iterable[Pod], ns_labels: Mapping[str, dict[str, str]], sidecar_ports: bool) -> list["PodInfo"]:
        """``PodInfo.of`` for each of ``pods`` (a window), with its namespace's labels. A decision
        builds a context for its window and its validator another for the same pods of the same
        snapshot: a pod the last call was asked for too (the very object) gets a PodInfo of the
        values worked out then, a fresh object each time (a context marks its own: class,
        signature). Only the last call's pods are kept."""
        last = self._window
        kept: dict[int, tuple[Pod, bool, tuple]] = {}
        out: list[PodInfo] = []
        for pod in pods:
            labels = ns_labels.get(pod.metadata.namespace, {})
            hit = last.get(id(pod))
            if hit is not None and hit[0] is pod and hit[1] == sidecar_ports and hit[2][_NS_LABELS] == labels:
                values = hit[2]
                info = PodInfo(*values)
                info.ns_labels = labels
            else:
                info = PodInfo.of(pod, labels, sidecar_ports=sidecar_ports, specs=self)
                values = _init_values(info)
            kept[id(pod)] = (pod, sidecar_ports, values)
            out.append(info)
        self._window = kept
        return out

    def shape(self, pod: Pod, ns_labels: dict[str, str], sidecar_ports: bool) -> "_Shape":
        # Keyed by the spec's field values themselves (as ``derived`` is), not by the derived
        # entry: a hit, nearly every pod, looks up one key instead of two.
        meta = pod.metadata
        values = _spec_values(pod.spec.__dict__)
        key = (meta.namespace, tuple(meta.labels.items()), id(ns_labels), sidecar_ports, *map(id, values))
        hit = self._shapes.get(key)
        if hit is not None:
            return hit[1]
        derived = self.derived(pod, sidecar_ports)
        shape = _shape(pod, derived)
        if len(self._shapes) >= SPEC_DERIVED_KEPT:
            self._shapes = {}
        self._shapes[key] = ((values, ns_labels), shape)
        return shape

    def derived(self, pod: Pod, sidecar_ports: bool) -> _SpecDerived:
        values = _spec_values(pod.spec.__dict__)
        key = (sidecar_ports, *map(id, values))
        hit = self._entries.get(key)
        if hit is not None:
            return hit[1]
        derived = _spec_derived(pod, sidecar_ports)
        if len(self._entries) >= SPEC_DERIVED_KEPT:
            self._entries = {}
        self._entries[key] = (values, derived)
        return derived


@dataclass(frozen=True, slots=True)
class _Shape:
    """What a PodInfo derives from its spec, namespace and labels (read-only, shared)."""

    derived: _SpecDerived
    labels: dict[str, str]
    priority: int
    preempt_never: bool
    required_node_affinity: Optional[NodeSelector]
    affinity: tuple[AffinityTerm, ...]
    anti_affinity: tuple[AffinityTerm, ...]
    preferred_affinity: tuple[AffinityTerm, ...]
    preferred_anti_affinity: tuple[AffinityTerm, ...]
    spread: tuple[SpreadConstraint, ...]
    match_key: tuple


def _shape(pod: Pod, derived: _SpecDerived) -> _Shape:
    spec = pod.spec
    labels = pod.metadata.labels
    ns = pod.metadata.namespace
    aff = spec.affinity
    node_aff = aff.node_affinity if aff else None
    pod_aff = aff.pod_affinity if aff else None
    pod_anti = aff.pod_anti_affinity if aff else None

    def required(group: Any) -> tuple[AffinityTerm, ...]:
        if group is None:
            return ()
        return tuple(AffinityTerm.resolve(t, ns, labels) for t in group.required_during_scheduling_ignored_during_execution)

    def preferred(group: Any) -> tuple[AffinityTerm, ...]:
        if group is None:
            return ()
        return tuple(
            AffinityTerm.resolve(w.pod_affinity_term, ns, labels, w.weight)
            for w in group.preferred_during_scheduling_ignored_during_execution
        )

    return _Shape(
        derived=derived,
        labels=dict(labels),
        priority=spec.priority or 0,
        preempt_never=spec.preemption_policy == "Never",
        required_node_affinity=node_aff.required_during_scheduling_ignored_during_execution if node_aff else None,
        affinity=required(pod_aff),
        anti_affinity=required(pod_anti),
        preferred_affinity=preferred(pod_aff),
        preferred_anti_affinity=preferred(pod_anti),
        spread=tuple(SpreadConstraint.resolve(c, labels) for c in spec.topology_spread_constraints),
        match_key=(ns, tuple(sorted(labels.items()))),
    )


def _spec_derived(pod: Pod, sidecar_ports: bool) -> _SpecDerived:
    spec = pod.spec
    node_aff = spec.affinity.node_affinity if spec.affinity else None
    nz_cpu, nz_mem = pod_nonzero_requests(pod)
    score_cpu, score_mem = (nz_cpu, nz_mem) if spec.resources is None else pod_nonzero_requests(pod, pod_level=False)
    return _SpecDerived(
        requests=pod_requests(pod),
        nonzero_cpu=nz_cpu,
        nonzero_mem=nz_mem,
        score_cpu=score_cpu,
        score_mem=score_mem,
        host_ports=pod_host_ports(pod, include_sidecars=sidecar_ports),
        node_selector=dict(spec.node_selector),
        preferred_node_terms=tuple(
            (t.weight, t.preference)
            for t in (node_aff.preferred_during_scheduling_ignored_during_execution if node_aff else [])
        ),
        tolerations=tuple(spec.tolerations),
        images=tuple(normalize_image(c.image) for c in [*spec.init_containers, *spec.containers] if c.image),
        containers=len(spec.containers) + len(spec.init_containers),
        spec_text=_SpecText(spec.affinity, spec.tolerations),
    )


@dataclass(eq=False, slots=True)
class PodInfo:
    pod: Pod
    key: str
    namespace: str
    labels: dict[str, str]
    ns_labels: dict[str, str]
    priority: int
    preempt_never: bool
    requests: dict[str, int]
    nonzero_cpu: int  # what the pod adds to its node's non-zero sum (pod-level resources count)
    nonzero_mem: int
    # What NodeResourcesFit's score adds for the pod when it is the one scored: the non-zero
    # requests without pod-level resources (kube-scheduler's Fit scorer ignores them).
    score_cpu: int
    score_mem: int
    host_ports: tuple[tuple[str, str, int], ...]
    node_name: str
    node_selector: dict[str, str]
    required_node_affinity: Optional[NodeSelector]
    preferred_node_terms: tuple[tuple[int, NodeSelectorTerm], ...]
    tolerations: tuple[Toleration, ...]
    affinity: tuple[AffinityTerm, ...]
    anti_affinity: tuple[AffinityTerm, ...]
    preferred_affinity: tuple[AffinityTerm, ...]
    preferred_anti_affinity: tuple[AffinityTerm, ...]
    spread: tuple[SpreadConstraint, ...]
    group: Optional[str]
    images: tuple[str, ...]
    containers: int
    created: datetime
    start_time: Optional[datetime]
    terminating: bool
    # Filled by the context builder: index of the pod's equivalence class in the window.
    class_id: int = -1
    match_key: tuple = field(default=())
    # Set by the context builder (the PostFilter's ``prepare``): the nominated node where
    # victims of this pod's earlier preemption are still terminating; it may not preempt again.
    waiting_on: str = ""
    # The PersistentVolumeClaims the pod mounts, as namespace/name (``models.storage.pod_claims``).
    claims: tuple[str, ...] = ()
    # Set by the context builder (``dynamic_resources.template_signature``): what the pod's
    # ResourceClaims ask for, when every one is still to be made from a template; pods with equal
    # text ask for equal devices, each for its own claim, and may share a class.
    devices_key: str = ""
    # Set by the context builder: what the rules declare they read of the pod beyond the fields
    # below (``plugin_api.Reads.signature``, through the registry); part of the signature.
    declared: tuple = ()
    # Set by the context builder (the CompositePodGroup plugin's ``prepare``): the key of the root
    # CompositePodGroup above the pod's PodGroup ("" outside any tree).
    tree: str = ""
    # ``pod.spec.affinity`` and ``tolerations`` as JSON text, for ``scheduling_signature``
    # (worked out once per spec, ``_SpecDerived``; None: from the pod's spec when asked).
    spec_text: Optional[_SpecText] = None

    @staticmethod
    def of(pod: Pod, ns_labels: dict[str, str], *, sidecar_ports: bool = True,
           specs: Optional[SpecMemo] = None) -> "PodInfo":
        """``specs``: what earlier pods' specs gave, to share with replicas (None: worked out).
        Pods of one shape (``SpecMemo.shape``) share everything but what is their own: their
        key, node, gang, times and claims."""
        shape = (specs.shape(pod, ns_labels, sidecar_ports) if specs is not None
                 else _shape(pod, _spec_derived(pod, sidecar_ports)))
        derived = shape.derived
        spec = pod.spec
        meta = pod.metadata
        return PodInfo(
            pod=pod,
            key=pod.key,
            namespace=meta.namespace,
            labels=shape.labels,
            ns_labels=ns_labels,
            priority=shape.priority,
            preempt_never=shape.preempt_never,
            requests=derived.requests,
            nonzero_cpu=derived.nonzero_cpu,
            nonzero_mem=derived.nonzero_mem,
            score_cpu=derived.score_cpu,
            score_mem=derived.score_mem,
            host_ports=derived.host_ports,
            node_name=spec.node_name,
            node_selector=derived.node_selector,
            required_node_affinity=shape.required_node_affinity,
            preferred_node_terms=derived.preferred_node_terms,
            tolerations=derived.tolerations,
            affinity=shape.affinity,
            anti_affinity=shape.anti_affinity,
            preferred_affinity=shape.preferred_affinity,
            preferred_anti_affinity=shape.preferred_anti_affinity,
            spread=shape.spread,
            group=pod_group_key(pod),
            images=derived.images,
            containers=derived.containers,
            created=meta.creation_timestamp or _EPOCH,
            start_time=pod.status.start_time,
            terminating=pod.is_terminating,
            match_key=shape.match_key,
            claims=tuple(f"{meta.namespace}/{c}" for c in pod_claims(meta.name, spec.volumes)) if spec.volumes else (),
            spec_text=derived.spec_text,
        )

    @property
    def hard_spread(self) -> tuple[SpreadConstraint, ...]:
        return tuple(c for c in self.spread if c.hard)

    @property
    def soft_spread(self) -> tuple[SpreadConstraint, ...]:
        return tuple(c for c in self.spread if not c.hard)

    @property
    def may_preempt_others(self) -> bool:
        """Eligible to preempt (DefaultPreemption's PodEligibleToPreemptOthers): not
        ``preemptionPolicy: Never``, and not waiting for victims on its nominated node."""
        return not self.preempt_never and not self.waiting_on

    @property
    def has_required_pod_terms(self) -> bool:
        return bool(self.affinity or self.anti_affinity)

    def scheduling_signature(self, relevant_labels: frozenset[str], *, with_group: bool = True) -> tuple:
        """Everything that decides where this pod may go and what it scores.

        Labels are projected onto the keys some selector in the window can look at; names,
        uids and timestamps are left out, so replicas of one workload share a signature.
        ``with_group=False`` leaves the pod group out too: what is left is the same for members
        of different gangs that no rule tells apart (``gang.kinds``).
        """
        spec = self.pod.spec
        return (
            self.namespace,
            labels_read(self.labels, relevant_labels),
            tuple(sorted(self.requests.items())),
            (self.nonzero_cpu, self.nonzero_mem, self.score_cpu, self.score_mem),
            self.host_ports,
            self.node_name,
            tuple(sorted(self.node_selector.items())),
            *(self.spec_text or _SpecText(spec.affinity, spec.tolerations)).text(),
            self.spread,
            self.priority,
            self.preempt_never,
            self.waiting_on,
            self.group if with_group else None,
            self.images,
            self.containers,
            # A pod with ResourceClaims is a class of its own — its claims are its own devices,
            # two pods of one template make two claims, which may be allocated differently —
            # unless its claims are all still to be made from templates that count devices by
            # kind (``devices_key``): then each pod of the class takes the same number of devices
            # per request, and the model counts them per class (``dynamic_resources.encode``).
            (self.devices_key or self.key) if spec.resource_claims else None,
            self.claims,
            self.declared,
            # A running pod that is not Ready may leave its budget unspent when evicted
            # (``disruption.eviction_budgets``): repack moves such a replica apart from its
            # Ready siblings, so it is a class of its own. (A pending pod has no Ready condition.)
            self.pod.status.phase == "Running" and not self.pod.is_ready,
        )


# A PodInfo's constructor arguments in order, read off one (``SpecMemo.infos``).
_INIT_FIELDS = tuple(f.name for f in fields(PodInfo) if f.init)
_init_values = operator.attrgetter(*_INIT_FIELDS)
_NS_LABELS = _INIT_FIELDS.index("ns_labels")


@dataclass(eq=False, slots=True)
class NodeInfo:
    index: int
    name: str
    node: Node
    labels: dict[str, str]
    taints: tuple[Taint, ...]
    unschedulable: bool
    allocatable: dict[str, int]
    images: dict[str, int]  # image name -> size bytes

    @staticmethod
    def of(index: int, node: Node) -> "NodeInfo":
        images: dict[str, int] = {}
        for image in node.status.images:
            for name in image.names:
                images.setdefault(name, image.size_bytes)
        return NodeInfo(
            index=index,
            name=node.metadata.name,
            node=node,
            labels=dict(node.metadata.labels),
            taints=tuple(node.spec.taints),
            unschedulable=node.spec.unschedulable,
            allocatable=dict(node.allocatable),
            images=images,
        )

    def static_signature(self, relevant_labels: Optional[frozenset[str]], by_name: bool) -> tuple:
        """What static filters read of this node; identical signatures pass identical pods."""
        labels = self.labels if relevant_labels is None else {k: v for k, v in self.labels.items() if k in relevant_labels}
        return (
            self.name if by_name else "",
            tuple(sorted(labels.items())),
            tuple((t.key, t.value, t.effect) for t in self.taints),
            self.unschedulable,
        )


T = TypeVar("T")
# Past this many kinds of value a list's derived values start over (each label-key set a window
# reads makes its own grouping of the nodes).
NODE_DERIVED_KEPT = 256


class NodeList(list[NodeInfo]):
    """A list of nodes that carries what is derived from it alone (their order, static-filter
    groups and verdicts, the scoring index): contexts built one window after another from
    snapshots with the same nodes share one ``NodeList`` (``solver/context.py``, kept in the
    caller's ``SolverMemory``), so while the nodes stay the same none of it is worked out again.
    Greedy's thread and the solve read it at once: a lock guards the making."""

    def __init__(self, nodes: Iterable[NodeInfo] = ()) -> None:
        super().__init__(nodes)
        self.derived: dict[Hashable, Any] = {}
        self.lock = threading.RLock()  # a value may be made of other values of the list


def node_derived(nodes: list[NodeInfo], what: Hashable, make: Callable[[], T]) -> T:
    """``make()`` for ``nodes``, or what it gave before for this very list when it is a
    ``NodeList`` (a plain list keeps nothing). The value is shared: read-only to every caller."""
    if not isinstance(nodes, NodeList):
        return make()
    with nodes.lock:
        values = nodes.derived
        if what not in values:
            if len(values) >= NODE_DERIVED_KEPT:
                values.clear()
            values[what] = make()
        return values[what]  # type: ignore[no-any-return]


def queue_order_key(pod: PodInfo) -> tuple:
    """kube-scheduler's queue order (PrioritySort): higher priority first, then earlier creation
    (queue timestamp), then name."""
    return (-pod.priority, pod.created, pod.key)

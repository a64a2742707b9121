"""Pydantic models of the Kubernetes objects the scheduler reads.

They parse the API's own camelCase JSON exactly as ``kubectl get -o json`` prints it, ignore
fields the scheduler has no use for, and reject what the API server itself would reject
(unknown operators, unknown taint effects, malformed quantities) so that a bad object fails
loudly with its field named instead of being scheduled wrongly.

Quantities are converted once, here, into kube-scheduler's integer units (see ``quantity``).
Every model is frozen: the solver gets immutable data.
"""

from __future__ import annotations

import sys
import threading
from datetime import datetime
from typing import Annotated, Any, Literal, Optional, Protocol, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from .errors import clipped
from .labels import check_values_fit_operator, requirement_matches, selector_matches
from .quantity import QuantityError, parse_quantity, to_units


class K8sModel(BaseModel):
    """Base of every API object model: camelCase aliases, unknown fields ignored, immutable."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True
    )


class _FieldSetPool:
    """Field-name sets shared by models that set the same fields (``compact``), and the set each
    model type was last given (a run of pods sets the same fields, and comparing with it is
    cheaper than making the frozenset key: five per pod).

    Shared by every reader in the process (the file parsers, the live watch's threads), so it is
    bounded and its writes are locked. Reads take no lock: a ``dict.get`` sees either the old or
    the new entry, and both are right, since the pool only saves memory — two equal sets that are
    not one object read alike (pydantic copies the set before changing it, in ``model_copy``).
    Past ``MAX_SETS`` distinct sets (no real input comes near: a few hundred model shapes) the
    pool starts again; sets handed out stay valid."""

    MAX_SETS = 65_536
    MAX_TYPES = 1_024

    def __init__(self) -> None:
        self._sets: dict[frozenset[str], set[str]] = {}
        self._last: dict[type, set[str]] = {}
        self._lock = threading.Lock()

    def shared(self, names: frozenset[str]) -> set[str]:
        same = self._sets.get(names)
        if same is not None:
            return same
        with self._lock:
            if len(self._sets) >= self.MAX_SETS:
                self._sets.clear()
            return self._sets.setdefault(names, set(names))

    def last(self, kind: type) -> Optional[set[str]]:
        return self._last.get(kind)

    def remember(self, kind: type, same: set[str]) -> None:
        with self._lock:
            if len(self._last) >= self.MAX_TYPES and kind not in self._last:
                self._last.clear()
            self._last[kind] = same

    def __len__(self) -> int:
        return len(self._sets)


_FIELD_SETS = _FieldSetPool()


def compact(model: BaseModel, shared: Optional[dict] = None) -> BaseModel:
    """Shrink a freshly read object in place, for snapshots of tens of thousands of pods.

    Pydantic gives every model instance its own set of the field names the input set (a couple
    of hundred bytes each, a dozen models per pod); equal sets are shared here (pydantic copies
    the set before changing it, in ``model_copy``). Label and annotation keys and values, which
    repeat across pods, are interned. With ``shared`` (one dict per snapshot read), equal leaf
    objects in lists (the default tolerations, owner references, ports) become one instance.
    Nothing a reader sees changes: every model is frozen."""
    pending: list[Any] = [model]
    while pending:
        obj = pending.pop()
        if isinstance(obj, BaseModel):
            names = obj.__pydantic_fields_set__
            object.__setattr__(obj, "__pydantic_fields_set__", _FIELD_SETS.shared(frozenset(names)))
            fields = obj.__dict__
            for name, value in fields.items():
                if isinstance(value, dict):
                    if value and all(type(k) is str and type(v) is str for k, v in value.items()):
                        fields[name] = {sys.intern(k): sys.intern(v) for k, v in value.items()}
                    else:
                        pending.extend(value.values())
                elif isinstance(value, list):
                    if shared is not None:
                        _share_items(value, shared)
                    pending.append(value)
                elif isinstance(value, (BaseModel, tuple)):
                    pending.append(value)
        elif isinstance(obj, (list, tuple)):
            pending.extend(item for item in obj if isinstance(item, (BaseModel, list, tuple)))
    return model


def _share_fields_set(obj: BaseModel) -> None:
    names = obj.__pydantic_fields_set__
    last = _FIELD_SETS.last(type(obj))
    if last is not None and (last is names or last == names):
        object.__setattr__(obj, "__pydantic_fields_set__", last)
        return
    same = _FIELD_SETS.shared(frozenset(names))
    object.__setattr__(obj, "__pydantic_fields_set__", same)
    _FIELD_SETS.remember(type(obj), same)


_M = TypeVar("_M", bound=BaseModel)


def copy_with(model: _M, update: dict[str, Any]) -> _M:
    """``model.model_copy(update=update)`` for a frozen model of ``extra="ignore"`` and no
    private attributes, its set of field names shared (``compact``): the reader's copy of a
    shared pod spec with each pod's node, once per running pod."""
    copied = object.__new__(type(model))
    fields = dict(model.__dict__)
    fields.update(update)
    object.__setattr__(copied, "__dict__", fields)
    object.__setattr__(copied, "__pydantic_extra__", None)
    names = frozenset(model.__pydantic_fields_set__).union(update)
    object.__setattr__(copied, "__pydantic_fields_set__", _FIELD_SETS.shared(names))
    object.__setattr__(copied, "__pydantic_private__", None)
    return copied


def compact_pod(pod: "Pod", shared: Optional[dict]) -> "Pod":
    """``compact(pod, shared, shallow=pod.spec)`` written out for a pod whose spec is shared
    already: the reader's path for every replica after the first, tens of thousands per dump,
    and the watch's for every pod whose spec was seen before. What it leaves out of the general
    walk is only what ObjectMeta and PodStatus do not have."""
    _share_fields_set(pod)
    _share_fields_set(pod.spec)
    meta = pod.metadata
    _share_fields_set(meta)
    fields = meta.__dict__
    for name in ("labels", "annotations"):
        value = fields[name]
        if value:
            fields[name] = {sys.intern(k): sys.intern(v) for k, v in value.items()}
    owners = meta.owner_references
    if owners:
        if shared is not None:
            _share_items(owners, shared)
        for owner in owners:
            _share_fields_set(owner)
    _share_fields_set(pod.status)
    return pod


def _share_items(items: list, shared: dict) -> None:
    """Replace each hashable model in ``items`` by the first equal one seen (frozen models with
    only scalar fields hash; the rest raise TypeError and are kept)."""
    for i, item in enumerate(items):
        if not isinstance(item, BaseModel):
            continue
        try:  # by the field values, as the model's own equality compares (a tuple hashes in C)
            items[i] = shared.setdefault((type(item), *item.__dict__.values()), item)
        except TypeError:
            continue


def _quantity_value(raw: Any) -> Any:
    """One quantity of a ResourceList, exact; negative amounts are refused."""
    try:
        value = parse_quantity(raw)
    except QuantityError as exc:
        raise ValueError(str(exc)) from None
    if value < 0:
        raise ValueError(f'"{clipped(str(raw))}" must be non-negative')
    return value


def _to_units(value: dict[str, Any]) -> dict[str, int]:
    out = {}
    for name, qty in value.items():
        try:
            out[name] = to_units(name, qty)
        except QuantityError as exc:
            raise ValueError(f"{name}: {exc}") from None
    return out


def _null_map(value: Any) -> Any:
    return {} if value is None else value


# A ResourceList (``{cpu: "100m", memory: 1Gi}``) as integer units per resource. Each value is
# validated on its own so an error's location ends in the resource name.
ResourceList = Annotated[
    dict[Annotated[str, Field(min_length=1)], Annotated[Any, BeforeValidator(_quantity_value)]],
    BeforeValidator(_null_map),
    AfterValidator(_to_units),
]
LabelMap = Annotated[dict[str, str], BeforeValidator(lambda v: {} if v is None else v)]


def _none_to_list(value: Any) -> Any:
    return [] if value is None else value


_Item = TypeVar("_Item")

# A list field where the API's ``null`` means empty: ``ListOf[Foo]`` is
# ``Annotated[list[Foo], BeforeValidator(_none_to_list)]`` (a generic alias, so type checkers read it too).
ListOf = Annotated[list[_Item], BeforeValidator(_none_to_list)]


# --------------------------------------------------------------------------- metadata


class OwnerReference(K8sModel):
    api_version: str = ""
    kind: str
    name: str
    uid: str = ""
    controller: Optional[StrictBool] = None


class ObjectMeta(K8sModel):
    name: str = Field(min_length=1)
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    # Factories, not ``{}``: pydantic deep-copies a mutable default for every object that lacks it.
    labels: LabelMap = Field(default_factory=dict)
    annotations: LabelMap = Field(default_factory=dict)
    owner_references: ListOf[OwnerReference] = Field(default_factory=list)
    creation_timestamp: Optional[datetime] = None
    deletion_timestamp: Optional[datetime] = None


class ClusterObject(K8sModel):
    """An object without a namespace (a Node, a PersistentVolume, a DeviceClass, ...), named by
    ``metadata.name`` alone."""

    metadata: ObjectMeta

    @property
    def name(self) -> str:
        return self.metadata.name


class NamespacedObject(K8sModel):
    """An object that lives in a namespace: ``default`` when the manifest leaves it out (as
    kubectl does), and named ``namespace/name`` everywhere the scheduler reports it."""

    metadata: ObjectMeta

    @model_validator(mode="after")
    def _default_namespace(self):
        if not self.metadata.namespace:
            object.__setattr__(self, "metadata", self.metadata.model_copy(update={"namespace": "default"}))
        return self

    @property
    def key(self) -> str:
        """``namespace/name``: how plans and messages name the object."""
        return f"{self.metadata.namespace}/{self.metadata.name}"


# --------------------------------------------------------------------------- selectors

LabelOperator = Literal["In", "NotIn", "Exists", "DoesNotExist"]


class LabelSelectorRequirement(K8sModel):
    key: str = Field(min_length=1)
    operator: LabelOperator
    values: ListOf[str] = []

    @model_validator(mode="after")
    def _values_fit_operator(self) -> "LabelSelectorRequirement":
        check_values_fit_operator(self.operator, self.values)
        return self


class LabelSelector(K8sModel):
    """metav1.LabelSelector. ``{}`` selects everything; a missing selector is ``None``."""

    match_labels: LabelMap = {}
    match_expressions: ListOf[LabelSelectorRequirement] = []

    def matches(self, labels: dict[str, str]) -> bool:
        requirements = ((r.key, r.operator, r.values) for r in self.match_expressions)
        return selector_matches(self.match_labels.items(), requirements, labels)

    def is_empty(self) -> bool:
        return not self.match_labels and not self.match_expressions


NodeOperator = Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]


class NodeSelectorRequirement(K8sModel):
    key: str = Field(min_length=1)
    operator: NodeOperator
    values: ListOf[str] = []

    @model_validator(mode="after")
    def _values_fit_operator(self) -> "NodeSelectorRequirement":
        check_values_fit_operator(self.operator, self.values)
        return self

    def matches(self, labels: dict[str, str]) -> bool:
        return requirement_matches(labels, self.key, self.operator, self.values)


class NodeSelectorFieldRequirement(K8sModel):
    key: Literal["metadata.name"]
    operator: Literal["In", "NotIn"]
    values: list[str] = Field(min_length=1, max_length=1)


class NodeSelectorTerm(K8sModel):
    match_expressions: ListOf[NodeSelectorRequirement] = []
    match_fields: ListOf[NodeSelectorFieldRequirement] = []

    def is_empty(self) -> bool:
        return not self.match_expressions and not self.match_fields

    def matches(self, node_name: str, labels: dict[str, str]) -> bool:
        """A term with neither expressions nor fields matches nothing (kube-scheduler skips it)."""
        if self.is_empty():
            return False
        for req in self.match_expressions:
            if not req.matches(labels):
                return False
        for field in self.match_fields:
            inside = node_name in field.values
            if (field.operator == "In") != inside:
                return False
        return True


class NodeSelector(K8sModel):
    node_selector_terms: ListOf[NodeSelectorTerm] = []

    def matches(self, node_name: str, labels: dict[str, str]) -> bool:
        return any(term.matches(node_name, labels) for term in self.node_selector_terms)


class PreferredSchedulingTerm(K8sModel):
    weight: StrictInt = Field(ge=1, le=100)
    preference: NodeSelectorTerm


class NodeAffinity(K8sModel):
    required_during_scheduling_ignored_during_execution: Optional[NodeSelector] = None
    preferred_during_scheduling_ignored_during_execution: ListOf[PreferredSchedulingTerm] = []


class PodAffinityTerm(K8sModel):
    label_selector: Optional[LabelSelector] = None
    namespaces: ListOf[str] = []
    namespace_selector: Optional[LabelSelector] = None
    topology_key: str = Field(min_length=1)
    match_label_keys: ListOf[str] = []
    mismatch_label_keys: ListOf[str] = []


class WeightedPodAffinityTerm(K8sModel):
    weight: StrictInt = Field(ge=1, le=100)
    pod_affinity_term: PodAffinityTerm


class PodAffinity(K8sModel):
    required_during_scheduling_ignored_during_execution: ListOf[PodAffinityTerm] = []
    preferred_during_scheduling_ignored_during_execution: ListOf[WeightedPodAffinityTerm] = []


class Affinity(K8sModel):
    node_affinity: Optional[NodeAffinity] = None
    pod_affinity: Optional[PodAffinity] = None
    pod_anti_affinity: Optional[PodAffinity] = None


# --------------------------------------------------------------------------- taints

TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class Taint(K8sModel):
    key: str = Field(min_length=1)
    value: str = ""
    effect: TaintEffect


class _TaintLike(Protocol):
    @property
    def key(self) -> str: ...

    @property
    def value(self) -> str: ...

    @property
    def effect(self) -> str: ...


class _TolerationLike(_TaintLike, Protocol):
    """A taint's key, value and effect, and how the value is compared."""

    @property
    def operator(self) -> str: ...


def toleration_matches(toleration: _TolerationLike, taint: _TaintLike) -> bool:
    """Whether a toleration tolerates a taint, one rule for node taints and DRA device taints: an
    empty effect or key matches any, ``Exists`` any value, else the values are equal."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator == "Exists":
        return True
    return toleration.value == taint.value


class Toleration(K8sModel):
    key: str = ""
    operator: Literal["Exists", "Equal", ""] = ""
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute", ""] = ""
    toleration_seconds: Optional[int] = None

    def tolerates(self, taint: Taint) -> bool:
        return toleration_matches(self, taint)


# --------------------------------------------------------------------------- pods


class TopologySpreadConstraint(K8sModel):
    # int32 in the API; a larger skew reached CP-SAT's constraint builder (an internal error).
    max_skew: StrictInt = Field(ge=1, le=2**31 - 1)
    topology_key: str = Field(min_length=1)
    when_unsatisfiable: Literal["DoNotSchedule", "ScheduleAnyway"]
    label_selector: Optional[LabelSelector] = None
    min_domains: Optional[StrictInt] = Field(default=None, ge=1, le=2**31 - 1)
    node_affinity_policy: Literal["Honor", "Ignore"] = "Honor"
    node_taints_policy: Literal["Honor", "Ignore"] = "Ignore"
    match_label_keys: ListOf[str] = []

    @field_validator("node_affinity_policy", mode="before")
    @classmethod
    def _default_affinity_policy(cls, v: Any) -> Any:
        return "Honor" if v is None else v

    @field_validator("node_taints_policy", mode="before")
    @classmethod
    def _default_taints_policy(cls, v: Any) -> Any:
        return "Ignore" if v is None else v


class ContainerPort(K8sModel):
    container_port: StrictInt = Field(ge=1, le=65535)
    host_port: StrictInt = Field(default=0, ge=0, le=65535)
    host_ip: str = Field(default="", alias="hostIP")
    protocol: Literal["TCP", "UDP", "SCTP"] = "TCP"
    name: str = ""

    @field_validator("protocol", mode="before")
    @classmethod
    def _default_protocol(cls, v: Any) -> Any:
        return "TCP" if v in (None, "") else v


class ResourceClaimRef(K8sModel):
    """``containers[].resources.claims[]``: a container uses one of the pod's claims (or one
    request of it)."""

    name: str = Field(min_length=1)
    request: str = ""


class ResourceRequirements(K8sModel):
    requests: ResourceList = {}
    limits: ResourceList = {}
    claims: ListOf[ResourceClaimRef] = []

    @model_validator(mode="after")
    def _default_requests_from_limits(self) -> "ResourceRequirements":
        # The API server defaults a missing request to its limit; raw manifests rely on that.
        missing = {k: v for k, v in self.limits.items() if k not in self.requests}
        if missing:
            object.__setattr__(self, "requests", {**self.requests, **missing})
        return self


class Container(K8sModel):
    name: str = Field(min_length=1)
    image: str = ""
    resources: ResourceRequirements = ResourceRequirements()
    ports: ListOf[ContainerPort] = []
    restart_policy: Optional[Literal["Always"]] = None

    @field_validator("resources", mode="before")
    @classmethod
    def _null_resources(cls, v: Any) -> Any:
        return {} if v is None else v


class PodResources(K8sModel):
    requests: ResourceList = {}
    limits: ResourceList = {}


class PodSchedulingGate(K8sModel):
    name: str


class PodSchedulingGroup(K8sModel):
    pod_group_name: str = Field(min_length=1)


class WorkloadReference(K8sModel):
    name: str = Field(min_length=1)
    pod_group: str = Field(min_length=1)
    pod_group_replica_key: str = ""


class PodResourceClaim(K8sModel):
    """``spec.resourceClaims[]``: a claim the pod uses, by name or made from a template (DRA,
    ``models.dra``)."""

    name: str = Field(min_length=1)
    resource_claim_name: Optional[str] = None
    resource_claim_template_name: Optional[str] = None

    @model_validator(mode="after")
    def _one_source(self) -> "PodResourceClaim":
        if bool(self.resource_claim_name) == bool(self.resource_claim_template_name):
            raise ValueError("exactly one of resourceClaimName, resourceClaimTemplateName must be set")
        return self


class PodResourceClaimStatus(K8sModel):
    """``status.resourceClaimStatuses[]``: the claim made for a pod's template entry (no name:
    the pod needs no claim for it)."""

    name: str = Field(min_length=1)
    resource_claim_name: Optional[str] = None


class PodSpec(K8sModel):
    node_name: str = ""
    scheduler_name: str = "default-scheduler"
    # int32 in the API: a larger value is no pod the API server could hold (and overflowed the
    # solver's priority arrays: an internal error instead of exit 2).
    priority: Optional[StrictInt] = Field(default=None, ge=-(2**31), le=2**31 - 1)
    priority_class_name: str = ""
    preemption_policy: Optional[Literal["PreemptLowerPriority", "Never"]] = None
    node_selector: LabelMap = {}
    affinity: Optional[Affinity] = None
    tolerations: ListOf[Toleration] = []
    topology_spread_constraints: ListOf[TopologySpreadConstraint] = []
    containers: list[Container] = Field(min_length=1)
    init_containers: ListOf[Container] = []
    overhead: ResourceList = {}
    resources: Optional[PodResources] = None
    volumes: ListOf[dict[str, Any]] = []
    scheduling_gates: ListOf[PodSchedulingGate] = []
    host_network: StrictBool = False
    resource_claims: ListOf[PodResourceClaim] = []
    # Gang membership in Kubernetes' own APIs (``models.workloads``).
    scheduling_group: Optional[PodSchedulingGroup] = None  # 1.36: scheduling.k8s.io/v1alpha2 PodGroup
    workload_ref: Optional[WorkloadReference] = None  # 1.35: scheduling.k8s.io/v1alpha1 Workload

    @field_validator("node_name", "priority_class_name", "scheduler_name", mode="before")
    @classmethod
    def _null_string(cls, v: Any) -> Any:
        return "" if v is None else v

    @model_validator(mode="after")
    def _claims_named(self) -> "PodSpec":
        """A container may use only the claims the pod lists (as the API server checks)."""
        if not self.resource_claims and not any(c.resources.claims for c in (*self.containers, *self.init_containers)):
            return self
        names = [c.name for c in self.resource_claims]
        if len(set(names)) != len(names):
            raise ValueError("resourceClaims: names must be unique")
        for c in (*self.containers, *self.init_containers):
            for ref in c.resources.claims:
                if ref.name not in names:
                    raise ValueError(f'container "{c.name}": resources.claims names "{ref.name}", '
                                     "which spec.resourceClaims does not list")
        return self
    @field_validator("volumes")
    @classmethod
    def _claims_readable(cls, volumes: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """A volume needs a name, and a ``persistentVolumeClaim`` source a ``claimName``: the
        volume plugins look claims up by them (``models.storage.pod_claims``). Once checked,
        the volumes no rule reads are left out (``unread_volume``)."""
        for i, volume in enumerate(volumes):
            if not isinstance(volume.get("name"), str) or not volume["name"]:
                raise ValueError(f"volumes[{i}].name is missing (each volume needs a name)")
            source = volume.get("persistentVolumeClaim")
            if source is not None and (not isinstance(source, dict) or not isinstance(source.get("claimName"), str)
                                       or not source["claimName"]):
                raise ValueError(f"volumes[{i}].persistentVolumeClaim.claimName is missing (the claim to mount)")
        if any(map(unread_volume, volumes)):
            return [v for v in volumes if not unread_volume(v)]
        return volumes


# Volume sources that no rule reads: configuration and credentials handed to the containers.
# Every pod of a real cluster mounts its service account's token as a ``projected`` volume named
# ``kube-api-access-<random>``; kept, that name would make each pod's spec unlike its replicas',
# and every parse and memo keyed on the spec (``adapters/reading/validation.shared_view``, the
# solver's ``SpecMemo``) would miss on every pod.
UNREAD_VOLUME_SOURCES = frozenset({"projected", "configMap", "secret", "downwardAPI"})


def unread_volume(volume: Any) -> bool:
    """A volume (a ``spec.volumes`` entry) with a name and one source, of those no rule reads."""
    if not isinstance(volume, dict) or len(volume) != 2 or not isinstance(volume.get("name"), str) \
            or not volume["name"]:
        return False
    return any(source in volume for source in UNREAD_VOLUME_SOURCES)


# The pod condition kube-scheduler sets on a victim of its preemption (status True, reason
# PREEMPTION_BY_SCHEDULER) before deleting it.
DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"
# The kubelet's readiness condition: the Eviction API lets a pod that is not Ready go without
# spending its PodDisruptionBudget where the budget says so (``solver.disruption``).
READY = "Ready"


class PodCondition(K8sModel):
    """One of ``status.conditions``: kube-scheduler reads ``DisruptionTarget`` (``True``, reason
    ``PreemptionByScheduler``) to tell a victim of its own preemption; the Eviction API reads
    ``Ready`` (its status alone)."""

    type: str = ""
    status: str = ""
    reason: str = ""

    @field_validator("type", "status", "reason", mode="before")
    @classmethod
    def _null_string(cls, v: Any) -> Any:
        return "" if v is None else v


# One instance per status of the Ready condition, shared by every pod (a dump's 100,000 pods
# would otherwise hold 100,000 equal objects): only its status is kept.
_READY_CONDITIONS = {s: PodCondition(type=READY, status=s) for s in ("True", "False", "Unknown")}


class PodExtendedResourceClaimStatus(K8sModel):
    """``status.extendedResourceClaimStatus``: the claim kube-scheduler made for a pod's
    extended resources backed by DRA (only its name is read)."""

    resource_claim_name: str = ""


class PodStatus(K8sModel):
    phase: str = ""
    nominated_node_name: str = ""
    start_time: Optional[datetime] = None
    # Factories, not ``[]``: pydantic deep-copies a list default for every pod that leaves the
    # field out (two deepcopy calls a pod in a dump).
    conditions: ListOf[PodCondition] = Field(default_factory=list)

    @field_validator("nominated_node_name", mode="before")
    @classmethod
    def _null_nomination(cls, v: Any) -> Any:
        return "" if v is None else v

    @field_validator("conditions", mode="before")
    @classmethod
    def _read_ones_only(cls, v: Any) -> Any:
        # Only DisruptionTarget and Ready (its status) are read; a dump's pods carry four or five
        # conditions each, the others kept out of memory (anything that is not a mapping is left
        # for validation to name).
        if not isinstance(v, list):
            return v
        out = []
        for c in v:
            if not isinstance(c, dict):
                out.append(c)
            elif c.get("type") == DISRUPTION_TARGET:
                out.append(c)
            elif c.get("type") == READY:
                status = c.get("status")
                out.append(_READY_CONDITIONS.get(status) if isinstance(status, str) and status in _READY_CONDITIONS
                           else {"type": READY, "status": status})
        return out
    resource_claim_statuses: ListOf[PodResourceClaimStatus] = Field(default_factory=list)
    # DRA-backed extended resources (1.34+): the claim kube-scheduler made for the pod
    extended_resource_claim_status: Optional[PodExtendedResourceClaimStatus] = None


class Pod(NamespacedObject):
    api_version: str = "v1"
    kind: Literal["Pod"] = "Pod"
    metadata: ObjectMeta
    spec: PodSpec
    status: PodStatus = PodStatus()

    @field_validator("status", mode="before")
    @classmethod
    def _null_status(cls, v: Any) -> Any:
        return {} if v is None else v


    @property
    def is_terminal(self) -> bool:
        return self.status.phase in ("Succeeded", "Failed")

    @property
    def is_terminating(self) -> bool:
        return self.metadata.deletion_timestamp is not None

    @property
    def is_ready(self) -> bool:
        """The pod's ``Ready`` condition is True, or it has none. The API reads a pod without the
        condition as not Ready; the kubelet writes it on every pod it runs, so only a
        hand-written or generated snapshot leaves it out, and there the pod reads as Ready, as
        its budget's healthy count has it (the planner then charges the budget, the stricter
        reading)."""
        for c in self.status.conditions:
            if c.type == READY:
                return c.status == "True"
        return True

    @property
    def terminating_by_preemption(self) -> bool:
        """Being deleted as a victim of a scheduler's preemption: a deletionTimestamp and the
        condition DisruptionTarget=True with reason PreemptionByScheduler (kube-scheduler's
        PodTerminatingByPreemption, 1.31 onwards)."""
        if self.metadata.deletion_timestamp is None:
            return False
        for c in self.status.conditions:
            if c.type == DISRUPTION_TARGET:
                return c.status == "True" and c.reason == PREEMPTION_BY_SCHEDULER
        return False


# --------------------------------------------------------------------------- nodes


class NodeSpec(K8sModel):
    unschedulable: StrictBool = False
    taints: ListOf[Taint] = []

    @field_validator("unschedulable", mode="before")
    @classmethod
    def _null_bool(cls, v: Any) -> Any:
        return False if v is None else v


class ContainerImage(K8sModel):
    names: ListOf[str] = []
    size_bytes: int = 0


class NodeStatus(K8sModel):
    allocatable: ResourceList = {}
    capacity: ResourceList = {}
    images: ListOf[ContainerImage] = []


class Node(ClusterObject):
    api_version: str = "v1"
    kind: Literal["Node"] = "Node"
    spec: NodeSpec = NodeSpec()
    status: NodeStatus = NodeStatus()

    @field_validator("spec", "status", mode="before")
    @classmethod
    def _null_section(cls, v: Any) -> Any:
        return {} if v is None else v

    @property
    def allocatable(self) -> dict[str, int]:
        """``status.allocatable``; a node that reports only ``capacity`` is read from that."""
        return self.status.allocatable or self.status.capacity


# --------------------------------------------------------------------------- other kinds


class PriorityClass(K8sModel):
    api_version: str = "scheduling.k8s.io/v1"
    kind: Literal["PriorityClass"] = "PriorityClass"
    metadata: ObjectMeta
    # User classes stop at 1e9; the built-in system-node-critical class is 2e9 + 1000, and every
    # real `kubectl get priorityclasses` dump contains it.
    value: StrictInt = Field(ge=-(2**31), le=2_000_001_000)
    global_default: StrictBool = False
    preemption_policy: Optional[Literal["PreemptLowerPriority", "Never"]] = None


class PodGroupSpec(K8sModel):
    min_member: StrictInt = Field(ge=1)
    min_resources: ResourceList = {}
    schedule_timeout_seconds: Optional[StrictInt] = Field(default=None, ge=0)
    # Required topology (``models.workloads``: a ``scheduling.k8s.io/v1alpha2`` PodGroup's
    # ``spec.schedulingConstraints.topology[0].key``): every member in one domain of this node
    # label. Internal: no scheduler-plugins or Volcano field reads into it (its alias is no
    # camelCase name) and it is never written out.
    topology_key: Optional[str] = Field(default=None, alias="__topologyKey", exclude=True)
    # Kubernetes 1.37 (``models.group_api``), internal as ``topology_key`` is: the group's own
    # priority and preemption policy (None: its pods' own), what its running members are evicted
    # together with under ``disruptionMode: all`` ("PodGroup ns/name", or the widest
    # "CompositePodGroup ns/name" above it saying ``all``; None: one by one), its parent
    # CompositePodGroup's key, and the names of the device claims it owns (shared by its members).
    priority: Optional[int] = Field(default=None, alias="__priority", exclude=True)
    preemption_policy: Optional[str] = Field(default=None, alias="__preemptionPolicy", exclude=True)
    disruption_unit: Optional[str] = Field(default=None, alias="__disruptionUnit", exclude=True)
    parent: Optional[str] = Field(default=None, alias="__parent", exclude=True)
    claims: tuple[str, ...] = Field(default=(), alias="__claims", exclude=True)


# A gang's preferred topology: node label keys, widest first (``block,rack``); the solver keeps
# the gang in as few domains of each as it can (``solver.plugins.gang.preferred``).
PREFERRED_TOPOLOGY_ANNOTATION = "cpsat-scheduler.io/preferred-topology"


def preferred_topology_keys(annotations: dict[str, str]) -> tuple[str, ...]:
    """The keys of the preferred-topology annotation, widest first (none without it); a value
    with an empty key (``"block,,rack"``, ``""``) or a key twice is refused."""
    value = annotations.get(PREFERRED_TOPOLOGY_ANNOTATION)
    if value is None:
        return ()
    keys = tuple(k.strip() for k in value.split(","))
    if not all(keys):
        raise ValueError(
            f'annotations["{PREFERRED_TOPOLOGY_ANNOTATION}"]: "{value}" has an empty label key '
            "(expected node label keys separated by commas, widest first)"
        )
    if len(set(keys)) != len(keys):
        raise ValueError(f'annotations["{PREFERRED_TOPOLOGY_ANNOTATION}"]: "{value}" names a label key twice')
    return keys


def check_preferred_topology(metadata: ObjectMeta) -> ObjectMeta:
    """A group's metadata, refused (naming the field) when its preferred topology does not parse."""
    preferred_topology_keys(metadata.annotations)
    return metadata


class PodGroup(NamespacedObject):
    """scheduler-plugins coscheduling PodGroup (``scheduling.x-k8s.io/v1alpha1``)."""

    api_version: str = "scheduling.x-k8s.io/v1alpha1"
    kind: Literal["PodGroup"] = "PodGroup"
    metadata: ObjectMeta
    spec: PodGroupSpec

    _preferred = field_validator("metadata")(check_preferred_topology)




IntOrPercent = Annotated[int | str, Field(union_mode="left_to_right")]


# How the Eviction API treats a covered pod that is not Ready (policy/v1; unset reads as
# IfHealthyBudget): AlwaysAllow evicts it without looking at the budget, IfHealthyBudget only
# while the budget is healthy enough (``solver.disruption.spares_unready``).
UnhealthyPodEvictionPolicy = Literal["IfHealthyBudget", "AlwaysAllow"]


def budget_amount(v: Any) -> int | str:
    """A budget's ``minAvailable``/``maxUnavailable`` as the API server takes it: an integer
    >= 0, or ``[0-9]+%`` of at most 100% (``str.isdigit`` alone took "²%", which ``int`` then
    refused; a budget of 150% was read and forbade every eviction). Digits given as text are the
    integer; ``what-if --relax-pdb`` reads its value by the same rule."""
    if isinstance(v, int):
        if v < 0:
            raise ValueError("must be non-negative")
        return v
    text = str(v)
    number = text.removesuffix("%")
    if not (number.isascii() and number.isdigit()):
        raise ValueError(f'"{clipped(text)}" is neither an integer nor a percentage')
    digits = number.lstrip("0") or "0"  # (int() refuses past 4,300 digits)
    if number != text:
        if len(digits) > 3 or int(digits) > 100:
            raise ValueError(f'"{clipped(text)}" is above 100%')
        return text
    if len(digits) > 10 or int(digits) > 2**31 - 1:
        raise ValueError(f'"{clipped(text)}" is above {2**31 - 1}')
    return int(digits)


class PodDisruptionBudgetSpec(K8sModel):
    selector: Optional[LabelSelector] = None
    min_available: Optional[IntOrPercent] = None
    max_unavailable: Optional[IntOrPercent] = None
    unhealthy_pod_eviction_policy: Optional[UnhealthyPodEvictionPolicy] = None

    @field_validator("min_available", "max_unavailable")
    @classmethod
    def _int_or_percent(cls, v: Any) -> Any:
        return None if v is None else budget_amount(v)

    @model_validator(mode="after")
    def _one_of(self) -> "PodDisruptionBudgetSpec":
        if self.min_available is not None and self.max_unavailable is not None:
            raise ValueError("minAvailable and maxUnavailable are mutually exclusive")
        return self


class PodDisruptionBudgetStatus(K8sModel):
    disruptions_allowed: Optional[int] = None
    current_healthy: Optional[int] = None
    desired_healthy: Optional[int] = None
    expected_pods: Optional[int] = None
    disrupted_pods: LabelMap = {}

    @field_validator("disrupted_pods", mode="before")
    @classmethod
    def _stamps_as_text(cls, v: Any) -> Any:
        if v is None:
            return {}
        if not isinstance(v, dict):
            raise ValueError("must be a map of pod name to time")
        return {str(k): str(t) for k, t in v.items()}


class PodDisruptionBudget(NamespacedObject):
    api_version: str = "policy/v1"
    kind: Literal["PodDisruptionBudget"] = "PodDisruptionBudget"
    metadata: ObjectMeta
    spec: PodDisruptionBudgetSpec = PodDisruptionBudgetSpec()
    status: PodDisruptionBudgetStatus = PodDisruptionBudgetStatus()

    @field_validator("spec", "status", mode="before")
    @classmethod
    def _null_section(cls, v: Any) -> Any:
        return {} if v is None else v




class Namespace(K8sModel):
    api_version: str = "v1"
    kind: Literal["Namespace"] = "Namespace"
    metadata: ObjectMeta

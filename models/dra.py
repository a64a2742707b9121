"""Dynamic Resource Allocation objects (``resource.k8s.io/v1``, GA in Kubernetes 1.34), as
``kubectl get deviceclasses,resourceslices,resourceclaims,resourceclaimtemplates -A -o yaml``
prints them.

What allocation reads is parsed strictly: an unknown field inside a DeviceClass, ResourceSlice,
claim or template spec, or inside a claim's allocation, is refused (``extra="forbid"``) — a
field this scheduler does not know there could change which devices a claim may take (a new
constraint kind, a new allocation mode), and guessing would hand out the wrong device. Metadata
and the purely informational parts of status (``status.devices``) are read leniently like every
other object in ``models``.

Quantities in device capacity are kept exact (``Fraction``); CEL selectors are kept as text and
compiled by ``solver.plugins.dynamic_resources.cel``.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Annotated, Any, Iterable, Literal, Optional

from pydantic import BeforeValidator, ConfigDict, Field, StrictBool, StrictInt, StrictStr, model_validator
from pydantic.alias_generators import to_camel

from .errors import clipped
from .objects import (
    ClusterObject, K8sModel, LabelMap, ListOf, NamespacedObject, NodeSelector, ObjectMeta, PodResourceClaim, _quantity_value,
    toleration_matches,
)

# The annotation the resourceclaim controller puts on a claim it made from a template: the name
# of the pod's entry in ``spec.resourceClaims`` the claim is for.
POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
# Most devices one request may take, and most consumers of one claim (the API's limits).
ALLOCATION_RESULTS_MAX = 32
RESERVED_FOR_MAX = 256


class DraModel(K8sModel):
    """A part of a DRA object that allocation reads: unknown fields are refused."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )


# One quantity, exact and non-negative, read by the same rule as a ResourceList's.
Quantity = Annotated[Fraction, BeforeValidator(_quantity_value)]


# Versions whose objects have the v1 shape (v1beta2 is the same schema under its beta name).
_VERSIONS = ("resource.k8s.io/v1", "resource.k8s.io/v1beta2")


def _check_version(value: Any) -> Any:
    if value is not None and value not in _VERSIONS:
        raise ValueError(f'"{clipped(str(value))}" is not read: dump DRA objects as resource.k8s.io/v1 '
                         "(kubectl get resourceslices.v1.resource.k8s.io ...), Kubernetes 1.34+")
    return value


ApiVersion = Annotated[str, BeforeValidator(_check_version)]


# --------------------------------------------------------------------------- selectors, config


class CELDeviceSelector(DraModel):
    expression: str = Field(min_length=1)


class DeviceSelector(DraModel):
    cel: CELDeviceSelector


class OpaqueDeviceConfiguration(DraModel):
    driver: str = Field(min_length=1)
    parameters: Any = None


class DeviceClassConfiguration(DraModel):
    opaque: Optional[OpaqueDeviceConfiguration] = None


class DeviceClassSpec(DraModel):
    selectors: ListOf[DeviceSelector] = []
    config: ListOf[DeviceClassConfiguration] = []
    extended_resource_name: Optional[str] = None


class DeviceClass(ClusterObject):
    api_version: ApiVersion = "resource.k8s.io/v1"
    kind: Literal["DeviceClass"] = "DeviceClass"
    spec: DeviceClassSpec = DeviceClassSpec()


# --------------------------------------------------------------------------- slices and devices


class DeviceAttribute(DraModel):
    """Exactly one of the four value kinds."""

    int_: Optional[StrictInt] = Field(default=None, alias="int")
    bool_: Optional[StrictBool] = Field(default=None, alias="bool")
    string: Optional[StrictStr] = None
    version: Optional[StrictStr] = None

    @model_validator(mode="after")
    def _one_value(self) -> "DeviceAttribute":
        given = [v for v in (self.int_, self.bool_, self.string, self.version) if v is not None]
        if len(given) != 1:
            raise ValueError("exactly one of int, bool, string, version must be set")
        if self.version is not None and _semver(self.version) is None:
            raise ValueError(f'version "{self.version}" is not a semantic version')
        return self

    @property
    def value(self) -> Any:
        for v in (self.int_, self.bool_, self.string):
            if v is not None:
                return v
        return _semver(self.version or "")


def _semver(text: str) -> Optional[tuple]:
    """A semantic version as a comparable tuple (major, minor, patch, pre-release key), or None."""
    core, _, _build = text.partition("+")
    core, dash, pre = core.partition("-")
    parts = core.split(".")
    if len(parts) != 3 or not all(p.isdigit() and (p == "0" or not p.startswith("0")) for p in parts):
        return None
    if dash and not pre:
        return None
    pre_key: tuple = (1,) if not pre else (0, tuple((0, int(x)) if x.isdigit() else (1, x) for x in pre.split(".")))
    return ("semver", int(parts[0]), int(parts[1]), int(parts[2]), pre_key)


class CapacityRequestPolicyRange(DraModel):
    min: Quantity
    max: Optional[Quantity] = None
    step: Optional[Quantity] = None

    @model_validator(mode="after")
    def _sane(self) -> "CapacityRequestPolicyRange":
        # (what the API server refuses: a range read some other way would size shares wrongly)
        if self.step is not None and self.step <= 0:
            raise ValueError("step must be greater than zero")
        if self.max is not None and self.max < self.min:
            raise ValueError("max must not be less than min")
        return self


class CapacityRequestPolicy(DraModel):
    default: Optional[Quantity] = None
    valid_values: ListOf[Quantity] = []
    valid_range: Optional[CapacityRequestPolicyRange] = None

    @model_validator(mode="after")
    def _sane(self) -> "CapacityRequestPolicy":
        if self.valid_values and self.valid_range is not None:
            raise ValueError("at most one of validValues, validRange may be set")
        if self.valid_values:
            if any(b <= a for a, b in zip(self.valid_values, self.valid_values[1:])):
                raise ValueError("validValues must be in ascending order, without repeats")
            if len(self.valid_values) > 10:
                raise ValueError("validValues may hold at most 10 entries")
            if self.default is None or self.default not in self.valid_values:
                raise ValueError("default must be set, and be one of validValues")
        r = self.valid_range
        if r is not None and (self.default is None or self.default < r.min
                              or (r.max is not None and self.default > r.max)):
            raise ValueError("default must be set, within validRange's min and max")
        return self


class DeviceCapacity(DraModel):
    value: Quantity
    request_policy: Optional[CapacityRequestPolicy] = None

    @model_validator(mode="after")
    def _within(self) -> "DeviceCapacity":
        p = self.request_policy
        if p is None:
            return self
        r = p.valid_range
        bounds: list[tuple[str, Optional[Fraction]]] = [("requestPolicy.default", p.default)]
        if r is not None:
            bounds += [("requestPolicy.validRange.min", r.min), ("requestPolicy.validRange.max", r.max)]
        for what, q in bounds:
            if q is not None and q > self.value:
                raise ValueError(f"{what} must not be above the capacity's value")
        return self


class Counter(DraModel):
    value: Quantity


class CounterSet(DraModel):
    name: str = Field(min_length=1)
    counters: dict[str, Counter] = Field(min_length=1)


class DeviceCounterConsumption(DraModel):
    counter_set: str = Field(min_length=1)
    counters: dict[str, Counter] = Field(min_length=1)


class DeviceTaint(DraModel):
    key: str = Field(min_length=1)
    value: str = ""
    effect: Literal["NoSchedule", "NoExecute", "None"]
    time_added: Optional[str] = None


class Device(DraModel):
    name: str = Field(min_length=1)
    attributes: dict[str, DeviceAttribute] = {}
    capacity: dict[str, DeviceCapacity] = {}
    consumes_counters: ListOf[DeviceCounterConsumption] = []
    node_name: Optional[str] = None
    node_selector: Optional[NodeSelector] = None
    all_nodes: Optional[StrictBool] = None
    taints: ListOf[DeviceTaint] = []
    binds_to_node: Optional[StrictBool] = None
    binding_conditions: ListOf[str] = []
    binding_failure_conditions: ListOf[str] = []
    allow_multiple_allocations: Optional[StrictBool] = None

    @model_validator(mode="before")
    @classmethod
    def _no_basic(cls, data: Any) -> Any:
        if isinstance(data, dict) and "basic" in data:
            raise ValueError("devices[].basic is resource.k8s.io/v1beta1's shape; dump the objects as "
                             "resource.k8s.io/v1 (kubectl get resourceslices.v1.resource.k8s.io)")
        return data

    @model_validator(mode="after")
    def _policy_needs_sharing(self) -> "Device":
        if not self.allow_multiple_allocations:
            for name, cap in self.capacity.items():
                if cap.request_policy is not None:
                    raise ValueError(f"capacity {name} has a requestPolicy, which needs "
                                     "allowMultipleAllocations: true")
        return self


class ResourcePool(DraModel):
    name: str = Field(min_length=1)
    generation: StrictInt = Field(ge=0)
    resource_slice_count: StrictInt = Field(ge=1)


class ResourceSliceSpec(DraModel):
    driver: str = Field(min_length=1)
    pool: ResourcePool
    node_name: Optional[str] = None
    node_selector: Optional[NodeSelector] = None
    all_nodes: Optional[StrictBool] = None
    per_device_node_selection: Optional[StrictBool] = None
    devices: ListOf[Device] = []
    shared_counters: ListOf[CounterSet] = []

    @model_validator(mode="after")
    def _one_node_choice(self) -> "ResourceSliceSpec":
        chosen = [n for n, on in (("nodeName", bool(self.node_name)), ("nodeSelector", self.node_selector is not None),
                                  ("allNodes", bool(self.all_nodes)),
                                  ("perDeviceNodeSelection", bool(self.per_device_node_selection))) if on]
        if len(chosen) != 1 and not (not chosen and self.shared_counters and not self.devices):
            raise ValueError("exactly one of nodeName, nodeSelector, allNodes, perDeviceNodeSelection must be set"
                             + (f" (found {', '.join(chosen)})" if chosen else ""))
        if not self.per_device_node_selection:
            for i, device in enumerate(self.devices):
                if device.node_name or device.node_selector is not None or device.all_nodes:
                    raise ValueError(f"devices[{i}]: a device names its nodes only when the slice sets "
                                     "perDeviceNodeSelection")
        else:
            for i, device in enumerate(self.devices):
                n = sum((bool(device.node_name), device.node_selector is not None, bool(device.all_nodes)))
                if n != 1:
                    raise ValueError(f"devices[{i}]: with perDeviceNodeSelection each device sets exactly one "
                                     "of nodeName, nodeSelector, allNodes")
        return self


class ResourceSlice(ClusterObject):
    api_version: ApiVersion = "resource.k8s.io/v1"
    kind: Literal["ResourceSlice"] = "ResourceSlice"
    spec: ResourceSliceSpec


# --------------------------------------------------------------------------- claims


class DeviceToleration(DraModel):
    key: str = ""
    operator: Literal["Exists", "Equal"] = "Equal"
    value: str = ""
    effect: Literal["NoSchedule", "NoExecute", ""] = ""
    toleration_seconds: Optional[int] = None

    def tolerates(self, taint: DeviceTaint) -> bool:
        return toleration_matches(self, taint)


class CapacityRequirements(DraModel):
    requests: dict[str, Quantity] = {}


class ExactDeviceRequest(DraModel):
    device_class_name: str = Field(min_length=1)
    selectors: ListOf[DeviceSelector] = []
    allocation_mode: Literal["ExactCount", "All"] = "ExactCount"
    count: StrictInt = Field(default=1, ge=1)
    admin_access: Optional[StrictBool] = None
    tolerations: ListOf[DeviceToleration] = []
    capacity: Optional[CapacityRequirements] = None


class DeviceSubRequest(DraModel):
    name: str = Field(min_length=1)
    device_class_name: str = Field(min_length=1)
    selectors: ListOf[DeviceSelector] = []
    allocation_mode: Literal["ExactCount", "All"] = "ExactCount"
    count: StrictInt = Field(default=1, ge=1)
    tolerations: ListOf[DeviceToleration] = []
    capacity: Optional[CapacityRequirements] = None


class DeviceRequest(DraModel):
    name: str = Field(min_length=1)
    exactly: Optional[ExactDeviceRequest] = None
    first_available: ListOf[DeviceSubRequest] = []

    @model_validator(mode="after")
    def _one_form(self) -> "DeviceRequest":
        if (self.exactly is None) == (not self.first_available):
            raise ValueError("exactly one of exactly, firstAvailable must be set")
        return self


class DeviceConstraint(DraModel):
    requests: ListOf[str] = []
    match_attribute: Optional[str] = None
    distinct_attribute: Optional[str] = None

    @model_validator(mode="after")
    def _one_kind(self) -> "DeviceConstraint":
        if (self.match_attribute is None) == (self.distinct_attribute is None):
            raise ValueError("exactly one of matchAttribute, distinctAttribute must be set")
        return self


class DeviceClaimConfiguration(DraModel):
    requests: ListOf[str] = []
    opaque: Optional[OpaqueDeviceConfiguration] = None


class DeviceClaim(DraModel):
    requests: ListOf[DeviceRequest] = []
    constraints: ListOf[DeviceConstraint] = []
    config: ListOf[DeviceClaimConfiguration] = []

    @model_validator(mode="after")
    def _names(self) -> "DeviceClaim":
        names = [r.name for r in self.requests]
        if len(set(names)) != len(names):
            raise ValueError("request names must be unique")
        for c in self.constraints:
            for name in c.requests:
                if name.split("/")[0] not in names:
                    raise ValueError(f'constraint names request "{name}", which the claim does not have')
        return self


class ResourceClaimSpec(DraModel):
    devices: DeviceClaim = DeviceClaim()


class DeviceRequestAllocationResult(DraModel):
    request: str = Field(min_length=1)
    driver: str = Field(min_length=1)
    pool: str = Field(min_length=1)
    device: str = Field(min_length=1)
    admin_access: Optional[StrictBool] = None
    tolerations: ListOf[DeviceToleration] = []
    binding_conditions: ListOf[str] = []
    binding_failure_conditions: ListOf[str] = []
    share_id: Optional[str] = Field(default=None, alias="shareID")
    consumed_capacity: dict[str, Quantity] = {}


class DeviceAllocationConfiguration(DraModel):
    source: Literal["FromClass", "FromClaim"]
    requests: ListOf[str] = []
    opaque: Optional[OpaqueDeviceConfiguration] = None


class DeviceAllocationResult(DraModel):
    results: ListOf[DeviceRequestAllocationResult] = []
    config: ListOf[DeviceAllocationConfiguration] = []


class AllocationResult(DraModel):
    devices: DeviceAllocationResult = DeviceAllocationResult()
    node_selector: Optional[NodeSelector] = None
    allocation_timestamp: Optional[str] = None


class ResourceClaimConsumerReference(DraModel):
    api_group: str = ""
    resource: str = Field(min_length=1)
    name: str = Field(min_length=1)
    uid: str = ""


class ResourceClaimStatus(K8sModel):
    allocation: Optional[AllocationResult] = None
    reserved_for: ListOf[ResourceClaimConsumerReference] = Field(default=[], max_length=RESERVED_FOR_MAX)


class ResourceClaim(NamespacedObject):
    api_version: ApiVersion = "resource.k8s.io/v1"
    kind: Literal["ResourceClaim"] = "ResourceClaim"
    metadata: ObjectMeta
    spec: ResourceClaimSpec = ResourceClaimSpec()
    status: ResourceClaimStatus = ResourceClaimStatus()


class ResourceClaimTemplateSpec(DraModel):
    metadata: Optional[dict[str, Any]] = None
    spec: ResourceClaimSpec


class ResourceClaimTemplate(NamespacedObject):
    api_version: ApiVersion = "resource.k8s.io/v1"
    kind: Literal["ResourceClaimTemplate"] = "ResourceClaimTemplate"
    metadata: ObjectMeta
    spec: ResourceClaimTemplateSpec


# --------------------------------------------------------------------------- a pod's claims


def template_claim_name(pod_name: str, pod_claim_name: str) -> str:
    """The name the resourceclaim controller generates for a pod's claim from a template, less
    the five random characters the API server appends: ``<pod>-<claim>-``, with both parts
    cut in proportion to their lengths when together they pass 57 characters (so that the
    random suffix fits a 63-character name)."""
    base = f"{pod_name}-{pod_claim_name}-"
    limit = 57
    if len(base) > limit:
        total = len(base)
        base = f"{pod_name[: len(pod_name) * limit // total]}-{pod_claim_name[: len(pod_claim_name) * limit // total]}-"
    return base


class PodClaim(K8sModel):
    """One entry of a pod's ``spec.resourceClaims``, resolved to the claim it stands for.

    ``claim`` is None when the pod must wait for it (named claim not in the dump, template not
    in the dump) — ``waiting`` says why; ``needed`` is False when the pod's status says no claim
    is needed for a template entry. ``from_template`` marks a claim the controller has not made
    yet: the dump had the template only, and the claim is read as the template would make it."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    name: str
    key: str = ""  # namespace/name of the claim ("" when waiting or not needed)
    claim: Optional[ResourceClaim] = None
    from_template: bool = False
    needed: bool = True
    waiting: str = ""


# Extended resources backed by DRA (KEP 5004, DRAExtendedResource): a DeviceClass also answers
# to this prefix and its own name, besides its ``spec.extendedResourceName``.
IMPLICIT_EXTENDED_PREFIX = "deviceclass.resource.kubernetes.io/"
# The pod's entry (and so ``<pod>-extended-resources-`` the claim's name) for those requests.
EXTENDED_CLAIM_ENTRY = "extended-resources"
# kube-scheduler's mark on the claim it makes for them (with the pod as controlling owner); set
# here on the template made for a pending pod too, so the live scheduler (which otherwise waits
# for the resourceclaim controller's claims) knows the claim is its own to make.
EXTENDED_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"


def extended_request_name(pod_spec: Any, container: int, resource: str) -> str:
    """The request kube-scheduler names for ``resource`` of regular container ``container``:
    ``container-<i>-request-<j>``, ``i`` counted over init containers then containers, ``j`` the
    resource's place among the container's requests sorted by name."""
    c = pod_spec.containers[container]
    return (f"container-{len(pod_spec.init_containers) + container}-request-"
            f"{sorted(c.resources.requests).index(resource)}")


def extended_request_mappings(pod: Any, request_names: Iterable[str]) -> list[dict[str, str]]:
    """``status.extendedResourceClaimStatus.requestMappings`` for the claim's requests: which
    container's which resource each request serves (``pod`` as the user wrote it, its
    requests not yet taken out by ``back_extended_resources``)."""
    wanted = set(request_names)
    out = []
    for i, c in enumerate(pod.spec.containers):
        for resource in sorted(c.resources.requests):
            name = extended_request_name(pod.spec, i, resource)
            if name in wanted:
                out.append({"containerName": c.name, "resourceName": resource, "requestName": name})
    return out


@dataclass(frozen=True)
class ClaimUse:
    """One ResourceClaim of a placed pod, as DynamicResources' PreBind writes it: ``allocation``
    is what the window chose for it (the shape of ``status.allocation``), None when the snapshot
    had it allocated already (then the pod is only added to ``reservedFor``)."""

    claim: str  # namespace/name
    uid: str  # as the decision saw it ("" when unknown): a claim made again is not written
    allocation: Optional[dict[str, Any]] = None
    # A claim the scheduler makes (extended resources backed by DRA): the object to create
    # (``claim`` is then its generateName), and the pod's ``requestMappings``.
    create: Optional[dict[str, Any]] = None
    mappings: tuple[dict[str, str], ...] = ()


def extended_claim(namespace: str, pod_name: str, pod_uid: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The ResourceClaim kube-scheduler creates for a pod's extended resources backed by DRA."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"generateName": template_claim_name(pod_name, EXTENDED_CLAIM_ENTRY), "namespace": namespace,
                         "annotations": {EXTENDED_CLAIM_ANNOTATION: "true"},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod_name, "uid": pod_uid,
                                              "controller": True, "blockOwnerDeletion": True}]},
            "spec": spec}


def back_extended_resources(pods: list[Any], classes: list[DeviceClass], nodes: list[Any],
                            claims: list[ResourceClaim], *, pending: bool = True
                            ) -> tuple[list[Any], list[ResourceClaimTemplate]]:
    """Pods asking for extended resources that a DeviceClass backs, rewritten to ask for them
    through a claim: kube-scheduler 1.34+ (DRAExtendedResource) gives such a pod, on a node that
    does not advertise the resource in ``status.allocatable``, devices of the class — one claim
    it makes itself, one ExactCount request per container and resource, ``count`` the quantity.

    Read here for the whole cluster: a resource some node advertises stays a plain extended
    resource everywhere (the device-plugin path); one no node advertises is taken out of the
    containers' requests and limits and asked for through an entry ``extended-resources``. A
    pending pod's entry names a template made here, marked ``EXTENDED_CLAIM_ANNOTATION`` (its
    claim is ``<pod>-extended-resources-``, as for any template, read even where claims from
    templates are not, since the scheduler makes this one; only with ``pending``). A pod
    whose ``status.extendedResourceClaimStatus`` names a claim in the snapshot has that claim
    instead (a bound pod whose claim is not there only loses the requests: its devices are
    unknown).
    Returns the pods (unchanged ones as they were) and the templates made."""
    backed: dict[str, str] = {}
    for c in classes:
        backed[IMPLICIT_EXTENDED_PREFIX + c.name] = c.name
    for c in classes:
        if c.spec.extended_resource_name:
            backed[c.spec.extended_resource_name] = c.name
    if not backed:
        return pods, []
    for node in nodes:
        for name, amount in node.status.allocatable.items():
            if amount and name in backed:
                del backed[name]
    if not backed:
        return pods, []
    claim_keys = {c.key for c in claims}
    out: list[Any] = []
    made: list[ResourceClaimTemplate] = []
    for pod in pods:
        spec = pod.spec
        asks = [(i, name, amount) for i, c in enumerate(spec.containers)
                for name, amount in c.resources.requests.items() if name in backed and amount]
        if not asks or any(rc.name == EXTENDED_CLAIM_ENTRY for rc in spec.resource_claims):
            out.append(pod)
            continue
        containers = []
        for c in spec.containers:
            res = c.resources
            if any(name in backed for name in (*res.requests, *res.limits)):
                res = res.model_copy(update={
                    "requests": {k: v for k, v in res.requests.items() if k not in backed},
                    "limits": {k: v for k, v in res.limits.items() if k not in backed}})
                c = c.model_copy(update={"resources": res})
            containers.append(c)
        entry: Optional[PodResourceClaim] = None
        status = pod.status.extended_resource_claim_status
        name = status.resource_claim_name if status is not None else ""
        if name and f"{pod.metadata.namespace}/{name}" in claim_keys:
            # the claim made for it (a pending pod's: made by an earlier try that was not undone)
            entry = PodResourceClaim(name=EXTENDED_CLAIM_ENTRY, resource_claim_name=name)
        elif spec.node_name:
            pass
        elif pending:
            requests = sorted((DeviceRequest(name=extended_request_name(spec, i, name), exactly=ExactDeviceRequest(
                                   device_class_name=backed[name], count=int(amount)))
                               for i, name, amount in asks), key=lambda r: r.name)
            template = ResourceClaimTemplate(
                metadata=ObjectMeta(name=f"{pod.metadata.name}.{EXTENDED_CLAIM_ENTRY}", namespace=pod.metadata.namespace,
                                    annotations={EXTENDED_CLAIM_ANNOTATION: "true"}),
                spec=ResourceClaimTemplateSpec(spec=ResourceClaimSpec(devices=DeviceClaim(requests=requests))))
            made.append(template)
            entry = PodResourceClaim(name=EXTENDED_CLAIM_ENTRY, resource_claim_template_name=template.metadata.name)
        update: dict[str, Any] = {"containers": containers}
        if entry is not None:
            update["resource_claims"] = [*spec.resource_claims, entry]
        out.append(pod.model_copy(update={"spec": spec.model_copy(update=update)}))
    return out, made


def resolve_pod_claims(pod: Any, claims: dict[str, ResourceClaim],
                       templates: dict[str, ResourceClaimTemplate], *, from_templates: bool = True) -> list[PodClaim]:
    """The claims of ``pod`` (a ``models.Pod``), in ``spec.resourceClaims`` order.

    A template entry is read, in this order: (1) ``status.resourceClaimStatuses`` names the
    claim (a null name: no claim needed); (2) else a claim in the dump controlled by the pod
    (owner reference with ``controller: true`` naming it) and annotated
    ``resource.kubernetes.io/pod-claim-name: <entry>``, as the resourceclaim controller looks
    for it; (3) else the template, made into a claim named ``template_claim_name`` — the
    controller's name less its random suffix — with ``from_template`` set; without
    ``from_templates`` (the live scheduler), the pod waits for the controller to make it."""
    ns = pod.metadata.namespace
    statuses = {s.name: s for s in pod.status.resource_claim_statuses}
    out: list[PodClaim] = []
    for entry in pod.spec.resource_claims:
        if entry.resource_claim_name:
            key = f"{ns}/{entry.resource_claim_name}"
            claim = claims.get(key)
            out.append(PodClaim(name=entry.name, key=key, claim=claim,
                                waiting="" if claim else f"resourceclaim {key} does not exist"))
            continue
        status = statuses.get(entry.name)
        if status is not None:
            if not status.resource_claim_name:
                out.append(PodClaim(name=entry.name, needed=False))
                continue
            key = f"{ns}/{status.resource_claim_name}"
            claim = claims.get(key)
            out.append(PodClaim(name=entry.name, key=key, claim=claim,
                                waiting="" if claim else f"resourceclaim {key} does not exist"))
            continue
        owned = _owned_claim(pod, entry.name, claims)
        if owned is not None:
            out.append(PodClaim(name=entry.name, key=owned.key, claim=owned))
            continue
        tkey = f"{ns}/{entry.resource_claim_template_name}"
        template = templates.get(tkey)
        own = (entry.name == EXTENDED_CLAIM_ENTRY and template is not None
               and template.metadata.annotations.get(EXTENDED_CLAIM_ANNOTATION) == "true")
        if not from_templates and not own:
            out.append(PodClaim(name=entry.name, waiting=f'pod "{pod.metadata.namespace}/{pod.metadata.name}": '
                                f'ResourceClaim not created yet (entry "{entry.name}", from resourceclaimtemplate '
                                f'{tkey}; made by kube-controller-manager\'s resourceclaim controller)'))
            continue
        if template is None:
            out.append(PodClaim(name=entry.name, waiting=f"resourceclaimtemplate {tkey} does not exist"))
            continue
        name = template_claim_name(pod.metadata.name, entry.name)
        marks = {EXTENDED_CLAIM_ANNOTATION: "true"} if own else {POD_CLAIM_NAME_ANNOTATION: entry.name}
        made = ResourceClaim.model_construct(
            api_version="resource.k8s.io/v1", kind="ResourceClaim",
            metadata=ObjectMeta(name=name, namespace=ns, annotations=marks),
            spec=template.spec.spec, status=ResourceClaimStatus())
        out.append(PodClaim(name=entry.name, key=f"{ns}/{name}", claim=made, from_template=True))
    return out


def _owned_claim(pod: Any, entry: str, claims: dict[str, ResourceClaim]) -> Optional[ResourceClaim]:
    ns, uid, name = pod.metadata.namespace, pod.metadata.uid, pod.metadata.name
    for claim in claims.values():
        meta = claim.metadata
        if meta.namespace != ns or meta.annotations.get(POD_CLAIM_NAME_ANNOTATION) != entry:
            continue
        for ref in meta.owner_references:
            if ref.controller and ref.kind == "Pod" and ref.name == name and (not uid or not ref.uid or ref.uid == uid):
                return claim
    return None

"""Kubernetes 1.37's gang API, as the API server serves it: ``scheduling.k8s.io/v1beta1`` and
``v1alpha3`` (k8s.io/api v0.37.2, ``scheduling/v1beta1`` and ``scheduling/v1alpha3``).

What 1.37 adds to the 1.36 PodGroup (``models.workloads.CorePodGroup`` reads every version,
these fields included):

* ``spec.priorityClassName`` / ``spec.priority`` / ``spec.preemptionPolicy``: the group's own
  priority (the pods', when the group sets none);
* ``spec.disruptionMode``: ``{single: {}}`` (the default: members may be evicted one by one) or
  ``{all: {}}`` (only together) — a union of empty objects, not a string;
* ``spec.resourceClaims`` (at most 4): device claims the group owns, shared by its members;
* ``spec.workloadRef {workloadName, templateName}``: the Workload template it was made from;
* ``spec.parentCompositePodGroupName``: its parent ``CompositePodGroup`` (same namespace).

The 1.37 ``Workload`` (``WorkloadTemplates`` here) holds templates only: ``podGroupTemplates``
(at most 8) and ``compositePodGroupTemplates`` (a tree, at most 4 deep); pods join a PodGroup
object with ``spec.schedulingGroup.podGroupName`` as in 1.36. ``CompositePodGroup`` (v1alpha3)
is an inner node of a workload's tree: ``basic`` (no constraint) or ``gang`` (``minGroupCount``
child groups placed at once), a topology constraint and a disruption mode of its own.

How the objects become the scheduler's groups, and what is refused: ``models.group_tree``.
"""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import Field, StrictInt, model_validator

from .errors import clipped
from .objects import K8sModel, ListOf, NamespacedObject, ObjectMeta

# The highest priority a user may give (HighestUserDefinablePriority).
MAX_USER_PRIORITY = 1_000_000_000

PreemptionPolicy = Literal["PreemptLowerPriority", "Never"]


# 1.36's v1alpha2 PodGroup has the mode as a string, which a 1.36 server defaults to "Pod".
V1ALPHA2_DISRUPTION_MODES: dict[str, dict[str, dict[str, Any]]] = {"Pod": {"single": {}}, "PodGroup": {"all": {}}}


class DisruptionMode(K8sModel):
    """``{single: {}}`` or ``{all: {}}``; neither set reads as ``single`` (the API's default).
    1.36's string form (``Pod``, ``PodGroup``) reads as ``single`` and ``all``."""

    single: Optional[dict[str, Any]] = None
    all: Optional[dict[str, Any]] = None

    @model_validator(mode="before")
    @classmethod
    def _v1alpha2_string(cls, value: Any) -> Any:
        if isinstance(value, str):
            if value not in V1ALPHA2_DISRUPTION_MODES:
                raise ValueError(f"{clipped(repr(value))} is not a disruption mode (Pod, PodGroup, or {{single: {{}}}}, {{all: {{}}}})")
            return V1ALPHA2_DISRUPTION_MODES[value]
        return value

    @model_validator(mode="after")
    def _one(self):
        if self.single is not None and self.all is not None:
            raise ValueError("at most one of single and all may be set")
        return self

    @property
    def is_all(self) -> bool:
        return self.all is not None


class GroupResourceClaim(K8sModel):
    """A device claim a group owns: a ResourceClaim by name, or one made from a template."""

    name: str = Field(min_length=1)
    resource_claim_name: Optional[str] = None
    resource_claim_template_name: Optional[str] = None

    @model_validator(mode="after")
    def _one_source(self):
        if (self.resource_claim_name is None) == (self.resource_claim_template_name is None):
            raise ValueError("exactly one of resourceClaimName and resourceClaimTemplateName must be set")
        return self


class GroupClaimStatus(K8sModel):
    """``status.resourceClaimStatuses[]``: the claim made for a group's template entry."""

    name: str = Field(min_length=1)
    resource_claim_name: Optional[str] = None


class GroupStatus(K8sModel):
    resource_claim_statuses: ListOf[GroupClaimStatus] = []


class TemplateRef(K8sModel):
    """``spec.workloadRef`` of a 1.37 PodGroup or CompositePodGroup."""

    workload_name: str = Field(min_length=1)
    template_name: str = Field(min_length=1)


class GroupPriority(K8sModel):
    """The priority fields a 1.37 group and its templates share."""

    priority_class_name: str = ""
    priority: Optional[StrictInt] = Field(default=None, le=MAX_USER_PRIORITY)
    preemption_policy: Optional[PreemptionPolicy] = None


class TopologyConstraint(K8sModel):
    key: str = Field(min_length=1)


class SchedulingConstraints(K8sModel):
    """``spec.schedulingConstraints`` of every version's groups: at most one topology key."""

    topology: ListOf[TopologyConstraint] = Field(default=[], max_length=1)

    @property
    def topology_key(self) -> Optional[str]:
        return self.topology[0].key if self.topology else None


class CompositeGang(K8sModel):
    min_group_count: StrictInt = Field(ge=1)


class CompositePolicy(K8sModel):
    basic: Optional[dict[str, Any]] = None
    gang: Optional[CompositeGang] = None

    @model_validator(mode="after")
    def _exactly_one(self):
        if (self.basic is None) == (self.gang is None):
            raise ValueError("exactly one of basic and gang must be set")
        return self


class PodGroupTemplate(GroupPriority):
    name: str = Field(min_length=1)
    scheduling_policy: dict[str, Any]
    scheduling_constraints: Optional[SchedulingConstraints] = None
    resource_claims: ListOf[GroupResourceClaim] = Field(default=[], max_length=4)
    disruption_mode: Optional[DisruptionMode] = None


class CompositePodGroupTemplate(GroupPriority):
    name: str = Field(min_length=1)
    scheduling_policy: CompositePolicy
    scheduling_constraints: Optional[SchedulingConstraints] = None
    disruption_mode: Optional[DisruptionMode] = None
    pod_group_templates: ListOf[PodGroupTemplate] = []
    composite_pod_group_templates: ListOf["CompositePodGroupTemplate"] = []


class WorkloadTemplatesSpec(K8sModel):
    pod_group_templates: ListOf[PodGroupTemplate] = Field(default=[], max_length=8)
    composite_pod_group_templates: ListOf[CompositePodGroupTemplate] = []


class WorkloadTemplates(NamespacedObject):
    """``scheduling.k8s.io/v1beta1`` (and ``v1alpha3``) ``Workload``: templates of groups."""

    api_version: str = "scheduling.k8s.io/v1beta1"
    kind: Literal["Workload"] = "Workload"
    metadata: ObjectMeta
    spec: WorkloadTemplatesSpec

    def pod_group_templates(self) -> set[str]:
        """Every PodGroup template's name, at any depth of the tree."""
        return _names(self.spec.pod_group_templates, self.spec.composite_pod_group_templates, pods=True)

    def composite_templates(self) -> set[str]:
        """Every CompositePodGroup template's name, at any depth of the tree."""
        return _names([], self.spec.composite_pod_group_templates, pods=False)


def _names(groups: list[PodGroupTemplate], composites: list[CompositePodGroupTemplate], *, pods: bool) -> set[str]:
    out = {g.name for g in groups} if pods else set()
    pending = list(composites)
    while pending:
        c = pending.pop()
        out |= {g.name for g in c.pod_group_templates} if pods else {c.name}
        pending.extend(c.composite_pod_group_templates)
    return out


class CompositePodGroupSpec(GroupPriority):
    parent_composite_pod_group_name: Optional[str] = None
    workload_ref: Optional[TemplateRef] = None
    scheduling_policy: CompositePolicy
    scheduling_constraints: Optional[SchedulingConstraints] = None
    disruption_mode: Optional[DisruptionMode] = None


class CompositePodGroup(NamespacedObject):
    """``scheduling.k8s.io/v1alpha3`` ``CompositePodGroup``: an inner node of a group tree."""

    api_version: str = "scheduling.k8s.io/v1alpha3"
    kind: Literal["CompositePodGroup"] = "CompositePodGroup"
    metadata: ObjectMeta
    spec: CompositePodGroupSpec

    @property
    def min_group_count(self) -> int:
        """Child groups that must be placed at once (0: ``basic``, no constraint)."""
        gang = self.spec.scheduling_policy.gang
        return gang.min_group_count if gang is not None else 0

    @property
    def topology_key(self) -> Optional[str]:
        c = self.spec.scheduling_constraints
        return c.topology_key if c is not None else None

    @property
    def disruption_all(self) -> bool:
        return self.spec.disruption_mode is not None and self.spec.disruption_mode.is_all

    @property
    def parent_key(self) -> Optional[str]:
        parent = self.spec.parent_composite_pod_group_name
        return f"{self.metadata.namespace}/{parent}" if parent else None

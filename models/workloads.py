"""Gangs as Kubernetes itself declares them (1.35+), read into the scheduler's one gang model.

Three shapes besides scheduler-plugins' ``PodGroup`` (``scheduling.x-k8s.io``, pods joining by
the ``scheduling.x-k8s.io/pod-group`` label):

* ``scheduling.k8s.io/v1alpha2`` ``PodGroup`` (1.36): ``spec.schedulingPolicy`` is exactly one
  of ``basic: {}`` (no gang: each pod on its own) and ``gang: {minCount}``; pods join with
  ``spec.schedulingGroup.podGroupName`` (same namespace);
* ``scheduling.k8s.io/v1alpha1`` ``Workload`` (1.35): ``spec.podGroups[{name, policy}]`` (at most
  8); a pod joins with ``spec.workloadRef {name, podGroup, podGroupReplicaKey}``, and each replica
  key is a gang of its own under that pod group's policy;
* Volcano's ``scheduling.volcano.sh/v1beta1`` ``PodGroup`` (``minMember``, ``minResources``); pods
  join with the ``scheduling.k8s.io/group-name`` annotation. It reads as scheduler-plugins' does.

Each becomes a ``PodGroup`` of ``objects`` (``minMember`` = ``minCount``; 1 for ``basic``), keyed
the way ``snapshot.pod_group_key`` keys its pods. A v1alpha2 PodGroup's required topology
(``spec.schedulingConstraints.topology``, at most one ``{key}``) becomes the group's
``topology_key``: every member in one domain of that node label (``solver.plugins.gang.topology``).
A list of two keys is refused, naming the field, as the API server refuses it.
"""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import Field, field_validator, model_validator

from .group_api import DisruptionMode, GroupPriority, GroupResourceClaim, GroupStatus, SchedulingConstraints, TemplateRef
from .objects import K8sModel, ListOf, NamespacedObject, ObjectMeta, PodGroup, PodGroupSpec, check_preferred_topology

# What a pod of a Workload's gang is keyed by: namespace/workload:podGroup[:replicaKey]
# (a colon is in no Kubernetes name, so the key cannot collide with a PodGroup's namespace/name).
KEY_SEPARATOR = ":"


class GangPolicy(K8sModel):
    min_count: int = Field(ge=1)


class SchedulingPolicy(K8sModel):
    basic: Optional[dict[str, Any]] = None
    gang: Optional[GangPolicy] = None

    @model_validator(mode="after")
    def _exactly_one(self):
        if (self.basic is None) == (self.gang is None):
            raise ValueError("exactly one of basic and gang must be set")
        return self

    @property
    def min_member(self) -> int:
        return self.gang.min_count if self.gang is not None else 1


class CorePodGroupSpec(GroupPriority):
    scheduling_policy: SchedulingPolicy
    scheduling_constraints: Optional[SchedulingConstraints] = None
    # 1.37 (v1beta1, v1alpha3; ``models.group_api``): absent from a 1.36 object.
    parent_composite_pod_group_name: Optional[str] = None
    workload_ref: Optional[TemplateRef] = None
    resource_claims: ListOf[GroupResourceClaim] = Field(default=[], max_length=4)
    disruption_mode: Optional[DisruptionMode] = None


class CorePodGroup(NamespacedObject):
    """``scheduling.k8s.io`` ``PodGroup``: ``v1alpha2`` (1.36), ``v1beta1`` and ``v1alpha3`` (1.37)."""

    api_version: str = "scheduling.k8s.io/v1alpha2"
    kind: Literal["PodGroup"] = "PodGroup"
    metadata: ObjectMeta
    spec: CorePodGroupSpec
    status: Optional[GroupStatus] = None

    _preferred = field_validator("metadata")(check_preferred_topology)

    def pod_group(self, priority: Optional[int] = None) -> PodGroup:
        """The scheduler's gang model of this group; ``priority``: the group's, resolved from its
        priorityClassName (``models.group_tree``), else its own ``spec.priority``."""
        own = self.spec
        spec = PodGroupSpec(min_member=own.scheduling_policy.min_member)
        constraints = own.scheduling_constraints
        update: dict[str, Any] = {}  # internal fields, no alias
        if constraints is not None and constraints.topology_key is not None:
            update["topology_key"] = constraints.topology_key
        if priority is not None or own.priority is not None:
            update["priority"] = priority if priority is not None else own.priority
        if own.preemption_policy is not None:
            update["preemption_policy"] = own.preemption_policy
        if own.disruption_mode is not None and own.disruption_mode.is_all:
            update["disruption_unit"] = f"PodGroup {self.key}"
        if own.parent_composite_pod_group_name:
            update["parent"] = f"{self.metadata.namespace}/{own.parent_composite_pod_group_name}"
        if own.resource_claims:
            update["claims"] = tuple(c.name for c in own.resource_claims)
        if update:
            spec = spec.model_copy(update=update)
        return PodGroup(metadata=self.metadata, spec=spec)


class WorkloadPodGroup(K8sModel):
    name: str = Field(min_length=1)
    policy: SchedulingPolicy


class WorkloadSpec(K8sModel):
    pod_groups: list[WorkloadPodGroup] = Field(min_length=1, max_length=8)


class Workload(NamespacedObject):
    """``scheduling.k8s.io/v1alpha1`` ``Workload``: a template of pod groups."""

    api_version: str = "scheduling.k8s.io/v1alpha1"
    kind: Literal["Workload"] = "Workload"
    metadata: ObjectMeta
    spec: WorkloadSpec

    @model_validator(mode="after")
    def _unique_groups(self):
        names = [g.name for g in self.spec.pod_groups]
        if len(set(names)) != len(names):
            raise ValueError("spec.podGroups: two pod groups share a name")
        return self


def workload_key(namespace: str, workload: str, pod_group: str, replica_key: str = "") -> str:
    parts = [workload, pod_group] + ([replica_key] if replica_key else [])
    return f"{namespace}/" + KEY_SEPARATOR.join(parts)


def workload_pod_groups(workloads: list[Workload], refs: set[tuple[str, str, str, str]]) -> list[PodGroup]:
    """One PodGroup per (namespace, workload, pod group, replica key) the pods name, for the
    Workloads that exist (pods of a missing Workload wait for it, as for a missing PodGroup)."""
    by_key = {w.key: w for w in workloads}
    out = []
    for namespace, name, group, replica in sorted(refs):
        workload = by_key.get(f"{namespace}/{name}")
        template = next((g for g in workload.spec.pod_groups if g.name == group), None) if workload else None
        if template is None:
            continue
        key = workload_key(namespace, name, group, replica)
        out.append(PodGroup(metadata=ObjectMeta(name=key.split("/", 1)[1], namespace=namespace),
                            spec=PodGroupSpec(min_member=template.policy.min_member)))
    return out

"""Kubernetes' own groups read from plain objects, for any reader: a dump's (``snapshot_io``
uses the same two steps) or the objects a server lists (the live cache). Dicts in, models out.

``read_groups`` validates each object by its kind and apiVersion (``kinds``: a 1.36 or 1.37
PodGroup, a 1.37 Workload of templates, a CompositePodGroup), checks the trees as a whole
(``models.group_tree``) and works out which of the pods' device claims their groups own
(``models.group_claims``). Every problem is one ``InputError`` naming the object and field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from models import InputError, Pod, PodGroup, PriorityClass
from models.dra import ResourceClaim, ResourceClaimTemplate
from models.group_api import CompositePodGroup, WorkloadTemplates
from models.group_claims import group_claims, share_group_claims
from models.group_tree import resolve_groups
from models.snapshot import pod_group_key
from models.workloads import CorePodGroup

from .kinds import kind_of
from .validation import validate_object

__all__ = ["GroupObjects", "groups_of", "read_groups"]


@dataclass
class GroupObjects:
    """The groups of a set of objects, as the snapshot takes them."""

    pod_groups: list[PodGroup] = field(default_factory=list)
    composites: list[CompositePodGroup] = field(default_factory=list)
    # (group key, entry) -> (the group's entry, the claim its members share); claims made for groups
    shared_claims: dict[tuple[str, str], tuple[Any, str]] = field(default_factory=dict)
    made_claims: list[ResourceClaim] = field(default_factory=list)

    def pods(self, pods: Iterable[Pod]) -> list[Pod]:
        """``pods`` with the members' entries pointed at their groups' claims."""
        return share_group_claims(pods, self.shared_claims, pod_group_key)


_READS = (CorePodGroup, WorkloadTemplates, CompositePodGroup)


def read_groups(items: Iterable[dict], classes: Mapping[str, PriorityClass], *,
                templates: Mapping[str, ResourceClaimTemplate] = {},
                claims: Mapping[str, ResourceClaim] = {}) -> GroupObjects:
    """The scheduler's groups of ``items`` (objects of any kind; those not of Kubernetes' own
    1.36/1.37 group kinds are passed over). ``classes``: PriorityClasses by name; ``templates``,
    ``claims``: the ResourceClaimTemplates and ResourceClaims by ``namespace/name``."""
    by_model: dict[type, list[Any]] = {model: [] for model in _READS}
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise InputError(f"items[{i}]", "", "expected a Kubernetes object (a mapping)")
        spec = kind_of(item.get("kind"), item.get("apiVersion"))
        if spec is None or spec.model not in by_model:
            continue
        by_model[spec.model].append(validate_object(spec, item, f"items[{i}]"))
    return groups_of(by_model[CorePodGroup], by_model[WorkloadTemplates], by_model[CompositePodGroup], classes,
                     templates, claims)


def groups_of(core: list[CorePodGroup], workloads: list[WorkloadTemplates], composites: list[CompositePodGroup],
              classes: Mapping[str, PriorityClass], templates: Mapping[str, ResourceClaimTemplate],
              claims: Mapping[str, ResourceClaim]) -> GroupObjects:
    """The groups of objects already read into their models (a dump's)."""
    pod_groups, checked = resolve_groups(core, workloads, composites, classes)
    shared, made = group_claims(core, templates, claims)
    return GroupObjects(pod_groups, checked, shared, made)

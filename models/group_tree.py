"""Kubernetes' own groups (``models.workloads``, ``models.group_api``) read into the scheduler's
gang model, checked as a whole: dicts in (``parse_groups``), models out (``resolve_groups``).

One function for every reader: a dump's objects (``adapters.snapshot_io``) and objects listed
from a server alike. What is refused, each as one ``InputError`` naming the object and field
(a partial gang is never the answer to a malformed tree):

* a PodGroup or CompositePodGroup whose ``spec.workloadRef`` names a template its Workload (in the
  input) does not have;
* ``spec.parentCompositePodGroupName`` naming no CompositePodGroup of the group's namespace
  (one of that name in another namespace is named in the message), or a chain of parents that
  comes back to where it started (a cycle);
* ``minGroupCount`` above the number of child groups the CompositePodGroup has;
* ``spec.priorityClassName`` naming a class the input does not hold.

A group's priority: ``spec.priority`` if set, else its PriorityClass's value; none when it sets
neither (its pods keep their own). ``apply_group_priority`` gives the members their group's
priority and preemption policy, as 1.37's kube-scheduler schedules and preempts them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Optional

from .errors import InputError
from .group_api import CompositePodGroup, WorkloadTemplates
from .objects import Pod, PodGroup, PriorityClass, copy_with
from .workloads import CorePodGroup

PODGROUPS = "podgroups"
COMPOSITES = "compositepodgroups"


def resolve_groups(core: Iterable[CorePodGroup], workloads: Iterable[WorkloadTemplates],
                   composites: Iterable[CompositePodGroup],
                   classes: Mapping[str, PriorityClass]) -> tuple[list[PodGroup], list[CompositePodGroup]]:
    """The scheduler's PodGroups for ``core``, and the CompositePodGroups, once the whole tree
    is checked (``InputError`` otherwise)."""
    core, composites = list(core), list(composites)
    by_workload = {w.key: w for w in workloads}
    by_composite = {c.key: c for c in composites}
    names_elsewhere: dict[str, list[str]] = {}
    for c in composites:
        names_elsewhere.setdefault(c.metadata.name, []).append(c.metadata.namespace)
    children: dict[str, int] = {}
    linked: list[tuple[str, CorePodGroup | CompositePodGroup]] = [
        *((PODGROUPS, g) for g in core), *((COMPOSITES, c) for c in composites)]
    for resource, item in linked:
        obj, namespace = f"{resource}/{item.key}", item.metadata.namespace
        _check_template(obj, item.spec.workload_ref, namespace, by_workload, composite=resource == COMPOSITES)
        parent = item.spec.parent_composite_pod_group_name
        if parent:
            key = _check_parent(obj, namespace, parent, by_composite, names_elsewhere)
            children[key] = children.get(key, 0) + 1
    _check_cycles(composites, by_composite)
    for c in composites:
        have = children.get(c.key, 0)
        if c.min_group_count > have:
            raise InputError(f"{COMPOSITES}/{c.key}", "spec.schedulingPolicy.gang.minGroupCount",
                             f"{c.min_group_count} is above the {have} child group(s) naming it as their parent")
    inherited = _inherited(composites, by_composite, classes)
    groups: list[PodGroup] = []
    for g in core:
        own = group_priority(f"{PODGROUPS}/{g.key}", g.spec.priority, g.spec.priority_class_name, classes)
        parent = g.spec.parent_composite_pod_group_name
        above = inherited.get(f"{g.metadata.namespace}/{parent}") if parent else None
        made = g.pod_group(own if own is not None or above is None else above[0])
        if above is not None and above[1] is not None:
            made = made.model_copy(update={"spec": made.spec.model_copy(update={"disruption_unit": above[1]})})
        groups.append(made)
    return groups, composites


def _inherited(composites: list[CompositePodGroup], by_composite: Mapping[str, CompositePodGroup],
               classes: Mapping[str, PriorityClass]) -> dict[str, tuple[Optional[int], Optional[str]]]:
    """Per CompositePodGroup, what the PodGroups under it take from the tree: the nearest level's
    priority (a PodGroup's own comes first), and the widest level saying ``disruptionMode: all``
    (its pods then go together, whatever the PodGroups below say)."""
    out: dict[str, tuple[Optional[int], Optional[str]]] = {}
    for c in composites:
        priority: Optional[int] = None
        unit: Optional[str] = None
        at: Optional[CompositePodGroup] = c
        while at is not None:
            if priority is None:
                priority = group_priority(f"{COMPOSITES}/{at.key}", at.spec.priority, at.spec.priority_class_name, classes)
            if at.disruption_all:
                unit = f"CompositePodGroup {at.key}"
            at = by_composite.get(at.parent_key) if at.parent_key else None
        out[c.key] = (priority, unit)
    return out


def group_priority(obj: str, priority: Optional[int], class_name: str,
                   classes: Mapping[str, PriorityClass]) -> Optional[int]:
    """A group's priority: its own, else its class's; None when it names neither."""
    if priority is not None:
        return priority
    if not class_name:
        return None
    found = classes.get(class_name)
    if found is None:
        raise InputError(obj, "spec.priorityClassName", f'priority class "{class_name}" not found')
    return found.value


def _check_template(obj: str, ref, namespace: str, by_workload: Mapping[str, WorkloadTemplates], *,
                    composite: bool) -> None:
    """The template ``ref`` names exists in its Workload, when the Workload is in the input (a
    dump of groups alone, without their Workloads, is read as it is)."""
    if ref is None:
        return
    workload = by_workload.get(f"{namespace}/{ref.workload_name}")
    if workload is None:
        return
    names = workload.composite_templates() if composite else workload.pod_group_templates()
    if ref.template_name not in names:
        what = "compositePodGroupTemplate" if composite else "podGroupTemplate"
        raise InputError(obj, "spec.workloadRef.templateName",
                         f'Workload {workload.key} has no {what} named "{ref.template_name}"')


def _check_parent(obj: str, namespace: str, parent: str, by_composite: Mapping[str, CompositePodGroup],
                  names_elsewhere: Mapping[str, list[str]]) -> str:
    """The parent's key; ``InputError`` when no CompositePodGroup of that name is in ``namespace``."""
    key = f"{namespace}/{parent}"
    if key in by_composite:
        return key
    others = [ns for ns in names_elsewhere.get(parent, []) if ns != namespace]
    where = (f"; the one of that name is in namespace {others[0]}, and a parent must be in its child's "
             f"namespace ({namespace})") if others else " in the input"
    raise InputError(obj, "spec.parentCompositePodGroupName", f'no CompositePodGroup "{parent}" in namespace '
                     f"{namespace}{where}")


def _check_cycles(composites: list[CompositePodGroup], by_composite: Mapping[str, CompositePodGroup]) -> None:
    """Following parents from any CompositePodGroup reaches a root."""
    done: set[str] = set()
    for start in composites:
        path: list[str] = []
        key: Optional[str] = start.key
        while key is not None and key not in done:
            if key in path:
                loop = path[path.index(key):] + [key]
                raise InputError(f"{COMPOSITES}/{key}", "spec.parentCompositePodGroupName",
                                 "the parents form a cycle: " + " -> ".join(loop))
            path.append(key)
            key = by_composite[key].parent_key
        done.update(path)


def apply_group_priority(pods: Iterable[Pod], groups: Mapping[str, PodGroup], group_of) -> list[Pod]:
    """``pods`` with each member of a group that sets a priority (or preemption policy) given
    the group's (``group_of``: a pod's group key, ``snapshot.pod_group_key``)."""
    out = []
    for pod in pods:
        key = group_of(pod)
        group = groups.get(key) if key is not None else None
        spec = group.spec if group is not None else None
        update: dict = {}
        if spec is not None and spec.priority is not None and pod.spec.priority != spec.priority:
            update["priority"] = spec.priority
        if spec is not None and spec.preemption_policy is not None and pod.spec.preemption_policy != spec.preemption_policy:
            update["preemption_policy"] = spec.preemption_policy
        out.append(copy_with(pod, {"spec": copy_with(pod.spec, update)}) if update else pod)
    return out

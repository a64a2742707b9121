"""The live cache's group trees (Kubernetes 1.37): the CompositePodGroups it watches and the
PodGroups that name a parent, resolved by the offline reader's own code
(``models.group_tree.resolve_groups``), so a window sees the trees a dump of the same objects
would give. A PodGroup naming no parent but a ``priorityClassName`` is resolved here too, as a
tree of one: its priority is its class's, as in a dump, and a class that does not exist makes
its pods wait as a refused tree's do (that object's own reading needs nothing else).

Two differences from a dump, both because a live cluster holds many trees and a window must not
stop for one bad object. A tree ``resolve_groups`` refuses (a cycle of parents, a parent in
another namespace or absent, ``minGroupCount`` above the children, a template its Workload
lacks) is left out whole — every CompositePodGroup and PodGroup linked to the object named —
and the rest resolved again; the pods of its PodGroups wait, each told the refusal
(``Resolved.problems``). And the trees are indexed as they change (``tree_gangs``: each gang's
fellow gangs of one tree), so the queue can take a tree's pods into one window together, as
1.37's kube-scheduler takes them, without asking the cache (whose lock it must not wait for).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Optional

from models import InputError, PodGroup, PriorityClass
from models.group_api import CompositePodGroup, WorkloadTemplates
from models.group_tree import COMPOSITES, PODGROUPS, resolve_groups
from models.workloads import CorePodGroup

# A node of a tree: (PODGROUPS, PodGroup key) or (COMPOSITES, CompositePodGroup key), named as
# ``resolve_groups`` names the objects of its errors (a PodGroup and a composite may share a name).
TreeNode = tuple[str, str]


def refused(gang: str, problem: str, *, alone: bool = False) -> str:
    """Why the pods of PodGroup ``gang`` wait: its tree was refused (``alone``: the PodGroup,
    which names no parent, was)."""
    if alone:
        return f"PodGroup {gang} cannot be used by the scheduler until it is fixed: {problem}"
    return f"PodGroup {gang} is in a group tree the scheduler cannot use until it is fixed: {problem}"


@dataclass(frozen=True)
class Resolved:
    """The trees as a snapshot takes them."""

    groups: dict[str, PodGroup] = field(default_factory=dict)  # the valid trees' PodGroups by gang key
    composites: tuple[CompositePodGroup, ...] = ()  # the valid trees' CompositePodGroups
    problems: dict[str, str] = field(default_factory=dict)  # gang key of a refused tree -> why (``refused``)
    invalid: dict[TreeNode, str] = field(default_factory=dict)  # each object refused -> its error


class GroupTrees:
    """The CompositePodGroups and the PodGroups naming a parent or a priority class (``members``),
    by key; callers hold the cache's
    lock while they change or resolve them, and `index` them once a batch of changes is in (a
    list of thousands is indexed once, not once per object)."""

    def __init__(self) -> None:
        self.members: dict[str, CorePodGroup] = {}
        self.composites: dict[str, CompositePodGroup] = {}
        # Each gang's tree: every gang linked to it through parents (itself included). Replaced
        # whole on a change, never changed in place: the queue reads it without a lock.
        self.tree_gangs: Mapping[str, frozenset[str]] = {}
        self._trees: dict[TreeNode, frozenset[TreeNode]] = {}
        self._dirty = False  # changed since `_trees` and `tree_gangs` were made
        self.refused_gangs: frozenset[str] = frozenset()  # the gangs of the trees last refused (``resolve``)
        self._resolved: Optional[tuple[tuple[object, ...], Resolved]] = None

    def __bool__(self) -> bool:
        return bool(self.members or self.composites)

    def put_group(self, key: str, group: Optional[CorePodGroup]) -> None:
        """PodGroup ``key`` is now ``group`` (None: gone)."""
        if group is not None and (group.spec.parent_composite_pod_group_name or group.spec.priority_class_name):
            self.members[key] = group
        elif self.members.pop(key, None) is None:
            return
        self._dirty, self._resolved = True, None

    def put_composite(self, key: str, composite: Optional[CompositePodGroup]) -> None:
        """CompositePodGroup ``key`` is now ``composite`` (None: gone)."""
        if composite is not None:
            self.composites[key] = composite
        else:
            self.composites.pop(key, None)
        self._dirty, self._resolved = True, None

    def gangs_with(self, composite: str) -> frozenset[str]:
        """The gangs of the tree CompositePodGroup ``composite`` was linked to when last indexed."""
        return frozenset(key for kind, key in self._trees.get((COMPOSITES, composite), ()) if kind == PODGROUPS)

    def resolve(self, stamp: tuple[object, ...], workloads: Callable[[], Iterable[WorkloadTemplates]],
                classes: Callable[[], Mapping[str, PriorityClass]]) -> Resolved:
        """The trees resolved against the Workloads of templates and the PriorityClasses (asked
        for only when needed), the refused ones left out; the last answer again while ``stamp``
        (the Workloads' and classes' change counts) and the trees are as they were."""
        self.index()
        if self._resolved is not None and self._resolved[0] == stamp:
            return self._resolved[1]
        members, composites = dict(self.members), dict(self.composites)
        templates, by_name = list(workloads()), classes()
        problems: dict[str, str] = {}
        invalid: dict[TreeNode, str] = {}
        while True:
            try:
                groups, checked = resolve_groups(members.values(), templates, composites.values(), by_name)
                break
            except InputError as exc:
                kind, _, key = exc.obj.partition("/")
                left = len(members) + len(composites)
                invalid[(kind, key)] = str(exc)
                for node_kind, node_key in self._trees.get((kind, key), ()):
                    if node_kind == PODGROUPS and (member := members.pop(node_key, None)) is not None:
                        alone = not member.spec.parent_composite_pod_group_name
                        problems[node_key] = refused(node_key, str(exc), alone=alone)
                    elif node_kind == COMPOSITES:
                        composites.pop(node_key, None)
                if len(members) + len(composites) == left:
                    raise  # an error no tree explains: not this module's to hide
        resolved = Resolved({g.key: g for g in groups}, tuple(checked), problems, invalid)
        self.refused_gangs = frozenset(problems)
        self._resolved = (stamp, resolved)
        return resolved

    def index(self) -> None:
        """Link every object to its parent and publish each gang's tree, if anything changed."""
        if not self._dirty:
            return
        self._dirty = False
        parent: dict[TreeNode, TreeNode] = {}
        for key, group in self.members.items():
            if group.spec.parent_composite_pod_group_name:  # (one naming none is a tree of one)
                parent[(PODGROUPS, key)] = (COMPOSITES, f"{group.metadata.namespace}/{group.spec.parent_composite_pod_group_name}")
        for key, composite in self.composites.items():
            if composite.parent_key is not None:
                parent[(COMPOSITES, key)] = (COMPOSITES, composite.parent_key)
        children: dict[TreeNode, list[TreeNode]] = {}
        for child, above in parent.items():
            children.setdefault(above, []).append(child)
        trees: dict[TreeNode, frozenset[TreeNode]] = {}
        for node in [*parent, *((PODGROUPS, k) for k in self.members), *((COMPOSITES, k) for k in self.composites)]:
            if node not in trees:
                tree = _linked(node, parent, children)
                trees.update(dict.fromkeys(tree, tree))
        self._trees = trees
        self.tree_gangs = {key: frozenset(k for kind, k in tree if kind == PODGROUPS)
                           for (kind, key), tree in trees.items() if kind == PODGROUPS}


def _linked(start: TreeNode, parent: Mapping[TreeNode, TreeNode],
            children: Mapping[TreeNode, list[TreeNode]]) -> frozenset[TreeNode]:
    """Every node joined to ``start`` by parent links, either way (a cycle, a missing parent
    and a parent in another namespace all end a walk)."""
    seen = {start}
    pending = [start]
    while pending:
        node = pending.pop()
        for near in [*children.get(node, ()), *([parent[node]] if node in parent else [])]:
            if near not in seen:
                seen.add(near)
                pending.append(near)
    return frozenset(seen)

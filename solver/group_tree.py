"""A window's group trees as data: which CompositePodGroup each PodGroup and CompositePodGroup
hangs from, and the one rule every engine asks of a tree (``satisfied``): a PodGroup counts as
placed when its members (placed, or running and staying) reach its minMember; a ``gang``
CompositePodGroup when ``minGroupCount`` of its children count as placed; a ``basic`` one when
any child does. The tree itself was checked when read (``models.group_tree``: no cycle, every
parent in the child's namespace, minGroupCount within the children). Greedy's topology choice
per level (``TreeDomains``) is here too: coscheduling's gate asks it for every gang under a
tree."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from models.group_api import CompositePodGroup

# A child of a CompositePodGroup: ("group", PodGroup key) or ("composite", CompositePodGroup key)
# (a PodGroup and a CompositePodGroup may share a name).
Node = tuple[str, str]
GROUP, COMPOSITE = "group", "composite"


@dataclass
class Tree:
    composites: dict[str, CompositePodGroup]
    parent: dict[Node, str] = field(default_factory=dict)  # child -> its CompositePodGroup's key
    children: dict[str, list[Node]] = field(default_factory=dict)

    @staticmethod
    def of(ctx) -> Optional["Tree"]:
        """The snapshot's trees (None without a CompositePodGroup)."""
        if not ctx.snapshot.composite_groups:
            return None
        return Tree.of_groups(ctx.snapshot.composite_groups, ctx.pod_groups)

    @staticmethod
    def of_groups(composite_groups, pod_groups) -> "Tree":
        composites = {c.key: c for c in composite_groups}
        tree = Tree(composites)
        for key, group in pod_groups.items():
            if group.spec.parent is not None and group.spec.parent in composites:
                tree._link((GROUP, key), group.spec.parent)
        for key, c in composites.items():
            if c.parent_key is not None and c.parent_key in composites:
                tree._link((COMPOSITE, key), c.parent_key)
        return tree

    def _link(self, child: Node, parent: str) -> None:
        self.parent[child] = parent
        self.children.setdefault(parent, []).append(child)

    def ancestors(self, group: Optional[str]) -> list[str]:
        """The CompositePodGroups above PodGroup ``group``, nearest first."""
        out: list[str] = []
        at = self.parent.get((GROUP, group)) if group is not None else None
        while at is not None:
            out.append(at)
            at = self.parent.get((COMPOSITE, at))
        return out

    def groups_under(self, composite: str) -> list[str]:
        """The PodGroups anywhere under ``composite``."""
        out: list[str] = []
        pending = [composite]
        while pending:
            for kind, key in self.children.get(pending.pop(), []):
                (out if kind == GROUP else pending).append(key)
        return out

    def bottom_up(self, composite: str) -> list[str]:
        """``composite`` and the CompositePodGroups under it, every child before its parent."""
        out: list[str] = []

        def visit(key: str) -> None:
            for kind, child in self.children.get(key, []):
                if kind == COMPOSITE:
                    visit(child)
            out.append(key)

        visit(composite)
        return out

    def satisfied(self, composite: str, group_placed: Callable[[str], bool]) -> bool:
        """Whether ``composite`` counts as placed, given which PodGroups do."""
        count = sum(1 for child in self.children.get(composite, []) if self.child_placed(child, group_placed))
        need = self.composites[composite].min_group_count
        return count >= need if need else count > 0

    def child_placed(self, child: Node, group_placed: Callable[[str], bool]) -> bool:
        kind, key = child
        return group_placed(key) if kind == GROUP else self.satisfied(key, group_placed)


def rejected(composite: str, placed: int, need: int) -> str:
    """Why a CompositePodGroup's children placed nothing: too few of them could land together."""
    return (f"CompositePodGroup {composite} gets rejected: only {placed} of its minGroupCount {need} child "
            f"group(s) could be placed together, so none is placed (all-or-nothing)")


@dataclass
class TreeDomains:
    """Greedy's topology choice at each level of a tree, once per pass: a level with a topology
    constraint takes, at its first pod's turn, the domain of its key (inside the one its parent
    took) where a trial placement of the window pods under it places the most (its running pods'
    domain when some run), then the first. Asked by coscheduling's gate for every gang under a
    tree (a gang with a topology of its own chooses its domain inside this)."""

    tree: Tree
    window: list
    trial: Callable
    chosen: dict[str, Any] = field(default_factory=dict)  # composite -> mask of the nodes it may use

    def within(self, group: Optional[str], state) -> Optional[tuple[Any, str]]:
        """The nodes the pods of PodGroup ``group`` may use and the innermost key that says so
        (None: no level above it has a topology constraint)."""
        mask, key = None, ""
        for composite in reversed(self.tree.ancestors(group)):  # root first
            level = self.tree.composites[composite].topology_key
            if level is None:
                continue
            if composite not in self.chosen:
                self.chosen[composite] = self._choose(composite, level, state, mask)
            mask, key = self.chosen[composite], level
        return None if mask is None else (mask, key)

    def _choose(self, composite: str, key: str, state, within):
        groups = set(self.tree.groups_under(composite))
        ids = state.domains(key)[0]
        pinned = {int(ids[n]) for p, n in state.pods() if p.group in groups}
        pods = [p for p in self.window if p.group in groups]
        domains = sorted(pinned) if pinned else sorted({int(d) for d in ids if d >= 0})
        best, chosen = -1, np.zeros(len(ids), dtype=bool)
        removals = state.removals  # the trials are taken back out: the state ends as it was
        for d in domains:
            mask = (ids == d) if within is None else (ids == d) & within
            nodes, placed = np.flatnonzero(mask), []
            for pod in pods:
                node = self.trial(pod, nodes) if len(nodes) else None
                if node is not None:
                    state.add(pod, node)
                    placed.append(pod)
            for pod in placed:
                state.remove(pod)
            if d >= 0 and len(placed) > best:
                best, chosen = len(placed), mask
        state.removals = removals
        return chosen

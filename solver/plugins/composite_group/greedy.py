"""Greedy's part (``plugin_api.GreedyPart``) for CompositePodGroups, as 1.37's kube-scheduler
schedules a tree: every pod under one root together in the queue, at its first pod's place (a
level's topology domain is chosen in coscheduling's gate: ``group_tree.TreeDomains``); at the
tree's last pod, Permit for each level, children first: a
``gang`` level with fewer than ``minGroupCount`` children placed takes back every placement
under it, victims included."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from ...info import PodInfo
from ...plugin_api import GreedyPart, PassResult, Trial
from ...state import ClusterState
from ...group_tree import Tree, rejected


@dataclass
class TreePass(GreedyPart):
    ctx: Any
    tree: Optional[Tree]
    trial: Trial
    last_pod: dict[str, str] = field(default_factory=dict)  # root -> its last pod in queue order

    @staticmethod
    def of(ctx, state: ClusterState, static, trial: Trial) -> "TreePass":
        return TreePass(ctx, Tree.of(ctx), trial)

    def _root(self, pod: PodInfo) -> Optional[str]:
        above = self.tree.ancestors(pod.group) if self.tree is not None else []
        return above[-1] if above else None

    def order(self, queue: list[PodInfo]) -> list[PodInfo]:
        """The queue as it is (``together`` put each tree's pods together); each root's last pod
        is noted, where its Permit runs."""
        if self.tree is not None:
            for pod in queue:
                root = self._root(pod)
                if root is not None:
                    self.last_pod[root] = pod.key
        return queue

    def settle(self, pod: PodInfo, state: ClusterState, result: PassResult) -> list[PodInfo]:
        root = self._root(pod)
        if root is None or self.last_pod.get(root) != pod.key:
            return []
        assert self.tree is not None
        for composite in self.tree.bottom_up(root):
            self._permit(composite, state, result)
        return []

    def _permit(self, composite: str, state: ClusterState, result: PassResult) -> None:
        """A gang level with too few children placed takes back every placement under it."""
        assert self.tree is not None
        tree, need = self.tree, self.tree.composites[composite].min_group_count
        groups = set(tree.groups_under(composite))
        pods = [p for p in self.ctx.window if p.group in groups and p.key in result.placements]
        if not need or not pods:
            return
        count: dict[str, int] = {}
        for p, _ in state.pods():
            if p.group in groups:
                count[p.group] = count.get(p.group, 0) + 1

        def placed(key: str) -> bool:
            group = self.ctx.pod_groups.get(key)
            return group is not None and 0 < count.get(key, 0) >= group.spec.min_member

        if tree.satisfied(composite, placed):
            return
        have = sum(tree.child_placed(c, placed) for c in tree.children.get(composite, []))
        _take_back(pods, state, result, rejected(composite, have, need))


def _take_back(pods: list[PodInfo], state: ClusterState, result: PassResult, message: str) -> None:
    keys = {p.key for p in pods}
    for pod in pods:
        state.remove(pod)
        del result.placements[pod.key]
        result.nominations.pop(pod.key, None)
        result.unschedulable[pod.key] = message
    kept = []
    for victim in result.victims:
        if victim.preemptor in keys:
            state.add(victim.pod, victim.node)
        else:
            kept.append(victim)
    result.victims = kept


def together(ctx, queue: list[PodInfo]) -> list[PodInfo]:
    """1.37's QueueSort for CompositePodGroups (``plugin_api.QueueSort``): every pod under one
    root together in the queue, at its first pod's place."""
    tree = Tree.of(ctx)
    if tree is None:
        return queue

    def root(pod: PodInfo) -> Optional[str]:
        above = tree.ancestors(pod.group) if pod.group is not None else []
        return above[-1] if above else None

    under: dict[str, list[PodInfo]] = {}
    for pod in queue:
        r = root(pod)
        if r is not None:
            under.setdefault(r, []).append(pod)
    if not under:
        return queue
    out: list[PodInfo] = []
    for pod in queue:
        r = root(pod)
        if r is None:
            out.append(pod)
        elif r in under:
            out.extend(under.pop(r))
    return out

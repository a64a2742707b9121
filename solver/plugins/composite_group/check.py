"""The validator's reading of CompositePodGroups on a plan's final state: for every
CompositePodGroup under which the plan places a pod, a ``gang`` level has ``minGroupCount``
children placed (``tree.satisfied``), and a level with a topology constraint holds every member
under it (placed, or running and staying) in one domain of its key."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from ...group_tree import Tree

if TYPE_CHECKING:
    from ...plugin_api import ReplayView as Replay


def check(replay: Replay) -> None:
    tree = Tree.of(replay.ctx)
    if tree is None:
        return
    placed = [(pod, n) for pod, n in replay.placed() if pod.group is not None]
    touched = {c for pod, _ in placed for c in tree.ancestors(pod.group)}
    if not touched:
        return
    evicted = {v.pod.key for v in replay.victims}
    members = placed + [(p, n) for p, n in replay.before.pods() if p.group is not None and p.key not in evicted]
    count = Counter(p.group for p, _ in members)
    groups = replay.ctx.pod_groups

    def group_placed(key: str) -> bool:
        group = groups.get(key)
        return group is not None and count[key] > 0 and count[key] >= group.spec.min_member

    for composite in sorted(touched):
        need = tree.composites[composite].min_group_count
        if need and not tree.satisfied(composite, group_placed):
            have = sum(tree.child_placed(c, group_placed) for c in tree.children.get(composite, []))
            replay.report(f"composite: CompositePodGroup {composite} places pods under it with {have} of its "
                          f"minGroupCount {need} child group(s) placed")
        _check_topology(replay, tree, composite, members)


def _check_topology(replay: Replay, tree: Tree, composite: str, members) -> None:
    key = tree.composites[composite].topology_key
    if key is None:
        return
    under = set(tree.groups_under(composite))
    ids, names = replay.final.domains(key)
    domains = sorted({int(ids[n]) for p, n in members if p.group in under})
    if len(domains) > 1 or domains == [-1]:
        shown = ", ".join(names[d] if d >= 0 else f"(no {key} label)" for d in domains)
        replay.report(f"composite: CompositePodGroup {composite} has members in {len(domains)} {key} domains "
                      f"({shown}); its topology constraint wants one")

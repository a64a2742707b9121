"""CompositePodGroup (Kubernetes 1.37): ``minGroupCount`` child groups placed or none, a topology
constraint at each level of the tree; in greedy, the model and the validator."""

from __future__ import annotations

from ...plugin_api import Plugin
from . import check, encode
from .greedy import TreePass, together
from ...group_tree import Tree

NAME = "CompositePodGroup"


def prepare(snapshot, config, window, state, static):
    """Each window pod under a tree learns its root (``PodInfo.tree``): what couples it."""
    if not snapshot.composite_groups:
        for pod in window:  # a pod kept from an earlier window may remember a tree gone since
            if pod.tree:
                pod.tree = ""
        return
    tree = Tree.of_groups(snapshot.composite_groups, snapshot.pod_group_by_key)
    for pod in window:
        above = tree.ancestors(pod.group)
        pod.tree = above[-1] if above else ""


def couples(x):
    """The pods under one tree are placed together or not at all, wherever they land."""
    return (lambda y: y.tree == x.tree) if x.tree else None


PLUGIN = Plugin(NAME, greedy=TreePass.of, queue_sort=together, window_encode=(encode.encode,), checks=(check.check,),
                prepare=prepare, couples=couples)

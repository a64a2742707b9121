"""Per-snapshot lookups that let the score plugins work on whole node arrays at once.

Nodes do not change during a decision, so what a plugin would otherwise recompute node by
node is built here once and cached by content: which nodes a node-selector requirement or
term selects (from the distinct values of its label key, not from every node), how many
``PreferNoSchedule`` taints a set of tolerations leaves untolerated (per distinct taint list),
which nodes hold an image. Matching semantics are the models' own: ``In``/``NotIn``/``Exists``/
``DoesNotExist`` act on label presence and equality exactly as ``NodeSelectorRequirement.matches``
does (a test holds the two together), ``Gt``/``Lt`` call that method once per distinct label
value, and taints go through the toleration rule the TaintToleration filter uses (``terms.untolerated``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Optional

import numpy as np

from models.objects import NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Taint, Toleration

from ..info import NodeInfo, PodInfo, node_derived
from ..terms import untolerated

# The only taint effect scoring looks at; NoSchedule/NoExecute are the filter's.
PREFER_NO_SCHEDULE = "PreferNoSchedule"


class NodeIndex:
    @classmethod
    def of(cls, nodes: list[NodeInfo]) -> "NodeIndex":
        """The index of ``nodes``, made once per list of nodes (``node_derived``)."""
        return node_derived(nodes, "scoring index", lambda: cls(nodes))

    def __init__(self, nodes: list[NodeInfo]) -> None:
        self.nodes = nodes
        self.size = len(nodes)
        self.name_index = {n.name: n.index for n in nodes}
        # Nodes grouped by their exact taint list: taint verdicts are computed per group.
        groups: dict[tuple[Taint, ...], int] = {}
        self.taint_group = np.array([groups.setdefault(n.taints, len(groups)) for n in nodes], dtype=np.int64)
        self.taint_lists: list[tuple[Taint, ...]] = list(groups)
        # Image name -> indices of the nodes that report it.
        holders: dict[str, list[int]] = {}
        for node in nodes:
            for name in node.images:
                holders.setdefault(name, []).append(node.index)
        self.image_holders = {name: np.array(ix, dtype=np.int64) for name, ix in holders.items()}
        self._domains: dict[str, tuple[np.ndarray, dict[str, int], list[str]]] = {}
        self._requirement_masks: dict[tuple, np.ndarray] = {}
        self._term_masks: dict[str, np.ndarray] = {}
        self._required_masks: dict[tuple, np.ndarray] = {}
        self._tolerated: dict[tuple[Toleration, ...], np.ndarray] = {}
        self._prefer_counts: dict[tuple[Toleration, ...], np.ndarray] = {}
        self._image_masks: dict[str, np.ndarray] = {}

    # -- labels ------------------------------------------------------------------------------

    def domain(self, key: str) -> tuple[np.ndarray, dict[str, int], list[str]]:
        """Per node, the id of its ``key`` value (−1: no such label); value -> id; id -> value."""
        hit = self._domains.get(key)
        if hit is None:
            ids_of: dict[str, int] = {}
            ids = np.full(self.size, -1, dtype=np.int64)
            for node in self.nodes:
                value = node.labels.get(key)
                if value is not None:
                    ids[node.index] = ids_of.setdefault(value, len(ids_of))
            hit = self._domains[key] = (ids, ids_of, list(ids_of))
        return hit

    def requirement_mask(self, req: NodeSelectorRequirement) -> np.ndarray:
        """Nodes whose labels satisfy one node-selector requirement."""
        cache_key = (req.key, req.operator, tuple(req.values))
        hit = self._requirement_masks.get(cache_key)
        if hit is not None:
            return hit
        ids, ids_of, values = self.domain(req.key)
        present = ids >= 0
        op = req.operator
        if op in ("In", "NotIn"):
            wanted = np.zeros(len(values) + 1, dtype=bool)  # last slot: the label is missing
            for value in req.values:
                if value in ids_of:
                    wanted[ids_of[value]] = True
            inside = wanted[ids]
            mask = inside if op == "In" else ~inside
        elif op == "Exists":
            mask = present
        elif op == "DoesNotExist":
            mask = ~present
        else:  # Gt / Lt: integer comparison, decided once per distinct value by the model
            verdict = np.array([req.matches({req.key: v}) for v in values] + [False], dtype=bool)
            mask = verdict[ids]
        self._requirement_masks[cache_key] = mask
        return mask

    def term_mask(self, term: NodeSelectorTerm) -> np.ndarray:
        """Nodes a node-selector term matches: every expression and field; an empty term, none."""
        cache_key = term.model_dump_json()
        hit = self._term_masks.get(cache_key)
        if hit is not None:
            return hit
        if term.is_empty():
            mask = np.zeros(self.size, dtype=bool)
        else:
            mask = np.ones(self.size, dtype=bool)
            for req in term.match_expressions:
                mask &= self.requirement_mask(req)
            for field in term.match_fields:  # metadata.name In/NotIn [one name]
                named = np.zeros(self.size, dtype=bool)
                for name in field.values:
                    if name in self.name_index:
                        named[self.name_index[name]] = True
                mask &= named if field.operator == "In" else ~named
        self._term_masks[cache_key] = mask
        return mask

    def selector_mask(self, selector: NodeSelector) -> np.ndarray:
        """Nodes any of the selector's terms matches (no terms: no node)."""
        mask = np.zeros(self.size, dtype=bool)
        for term in selector.node_selector_terms:
            mask |= self.term_mask(term)
        return mask

    def required_affinity_mask(self, pod: PodInfo) -> np.ndarray:
        """Nodes matching the pod's ``nodeSelector`` and required node affinity (§3.4)."""
        required = pod.required_node_affinity
        cache_key = (tuple(sorted(pod.node_selector.items())), required.model_dump_json() if required else None)
        hit = self._required_masks.get(cache_key)
        if hit is None:
            hit = np.ones(self.size, dtype=bool)
            for key, value in pod.node_selector.items():
                ids, ids_of, _ = self.domain(key)
                hit &= ids == ids_of.get(value, -2)
            if required is not None:
                hit &= self.selector_mask(required)
            self._required_masks[cache_key] = hit
        return hit

    # -- taints ------------------------------------------------------------------------------

    def tolerated_mask(self, tolerations: Iterable[Toleration]) -> np.ndarray:
        """Nodes whose NoSchedule and NoExecute taints are all tolerated."""
        cache_key = tuple(tolerations)
        hit = self._tolerated.get(cache_key)
        if hit is None:
            per_group = np.array([untolerated(cache_key, taints) is None for taints in self.taint_lists], dtype=bool)
            hit = self._tolerated[cache_key] = per_group[self.taint_group] if self.size else np.zeros(0, dtype=bool)
        return hit

    def prefer_no_schedule_counts(self, tolerations: Iterable[Toleration]) -> np.ndarray:
        """Per node, how many ``PreferNoSchedule`` taints no toleration tolerates.

        A toleration whose effect is set to something else never tolerates such a taint
        (``Toleration.tolerates`` checks the effect), which is the plugin's own filtering of
        the tolerations to those with an empty or ``PreferNoSchedule`` effect.
        """
        cache_key = tuple(tolerations)
        hit = self._prefer_counts.get(cache_key)
        if hit is None:
            per_group = np.array(
                [
                    sum(
                        1
                        for taint in taints
                        if taint.effect == PREFER_NO_SCHEDULE and not any(t.tolerates(taint) for t in cache_key)
                    )
                    for taints in self.taint_lists
                ],
                dtype=np.int64,
            )
            hit = self._prefer_counts[cache_key] = per_group[self.taint_group] if self.size else np.zeros(0, dtype=np.int64)
        return hit

    # -- images ------------------------------------------------------------------------------

    def image_mask(self, image: str) -> Optional[np.ndarray]:
        """Nodes that report ``image`` (exact name), or None when no node does."""
        holders = self.image_holders.get(image)
        if holders is None:
            return None
        hit = self._image_masks.get(image)
        if hit is None:
            hit = np.zeros(self.size, dtype=bool)
            hit[holders] = True
            self._image_masks[image] = hit
        return hit

    def image_summary(self) -> Mapping[str, tuple[int, int]]:
        """image -> (size reported by the first node listing it, number of nodes with it)."""
        return {
            name: (self.nodes[int(holders[0])].images[name], len(holders))
            for name, holders in self.image_holders.items()
        }

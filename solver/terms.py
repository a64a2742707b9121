"""Hashable, pre-resolved label selectors and pod (anti-)affinity / spread terms.

Pydantic models hold dicts and cannot be hashed; the solver needs selectors as dictionary keys
(per-term counters, per-class caches), so each selector is frozen here once, with a pod's
``matchLabelKeys`` already merged in and a term's namespaces already resolved against its owner.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Optional

from models.labels import selector_matches
from models.objects import LabelSelector, PodAffinityTerm, Taint, Toleration, TopologySpreadConstraint


@dataclass(frozen=True, slots=True)
class Selector:
    """A label selector. ``nothing=True`` is a nil selector, which matches no object."""

    equals: tuple[tuple[str, str], ...] = ()
    exprs: tuple[tuple[str, str, frozenset[str]], ...] = ()
    nothing: bool = False

    @staticmethod
    def of(selector: Optional[LabelSelector]) -> "Selector":
        if selector is None:
            return NOTHING
        return Selector(
            equals=tuple(sorted(selector.match_labels.items())),
            exprs=tuple(sorted((r.key, r.operator, frozenset(r.values)) for r in selector.match_expressions)),
        )

    def with_requirements(self, extra: list[tuple[str, str, frozenset[str]]]) -> "Selector":
        if self.nothing or not extra:
            return self
        return Selector(self.equals, tuple(sorted(set(self.exprs) | set(extra))))

    @property
    def is_empty(self) -> bool:
        """``{}``: matches everything."""
        return not self.nothing and not self.equals and not self.exprs

    def matches(self, labels: dict[str, str]) -> bool:
        return not self.nothing and selector_matches(self.equals, self.exprs, labels)

    def keys(self) -> set[str]:
        return {k for k, _ in self.equals} | {k for k, _, _ in self.exprs}


NOTHING = Selector(nothing=True)
EVERYTHING = Selector()


def required_pair(selector: Selector) -> Optional[tuple[str, str]]:
    """A label pair every object ``selector`` matches carries (its first equality), or None when
    it requires none (expressions only, everything, or nothing)."""
    return selector.equals[0] if selector.equals and not selector.nothing else None


class PairIndex:
    """Selectors (or what holds one) in the order they came, each filed by the label pair it
    requires (``required_pair``) or as requiring none: ``candidates`` are the positions of those
    that may match a set of labels, so a pod is not asked about every one of hundreds. Only grows."""

    __slots__ = ("by_pair", "open", "size")

    def __init__(self) -> None:
        self.by_pair: dict[tuple[str, str], list[int]] = {}
        self.open: list[int] = []
        self.size = 0

    def add(self, pair: Optional[tuple[str, str]]) -> None:
        """File the next position under ``pair`` (None: one requiring no pair)."""
        (self.open if pair is None else self.by_pair.setdefault(pair, [])).append(self.size)
        self.size += 1

    def candidates(self, labels: Mapping[str, str], since: int = 0) -> list[int]:
        """Positions from ``since`` on, in order, of the entries that may match ``labels``: those
        requiring a pair ``labels`` has, and those requiring none."""
        positions = self.open[bisect_left(self.open, since):]
        for pair in labels.items():
            at = self.by_pair.get(pair)
            if at is not None:
                positions += at[bisect_left(at, since):]
        positions.sort()
        return positions


def labels_read(labels: dict[str, str], keys: frozenset[str]) -> tuple[tuple[str, str], ...]:
    """``labels`` projected onto ``keys``, sorted: what selectors reading only those keys see
    (``PodInfo.scheduling_signature`` with the context's ``relevant_labels``, ``LabelKeys``)."""
    return tuple(sorted((k, v) for k, v in labels.items() if k in keys))


class LabelKeys:
    """The label keys a growing set of selectors reads, and a pod's memo key by them: its
    namespace (which fixes its namespace's labels too) and only those labels. Every selector of
    the set matches two pods with one key alike, so what was worked out for one holds for the
    other; pods that differ in labels no selector reads (a StatefulSet pod's own name) share a
    key, where ``PodInfo.match_key`` gives each its own. The context's ``relevant_labels`` does
    the same for a whole snapshot's selectors; this one serves memos that live on a state (kept
    from window to window) and read only the selectors they hold."""

    __slots__ = ("keys",)

    def __init__(self) -> None:
        self.keys: frozenset[str] = frozenset()

    def add(self, selector: Selector) -> bool:
        """Count ``selector``'s keys in; whether that added any (memo keys made before are then
        made no more, and the caller may drop what it keyed by them)."""
        new = selector.keys() - self.keys
        if new:
            self.keys = self.keys | new
        return bool(new)

    def of(self, namespace: str, labels: dict[str, str]) -> tuple:
        return namespace, labels_read(labels, self.keys)


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """A required or preferred pod (anti-)affinity term, namespaces resolved for its owner.

    It matches a pod P when P's namespace is in ``namespaces`` or P's namespace labels match
    ``namespace_selector``, and P's labels match ``selector``.
    """

    selector: Selector
    namespaces: frozenset[str]
    namespace_selector: Optional[Selector]
    topology_key: str
    weight: int = 0

    @staticmethod
    def resolve(term: PodAffinityTerm, owner_ns: str, owner_labels: dict[str, str], weight: int = 0) -> "AffinityTerm":
        selector = Selector.of(term.label_selector)
        extra = []
        for key in term.match_label_keys:
            if key in owner_labels:
                extra.append((key, "In", frozenset([owner_labels[key]])))
        for key in term.mismatch_label_keys:
            if key in owner_labels:
                extra.append((key, "NotIn", frozenset([owner_labels[key]])))
        selector = selector.with_requirements(extra)
        namespaces = frozenset(term.namespaces)
        ns_selector = Selector.of(term.namespace_selector) if term.namespace_selector is not None else None
        if not namespaces and ns_selector is None:
            namespaces = frozenset([owner_ns])
        return AffinityTerm(selector, namespaces, ns_selector, term.topology_key, weight)

    def namespace_matches(self, namespace: str, ns_labels: dict[str, str]) -> bool:
        if namespace in self.namespaces:
            return True
        return self.namespace_selector is not None and self.namespace_selector.matches(ns_labels)

    def matches(self, namespace: str, labels: dict[str, str], ns_labels: dict[str, str]) -> bool:
        return self.namespace_matches(namespace, ns_labels) and self.selector.matches(labels)

    def unweighted(self) -> "AffinityTerm":
        return self if self.weight == 0 else AffinityTerm(
            self.selector, self.namespaces, self.namespace_selector, self.topology_key
        )


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """A topology spread constraint with ``matchLabelKeys`` merged into its selector."""

    max_skew: int
    topology_key: str
    hard: bool  # DoNotSchedule
    selector: Selector
    min_domains: int
    honor_node_affinity: bool
    honor_node_taints: bool

    @staticmethod
    def resolve(c: TopologySpreadConstraint, owner_labels: dict[str, str]) -> "SpreadConstraint":
        selector = Selector.of(c.label_selector)
        extra = [(k, "In", frozenset([owner_labels[k]])) for k in c.match_label_keys if k in owner_labels]
        return SpreadConstraint(
            max_skew=c.max_skew,
            topology_key=c.topology_key,
            hard=c.when_unsatisfiable == "DoNotSchedule",
            selector=selector.with_requirements(extra),
            min_domains=c.min_domains or 1,
            honor_node_affinity=c.node_affinity_policy == "Honor",
            honor_node_taints=c.node_taints_policy == "Honor",
        )


# The node name label every kubelet sets: a topology key over it makes one domain per node.
HOSTNAME_LABEL = "kubernetes.io/hostname"


def spreads_itself_per_node(pod) -> bool:
    """A ScheduleAnyway constraint of the pod (a ``PodInfo``) on the hostname key that counts the
    pod's own class: read by topology spread's crowding term and by re-packing."""
    return any(
        not c.hard and c.topology_key == HOSTNAME_LABEL and c.selector.matches(pod.labels)
        for c in pod.spread
    )


# The taint effects that keep a pod off a node (TaintToleration's filter, spread's
# nodeTaintsPolicy); PreferNoSchedule only affects scoring.
NO_SCHEDULE_EFFECTS = ("NoSchedule", "NoExecute")


def untolerated(tolerations: Iterable[Toleration], taints: Iterable[Taint],
                effects: tuple[str, ...] = NO_SCHEDULE_EFFECTS) -> Optional[Taint]:
    """The first taint with one of ``effects`` that no toleration tolerates, or None: the
    toleration rule TaintToleration filters with and the node index caches for scoring."""
    tolerations = tuple(tolerations)
    for taint in taints:
        if taint.effect not in effects:
            continue
        if not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None

"""``ClusterState``: what is on every node right now, kept up to date as pods are assumed.

The greedy scheduler assumes pods into it one at a time, the validator replays a plan's final
state into it, the CP-SAT builder reads it as the starting point. Resources are numpy arrays
(nodes × resources, ``pods`` being one column) so that fitting a pod against every node is one
vector operation. Pod-matching counts per node (for inter-pod affinity and topology spread) are
registered lazily by the rules that need them and maintained incrementally on every add/remove,
so no rule ever rescans all pods for each incoming pod.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Optional, Protocol

import numpy as np

from models.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS

from .info import NodeInfo, PodInfo
from .volume_catalog import EMPTY, VolumeCatalog
from .terms import NOTHING, AffinityTerm, PairIndex, Selector, required_pair

BASE_RESOURCES = (CPU, MEMORY, EPHEMERAL_STORAGE, PODS)


@dataclass(frozen=True, slots=True)
class PodMatcher:
    """Which pods a counter counts: namespace filter, label selector, and whether terminating
    pods count (inter-pod affinity counts them; topology spread does not)."""

    selector: Selector
    namespaces: frozenset[str]
    namespace_selector: Optional[Selector]
    include_terminating: bool

    @staticmethod
    def of_term(term: AffinityTerm) -> "PodMatcher":
        return PodMatcher(term.selector, term.namespaces, term.namespace_selector, True)

    @staticmethod
    def of_spread(selector: Selector, namespace: str) -> "PodMatcher":
        """Topology spread counts no pod at all under an empty selector (``{}`` with nothing
        merged in): kube-scheduler's countPodsMatchSelector returns 0 for ``selector.Empty()``."""
        return PodMatcher(NOTHING if selector.is_empty else selector, frozenset([namespace]), None, False)

    def matches(self, pod: PodInfo) -> bool:
        if pod.terminating and not self.include_terminating:
            return False
        if pod.namespace not in self.namespaces and not (
            self.namespace_selector is not None and self.namespace_selector.matches(pod.ns_labels)
        ):
            return False
        return self.selector.matches(pod.labels)


class Matcher(Protocol):
    """What a per-node pod counter counts by (hashable, the counter's key): a ``PodMatcher``, or
    ``plugins.shared.all_terms.AllTerms`` (every required term of one pod)."""

    def __hash__(self) -> int: ...

    def matches(self, pod: PodInfo) -> bool: ...


class PluginState(Protocol):
    """A rule's own bookkeeping on a state (``ClusterState.books``, by plugin name), which the
    state knows nothing of: kube-scheduler's Reserve and Unreserve as pods come and go, a copy
    for each copy of the state, and what it becomes when nodes are merged into classes."""

    def reserve(self, pod: PodInfo, node: int) -> None:
        """``pod`` is now on ``node``."""
        ...

    def reserve_many(self, placed: list[tuple[PodInfo, int]]) -> None:
        """``reserve`` for each pair (a state filled with the bound pods at once)."""
        ...

    def unreserve(self, pod: PodInfo, node: int) -> None:
        """``pod`` left ``node``."""
        ...

    def copy(self) -> PluginState:
        """An independent copy (it may share what neither side writes until it does)."""
        ...

    def merged(self, members: list[list[int]]) -> Optional[PluginState]:
        """The book over merged nodes, one per group of ``members`` (None: not carried over)."""
        ...


class Book(ABC):
    """``PluginState``'s defaults: ``reserve_many`` adds pod by pod, merging carries nothing. A
    book says what ``reserve`` records (abstract: a book without it cannot be made)."""

    @abstractmethod
    def reserve(self, pod: PodInfo, node: int) -> None:
        """``pod`` was placed on ``node``."""

    def reserve_many(self, placed: list[tuple[PodInfo, int]]) -> None:
        for pod, node in placed:
            self.reserve(pod, node)

    def merged(self, members: list[list[int]]) -> Optional[PluginState]:
        return None


# (new state) -> the rule's book for it, or None: it keeps none there.
BookMaker = Callable[["ClusterState"], Optional[PluginState]]


# Request rows kept by requests object (``ClusterState._rows``) before they are started over.
ROWS_KEPT = 16384


class ClusterState:
    # The rules' books every new state starts with, by plugin name (set by the plugin registry:
    # this module stands below the plugins and names none).
    book_makers: tuple[tuple[str, BookMaker], ...] = ()

    def __init__(self, nodes: list[NodeInfo], resources: Iterable[str]) -> None:
        extra = sorted(set(resources) - set(BASE_RESOURCES))
        self.nodes = nodes
        self.node_index = {n.name: n.index for n in nodes}
        self.resources: list[str] = [*BASE_RESOURCES, *extra]
        self.res_index = {r: i for i, r in enumerate(self.resources)}
        n, r = len(nodes), len(self.resources)
        self.alloc = np.zeros((n, r), dtype=np.int64)
        for node in nodes:
            for name, value in node.allocatable.items():
                if name in self.res_index:
                    self.alloc[node.index, self.res_index[name]] = value
        # The scoring-only non-zero cpu and memory, then the used amounts, side by side in one
        # array (``requested``): the score kernels gather a node's row of both at once.
        # ``nonzero`` and ``used`` are views of it, written in place.
        self.requested = np.zeros((n, 2 + r), dtype=np.int64)
        self.used = self.requested[:, 2:]
        self.free = self.alloc.copy()  # alloc − used, kept current by add/remove
        # ``alloc`` as Python ints (``alloc_rows``), made on first use and shared with copies:
        # ``alloc`` is never written after this.
        self._alloc_rows: list[Optional[list[list[int]]]] = [None]
        self.nonzero = self.requested[:, :2]  # scoring-only cpu, memory
        self.pods_on: list[dict[str, PodInfo]] = [{} for _ in nodes]
        self.where: dict[str, int] = {}
        self._counters: dict[Matcher, np.ndarray] = {}
        self._counter_order: list[tuple[Matcher, np.ndarray]] = []  # ``_counters`` as registered
        # Per counter, each change to it since it was registered (or the state copied): (node,
        # delta). A cache of sums over a counter catches up on the few changes since it last
        # looked instead of summing every node again (``domain_counts``).
        self._logs: dict[Matcher, list[tuple[int, int]]] = {}
        # (matcher, topology key, eligible mask) -> (counts, present, counted, log position)
        self._domain_sums: dict[tuple, tuple[np.ndarray, np.ndarray, np.ndarray, int]] = {}
        self._matching: dict[tuple, tuple[int, list[tuple[np.ndarray, list[tuple[int, int]]]]]] = {}  # see _counters_matching
        self._match_cache: dict[Matcher, dict[tuple, bool]] = {}
        # Pods in the state by what a matcher reads of them ((namespace, labels), terminating):
        # a pod of the group, and how many of the group each node holds. A new counter asks each
        # group once instead of each pod: a dump of Deployments has a few hundred label sets for
        # tens of thousands of pods.
        self._groups: dict[tuple, tuple[PodInfo, Counter[int]]] = {}
        # Group keys by each label pair their pods carry (``_index_group``): a new counter whose
        # selector requires a label asks only the groups that have it. A group's labels never
        # change, so the index only grows, and copies share it (keys gone from one state are
        # skipped there).
        self._group_index = _GroupIndex()
        # ``_counters_matching``'s index of the counters by the label pair they require (its
        # ``size``: how many of ``_counter_order`` it covers).
        self._counter_index = PairIndex()
        self._domains: dict[str, tuple[np.ndarray, list[str]]] = {}
        # Every node whose pods changed, in order: lets per-class caches of node-local checks
        # (resources, ports) refresh only what changed since they were computed.
        self.touched: list[int] = []
        # Beside each entry of ``touched``, the key of the pod that came or went ("" when several
        # did at once, ``add_many``): a cache that depends only on some pods (preemption's lower
        # pods, never the window's) refreshes only the nodes where one of those changed.
        self.touched_by: list[str] = []
        # Per node, len(touched) just after its last entry there: ``changed_since`` reads the
        # nodes changed after a point from it at once when the record since is long.
        self.stamps = np.zeros(n, dtype=np.int64)
        # (len(touched) when computed, value): the value is the caller's (a node mask in
        # filtering, (mask, usage) in preemption).
        self.local_cache: dict[tuple, tuple[int, Any]] = {}
        # Request vectors by pod key, each with the requests dict it was made from: a pod of the
        # same key whose requests are another object (a new version of it) gets its own. Shared
        # with copies (same columns) and safe to: an entry is never changed, only replaced.
        self._vectors: dict[str, tuple[dict[str, int], np.ndarray]] = {}
        # The same rows by requests object (replicas share theirs, ``info.SpecMemo``): a pod met
        # for the first time takes its workload's row instead of making one. Each entry holds
        # the object whose id is its key. Shared with copies, as ``_vectors`` is.
        self._rows: dict[int, tuple[dict[str, int], np.ndarray]] = {}
        self.removals = 0  # pods taken out of the state so far
        # How many pods of each priority the state holds: preemption asks "is any pod below
        # this priority at all?" before looking node by node.
        self.priorities: Counter[int] = Counter()
        # Copy on write: a copy shares the per-node pod dicts, and the
        # per-group node counters, with the state it was copied from; each side copies one
        # before its first change to it (``_own``, ``_own_group``). None: every one is its own.
        self._owned: Optional[set[int]] = None
        self._owned_groups: Optional[set[tuple]] = None
        # The storage objects of the snapshot (claims, volumes, classes and CSI limits), which the
        # volume rules read; set by whoever builds the state (EMPTY: none).
        self.volumes: VolumeCatalog = EMPTY
        # Each rule's own bookkeeping, by plugin name (``PluginState``): reserved and unreserved
        # as pods are added and removed, copied with the state.
        self.books: dict[str, PluginState] = {}
        for name, make in self.book_makers:
            book = make(self)
            if book is not None:
                self.books[name] = book

    def attach(self, name: str, book: PluginState) -> None:
        """Give the state a rule's book once the state exists (a rule reading the snapshot first,
        in its ``prepare``): the book counts the pods already in the state itself (made from the
        snapshot, or ``reserve_many(state.pods())`` first)."""
        self.books[name] = book

    # -- resources ---------------------------------------------------------------------------

    def vector(self, pod: PodInfo) -> np.ndarray:
        """The pod's request as a row over ``resources`` (``pods`` = 1). Read-only, cached."""
        hit = self._vectors.get(pod.key)
        if hit is not None and hit[0] is pod.requests:
            return hit[1]
        requests = pod.requests
        shared = self._rows.get(id(requests))
        if shared is not None and shared[0] is requests:
            vec = shared[1]
        else:
            vec = self._row(requests)
            vec.flags.writeable = False
            if len(self._rows) >= ROWS_KEPT:  # a state kept window after window meets new ones
                self._rows = {}
            self._rows[id(requests)] = (requests, vec)
        self._vectors[pod.key] = (requests, vec)
        return vec

    def forget_vectors(self, keys: Iterable[str]) -> None:
        """Drop the request vectors cached for these pod keys (pods gone from the cluster), so
        a state kept window after window does not hold every pod it ever saw."""
        vectors = self._vectors
        for key in keys:
            vectors.pop(key, None)

    def keep_vectors_of(self, keys: Iterable[str]) -> None:
        """Keep only the vectors cached for these pod keys (copies made before keep theirs)."""
        vectors = self._vectors
        self._vectors = {key: hit for key in keys if (hit := vectors.get(key)) is not None}

    # -- membership --------------------------------------------------------------------------

    def add(self, pod: PodInfo, node: int) -> None:
        if pod.key in self.where:
            raise ValueError(f"pod {pod.key} is already on node {self.nodes[self.where[pod.key]].name}")
        self.where[pod.key] = node
        self._own(node)
        self.pods_on[node][pod.key] = pod
        vec = self.vector(pod)
        self.used[node] += vec
        self.free[node] -= vec
        self.nonzero[node, 0] += pod.nonzero_cpu
        self.nonzero[node, 1] += pod.nonzero_mem
        self.priorities[pod.priority] += 1
        self._count(pod, node, +1)
        self.touched.append(node)
        self.touched_by.append(pod.key)
        self.stamps[node] = len(self.touched)
        for book in self.books.values():
            book.reserve(pod, node)

    def forget_touched(self, since: int = 0) -> None:
        """Drop the record of changed nodes from position ``since`` on (a dry run that put
        everything back; a kept state whose record nobody reads). Their ``stamps`` stay: a node
        it names may be read as changed once more, which only costs its recomputation."""
        del self.touched[since:]
        del self.touched_by[since:]

    def forget_changes(self) -> None:
        """Drop the counters' records of changes and the sums read from them (a kept state whose
        records nobody reads: a live scheduler's assumed state would otherwise grow them for as
        long as it runs). A cache still reading an old record stops seeing changes: only a state
        no cache reads may forget them (the caches live on copies, which keep records of their
        own)."""
        self._logs = {m: [] for m in self._logs}
        self._matching = {}  # held the old records
        self._domain_sums = {}

    # Up to this many entries of ``touched`` since a point, ``changed_since`` reads them one by
    # one; more, it scans ``stamps`` (one numpy pass over the nodes, cheaper than a Python set of
    # a thousand entries: a class met again after every other class of a big window had a turn).
    scan_after = 256

    def changed_since(self, seen: int) -> np.ndarray:
        """Every node with an entry in ``touched`` from position ``seen`` on, each once (possibly
        with nodes whose entries ``forget_touched`` dropped)."""
        if len(self.touched) - seen > self.scan_after:
            return np.flatnonzero(self.stamps > seen)
        return np.fromiter(set(self.touched[seen:]), dtype=np.int64)

    def add_many(self, placed: list[tuple[PodInfo, int]]) -> None:
        """``add(pod, node)`` for each pair, from per-node aggregates: the pods of one requests
        object share a request row, summed into the arrays per node at once, and the group
        counters counted per (labels, terminating). What the state holds afterwards is what the
        adds one by one give (a node changed once in ``touched``, as a cache refreshing it reads
        it once anyway). A state with counters, volumes or devices, or a pod already in it, adds
        one by one."""
        if (self._counters
                or self._owned is not None or self._owned_groups is not None
                or len({pod.key for pod, _ in placed} | self.where.keys()) != len(placed) + len(self.where)):
            for pod, node in placed:
                self.add(pod, node)
            return
        rows: dict[int, int] = {}  # id(requests) -> row of ``vectors``
        vectors: list[np.ndarray] = []
        row_of = np.empty(len(placed), dtype=np.int64)
        node_of = np.empty(len(placed), dtype=np.int64)
        nonzero = np.empty((len(placed), 2), dtype=np.int64)
        priorities: Counter[int] = Counter()
        groups: dict[tuple, list[int]] = {}
        where, pods_on = self.where, self.pods_on
        for i, (pod, node) in enumerate(placed):
            requests = pod.requests
            row = rows.get(id(requests))
            if row is None:
                row = rows[id(requests)] = len(vectors)
                vectors.append(self._row(requests))
            row_of[i] = row
            node_of[i] = node
            nonzero[i, 0] = pod.nonzero_cpu
            nonzero[i, 1] = pod.nonzero_mem
            key = pod.key
            where[key] = node
            pods_on[node][key] = pod
            priorities[pod.priority] += 1
            indices = groups.get(gkey := (pod.match_key, pod.terminating))
            if indices is None:
                groups[gkey] = [i]
            else:
                indices.append(i)
        if vectors:
            added = np.zeros_like(self.used)
            np.add.at(added, node_of, np.stack(vectors)[row_of])
            self.used += added
            self.free -= added
            np.add.at(self.nonzero, node_of, nonzero)
        self.priorities.update(priorities)
        for gkey, members in groups.items():
            counted = self._groups.get(gkey)
            if counted is None:
                counted = self._groups[gkey] = (placed[members[0]][0], Counter())
                self._group_index.add(gkey, counted[0])
            counted[1].update(node_of[members].tolist())
        changed = np.unique(node_of)
        self.stamps[changed] = len(self.touched) + np.arange(1, len(changed) + 1)
        self.touched.extend(changed.tolist())
        self.touched_by.extend([""] * len(changed))
        for book in self.books.values():
            book.reserve_many(placed)

    def _row(self, requests: dict[str, int]) -> np.ndarray:
        """A request as a row over ``resources`` (``pods`` = 1), as ``vector`` makes it."""
        vec = np.zeros(len(self.resources), dtype=np.int64)
        for name, value in requests.items():
            idx = self.res_index.get(name)
            if idx is None:  # a resource no node and no window pod was registered with
                raise KeyError(name)
            vec[idx] = value
        vec[self.res_index[PODS]] = 1
        return vec

    def remove(self, pod: PodInfo) -> int:
        node = self.where.pop(pod.key)
        self.removals += 1
        self._own(node)
        del self.pods_on[node][pod.key]
        vec = self.vector(pod)
        self.used[node] -= vec
        self.free[node] += vec
        self.nonzero[node, 0] -= pod.nonzero_cpu
        self.nonzero[node, 1] -= pod.nonzero_mem
        self.priorities[pod.priority] -= 1
        if not self.priorities[pod.priority]:
            del self.priorities[pod.priority]
        self._count(pod, node, -1)
        self.touched.append(node)
        self.touched_by.append(pod.key)
        self.stamps[node] = len(self.touched)
        for book in self.books.values():
            book.unreserve(pod, node)
        return node

    def _own(self, node: int) -> None:
        """Make the node's pod dict this state's own before changing it."""
        owned = self._owned
        if owned is not None and node not in owned:
            self.pods_on[node] = dict(self.pods_on[node])
            owned.add(node)

    def _count(self, pod: PodInfo, node: int, delta: int) -> None:
        key = (pod.match_key, pod.terminating)
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = (pod, Counter())
            self._group_index.add(key, pod)
            if self._owned_groups is not None:
                self._owned_groups.add(key)
        elif self._owned_groups is not None and key not in self._owned_groups:
            group = self._groups[key] = (group[0], Counter(group[1]))
            self._owned_groups.add(key)
        per_node = group[1]
        per_node[node] += delta
        if not per_node[node]:
            del per_node[node]
            if not per_node:
                del self._groups[key]
        for counts, log in self._counters_matching(pod):
            counts[node] += delta
            log.append((node, delta))

    def _counters_matching(self, pod: PodInfo) -> list[tuple[np.ndarray, list[tuple[int, int]]]]:
        """The counters that count ``pod``, remembered per (labels, terminating) and extended by
        the counters registered since (counters are only ever added, in ``_counter_order``):
        saves hashing every matcher on every add and remove, and asking every one again when a
        new one comes (a window of hundreds of spread and anti-affinity apps registers hundreds)."""
        key = (pod.match_key, pod.terminating)
        hit = self._matching.get(key)
        order = self._counter_order
        if hit is None:
            hit = self._matching[key] = (len(order), [(order[i][1], self._logs[order[i][0]]) for i in self._counters_for(pod)
                                                      if self._matches(order[i][0], pod)])
        elif hit[0] != len(order):
            # Only the counters registered since that may count the pod (by the label pairs
            # they require): a pass registering hundreds of counters would otherwise ask each
            # of them about every (labels, terminating) seen before.
            more = [(order[i][1], self._logs[order[i][0]]) for i in self._counters_for(pod, hit[0])
                    if self._matches(order[i][0], pod)]
            hit = self._matching[key] = (len(order), hit[1] + more if more else hit[1])
        return hit[1]

    def _counters_for(self, pod: PodInfo, since: int = 0) -> list[int]:
        """Positions in ``_counter_order`` from ``since`` on of the counters that may count ``pod``:
        those requiring a label pair the pod has, and those requiring none, in registration order."""
        index = self._counter_index
        order = self._counter_order
        if index.size > len(order):  # (never: counters are only added) start over
            index = self._counter_index = PairIndex()
        for i in range(index.size, len(order)):
            index.add(_required_pair(order[i][0]))
        return index.candidates(pod.labels, since)

    def _groups_for(self, matcher: Matcher) -> Iterable[tuple[tuple, tuple[PodInfo, Counter[int]]]]:
        """The groups that may hold pods ``matcher`` counts: with a label it requires, or all."""
        pair = _required_pair(matcher)
        if pair is None:
            return self._groups.items()
        groups = self._groups
        return [(key, groups[key]) for key in self._group_index.with_pair(pair) if key in groups]

    def _matches(self, matcher: Matcher, pod: PodInfo) -> bool:
        verdicts = self._match_cache_of(matcher)
        key = (pod.match_key, pod.terminating)
        hit = verdicts.get(key)
        if hit is None:
            hit = verdicts[key] = matcher.matches(pod)
        return hit

    def _match_cache_of(self, matcher: Matcher) -> dict[tuple, bool]:
        """What ``matcher`` said of each ((namespace, labels), terminating) it was asked about."""
        verdicts = self._match_cache.get(matcher)
        if verdicts is None:
            verdicts = self._match_cache[matcher] = {}
        return verdicts

    def matches(self, matcher: Matcher, pod: PodInfo) -> bool:
        return self._matches(matcher, pod)

    def matcher(self, matcher: Matcher) -> Callable[[PodInfo], bool]:
        """``matches(matcher, ·)`` as a function, the matcher looked up once: for a caller asking
        of one matcher about many pods (preemption's dry run asks of each victim)."""
        verdicts = self._match_cache_of(matcher)

        def matches(pod: PodInfo) -> bool:
            key = (pod.match_key, pod.terminating)
            hit = verdicts.get(key)
            if hit is None:
                hit = verdicts[key] = matcher.matches(pod)
            return hit

        return matches

    # -- queries the rules share -------------------------------------------------------------

    def match_counts(self, matcher: Matcher) -> np.ndarray:
        """Per node, how many pods in the state ``matcher`` counts (kept current from now on)."""
        counts = self._counters.get(matcher)
        if counts is None:
            counts = np.zeros(len(self.nodes), dtype=np.int64)
            verdicts = self._match_cache_of(matcher)
            for key, (pod, per_node) in self._groups_for(matcher):
                hit = verdicts.get(key)
                if hit is None:
                    hit = verdicts[key] = matcher.matches(pod)
                if hit:
                    for node, count in per_node.items():
                        counts[node] += count
            self._counters[matcher] = counts
            self._counter_order.append((matcher, counts))
            self._logs[matcher] = []
        return counts

    def domain_counts(self, matcher: Matcher, topology_key: str, eligible: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The pods ``matcher`` counts per domain of ``topology_key`` over the ``eligible`` nodes
        that carry the key; which domains have such a node (``present``); and those nodes
        (``counted``). Kept per (matcher, key, eligible) and brought up to date from the
        counter's own changes since the last ask, so a constraint asked about by pod after pod
        costs its few changes, not a sum over every node. The arrays are read-only (they are
        shared): a caller that changes one copies it first."""
        counter = self.match_counts(matcher)
        log = self._logs[matcher]
        key = (matcher, topology_key, eligible.tobytes())
        hit = self._domain_sums.get(key)
        if hit is None:
            ids, values = self.domains(topology_key)
            counted = eligible & (ids >= 0)
            counts = np.bincount(ids[counted], weights=counter[counted], minlength=len(values)).astype(np.int64)
            present = np.zeros(len(values), dtype=bool)
            present[ids[counted]] = True
            for array in (counts, present, counted):
                array.flags.writeable = False
            self._domain_sums[key] = (counts, present, counted, len(log))
            return counts, present, counted
        counts, present, counted, seen = hit
        if seen < len(log):
            # A new array: an older answer may still be held (a cycle's PreFilter counts).
            counts = counts.copy()
            ids = self.domains(topology_key)[0]
            for node, delta in log[seen:]:
                if counted[node]:
                    counts[ids[node]] += delta
            counts.flags.writeable = False
            self._domain_sums[key] = (counts, present, counted, len(log))
        return counts, present, counted

    def counter_changes(self, matcher: Matcher) -> list[tuple[int, int]]:
        """Each change to ``match_counts(matcher)`` since it was registered here, (node, delta)
        in order (registering it if needed); read-only for the caller."""
        self.match_counts(matcher)
        return self._logs[matcher]

    def pods_matching(self, matcher: Matcher) -> list[tuple[PodInfo, int]]:
        """The pods in the state ``matcher`` counts, node by node as ``pods()`` lists them: only
        the nodes of the (labels, terminating) groups it matches are read, not every pod."""
        verdicts = self._match_cache_of(matcher)
        nodes: set[int] = set()
        for key, (pod, per_node) in self._groups_for(matcher):
            hit = verdicts.get(key)
            if hit is None:
                hit = verdicts[key] = matcher.matches(pod)
            if hit:
                nodes.update(per_node)
        return [(p, n) for n in sorted(nodes) for p in self.pods_on[n].values() if self._matches(matcher, p)]

    def domains(self, topology_key: str) -> tuple[np.ndarray, list[str]]:
        """Per node, the id of its value for ``topology_key`` (−1 where the label is missing)."""
        hit = self._domains.get(topology_key)
        if hit is None:
            values: dict[str, int] = {}
            ids = np.full(len(self.nodes), -1, dtype=np.int64)
            for node in self.nodes:
                value = node.labels.get(topology_key)
                if value is not None:
                    ids[node.index] = values.setdefault(value, len(values))
            hit = self._domains[topology_key] = (ids, list(values))
        return hit

    def pods(self) -> Iterable[tuple[PodInfo, int]]:
        for node, pods in enumerate(self.pods_on):
            for pod in pods.values():
                yield pod, node

    def merged(self, nodes: list[NodeInfo], members: list[list[int]], alloc: np.ndarray) -> "ClusterState":
        """A state over ``nodes``, one per group of this state's nodes (``members``), with
        allocatable ``alloc``, each holding every pod of its members: what adding those pods one
        by one gives (node classes, ``cpsat/node_classes.py``), made from the per-node aggregates
        instead — sums of the arrays and counters, the pod dicts joined; each rule's book as it
        merges itself (``PluginState.merged``; volumes and devices are not carried over)."""
        out = ClusterState(nodes, self.resources)
        assert out.resources == self.resources  # the request vectors are shared: the same columns
        to = np.empty(len(self.nodes), dtype=np.int64)
        for k, group in enumerate(members):
            to[group] = k
        out.alloc = np.array(alloc, dtype=np.int64)
        out._alloc_rows = [None]
        np.add.at(out.used, to, self.used)
        out.free = out.alloc - out.used
        np.add.at(out.nonzero, to, self.nonzero)
        for k, group in enumerate(members):
            on = out.pods_on[k]
            for n in group:
                on.update(self.pods_on[n])
            out.where.update(dict.fromkeys(on, k))
        out.priorities = Counter(self.priorities)
        for key, (pod, per_node) in self._groups.items():
            counts: Counter[int] = Counter()
            for n, c in per_node.items():
                counts[int(to[n])] += c
            out._groups[key] = (pod, counts)
        out._group_index = self._group_index  # the same keys
        out._match_cache = self._match_cache
        out._vectors = self._vectors
        out._rows = self._rows
        out.books = {}
        for name, book in self.books.items():
            carried = book.merged(members)
            if carried is not None:
                out.books[name] = carried
        return out

    @property
    def alloc_rows(self) -> list[list[int]]:
        """``alloc`` row by row in Python ints (scalar score kernels read single nodes): made
        once per node set, not once per window — every copy of a state shares it."""
        box = self._alloc_rows
        rows = box[0]
        if rows is None:
            rows = box[0] = self.alloc.tolist()
        return rows

    def copy(self) -> "ClusterState":
        other = ClusterState.__new__(ClusterState)
        other.nodes = self.nodes
        other.node_index = self.node_index
        other.resources = self.resources
        other.res_index = self.res_index
        other.alloc = self.alloc
        other._alloc_rows = self._alloc_rows
        other.requested = self.requested.copy()
        other.used = other.requested[:, 2:]
        other.free = self.free.copy()
        other.nonzero = other.requested[:, :2]
        # Shared until written, on both sides (``_own``).
        other.pods_on = list(self.pods_on)
        self._owned, other._owned = set(), set()
        # ``.copy()``, not ``dict()``: CPython's dict() copies a dict that has had deletions key by
        # key, five times slower (3,000 pods: 63 against 12 µs; the kept state is copied twice per
        # window); ``copy`` clones its table, deleted slots and all.
        other.where = self.where.copy()
        other._counters = {m: c.copy() for m, c in self._counters.items()}
        other._counter_order = list(other._counters.items())
        other._logs = {m: [] for m in other._counters}
        other._domain_sums = {}
        other._matching = {}  # holds this state's arrays
        other._match_cache = self._match_cache
        other._groups = self._groups.copy()
        other._group_index = self._group_index
        other._counter_index = PairIndex()
        self._owned_groups, other._owned_groups = set(), set()
        other._domains = self._domains
        other.touched = []
        other.touched_by = []
        other.stamps = np.zeros(len(self.nodes), dtype=np.int64)
        other.local_cache = {}
        other._vectors = self._vectors
        other._rows = self._rows
        other.removals = 0
        other.priorities = Counter(self.priorities)
        other.books = {name: book.copy() for name, book in self.books.items()}
        other.volumes = self.volumes
        return other


def _required_pair(matcher: Matcher) -> Optional[tuple[str, str]]:
    """A label pair every pod ``matcher`` counts carries (its selector's first equality), or None
    when it requires none (``AllTerms``, selectors of expressions only)."""
    return required_pair(matcher.selector) if isinstance(matcher, PodMatcher) else None


class _GroupIndex:
    """Group keys by label pair (``ClusterState._group_index``); grows only."""

    __slots__ = ("by_pair", "seen")

    def __init__(self) -> None:
        self.by_pair: dict[tuple[str, str], list[tuple]] = {}
        self.seen: set[tuple] = set()

    def add(self, key: tuple, pod: PodInfo) -> None:
        if key in self.seen:
            return
        self.seen.add(key)
        for pair in pod.labels.items():
            self.by_pair.setdefault(pair, []).append(key)

    def with_pair(self, pair: tuple[str, str]) -> list[tuple]:
        return self.by_pair.get(pair, [])

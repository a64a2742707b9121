"""The filter plugins, in kube-scheduler's order, and the machinery to run them.

Static filters (NodeUnschedulable, NodeName, TaintToleration, NodeAffinity) read only the pod
and the node, so their verdict is computed once per pod class and node signature and cached
(``StaticFilters``): they prune the solver's variables and never need a CP-SAT encoding. The
dynamic filters read the cluster state: each is a plugin's ``cycle`` hook
(``plugin_api.CycleFilter``, listed by ``registry.CYCLE_FILTERS``); ``Cycle`` holds their
PreFilter results for one pod against one state, and offers both a per-node ``status`` (with
kube-scheduler's reasons) and a vectorised ``feasible`` mask. It names no dynamic filter: a new
one is a hook in its plugin's ``PLUGIN``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Optional

import numpy as np

from .framework import SUCCESS, Status, fit_error_message, reason_histogram
from .info import NodeInfo, PodInfo, node_derived
from .state import ClusterState
from .plugin_api import CycleFilter, NodeDryRun
from .plugins import registry


def _cache_key(pod: PodInfo) -> tuple:
    return ("class", pod.class_id) if pod.class_id >= 0 else ("pod", pod.key)


def _static_key(pod: PodInfo) -> tuple:
    """What the static filters read of a pod (node name, selector, required node affinity,
    tolerations): pods that agree on it get the same verdict on every node. Many classes share
    one: 500 gangs of one shape are 500 classes, since the group tells them apart, but one key."""
    required = pod.required_node_affinity
    return (
        pod.node_name,
        tuple(sorted(pod.node_selector.items())),
        required.model_dump_json() if required is not None else "",
        tuple(t.model_dump_json() for t in pod.tolerations),
    )


def _node_groups(nodes: list[NodeInfo], keys: frozenset[str], by_name: bool) -> list[np.ndarray]:
    """The nodes' indices grouped by what static filters read of them (read-only arrays)."""
    groups: dict[tuple, list[int]] = {}
    for node in nodes:
        groups.setdefault(node.static_signature(keys, by_name), []).append(node.index)
    arrays = [np.array(ix, dtype=np.int64) for ix in groups.values()]
    for array in arrays:
        array.flags.writeable = False
    return arrays


# The static filters' verdicts are kept per list of nodes (``node_derived``), by what they read of
# a pod; emptied past this many keys (pods naming their node, or one node each by affinity, are
# one key apiece).
_VERDICTS_KEPT = 2048


def _shared_verdicts(nodes: list[NodeInfo]) -> tuple[dict, dict, dict]:
    """(statuses, masks, named masks: name -> masks) by static key, for ``nodes``."""
    verdicts: tuple[dict, dict, dict] = node_derived(nodes, "static verdicts", lambda: ({}, {}, {}))
    if len(verdicts[0]) + sum(len(cache) for cache in verdicts[2].values()) >= _VERDICTS_KEPT:
        verdicts[0].clear()
        verdicts[1].clear()
        verdicts[2].clear()
    return verdicts


class StaticFilters:
    """First static failure of every node for a pod, cached per pod class and node signature."""

    def __init__(self, nodes: list[NodeInfo], pods: list[PodInfo]) -> None:
        self.nodes = nodes
        keys: set[str] = set()
        by_name = False
        for pod in pods:
            keys.update(pod.node_selector)
            if pod.node_name:
                by_name = True
            req = pod.required_node_affinity
            terms = list(req.node_selector_terms) if req else []
            terms += [t for _, t in pod.preferred_node_terms]
            for term in terms:
                keys.update(e.key for e in term.match_expressions)
                if term.match_fields:
                    by_name = True
        label_keys = frozenset(keys)
        self.groups = node_derived(nodes, ("static groups", label_keys, by_name),
                                   lambda: _node_groups(nodes, label_keys, by_name))
        self._static_keys: dict[tuple, tuple] = {}  # _cache_key -> _static_key
        # Verdicts by _static_key: a node's verdict depends on the pod's static key alone.
        self._statuses, self._masks, self._named = _shared_verdicts(nodes)

    def _key(self, pod: PodInfo) -> tuple:
        key = _cache_key(pod)
        hit = self._static_keys.get(key)
        if hit is None:
            hit = self._static_keys[key] = _static_key(pod)
        return hit

    def statuses(self, pod: PodInfo) -> list[Status]:
        key = self._key(pod)
        hit = self._statuses.get(key)
        if hit is None:
            hit = [SUCCESS] * len(self.nodes)
            for group in self.groups:
                rep = self.nodes[int(group[0])]
                status = _first_static_failure(pod, rep)
                for n in group:
                    hit[n] = status
            # PreFilterResults: nodes outside one are never filtered; when it names no node at
            # all, PreFilter itself fails and every node carries its status (the first
            # plugin's, where two restrict the pod).
            for node_names in reversed(registry.STATIC_NODE_NAMES):
                narrowed = node_names(pod)
                if narrowed is not None:
                    allowed, outside = narrowed
                    for node in self.nodes:
                        if node.name not in allowed:
                            hit[node.index] = outside
            self._statuses[key] = hit
        return hit

    def mask(self, pod: PodInfo) -> np.ndarray:
        key = self._key(pod)
        hit = self._masks.get(key)
        if hit is None:
            hit = np.fromiter((s.ok for s in self.statuses(pod)), dtype=bool, count=len(self.nodes))
            hit.flags.writeable = False  # shared: by the pods of one static key, and across contexts
            self._masks[key] = hit
        return hit

    def node_mask(self, name: str, pod: PodInfo, check: Callable[[PodInfo, NodeInfo], bool]) -> np.ndarray:
        """The nodes where ``check(pod, node)`` holds: a static predicate that reads of the pod
        only what its static key does and of the node its labels and taints (a plugin gives it,
        e.g. topology spread's inclusion policies), asked once per node group and cached per
        static key under ``name``."""
        return self._per_group(self._named.setdefault(name, {}), pod, lambda n: check(pod, n))

    def cycle(self, pod: PodInfo, state: ClusterState, *, version: str = "1.34") -> "Cycle":
        """One pod's filter cycle against ``state`` with these static verdicts."""
        return Cycle(pod, state, self, version=version)

    def _per_group(self, cache, pod, check) -> np.ndarray:
        key = self._key(pod)
        hit = cache.get(key)
        if hit is None:
            hit = np.zeros(len(self.nodes), dtype=bool)
            for group in self.groups:
                hit[group] = check(self.nodes[int(group[0])])
            hit.flags.writeable = False
            cache[key] = hit
        return hit


def _node_names_failure(pod: PodInfo) -> Optional[str]:
    """The message of the first static PreFilter that restricts the pod to no node at all."""
    for node_names in registry.STATIC_NODE_NAMES:
        narrowed = node_names(pod)
        if narrowed is not None and not narrowed[0]:
            return narrowed[1].reasons[0]
    return None


def _first_static_failure(pod: PodInfo, node: NodeInfo) -> Status:
    for plugin in registry.STATIC_FILTERS:
        status = plugin.filter(pod, node)
        if not status.ok:
            return status
    return SUCCESS


class Cycle:
    """One pod's PreFilter results against one cluster state; then Filter per node or en masse.

    The dynamic filters are the plugins' ``cycle`` hooks (``registry.CYCLE_FILTERS``, in filter
    order); a hook that finds nothing to check for the pod is left out of the cycle."""

    def __init__(self, pod: PodInfo, state: ClusterState, static: StaticFilters, *, version: str = "1.34") -> None:
        self.pod = pod
        self.state = state
        self.static = static
        self.version = version
        filters: list[CycleFilter] = []
        local: list[CycleFilter] = []
        failed: Optional[Status] = None
        for hook in registry.CYCLE_FILTERS:  # read at each cycle: the list is the one place
            f = hook(pod, state, static, version)
            if f is not None:
                filters.append(f)
                if f.local:
                    local.append(f)
                if failed is None:
                    failed = f.failed
        self.filters = filters
        self._local = local
        # Whether only node-local filters (ports, resources) can fail beyond the static ones.
        self.node_local = len(local) == len(filters)
        # A failed PreFilter is every node's status.
        self.failed = failed
        self._statuses: Optional[list[Status]] = None

    def dynamic_status(self, node: NodeInfo) -> Status:
        for f in self.filters:
            status = f.status(node)
            if not status.ok:
                return status
        return SUCCESS

    def status(self, node: NodeInfo) -> Status:
        if self.failed is not None:
            return self.failed
        static = self.static.statuses(self.pod)[node.index]
        return static if not static.ok else self.dynamic_status(node)

    def statuses(self) -> list[Status]:
        """Every node's status (computed once per cycle; the state must not change meanwhile).
        The same statuses as ``status`` gives node by node, computed filter by filter over all
        nodes at once (``tests/solver/test_predicates.py`` checks the two agree): a pod that
        fails is re-examined on every node for its message and for preemption, so this path
        is as hot as placement itself."""
        if self._statuses is None:
            self._statuses = self._all_statuses()
        return self._statuses

    def _all_statuses(self) -> list[Status]:
        if self.failed is not None:
            return [self.failed] * len(self.static.nodes)
        out = list(self.static.statuses(self.pod))
        idx = np.flatnonzero(self.static.mask(self.pod))
        for f in self.filters:
            if not len(idx):
                break
            idx = f.statuses(idx, out)
        return out

    def feasible(
        self, nodes: Optional[np.ndarray] = None, limit: Optional[int] = None, allowed: Optional[np.ndarray] = None
    ) -> np.ndarray:
        """Indices (from ``nodes``, default every node, order kept) that pass every filter.

        With ``limit``, nodes are filtered in chunks along ``nodes`` and the walk stops once
        ``limit`` feasible nodes are found — kube-scheduler's numFeasibleNodesToFind.
        """
        if nodes is None:
            nodes = np.arange(len(self.static.nodes), dtype=np.int64)
        if allowed is not None:
            nodes = nodes[allowed[nodes]]
        if self.failed is not None:
            return nodes[:0]
        if self.node_local:
            mask = self._local_mask()
            if limit is not None and len(nodes) > 2 * limit:
                # Usually the head of the walk already holds ``limit`` feasible nodes: the same
                # answer without gathering the mask over every node.
                head = nodes[: 2 * limit]
                head = head[mask[head]]
                if len(head) >= limit:
                    return head[:limit]
            nodes = nodes[mask[nodes]]
            return nodes if limit is None else nodes[:limit]
        nodes = nodes[self.static.mask(self.pod)[nodes]]
        if limit is None or len(nodes) <= limit:
            return self._dynamic(nodes)
        found: list[np.ndarray] = []
        have, start, chunk = 0, 0, max(2 * limit, 256)
        while start < len(nodes) and have < limit:
            part = self._dynamic(nodes[start : start + chunk])
            found.append(part)
            have += len(part)
            start += chunk
            chunk *= 2
        out = np.concatenate(found) if found else nodes[:0]
        return out[:limit]

    def _local_mask(self) -> np.ndarray:
        """Static and node-local filters for every node, cached per pod class on the state and
        refreshed only on the nodes whose pods changed since (exact: these filters read only
        the node's own state)."""
        state, key = self.state, _cache_key(self.pod)
        hit = state.local_cache.get(key)
        if hit is None:
            mask = self.static.mask(self.pod).copy()
            idx = np.flatnonzero(mask)
            mask[idx] = False
            mask[self._dynamic(idx)] = True
        else:
            seen, mask = hit
            if seen == len(state.touched) - 1:
                # One placement since the last look, the common case: that node alone, in Python.
                node = state.touched[seen]
                fits = bool(self.static.mask(self.pod)[node])
                for f in self._local:
                    if not fits:
                        break
                    fits = f.fits(node)
                mask[node] = fits
            elif seen < len(state.touched):
                changed = state.changed_since(seen)
                changed = changed[self.static.mask(self.pod)[changed]]
                mask[changed] = False
                mask[self._dynamic(changed)] = True
        state.local_cache[key] = (len(state.touched), mask)
        return mask

    def _dynamic(self, nodes: np.ndarray) -> np.ndarray:
        """The nodes of ``nodes`` that pass every dynamic filter, each filter asked only of the
        nodes the ones before it passed."""
        for f in self.filters:
            if not len(nodes):
                break
            nodes = nodes[f.feasible(nodes)]
        return nodes

    def on_node(self, node: int) -> Optional["NodeRun"]:
        """The dynamic filters' verdict on one node as a dry run (``NodeRun``) from the state
        this cycle was made on: preemption removes and reprieves victims through it, the
        PreFilters never run again. None when some filter has no dry run (volumes, devices), the
        PreFilter failed or a static filter refuses the node."""
        if self.failed is not None or not self.static.mask(self.pod)[node]:
            return None
        runs = []
        for f in self.filters:
            run = f.on_node(node)
            if run is None:
                return None
            runs.append(run)
        return NodeRun(runs)

    def fit_error(self, *, postfilter: Optional[str] = None) -> str:
        """kube-scheduler's "0/N nodes are available: ..." for this pod in this state."""
        statuses = self.statuses()
        # A failed PreFilter replaces the histogram with its own message.
        prefilter = _node_names_failure(self.pod)
        if prefilter is None:
            prefilter = next((f.error for f in self.filters if f.error is not None), None)
        return fit_error_message(
            len(statuses), reason_histogram(statuses, failed_only=True), prefilter=prefilter, postfilter=postfilter
        )

    def histogram(self) -> Counter[str]:
        return reason_histogram(self.statuses(), failed_only=True)


class NodeRun:
    """Every dynamic filter's dry run on one node (``plugin_api.NodeDryRun``), in filter order:
    the first failure is the node's status, as ``Cycle.status`` gives it on a state changed the
    same way."""

    def __init__(self, runs: list[NodeDryRun]) -> None:
        self.runs = runs

    def remove_pod(self, pod: PodInfo) -> None:
        for run in self.runs:
            run.remove_pod(pod)

    def add_pod(self, pod: PodInfo) -> None:
        for run in self.runs:
            run.add_pod(pod)

    def status(self) -> Status:
        for run in self.runs:
            status = run.status()
            if not status.ok:
                return status
        return SUCCESS

    def fits(self) -> bool:
        for run in self.runs:  # (a loop, not ``all`` over a generator: asked ~100,000 times a window)
            if not run.fits():
                return False
        return True

    def reads(self) -> tuple:
        return tuple(run.reads() for run in self.runs)

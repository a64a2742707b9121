"""The filter plugins, in kube-scheduler's order, and the machinery to run them.

Static filters (NodeUnschedulable, NodeName, TaintToleration, NodeAffinity) read only the pod
and the node, so their verdict is computed once per pod class and node signature and cached
(``StaticFilters``): they prune the solver's variables and never need a CP-SAT encoding. The
dynamic filters (NodePorts, NodeResourcesFit, PodTopologySpread, InterPodAffinity) read the
cluster state; ``Cycle`` holds their PreFilter results for one pod against one state, and offers
both a per-node ``status`` (with kube-scheduler's reasons) and a vectorised ``feasible`` mask.
"""

from __future__ import annotations

from collections import Counter
from typing import Optional

import numpy as np

from .framework import SUCCESS, Status, fit_error_message, reason_histogram, unresolvable
from .info import NodeInfo, PodInfo, node_derived
from .state import ClusterState
from .plugins.dynamic_resources import filter as dynamic_resources
from .plugins.inter_pod_affinity import filter as inter_pod_affinity
from .plugins.node_affinity import filter as node_affinity
from .plugins.node_ports import filter as node_ports
from .plugins.node_resources_fit import filter as node_resources_fit
from .plugins.pod_topology_spread import filter as pod_topology_spread
from .plugins.taint_toleration import filter as taint_toleration
from .plugins.volume_binding.filter import VolumeCycle
from .plugins.registry import STATIC_FILTERS


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


def _shared_verdicts(nodes: list[NodeInfo]) -> tuple[dict, dict, dict, dict]:
    """(statuses, masks, affinity masks, toleration masks) by static key, for ``nodes``."""
    verdicts: tuple[dict, dict, dict, dict] = node_derived(nodes, "static verdicts", lambda: ({}, {}, {}, {}))
    if len(verdicts[0]) + len(verdicts[2]) + len(verdicts[3]) >= _VERDICTS_KEPT:
        for cache in verdicts:
            cache.clear()
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
        self._statuses, self._masks, self._affinity, self._tolerated = _shared_verdicts(nodes)

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
            allowed = node_affinity.prefilter_node_names(pod)
            for group in self.groups:
                rep = self.nodes[int(group[0])]
                status = _first_static_failure(pod, rep)
                for n in group:
                    hit[n] = status
            if allowed is not None:
                # PreFilterResult: nodes outside it are never filtered; when it names no node at
                # all, PreFilter itself fails and every node carries its "conflict" status.
                outside = unresolvable(
                    node_affinity.NAME, node_affinity.REASON_PREFILTER if allowed else node_affinity.REASON_CONFLICT
                )
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

    def affinity_mask(self, pod: PodInfo) -> np.ndarray:
        """Nodes matching nodeSelector and required node affinity (spread's inclusion policy)."""
        return self._per_group(self._affinity, pod, lambda n: node_affinity.matches(pod, n))

    def tolerated_mask(self, pod: PodInfo) -> np.ndarray:
        """Nodes whose NoSchedule/NoExecute taints the pod tolerates."""
        return self._per_group(
            self._tolerated, pod, lambda n: taint_toleration.untolerated(pod.tolerations, n.taints) is None
        )

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


def _first_static_failure(pod: PodInfo, node: NodeInfo) -> Status:
    for plugin in STATIC_FILTERS:
        status = plugin.filter(pod, node)
        if not status.ok:
            return status
    return SUCCESS


class Cycle:
    """One pod's PreFilter results against one cluster state; then Filter per node or en masse."""

    def __init__(self, pod: PodInfo, state: ClusterState, static: StaticFilters, *, version: str = "1.34") -> None:
        self.pod = pod
        self.state = state
        self.static = static
        self.version = version
        self.spread = pod_topology_spread.prefilter(pod, state, static.affinity_mask(pod), static.tolerated_mask(pod))
        self.affinity = inter_pod_affinity.prefilter(pod, state)
        self.dra = dynamic_resources.applies(pod, state)
        # The volume plugins' PreFilters: only for a pod that mounts claims.
        self.volumes = VolumeCycle(pod, state) if pod.claims else None
        self._statuses: Optional[list[Status]] = None

    @property
    def node_local(self) -> bool:
        """Whether only node-local filters (ports, resources) can fail beyond the static ones."""
        return not self.spread and self.affinity is None and not self.dra and self.volumes is None

    def dynamic_status(self, node: NodeInfo) -> Status:
        pod, state = self.pod, self.state
        status = node_ports.filter(pod, node, state)
        if status.ok:
            status = node_resources_fit.filter(pod, node, state, version=self.version)
        if status.ok and self.volumes is not None:
            status = self.volumes.status(node)
        if status.ok:
            status = pod_topology_spread.filter(pod, node, self.spread)
        if status.ok:
            status = inter_pod_affinity.filter(pod, node, self.affinity)
        if status.ok and self.dra:
            status = dynamic_resources.filter(pod, node, state)
        return status

    def status(self, node: NodeInfo) -> Status:
        if self.volumes is not None and self.volumes.failed is not None:
            return self.volumes.failed  # a failed PreFilter is every node's status
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
        pod, state = self.pod, self.state
        if self.volumes is not None and self.volumes.failed is not None:
            return [self.volumes.failed] * len(self.static.nodes)
        out = list(self.static.statuses(pod))
        idx = np.flatnonzero(self.static.mask(pod))
        if pod.host_ports and len(idx):
            port_ok = node_ports.feasible(pod, idx, state)
            for n in idx[~port_ok].tolist():
                out[n] = node_ports.filter(pod, self.static.nodes[n], state)
            idx = idx[port_ok]
        idx = self._resource_statuses(idx, out)
        if self.volumes is not None and len(idx):
            keep = []
            for n in idx.tolist():
                status = self.volumes.status(self.static.nodes[n])
                if status.ok:
                    keep.append(n)
                else:
                    out[n] = status
            idx = np.array(keep, dtype=np.int64)
        for plugin, pre in ((pod_topology_spread, self.spread), (inter_pod_affinity, self.affinity)):
            if not len(idx) or not pre:
                continue
            codes = plugin.status_codes(idx, pre)
            for n, code in zip(idx.tolist(), codes.tolist()):
                if code:
                    out[n] = plugin.STATUSES[code]
            idx = idx[codes == 0]
        if self.dra:
            for n in idx.tolist():
                out[n] = dynamic_resources.filter(pod, self.static.nodes[n], state)
        return out

    def _resource_statuses(self, idx: np.ndarray, out: list[Status]) -> np.ndarray:
        """NodeResourcesFit's statuses for the nodes ``idx`` into ``out``; the nodes that fit.
        Nodes failing on the same resources share one Status."""
        if not len(idx):
            return idx
        pod, state = self.pod, self.state
        vec = state.vector(pod)
        cols = np.flatnonzero(vec)
        short = state.free[np.ix_(idx, cols)] < vec[cols]
        fails = short.any(axis=1)
        failing = np.flatnonzero(fails)
        if not len(failing):
            return idx
        # Reasons follow the short resources; the code also depends on exceeding allocatable.
        hopeless = state.alloc[np.ix_(idx[failing], cols)] < vec[cols]
        rows = np.hstack((short[failing], hopeless))
        if rows.shape[1] <= 62:  # one integer per row: a 1-d unique, far cheaper than axis=0
            rows = rows.astype(np.int64) @ (np.int64(1) << np.arange(rows.shape[1], dtype=np.int64))
        patterns, inverse = np.unique(rows, axis=0 if rows.ndim == 2 else None, return_inverse=True)
        by_pattern = [
            node_resources_fit.filter(pod, self.static.nodes[int(idx[failing[np.flatnonzero(inverse == k)[0]]])], state, version=self.version)
            for k in range(len(patterns))
        ]
        for row, k in zip(failing.tolist(), np.ravel(inverse).tolist()):
            out[int(idx[row])] = by_pattern[k]
        return idx[~fails]

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
        if self.volumes is not None and self.volumes.failed is not None:
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
            mask[self._local_dynamic(idx)] = True
        else:
            seen, mask = hit
            if seen == len(state.touched) - 1:
                # One placement since the last look, the common case: that node alone, in Python.
                node = state.touched[seen]
                mask[node] = bool(self.static.mask(self.pod)[node]) and self._local_fits(node)
            elif seen < len(state.touched):
                changed = np.unique(np.array(state.touched[seen:], dtype=np.int64))
                changed = changed[self.static.mask(self.pod)[changed]]
                mask[changed] = False
                mask[self._local_dynamic(changed)] = True
        state.local_cache[key] = (len(state.touched), mask)
        return mask

    def _local_fits(self, node: int) -> bool:
        """``_local_dynamic`` for one node: every requested resource fits what is free (zero
        requests always fit) and no host port is taken."""
        if not node_resources_fit.fits(self.state.vector(self.pod), self.state.free[node]):
            return False
        return not self.pod.host_ports or node_ports.fits(self.pod, self.state.ports_on[node])

    def _local_dynamic(self, nodes: np.ndarray) -> np.ndarray:
        """``_dynamic`` for a node-local cycle: with no spread or affinity PreFilter results
        those two filters pass everywhere, so only resources and host ports are checked."""
        if len(nodes) == 0:
            return nodes
        nodes = nodes[node_resources_fit.feasible(self.pod, nodes, self.state)]
        if self.pod.host_ports and len(nodes):
            nodes = nodes[node_ports.feasible(self.pod, nodes, self.state)]
        return nodes

    def _dynamic(self, nodes: np.ndarray) -> np.ndarray:
        if len(nodes) == 0:
            return nodes
        ok = node_resources_fit.feasible(self.pod, nodes, self.state)
        ok &= pod_topology_spread.feasible(nodes, self.spread)
        ok &= inter_pod_affinity.feasible(nodes, self.affinity)
        if self.volumes is not None:
            ok &= np.fromiter((self.volumes.status(self.static.nodes[n]).ok for n in nodes.tolist()),
                              dtype=bool, count=len(nodes))
        nodes = nodes[ok]
        if self.pod.host_ports and len(nodes):
            nodes = nodes[node_ports.feasible(self.pod, nodes, self.state)]
        if self.dra and len(nodes):
            nodes = nodes[dynamic_resources.feasible(self.pod, nodes, self.state)]
        return nodes

    def fit_error(self, *, postfilter: Optional[str] = None) -> str:
        """kube-scheduler's "0/N nodes are available: ..." for this pod in this state."""
        statuses = self.statuses()
        # A failed PreFilter replaces the histogram with its own message.
        prefilter = node_affinity.REASON_CONFLICT if node_affinity.prefilter_node_names(self.pod) == set() else None
        if prefilter is None and self.volumes is not None:
            prefilter = self.volumes.error
        return fit_error_message(
            len(statuses), reason_histogram(statuses, failed_only=True), prefilter=prefilter, postfilter=postfilter
        )

    def histogram(self) -> Counter[str]:
        return reason_histogram(self.statuses(), failed_only=True)

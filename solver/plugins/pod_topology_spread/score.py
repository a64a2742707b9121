"""PodTopologySpread (score): prefer nodes whose domains hold fewer matching pods.

Constraints: the pod's ``ScheduleAnyway`` constraints if it declares any constraint at all;
otherwise kube-scheduler's system defaults (hostname maxSkew 3, zone maxSkew 5), which apply
only to pods selected by a Service, ReplicationController, ReplicaSet or StatefulSet and use
those objects' merged selector. No constraints: skipped.

Over the feasible nodes F, when the pod's own constraints are used (``requireAll``), a node
lacking any constraint's key is *ignored*: it scores 0 and takes no part in normalizing. Each
constraint's domains are the values its key takes on the other nodes of F (for the hostname
key, the nodes themselves), ``size_i`` their number, and ``weight_i = ln(size_i + 2)``. Matching
pods (same namespace, not terminating, selector matched; an empty selector matches nothing
here) are counted on every node of the snapshot that carries all keys (when ``requireAll``)
and passes the constraint's inclusion policies — nodeAffinityPolicy Honor: the pod's
nodeSelector and required node affinity; nodeTaintsPolicy Honor: its NoSchedule/NoExecute
taints tolerated — into the domains registered from F. A node scores
``round(Σ_i cnt_i × weight_i + (maxSkew_i − 1))`` over the constraints whose key it has (for
the hostname key, ``cnt_i`` counts the node's own pods), and is normalized as
``100 × (max + min − raw) // max`` (all 100 when max is 0).

kube-scheduler reads ``node.Labels[key]`` when registering and counting, so with the system
defaults (no ``requireAll``) a node without a zone label falls into the zone domain "" — this
is mirrored. Logarithms use ``go_log`` so the rounding matches Go's.

Approximation — the system default selector. A snapshot has no Services, ReplicaSets,
StatefulSets or ReplicationControllers, so their selectors are unknown. Defaults are applied
when the pod's controller owner reference is a ReplicaSet, StatefulSet or
ReplicationController (a pod selected only by a Service gets none), and the selector is taken
as "every label of the incoming pod, equal", minus the labels the StatefulSet controller sets
per pod or per revision (``DEFAULT_SELECTOR_IGNORED_LABELS``), within the pod's namespace. For
a ReplicaSet this is its usual selector plus the template's other labels, so it counts the
same siblings unless other pods share all those labels; a Service selector merged in by
kube-scheduler is ignored.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import numpy as np

from models.objects import OwnerReference

from ...info import PodInfo
from ...state import ClusterState, PodMatcher
from ...terms import Selector, SpreadConstraint
from ..helper import MAX_NODE_SCORE, go_log, round_half_away

if TYPE_CHECKING:
    from ...plugin_api import ScoreView as ScoreContext

NAME = "PodTopologySpread"
HOSTNAME_KEY = "kubernetes.io/hostname"
ZONE_KEY = "topology.kubernetes.io/zone"
# kube-scheduler's system default constraints (ScheduleAnyway): topology key -> maxSkew.
SYSTEM_DEFAULT_CONSTRAINTS = ((HOSTNAME_KEY, 3), (ZONE_KEY, 5))
# Controller kinds whose pods get the system defaults, with the apiVersion kube-scheduler expects.
DEFAULT_OWNER_KINDS = {"ReplicationController": "v1", "ReplicaSet": "apps/v1", "StatefulSet": "apps/v1"}
# Labels the StatefulSet controller sets per pod or per revision; never part of its selector.
DEFAULT_SELECTOR_IGNORED_LABELS = frozenset(
    {"statefulset.kubernetes.io/pod-name", "apps.kubernetes.io/pod-index", "controller-revision-hash"}
)


def controller_owner(pod: PodInfo) -> Optional[OwnerReference]:
    """The owner reference marked ``controller: true``, as ``metav1.GetControllerOf`` finds it."""
    for ref in pod.pod.metadata.owner_references:
        if ref.controller:
            return ref
    return None


def default_selector(pod: PodInfo) -> Selector:
    """The approximated merged selector of the pod's workload (see the module docstring)."""
    owner = controller_owner(pod)
    if owner is None or owner.kind not in DEFAULT_OWNER_KINDS:
        return Selector()
    if owner.api_version and owner.api_version != DEFAULT_OWNER_KINDS[owner.kind]:
        return Selector()
    labels = {k: v for k, v in pod.labels.items() if k not in DEFAULT_SELECTOR_IGNORED_LABELS}
    return Selector(equals=tuple(sorted(labels.items())))


def soft_constraints(pod: PodInfo) -> tuple[tuple[SpreadConstraint, ...], bool]:
    """(ScheduleAnyway constraints to score with, whether every node must carry all keys)."""
    if pod.spread:
        return pod.soft_spread, True
    selector = default_selector(pod)
    if selector.is_empty:
        return (), False
    return tuple(
        SpreadConstraint(
            max_skew=max_skew,
            topology_key=key,
            hard=False,
            selector=selector,
            min_domains=1,
            honor_node_affinity=True,
            honor_node_taints=False,
        )
        for key, max_skew in SYSTEM_DEFAULT_CONSTRAINTS
    ), False


def matching_pods(pod: PodInfo, constraint: SpreadConstraint, state: ClusterState) -> np.ndarray:
    """Per node, the pods this constraint counts (an empty or nil selector counts none)."""
    if constraint.selector.nothing or constraint.selector.is_empty:
        return np.zeros(len(state.nodes), dtype=np.int64)
    return state.match_counts(PodMatcher.of_spread(constraint.selector, pod.namespace))


def score(pod: PodInfo, nodes: np.ndarray, state: ClusterState, sctx: "ScoreContext") -> np.ndarray | None:
    constraints, require_all = soft_constraints(pod)
    if not constraints:
        return None
    index = sctx.index
    domains = [index.domain(c.topology_key) for c in constraints]
    carries_all = np.ones(index.size, dtype=bool)  # over every node of the snapshot
    if require_all:
        for ids, _, _ in domains:
            carries_all &= ids >= 0
    ignored = ~carries_all[nodes]
    kept = nodes[~ignored]

    total = np.zeros(len(nodes), dtype=np.float64)
    for c, (ids, ids_of, values) in zip(constraints, domains):
        per_node = matching_pods(pod, c, state)
        if c.topology_key == HOSTNAME_KEY:
            size = len(kept)
            count = per_node[nodes]
        else:
            # A missing label reads as "" in Go: such nodes share the "" domain.
            blank = ids_of.get("", len(values))
            domain = np.where(ids >= 0, ids, blank)
            registered = np.zeros(len(values) + 1, dtype=bool)
            registered[domain[kept]] = True
            size = int(registered.sum())
            counted = carries_all & registered[domain]
            if c.honor_node_affinity:
                counted &= index.required_affinity_mask(pod)
            if c.honor_node_taints:
                counted &= index.tolerated_mask(pod.tolerations)
            per_domain = np.bincount(domain[counted], weights=per_node[counted], minlength=len(values) + 1)
            count = per_domain.astype(np.int64)[domain[nodes]]
        weight = go_log(float(size + 2))
        term = count.astype(np.float64) * weight + float(c.max_skew - 1)
        total = np.where(ids[nodes] >= 0, total + term, total)

    raw = round_half_away(total)
    scored = ~ignored
    out = np.zeros(len(nodes), dtype=np.int64)
    if not scored.any():
        return out
    low, high = int(raw[scored].min()), int(raw[scored].max())
    if high == 0:
        out[scored] = MAX_NODE_SCORE
    else:
        out[scored] = MAX_NODE_SCORE * (high + low - raw[scored]) // high
    return out

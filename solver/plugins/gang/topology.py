"""Required topology for gangs: every member of a PodGroup in one domain of a node label.

Kubernetes 1.36's ``scheduling.k8s.io/v1alpha2`` PodGroup may carry
``spec.schedulingConstraints.topology: [{key}]`` (gate TopologyAwareWorkloadScheduling): all pods
of the group land in nodes sharing one value of that label. The group's ``topology_key``
(``models.workloads``) carries it here. This module holds the rule once:

* ``domain_ids`` / ``candidate_domains``: a node's domain is its value of the key; a node without
  the label is in no domain and may host no member. Members already running pin the domain;
* ``prune``: nodes outside every domain a gang may still choose never get a variable
  (``home_domain``: re-packing keeps a running gang's members in the domain they share);
* ``encode``: per gang a bool per domain, at most one chosen, members only on its nodes;
* ``check``: the validator's reading on the final state;
* ``rejected`` and ``allocation_ratio``: the message for a gang no single domain holds, and the
  fullness greedy's domain choice prefers (upstream's TAS scores domains by allocation).

Interchangeable topology gangs with no running member share a kind (``permit.kinds``), counted
per domain; every other topology gang gets its own domain literals here.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Callable, Optional

import numpy as np
from ortools.sat.python import cp_model

from models.objects import PodGroup

from ..shared import resource_fit
from .encoding import GangEncoding

if TYPE_CHECKING:
    from ...plugin_api import EncodeModel as WindowModel
    from ...state import ClusterState
    from ...plugin_api import ReplayView as Replay
    from .group import Gang

NAME = "GangTopology"


def key_of(group: Optional[PodGroup]) -> Optional[str]:
    """The node label whose one domain must hold every member of ``group`` (None: no such rule)."""
    return group.spec.topology_key if group is not None else None


def rejected(group: str, key: str, need: int, min_member: int) -> str:
    """Why a topology gang placed nothing: no one domain of its key holds the members it needs."""
    return (
        f"PodGroup {group} gets rejected: no single {key} domain has room for the {need} member(s) "
        f"it still needs (minCount {min_member}), so none is placed (all-or-nothing)"
    )


def outside_domain(key: Optional[str]) -> str:
    """The filter-style reason for nodes a topology gang's member may not use: not in the
    domain its gang chose (or lacking the label)."""
    return f"node(s) outside the {key} domain chosen for the pod's PodGroup"


def domain_ids(state: ClusterState, key: str) -> np.ndarray:
    """Per node, the id of its domain under ``key`` (−1: the node lacks the label, in no domain)."""
    return state.domains(key)[0]


def domain_name(state: ClusterState, key: str, domain: int) -> str:
    return state.domains(key)[1][domain]


def running_domains(gang: Gang, state: ClusterState, key: str) -> set[int]:
    """The domain ids of the gang's members running in ``state`` (−1 for a node lacking the key)."""
    ids = domain_ids(state, key)
    return {int(ids[n]) for pod, n in state.pods() if pod.group == gang.key}


def candidate_domains(gang: Gang, state: ClusterState, key: str) -> list[int]:
    """Domains the gang may still choose: the one its running members share, else every domain
    of the key; none when its running members already sit outside any one domain."""
    running = running_domains(gang, state, key) if gang.running else set()  # most gangs: none runs
    if running:
        return sorted(running) if len(running) == 1 and -1 not in running else []
    return list(range(len(state.domains(key)[1])))


def allowed_nodes(gang: Gang, state: ClusterState, key: str) -> np.ndarray:
    """Per node, whether a member may land there at all: in a domain the gang may choose."""
    ids = domain_ids(state, key)
    return np.isin(ids, np.array(candidate_domains(gang, state, key), dtype=np.int64))


def prune(rep, gangs: dict[str, Gang], state: ClusterState) -> np.ndarray:
    """Candidate mask for a window pod: all nodes unless it belongs to a topology gang."""
    gang = gangs.get(rep.group) if rep.group else None
    key = key_of(gang.group) if gang is not None else None
    if gang is None or key is None:
        return np.ones(len(state.nodes), dtype=bool)
    return allowed_nodes(gang, state, key)


def home_domain(state: ClusterState, key: str, nodes) -> Optional[int]:
    """The one domain holding every node of ``nodes`` (a gang's members where they run now),
    or None when they lie in several, or on a node without the label (already broken)."""
    ids = domain_ids(state, key)
    seen = {int(ids[n]) for n in nodes}
    return seen.pop() if len(seen) == 1 and -1 not in seen else None


def allocation_ratio(state: ClusterState, nodes: np.ndarray) -> float:
    """How full ``nodes`` are: requested over allocatable, averaged over the resources any of
    them has (MostAllocated's reading of a domain; greedy prefers the fullest)."""
    if not len(nodes):
        return 0.0
    return _ratio(state.alloc[nodes].sum(axis=0), state.used[nodes].sum(axis=0))


def _ratio(alloc: np.ndarray, used: np.ndarray) -> float:
    has = alloc > 0
    return float((used[has] / alloc[has]).mean()) if has.any() else 0.0


def room_by_domain(state: ClusterState, key: str, vectors: list[np.ndarray], free: np.ndarray,
                   within: Optional[np.ndarray] = None) -> np.ndarray:
    """Per domain of ``key``, the most pods of requests ``vectors`` the nodes' ``free`` room could
    hold (NodeResourcesFit alone, each pod counted as the smallest request of any; nodes outside
    ``within`` left out): no placement in the domain puts more there."""
    ids = domain_ids(state, key)
    counted = ids >= 0 if within is None else (ids >= 0) & within
    fit = resource_fit.copies(np.min(vectors, axis=0), free[counted])
    return np.bincount(ids[counted], weights=fit, minlength=len(state.domains(key)[1]))


def room_bound(gang: Gang, state: ClusterState, key: str) -> np.ndarray:
    """Per domain of ``key``, the most of the gang's window members its free room could hold."""
    return room_by_domain(state, key, [state.vector(p) for p in gang.members], state.free)


def ratio_if_placed(gang: Gang, state: ClusterState, key: str) -> np.ndarray:
    """Per domain of ``key``, its ``allocation_ratio`` once every window member of the gang is
    placed on its nodes (the same whichever nodes they take)."""
    ids = domain_ids(state, key)
    asked = np.sum([state.vector(p) for p in gang.members], axis=0)
    labelled = ids >= 0
    count = len(state.domains(key)[1])
    alloc, used = (np.stack([np.bincount(ids[labelled], weights=m[labelled, r], minlength=count)
                             for r in range(m.shape[1])], axis=1) for m in (state.alloc, state.used))
    used = used + asked
    has = alloc > 0
    ratio = np.divide(used, alloc, out=np.zeros_like(used), where=has)
    # Mean over the resources some node of the domain has (``allocation_ratio``'s reading).
    return np.where(has.any(axis=1), ratio.sum(axis=1) / np.maximum(has.sum(axis=1), 1), 0.0)


# --------------------------------------------------------------------------- CP-SAT encoding


def member_classes(wm: WindowModel, group: str) -> list:
    """The model classes of a gang's window members that may still place a pod."""
    return [c for c in wm.classes if c.rep.group == group and not isinstance(wm.placed[c.id], int)]


def members_by_domain(wm: WindowModel, members: list, key: str,
                      grouped: Optional[Callable[[int, str], dict[int, list]]] = None) -> tuple[dict[int, list], dict[int, int]]:
    """Per domain of ``key``, the member classes' variables on its nodes, and the most pods they
    could put there (the classes' sizes): what a gang's domain literals are tied to. ``grouped``:
    a class's variables by domain (default ``wm.class_vars_by_domain``)."""
    grouped = grouped or wm.class_vars_by_domain
    in_domain: dict[int, list] = defaultdict(list)
    bound: dict[int, int] = defaultdict(int)
    for cls in members:
        for d, vars_ in grouped(cls.id, key).items():
            in_domain[d].extend(vars_)
            bound[d] += cls.size
    return in_domain, bound


def encode(wm: WindowModel, enc: GangEncoding) -> None:
    """One domain per topology gang: a bool per domain its members could use, at most one true,
    and a member class's pods in a domain only when that domain is chosen. Candidates were
    already pruned to the domains the gang may choose (``prune``), so a pinned gang needs
    nothing more. Choosing no domain, and so placing nothing, always stays allowed. Gangs merged
    into a kind are counted per domain by the kind's encoding (``permit.encode``)."""
    in_kind = enc.in_kinds
    for gang in enc.gangs.values():
        key = key_of(gang.group)
        if key is None or gang.key in in_kind:
            continue
        members = member_classes(wm, gang.key)
        if not members:
            continue
        in_domain, bound = members_by_domain(wm, members, key)
        if len(in_domain) < 2:
            continue  # one domain (or none) to choose from: the pruning already says it all
        # domain[g, d]: gang g puts its members in domain d of its key.
        domain = {d: wm.model.new_bool_var(f"domain[{gang.key},{d}]") for d in sorted(in_domain)}
        # A gang uses at most one domain ...
        wm.model.add_at_most_one(domain.values())
        # ... and places pods only on the nodes of the domain it chose.
        for d, vars_ in in_domain.items():
            wm.model.add(cp_model.LinearExpr.sum(vars_) <= bound[d] * domain[d])


# --------------------------------------------------------------------------- validator


def check(replay: Replay) -> None:
    """Every placed member of a topology gang, and every running member the plan does not
    evict, lies on a node in one and the same domain of the gang's key."""
    placed: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for pod, n in replay.placed():
        if pod.group is not None and key_of(replay.ctx.pod_groups.get(pod.group)) is not None:
            placed[pod.group].append((pod.key, n))
    if not placed:
        return
    evicted = {v.pod.key for v in replay.victims}
    for bound in replay.ctx.bound:
        if bound.group in placed and bound.key not in evicted:
            placed[bound.group].append((bound.key, replay.before.where[bound.key]))
    for group, members in sorted(placed.items()):
        key = key_of(replay.ctx.pod_groups.get(group))
        assert key is not None
        labels = [replay.nodes[n].labels.get(key) for _, n in members]
        lacking = sorted(pod for (pod, _), value in zip(members, labels) if value is None)
        seen = sorted({value for value in labels if value is not None})
        if lacking:
            replay.report(
                f"gang topology: PodGroup {group} needs every member in one {key} domain, but "
                f"{', '.join(lacking)} run(s) on node(s) without the {key} label (domains seen: {', '.join(seen) or 'none'})"
            )
        elif len(seen) > 1:
            replay.report(
                f"gang topology: PodGroup {group} needs every member in one {key} domain, "
                f"but its members span {len(seen)} domains: {', '.join(seen)}"
            )

"""Coscheduling in greedy's pass over a window (``plugin_api.GreedyPart``): a gang's members are
queued together, at the place of its first member; its minResources PreFilter answers once, at
the first member; a gang with required topology chooses its domain at its first member (a trial
placement per domain, upstream's TAS) and its members see only that domain's nodes; a preferred
topology narrows the scored nodes to the domains the members use; at the last member, Permit
keeps the gang's placements only if the whole group lands, else rolls them back, victims
included, so the fallback never half-places.

The bookkeeping is one object per pass (``GangPass``), made by the plugin's ``greedy`` hook.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from ...group_tree import Tree, TreeDomains
from ...info import PodInfo
from ...plugin_api import OPEN, Gate, GreedyPart, PassResult, Trial
from ...state import ClusterState
from . import min_resources, preferred, topology
from .group import Gang, rejected
from .permit import collect


@dataclass
class GangPass(GreedyPart):
    """Greedy's gang bookkeeping for one window, in one place: coscheduling's PreFilter
    (minResources, asked once per gang), its Permit (the last member settles the gang), and
    topology-aware placement (a required domain chosen once, the nodes a preferred topology
    narrows to)."""

    ctx: Any
    trial: Trial
    by_key: dict[str, Gang]  # the window's gangs
    last_member: dict[str, Gang]  # key of each gang's last member in queue order -> gang
    # Running members of the window's gangs, by gang; once a gang keeps its window placements,
    # they are ``protected_keys``: a later preemptor may not evict them (minMember is judged on
    # the final state).
    bound_members: dict[str, list[str]] = field(default_factory=dict)
    protected_keys: set[str] = field(default_factory=set)
    # Topology gangs: the nodes of the domain each chose, chosen at its first member.
    domain: dict[str, np.ndarray] = field(default_factory=dict)
    # Gangs whose minResources PreFilter has answered (once, at the first member).
    admission_asked: set[str] = field(default_factory=set)
    # Gangs' members placed so far in the window, by node (a preferred topology's domains).
    nodes_used: dict[str, list[int]] = field(default_factory=dict)
    # The topology choices of CompositePodGroup levels above gangs (None: no tree in the snapshot).
    trees: Optional[TreeDomains] = None

    @staticmethod
    def of(ctx, state: ClusterState, static, trial: Trial) -> "GangPass":
        gangs = collect(ctx)
        book = GangPass(ctx, trial, gangs, {g.members[-1].key: g for g in gangs.values()})
        tree = Tree.of(ctx)
        if tree is not None:
            book.trees = TreeDomains(tree, ctx.window, trial)
        if any(p.group is not None for p in ctx.window):  # no gang in the window: no member to protect
            for p in ctx.bound:
                if p.group is not None:
                    book.bound_members.setdefault(p.group, []).append(p.key)
        return book

    def _gang(self, pod: PodInfo) -> Optional[Gang]:
        return self.by_key.get(pod.group) if pod.group else None

    def gate(self, pod: PodInfo, state: ClusterState, result: PassResult) -> Gate:
        """The gang's minResources PreFilter (at its first member only), whether the pod is
        blocked, and a topology gang's domain (chosen at its first member)."""
        gang = self._gang(pod)
        if gang is None:
            return OPEN
        if gang.key not in self.admission_asked:
            _admit(gang, state, result)
            self.admission_asked.add(gang.key)
        blocked = gang.blocked(pod)
        if blocked:
            return Gate(blocked=blocked)
        above = self.trees.within(gang.key, state) if self.trees is not None else None
        key = topology.key_of(gang.group)
        if key is None:
            return OPEN if above is None else Gate(within=above[0], outside=topology.outside_domain(above[1]))
        within = self.domain.get(gang.key)
        if within is None:
            limit = above[0] if above is not None else None
            within = _choose_domain(gang, state, self.ctx, self.trial, limit)
            self.domain[gang.key] = within = within if limit is None else within & limit
        return Gate(within=within, outside=topology.outside_domain(key))

    def narrow(self, pod: PodInfo, state: ClusterState, feasible: np.ndarray) -> np.ndarray:
        """Stay in the domains the gang's members use, widest first (a preferred topology)."""
        gang = self._gang(pod)
        prefer = preferred.keys_of(gang.group) if gang is not None else ()
        if gang is not None and prefer:
            return preferred.narrow(prefer, state, feasible, self.nodes_used.get(gang.key, ()))
        return feasible

    def placed(self, pod: PodInfo, node: int, preempted: bool) -> None:
        gang = self._gang(pod)
        if gang is not None and not preempted:
            self.nodes_used.setdefault(gang.key, []).append(node)

    def settle(self, pod: PodInfo, state: ClusterState, result: PassResult) -> list[PodInfo]:
        """Permit at the gang's last member (``_settle_gang``): a gang that keeps its window
        placements protects its running members from later preemptors, and its members'
        preemptions stand."""
        gang = self._gang(pod)
        if gang is None or self.last_member.get(pod.key) is not gang:
            return []
        if not _settle_gang(gang, state, result):
            return []
        self.protected_keys.update(self.bound_members.get(gang.key, ()))
        return list(gang.members)

    def protected(self) -> frozenset[str]:
        return frozenset(self.protected_keys)


def _choose_domain(gang: Gang, state: ClusterState, ctx, trial: Trial,
                   limit: Optional[np.ndarray] = None) -> np.ndarray:
    """Upstream's topology-aware scheduling for a gang with required topology: for every domain
    it may use (its running members' one, else each value of the key), place its members on a
    copy of the state, restricted to that domain's nodes; keep the domain that places the most,
    then the fullest by allocation (bin-packing keeps whole domains free for the gangs behind),
    then the first. Returns the chosen domain's nodes as a mask (none at all when no domain is
    possible). No preemption in the trial: the real pass, restricted to the domain, may still
    preempt.

    The answer is that of a trial in every domain, at the cost of few: a domain's trial places at
    most the members its free room could hold (``topology.room_bound``), and one that places
    every member ends exactly as full as its room says beforehand. Trying domains by that bound,
    then by that fullness, the first trial placing every member is the answer, and a domain whose
    bound is below the best trial so far cannot be. When no domain's bound reaches what the gang
    needs, no trial can place it whole (it fails, or preempts in the domain chosen): the domain
    with the largest bound, then the fullest, is taken without trials. ``limit``: the nodes a
    CompositePodGroup level above the gang chose (``group_tree.TreeDomains``): only the domains
    inside it are tried."""
    key = topology.key_of(gang.group)
    assert key is not None
    ids = topology.domain_ids(state, key)
    chosen = np.zeros(len(ids), dtype=bool)
    # Running members pin the domain as the snapshot has them (victims a rolled-back gang returns
    # come back where they were).
    domains = topology.candidate_domains(gang, ctx.state, key)
    if limit is not None:
        inside = {int(d) for d in ids[limit] if d >= 0}
        domains = [d for d in domains if d in inside]
    if not domains:
        return chosen
    members = len(gang.members)
    bound = topology.room_bound(gang, state, key)
    full = topology.ratio_if_placed(gang, state, key)
    order = sorted(domains, key=lambda d: (-min(members, int(bound[d])), -full[d], d))
    if bound[order[0]] < max(gang.need, 1):
        # No domain's room holds the members the gang needs: no trial places it whole, and only
        # preemption in the chosen domain could. Take the roomiest (then fullest) without trials.
        return ids == order[0]
    best: Optional[tuple[int, float, int]] = None
    # The trials run on the state itself, each taken back out at once: it ends as it was (a
    # copy per gang cost more than all the trials at 1,000 nodes), less the removal count,
    # which is put back (no pod of it left the state).
    removals = state.removals
    for d in order:
        if best is not None and (best[0] == members or min(members, int(bound[d])) < best[0]):
            break
        nodes = np.flatnonzero(ids == d)
        placed = []
        for pod in gang.members:
            node = trial(pod, nodes)
            if node is None:
                continue
            state.add(pod, node)
            placed.append(pod)
        rank = (len(placed), topology.allocation_ratio(state, nodes), -d)
        for pod in placed:
            state.remove(pod)
        if best is None or rank > best:
            best, chosen = rank, ids == d
    state.removals = removals
    return chosen


def _admit(gang: Gang, state: ClusterState, result: PassResult) -> None:
    """Coscheduling PreFilter's minResources check at the gang's turn: the free room the pods
    before it left (victims already chosen still count as there). A gang refused at the
    window's start keeps that answer: the room only shrinks since."""
    if gang.group is None or gang.refused is not None:
        return
    held = [(v.pod, v.node) for v in result.victims if v.pod.group != gang.key]
    gang.refused = min_resources.refusal(gang.group, gang.key, state, gang.own, held)


def _settle_gang(gang: Gang, state: ClusterState, result: PassResult) -> bool:
    """Permit: keep the gang's placements only if the whole group lands; else undo them all.
    True when the gang keeps window placements (its running members must then stay)."""
    placed = [p for p in gang.members if p.key in result.placements]
    # Running members evicted by other preemptors no longer count toward minMember.
    evicted = sum(1 for v in result.victims if v.pod.group == gang.key)
    key = topology.key_of(gang.group)
    if not placed:
        if key is not None and gang.need > 0 and gang.blocked(gang.members[0]) is None:
            _reject_topology_gang(gang, key, result)
        return False
    if gang.reaches(len(placed), evicted):
        return True
    member_keys = {p.key for p in gang.members}
    for pod in placed:
        state.remove(pod)
        del result.placements[pod.key]
        result.nominations.pop(pod.key, None)
    kept = []
    for victim in result.victims:
        if victim.preemptor in member_keys:
            state.add(victim.pod, victim.node)
        else:
            kept.append(victim)
    result.victims = kept
    if key is not None:
        _reject_topology_gang(gang, key, result)
        return False
    message = rejected(gang.key, len(placed), gang.need)
    for pod in placed:  # members that found no node keep their own FitError
        result.unschedulable[pod.key] = message
    return False


def _reject_topology_gang(gang: Gang, key: str, result: PassResult) -> None:
    """Every member of a topology gang that fell short gets the topology reason: it could have
    placed only in one domain together with the rest."""
    message = topology.rejected(gang.key, key, gang.need, gang.min_member)
    for pod in gang.members:
        result.unschedulable[pod.key] = message

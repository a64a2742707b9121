"""Nominated pods (``status.nominatedNodeName``), as kube-scheduler honours them (SEMANTICS.md
§5–§7): the pod that preempted waits for its victims, and the room it waits for is its own.

1. **A pod waiting for its victims does not preempt again** (DefaultPreemption's
   PodEligibleToPreemptOthers). A pending pod nominated to node N is not eligible while N holds
   a pod of lower priority that is terminating by preemption (a deletionTimestamp and
   ``DisruptionTarget=True``, reason ``PreemptionByScheduler``) — unless N is
   UnschedulableAndUnresolvable for it, which is read here on the static filters (node name,
   cordon, taints, node affinity): the UnschedulableAndUnresolvable answers of the dynamic filters
   (a request above allocatable, a missing topology key) are not looked at, so such a pod keeps
   waiting. It may still be placed wherever it fits; the plan evicts nothing for it. The context
   marks it (``PodInfo.waiting_on``); greedy's PostFilter, the model's ``evict`` variables and the
   validator (``shared.preemption_rule.why_not``) all read that mark.

2. **The room a nominated pod waits for is not given away.** kube-scheduler filters a pod on N
   with the pods nominated to N of priority ≥ its own (other than itself) added to the node. A
   window lifts that so:

   * a nominated pod *inside* the window is the plan's to decide: its nomination claims nothing
     (the plan may place it on N, elsewhere, or not at all);
   * a nominated pod *outside* the window (pending, not decided now: another scheduler's, or one
     the live queue holds back) claims its requests and host ports on N. Each window pod placed
     on N must fit N's final state with every claim of priority ≥ its own added, on each resource
     it requests (the pod count included) and on its host ports; the validator reports a plan
     that breaks it, naming both pods. Greedy filters (and preempts) with those claims added as
     the pod's turn comes — and with the claims of priority ≥ the lowest window pod already placed
     on N, so a higher pod placed later (a gang's member) cannot take room a lower one had left:
     its plans then always meet the final-state rule. The model adds the rule as capacity rows.

   Claims take room only: a nominated pod's labels and (anti-)affinity terms, and its place in
   spread counts, are not added (kube-scheduler's second filter pass, without nominated pods,
   would refuse a pod whose affinity only the nominated pod supported). Which evictions their
   room makes kube-scheduler's preemption choose is the replay's to say (``replay``: greedy's
   preemption, which filters with the claims held); the model's reprieve counts the claims of
   priority ≥ a level as used room at that level (``reprieve_encode``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Optional

import numpy as np
from ortools.sat.python import cp_model

from models.snapshot import ClusterSnapshot

from ...framework import Code, names
from ...info import PodInfo
from ...state import ClusterState
from ..shared.host_ports import ports_conflict

if TYPE_CHECKING:
    from ...plugin_api import EncodeModel as WindowModel
    from ...plugin_api import CycleView as Cycle
    from ...plugin_api import ContextView, ReplayView as Replay, StaticVerdict

NAME = "DefaultPreemption"
# The pod waits for victims of its earlier preemption on its nominated node (kube-scheduler's words).
REASON_TERMINATING = "not eligible due to a terminating pod on the nominated node."
# A phantom of a nominated pod held on its node while greedy filters a pod: its key's prefix.
_PHANTOM = "nominated:"


# --------------------------------------------------------------------------- 1. eligibility


def waiting_on(pod: PodInfo, state: ClusterState, static: StaticVerdict) -> str:
    """The node ``pod`` waits on for its victims ("" when it may preempt): its nominated node,
    where a pod it outranks is terminating by preemption (kube-scheduler's
    PodEligibleToPreemptOthers)."""
    name = pod.pod.status.nominated_node_name
    index = state.node_index.get(name) if name else None
    if index is None:
        return ""
    if not any(q.priority < pod.priority and q.pod.terminating_by_preemption for q in state.pods_on[index].values()):
        return ""
    # kube-scheduler: a static filter making the node UnschedulableAndUnresolvable ends the wait.
    return "" if static(pod, state.nodes[index]).code == Code.UNRESOLVABLE else name


def nominated_node_fits(pod: PodInfo, cycle: Cycle, allowed: Optional[np.ndarray]) -> np.ndarray:
    """The pod's nominated node alone when it passes every filter in ``cycle`` (and the window's
    own mask ``allowed``), else no node: kube-scheduler's evaluateNominatedNode, which greedy runs
    before walking the nodes."""
    name = pod.pod.status.nominated_node_name
    index = cycle.state.node_index.get(name) if name else None
    if index is None or (allowed is not None and not allowed[index]):
        return _NO_NODE
    return cycle.feasible(np.array([index], dtype=np.int64))


_NO_NODE = np.zeros(0, dtype=np.int64)


def mark_waiting(window: Iterable[PodInfo], state: ClusterState, static: StaticVerdict) -> None:
    """Set ``waiting_on`` on every window pod that may not preempt (before classes are formed:
    it is part of a pod's scheduling signature)."""
    for info in window:
        if info.pod.status.nominated_node_name:
            info.waiting_on = waiting_on(info, state, static)


# --------------------------------------------------------------------------- 2. claims


@dataclass(frozen=True)
class Claim:
    """A nominated pod outside the window and the room it waits for on its node."""

    pod: PodInfo  # its phantom: requests (over the state's resources) and host ports only
    node: int
    vector: np.ndarray  # its requests over the state's resources, the pod count included

    @property
    def priority(self) -> int:
        return self.pod.priority

    @property
    def key(self) -> str:
        return self.pod.pod.key


@dataclass
class Claims:
    """Every claim of a context, by node."""

    on: dict[int, list[Claim]]

    def __bool__(self) -> bool:
        return bool(self.on)

    def at_least(self, node: int, priority: int) -> list[Claim]:
        """The claims on ``node`` of priority ≥ ``priority`` (those a pod of ``priority`` honours)."""
        return [c for c in self.on.get(node, ()) if c.priority >= priority]

    def room(self, node: int, priority: int, width: int) -> np.ndarray:
        """What those claims request together, over the state's resources."""
        total = np.zeros(width, dtype=np.int64)
        for c in self.at_least(node, priority):
            total += c.vector
        return total

    # ``plugin_api.Nominations``, as the engines ask it (the functions below do the work)

    def hold(self, state: ClusterState, pod: PodInfo, placed: Iterable[str]) -> list[PodInfo]:
        return hold(self, state, pod, placed)

    def release(self, state: ClusterState, held: list[PodInfo]) -> None:
        release(state, held)

    def withheld(self, free: np.ndarray) -> np.ndarray:
        return withheld(self, free)

    def first_node(self, pod: PodInfo, cycle: Cycle, allowed: Optional[np.ndarray]) -> np.ndarray:
        return nominated_node_fits(pod, cycle, allowed)


NONE = Claims({})


def claims_of(ctx: ContextView) -> Claims:
    """The context's nominations, which this plugin's ``nominations`` hook made (a ``Claims``)."""
    claims = ctx.claims
    return claims if isinstance(claims, Claims) else NONE


def outside_claims(snapshot: ClusterSnapshot, window: Iterable[PodInfo], state: ClusterState,
                   ns_labels: dict[str, dict[str, str]], *, sidecar_ports: bool) -> Claims:
    """The claims of the pending pods outside ``window`` nominated to a node of the snapshot."""
    inside = {p.key for p in window}
    on: dict[int, list[Claim]] = defaultdict(list)
    for pod in snapshot.nominated_pending:
        if pod.key in inside:
            continue
        index = state.node_index.get(pod.status.nominated_node_name)
        if index is None:
            continue
        info = PodInfo.of(pod, ns_labels.get(pod.metadata.namespace, {}), sidecar_ports=sidecar_ports)
        known = {r: v for r, v in info.requests.items() if r in state.res_index}
        phantom = replace(
            info, key=_PHANTOM + info.key, namespace="", labels={}, ns_labels={}, requests=known,
            affinity=(), anti_affinity=(), preferred_affinity=(), preferred_anti_affinity=(), spread=(),
            group=None, terminating=False, match_key=("", ()),
        )
        on[index].append(Claim(phantom, index, state.vector(phantom)))
    return Claims(dict(on))


# -- greedy: the claims held on the nodes while one pod is filtered


def hold(claims: Claims, state: ClusterState, pod: PodInfo, placed: Iterable[str]) -> list[PodInfo]:
    """Add to ``state`` the claims ``pod`` honours on each node: priority ≥ its own, or ≥ the
    lowest window pod already placed there (``placed``: the window's placed keys). Returns what
    was added, for ``release``."""
    if not claims:
        return []
    placed = placed if isinstance(placed, (set, frozenset, dict)) else set(placed)
    held: list[PodInfo] = []
    for node in claims.on:
        lowest = min((q.priority for q in state.pods_on[node].values() if q.key in placed), default=pod.priority)
        for claim in claims.at_least(node, min(pod.priority, lowest)):
            state.add(claim.pod, node)
            held.append(claim.pod)
    return held


def withheld(claims: Claims, free: np.ndarray) -> np.ndarray:
    """A copy of ``free`` (nodes × resources) less every claim, whatever its priority: the room
    a quick packing (the model's hint without greedy) may fill and still leave every claim its
    room (``solver/cpsat/hint.py``)."""
    out = free.copy()
    for node, on in claims.on.items():
        for c in on:
            out[node] -= c.vector
    return out


def release(state: ClusterState, held: list[PodInfo]) -> None:
    """Take ``hold``'s claims back out (they were never pods of the state: removals unchanged)."""
    if not held:
        return
    removals = state.removals
    for phantom in held:
        state.remove(phantom)
    state.removals = removals


# -- the validator


def check(replay: Replay) -> None:
    """Each placed window pod leaves room, on its node's final state, for the claims of priority
    ≥ its own: on every resource it requests and on its host ports."""
    claims = claims_of(replay.ctx)
    if not claims:
        return
    final, before = replay.final, replay.before
    for index, pods in sorted(replay.placed_on.items()):
        if index not in claims.on:
            continue
        free_before = before.alloc[index] - before.used[index]
        free_after = final.alloc[index] - final.used[index]
        for pod in sorted(pods, key=lambda p: p.key):
            honoured = claims.at_least(index, pod.priority)
            if not honoured:
                continue
            room = claims.room(index, pod.priority, len(final.resources))
            vec = final.vector(pod)
            short = [final.resources[r] for r in np.flatnonzero(vec).tolist()
                     if free_after[r] - room[r] < min(free_before[r], 0)]
            ports = [c.key for c in honoured if c.pod.host_ports
                     and ports_conflict(pod.host_ports, c.pod.host_ports)]
            if short:
                replay.report(
                    f"nominated: {pod.key} (priority {pod.priority}) takes room on node {replay.node_name(index)} "
                    f"that {names(c.key for c in honoured)} (priority ≥ its own, nominated there) "
                    f"is waiting for: {', '.join(short)} short once they are added"
                )
            if ports:
                replay.report(
                    f"nominated: {pod.key} (priority {pod.priority}) takes a host port on node "
                    f"{replay.node_name(index)} that {names(ports)} (nominated there) is waiting for"
                )


# -- CP-SAT


def encode(wm: WindowModel) -> None:
    """Where a class is placed on a node holding claims, the node's final state fits it with the
    claims of priority ≥ the class's added: a capacity row per resource it requests (rhs the
    free room, never below zero as the validator reads overcommit, less the claims), and no host
    port of the class taken by such a claim."""
    claims = claims_of(wm.ctx)
    if not claims:
        return
    m, state = wm.model, wm.state
    free = state.free
    victims_on: dict[int, list] = defaultdict(list)
    for key, (victim, node) in wm.evict_pod.items():
        victims_on[node].append((state.vector(victim), wm.evict[key]))
    for n, entries in wm.by_node.items():
        if n not in claims.on:
            continue
        for cls, var in entries:
            honoured = claims.at_least(n, cls.rep.priority)
            if not honoured:
                continue
            if cls.rep.host_ports and any(ports_conflict(cls.rep.host_ports, c.pod.host_ports)
                                          for c in honoured if c.pod.host_ports):
                # A host port a nominated pod of priority ≥ the class's waits for here.
                m.add(var == 0)
                continue
            room = claims.room(n, cls.rep.priority, len(state.resources))
            present = None
            for r in np.flatnonzero(wm.vec[cls.id]).tolist():
                if not room[r]:
                    continue
                vars_ = [v for o, v in entries if wm.vec[o.id][r]]
                coeffs = [int(wm.vec[o.id][r]) for o, _ in entries if wm.vec[o.id][r]]
                for vvec, evict in victims_on.get(n, ()):
                    if vvec[r]:
                        vars_.append(evict)
                        coeffs.append(-int(vvec[r]))
                if present is None:
                    present = wm.new_presence(f"claimed[{n},{cls.id}]", [var], wm.ub_of(cls.id, n))
                # The window's pods here, with this class among them, leave the claims' room.
                m.add(cp_model.LinearExpr.weighted_sum(vars_, coeffs)
                      <= max(int(free[n, r]), 0) - int(room[r])).only_enforce_if(present)

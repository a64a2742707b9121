"""DefaultPreemption for the greedy path (kube-scheduler's PostFilter, SEMANTICS.md §6).

When a pod fits nowhere, look at the nodes where removing pods could help (status
Unschedulable, not UnschedulableAndUnresolvable), find on each the smallest set of
lower-priority victims (remove them all, then reprieve the most important back one by one,
PodDisruptionBudget-violating ones first), and pick the node by kube-scheduler's criteria:
fewest PDB violations, lowest top victim priority, smallest priority sum, fewest victims,
latest start among the top victims. When a pod preempts on a node where pods of its own priority
already preempted in the window, ``reprieve_level`` puts back their victims it no longer needs
(the window's reading of the reprieve; ``victim_room``).

The CP-SAT model treats preemption as costed variables instead (``solver/cpsat``); this module
is what the greedy fallback does, so falling back never silently drops preemption.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Optional

import numpy as np

from ...framework import SUCCESS, Code, Status, fit_error_message, reason_histogram, unresolvable
from ...info import PodInfo
from . import nominated
from ...disruption import PdbBudgets
from ...group_disruption import evicted_together
from .victim_room import beyond_node_local, entangled, entangling
from ..shared.preemption_rule import evictable, may_preempt
from ..shared.host_ports import ports_conflict
from ...plugin_api import CycleView as Cycle, NodeDryRun, StaticView as StaticFilters, gives_back
from ..shared import resource_fit
from ...state import ClusterState

NAME = "DefaultPreemption"
# The pod's preemptionPolicy is Never.
REASON_NEVER = "not eligible due to preemptionPolicy=Never."
# The node has no pod of lower priority.
REASON_NO_VICTIMS = "No preemption victims found for incoming pod"
# The node was not a candidate (its failure was unresolvable, or it was not tried).
REASON_NOT_HELPFUL = "Preemption is not helpful for scheduling"
# minCandidateNodesPercentage / minCandidateNodesAbsolute.
MIN_CANDIDATE_NODES_PERCENTAGE = 10
MIN_CANDIDATE_NODES_ABSOLUTE = 100
# Offset making every int32 priority non-negative in the priority-sum criterion.
PRIORITY_OFFSET = 2**31
_NOW = datetime.max.replace(tzinfo=timezone.utc)


# Why a pod waiting for its earlier victims does not preempt again (``plugin_api.PostFilter``).
REASON_TERMINATING = nominated.REASON_TERMINATING


@dataclass
class PreemptionOutcome:
    node: Optional[int]
    victims: list[PodInfo] = field(default_factory=list)
    pdb_violations: int = 0
    message: Optional[str] = None  # "preemption: ..." when no node was found


@dataclass
class _Candidate:
    node: int
    victims: list[PodInfo]
    pdb_violations: int
    _rank: Optional[tuple] = field(default=None, repr=False, compare=False)

    def rank(self) -> tuple:
        """kube-scheduler's order of candidates (``_best``), worked out once: a class's dry runs
        are remembered (``_remembered``) and ranked again at each of its pods' turns."""
        if self._rank is None:
            top = max((v.priority for v in self.victims), default=-PRIORITY_OFFSET)
            earliest = min((v.start_time or _NOW for v in self.victims if v.priority == top), default=_NOW)
            self._rank = (
                self.pdb_violations,
                top,
                sum(v.priority + PRIORITY_OFFSET for v in self.victims),
                len(self.victims),
                -earliest.timestamp() if earliest != _NOW else float("inf"),
            )
        return self._rank


def _importance(pod: PodInfo) -> tuple:
    """Sort key: higher priority first, then earlier start (no start time counts as now), then the
    pod's key: kube-scheduler leaves exact ties in no set order, and the replay of a plan
    (``replay``) must pick the victims the plan was made with, whatever order a cache holds the
    node's pods in."""
    return (-pod.priority, pod.start_time or _NOW, pod.key)


def _fits(pod: PodInfo, node: int, state: ClusterState, static: StaticFilters, version: str) -> Status:
    """The pod's status on ``node`` by a new cycle on ``state`` as it is now (the dry run of a
    pod some filter has no ``NodeDryRun`` for: volumes, devices)."""
    return static.cycle(pod, state, version=version).status(static.nodes[node])


def select_victims(
    pod: PodInfo,
    node: int,
    state: ClusterState,
    static: StaticFilters,
    budgets: PdbBudgets,
    version: str,
    *,
    hard_pdb: bool = False,
    window: frozenset[str] = frozenset(),
    local: bool = False,
    spent: Optional[list[int]] = None,
    cycle: Optional[Cycle] = None,
    run: Optional[NodeDryRun] = None,
) -> tuple[Optional[_Candidate], Status]:
    """The minimal victim set on one node (or why the node cannot be made to fit).

    With ``hard_pdb`` (config ``preemption.pdb: hard``), pods whose eviction would break a
    PodDisruptionBudget are never victims: they are put back before the fit is judged. ``spent``
    counts, per budget, the pods earlier preemptions of the window already took from it.
    ``local``: only the node's resources can keep the pod out (no host ports, spread or pod
    affinity on either side), so the dry run is done on the resource arithmetic alone.
    ``cycle``: the pod's filter cycle on ``state`` as it is; the dry run then goes through its
    filters' ``NodeDryRun`` (PreFilter once, victims removed and reprieved incrementally, as
    kube-scheduler's PreFilterExtensions do), never through the state. Without one (or for a
    filter with none) the victims are taken out of the state itself and put back, a new cycle
    judged per step; the state's removal count and touched nodes are then restored, as no pod
    left it. ``run``: ``cycle.on_node(node)`` when the caller made it already (untouched)."""
    # Victims are running pods: pods placed earlier in this window are decisions, not victims.
    # A gang member never evicts a running member of its own group (that would undo the gang).
    # (A victim has lower priority: asked first, it spares the full rule most pods.)
    lower = evictable(pod, state.pods_on[node].values(), window)
    if not lower:
        return None, unresolvable(NAME, REASON_NO_VICTIMS)
    if local and static.mask(pod)[node]:
        # Only the node's room can keep the pod off: the dry run on its resources alone
        run = resource_fit.RoomOnNode(pod, state, node, version, resource_fit.asked(state.vector(pod)))
        return _select_on_node(node, lower, run, budgets, hard_pdb, spent)
    if run is None and cycle is not None and cycle.state is state:
        run = cycle.on_node(node)
    if run is not None:
        return _select_on_node(node, lower, run, budgets, hard_pdb, spent)
    removals, touched = state.removals, len(state.touched)
    for victim in lower:
        state.remove(victim)
    try:
        status = _fits(pod, node, state, static, version)
        if not status.ok:
            return None, status
        lower.sort(key=_importance)
        violating, safe = budgets.split(lower, spent)
        if hard_pdb and violating:
            for keep in violating:
                state.add(keep, node)
            status = _fits(pod, node, state, static, version)
            if not status.ok:
                return None, status
            violating = []
        victims: list[PodInfo] = []
        pdb_violations = 0
        for group, counts_violation in ((violating, True), (safe, False)):
            for candidate in group:
                state.add(candidate, node)
                if _fits(pod, node, state, static, version).ok:
                    continue  # reprieved: it stays
                state.remove(candidate)
                victims.append(candidate)
                pdb_violations += counts_violation
        if violating and safe:
            victims.sort(key=_importance)
        return _Candidate(node, victims, pdb_violations), status
    finally:
        for victim in lower:
            if victim.key in state.where:
                state.remove(victim)
        for victim in lower:
            state.add(victim, node)
        # The state holds what it held: no cache need refresh for this dry run.
        state.removals = removals
        state.forget_touched(touched)


def _select_on_node(
    node: int, lower: list[PodInfo], run: NodeDryRun, budgets: PdbBudgets, hard_pdb: bool,
    spent: Optional[list[int]],
) -> tuple[Optional[_Candidate], Status]:
    """``select_victims``'s dry run through the filters' ``NodeDryRun`` on the node: the same
    removals, reprieves, order and statuses, the state untouched."""
    for victim in lower:
        run.remove_pod(victim)
    status = run.status()
    if not status.ok:
        return None, status
    lower = sorted(lower, key=_importance)
    violating, safe = budgets.split(lower, spent)
    if hard_pdb and violating:
        for keep in violating:
            run.add_pod(keep)
        status = run.status()
        if not status.ok:
            return None, status
        violating = []
    victims: list[PodInfo] = []
    pdb_violations = 0
    for group, counts_violation in ((violating, True), (safe, False)):
        for candidate in group:
            run.add_pod(candidate)
            if run.fits():
                continue  # reprieved: it stays
            run.remove_pod(candidate)
            victims.append(candidate)
            pdb_violations += counts_violation
    if violating and safe:
        victims.sort(key=_importance)
    return _Candidate(node, victims, pdb_violations), status


def resources_only(pod: PodInfo, cycle: Cycle, state: ClusterState) -> bool:
    """Whether only the node's resources can keep ``pod`` off a node, so a dry run may be done on
    the resource arithmetic alone (``select_victims``'s ``local``). With
    ``preemption.freeDevices``, a pod with claims needs the dry run on the state: a victim's
    devices come back only there (``DraHold``: a claim reserved only for evicted pods gives its
    devices back). Off, as in kube-scheduler, no device comes back."""
    return cycle.node_local and not pod.host_ports and not any(book.gives_back_to(pod) for book in gives_back(state))


def _best(candidates: list[_Candidate]) -> _Candidate:
    """The candidate kube-scheduler picks: fewest PDB violations, lowest top victim priority,
    smallest priority sum, fewest victims, latest start among the top victims; the first of a tie."""
    return min(candidates, key=_Candidate.rank)


_NOT_HELPFUL = Status(Code.UNRESOLVABLE, (REASON_NOT_HELPFUL,))


def _window_keys(ctx) -> frozenset[str]:
    """The window's pod keys (never victims), built once per context: every failing pod asks."""
    keys = ctx.__dict__.get("_preemption_window_keys")
    if keys is None:
        keys = ctx.__dict__["_preemption_window_keys"] = frozenset(p.key for p in ctx.window)
    return keys


# Above this, float sums of requests may round: the resource pre-check below is then skipped.
_EXACT_FLOAT = 2**52


def _lower(pod: PodInfo, state: ClusterState, window: frozenset[str],
           protected: frozenset[str] = frozenset()) -> tuple[np.ndarray, Optional[np.ndarray]]:
    """Per node: does it hold a pod the preemptor could evict (lower priority, not a window pod,
    not ``protected``, not of the preemptor's own gang), and what those pods request in all
    (floats; None when amounts are too large for floats to be exact)? Kept in the state's local
    cache per priority and brought up to date on the nodes touched since, like the node-local
    filter masks: pods that fail in a row ask this of every node each time. What one preemptor
    alone may not evict — the protected pods (running members of admitted gangs, more as gangs
    are admitted) and its own gang's running members — is taken out of a copy, on their nodes
    only: the cache serves gang members too and does not start again as the protected set grows."""
    def lower_pods(i: int, excluded: frozenset[str], own: bool) -> list[PodInfo]:
        # ``own``: asked for this very preemptor (its gang's members are not its victims);
        # otherwise for any preemptor of its priority that may preempt (the cached masks)
        return [
            p for p in state.pods_on[i].values()
            if p.priority < pod.priority and p.key not in excluded and (not own or may_preempt(pod, p))
        ]

    def fill(mask: np.ndarray, usage: np.ndarray, nodes, excluded: frozenset[str] = window, own: bool = False) -> None:
        for i in nodes:
            pods = lower_pods(i, excluded, own)
            mask[i] = bool(pods)
            # summed in integers, then one conversion (one stack per node, not a float add per pod);
            # where most of the node's pods are lower, as what the node uses less the others
            # (``used`` is the sum of its pods' rows: the same integers either way)
            if not pods:
                usage[i] = 0
            elif 2 * len(pods) <= len(state.pods_on[i]):
                usage[i] = np.sum([state.vector(p) for p in pods], axis=0, dtype=np.int64)
            else:
                lower = {id(p) for p in pods}
                others = [state.vector(p) for p in state.pods_on[i].values() if id(p) not in lower]
                usage[i] = state.used[i] - np.sum(others, axis=0, dtype=np.int64) if others else state.used[i]

    n = len(state.nodes)
    exact = not state.alloc.size or int(state.alloc.max()) < _EXACT_FLOAT
    if not state.priorities or min(state.priorities) >= pod.priority:
        # nobody in the whole state is below the preemptor
        return np.zeros(n, dtype=bool), np.zeros(state.alloc.shape) if exact else None
    key = ("preemption-lower", pod.priority, window)
    hit = state.local_cache.get(key)
    if hit is None:
        mask, usage = np.zeros(n, dtype=bool), np.zeros(state.alloc.shape)
        fill(mask, usage, range(n))
    else:
        # Only a pod outside the window coming or going changes a node's lower pods.
        seen, (mask, usage) = hit
        fill(mask, usage, {node for node, key in zip(state.touched[seen:], state.touched_by[seen:])
                           if not key or key not in window})
    state.local_cache[key] = (len(state.touched), (mask, usage))
    # What this preemptor may not evict beyond the window (protected gang members, its own
    # gang's running members): taken out of a copy on their nodes only.
    apart = {state.where[k] for k in protected if k in state.where}
    if pod.group is not None:
        apart |= _group_nodes(state, pod.group)
    if apart:
        mask, usage = mask.copy(), usage.copy()
        fill(mask, usage, apart, window | protected, own=True)
    return mask, usage if exact else None


def _group_nodes(state: ClusterState, group: str) -> set[int]:
    """The nodes where pods of PodGroup ``group`` run (or ran since the answer was first made: a
    node too many only costs its lower pods being looked at again). Found once over every pod of
    the state, then brought up to date from the pods that came since (``touched_by``)."""
    key = ("preemption-group-nodes", group)
    hit = state.local_cache.get(key)
    if hit is None:
        nodes = {node for q, node in state.pods() if q.group == group}
    else:
        seen, nodes = hit
        for node, came in zip(state.touched[seen:], state.touched_by[seen:]):
            q = state.pods_on[node].get(came) if came else None
            if q is not None and q.group == group or not came:
                nodes.add(node)
    state.local_cache[key] = (len(state.touched), nodes)
    return nodes


def _remembered(pod: PodInfo, cycle: Cycle, state: ClusterState, window: frozenset[str]) -> Optional[dict]:
    """The dry-run results of the pod's class on the nodes no pod has come to or left since (node
    -> (budgets spent, protected pods, what the filters read beyond the node, result)), or None
    when they cannot be kept (devices, volumes: their verdicts read more than a dry run says).
    A result holds while its node holds the same pods and the filters' ``reads`` (a spread
    domain's count, say) are the same. The next pod of the class to preempt tries the same ~100
    nodes, of which only the one the last took has changed. Kept in the state's local cache and
    brought up to date on the nodes touched since, like ``_lower``."""
    if pod.class_id < 0 or gives_back(state) or pod.claims:
        return None
    key = ("preemption-dry-runs", pod.class_id, window)
    hit = state.local_cache.get(key)
    if hit is None:
        memo: dict[int, tuple] = {}
    else:
        seen, memo = hit
        for node in set(state.touched[seen:]):
            memo.pop(node, None)
    state.local_cache[key] = (len(state.touched), memo)
    return memo


def default_preemption(
    pod: PodInfo,
    cycle: Cycle,
    state: ClusterState,
    static: StaticFilters,
    ctx,
    *,
    rng: Optional[random.Random] = None,
    allowed=None,
    evicted: Iterable[PodInfo] = (),
    protected: frozenset[str] = frozenset(),
) -> PreemptionOutcome:
    """Where to place ``pod`` by evicting lower-priority pods, or the ``preemption: ...`` text.

    ``allowed`` (a node mask) keeps out nodes the window's own rules refuse (greedy's spread
    guard): preemption must not break what placement may not. ``evicted``: the window's victims
    so far, whose PodDisruptionBudget allowances are spent (the plan's evictions are judged
    together, so a budget allowing one disruption allows one in the whole window). ``protected``:
    running members of gangs the window has already admitted, never victims (evicting one would
    take its gang below minMember in the final state)."""
    if pod.preempt_never:
        return PreemptionOutcome(None, message=f"preemption: {REASON_NEVER}")
    if pod.waiting_on:
        return PreemptionOutcome(None, message=f"preemption: {nominated.REASON_TERMINATING}")
    version = ctx.config.kubernetes_version
    statuses = cycle.statuses()
    n = len(statuses)
    window = _window_keys(ctx) | protected if protected else _window_keys(ctx)
    node_status: dict[int, Status] = {}
    # A node with no pod of lower priority has no victims to offer (checked before any dry run).
    no_victims = unresolvable(NAME, REASON_NO_VICTIMS)
    potential = []
    lower, usage = _lower(pod, state, _window_keys(ctx), protected)
    # (Python lists: indexing numpy arrays element by element cost more than the walk itself)
    has_lower = lower.tolist()
    may = allowed.tolist() if allowed is not None else None
    unschedulable = Code.UNSCHEDULABLE
    for i, s in enumerate(statuses):
        if s.code != unschedulable or (may is not None and not may[i]):
            continue
        if has_lower[i]:
            potential.append(i)
        else:
            node_status[i] = no_victims
    candidates: list[_Candidate] = []
    local = resources_only(pod, cycle, state)
    hopeless: set[int] = set()
    if potential:
        budgets = PdbBudgets.of(ctx)
        spent = budgets.spent(evicted)
        memo = _remembered(pod, cycle, state, _window_keys(ctx))
        spent_key = tuple(spent)

        def dry_run(node: int) -> tuple[Optional[_Candidate], Status]:
            reads, run = None, None
            if memo is not None:
                run = None if local or cycle.node_local else cycle.on_node(node)
                reads = run.reads() if run is not None else ()
                hit = memo.get(node)
                if hit is not None and hit[0] == spent_key and hit[1] == protected and hit[2] == reads:
                    return hit[3]
            out = select_victims(
                pod, node, state, static, budgets, version, hard_pdb=ctx.config.preemption.pdb == "hard", window=window,
                local=local, spent=spent, cycle=cycle, run=run,  # the run that read ``reads``, not made again
            )
            if memo is not None:
                memo[node] = (spent_key, protected, reads, out)
            return out

        wanted = min(len(potential), max(len(potential) * MIN_CANDIDATE_NODES_PERCENTAGE // 100, MIN_CANDIDATE_NODES_ABSOLUTE))
        offset = rng.randrange(len(potential)) if rng is not None else 0
        # Nodes where the pod would not fit even with every possible victim gone give no
        # candidate: found at once over all nodes; their status is needed only for the message.
        # Sound for every pod: NodeResourcesFit is in every cycle, and the other filters can only
        # refuse a node more.
        if usage is not None:
            idx = np.array(potential, dtype=np.int64)
            room = state.free[idx].astype(np.float64) + usage[idx]
            hopeless = set(idx[~resource_fit.fits(state.vector(pod), room)].tolist())
        for i in range(len(potential)):
            node = potential[(offset + i) % len(potential)]
            if node in hopeless:
                continue
            candidate, status = dry_run(node)
            node_status[node] = status
            if candidate is not None:
                candidates.append(candidate)
                if len(candidates) >= wanted and any(c.pdb_violations == 0 for c in candidates):
                    break
    if candidates:
        best = _best(candidates)
        return PreemptionOutcome(best.node, list(best.victims), best.pdb_violations)
    for node in hopeless:
        node_status[node] = dry_run(node)[1]
    per_node = [_NOT_HELPFUL] * n
    for i, status in node_status.items():
        per_node[i] = status
    hist = reason_histogram(per_node)
    return PreemptionOutcome(None, message=f"preemption: {fit_error_message(n, hist)}")


def reprieve_level(
    node: int,
    level: int,
    state: ClusterState,
    victims: list,
    ctx,
) -> list:
    """Once greedy's pass is done (``greedy.reprieve_at_end``), put back the victims that the
    preemptors of priority ``level`` took on ``node`` and that the node, with everything placed on
    it, still holds — the most important first, those whose eviction breaks a budget before the
    others. kube-scheduler keeps them evicted; put back, the plan evicts less and places the same.

    ``victims``: the window's victims (``pod``, ``node``, ``preemptor``); the state holds the
    window's placements. Returns the victims that stay evicted. Victims of nodes the rule does not
    judge (a placed pod with affinity or spread, a running pod with anti-affinity), entangled ones
    and members of a group evicted only as a whole stay evicted."""
    here = [v for v in victims if v.node == node]
    if len(here) < 2:
        return victims  # the pod's own victims are needed (its own reprieve said so)
    window = _window_keys(ctx)
    matchers = entangling(ctx)
    # A member of a group evicted only as a whole (disruptionMode: all) goes with its mates.
    candidates = [v for v in here if ctx.pod(v.preemptor).priority == level and not entangled(v.pod, matchers)
                  and evicted_together(ctx.pod_groups, v.pod) is None]
    if not candidates:
        return victims
    placed = [p for p in state.pods_on[node].values() if p.key in window]
    running = [p for p in state.pods_on[node].values() if p.key not in window] + [v.pod for v in here]
    if beyond_node_local(placed, running):
        return victims
    budgets = PdbBudgets.of(ctx)
    keys = {v.pod.key for v in candidates}
    spent = budgets.spent(v.pod for v in victims if v.pod.key not in keys)
    violating, safe = budgets.split(sorted((v.pod for v in candidates), key=_importance), spent)
    requested = np.zeros(state.alloc.shape[1], dtype=bool)
    for p in placed:
        requested |= state.vector(p) > 0
    # Nominated pods outside the window keep their room and ports against every pod placed on
    # the node (``nominated``: the claims a pod of a priority honours): a victim of this level put
    # back must leave room for the claims a lower pod placed there honours too, or that pod ends up
    # in room a nominated pod of its priority or above is waiting for.
    floor = min([level, *(p.priority for p in placed)])
    claims = ctx.claims.at_least(node, floor) if ctx.claims else []
    claimed = sum((c.vector for c in claims), np.zeros(state.alloc.shape[1], dtype=np.int64))
    holders = [*placed, *(c.pod for c in claims)]
    books = gives_back(state)
    back: set[str] = set()
    for pod in (*violating, *safe):
        demand = state.alloc[node] - state.free[node] + state.vector(pod) + claimed
        if bool((demand[requested] > state.alloc[node][requested]).any()):
            continue
        if pod.host_ports and any(p.host_ports and ports_conflict(p.host_ports, pod.host_ports) for p in holders):
            continue
        if not all(book.returnable(pod) for book in books):
            continue  # its claim's devices went to a placed pod: it stays evicted
        state.add(pod, node)
        back.add(pod.key)
    return [v for v in victims if v.pod.key not in back] if back else victims

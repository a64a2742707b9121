"""Greedy ``scheduleOne``: kube-scheduler's decision, one pod at a time.

For each pod in queue order: PreFilter and Filter against the state the pods before it left,
stopping once ``numFeasibleNodesToFind`` nodes pass (nodes walked round-robin across zones from
where the last cycle stopped); score those; pick the best (first in walk order, or kube-
scheduler's uniform random choice when a tie-break seed is set); assume the pod into the state so
the next pod sees it. A pod that fits nowhere tries DefaultPreemption, else gets the FitError
message. Gang members are placed tentatively and rolled back, victims included, when their group
falls short of minMember — the Permit stage of coscheduling, so the fallback never half-places.
A preemption on a node where pods of the same priority preempted before in the window reprieves
their victims it makes unnecessary (``preemption.reprieve_level``: one priority, one batch).
A gang whose minResources the free room left at its turn cannot cover places nothing (PreFilter).
A gang with required topology first chooses its domain (``_choose_domain``, upstream's TAS: a
trial placement per domain, the one placing most, then the fullest) and its members see only
that domain's nodes.

It is the baseline every solver result is measured against, the solver's hint, and the fallback.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field, replace
from typing import Optional

import numpy as np

from .plugins.gang import min_resources as gang_min_resources
from .plugins.gang import permit as gangs_mod
from .plugins.gang import preferred as gang_preferred
from .plugins.gang import topology as gang_topology
from .plugins.preemption import postfilter as preemption
from .context import SchedulingContext
from .info import PodInfo
from .plugin_api import Victim
from .node_order import node_tree_order, num_feasible_nodes_to_find
from .filtering import Cycle, StaticFilters
from .scoring import ScoreContext, score_nodes
from .scoring.cache import ScoreCache
from .state import ClusterState, PodMatcher
from .plugins.pod_topology_spread.window_guard import REASON as GUARD_REASON, SpreadGuard


@dataclass
class GreedyResult:
    placements: dict[str, int] = field(default_factory=dict)  # pod key -> node index
    victims: list[Victim] = field(default_factory=list)
    nominations: dict[str, int] = field(default_factory=dict)  # preemptor -> node index
    unschedulable: dict[str, str] = field(default_factory=dict)  # pod key -> message
    state: Optional[ClusterState] = None
    cancelled: bool = False  # stopped early on request: partial, never a plan


def queue_order(ctx: SchedulingContext, gangs: dict[str, gangs_mod.Gang]) -> list[PodInfo]:
    """Priority first; a gang's members together, at the place of its first member (coscheduling)."""
    out: list[PodInfo] = []
    seen: set[str] = set()
    for pod in ctx.window:
        if pod.group is None:
            out.append(pod)
        elif pod.group not in seen:
            seen.add(pod.group)
            out.extend(gangs[pod.group].members)
    return out


def select_host(nodes: np.ndarray, totals: np.ndarray, rng: Optional[random.Random]) -> int:
    best = totals.max()
    tied = nodes[totals == best]
    if rng is None or len(tied) == 1:
        return int(tied[0])
    return int(tied[rng.randrange(len(tied))])


def schedule_greedy(
    ctx: SchedulingContext,
    *,
    static: Optional[StaticFilters] = None,
    allow_preemption: Optional[bool] = None,
    state: Optional[ClusterState] = None,
    cancel: Optional[threading.Event] = None,
    progress: Optional[list[int]] = None,
    score_cache: bool = True,
) -> GreedyResult:
    """``state``: a private copy to work on (default: a copy of the context's). ``cancel``: stop
    at the next pod (the result is then partial and marked). ``progress[0]``: pods done so far.
    ``score_cache``: score through ``ScoreCache`` (the same totals as ``score_nodes``, faster);
    off, every pod is scored by ``score_nodes`` itself."""
    run = _Run.of(ctx, static=static, allow_preemption=allow_preemption, state=state, score_cache=score_cache)
    for done, pod in enumerate(queue_order(ctx, run.gangs.by_key)):
        if cancel is not None and cancel.is_set():
            run.result.cancelled = True
            break
        if progress is not None:
            progress[0] = done
        run.turn(pod)
    return run.result


@dataclass
class _Run:
    """One greedy pass over a window: what each pod's turn reads and leaves for the next."""

    ctx: SchedulingContext
    state: ClusterState
    static: StaticFilters
    sctx: ScoreContext
    scores: Optional[ScoreCache]
    rng: Optional[random.Random]
    preempt: bool
    order: np.ndarray  # the node walk (kube-scheduler's node tree order)
    position: np.ndarray  # each node's place in ``order``
    to_find: int  # numFeasibleNodesToFind
    gangs: GangBook
    result: GreedyResult
    guard: SpreadGuard
    next_start: int = 0  # where the next walk starts in ``order``
    # A pod that found no node (nor victims) fails again, with the same message, as long as no
    # pod left the state, every pod placed since outranks or equals it (placements only take
    # room, and a pod of equal or higher priority is no victim), none of them is counted by its
    # hard spread constraints (other placements leave its skews as they were), it has no
    # required pod affinity (which a placement could satisfy) and the window guard allows it
    # the same nodes. Anti-affinity only grows stricter with placements.
    failed: dict[int, _Failure] = field(default_factory=dict)
    placed: list[PodInfo] = field(default_factory=list)

    @staticmethod
    def of(ctx: SchedulingContext, *, static: Optional[StaticFilters], allow_preemption: Optional[bool],
           state: Optional[ClusterState], score_cache: bool) -> "_Run":
        cfg = ctx.config
        state = state if state is not None else ctx.state.copy()
        static = static or StaticFilters(ctx.nodes, ctx.window)
        sctx = ScoreContext.of(ctx)
        n = len(ctx.nodes)
        order = node_tree_order(ctx.nodes)
        position = np.empty(n, dtype=np.int64)
        position[order] = np.arange(n)
        return _Run(
            ctx, state, static, sctx,
            scores=ScoreCache(state, sctx) if score_cache else None,
            rng=random.Random(cfg.tie_break_seed) if cfg.tie_break_seed is not None else None,
            preempt=cfg.preemption.enabled if allow_preemption is None else allow_preemption,
            order=order,
            position=position,
            to_find=num_feasible_nodes_to_find(n, cfg.percentage_of_nodes_to_score),
            gangs=GangBook.of(ctx),
            result=GreedyResult(state=state),
            guard=SpreadGuard(state, static),
        )

    def turn(self, pod: PodInfo) -> None:
        """One pod's scheduling cycle: its gang's PreFilter and domain, the filters (or the
        failure they gave before), placement or preemption; at a gang's last member, Permit."""
        result, n = self.result, len(self.ctx.nodes)
        gang = self.gangs.by_key.get(pod.group) if pod.group else None
        if gang is not None:
            self.gangs.admit(gang, self.state, result)
        blocked = gang.blocked(pod) if gang else None
        within = None
        topology_key = gang_topology.key_of(gang.group) if gang is not None else None
        if gang is not None and not blocked and topology_key is not None:
            within = self.gangs.domain.get(gang.key)
            if within is None:
                within = self.gangs.domain[gang.key] = _choose_domain(gang, self.state, self.static, self.ctx,
                                                                      self.sctx)
        if blocked:
            result.unschedulable[pod.key] = f"0/{n} nodes are available: {blocked}." if n else blocked
        elif n == 0:
            result.unschedulable[pod.key] = "no nodes available to schedule pods"
        elif _still_failing(self.failed.get(pod.class_id), pod, self.state, self.placed,
                            allowed := _within(self.guard.allowed(pod), within)):
            entry = self.failed[pod.class_id]
            result.unschedulable[pod.key] = entry.message
            self.failed[pod.class_id] = replace(entry, placed_at=len(self.placed))  # checked up to here
        else:
            self._filter(pod, gang, allowed, within, topology_key)
            if pod.key in result.placements:
                self.placed.append(pod)
        if gang is not None and self.gangs.last_member.get(pod.key) is gang:
            self._permit(gang)

    def _filter(self, pod: PodInfo, gang: Optional[gangs_mod.Gang], allowed: Optional[np.ndarray],
                within: Optional[np.ndarray], topology_key: Optional[str]) -> None:
        """Filter the pod along the node walk; place it, or tell why not, or preempt."""
        ctx, state, result, n = self.ctx, self.state, self.result, len(self.ctx.nodes)
        # Pods nominated to a node from outside the window keep their room there: held on
        # the nodes while this pod is filtered (and preempts), taken out before it is scored.
        held = ctx.claims.hold(state, pod, result.placements)
        cycle = Cycle(pod, state, self.static, version=ctx.config.kubernetes_version)
        walk = np.concatenate((self.order[self.next_start:], self.order[:self.next_start]))
        # kube-scheduler tries a pod's nominated node first: passing the filters, it is the
        # one feasible node (no scoring, and the node walk does not move on).
        feasible = ctx.claims.first_node(pod, cycle, allowed)
        first = bool(len(feasible))
        if not first:
            feasible = cycle.feasible(walk, limit=self.to_find, allowed=allowed)
        if len(feasible):
            ctx.claims.release(state, held)
            if not first:
                self._walked(feasible)
            self._place(pod, gang, feasible)
        elif allowed is not None and len(cycle.feasible(walk, limit=1)):
            ctx.claims.release(state, held)
            refused = int((~allowed).sum())
            reason = GUARD_REASON if within is None else gang_topology.outside_domain(topology_key)
            result.unschedulable[pod.key] = f"0/{n} nodes are available: {refused} {reason}."
        else:
            _preempt_or_fail(pod, cycle, self._preemption(pod, cycle, allowed), state, result)
            ctx.claims.release(state, held)
            self._after_postfilter(pod, gang, allowed)

    def _walked(self, feasible: np.ndarray) -> None:
        """Move the next walk's start past the nodes this one filtered."""
        n = len(self.order)
        walked = n if len(feasible) < self.to_find else int((self.position[feasible[-1]] - self.next_start) % n) + 1
        self.next_start = (self.next_start + walked) % n

    def _place(self, pod: PodInfo, gang: Optional[gangs_mod.Gang], feasible: np.ndarray) -> None:
        """Score the feasible nodes (narrowed to a preferred topology's domains) and assume the
        pod on the best."""
        state, chosen = self.state, feasible
        prefer = gang_preferred.keys_of(gang.group) if gang is not None else ()
        if gang is not None and prefer:  # stay in the domains the gang's members use, widest first
            chosen = gang_preferred.narrow(prefer, state, chosen, self.gangs.nodes_used.get(gang.key, ()))
        if len(chosen) == 1:
            node = int(chosen[0])
        else:
            totals = (self.scores.totals(pod, chosen) if self.scores is not None
                      else score_nodes(pod, chosen, state, self.sctx))
            node = select_host(chosen, totals, self.rng)
        state.add(pod, node)
        self.result.placements[pod.key] = node
        self.guard.placed(pod, node)
        if gang is not None:
            self.gangs.nodes_used.setdefault(gang.key, []).append(node)

    def _preemption(self, pod: PodInfo, cycle: Cycle, allowed: Optional[np.ndarray]) -> Optional[preemption.PreemptionOutcome]:
        """DefaultPreemption's PostFilter for a pod no node fits (None: preemption is off)."""
        if not self.preempt:
            return None
        evicted = [v.pod for v in self.result.victims]  # their budgets are spent (a rolled-back gang's are not)
        return preemption.default_preemption(pod, cycle, self.state, self.static, self.ctx, rng=self.rng,
                                             allowed=allowed, evicted=evicted,
                                             protected=frozenset(self.gangs.protected))

    def _after_postfilter(self, pod: PodInfo, gang: Optional[gangs_mod.Gang], allowed: Optional[np.ndarray]) -> None:
        """A pod that preempted reprieves the victims it makes unnecessary (a gang's members at
        Permit); one that failed remembers its failure for its class."""
        result = self.result
        if pod.key in result.placements:
            self.guard.placed(pod, result.placements[pod.key])
            if gang is None and pod.key in result.nominations:
                result.victims = preemption.reprieve_level(
                    result.placements[pod.key], pod.priority, self.state, result.victims, self.ctx)
        elif not pod.affinity and pod.class_id >= 0:
            self.failed[pod.class_id] = _Failure(
                self.state.removals, len(self.placed), result.unschedulable[pod.key],
                None if allowed is None else allowed.tobytes(),
                tuple(PodMatcher.of_spread(c.selector, pod.namespace) for c in pod.hard_spread),
            )

    def _permit(self, gang: gangs_mod.Gang) -> None:
        """Permit at the gang's last member; a gang that keeps its placements has its members'
        preemptions stand, and reprieves the victims they make unnecessary."""
        result = self.result
        if self.gangs.settle(gang, self.state, result):
            for member in gang.members:  # its preemptions, now that they stand
                if member.key in result.nominations:
                    result.victims = preemption.reprieve_level(
                        result.nominations[member.key], member.priority, self.state, result.victims, self.ctx)


def _within(allowed: Optional[np.ndarray], domain: Optional[np.ndarray]) -> Optional[np.ndarray]:
    """The window guard's mask narrowed to a topology gang's domain (either may be None: all)."""
    if domain is None:
        return allowed
    return domain if allowed is None else allowed & domain


def _choose_domain(gang: gangs_mod.Gang, state: ClusterState, static: StaticFilters, ctx: SchedulingContext,
                   sctx: ScoreContext) -> np.ndarray:
    """Upstream's topology-aware scheduling for a gang with required topology: for every domain
    it may use (its running members' one, else each value of the key), place its members on a
    copy of the state, restricted to that domain's nodes; keep the domain that places the most,
    then the fullest by allocation (bin-packing keeps whole domains free for the gangs behind),
    then the first. Returns the chosen domain's nodes as a mask (none at all when no domain is
    possible). No preemption in the trial: the real pass, restricted to the domain, may still
    preempt.

    The answer is that of a trial in every domain, at the cost of few: a domain's trial places at
    most the members its free room could hold (``gang_topology.room_bound``), and one that places
    every member ends exactly as full as its room says beforehand. Trying domains by that bound,
    then by that fullness, the first trial placing every member is the answer, and a domain whose
    bound is below the best trial so far cannot be. When no domain's bound reaches what the gang
    needs, no trial can place it whole (it fails, or preempts in the domain chosen): the domain
    with the largest bound, then the fullest, is taken without trials."""
    key = gang_topology.key_of(gang.group)
    assert key is not None
    ids = gang_topology.domain_ids(state, key)
    chosen = np.zeros(len(ids), dtype=bool)
    # Running members pin the domain as the snapshot has them (victims a rolled-back gang returns
    # come back where they were).
    domains = gang_topology.candidate_domains(gang, ctx.state, key)
    if not domains:
        return chosen
    members = len(gang.members)
    bound = gang_topology.room_bound(gang, state, key)
    full = gang_topology.ratio_if_placed(gang, state, key)
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
            feasible = Cycle(pod, state, static, version=ctx.config.kubernetes_version).feasible(nodes)
            if not len(feasible):
                continue
            totals = score_nodes(pod, feasible, state, sctx)
            state.add(pod, int(feasible[int(np.argmax(totals))]))
            placed.append(pod)
        rank = (len(placed), gang_topology.allocation_ratio(state, nodes), -d)
        for pod in placed:
            state.remove(pod)
        if best is None or rank > best:
            best, chosen = rank, ids == d
    state.removals = removals
    return chosen


@dataclass(frozen=True)
class _Failure:
    """A pod class's last failure, and what must stay unchanged for it to hold (see above)."""

    removals: int
    placed_at: int  # placements before it
    message: str
    allowed: Optional[bytes]  # the window guard's mask then
    counted_by: tuple[PodMatcher, ...]  # its hard spread constraints' pod matchers


def _still_failing(entry: Optional[_Failure], pod: PodInfo, state: ClusterState, placed: list[PodInfo],
                   allowed: Optional[np.ndarray]) -> bool:
    if entry is None or not pod.class_id >= 0 or entry.removals != state.removals:
        return False
    if entry.allowed != (None if allowed is None else allowed.tobytes()):
        return False
    return all(
        p.priority >= pod.priority and not any(m.matches(p) for m in entry.counted_by)
        for p in placed[entry.placed_at:]
    )


def _preempt_or_fail(pod: PodInfo, cycle: Cycle, outcome: Optional[preemption.PreemptionOutcome], state: ClusterState,
                     result: GreedyResult) -> None:
    """Take a preemption's outcome: evict its victims and nominate the pod to its node; or, with
    no node, the pod's FitError (with the PostFilter's message, if preemption ran)."""
    if outcome is not None and outcome.node is not None:
        for victim in outcome.victims:
            state.remove(victim)
            result.victims.append(Victim(victim, outcome.node, pod.key))
        state.add(pod, outcome.node)
        result.placements[pod.key] = outcome.node
        result.nominations[pod.key] = outcome.node
        return
    postfilter = outcome.message if outcome is not None else None
    result.unschedulable[pod.key] = cycle.fit_error(postfilter=postfilter)


@dataclass
class GangBook:
    """Greedy's gang bookkeeping for one window, in one place: coscheduling's PreFilter
    (minResources, asked once per gang), its Permit (the last member settles the gang), and
    topology-aware placement (a required domain chosen once, the nodes a preferred topology
    narrows to)."""

    by_key: dict[str, gangs_mod.Gang]  # the window's gangs
    last_member: dict[str, gangs_mod.Gang]  # key of each gang's last member in queue order -> gang
    # Running members of the window's gangs, by gang; once a gang keeps its window placements,
    # they are ``protected``: a later preemptor may not evict them (minMember is judged on the
    # final state).
    bound_members: dict[str, list[str]] = field(default_factory=dict)
    protected: set[str] = field(default_factory=set)
    # Topology gangs: the nodes of the domain each chose, chosen at its first member.
    domain: dict[str, np.ndarray] = field(default_factory=dict)
    # Gangs whose minResources PreFilter has answered (once, at the first member).
    admission_asked: set[str] = field(default_factory=set)
    # Gangs' members placed so far in the window, by node (a preferred topology's domains).
    nodes_used: dict[str, list[int]] = field(default_factory=dict)

    @staticmethod
    def of(ctx: SchedulingContext) -> "GangBook":
        gangs = gangs_mod.collect(ctx)
        book = GangBook(gangs, {g.members[-1].key: g for g in gangs.values()})
        if any(p.group is not None for p in ctx.window):  # no gang in the window: no member to protect
            for p in ctx.bound:
                if p.group is not None:
                    book.bound_members.setdefault(p.group, []).append(p.key)
        return book

    def admit(self, gang: gangs_mod.Gang, state: ClusterState, result: GreedyResult) -> None:
        """The gang's minResources PreFilter, at its first member only."""
        if gang.key not in self.admission_asked:
            _admit(gang, state, result)
            self.admission_asked.add(gang.key)

    def settle(self, gang: gangs_mod.Gang, state: ClusterState, result: GreedyResult) -> bool:
        """Permit at the gang's last member (``_settle_gang``); a gang that keeps its window
        placements protects its running members from later preemptors."""
        if not _settle_gang(gang, state, result):
            return False
        self.protected.update(self.bound_members.get(gang.key, ()))
        return True


def _admit(gang: gangs_mod.Gang, state: ClusterState, result: GreedyResult) -> None:
    """Coscheduling PreFilter's minResources check at the gang's turn: the free room the pods
    before it left (victims already chosen still count as there). A gang refused at the
    window's start keeps that answer: the room only shrinks since."""
    if gang.group is None or gang.refused is not None:
        return
    held = [(v.pod, v.node) for v in result.victims if v.pod.group != gang.key]
    gang.refused = gang_min_resources.refusal(gang.group, gang.key, state, gang.own, held)


def _settle_gang(gang: gangs_mod.Gang, state: ClusterState, result: GreedyResult) -> bool:
    """Permit: keep the gang's placements only if the whole group lands; else undo them all.
    True when the gang keeps window placements (its running members must then stay)."""
    placed = [p for p in gang.members if p.key in result.placements]
    # Running members evicted by other preemptors no longer count toward minMember.
    evicted = sum(1 for v in result.victims if v.pod.group == gang.key)
    key = gang_topology.key_of(gang.group)
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
    message = gangs_mod.rejected(gang.key, len(placed), gang.need)
    for pod in placed:  # members that found no node keep their own FitError
        result.unschedulable[pod.key] = message
    return False


def _reject_topology_gang(gang: gangs_mod.Gang, key: str, result: GreedyResult) -> None:
    """Every member of a topology gang that fell short gets the topology reason: it could have
    placed only in one domain together with the rest."""
    message = gang_topology.rejected(gang.key, key, gang.need, gang.min_member)
    for pod in gang.members:
        result.unschedulable[pod.key] = message

"""Greedy ``scheduleOne``: kube-scheduler's decision, one pod at a time.

For each pod in queue order: PreFilter and Filter against the state the pods before it left,
stopping once ``numFeasibleNodesToFind`` nodes pass (nodes walked round-robin across zones from
where the last cycle stopped); score those; pick the best (first in walk order, or kube-
scheduler's uniform random choice when a tie-break seed is set); assume the pod into the state so
the next pod sees it. A pod that fits nowhere tries DefaultPreemption, else gets the FitError
message. The rules' parts in the pass beyond their filters (``plugin_api.GreedyPart``, one per
plugin with a ``greedy`` hook, asked in ``PLUGINS`` order) order the queue, gate each pod's turn,
narrow the nodes it is scored on and settle after it: coscheduling (its ``GreedyPart``)
places a gang's members tentatively and rolls them back, victims included, when their group
falls short of minMember — the Permit stage, so the fallback never half-places — refuses a gang
whose minResources the free room left at its turn cannot cover (PreFilter), and gives a gang
with required topology one domain (upstream's TAS: a trial placement per domain); topology
spread's window guard keeps each pod off the domains where it would break the spread of a pod
placed before it. The PostFilter is the registry's (DefaultPreemption); as in kube-scheduler, an
eviction is never taken back during the pass, so later pods find the room it left; once every
pod has had its turn, victims whose room no pod took are put back (``reprieve_at_end``).

It is the baseline every solver result is measured against, the solver's hint, and the fallback.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field, replace
from collections.abc import Mapping, Sequence
from typing import Optional

import numpy as np

from . import progress as stages
from .context import SchedulingContext
from .info import PodInfo
from .plugin_api import GreedyPart, PostFilterOutcome, Victim
from .plugins import registry
from .node_order import node_tree_order, num_feasible_nodes_to_find
from .filtering import Cycle, StaticFilters
from .scoring import ScoreContext, score_nodes
from .scoring.cache import ScoreCache
from .state import ClusterState, PodMatcher


@dataclass
class GreedyResult:
    placements: dict[str, int] = field(default_factory=dict)  # pod key -> node index
    victims: list[Victim] = field(default_factory=list)
    nominations: dict[str, int] = field(default_factory=dict)  # preemptor -> node index
    unschedulable: dict[str, str] = field(default_factory=dict)  # pod key -> message
    state: Optional[ClusterState] = None
    cancelled: bool = False  # stopped early on request: partial, never a plan


def queue_order(ctx: SchedulingContext, parts: list[GreedyPart], queue: Optional[list[PodInfo]] = None) -> list[PodInfo]:
    """kube-scheduler's queue (``SchedulingContext.queue``: priority first, then the rules'
    QueueSort, e.g. a gang's members together), or ``queue`` when given, as each rule's part
    takes it in."""
    queue = list(ctx.queue() if queue is None else queue)
    for part in parts:
        queue = part.order(queue)
    return queue


def select_host(nodes: np.ndarray, totals: np.ndarray, rng: Optional[random.Random]) -> int:
    best = totals.max()
    tied = nodes[totals == best]
    if rng is None or len(tied) == 1:
        return int(tied[0])
    return int(tied[rng.randrange(len(tied))])


# How often a long pass says how far it is, to a person watching (``solver.progress``).
PROGRESS_SECONDS = 2.0


def progress_line(done: int, total: int) -> str:
    """The stage line of a pass that has decided ``done`` of ``total`` pods."""
    return f"greedy scheduleOne: {done:,} of {total:,} pod(s) decided"


def schedule_greedy(
    ctx: SchedulingContext,
    *,
    static: Optional[StaticFilters] = None,
    allow_preemption: Optional[bool] = None,
    state: Optional[ClusterState] = None,
    cancel: Optional[threading.Event] = None,
    progress: Optional[list[int]] = None,
    score_cache: bool = True,
    guide: Optional[Guide] = None,
    queue: Optional[list[PodInfo]] = None,
) -> GreedyResult:
    """``state``: a private copy to work on (default: a copy of the context's). ``cancel``: stop
    at the next pod (the result is then partial and marked). ``progress[0]``: pods done so far.
    ``score_cache``: score through ``ScoreCache`` (the same totals as ``score_nodes``, faster);
    off, every pod is scored by ``score_nodes`` itself. ``guide``: a pass led by another plan's
    nodes (``Guide``), no longer kube-scheduler's own decision. ``queue``: the pods in another
    order than kube-scheduler's queue (``cpsat.small_first``), no longer its decision either."""
    run = _Run.of(ctx, static=static, allow_preemption=allow_preemption, state=state, score_cache=score_cache)
    run.guide = guide
    every = stages.Every(PROGRESS_SECONDS)
    for done, pod in enumerate(queue_order(ctx, run.parts, queue)):
        if cancel is not None and cancel.is_set():
            run.result.cancelled = True
            break
        if progress is not None:
            progress[0] = done
        if done and not done & 255 and every.due():
            stages.stage(progress_line(done, len(ctx.window)))
        run.turn(pod)
    if not run.result.cancelled:
        run.reprieve_at_end()
    return run.result


@dataclass(frozen=True)
class Guide:
    """Another plan's nodes for a pass to follow where kube-scheduler's rules let it.

    At a guided pod's turn its node is tried first: taken when the pod passes every filter
    there; else, when preemption is on, taken with the victims kube-scheduler's preemption picks
    on that node (``select_victims`` on it alone, the pass's state as the pods before left it).
    Otherwise, and for a pod the guide leaves out when ``others`` is set, the turn is
    kube-scheduler's own (filter, score, preempt anywhere); with ``others`` off such a pod stays
    pending. Each victim is one kube-scheduler's preemption evicts for its pod on its node, at
    its turn, which is what the replay of a plan checks; so the pass turns a plan the replay
    refuses (the solver's, ``cpsat.kube_victims``) into one it allows, keeping as much of it as
    the turns allow."""

    nodes: Mapping[str, int]
    others: bool = True


@dataclass
class _Run:
    """One greedy pass over a window: what each pod's turn reads and leaves for the next."""

    ctx: SchedulingContext
    state: ClusterState
    static: StaticFilters
    sctx: ScoreContext
    cache_scores: bool  # score classes of several pods through ``scores``, made when first needed
    rng: Optional[random.Random]
    preempt: bool
    order: np.ndarray  # the node walk (kube-scheduler's node tree order)
    position: np.ndarray  # each node's place in ``order``
    to_find: int  # numFeasibleNodesToFind
    # The rules' parts in the pass beyond their filters (``plugin_api.GreedyPart``, in
    # ``PLUGINS`` order: topology spread's window guard, coscheduling).
    parts: list[GreedyPart]
    result: GreedyResult
    next_start: int = 0  # where the next walk starts in ``order``
    scores: Optional[ScoreCache] = None
    guide: Optional[Guide] = None
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
        version = cfg.kubernetes_version

        def trial(pod: PodInfo, nodes: np.ndarray) -> Optional[int]:
            """Where ``pod`` would go among ``nodes`` on the pass's state: filtered, scored, the
            best (no preemption, no tie-break); None when no node passes."""
            feasible = Cycle(pod, state, static, version=version).feasible(nodes)
            if not len(feasible):
                return None
            return int(feasible[int(np.argmax(score_nodes(pod, feasible, state, sctx)))])

        return _Run(
            ctx, state, static, sctx,
            cache_scores=score_cache,
            rng=random.Random(cfg.tie_break_seed) if cfg.tie_break_seed is not None else None,
            preempt=(cfg.preemption.enabled if allow_preemption is None else allow_preemption) and registry.POSTFILTER is not None,
            order=order,
            position=position,
            to_find=num_feasible_nodes_to_find(n, cfg.percentage_of_nodes_to_score),
            parts=[make(ctx, state, static, trial) for make in registry.GREEDY_PARTS],
            result=GreedyResult(state=state),
        )

    def turn(self, pod: PodInfo) -> None:
        """One pod's scheduling cycle: the rules' gates (a gang's PreFilter and domain, the
        window guard), the filters (or the failure they gave before), placement or preemption;
        then the rules settle (at a gang's last member, Permit)."""
        result, n, state = self.result, len(self.ctx.nodes), self.state
        blocked, allowed, outside = None, None, ""
        for part in self.parts:
            gate = part.gate(pod, state, result)
            if gate.blocked:
                blocked = gate.blocked
                break
            if gate.within is not None:
                allowed = gate.within if allowed is None else allowed & gate.within
                outside = gate.outside
        if blocked:
            result.unschedulable[pod.key] = f"0/{n} nodes are available: {blocked}." if n else blocked
        elif n == 0:
            result.unschedulable[pod.key] = "no nodes available to schedule pods"
        elif _still_failing(self.failed.get(pod.class_id), pod, state, self.placed, allowed):
            entry = self.failed[pod.class_id]
            result.unschedulable[pod.key] = entry.message
            self.failed[pod.class_id] = replace(entry, placed_at=len(self.placed))  # checked up to here
        else:
            if not self._guided(pod, allowed):
                self._filter(pod, allowed, outside)
            if pod.key in result.placements:
                self.placed.append(pod)
        for part in self.parts:
            part.settle(pod, state, result)  # a gang's preemptions stand once the gang does

    def _guided(self, pod: PodInfo, allowed: Optional[np.ndarray]) -> bool:
        """The guide's turn for ``pod`` (``Guide``): True when it decided the pod (placed it on
        its guided node, or left it pending as the guide does), False for kube-scheduler's own
        turn."""
        guide = self.guide
        if guide is None:
            return False
        node = guide.nodes.get(pod.key)
        if node is None:
            if guide.others:
                return False
            self.result.unschedulable[pod.key] = "left pending by the plan the pass follows"
            return True
        if allowed is not None and not allowed[node]:
            return False
        ctx, state = self.ctx, self.state
        held = ctx.claims.hold(state, pod, self.result.placements)
        cycle = Cycle(pod, state, self.static, version=ctx.config.kubernetes_version)
        if len(cycle.feasible(np.array([node], dtype=np.int64))):
            ctx.claims.release(state, held)
            self._assume(pod, node)
            return True
        only = np.zeros(len(ctx.nodes), dtype=bool)
        only[node] = True  # ``allowed`` holds it (checked above)
        outcome = self._preemption(pod, cycle, only)
        if outcome is None or outcome.node is None:
            ctx.claims.release(state, held)
            return False
        _preempt_or_fail(pod, cycle, outcome, state, self.result)
        ctx.claims.release(state, held)
        self._after_postfilter(pod, allowed)
        return True

    def _filter(self, pod: PodInfo, allowed: Optional[np.ndarray], outside: str) -> None:
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
            self._place(pod, feasible)
        elif allowed is not None and len(cycle.feasible(walk, limit=1)):
            ctx.claims.release(state, held)
            refused = int((~allowed).sum())
            result.unschedulable[pod.key] = f"0/{n} nodes are available: {refused} {outside}."
        else:
            _preempt_or_fail(pod, cycle, self._preemption(pod, cycle, allowed, held), state, result)
            ctx.claims.release(state, held)
            self._after_postfilter(pod, allowed)

    def _walked(self, feasible: np.ndarray) -> None:
        """Move the next walk's start past the nodes this one filtered."""
        n = len(self.order)
        walked = n if len(feasible) < self.to_find else int((self.position[feasible[-1]] - self.next_start) % n) + 1
        self.next_start = (self.next_start + walked) % n

    def _place(self, pod: PodInfo, feasible: np.ndarray) -> None:
        """Score the feasible nodes (as the rules narrow them: a preferred topology's domains)
        and assume the pod on the best."""
        state, chosen = self.state, feasible
        for part in self.parts:
            chosen = part.narrow(pod, state, chosen)
        if len(chosen) == 1:
            node = int(chosen[0])
        else:
            # The cache pays for itself from a class's second pod: a lone pod is scored directly,
            # without the class's per-node arrays and spread tables. Both give the same totals.
            classes = self.ctx.classes
            if self.cache_scores and 0 <= pod.class_id < len(classes) and classes[pod.class_id].size > 1:
                if self.scores is None:
                    self.scores = ScoreCache(state, self.sctx)
                totals = self.scores.totals(pod, chosen)
            else:
                totals = score_nodes(pod, chosen, state, self.sctx)
            node = select_host(chosen, totals, self.rng)
        self._assume(pod, node)

    def _assume(self, pod: PodInfo, node: int) -> None:
        """Assume ``pod`` on ``node`` (it fits there without victims) and tell the rules."""
        self.state.add(pod, node)
        self.result.placements[pod.key] = node
        for part in self.parts:
            part.placed(pod, node, preempted=False)

    def _preemption(self, pod: PodInfo, cycle: Cycle, allowed: Optional[np.ndarray],
                    held: Sequence[PodInfo] = ()) -> Optional[PostFilterOutcome]:
        """The PostFilter (DefaultPreemption) for a pod no node fits (None: preemption is off).
        ``held``: the claims of pods nominated from outside the window, in the state while the pod
        is filtered: they keep their room, and are never victims (kube-scheduler's preemption
        evicts only pods on the node; a nominated pod is not one yet)."""
        if not self.preempt or registry.POSTFILTER is None:
            return None
        # their budgets are spent (a rolled-back gang's are not); read only where budgets exist
        evicted = (v.pod for v in self.result.victims)
        protected = frozenset().union(*(part.protected() for part in self.parts), (p.key for p in held))
        return registry.POSTFILTER.default_preemption(pod, cycle, self.state, self.static, self.ctx, rng=self.rng,
                                            allowed=allowed, evicted=evicted, protected=protected)

    def reprieve_at_end(self) -> None:
        """Victims whose room no pod took, put back once every pod has had its turn.

        kube-scheduler evicts at each preemptor's turn and never takes an eviction back, so the
        pods after a preemptor — of its priority or lower — find the room its victims left; the
        pass does the same. Once the queue is done, what is left of that room is given back to
        the victims (``reprieve_level``: each level's victims on a node, the most important
        first, while the node holds them beside everything placed): the plan evicts less than
        kube-scheduler's order would, which the replay allows, and places the same pods."""
        result = self.result
        if not result.victims or registry.POSTFILTER is None:
            return
        levels = {(v.node, self.ctx.window_pod(v.preemptor).priority) for v in result.victims}
        for node, level in sorted(levels, key=lambda nl: (-nl[1], nl[0])):
            result.victims = registry.POSTFILTER.reprieve_level(node, level, self.state, result.victims, self.ctx)

    def _after_postfilter(self, pod: PodInfo, allowed: Optional[np.ndarray]) -> None:
        """A pod that preempted is placed (its victims stay evicted until ``reprieve_at_end``); one
        that failed remembers its failure for its class."""
        result = self.result
        if pod.key in result.placements:
            for part in self.parts:
                part.placed(pod, result.placements[pod.key], preempted=True)
        elif not pod.affinity and pod.class_id >= 0:
            self.failed[pod.class_id] = _Failure(
                self.state.removals, len(self.placed), result.unschedulable[pod.key],
                None if allowed is None else allowed.tobytes(),
                tuple(PodMatcher.of_spread(c.selector, pod.namespace) for c in pod.hard_spread),
            )


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


def _preempt_or_fail(pod: PodInfo, cycle: Cycle, outcome: Optional[PostFilterOutcome], state: ClusterState,
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

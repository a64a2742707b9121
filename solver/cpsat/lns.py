"""The optimiser at cluster scale: a large-neighbourhood search seeded by greedy's plan (issue 34).

When the per-node model of the whole window would not be built in time (tens of thousands of class
x node pairs), the window is improved a neighbourhood at a time instead of being left to greedy:

1. greedy's plan is the first incumbent (it is valid: kube-scheduler's own algorithm);
2. each round frees a *neighbourhood*: a few dozen nodes, and every window pod the incumbent places
   on them (they are decided again), plus pods the incumbent leaves out that may use those nodes.
   Everything else stays as the incumbent has it: the pods it places elsewhere are added to the
   cluster state (so spread counts, anti-affinity and room read them as constants) and its victims
   elsewhere are taken out;
3. the neighbourhood is one small model (``build_component`` over the freed pods' classes, their
   candidate nodes cut down to the neighbourhood: at most ``ROUND_PAIRS`` class x node pairs),
   hinted with the incumbent, solved briefly with kube-scheduler's preemption rule enforced
   (``kube_victims.solve_sound``);
4. the round's plan (the incumbent outside, the model's inside) replaces the incumbent when the
   project's own ordering (``choose``: pods by priority tier, budgets, victims) prefers it.

Neighbourhoods take turns (``KINDS``): the best nodes for the highest-priority pods left out
(those with the lowest-priority pods to evict, then the most free room), twice, the nodes with
the costliest victims, and a slice of one topology domain (a zone's nodes) for pods whose rules
read domains; between each two, a packing round (no evictions) over the nodes where the incumbent
leaves such a pod the most free room.

Pods the rules tie beyond one node in ways a fixed remainder cannot express stay where the
incumbent has them and are never freed: gang members (all or nothing), pods with volumes or
device claims (their bindings and allocations follow the whole plan's order). Whether a window
qualifies at all is ``eligible``. Every round's plan is a whole plan; the decision's final plan is
validated as every plan is (``solver.api``).
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import logging
import random
import re
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from .. import interrupt, progress
from ..context import PodClass, SchedulingContext
from ..disruption import PdbBudgets
from ..greedy import GreedyResult
from ..info import PodInfo
from ..plugin_api import Victim
from ..plugins import registry
from ..scoring import ScoreContext
from ..state import ClusterState
from .build import BuildInput, build_component, candidates
from .choose import choose, plan_value, tier_weights
from .decode import extract
from .hint import best_hint
from .kube_victims import WholePlan, name_by_replay, solve_sound
from .stages import solve_component
from .outcome import Solution

log = logging.getLogger("cpsat_scheduler.solver")

# Class x node pairs one round's model may hold (built and solved in well under a second).
ROUND_PAIRS = 3000
# Nodes one neighbourhood frees at most, and at least.
MAX_NODES = 60
MIN_NODES = 4
# A round is not started with less time than this left.
MIN_ROUND_SECONDS = 1.0
# ... or this, for a packing round that needs no replay (``out_of_sight``): its model is a few
# hundred pairs without eviction variables (at 1,000 nodes: built in 0.15-0.25 s, and with 0.75 s
# left a round of 0.65 s placed +5 and +38 pods on two seeds).
MIN_PACK_ROUND_SECONDS = 0.6
# Share of the time left one round may use.
ROUND_SHARE = 0.25
# The fewest pairs a round's model is cut down to, however slow the builds before it were.
MIN_ROUND_PAIRS = 300
# CP-SAT workers of a round's solve (fewer when the user's config says so).
ROUND_WORKERS = 2
# A search given one worker a round (two searches side by side on 2 cores, ``small_first``) takes
# rounds this much longer: one worker finds a round's gains more slowly than two. On the same
# small-first plans of the contended 1,000-node seeds 0-3 and 7 (5 s each), tier 1000 gained
# +12, +38, +49, +22 and seed 7's tier 10000 +37 in 3 rounds with 1.5, against +13, +27, +40,
# +15 and +23 in 4-5 rounds with 1.0, and +2, +27, +24, +20 and +23 in 2 rounds with 2.0.
ONE_WORKER_ROUND_SCALE = 1.5
# A round that may evict, its model above this many variables, gives both workers to CP-SAT's own
# neighbourhood search (``use_lns_only``): with the default split (one worker on the full problem,
# the other taking turns between nine subsolvers) each neighbourhood subsolver ran once in a
# second. On the contended 1,000-node windows (left-out rounds of about 5,000 variables, never
# proven optimal within a round) the search then placed more pods of tier 1000, on the same
# greedy plan with 4.5 s of search: +5, +8/+14, +7, +10, +9 and +27 against +2, +4/+10, +3, +6,
# +5 and +20 (seeds 0, 1, 2, 3, 6 and 9). Smaller models keep the default, which proves many of
# them optimal early: with every round on neighbourhoods alone, a 300-node search (rounds of
# 500-1,500 variables, one proven in 0.06 s) placed 12 of tier 1000 where the default placed 17.
# Packing rounds keep the default as well: on neighbourhoods alone the searches placed fewer
# pods of tier 100 on five of seven 1,000-node windows.
LNS_ONLY_VARIABLES = 2500
# Share of a round's time left after the build that completing the incumbent as the hint may
# take: a round whose hint is not completed rarely finds even the incumbent again.
HINT_SHARE = 0.5
# A round's solve gets at least this long (within the decision's deadline), even when its build
# used the round's budget: CP-SAT's presolve alone takes a tenth of a second on a busy machine, and
# rounds cut shorter answered UNKNOWN with the incumbent as their hint.
MIN_SOLVE_SECONDS = 0.5
# A round's plan is replayed whole after its solve (kube-scheduler's preemption in queue order,
# ``WholePlan``): before the first replay is timed, it is guessed at this share of greedy's pass
# (the contended 1,000-node window: 0.33-0.45 s after a 6-9 s pass). The solve stops that long
# before the deadline, and a round starts only with that much more time left: a round whose
# replay ran past the deadline took the decision 0.9 s past a 10 s limit.
FIRST_REPLAY_SHARE = 0.07


@dataclass
class LnsStats:
    """What the search did (``PlanStats.lns_*``)."""

    rounds: int = 0
    improved: int = 0
    max_pairs: int = 0
    placed_gain: int = 0  # pods placed beyond greedy's plan
    victims_change: int = 0  # victims against greedy's plan (negative: fewer)
    history: list[str] = field(default_factory=list)  # per improving round: what it gained
    # The small-first start (``small_first.start_note``): what it found and whether the search
    # started from it; None when it was not looked for.
    start: Optional[str] = None
    start_child_mib: Optional[float] = None  # the child's private memory at its end
    # When no round started: (seconds left, seconds the first round needed).
    too_short: Optional[tuple[float, float]] = None
    # Why the search stopped before its deadline: its plan was one no round can improve
    # (``settled``); None when it ran until the deadline.
    settled: Optional[str] = None


def settled(ctx: SchedulingContext, placements: dict[str, int], victims: list[Victim]) -> Optional[str]:
    """Why no plan can be better than this one (``placements``, ``victims``) on the levels a
    round is judged by (``choose`` without scores), or None when one might: it evicts nothing,
    and every window pod it leaves out is one no node could hold in any plan (``_most_room``: its
    static filters, and its requests against each node's allocatable less what the running pods
    no window pod may preempt hold). Such a plan places every pod of every tier that any plan
    could, with no victim; the rules' own levels are the same for every plan of a window without
    pod groups (the search is not run on claims: ``eligible``), so a window with a group is never
    called settled. Cheap where it matters: a plan with victims is answered at once, and the
    first left-out pod a node could hold ends the look."""
    if victims:
        return None
    # (what does not change with the plan is kept on the context: a search asks before each round)
    memo = ctx.__dict__.setdefault("_lns_settled", {})
    if "groups" not in memo:
        memo["groups"] = any(p.group is not None for p in ctx.window)
    if memo["groups"]:
        return None
    fits: dict[int, bool] = memo.setdefault("fits", {})  # per pod class: could some plan place it
    left = 0
    for pod in ctx.window:
        if pod.key in placements:
            continue
        left += 1
        hit = fits.get(pod.class_id) if pod.class_id >= 0 else None
        if hit is None:
            nodes = np.flatnonzero(_static_mask(ctx, pod))
            hit = bool(len(nodes)) and bool((_most_room(ctx)[nodes] >= ctx.state.vector(pod)).all(axis=1).any())
            if pod.class_id >= 0:
                fits[pod.class_id] = hit
        if hit:
            return None
    if not left:
        return "every window pod is placed and none is evicted"
    return (f"no pod is evicted, and every window pod is placed but {left}, which no node could hold "
            f"even emptied of the window's pods and of every running pod a window pod may preempt")


def _most_room(ctx: SchedulingContext) -> np.ndarray:
    """Per node, the most room any plan could leave there: allocatable less what the running pods
    hold that no window pod may preempt (a pod may have its room from another's preemption: one
    of higher priority evicting a running pod the left-out pod itself could not). A running pod
    is one some window pod may preempt when preemption is on and a window pod that may preempt
    has a higher priority; window pods in the state count as gone. Kept on the context."""
    hit = ctx.__dict__.get("_lns_most_room")
    if hit is None:
        state = ctx.state
        preempting = [p.priority for p in ctx.window if ctx.config.preemption.enabled and not p.preempt_never]
        hit = _room_below(ctx, max(preempting) if preempting else None).copy()
        for pod in ctx.window:
            node = state.where.get(pod.key)
            if node is not None:
                hit[node] += state.vector(pod)
        hit.flags.writeable = False
        ctx.__dict__["_lns_most_room"] = hit
    return hit


def _room_below(ctx: SchedulingContext, priority: Optional[int]) -> np.ndarray:
    """Per node, the free room plus what the running pods below ``priority`` hold (those a pod of
    that priority could evict; None: none), window pods in the state not counted among them.
    Kept on the context per priority (read-only): each left-out round asks it of its pick's."""
    cache = ctx.__dict__.setdefault("_lns_room_below", {})
    hit = cache.get(priority)
    if hit is None:
        state = ctx.state
        hit = state.free.copy()
        if priority is not None:
            window = ctx._window_by_key
            for node, pods in enumerate(state.pods_on):
                for q in pods.values():
                    if q.priority < priority and q.key not in window:
                        hit[node] += state.vector(q)
        hit.flags.writeable = False
        cache[priority] = hit
    return hit


def eligible(ctx: SchedulingContext) -> Optional[str]:
    """Why the search does not apply to this window, or None when it does."""
    if any(p.claims or p.pod.spec.resource_claims for p in ctx.window):
        return "a window pod has volumes or device claims"
    return None


@dataclass
class _Plan:
    placements: dict[str, int]
    victims: list[Victim]
    # The cluster with the whole plan applied, made by the first round on this plan.
    applied: Optional[ClusterState] = None
    # Each victim's preemptor, as the replay of the whole plan finds it (greedy's own, for its plan;
    # None: not known without a replay).
    names: Optional[dict[str, str]] = None
    # Whether a pod may be decided again by a packing round without a replay (``out_of_sight``).
    out_of_sight: Optional[Callable[[PodInfo], bool]] = None
    # The incumbent a round made this plan from: ``_applied`` then changes a copy of its state by
    # what the round changed, instead of applying the whole plan again (dropped once used).
    base: Optional["_Plan"] = None


def improve(ctx: SchedulingContext, static, greedy: GreedyResult, deadline: float,
            seed: int = 0, greedy_seconds: float = 0.0, start: Optional[GreedyResult] = None,
            workers: Optional[int] = None,
            on_better: Optional[Callable[[dict[str, int], list[Victim], dict[str, str], LnsStats], None]] = None,
            stop: Optional[Callable[[], Optional[str]]] = None,
            ) -> tuple[Solution, LnsStats]:
    """Greedy's plan improved round by round until ``deadline`` (``greedy_seconds``: what greedy's
    pass took, the first guess at what replaying a whole plan takes). ``start``: another plan of
    kube-scheduler's turns (each victim named for the pod at whose turn its preemption evicts it,
    as greedy's are), better than greedy's, to start from instead (``small_first``); the stats
    still count from greedy's. ``workers``: at most this many CP-SAT workers a round (a second
    search running beside this one, ``small_first``, has the other core). ``on_better``: told of
    each new incumbent (its placements, victims, the preemptors the replays named for them, and
    the stats so far), for a search whose last round may come too late (``small_first``).
    The search stops early once its plan is one no round can improve (``settled``), or once
    ``stop`` gives a reason (the other search's plan is such a plan: ``small_first``)."""
    search = _Search(ctx, static, start if start is not None else greedy, seed, greedy_seconds, workers)
    if start is not None:
        search.stats.history.append(f"start: the small-first pass's plan against greedy's: "
                                    f"{gain(ctx, search.best, _Plan(greedy.placements, greedy.victims))}")
    while search.free_pods:
        why = settled(ctx, search.best.placements, search.best.victims) or (stop() if stop is not None else None)
        if why is not None:
            search.stats.settled = why
            search.stats.history.append(f"stopped after {search.stats.rounds} round(s): {why}")
            break
        kind = search.kind(deadline)
        left, least = deadline - time.monotonic(), search.least_round_seconds(kind)
        if left <= least and kind != "pack":
            # Too short for this kind's round (its solve and the replay after it); if long enough
            # for a packing round's, one is run instead (on a contended 1,000-node window, a
            # search that stopped after 0.18 s of its 1.3 s had a left-out round next).
            pack = search.least_round_seconds("pack")
            if left > pack:
                kind, least = "pack", pack
        if left <= least:
            if not search.stats.rounds:
                search.stats.too_short = (left, least)
            break
        interrupt.check()
        before = search.best
        if not search.round(deadline, kind):
            break
        if on_better is not None and search.best is not before:
            on_better(search.best.placements, search.best.victims, search.best.names or {}, search.stats)
        progress.stage(f"large-neighbourhood search: round {search.stats.rounds}, {search.stats.improved} improving; "
                       f"{max(0.0, deadline - time.monotonic()):.1f}s left")
    best, stats = search.best, search.stats
    sol = Solution(placements=best.placements, victims=best.victims, status="FEASIBLE")
    if stats.improved or start is not None:
        # (greedy's plan, when no round improved it, is decided as greedy's: nothing to name)
        name_by_replay(ctx, sol, static, names=best.names)
    stats.placed_gain = len(best.placements) - len(greedy.placements)
    stats.victims_change = len(best.victims) - len(greedy.victims)
    return sol, stats


# Round kinds in turn: the left-out pods' best nodes (with evictions), twice, the nodes of the
# costliest victims, a slice of a zone, and between each two the nodes without victims where the
# incumbent leaves a left-out pod the most free room (packing alone: a model without eviction
# variables, quick to solve; on the 300-node contended cluster one such round placed 28 more
# pods, no eviction). The left-out kind comes twice because it is the one that gains in the
# highest tiers: with the victims' round second, the 1,000-node searches (four rounds in 4.5 s,
# two that evict) placed fewer pods of tier 1000 in 13 of 18 draws on seven windows and the
# 300-node seed 0 five fewer (seed 9 the exception: its victims' round placed 8, where a
# second left-out round placed 7).
KINDS = ("left-out", "pack", "left-out", "pack", "victims", "pack", "domain", "pack")
# A search with less time than this opens with a packing round, then takes the kinds in turn:
# packing is the quickest kind to yield (the contended 1,000-node window on 2 busy cores, 1.5 s
# left after greedy: +10 and +11 pods in 1.4 s, where the left-out round found 0 and 1 in 1.2 s).
# Its rounds skip the score stage: there it took 0.2-0.3 s of a 1.5 s round that had placed
# +18 pods of the top tier already, and rounds are ranked without scores.
SHORT_SEARCH_SECONDS = 3.0
# Rounds a node just freed sits out of the next neighbourhoods.
TABU_ROUNDS = 4
# Share of a round's budget its build may take (the rest is the solve's), judged by the pace of
# the rounds before; the first round's pace is a guess.
BUILD_SHARE = 0.5
FIRST_SECONDS_PER_PAIR = 2e-4
# A running pod a round's model may evict (its eviction, level and reprieve rows) costs about as
# much to build as this many class x node pairs: a round's size is its pairs plus this many per
# potential victim. On the contended 1,000-node window evicting rounds then built at 0.9-1.3e-4 s
# per unit whatever their mix (1,050 pairs and 128 potential victims in 0.22 s; 2,470 and 535 in
# 0.82 s), packing rounds at 0.9-1.0e-4 s a pair past their fixed cost. Sized by pairs alone,
# rounds over nodes full of lower pods (2,470 pairs and 535 potential victims, seed 5; 2,604 and
# 515, seed 3) spent 0.8-0.9 s of a 1.0 s budget building, had no time to complete the hint, and
# answered UNKNOWN.
VICTIM_PAIRS = 10


class _Search:
    """The incumbent, the rounds' bookkeeping, and one round at a time (``round``)."""

    def __init__(self, ctx: SchedulingContext, static, greedy: GreedyResult, seed: int,
                 greedy_seconds: float = 0.0, workers: Optional[int] = None) -> None:
        self.ctx, self.static = ctx, static
        self.workers = workers
        self.weights = tier_weights([p.priority for p in ctx.window])
        # Greedy's own state is its plan applied to the cluster (reprieved victims put back): the
        # first round copies it instead of adding 10,000 pods again (0.15-0.2 s at 1,000 nodes).
        # Its victims are named for the pods greedy evicted them for: greedy is kube-scheduler's
        # queue-order algorithm, so those are the turns a replay of its plan finds (the validator
        # checks every name against that replay, and refuses a plan that names another). A
        # packing round that leaves the replayed turns alone keeps them, and neither it nor the
        # end of the search replays the plan: at 1,000 nodes that is 0.3-0.4 s more for rounds.
        # (A start without a state, the small-first plan's, is applied at the first round.)
        self.best = _Plan(dict(greedy.placements), list(greedy.victims), applied=greedy.state,
                          names={v.pod.key: v.preemptor for v in greedy.victims})
        self.stats = LnsStats()
        self.rng = random.Random(seed)
        fixed = {p.key for p in ctx.window if p.group is not None or p.claims or p.pod.spec.resource_claims}
        self.free_pods = [p for p in ctx.window if p.key not in fixed]
        # Nodes holding a pod that is never freed are never freed either (it would read as a
        # running pod, and a victim, in the round's model).
        self.pinned = {node for key, node in greedy.placements.items() if key in fixed}
        self.hard = ctx.config.preemption.pdb == "hard"
        self.sctx = ScoreContext.of(ctx)
        self.tabu: dict[int, int] = {}  # node -> the round it sits out until
        # The pace of the builds and their times, kept apart for rounds that may evict and packing
        # rounds, keyed by ``_preempts``: a round with eviction variables costs several times more
        # per pair (the contended 1,000-node window, seed 5: 9.5e-5 s a pair packing, 4.7e-4 with
        # 1,702 potential victims), so one pace for both overbuilt the evicting round after a
        # packing one (1.38 s of a 1.0 s budget, its solve left no time) and underbuilt the
        # packing round after an evicting one. Since the nineteenth round the pace is per unit of
        # size (a pair, and ``VICTIM_PAIRS`` per potential victim), which evens out most of that.
        # Seconds per unit of each round built, after the first guess (``seconds_per_pair``).
        self.paces: dict[bool, list[float]] = {False: [FIRST_SECONDS_PER_PAIR], True: [FIRST_SECONDS_PER_PAIR]}
        self.builds: dict[bool, list[float]] = {False: [], True: []}  # seconds each round took to build
        self.short: Optional[bool] = None  # whether the search opens with a packing round
        # What the whole plan's replay after a round's solve takes (the slowest timed so far).
        self.replay_seconds = FIRST_REPLAY_SHARE * greedy_seconds

    def kind(self, deadline: float) -> str:
        """The next round's kind (``KINDS`` in turn, after a packing round in a short search)."""
        done = self.stats.rounds
        if self.short is None:
            self.short = deadline - time.monotonic() < SHORT_SEARCH_SECONDS
        if self.short:
            if done == 0:
                return "pack"
            done -= 1
        return KINDS[done % len(KINDS)]

    def least_round_seconds(self, kind: str) -> float:
        """The least time worth starting a round of ``kind`` with: the quickest recent build of a
        round of its kind (evicting or packing), a solve, and the replay of the plan it gives (none
        for a packing round: ``out_of_sight``)."""
        recent = self.builds[self._preempts(kind)][-3:]
        replay = self._replay(kind)
        return max(_least(kind, replay), (min(recent) if recent else 0.0) + MIN_SOLVE_SECONDS) + replay

    def _replay(self, kind: str, nodes: Optional[list[int]] = None) -> float:
        """The time a round of ``kind`` (over ``nodes``, when chosen) keeps for the whole plan's
        replay after its solve: none for a round ``_unseen`` decides (``_round``) on an incumbent
        whose victims are named (greedy's are, and each round's plan is; one that were not would
        be replayed once at the end to name them, ``name_by_replay``, and that must fit before the
        deadline too: it took the decision 0.3 s past the limit)."""
        plan = self.best
        if (plan.names is not None or not plan.victims) and _unseen(self.ctx, plan, self._preempts(kind), nodes):
            return 0.0
        return self.replay_seconds

    @property
    def seconds_per_pair(self) -> dict[bool, float]:
        """The pace a round of each kind (keyed by ``_preempts``) is sized by, in seconds per unit
        of size: a packing round's, its kind's last. An evicting round's build varies by 2-3x a
        unit with how full its nodes are (the reprieve's rows grow with the victims and the classes
        of each node): overbuilt, it leaves its solve no time and loses the round; underbuilt, it
        loses a little. It is sized by the slowest of the recent evicting rounds, the first guess
        among them until three have run (a first round over nodes with few victims each built at
        5.9e-5 s a unit, the next over full nodes at 1.1e-4)."""
        return {False: self.paces[False][-1], True: max(self.paces[True][-3:])}

    def _preempts(self, kind: str) -> bool:
        """Whether a round of ``kind`` may evict (a packing round never does)."""
        return kind != "pack" and self.ctx.config.preemption.enabled

    def _nodes(self, kind: str) -> list[int]:
        """The round's nodes, most wanted first: neither pinned nor sitting out (unless nothing
        else is left)."""
        out = self.pinned
        for _ in range(2):
            nodes = [n for n in _neighbourhood(kind, self.ctx, self.best, self.free_pods, self.rng) if n not in out]
            if not nodes:
                nodes = [n for n in _neighbourhood("domain", self.ctx, self.best, self.free_pods, self.rng) if n not in out]
            fresh = [n for n in nodes if self.tabu.get(n, 0) <= self.stats.rounds]
            if fresh:
                return fresh
            if nodes:
                return nodes
        return []

    def round(self, deadline: float, kind: Optional[str] = None) -> bool:
        """One round (of ``kind``, default the next in turn); False when no neighbourhood is left
        to free."""
        stats = self.stats
        kind = kind or self.kind(deadline)
        nodes = self._nodes(kind)
        if not nodes:
            return False
        # A share of what is left, at least a second (packing rounds too: given only their 0.6 s
        # least while time was plentiful, the 300-node searches placed fewer pods), and no more
        # than is left before the replay: only a search's last round is held to its least.
        left, replay = deadline - time.monotonic(), self._replay(kind, nodes)
        scale = ONE_WORKER_ROUND_SCALE if self.workers == 1 else 1.0
        budget = max(_least(kind, replay), min(scale * max(MIN_ROUND_SECONDS, ROUND_SHARE * left), left - replay))
        # The search's last round: what it would leave is too short for any round after it, so
        # its solve takes that too (its model is sized by the budget as it was; the contended
        # 1,000-node searches left 0.5-0.6 s of their share unused after their last round).
        solve_until = budget
        if left - replay - budget < self.least_round_seconds("pack"):
            solve_until = max(budget, left - replay)
        preempt = self._preempts(kind)
        # Its size in pairs, a potential victim counting ``VICTIM_PAIRS`` (a round that may evict),
        # within what the build's share of the budget makes at the pace of its kind's rounds before;
        # the pairs left after the chosen nodes' potential victims cap the left-out pods it takes in.
        units = int(max(MIN_ROUND_PAIRS, BUILD_SHARE * budget / self.seconds_per_pair[preempt]))
        cap = min(ROUND_PAIRS, units)
        lower = _Lower(self.ctx, self.best, self.free_pods) if preempt else None
        nodes = _within_pairs(nodes[:_size(len(self.ctx.nodes))], self.best, self.free_pods, cap, lower, units)
        if lower is not None:
            cap = max(MIN_ROUND_PAIRS, min(cap, units - VICTIM_PAIRS * lower.victims(nodes, lower.top(nodes))))
        stats.rounds += 1
        t0 = time.monotonic()
        last = deadline - self._replay(kind, nodes)  # the solve's own deadline: the replay comes after
        found, size, replayed = _round(self.ctx, self.static, self.sctx, self.best, nodes, self.free_pods,
                                       self.weights, (min(last, t0 + solve_until), last), cap, preempt,
                                       polish=not self.short, workers=self.workers)
        pairs, built = size.pairs, size.built
        if replayed:
            self.replay_seconds = max(self.replay_seconds, replayed)
        stats.max_pairs = max(stats.max_pairs, pairs)
        if pairs:
            self.paces[preempt].append(max(built / (pairs + VICTIM_PAIRS * size.victims), 1e-6))
            self.builds[preempt].append(built)
        log.debug("lns round %d (%s, %d nodes, %d pairs, %d potential victims, %.2fs budget): %s in %.2fs",
                  stats.rounds, kind, len(nodes), pairs, size.victims, budget, "nothing" if found is None else
                  f"{len(found.placements) - len(self.best.placements):+d} placed, "
                  f"{len(found.victims) - len(self.best.victims):+d} victims", time.monotonic() - t0)
        if found is not None and not (self.hard and _violations(self.ctx, found.victims)):
            # (a hard budget the round's model could not see spent by victims elsewhere: refused)
            better, why = choose(self.ctx, (found.placements, found.victims),
                                 (self.best.placements, self.best.victims), self.weights, scored=False)
            if better and why != "equal plans: the solver's is kept":
                stats.improved += 1
                stats.history.append(f"round {stats.rounds} ({kind}, {len(nodes)} nodes, {pairs} pairs): {why}: "
                                     f"{gain(self.ctx, found, self.best)}")
                self.best = found
        for n in nodes:  # just decided as well as a round can: other nodes' turn
            self.tabu[n] = stats.rounds + TABU_ROUNDS
        return True


def gain(ctx: SchedulingContext, new, old) -> str:
    """What a round changed, pods placed by priority then victims: "+3 placed (1000: +3), +1
    victim" (or what one plan has over another: any two with ``placements`` and ``victims``)."""
    placed: dict[int, int] = defaultdict(int)
    for key in new.placements.keys() - old.placements.keys():
        placed[ctx.window_pod(key).priority] += 1
    for key in old.placements.keys() - new.placements.keys():
        placed[ctx.window_pod(key).priority] -= 1
    tiers = ", ".join(f"{p}: {n:+d}" for p, n in sorted(placed.items(), reverse=True) if n)
    moved = len(new.placements) - len(old.placements)
    victims = len(new.victims) - len(old.victims)
    return f"{moved:+d} placed" + (f" ({tiers})" if tiers else "") + f", {victims:+d} victim(s)"


def _violations(ctx: SchedulingContext, victims: list[Victim]) -> int:
    return PdbBudgets.of(ctx).violations(v.pod for v in victims)


def _neighbourhood(kind: str, ctx: SchedulingContext, plan: _Plan, free_pods: list[PodInfo],
                   rng: random.Random) -> list[int]:
    """The nodes one round frees (see the module docstring)."""
    state = ctx.state
    n = len(ctx.nodes)
    size = _size(n)
    if kind in ("left-out", "pack"):
        left = [p for p in free_pods if p.key not in plan.placements]
        if not left:
            return []
        top = max(p.priority for p in left)
        pick = rng.choice([p for p in left if p.priority == top])
        allowed = np.flatnonzero(_static_mask(ctx, pick))
        if not len(allowed):
            return []
        if kind == "pack":
            # A packing round evicts nothing: what it can give a left-out pod is the room the
            # incumbent leaves free, so the nodes with the most of it come first (nodes the
            # incumbent evicts from are not packed). Ranked by the room before the window and
            # the lower pods' room, as a left-out round's are, they were full ones: one packing
            # round of a second, greedy's plan its incumbent, placed 6, 14, 11, 57 and 23 pods on
            # average on the contended 1,000-node windows (seeds 5, 0, 1, 2, 3), ranked by the
            # free room 19, 27, 68, 74 and 27 (issue 34, twenty-second round).
            evicting = {v.node for v in plan.victims}
            allowed = np.array([i for i in allowed.tolist() if i not in evicting], dtype=np.int64)
            room = _applied(ctx, plan).free[allowed].astype(np.float64)
        else:
            # Room a pod of this priority could have: free room plus what lower pods hold.
            room = _room_below(ctx, pick.priority)[allowed].astype(np.float64)
        vec = state.vector(pick).astype(np.float64)
        need = vec > 0
        slack = (room[:, need] / np.maximum(vec[need], 1)).min(axis=1) if need.any() else np.ones(len(allowed))
        order = np.argsort(-slack, kind="stable")
        return allowed[order].tolist()  # all of them, best first: the round takes what it can
    if kind == "victims":
        on: dict[int, int] = defaultdict(int)
        for v in plan.victims:
            on[v.node] = max(on[v.node], v.pod.priority + 2**31)
        if not on:
            return []
        return sorted(on, key=lambda k: -on[k])
    # a slice of one topology domain (a zone when nodes carry one), else random nodes
    zones: dict[str, list[int]] = defaultdict(list)
    for i, node in enumerate(ctx.nodes):
        zone = node.labels.get("topology.kubernetes.io/zone")
        if zone is not None:
            zones[zone].append(i)
    pool = zones[rng.choice(sorted(zones))] if zones else list(range(n))
    return rng.sample(pool, min(size, len(pool)))


def _size(nodes: int) -> int:
    """Nodes one neighbourhood frees at most, of a cluster of ``nodes``."""
    return min(MAX_NODES, max(MIN_NODES, nodes // 20))


def _static_mask(ctx: SchedulingContext, pod: PodInfo) -> np.ndarray:
    from ..filtering import StaticFilters

    hit = ctx.__dict__.get("_lns_static")
    if hit is None:
        hit = ctx.__dict__["_lns_static"] = StaticFilters(ctx.nodes, ctx.window)
    return hit.mask(pod)


def _round(ctx: SchedulingContext, static, sctx, plan: _Plan, nodes: list[int], free_pods: list[PodInfo],
           weights: dict[int, int], deadlines: tuple[float, float], cap: int,
           preempt: bool = True, polish: bool = True, workers: Optional[int] = None) -> tuple[Optional[_Plan], "_Size", float]:
    """One neighbourhood's model of at most about ``cap`` pairs, solved by the first of
    ``deadlines`` (the round's; the solve gets ``MIN_SOLVE_SECONDS`` past it up to the second, the
    decision's, less the replay after it): the whole plan it gives (or None), the model's size and
    build time, and the seconds the slowest replay of a whole plan took. ``preempt``:
    whether the model may evict (a round over nodes the incumbent evicts nothing on may pack
    alone). ``polish``: whether a plan better than the incumbent has its
    scores polished (a short search spends that time on the next round, or on the plan's checks).
    ``workers``: at most this many CP-SAT workers."""
    deadline, last = deadlines
    start = time.monotonic()
    inside = set(nodes)
    on_nodes = [p for p in free_pods if plan.placements.get(p.key) in inside]
    left = [p for p in free_pods if p.key not in plan.placements]
    # A packing round over nodes with no victim decides again only pods the replayed turns do not
    # see: its plan then meets kube-scheduler's preemption exactly where the incumbent did, and
    # is not replayed. (Nominated room outside the window follows the placements: replayed.)
    unseen = _unseen(ctx, plan, preempt, nodes)
    if unseen and plan.victims:
        if plan.out_of_sight is None:
            plan.out_of_sight = out_of_sight(ctx, plan.placements, plan.victims)
        on_nodes = [p for p in on_nodes if plan.out_of_sight(p)]
        left = [p for p in left if plan.out_of_sight(p)]
    # The freed pods: those placed on the nodes, then the left-out ones by priority until the
    # pairs run out (each class counts once per node).
    freed: dict[str, PodInfo] = {p.key: p for p in on_nodes}
    class_ids = {p.class_id for p in on_nodes}
    for p in sorted(left, key=lambda q: -q.priority):
        if p.class_id not in class_ids and (len(class_ids) + 1) * len(nodes) > cap:
            continue
        class_ids.add(p.class_id)
        freed[p.key] = p
    if not freed:
        return None, _Size(), 0.0
    sub = _sub_context(ctx, plan, inside, freed)
    classes = sub.classes
    mask = np.zeros(len(ctx.nodes), dtype=bool)
    mask[nodes] = True
    cand, ubs = candidates(sub, classes, static, {}, preempt, within=mask)
    live = [c for c in classes if len(cand[c.id])]
    if not live:
        return None, _Size(), 0.0
    pairs = sum(len(cand[c.id]) for c in live)
    inp = BuildInput(sub, static, cand, ubs, sctx, weights, preempt)
    wm = build_component(inp, live)
    size = _Size(pairs, len(wm.evict), time.monotonic() - start)
    current = GreedyResult(placements={k: n for k, n in plan.placements.items() if k in freed},
                           victims=[v for v in plan.victims if v.node in inside])
    # A round keeps to plans its whole model holds: no evictions admitted beside the batch
    # reprieve, no repair accepted with it lifted (``kube_victims``); its plans are replayed
    # inside the whole plan (``WholePlan``), pods outside the round at their own turns.
    how = best_hint(wm, current, sub, weights, HINT_SHARE * max(0.0, deadline - time.monotonic()), admit=False)
    if log.isEnabledFor(logging.DEBUG):
        log.debug("lns round: %d pairs, %d victims, (variables, constraints) %s built in %.2fs, hint: %s",
                  sum(len(cand[c.id]) for c in live), len(wm.evict), wm.size(), time.monotonic() - start, how)
    solve_by = min(last, max(deadline, time.monotonic() + MIN_SOLVE_SECONDS))
    outside = {k: n for k, n in plan.placements.items() if k not in freed}
    outside_victims = [v for v in plan.victims if v.node not in inside]
    whole = WholePlan(ctx, static, outside, outside_victims)
    # With the incumbent as a complete hint, the search starts from it at once: CP-SAT's presolve
    # took the whole of a short round (a 4,000-variable round at 1,000 nodes: UNKNOWN after 0.3 s
    # with it; two more pods without). The score stage, which ``choose`` does not rank rounds by,
    # runs only for a plan already better than the incumbent: the hint, unless a packing beat it
    # (``best_hint`` keeps that in ``hint_solution``), and then every plan is.
    # A worker count the search chose (``workers``) keeps the wall clock: a worker stopping on
    # work done (the user's reproducible ``workers: 1``) ran its solves 0.3-1.1 s past their limit.
    solve = functools.partial(solve_component, presolve=not wm.hint_complete,
                              polish_only_gains=wm.hint_solution is None, polish=polish,
                              clock=workers is not None and ctx.config.solver.workers != 1)
    # (a neighbourhood search starts from a solution: the completed hint, or nothing to start from)
    lns_only = preempt and wm.hint_complete and wm.size()[0] > LNS_ONLY_VARIABLES
    solver, status, _, _, _ = solve_sound(wm, _round_solver_config(ctx, lns_only, workers), solve_by, solve=solve,
                                          relaxed_repairs=False, view=whole)
    if solver is None:
        return None, size, whole.longest
    found = Solution()
    extract(wm, solver, found)
    victims = outside_victims + found.victims
    names: Optional[dict[str, str]] = {}
    if unseen:
        names = plan.names  # the same turns, the same preemptors
    elif victims:
        # The whole plan's victims, each one kube-scheduler's preemption evicts in the whole
        # window's queue order: the round's pods change what the pods outside it meet at their
        # turns too (a spread's counts), so the victims outside are judged again as well.
        judged = whole(found.placements, {v.node for v in found.victims})
        wrong = [v for v in victims if v.pod.key not in judged.evicted_by]
        if wrong:
            log.debug("lns round: refused, kube-scheduler's preemption keeps %d of the whole plan's victims (%s)",
                      len(wrong), wrong[0].pod.key)
            return None, size, whole.longest
        names = judged.evicted_by
    return _Plan({**outside, **found.placements}, victims, names=names, base=plan), size, whole.longest


@dataclass
class _Size:
    """A round's model: its class x node pairs, its potential victims (eviction variables), and the
    seconds it took to build."""

    pairs: int = 0
    victims: int = 0
    built: float = 0.0


def _least(kind: str, replay: float) -> float:
    """The least time a round of ``kind`` is started with, before its replay (``replay``: none
    for a packing round that is not replayed)."""
    return MIN_PACK_ROUND_SECONDS if kind == "pack" and not replay else MIN_ROUND_SECONDS


def _unseen(ctx: SchedulingContext, plan: _Plan, preempt: bool, nodes: Optional[list[int]]) -> bool:
    """Whether a round over ``nodes`` (None: not chosen yet) may skip the whole plan's replay: it
    evicts nothing (``preempt`` off), its nodes hold no victim of ``plan``, and no room outside
    the window is nominated (it follows the placements); it then frees only pods
    ``out_of_sight``."""
    if preempt or ctx.claims:
        return False
    return nodes is None or not {v.node for v in plan.victims}.intersection(nodes)


def out_of_sight(ctx: SchedulingContext, placements: dict[str, int], victims: list[Victim]) -> Callable[[PodInfo], bool]:
    """Whether a pod may come, go or move without changing what kube-scheduler's preemption meets
    at the turns a replay of the plan judges (the pods ``placements`` puts on nodes ``victims``
    are evicted from): no rule of one of those pods ties it to this pod wherever they land, nor
    one of this pod's rules to them (``registry.COUPLERS``: spread selectors, pod affinity and
    anti-affinity terms). Nodes a round over such pods decides hold no victim, so the turns read
    the same room, domain counts and terms as before. Asked per class and labels."""
    evicting = {v.node for v in victims}
    judged: dict[int, PodInfo] = {}
    for key, node in placements.items():
        if node in evicting:
            pod = ctx.window_pod(key)
            judged.setdefault(pod.class_id, pod)
    reps = list(judged.values())
    theirs = [tie for rep in reps for couples in registry.COUPLERS if (tie := couples(rep)) is not None]
    seen: dict[tuple, bool] = {}

    def unseen(pod: PodInfo) -> bool:
        key = (pod.class_id, pod.namespace, pod.match_key)
        hit = seen.get(key)
        if hit is None:
            own = [tie for couples in registry.COUPLERS if (tie := couples(pod)) is not None]
            hit = seen[key] = not (any(tie(pod) for tie in theirs) or any(tie(rep) for tie in own for rep in reps))
        return hit

    return unseen


def _round_solver_config(ctx: SchedulingContext, lns_only: bool = False, workers: Optional[int] = None):
    """The solver settings of a round: the user's, with at most ``ROUND_WORKERS`` workers unless
    the user chose fewer (a round's model is small; eight workers on a busy machine spent its
    short budget starting up and answered UNKNOWN with a complete hint). ``lns_only``: CP-SAT's
    workers search neighbourhoods of the hint only (``LNS_ONLY_VARIABLES``), unless the user's
    own parameters say otherwise. ``workers``: at most this many."""
    cfg = ctx.config.solver
    update: dict = {}
    most = ROUND_WORKERS if workers is None else min(workers, ROUND_WORKERS)
    if not (cfg.workers and cfg.workers <= most):
        update["workers"] = most
    if lns_only and not re.search(r"\buse_lns_only\b", cfg.parameters or ""):
        update["parameters"] = f"{cfg.parameters or ''} use_lns_only: true".strip()
    return cfg.model_copy(update=update) if update else cfg


def _within_pairs(nodes: list[int], plan: _Plan, free_pods: list[PodInfo], cap: int,
                  lower: Optional[_Lower] = None, units: Optional[int] = None) -> list[int]:
    """The first of ``nodes`` (most wanted first) whose placed pods' classes, times the nodes,
    stay within ``cap`` pairs (at least ``MIN_NODES`` nodes): a round's model stays small however
    varied the pods on a node are. ``lower``: for a round that may evict, a node's potential
    victims; the pairs and ``VICTIM_PAIRS`` per potential victim then stay within ``units``."""
    on_node: dict[int, set[int]] = defaultdict(set)
    wanted = set(nodes)
    for p in free_pods:
        node = plan.placements.get(p.key)
        if node in wanted:
            on_node[node].add(p.class_id)
    kept: list[int] = []
    classes: set[int] = set()
    for n in nodes:
        more = classes | on_node[n]
        pairs = len(more) * (len(kept) + 1)
        if len(kept) >= MIN_NODES:
            if pairs > cap:
                break
            if lower is not None and units is not None:
                with_n = kept + [n]
                if pairs + VICTIM_PAIRS * lower.victims(with_n, lower.top(with_n)) > units:
                    break
        kept.append(n)
        classes = more
    return sorted(kept)


class _Lower:
    """About how many running pods a round that may evict can make eviction variables for on its
    nodes (``eviction.create``: those below the highest priority of a class that may preempt and
    has the node as a candidate). Any pod the round frees may go to any of its nodes, so the
    ceiling is the highest priority among the left-out pods and the pods the plan places on the
    round's nodes, one for all of them."""

    def __init__(self, ctx: SchedulingContext, plan: _Plan, free_pods: list[PodInfo]) -> None:
        floor = int(np.iinfo(np.int64).min)
        self.left = max((p.priority for p in free_pods if p.key not in plan.placements and p.may_preempt_others),
                        default=floor)
        self.placed: dict[int, int] = defaultdict(lambda: floor)
        for p in free_pods:
            node = plan.placements.get(p.key)
            if node is not None and p.may_preempt_others and p.priority > self.placed[node]:
                self.placed[node] = p.priority
        self.ctx = ctx
        self._priorities: dict[int, list[int]] = {}

    def top(self, nodes: list[int]) -> int:
        """The highest priority a round over ``nodes`` may place on any of them."""
        return max([self.left, *(self.placed[n] for n in nodes)])

    def victims(self, nodes: list[int], top: int) -> int:
        """The running pods below ``top`` on ``nodes``."""
        return sum(bisect.bisect_left(self._below(n), top) for n in nodes)

    def _below(self, node: int) -> list[int]:
        hit = self._priorities.get(node)
        if hit is None:
            window = self.ctx._window_by_key
            hit = self._priorities[node] = sorted(q.priority for q in self.ctx.state.pods_on[node].values()
                                                  if q.key not in window)
        return hit


def _applied(ctx: SchedulingContext, plan: _Plan) -> ClusterState:
    """The cluster with the whole of ``plan`` applied (its victims out, its placements in), made
    once per incumbent (``_Plan.applied``); not to be changed: a round works on a copy. A plan a
    round made from an incumbent already applied is that state changed by what the round changed
    (the state holds sums and per-node sets, the same whatever order the pods came in): at 5,000
    nodes applying a whole plan of 29,000 pods took 0.23 s, a fifth of a round."""
    if plan.applied is None:
        base, plan.base = plan.base, None
        if base is not None and base.applied is not None:
            plan.applied = _changed(ctx, base, plan)
            return plan.applied
        applied = ctx.state.copy()
        for v in plan.victims:
            applied.remove(v.pod)
        for key, node in plan.placements.items():
            applied.add(ctx.window_pod(key), node)
        plan.applied = applied
    return plan.applied


def _changed(ctx: SchedulingContext, base: _Plan, plan: _Plan) -> ClusterState:
    """``base``'s applied state (a copy) made ``plan``'s: the victims it no longer evicts back,
    the pods it moves or leaves out taken out, then its new victims out and its new placements in."""
    assert base.applied is not None
    state = base.applied.copy()
    now_victims = {v.pod.key for v in plan.victims}
    then_victims = {v.pod.key for v in base.victims}
    placements, before = plan.placements, base.placements
    back: set[int] = set()
    for v in base.victims:
        if v.pod.key not in now_victims:
            state.add(v.pod, v.node)
            back.add(v.node)
    for node in back:
        # A running pod put back takes its place in the node's order again: the order pods of
        # one priority are tried in as victims, which the round's model reads as the replay does.
        pods, order = state.pods_on[node], ctx.state.pods_on[node]
        first = {key: pods[key] for key in order if key in pods}
        state.pods_on[node] = {**first, **{key: pod for key, pod in pods.items() if key not in first}}
    for key, node in before.items():
        if placements.get(key) != node:
            state.remove(ctx.window_pod(key))
    for v in plan.victims:
        if v.pod.key not in then_victims:
            state.remove(v.pod)
    for key, node in placements.items():
        if before.get(key) != node:
            state.add(ctx.window_pod(key), node)
    return state


def _sub_context(ctx: SchedulingContext, plan: _Plan, inside: set[int], freed: dict[str, PodInfo]) -> SchedulingContext:
    """The context one round's model reads: the incumbent outside the neighbourhood made part of
    the cluster (its placements added, its victims there taken out), the freed pods its window.
    The whole incumbent is applied to the cluster once (``_applied``); a round takes a copy and
    gives back only its neighbourhood: the freed pods out, the victims there back in."""
    state = _applied(ctx, plan).copy()
    for key, pod in freed.items():
        if key in plan.placements:
            state.remove(pod)
    for v in plan.victims:
        if v.node in inside:
            state.add(v.pod, v.node)
    settled = tuple((ctx.window_pod(key), node) for key, node in plan.placements.items() if key not in freed)
    window = [p for p in ctx.window if p.key in freed]
    by_class: dict[int, list[PodInfo]] = defaultdict(list)
    for p in window:
        by_class[p.class_id].append(p)
    classes = [PodClass(c.id, by_class[c.id]) for c in ctx.classes if c.id in by_class]
    sub = dataclasses.replace(ctx, state=state, window=window, classes=classes, settled=settled)
    PdbBudgets.share(ctx, sub)
    return sub

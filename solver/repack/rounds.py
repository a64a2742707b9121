"""Re-packing a large cluster in rounds: a few drain candidates at a time, a small model each.

One model over every movable pod and every node (``model``) does not fit a time limit of
seconds once a cluster runs tens of thousands of pods: 1,000 nodes × 38,000 movable pods built
for minutes and returned nothing. Here the nodes are drained a batch at a time instead:

* the drain candidates, cheapest first: the busy freeable nodes with the fewest movable pods
  (each is that many evictions to free), smaller nodes before larger ones, then the least loaded
  (``--objective cost``: the most cost per eviction first);
* per round, a batch of candidates and the *receivers* the batch may use: the largest, then
  fullest, nodes with room, enough for ``RECEIVER_ROOM`` times the batch's requests, never a node
  freed or drained before; a candidate receives nothing;
* a greedy walk drains each candidate onto the receivers, one pod at a time, where
  kube-scheduler's filters admit it on the cluster as it is then, onto the receiver it leaves
  fullest in every resource together (least squared room, ``_fit``) (pods counted per topology
  domain first: a candidate whose such pod finds no place leaves the batch), spending
  ``--max-moves`` and the PodDisruptionBudgets as it goes. A batch emptied whole is done: no plan
  frees more of it, and each of its pods moves once, the fewest moves that free it;
* otherwise the round's model is the re-packing model itself (``RepackModel``: freed candidates,
  then fewest moves) over the batch's other pods, starting from the walk's placement: its
  candidate nodes cut down to the receivers (and each pod's own node), its budgets what the
  rounds before left (``--max-moves``, ``--target-free``, every PodDisruptionBudget), for an equal
  share of the time left. A candidate it leaves busy gets its pods back (it received nothing);
* a pod moves at most once (a node that received pods is never drained later), so the rounds
  compose into one final placement; ``order`` walks it round by round (the walk's moves, already
  checked in their order, one by one) and ``replay`` checks it whole.

Rounds stop at the time limit, when ``--max-moves`` or ``--target-free`` is spent, when no
candidate is left, or when two rounds in a row free nothing.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from typing import Optional

import numpy as np

from models.resources import CPU, MEMORY, PODS

from .. import interrupt, progress
from ..context import PodClass
from ..filtering import Cycle
from ..plugins import registry
from ..disruption import PdbBudgets
from . import availability
from . import model as one_model
from .model import Placement, RepackInfeasible, RepackModel, RepackOptions
from .problem import RepackProblem

# The node name label every kubelet sets (a spread over it is one domain per node).
HOSTNAME_KEY = "kubernetes.io/hostname"

# Movable pods above which ``solve_placement`` decides in rounds (one model below).
ROUNDS_ABOVE = 3000


def solve_placement(problem: RepackProblem, options: RepackOptions, first: Optional[dict[str, int]] = None) -> Placement:
    """The re-packing's placement: one model (``model.solve_placement``, which ``first`` may
    start), or above ``ROUNDS_ABOVE`` movable pods rounds of drain candidates within the time
    limit (the config's, unless the options say)."""
    if len(problem.origin) <= ROUNDS_ABOVE:
        return one_model.solve_placement(problem, options, first)
    start = time.monotonic()
    limit = options.time_limit if options.time_limit is not None else problem.config.solver.time_limit_seconds
    progress.stage(f"{len(problem.origin)} movable pods: re-packing in rounds of {BATCH} drain candidates "
                   f"(time limit {limit:.1f}s)")
    done = solve_in_rounds(problem, options, start + limit)
    placement = done.placement
    placement.rounds = done.rounds
    placement.phases = done.phases
    placement.checked = done.checked
    placement.solve_time = time.monotonic() - start
    return placement
# Drain candidates per round, and the share of a round's requests its receivers must hold.
BATCH = 25
RECEIVER_ROOM = 2.0
# Fewest seconds a round is given (a round that cannot finish in it still returns its hint).
MIN_SLICE = 0.5
# Rounds in a row that free nothing before the rounds stop.
BARREN_ROUNDS = 2


@dataclass
class RoundReport:
    """One round as ``--progress`` and the plan's stats tell it."""

    number: int
    candidates: int
    receivers: int
    freed: int
    moves: int
    status: str
    seconds: float

    def as_dict(self) -> dict:
        return {"round": self.number, "candidates": self.candidates, "receivers": self.receivers,
                "freed": self.freed, "moves": self.moves, "status": self.status, "seconds": round(self.seconds, 3)}


@dataclass
class RoundsResult:
    placement: Placement
    rounds: list[RoundReport] = field(default_factory=list)
    phases: list[list[str]] = field(default_factory=list)
    checked: frozenset[str] = frozenset()


class _RoundModel(RepackModel):
    """The re-packing model over one batch: candidate nodes limited to ``targets`` (and each
    pod's own node), and replicas that ask to be apart counted with their siblings outside."""

    def __init__(self, problem: RepackProblem, options: RepackOptions, targets: np.ndarray,
                 apart_limit: dict[tuple[int, int], int]) -> None:
        super().__init__(problem, options)
        self.targets = targets
        self.apart_limit = apart_limit

    def compute_candidates(self) -> None:
        super().compute_candidates()
        labels = [node.labels for node in self.problem.nodes]
        for cls in self.classes:
            nodes, ubs = self.wm.cand[cls.id], self.wm.ub[cls.id]
            keep = self.targets[nodes] | np.isin(nodes, list(self.now[cls.id]))
            keys = topology_keys(cls.rep)
            if keys:  # its pods share one domain (``_round_problem``): moves stay inside it
                home = tuple(labels[next(iter(self.now[cls.id]))].get(k) for k in keys)
                keep &= np.array([tuple(labels[n].get(k) for k in keys) == home for n in nodes.tolist()], dtype=bool)
            self.wm.cand[cls.id], self.wm.ub[cls.id] = nodes[keep], ubs[keep]

    def encode_apart(self) -> None:
        for (cid, n), cap in self.apart_limit.items():
            x = self.wm.x.get((cid, n))
            if x is not None:
                self.model.add(x <= max(cap, 0))


def solve_in_rounds(problem: RepackProblem, options: RepackOptions, deadline: float) -> RoundsResult:
    """The final node of every movable pod after draining batch by batch until ``deadline``."""
    return _Rounds(problem, options, deadline).run()


class _Rounds:
    """The rounds' shared state: the cluster as the moves so far leave it (``state``, ``cur``,
    ``on``), the budgets left (``--max-moves``, ``--target-free``, PodDisruptionBudgets), the
    candidates queued, and what the rounds report."""

    def __init__(self, problem: RepackProblem, options: RepackOptions, deadline: float) -> None:
        self.problem, self.options, self.deadline = problem, options, deadline
        ctx = problem.ctx
        # Every pod that stays, and the movable ones where they run: the problem's running cluster
        # (built once; the order walk starts from it too).
        state = self.state = problem.running().state.copy()
        self.pods = {p.key: p for p in ctx.window}
        self.cur = dict(problem.origin)
        self.cls_of = {p.key: cls.id for cls in ctx.classes for p in cls.pods}
        self.on: dict[int, list[str]] = defaultdict(list)
        for key, n in self.cur.items():
            self.on[n].append(key)
        r_cpu, r_mem, r_pods = (state.res_index[r] for r in (CPU, MEMORY, PODS))
        self.cols = [r_cpu, r_mem, r_pods]
        self.alloc = np.maximum(state.alloc[:, self.cols], 1)
        self.by_cost = options.objective == "cost"
        drain = self._drain_order()
        self._apart_caps()
        self.budget_left = [b.allowed for b in problem.budgets.budgets]
        self.covering = {key: problem.budgets.covering(self.pods[key]) for key in self.cur}
        self.moves_left = options.max_moves
        self.free_left = options.target_free
        self.freed: set[int] = set()
        self.received: set[int] = set()
        self.tried: set[int] = set()
        self.reports: list[RoundReport] = []
        self.phases: list[list[str]] = []  # per round, the pods it moves (the order walks round by round)
        self.checked: set[str] = set()  # moves the greedy drain checked in the phases' order
        self.version = ctx.config.kubernetes_version
        self.status, self.barren, self.best_bound = "FEASIBLE", 0, None
        self.queue = list(drain)
        self.total_rounds = max(1, -(-len(self.queue) // BATCH))

    def _load(self, n: int) -> float:
        return float((self.state.used[n, self.cols] / self.alloc[n]).max())

    def _drain_order(self) -> list[int]:
        """The busy freeable nodes, cheapest to drain first (see the module note)."""
        problem, state, on, cols = self.problem, self.state, self.on, self.cols
        drain = [n for n in on if problem.freeable(n)]
        # Small nodes before large ones among equals: the large ones then hold what stays (freeing a
        # 32-CPU node that looks half empty gives away the room of two 16-CPU ones).
        size = state.alloc[:, cols[:2]].astype(np.float64) / np.maximum(state.alloc[:, cols[:2]].max(axis=0), 1)
        drain.sort(key=lambda n: (-problem.cost[n] / max(len(on[n]), 1) if self.by_cost else 0.0, len(on[n]),
                                  float(size[n].sum()), self._load(n), n))
        return drain

    def _apart_caps(self) -> None:
        """Replicas that ask to be apart: per group, the most on one node today (the replay's check)."""
        self.groups: dict[tuple, Counter] = defaultdict(Counter)
        for key, n in self.cur.items():
            if availability.apart_per_node(self.pods[key]):
                self.groups[availability.group_of(self.pods[key])][n] += 1
        self.caps = {g: max(c.values()) for g, c in self.groups.items()}

    def run(self) -> RoundsResult:
        """Rounds until the deadline, a spent budget, no candidate left, or too many barren rounds."""
        while self.queue:
            interrupt.check()
            now = time.monotonic()
            if now >= self.deadline or (self.moves_left is not None and self.moves_left <= 0) \
                    or (self.free_left is not None and self.free_left <= 0):
                break
            batch = [n for n in self.queue[:BATCH] if n not in self.received]
            self.queue = self.queue[BATCH:]
            if self.free_left is not None:  # --target-free: no more candidates than nodes left to free
                self.queue = batch[self.free_left:] + self.queue
                batch = batch[:self.free_left]
            if not batch:
                continue
            self.tried.update(batch)
            rounds_left = max(1, min(self.total_rounds - len(self.reports), -(-len(self.queue) // BATCH) + 1))
            slice_ = max((self.deadline - now) / rounds_left, MIN_SLICE)
            if self.moves_left is not None:
                batch = [n for n in batch if len(self.on[n]) <= self.moves_left]
                if not batch:
                    break
            self._round(batch, slice_)
            if self.barren >= BARREN_ROUNDS:
                break
        return self._result()

    def _round(self, batch: list[int], slice_: float) -> None:
        """One round: the greedy walk over the batch, the round's model for what it left, then the
        moves kept, the budgets spent and the round reported."""
        state, pods, on, cur = self.state, self.pods, self.on, self.cur
        keys = sorted(k for n in batch for k in on[n])
        started = time.monotonic()
        targets = _receivers(self.problem, state, batch, keys, pods, self.freed | self.tried, self.cols)
        targets[batch] = False  # a candidate receives nothing: one left busy gets its pods back
        early, start, sequence = self._walk(batch, targets)
        early_keys = {k for k, _, _ in early}
        keys = sorted(k for n in batch for k in on[n] if k not in early_keys)
        for key in keys:
            state.remove(pods[key])
        greedy_whole = bool(keys) and set(start) == set(keys)
        final, round_status = self._solve_round(batch, keys, early, start, early_keys, targets, slice_, started,
                                                greedy_whole)
        left_busy = self._settle(keys, final, early)
        phase, moved_now = self._commit(early, left_busy, keys, final)
        self._record_phases(phase, greedy_whole, sequence, early_keys)
        gained = [n for n in batch if not on[n]]
        self.freed.update(gained)
        if self.moves_left is not None:
            self.moves_left -= moved_now
        if self.free_left is not None:
            self.free_left -= len(gained)
        if round_status not in ("OPTIMAL",):
            self.status = "FEASIBLE"
        self._report(batch, targets, gained, moved_now, round_status, started)
        self.barren = self.barren + 1 if not gained else 0

    def _walk(self, batch: list[int], targets: np.ndarray) -> tuple[list[tuple[str, int, int]], dict[str, int], list[str]]:
        """The greedy walk: drains each candidate of ``batch`` onto the receivers, removing from
        ``batch`` the candidates it must leave out. Pods whose rules count per domain move first,
        one at a time where kube-scheduler's filters admit them then (a zone spread skewed today
        admits only the emptiest zone); a candidate whose such pod finds no place stays out of
        the round. Returns the early moves (pod, from, to) in order, where the walk put the other
        pods (the model's start) and the pods of the nodes it drained whole, in its order."""
        state, pods, on, cols = self.state, self.pods, self.on, self.cols
        early: list[tuple[str, int, int]] = []  # (pod, from, to), in order
        start: dict[str, int] = {}  # where the greedy walk put the other pods: the model's start
        sequence: list[str] = []  # the pods of the nodes it drained whole, in its order
        left = list(self.budget_left)  # PodDisruptionBudgets' evictions left as the greedy walk goes
        for n in list(batch):
            interrupt.check()  # Ctrl-C: between nodes of the walk, not only between rounds
            mine = sorted(on[n], key=lambda k: (not topology_keys(pods[k]), -int(state.vector(pods[k])[cols[0]]), k))
            spread = sum(1 for k in mine if topology_keys(pods[k]))
            if self.moves_left is not None and len(mine) > self.moves_left - len(early) - len(start):
                batch.remove(n)
                continue
            done = self._move_off(n, mine, targets, left)
            if len(done) < spread:  # a pod bound to its domain found no place: the node stays
                self._put_back(done, left)
                batch.remove(n)
                continue
            early += done[:spread]
            if len(done) == len(mine):
                start.update({key: to for key, _, to in done[spread:]})
                sequence += [key for key, _, _ in done]
            else:  # the model may still find room for the rest; they start at home
                self._put_back(done[spread:], left)
        return early, start, sequence

    def _move_off(self, n: int, mine: list[str], targets: np.ndarray, left: list[int]) -> list[tuple[str, int, int]]:
        """Node ``n``'s pods in turn onto the receiver each leaves fullest, until one finds no
        place or its PodDisruptionBudget is spent: the moves made (pod, from, to)."""
        state, pods, cols, alloc = self.state, self.pods, self.cols, self.alloc
        done = []
        for key in mine:
            if any(left[i] <= 0 for i in self.covering[key]):  # its PodDisruptionBudget is spent
                break
            state.remove(pods[key])
            feasible = Cycle(pods[key], state, self.problem.static, version=self.version).feasible()
            feasible = feasible[targets[feasible]]
            if not len(feasible):
                state.add(pods[key], n)
                break
            room = (state.free[feasible][:, cols] - state.vector(pods[key])[cols]) / alloc[feasible]
            to = int(feasible[int(np.argmin(_fit(room)))])
            state.add(pods[key], to)
            done.append((key, n, to))
            for i in self.covering[key]:
                left[i] -= 1
        return done

    def _put_back(self, moves: list[tuple[str, int, int]], left: list[int]) -> None:
        """Undo walk moves, last first: each pod back home, its budgets given back."""
        for key, src, to in reversed(moves):
            self.state.remove(self.pods[key])
            self.state.add(self.pods[key], src)
            for i in self.covering[key]:
                left[i] += 1

    def _solve_round(self, batch: list[int], keys: list[str], early: list[tuple[str, int, int]], start: dict[str, int],
                     early_keys: set[str], targets: np.ndarray, slice_: float, started: float,
                     greedy_whole: bool) -> tuple[dict[str, int], str]:
        """Where the round puts ``keys`` (the batch's pods the walk did not move early): the walk's
        places when it drained every candidate, else the round's model's; and its status."""
        round_moves = self.moves_left - len(early) if self.moves_left is not None else None
        origin = {k: self.cur[k] for k in keys}
        final = dict(origin)
        round_status = "UNKNOWN"
        try:
            if greedy_whole:
                # Every candidate drained: no plan frees more of them, and each of their pods
                # moves once, the fewest moves that free them. The model has nothing to add (and
                # is not built: the round's problem costs more than the walk itself).
                final = {**origin, **start}
                round_status = "OPTIMAL"
            elif keys:
                sub = _round_problem(self.problem, self.state, batch, keys, self.pods, self.cls_of, self.cur,
                                     self.budget_left, self.covering, early_keys)
                limits = _apart_limits(sub, self.groups, self.caps, keys, self.cur, self.pods, targets)
                opts = replace(self.options, max_moves=round_moves, target_free=self.free_left, time_limit=slice_)
                model = _RoundModel(sub, opts, targets, limits)
                model.build()
                used = model.complete_hint([{**sub.origin, **start}, dict(sub.origin)], slice_ * 0.2)
                placement = model.solve(started + slice_, used)
                if placement.final:
                    final = placement.final
                    round_status = "FEASIBLE" if placement.started_better else placement.status
            else:
                round_status = "OPTIMAL"
        except RepackInfeasible:
            round_status = "INFEASIBLE"
        return final, round_status

    def _settle(self, keys: list[str], final: dict[str, int], early: list[tuple[str, int, int]]) -> set[int]:
        """The round's pods into ``state`` where ``final`` puts them (``final`` completed with the
        early moves kept); the candidates left busy, which keep every pod."""
        state, pods, cur = self.state, self.pods, self.cur
        # A candidate left busy keeps every pod (moving some would free nothing): it received
        # nothing in the round, so each pod fits back where it ran.
        left_busy = {cur[k] for k in keys if final[k] == cur[k]}
        final.update({k: cur[k] for k in keys if cur[k] in left_busy})
        for key in keys:
            state.add(pods[key], final[key])
        for key, src, to in reversed(early):
            if src in left_busy:
                state.remove(pods[key])
                state.add(pods[key], src)
        final.update({key: to for key, src, to in early if src not in left_busy})
        return left_busy

    def _commit(self, early: list[tuple[str, int, int]], left_busy: set[int], keys: list[str],
                final: dict[str, int]) -> tuple[list[str], int]:
        """The batch's pods where the round put them: ``cur``, ``on``, the receivers and the
        PodDisruptionBudgets updated. The pods moved, in order, and their count."""
        phase: list[str] = []
        moved_now = 0
        for key in [k for k, src, _ in early if src not in left_busy] + keys:
            n = final[key]
            if n != self.cur[key]:
                phase.append(key)
                moved_now += 1
                self.on[self.cur[key]].remove(key)
                self.on[n].append(key)
                self.received.add(n)
                for i in self.covering[key]:
                    self.budget_left[i] -= 1
                self.cur[key] = n
        return phase, moved_now

    def _record_phases(self, phase: list[str], greedy_whole: bool, sequence: list[str], early_keys: set[str]) -> None:
        """The round's moves as phases for ``order``: the early moves were each checked in this
        order on the cluster as it was then, so they are walked one by one, then the model's moves
        as one group."""
        if greedy_whole:  # each move was checked in this order, on the cluster as it was then
            in_phase = set(phase)
            self.phases.extend([k] for k in sequence if k in in_phase)
            self.checked.update(k for k in sequence if k in in_phase)
        else:
            early_moved = [k for k in phase if k in early_keys]
            self.phases.extend([k] for k in early_moved)
            if len(phase) > len(early_moved):
                self.phases.append([k for k in phase if k not in early_keys])

    def _report(self, batch: list[int], targets: np.ndarray, gained: list[int], moved_now: int, round_status: str,
                started: float) -> None:
        """The round's figures, kept for the result and printed as progress."""
        report = RoundReport(len(self.reports) + 1, len(batch), int(targets.sum()), len(gained), moved_now,
                             round_status, time.monotonic() - started)
        self.reports.append(report)
        progress.stage(f"round {report.number}: {len(gained)} of {len(batch)} candidate node(s) freed with "
                       f"{moved_now} move(s) onto {report.receivers} receiver(s) ({round_status}, "
                       f"{report.seconds:.1f}s); {len(self.freed)} freed so far, "
                       f"{sum(r.moves for r in self.reports)} eviction(s)")

    def _result(self) -> RoundsResult:
        placement = Placement(final=self.cur, status=self.status if self.reports else "UNKNOWN", objective=None,
                              bound=self.best_bound)
        if self.by_cost:
            placement.objective = float(sum(self.problem.cost_units(n) for n in self.freed))
        else:
            placement.objective = float(len(self.freed))
        return RoundsResult(placement=placement, rounds=self.reports, phases=self.phases,
                            checked=frozenset(self.checked))


def _fit(room: np.ndarray) -> np.ndarray:
    """How badly each receiver would fit a pod: the squared room each resource would have left
    (a fraction of allocatable per resource, rows are receivers), summed. Smallest is best: the
    fullest node in every resource at once, where the largest single room (the old measure)
    let nodes short of one resource take pods they had no room in the other for (1,000-node
    real-shaped dump: 584 nodes freed against 581)."""
    return (room * room).sum(axis=1)


def topology_keys(pod) -> list[str]:
    """The topology keys the pod's rules count per domain (``registry.topology_keys``: spread,
    inter-pod (anti-)affinity); the hostname key is left out (a node is its own domain: moving
    leaves it anyway)."""
    keys = registry.topology_keys(pod)
    keys.discard(HOSTNAME_KEY)
    return sorted(keys)


def _receivers(problem: RepackProblem, state, batch: list[int], keys: list[str], pods, excluded: set[int],
               cols: list[int]) -> np.ndarray:
    """Target nodes of a round (mask over nodes): the batch, and the fullest nodes with room
    outside it (not freed, not drained before) until they hold ``RECEIVER_ROOM`` times the
    batch's requests in every resource."""
    n_nodes = len(problem.nodes)
    mask = np.zeros(n_nodes, dtype=bool)
    mask[batch] = True
    need = np.zeros(len(cols), dtype=np.float64)
    for key in keys:
        need += state.vector(pods[key])[cols]
    need *= RECEIVER_ROOM
    free = (state.alloc - state.used)[:, cols].astype(np.float64)
    alloc = np.maximum(state.alloc[:, cols], 1)
    fill = (state.used[:, cols] / alloc).max(axis=1)
    smallest = min((state.vector(pods[k])[cols] for k in keys), key=lambda v: float(v.sum()), default=None)
    have = np.zeros(len(cols), dtype=np.float64)
    schedulable = np.array([not node.node.spec.unschedulable for node in problem.nodes], dtype=bool)
    # The largest nodes first (they are drained last), the fullest among them.
    size = (state.alloc[:, cols[:2]] / np.maximum(state.alloc[:, cols[:2]].max(axis=0), 1)).sum(axis=1)
    for n in np.lexsort((-fill, -size)).tolist():
        if mask[n] or n in excluded or not schedulable[n]:
            continue
        if smallest is not None and (free[n] < smallest).any():
            continue
        mask[n] = True
        have += np.maximum(free[n], 0)
        if (have >= need).all():
            break
    return mask


def _round_problem(problem: RepackProblem, state, batch: list[int], keys: list[str], pods, cls_of,
                   cur: dict[str, int], budget_left: list[int], covering, early: set[str]) -> RepackProblem:
    """The problem of one round: the batch's pods as the window, everything else in ``state``;
    only the batch may be freed (every other node counts as pinned here)."""
    by_class: dict[tuple, list] = defaultdict(list)
    labels = [node.labels for node in problem.nodes]
    for key in keys:
        # Pods whose rules count per topology domain move only inside their domain: every step
        # then leaves the domain counts as they are, so a spread that holds at the end holds at
        # each step too (one class per domain).
        domain = tuple(labels[cur[key]].get(k) for k in topology_keys(pods[key]))
        by_class[cls_of[key], domain].append(pods[key])
    classes = [PodClass(i, members) for i, (_, members) in enumerate(sorted(by_class.items()))]
    ctx = replace(problem.ctx, state=state, window=[p for c in classes for p in c.pods], classes=classes)
    in_batch = set(batch)
    pinned = {n: [("", "not in this round")] for n in range(len(problem.nodes)) if n not in in_batch}
    pinned.update({n: v for n, v in problem.pinned.items()})
    spent = [sum(1 for k in early if i in covering[k]) for i in range(len(budget_left))]
    budgets = PdbBudgets([replace(b, allowed=max(left - used, 0))
                          for b, left, used in zip(problem.budgets.budgets, budget_left, spent)],
                         evictions=problem.budgets.evictions)
    return replace(problem, ctx=ctx, origin={k: cur[k] for k in keys}, pinned=pinned,
                   busy_before=frozenset(in_batch), budgets=budgets, notes=[], _running=None)


def _apart_limits(sub: RepackProblem, groups, caps, keys: list[str], cur: dict[str, int], pods,
                  targets: np.ndarray) -> dict[tuple[int, int], int]:
    """Per (round class, target node) that asks to be apart: how many more of it the node may
    take — its groups' most-on-one-node today, less their pods outside the round already there."""
    out: dict[tuple[int, int], int] = {}
    if not groups:
        return out
    in_round = set(keys)
    outside: dict[tuple, Counter] = defaultdict(Counter)
    for g in groups:
        outside[g] = Counter()
    for key, n in cur.items():
        if key in in_round:
            continue
        pod = pods[key]
        if availability.apart_per_node(pod):
            outside[availability.group_of(pod)][n] += 1
    nodes = np.flatnonzero(targets).tolist()
    for cls in sub.ctx.classes:
        if not availability.apart_per_node(cls.rep):
            continue
        gs = {availability.group_of(p) for p in cls.pods}
        for n in set(nodes) | {cur[p.key] for p in cls.pods}:
            out[cls.id, n] = min(caps[g] - outside[g][n] for g in gs)
    return out

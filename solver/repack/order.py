"""Putting the moves in an order where every step is safe on the cluster as it is at that step.

A move evicts one pod from its node and lets its replacement run on the target node. It may run
once the target admits the pod in the cluster of that moment — kube-scheduler's filters, run on
the state with the pod already gone from its source: room, host ports, inter-pod (anti-)affinity
and topology spread. Moves wait for one another: a move into node *n* may need a pod that leaves
*n* to go first. ``networkx`` holds that dependency graph (an edge B → A when A's target is B's
source, so B's departure may make A's room).

The walk: apply a move that fits now, preferring moves whose departure others wait for; after a
move, recheck only the moves it can have helped (those into the node it left, and those whose
rules look beyond their target node). When nothing fits, the waiting moves depend on each other
in a cycle (a swap, or a ring): one pod of the cycle is parked on a *buffer* node with room — a
two-step move, which costs one more eviction (and so must fit ``--max-moves`` and its
PodDisruptionBudgets) — and the walk goes on. If no pod can be parked, there is no safe order
this way, and ``OrderError`` names the moves that block one another.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Optional, cast

import networkx as nx
import numpy as np

from ..framework import Status
from ..info import PodInfo
from ..filtering import Cycle
from ..plugin_api import Coupling
from ..plugins import registry
from .problem import RepackProblem

# How many conflicting moves an error message lists.
LIST_LIMIT = 8


@dataclass(frozen=True)
class Move:
    """A pod to take from its node (``source``) to another (``target``); node indices."""

    pod: str
    source: int
    target: int


@dataclass(frozen=True)
class Step:
    """One eviction: ``pod`` leaves ``source`` and its replacement runs on ``target``.
    ``buffer``: the target only holds the pod until a later step takes it on."""

    number: int
    pod: str
    source: int
    target: int
    buffer: bool = False


class OrderError(RuntimeError):
    """No safe order: the moves named wait for each other and no pod can be parked meanwhile."""

    def __init__(self, message: str, conflicts: list[str]) -> None:
        super().__init__(message)
        self.conflicts = conflicts


def moves_of(problem: RepackProblem, final: dict[str, int]) -> list[Move]:
    return [Move(key, problem.origin[key], n) for key, n in sorted(final.items()) if n != problem.origin[key]]


@dataclass
class _Walk:
    problem: RepackProblem
    moves: dict[str, Move]
    final: dict[str, int]
    max_steps: Optional[int]
    steps: list[Step] = field(default_factory=list)
    # Groups of moves walked one after the other (rounds: each was decided on the cluster as the
    # rounds before it left it); None: one group.
    phases: Optional[list[list[str]]] = None
    # Moves already checked by kube-scheduler's filters in the phases' order on the cluster as it
    # is at that point of the walk (rounds' greedy drains): applied without checking again. The
    # replay still checks every step.
    checked: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        problem = self.problem
        # The cluster as it runs now: every running pod on its node.
        now = problem.running()
        self.state = now.state.copy()
        self.nodes = problem.nodes
        self.version = problem.ctx.config.kubernetes_version
        # The PodInfo in the state for each moving pod (bound now; the unbound copy once moved).
        self.current: dict[str, PodInfo] = {key: cast(PodInfo, now.pod(key)) for key in self.moves}
        self.window: dict[str, PodInfo] = {key: problem.window_pod(key) for key in self.moves}
        self.into: dict[int, set[str]] = {}
        for move in self.moves.values():
            self.into.setdefault(move.target, set()).add(move.pod)
        # Moves whose verdicts read other nodes' pods (``registry.coupling``): checked again after
        # every step, not only when their target changes.
        self.nonlocal_moves = {key for key, pod in self.window.items()
                               if registry.coupling(pod, self.state) >= Coupling.DOMAIN}
        # Evictions each budget can still take beyond the moves themselves (for buffer steps).
        budgets = problem.budgets
        self.covering = {key: budgets.covering(pod) for key, pod in self.window.items()}
        self.budget_left = [b.allowed for b in budgets.budgets]
        for key in self.moves:
            for i in self.covering[key]:
                self.budget_left[i] -= 1
        busy_at_end = set(self.final.values()) | set(problem.pinned)
        self.freed_at_end = {n for n in range(len(self.nodes)) if n not in busy_at_end}
        self.buffered: set[str] = set()

    # -- checks ----------------------------------------------------------------------------------

    def status(self, key: str, target: int) -> Status:
        """Would ``key``'s replacement pass the filters on ``target`` once ``key`` has left?"""
        info = self.current[key]
        source = self.state.where[key]
        self.state.remove(info)
        try:
            return Cycle(self.window[key], self.state, self.problem.static, version=self.version).status(self.nodes[target])
        finally:
            self.state.add(info, source)

    def ready(self, key: str) -> bool:
        return self.status(key, self.moves[key].target).ok

    def priority(self, key: str) -> tuple:
        """Moves that others wait for first (their source is someone's target), then by pod."""
        helps = len(self.into.get(self.state.where[key], ()))
        return (-helps, key)

    # -- changes ---------------------------------------------------------------------------------

    def apply(self, key: str, target: int, *, buffer: bool) -> int:
        source = self.state.where[key]
        self.state.remove(self.current[key])
        self.state.add(self.window[key], target)
        self.current[key] = self.window[key]
        self.steps.append(Step(len(self.steps) + 1, key, source, target, buffer))
        return source

    # -- the walk --------------------------------------------------------------------------------

    def run(self) -> list[Step]:
        groups = self.phases if self.phases is not None else [list(self.moves)]
        seen = {k for group in groups for k in group}
        rest = [k for k in self.moves if k not in seen]
        for group in [*groups, rest]:
            if len(group) == 1 and group[0] in self.checked and group[0] in self.moves:
                key = group[0]
                self.into[self.moves[key].target].discard(key)
                self.apply(key, self.moves[key].target, buffer=False)
                continue
            self.walk({k: self.moves[k] for k in group if k in self.moves})
        return self.steps

    def walk(self, waiting: dict[str, Move]) -> None:
        to_check = set(waiting)
        heap: list[tuple[tuple, str]] = []
        queued: set[str] = set()  # in the heap, found ready (checked again when popped)
        while waiting:
            for key in sorted(to_check - queued):
                if key in waiting and self.ready(key):
                    heapq.heappush(heap, (self.priority(key), key))
                    queued.add(key)
            to_check = set()
            chosen = None
            while heap:
                _, key = heapq.heappop(heap)
                queued.discard(key)
                if key in waiting and self.ready(key):
                    chosen = key
                    break
            if chosen is None:
                parked, source = self.park(waiting)
                to_check = (self.into.get(source, set()) | self.nonlocal_moves | {parked}) & set(waiting)
                continue
            move = waiting.pop(chosen)
            self.into[move.target].discard(chosen)
            source = self.apply(chosen, move.target, buffer=False)
            to_check = (self.into.get(source, set()) | self.nonlocal_moves) & set(waiting)

    # -- deadlocks -------------------------------------------------------------------------------

    def graph(self, waiting: dict[str, Move]) -> nx.DiGraph:
        """B → A when A's target is the node B would leave."""
        g = nx.DiGraph()
        g.add_nodes_from(waiting)
        leaving: dict[int, list[str]] = {}
        for key in waiting:
            leaving.setdefault(self.state.where[key], []).append(key)
        for key, move in waiting.items():
            for other in leaving.get(move.target, ()):
                if other != key:
                    g.add_edge(other, key)
        return g

    def park(self, waiting: dict[str, Move]) -> tuple[str, int]:
        """Nothing fits: park one pod that others wait for on a buffer node; it, and its source."""
        g = self.graph(waiting)
        try:
            cycle = [u for u, _ in nx.find_cycle(g)]
        except nx.NetworkXNoCycle:
            cycle = []
        helpers = sorted((k for k in waiting if g.out_degree(k) > 0), key=lambda k: (k not in cycle, k))
        for key in helpers:
            if key in self.buffered or not self.may_evict_again(key):
                continue
            node = self.buffer_for(key, waiting)
            if node is None:
                continue
            self.buffered.add(key)
            source = self.apply(key, node, buffer=True)
            for i in self.covering[key]:
                self.budget_left[i] -= 1
            move = waiting[key]
            waiting[key] = Move(key, node, move.target)
            return key, source
        raise self.conflict(waiting, cycle)

    def may_evict_again(self, key: str) -> bool:
        if self.max_steps is not None and len(self.steps) + len(self.moves_left()) + 1 > self.max_steps:
            return False
        return all(self.budget_left[i] > 0 for i in self.covering[key])

    def moves_left(self) -> list[str]:
        done = {s.pod for s in self.steps if not s.buffer}
        return [k for k in self.moves if k not in done]

    def buffer_for(self, key: str, waiting: dict[str, Move]) -> Optional[int]:
        """A node that admits the pod now, other than where it is and where it goes; nodes kept
        in the final state first, then nodes nobody waits to enter, then the roomiest."""
        info = self.current[key]
        source = self.state.where[key]
        self.state.remove(info)
        try:
            feasible = Cycle(self.window[key], self.state, self.problem.static, version=self.version).feasible()
            feasible = feasible[(feasible != source) & (feasible != waiting[key].target)]
            if not len(feasible):
                return None
            wanted = {m.target for m in waiting.values()}
            room = self.state.free[feasible] / np.maximum(self.state.alloc[feasible], 1)
            headroom = room[:, :2].min(axis=1)
            ranked = sorted(
                range(len(feasible)),
                key=lambda i: (int(feasible[i]) in self.freed_at_end, int(feasible[i]) in wanted, -headroom[i], int(feasible[i])),
            )
            return int(feasible[ranked[0]])
        finally:
            self.state.add(info, source)

    def conflict(self, waiting: dict[str, Move], cycle: list[str]) -> OrderError:
        names = self.nodes
        keys = cycle or sorted(waiting)
        lines = []
        for key in keys[:LIST_LIMIT]:
            move = waiting[key]
            why = "; ".join(self.status(key, move.target).reasons) or "waits for another move"
            lines.append(f"{key} ({names[self.state.where[key]].name} -> {names[move.target].name}): {why}")
        more = f" and {len(keys) - LIST_LIMIT} more" if len(keys) > LIST_LIMIT else ""
        what = "wait for each other in a cycle" if cycle else "cannot run"
        message = (
            f"no safe order for {len(waiting)} remaining move(s): these {what}, and no pod among them can be "
            f"parked on a node with room (or --max-moves / a PodDisruptionBudget leaves no eviction to spare): "
            + " | ".join(lines)
            + more
        )
        return OrderError(message, lines)


def order_moves(problem: RepackProblem, final: dict[str, int], *, max_steps: Optional[int] = None,
                phases: Optional[list[list[str]]] = None, checked: frozenset[str] = frozenset()) -> list[Step]:
    """Numbered steps taking every movable pod to its node in ``final``; ``OrderError`` if the
    walk finds no safe order. ``phases``: pods whose moves are walked group after group."""
    moves = {m.pod: m for m in moves_of(problem, final)}
    if not moves:
        return []
    return _Walk(problem, moves, final, max_steps, phases=phases, checked=checked).run()

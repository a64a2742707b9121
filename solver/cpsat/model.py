"""``WindowModel``: one CP-SAT model for a window (or one independent component of it).

Data, then variables, then constraints, then objective — in that order, as the OR-tools samples
read. Pods of one equivalence class share one integer variable per candidate node:

    x[c, n]   — how many pods of class c are placed on node n            (0 ≤ x ≤ ub[c, n])
    evict[v]  — running pod v is evicted to make room                    (bool)
    level[v, L] — v is evicted for a pod of priority L on its node         (bool, one when evicted)

Interchangeable gangs are one "kind" (``gang.kinds``): the members of a kind with one signature
form one class, and an integer per kind counts the gangs that run (``GangEncoding.runs``).
Each plugin keeps its own variables in its encoding object (``encodings``, by plugin name); the
model itself holds only what every rule shares: classes, candidates, x, placed, evictions, levels.

Candidate nodes are pruned before any variable exists: static filters, resources (against what
the node has free, or could have free after evicting lower-priority pods), and window-independent
parts of the dynamic rules (missing topology keys, running pods' anti-affinity that no eviction
can lift). Each coupling rule adds its constraints from its own predicate module
(``encode(wm)``), so a rule's Python check and its encoding stay side by side.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any, Optional

import numpy as np
from ortools.sat.python import cp_model

from .. import interrupt
from ..context import PodClass, SchedulingContext
from ..info import PodInfo
from ..filtering import StaticFilters
from ..plugin_api import Level
from ..plugins.registry import copies as room_copies, fits as room_fits
from ..state import ClusterState
from .eviction import top_preemptor

class WindowModel:
    def __init__(
        self,
        ctx: SchedulingContext,
        classes: list[PodClass],
        static: StaticFilters,
        *,
        allow_preemption: bool,
    ) -> None:
        self.ctx = ctx
        self.state: ClusterState = ctx.state
        self.static = static
        self.classes = classes
        self.model = cp_model.CpModel()
        self.allow_preemption = allow_preemption
        # Variables.
        self.x: dict[tuple[int, int], cp_model.IntVar] = {}
        self.cand: dict[int, np.ndarray] = {}
        self.ub: dict[int, np.ndarray] = {}
        self.by_node: dict[int, list[tuple[PodClass, cp_model.IntVar]]] = defaultdict(list)
        self.by_class: dict[int, list[tuple[int, cp_model.IntVar]]] = defaultdict(list)
        self.placed: dict[int, cp_model.IntVar | int] = {}
        self.evict: dict[str, cp_model.IntVar] = {}
        self.evict_pod: dict[str, tuple[PodInfo, int]] = {}
        # Per victim, its eviction level literals by priority (``eviction.create``).
        self.evict_level: dict[str, dict[int, cp_model.IntVar]] = {}
        # Objective levels, most important first; each rule appends to the level it affects.
        self.levels: list[Level] = [
            Level("placement"),
            Level("pdb_violations"),
            Level("victim_priority"),
            Level("victims"),
            Level("score"),
        ]
        self._domain_cache: dict[tuple, dict[int, list]] = {}
        self._domain_pairs: dict[tuple, dict[int, list]] = {}
        self.vec: dict[int, np.ndarray] = {c.id: self.state.vector(c.rep) for c in classes}
        self._ub: dict[tuple[int, int], int] = {}
        self._node_used: dict[int, cp_model.IntVar] = {}
        # Each plugin's own encoding (its variables, what its hint and decode read), by plugin
        # name: what its encoder returned (``build.build_component``), never read by another
        # plugin; decode, hint and stages ask it through the ``plugin_api`` protocols.
        self.encodings: dict[str, Any] = {}
        # The rules' views of the whole window, by plugin name (``plugin_api.WindowPart``).
        self.window: Mapping[str, Any] = {}
        # Groups of interchangeable candidate nodes (see ``symmetry``).
        self.node_groups: list[list[int]] = []
        self.symmetry_broken = False
        # The packing, when it is the hint (``hint.HintSolution``); it stands in for a solve
        # that finds less.
        self.hint_solution: Optional[HintSolution] = None
        self.hint_complete = False  # the hint names every variable (``hint.complete``)
        # Victim -> the pod at whose turn kube-scheduler's preemption evicts it, from the replay
        # of the solution the solve returned (``kube_victims.solve_sound``).
        self.kube_names: dict[str, str] = {}
        # The placements of the best plan the replay refused (``kube_victims.solve_sound``), with
        # its placement value: what a guided pass (``greedy.Guide``) may still make sound.
        self.refused: Optional[tuple[int, dict[str, int]]] = None
        # Class id -> whether another window pod of its priority comes between two of its pods in
        # queue order (``kube_victims._interleaved``, asked by the replay's cuts).
        self.interleaved: dict[int, bool] = {}
        # Context class id -> the model class it is counted in, for classes merged into another
        # (gang kinds' classes, ``gang.merge_classes``).
        self.alias: dict[int, int] = {}

    def class_of(self, pod: PodInfo) -> int:
        """The model class a window pod is counted in."""
        return self.alias.get(pod.class_id, pod.class_id)

    def ub_of(self, cls_id: int, node: int) -> int:
        return self._ub[cls_id, node]

    def level(self, name: str) -> Level:
        return next(lv for lv in self.levels if lv.name == name)

    # -- candidates ------------------------------------------------------------------------------

    def lower_priority_room(self, priority: int, within: Optional[np.ndarray] = None) -> np.ndarray:
        """Per node and resource, what evicting every running pod below ``priority`` frees (on the
        nodes of ``within`` only, when given: elsewhere 0)."""
        state = self.state
        room = np.zeros_like(state.used)
        nodes = range(len(state.nodes)) if within is None else np.flatnonzero(within).tolist()
        for node in nodes:
            for pod in state.pods_on[node].values():
                if pod.priority < priority:
                    room[node] += state.vector(pod)
        return room

    def compute_candidates(self, extra_prune, within: Optional[np.ndarray] = None) -> None:
        """Candidate nodes and per-node upper bounds for every class, vectorised over nodes.

        A pod may also use room that another window pod's preemption frees: kube-scheduler
        places the higher-priority pod first, its victims go, and a later pod that could evict
        nothing fits in what they left (so do host ports and anti-affinity rules they held).
        So, once the candidates of the classes that may preempt are known, a class is given,
        per node, the room and rules freed by evicting what the highest-priority preemptor
        with that node among its candidates could evict; the model's eviction variables
        decide whether that happens. ``within`` (a node mask): candidates only among those nodes
        (a large-neighbourhood round's), nothing read of the others."""
        room_cache: dict[int, np.ndarray] = {}  # priority -> lower_priority_room, for both passes
        self._candidates(extra_prune, room_cache, within=within)
        if not self.allow_preemption:
            return
        state = self.state
        top = top_preemptor(self.classes, self.cand, len(state.nodes))
        # Per node, what its top preemptor could free, and which pods that is.
        freed = np.zeros_like(state.used)
        others: set[str] = set()
        for n in (range(len(state.nodes)) if within is None else np.flatnonzero(within).tolist()):
            for pod in state.pods_on[n].values():
                if pod.priority < top[n]:
                    freed[n] += state.vector(pod)
                    others.add(pod.key)
        if others:  # else nobody can gain anything
            self._candidates(extra_prune, room_cache, (top, freed, others), within)

    def _candidates(self, extra_prune, room_cache: dict, freeable: Optional[tuple] = None,
                    within: Optional[np.ndarray] = None) -> None:
        """One pass over the classes; ``freeable`` (the second pass): per node the top
        preemptor's priority, the room it could free, and the pods it could evict."""
        state = self.state
        free = state.alloc - state.used
        all_nodes = np.arange(len(state.nodes), dtype=np.int64)
        top, freed, others = freeable if freeable is not None else (None, None, frozenset())
        for cls in interrupt.checked(self.classes, every=8):
            rep = cls.rep
            vec = state.vector(rep)
            can_preempt = self.allow_preemption and rep.may_preempt_others
            if top is not None:
                own = rep.priority if can_preempt else np.iinfo(np.int64).min
                if not (top > own).any():
                    continue  # nothing beyond what the first pass gave it
            mask = self.static.mask(rep).copy()
            if within is not None:
                mask &= within
            if can_preempt:
                room = room_cache.get(rep.priority)
                if room is None:
                    room = room_cache[rep.priority] = self.lower_priority_room(rep.priority, within)
                cap = free + room
            else:
                cap = free
            if top is not None:
                cap = np.maximum(cap, free + freed)
            mask &= room_fits(vec, cap)
            if mask.any():  # else no prune can give a node back
                mask &= extra_prune(cls, can_preempt, others)
            nodes = all_nodes[mask]
            if len(nodes):
                ub = np.minimum(room_copies(vec, cap[nodes]), cls.size)
                if rep.host_ports:
                    ub = np.minimum(ub, 1)  # a pod's host ports collide with its twin's
                keep = ub > 0
                nodes, ub = nodes[keep], ub[keep]
            else:
                ub = np.zeros(0, dtype=np.int64)
            self.cand[cls.id] = nodes
            self.ub[cls.id] = ub

    def create_variables(self) -> None:
        """x[c, n]: pods of class c on node n; placed[c]: pods of class c placed anywhere."""
        m = self.model
        for cls in interrupt.checked(self.classes, every=8):
            terms = []
            for n, ub in zip(self.cand[cls.id].tolist(), self.ub[cls.id].tolist()):
                var = m.new_int_var(0, ub, f"x[{cls.id},{n}]")
                self._ub[cls.id, n] = ub
                self.x[cls.id, n] = var
                self.by_node[n].append((cls, var))
                self.by_class[cls.id].append((n, var))
                terms.append(var)
            if terms:
                placed = m.new_int_var(0, cls.size, f"placed[{cls.id}]")
                m.add(placed == cp_model.LinearExpr.sum(terms))
                self.placed[cls.id] = placed
            else:
                self.placed[cls.id] = 0

    # -- shared helpers for encodings ------------------------------------------------------------

    def class_vars_by_domain(self, cls_id: int, key: str) -> dict[int, list]:
        """x[c, n] grouped by the domain id of n under ``key`` (nodes lacking it left out)."""
        cache_key = (cls_id, key)
        hit = self._domain_cache.get(cache_key)
        if hit is None:
            hit = defaultdict(list, {d: [var for _, var in pairs]
                                     for d, pairs in self.class_pairs_by_domain(cls_id, key).items()})
            self._domain_cache[cache_key] = hit
        return hit

    def class_pairs_by_domain(self, cls_id: int, key: str) -> dict[int, list[tuple[int, cp_model.IntVar]]]:
        """(n, x[c, n]) grouped by the domain id of n under ``key`` (nodes lacking it left out)."""
        cache_key = (cls_id, key)
        hit = self._domain_pairs.get(cache_key)
        if hit is None:
            ids = self.state.domains(key)[0]
            hit = defaultdict(list)
            for n, var in self.by_class.get(cls_id, []):
                d = int(ids[n])
                if d >= 0:
                    hit[d].append((n, var))
            self._domain_pairs[cache_key] = hit
        return hit

    def new_presence(self, name: str, vars_: list, bound: int):
        """A bool that is 1 whenever Σ vars_ > 0 (vars_ ≤ bound · presence)."""
        b = self.model.new_bool_var(name)
        self.model.add(cp_model.LinearExpr.sum(vars_) <= bound * b)
        self.model.add(cp_model.LinearExpr.sum(vars_) >= 1).only_enforce_if(b)
        return b

    def node_used(self, n: int):
        """A bool that is 1 whenever the window places a pod on node ``n`` (created once)."""
        b = self._node_used.get(n)
        if b is None:
            vars_ = [var for _, var in self.by_node[n]]
            bound = sum(self.ub_of(cls.id, n) for cls, _ in self.by_node[n])
            b = self._node_used[n] = self.new_presence(f"used[{n}]", vars_, bound)
        return b

    def evictable(self, pod: PodInfo) -> Optional[cp_model.IntVar]:
        return self.evict.get(pod.key)

    # -- size --------------------------------------------------------------------------------

    def size(self) -> tuple[int, int]:
        proto = self.model.Proto()
        return len(proto.variables), len(proto.constraints)


class HintSolution:
    """The packing hint read like a solver's answer (placements only, no evictions), for the
    engine to extract when the solve finds nothing in its time. The packing meets every rule by
    construction (capacity from the free room, whole gangs, anti-affinity checked pod by pod,
    no class another coupling rule touches), and the plan is validated as any other."""

    def __init__(self, wm: WindowModel, counts: dict[tuple[int, int], int], value: int) -> None:
        self.values = {wm.x[key].index: k for key, k in counts.items()}
        self.placement_value = value

    def value(self, var) -> int:
        return self.values.get(var.index, 0)

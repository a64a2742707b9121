"""Only evictions kube-scheduler's own preemption would make: the replay's verdicts as lazy
constraints (issue 33).

The model's eviction rule (``victim_room``, read on the final state) admits plans whose victims
kube-scheduler, taking the pods one at a time in queue order, would keep (it evicts another pod, or
none). Which pods kube-scheduler evicts on a node follows from the pods placed there (the replay,
``registry.POSTFILTER.replay``), a sequential procedure no final-state constraint states exactly. So the
component is solved, its plan replayed on the nodes it evicts from, and for each node where the
plan evicts a pod the replay keeps, the replay's verdict for that node's placement is added:

    x[c, n] = k_c for every class c on n   ⇒   evict[v] = 0 for every v the replay keeps

(one clause per kept victim over "x[c, n] ≠ k_c" literals; where a class placed on the node has
required pod affinity, whose verdict reads the rest of the cluster, over the whole plan's
literals instead), and the component is solved again,
from scratch: the lexicographic stages' value fixings are dropped first (an earlier stage's value
may no longer be reachable). The cuts remove only plans the replay rejects, so a plan proven
optimal with them is optimal among the plans the rule allows.

Where the model names the class a victim is evicted for (``plugin_api.PreemptorNamer.named``: a
victim that supports required affinity supports every pod but its preemptor), the replay must name
a pod of that class too: kube-scheduler may evict the victim at an earlier pod's turn (the spread
at that turn), and the pods the model leaned on it then lose their support. Such a victim is
refused like a kept one, and cut on the model's naming of the whole plan:

    x = the plan's x  and  evict = the plan's evict   ⇒   named[v, c] = 0

(the replay reads the plan's placements and the nodes it evicts from, so every plan this clause
removes is one the replay names the same way, for another class than c). A plan that breaks the
replay is also repaired at once (its placements kept, its victims the replay's, named as the replay
names them): the hint of the next solve, and the component's plan if the time runs out before a
solve passes.
"""

from __future__ import annotations

import itertools
import logging
import math
import re
import time
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from typing import Any, Optional

import numpy as np
from ortools.sat.python import cp_model

from models.plan import Plan, PlanStats

from ..info import queue_order_key
from ..plugin_api import PlacementDecoder, PreemptorNamer, Relaxable, UnitTrades, Values, Victim
from ..plugins import registry
from ..state import PodMatcher
from ..validate import Replay
from .decode import by_counts, extract, placement_value
from .model import WindowModel
from .outcome import Solution
from .stages import Recorder, solve_component

log = logging.getLogger("cpsat_scheduler.solver")


# Rounds of repair (pods that cannot fit at their turn taken out, the replay run again) at most.
REPAIR_ROUNDS = 5


def solve_sound(wm: WindowModel, cfg, deadline: float, work: Optional[float] = None, solve=solve_component,
                relaxed_repairs: bool = True, view: Optional[ReplayOf] = None
                ) -> tuple[Optional[Values], str, Optional[float], Optional[float], int]:
    """``solve`` (the staged solve, ``stages.solve_component``), repeated with the replay's cuts
    until the plan's victims are ones kube-scheduler's preemption evicts: (the solution's values
    or None, status, objective, bound, rounds of cuts). A plan that breaks the replay is also
    *repaired* at once: its placements kept (less any pod that cannot fit at its turn), its
    victims the replay's own. That plan is the hint of the solve after the cuts, and the answer if
    the time runs out first (status FEASIBLE, no bound). The first solve has the whole time: the
    model's reprieve (``reprieve_encode``) makes plans that break the replay the exception, and a
    share held back for the solve after the cuts left the first without a plan on busy cores.
    ``view``: how a plan of the model is replayed (``ReplayOf``; the model's own window by
    default).

    With ``work`` (one worker: the user's reproducible decision) the rounds stop on work, not on
    the clock: the solves share ``work`` deterministic seconds, and at most
    ``CUT_ROUNDS_PER_WORK_SECOND`` rounds a second of it are cut; ``deadline`` then only guards,
    stretched as ``stages.new_solver`` stretches a solve's. A window whose refused plans went on
    until the clock stopped them gave two plans in turn from one seed."""
    if registry.POSTFILTER is None or not wm.evict:
        return (*solve(wm, cfg, deadline, work=work), 0)
    fixed = work is not None
    left = work if work is not None else 0.0
    max_rounds = max(MIN_FIXED_CUT_ROUNDS, math.ceil(CUT_ROUNDS_PER_WORK_SECOND * left))
    stop = deadline + 3 * left + 1 if fixed else deadline
    ne: dict[tuple[int, int], cp_model.IntVar] = {}
    anti_keys: dict[int, set[str]] = {}  # per class (``_near``)
    rounds = 0
    repaired: Optional[PlanValues] = None
    hint_repaired = False  # the repaired plan is a solution of the model itself: the next solve's hint
    # Earlier solutions are looked at for a model of its own window only: a neighbourhood round's
    # replay is the whole plan's (``WholePlan``), too slow to ask several times within a round.
    plan_vars = _plan_vars(wm) if view is None and len(wm.x) + len(wm.evict) <= RECORD_MAX_VARIABLES else None
    view = view or OwnWindow(wm)
    while True:
        mark = len(wm.model.proto.constraints)
        # (the classes a model decodes itself, gangs, are not swapped pod by pod; a kind's gangs
        # may trade places, and the plan then comes back by name: ``hand_by_turns``)
        judged = _Judged(wm, view, swaps=isinstance(view, OwnWindow))
        recorder = Recorder(plan_vars) if plan_vars is not None else None
        if fixed:
            spent: list[float] = []
            solver, status, obj, bnd = solve(wm, cfg, stop, work=left, accept=judged.accept, record=recorder,
                                             spent=spent)
            left -= sum(spent)
        else:
            solver, status, obj, bnd = solve(wm, cfg, deadline, accept=judged.accept, record=recorder)
        if solver is None:
            if repaired is not None:
                wm.kube_names = repaired.names
                return repaired, "FEASIBLE", None, None, rounds
            return solver, status, obj, bnd, rounds
        trial, found = judged.of(solver)
        kept = [v for v in trial.victims if v.pod.key not in found.evicted_by]
        misnamed = _misnamed(wm, solver, trial, found, problems=lambda: judged.final(solver))
        stranded = judged.stranded(solver)
        if not kept and not misnamed and not stranded:
            if repaired is not None and placement_value(wm, repaired) > placement_value(wm, solver):
                wm.kube_names = repaired.names
                return repaired, "FEASIBLE", None, None, rounds
            wm.kube_names = found.evicted_by
            return judged.plan_of(solver), status, obj, bnd, rounds
        rounds += 1
        value = placement_value(wm, solver)
        if wm.refused is None or value > wm.refused[0]:
            wm.refused = (value, dict(trial.placements))
        log.debug("kube's preemption keeps %d victim(s) of the plan and evicts %d for another class than "
                  "the model named; %d pod(s) with pod affinity cannot fit at their turn: cut round %d",
                  len(kept), len(misnamed), len(stranded), rounds)
        if log.isEnabledFor(logging.DEBUG):
            for v in kept[:8]:
                log.debug("  kept: %s", found.why_kept(v.pod, v.node, v.preemptor))
        for c in list(wm.model.proto.constraints)[mark:]:
            c.clear_linear()  # the stages' value fixings (each a linear row): dropped
        earlier = _earlier(wm, recorder, view, placement_value(wm, repaired) if repaired is not None else None,
                           stop)
        if earlier is not None:
            # An answer, not the next solve's hint: a hint not checked against the model with the
            # cuts (``_holds``) is what OR-tools 9.15's presolve can abort the process on
            # (std::out_of_range in its hint crush, google/or-tools#5288; seen once in the peer table).
            repaired, hint_repaired = earlier, False
        fixed_plan = repair(wm, trial, view)
        if fixed_plan is not None and (repaired is None
                                       or placement_value(wm, fixed_plan) > placement_value(wm, repaired)):
            holds = _holds(wm, fixed_plan, stop, relaxed=relaxed_repairs)
            if holds is not None:
                repaired, hint_repaired = fixed_plan, holds == IN_MODEL
        if time.monotonic() >= stop or fixed and (left <= 0 or rounds >= max_rounds):
            if repaired is None:
                return None, "UNKNOWN", None, None, rounds
            wm.kube_names = repaired.names
            return repaired, "FEASIBLE", None, None, rounds
        nodes = {v.node for v in kept}
        whole: Optional[list] = None
        gangs = _decodes_itself(wm)
        for n in nodes:
            affine = _reads_beyond(wm, solver, n)
            if affine and not gangs:
                # The verdict there leans on pods elsewhere: the cut is on the whole plan.
                if whole is None:
                    whole = _plan_differs(wm, ne, solver)
                config = whole
            else:
                # (a model that decodes gangs itself has no repair: whole-plan cuts, one plan at
                # a time, ran out of time there on windows its node cuts had solved; its affinity
                # nodes are cut on their support domains, their victims' evictions included).
                # After ``DOMAIN_CUT_ROUNDS`` the cuts are the node's alone: a zone's cut removes
                # a plan or two, and a window whose plans the replay keeps refusing ran out of
                # time on them (154 rounds) where node cuts ended optimal.
                domains = rounds <= DOMAIN_CUT_ROUNDS
                near = _near(wm, solver, n, affine, anti_keys) if domains else {n}
                if domains and (affine or len(near) > 1):
                    config = _domains_differ(wm, ne, solver, near)
                else:
                    config = [_differs(wm, ne, var, int(solver.value(var))) for _, var in wm.by_node[n]]
                    config += _which_pods(wm, ne, solver, n)
            for key, (victim, node) in wm.evict_pod.items():
                if node == n and key not in found.evicted_by:
                    wm.model.add_bool_or([*config, wm.evict[key].Not()])
        if misnamed:
            plan = _plan_differs(wm, ne, solver)
            for lit in misnamed:
                wm.model.add_bool_or([*plan, lit.Not()])
        if stranded:
            wm.model.add_bool_or(whole if whole is not None else _plan_differs(wm, ne, solver))
        if repaired is not None and hint_repaired:
            wm.model.clear_hints()
            for var in _plan_vars(wm):  # a victim of one level has its evict var as its level
                wm.model.add_hint(var, repaired.value(var))


# Cut rounds whose cuts on a node read the nodes its verdict reads (``_near``); the rounds after
# cut on the node alone (fuzzed windows: the cuts that need the zone came within 5 rounds; two
# windows whose refused plans went on for 150-320 rounds ran out of time with zone cuts).
DOMAIN_CUT_ROUNDS = 20
# With one worker (``solve_sound``'s ``work``), the cut rounds a second of deterministic work
# allows, and the fewest whatever the work: rounds, not the clock, end a reproducible decision
# whose refused plans go on (a 14-pod fuzzed window cut 135-148 rounds in 5 s, 25-30 a second).
CUT_ROUNDS_PER_WORK_SECOND = 20
MIN_FIXED_CUT_ROUNDS = 20
# The most x and evict variables a model may have for its first stage's solutions to be recorded
# (each solution's values are read one by one, in Python).
RECORD_MAX_VARIABLES = 20_000
# Earlier solutions replayed at most per refused solve (best first).
EARLIER_TRIED = 8


def _earlier(wm: WindowModel, recorder: Optional[Recorder], view: ReplayOf,
             floor: Optional[int], deadline: float) -> Optional[PlanValues]:
    """The best of the first stage's earlier solutions (``Recorder``) whose victims are all ones
    kube-scheduler's preemption evicts, as a plan, if it places more than ``floor`` (a placement
    value; None: any). A longer solve ends on a plan that breaks the replay more often than a
    short one, whose first solutions keep close to the hint: on a 20-node window the solve at 10 s
    cut nine rounds and ended below greedy, where the one at 1 s had returned an earlier, sound
    plan above it. No solution is replayed once ``deadline`` has passed."""
    if recorder is None or len(recorder.found) < 2:
        return None
    for _, values in sorted(recorder.found[:-1], key=lambda f: -f[0])[:EARLIER_TRIED]:
        plan = _Recorded(values)
        if floor is not None and placement_value(wm, plan) <= floor or time.monotonic() >= deadline:
            break
        trial = Solution()
        extract(wm, plan, trial)
        found = view(trial.placements, {v.node for v in trial.victims})
        if (all(v.pod.key in found.evicted_by for v in trial.victims) and not _misnamed(wm, plan, trial, found)
                and not _stranded(wm, trial, found)):
            log.debug("an earlier solution of the solve is one kube's preemption allows: kept")
            return PlanValues(wm, trial.placements,
                              [Victim(v.pod, v.node, found.evicted_by[v.pod.key]) for v in trial.victims])
    return None


def _self_decoded(wm: WindowModel) -> set[int]:
    """The classes an encoding of ``wm`` decodes itself (gang kinds: whole gangs)."""
    out: set[int] = set()
    for enc in wm.encodings.values():
        if isinstance(enc, PlacementDecoder):
            out |= enc.decoded_classes()
    return out


def _decodes_itself(wm: WindowModel) -> bool:
    """Whether an encoding of ``wm`` decodes its own classes' placements (gangs). Such a model's
    plan is still a function of its counts (the decoder deals whole gangs from them), so its
    solutions are judged, cut and recorded as any; but a repair, which takes single pods out, would
    leave counts the decoder deals otherwise, so none is made."""
    return bool(_self_decoded(wm))


class _Recorded:
    """A recorded solution's values (``plugin_api.Values``); a variable not recorded reads 0."""

    def __init__(self, values: dict[int, int]) -> None:
        self.values = values

    def value(self, var) -> int:
        return self.values.get(var.index, 0)


class OwnWindow:
    """The replay of a plan of ``wm`` as its own window: ``view(placements, nodes)`` is
    ``registry.POSTFILTER.replay`` of the model's context, judging ``nodes``."""

    def __init__(self, wm: WindowModel) -> None:
        self.wm = wm

    def __call__(self, placements: Mapping[str, int], nodes: set[int]) -> Any:
        assert registry.POSTFILTER is not None  # solve_sound replays only with a PostFilter
        return registry.POSTFILTER.replay(self.wm.ctx, placements, nodes, self.wm.static)


class WholePlan:
    """The replay of a plan of a model that decides part of a window (a neighbourhood round,
    ``lns``) inside the whole plan: the rest of the window placed as ``outside`` has it, in queue
    order with the model's pods (a pod placed outside comes in at its turn, not before every
    one of the model's: at an earlier turn, a spread's other domains hold fewer pods), and the
    nodes of ``outside_victims`` judged too. The last answer is kept: the same plan asked again
    (the round's final check) is not replayed twice."""

    def __init__(self, ctx, static, outside: Mapping[str, int], outside_victims: list[Victim]) -> None:
        self.ctx, self.static = ctx, static
        self.outside = dict(outside)
        self.outside_nodes = {v.node for v in outside_victims}
        self.last: Optional[tuple[tuple, Any]] = None
        self.longest = 0.0  # seconds the slowest replay took

    def __call__(self, placements: Mapping[str, int], nodes: set[int]) -> Any:
        key = (tuple(sorted(placements.items())), tuple(sorted(nodes)))
        if self.last is not None and self.last[0] == key:
            return self.last[1]
        assert registry.POSTFILTER is not None
        start = time.monotonic()
        found = registry.POSTFILTER.replay(self.ctx, {**self.outside, **placements}, set(nodes) | self.outside_nodes,
                                           self.static)
        self.longest = max(self.longest, time.monotonic() - start)
        self.last = (key, found)
        return found


# How a plan of the model is replayed: (placements, nodes to judge) -> ``KubeReplay``.
ReplayOf = Callable[[Mapping[str, int], set[int]], Any]


class _Judged:
    """A solution read as a plan and replayed (``of``), once per solution: the placement stage's
    is asked before the later stages polish it (``accept``, every victim one the replay evicts —
    a plan the replay refuses is cut, repaired and solved again at once; on a 20-node window the
    victims stage alone took the rest of a 10 s limit, leaving no time for the solve after the
    cut), and the same judgement serves the loop when that solution is the one returned."""

    def __init__(self, wm: WindowModel, view: ReplayOf, swaps: bool = False) -> None:
        self.wm, self.view, self.swaps = wm, view, swaps
        self.last: Optional[tuple[object, Solution, Any]] = None
        self._stranded: Optional[tuple[object, list[str]]] = None
        self._final: Optional[tuple[object, list[str]]] = None
        self.handed: Optional[object] = None  # the solution whose plan ``of`` handed out by turns

    def of(self, solver) -> tuple[Solution, Any]:
        """The solution's plan and its replay. With ``swaps`` (a model of its own window), a plan
        with pods that cannot fit at their turn, or victims the replay keeps, is first handed out
        by turns (``hand_by_turns``): the same counts and victims, its classes' pods on each
        other's nodes."""
        if self.last is not None and self.last[0] is solver:
            return self.last[1], self.last[2]
        wm = self.wm
        trial = Solution()
        extract(wm, solver, trial)
        nodes = {v.node for v in trial.victims}
        found = self.view(trial.placements, nodes)
        if self.swaps:
            placements, found = hand_by_turns(wm, self.view, trial.placements, nodes, found, trial.victims)
            if placements is not trial.placements:
                trial.placements = placements
                trial.victims = [Victim(v.pod, v.node, found.evicted_by.get(v.pod.key, v.preemptor))
                                 for v in trial.victims]
                trial.nominations = {v.preemptor: v.node for v in trial.victims if v.preemptor in placements}
                self.handed = solver
        self.last = (solver, trial, found)
        return trial, found

    def plan_of(self, solver) -> Values:
        """What the solve returns for ``solver``'s solution: the solution itself, or, when ``of``
        handed its pods out by turns, that plan read as the model's values (the same counts,
        victims and levels: the objective and bound stand)."""
        if self.handed is not solver:
            return solver
        trial, _ = self.of(solver)
        return PlanValues(self.wm, trial.placements, trial.victims)  # (named as the replay names them)

    def accept(self, solver) -> bool:
        trial, found = self.of(solver)
        return (all(v.pod.key in found.evicted_by for v in trial.victims)
                and not _misnamed(self.wm, solver, trial, found, problems=lambda: self.final(solver))
                and not self.stranded(solver))

    def stranded(self, solver) -> list[str]:
        """``_stranded`` of the solution, once per solution (it may run the final checks)."""
        if self._stranded is None or self._stranded[0] is not solver:
            trial, found = self.of(solver)
            self._stranded = (solver, _stranded(self.wm, trial, found, problems=lambda: self.final(solver)))
        return self._stranded[1]

    def final(self, solver) -> list[str]:
        """``_final_problems`` of the solution's plan, once per solution (both checks may ask)."""
        if self._final is None or self._final[0] is not solver:
            trial, found = self.of(solver)
            self._final = (solver, _final_problems(self.wm, trial, found))
        return self._final[1]


def _stranded(wm: WindowModel, trial: Solution, found: Any,
              problems: Optional[Callable[[], list[str]]] = None) -> list[str]:
    """The model's pods with required pod affinity that cannot fit their node at their own turn
    (not even by preempting, in the replay), when the plan's final-state checks refuse it: such a
    pod comes only once the plan's later evictions there are done, and the victims then gone
    support nothing of its (the validator reads them so; support from pods that stay, or from
    pods placed before it, still counts). Such a plan is refused and cut whole (the pod's node
    reads the rest of the cluster), and the repair takes the pod out (a model that decodes its
    own classes, gangs, has no repair; its plan is still a function of its counts, so the cut
    holds there too)."""
    late = [key for key, turn in found.turns.items()
            if not turn.outcome_ok and turn.pod.affinity and key in trial.placements]
    if not late:
        return []
    # (Devices and volumes the plan would give are not decided yet: their checks' lines about
    # other pods are no reason here, so only lines naming a late pod count.)
    return _naming(problems() if problems is not None else _final_problems(wm, trial, found), late)


def _naming(problems: list[str], keys: list[str]) -> list[str]:
    """The ``keys`` (pods) some line of ``problems`` names."""
    return [key for key in keys if any(re.search(rf"(?<![\w/.-]){re.escape(key)}(?![\w/.-])", line)
                                       for line in problems)]


def _final_problems(wm: WindowModel, trial: Solution, found: Any) -> list[str]:
    """The validator's final checks on the plan, its victims named as the replay names them."""
    replay = Replay(wm.ctx, Plan(stats=PlanStats(engine="cpsat", status="TRIAL")))
    replay.assigned = dict(trial.placements)
    replay.victims = [Victim(v.pod, v.node, found.evicted_by.get(v.pod.key, v.preemptor)) for v in trial.victims]
    replay.build_final_state()
    for check in registry.FINAL_CHECKS:
        check(replay)
    return list(replay.problems)


def _misnamed(wm: WindowModel, values: Values, trial: Solution, found: Any,
              problems: Optional[Callable[[], list[str]]] = None) -> list:
    """The model's naming literals (``PreemptorNamer.named``, true in ``values``) of the victims the
    replay evicts for a pod of another class than the model named: the pods the model leaned on
    such a victim may find it gone at their turn. In a model that decodes its own classes (gangs)
    the literals count only when the plan, its victims named by the replay, fails the validator's
    final checks: its reading of a gang's turns is coarser (no repair, no swaps), and a plan it
    names otherwise is often one the validator accepts once renamed. (Its plan is still read off
    its counts, so the cut, ``_plan_differs``, holds there as well.)"""
    namers = [enc for enc in wm.encodings.values() if isinstance(enc, PreemptorNamer)]
    if not namers:
        return []
    out: list = []
    for v in trial.victims:
        who = found.evicted_by.get(v.pod.key)
        if who is None:
            continue  # kept: refused and cut as such
        cls = wm.class_of(wm.ctx.window_pod(who))
        for namer in namers:
            out.extend(b for c, b in namer.named(v.pod).items() if c != cls and values.value(b))
    if out and _decodes_itself(wm):
        # (only lines naming a pod with required affinity: the devices and volumes a plan would
        # give are not decided yet, and their checks' lines are no reason here)
        leaning = [key for key in trial.placements if wm.ctx.window_pod(key).affinity]
        if not _naming(problems() if problems is not None else _final_problems(wm, trial, found), leaning):
            return []
    return out


def _reads_beyond(wm: WindowModel, values: Values, n: int) -> bool:
    """Whether the replay's verdict on node ``n`` can change with the pods of other nodes for the
    same counts there: a class placed on it has required pod affinity, whose support may be
    elsewhere in its domain and whose first pod may start only where nothing in the cluster
    matches its terms yet (a pod the plan places on another node closes that). The cut there is
    then the whole plan's (a model that decodes its own classes, gangs, reads its plan off its
    counts too)."""
    return any(cls.rep.affinity and values.value(var) for cls, var in wm.by_node[n])


def _which_pods(wm: WindowModel, ne: dict, values: Values, n: int) -> list:
    """For a cut keyed on node ``n``'s counts: literals one of which is true when a class placed
    on ``n`` whose pods interleave in the queue with another class's (``_interleaved``) puts a
    different share of its pods on the nodes before ``n`` (on any other node, for a class a rule
    hands out its own way). The decode hands a class's places to its pods in queue order, node by
    node (or as that rule says: ``registry.hand_out``), so those counts decide *which* of its pods land on
    ``n``, and with interleaved pods that decides the replay's verdict there: two pods of one
    class, nominated to ``n``, with a third pod of the same priority between them in the queue,
    evicted for the second differently than for the first (the long run's window)."""
    out: list = []
    for cls, var in wm.by_node[n]:
        if values.value(var) and _interleaved(wm, cls):
            # (a class a rule hands out its own way, ``registry.hand_out``, takes its pods for
            # ``n`` in an order its counts on every other node decide)
            own = registry.hands_out(cls.rep)
            before = [below for m, below in wm.by_class.get(cls.id, []) if m < n or (own and m != n)]
            out += _some_differ(wm, ne, values, before, (), f"shifts[{cls.id},{n}]")
    return out


def _interleaved(wm: WindowModel, cls) -> bool:
    """Whether another pod of the window with the class's priority comes, in queue order, between
    two of the class's pods (computed once per model)."""
    memo = wm.interleaved
    hit = memo.get(cls.id)
    if hit is None:
        if len(cls.pods) < 2:
            hit = False
        else:
            keys = sorted(queue_order_key(p) for p in cls.pods)
            first, last = keys[0], keys[-1]
            own = {p.key for p in cls.pods}
            hit = any(p.priority == cls.rep.priority and p.key not in own and first < queue_order_key(p) < last
                      for p in wm.ctx.window)
        memo[cls.id] = hit
    return hit


def _near(wm: WindowModel, values: Values, n: int, affine: bool, anti_keys: dict[int, set[str]]) -> set[int]:
    """The nodes a verdict on ``n`` reads (``n`` itself at least): its domains under the keys of
    the affinity terms of the classes it places (``affine``: a model that decodes gangs itself,
    where the others cut the whole plan), and under the keys of the required anti-affinity
    between those classes and the model's potential victims, either way (``_anti_keys``): a
    victim on another node of the domain keeps the class out of ``n`` until it is evicted there,
    so a plan with the same counts on ``n`` and that victim gone is another verdict."""
    keys: set[str] = set()
    for cls, var in wm.by_node[n]:
        if values.value(var):
            keys |= _anti_keys(wm, cls, anti_keys)
            if affine:
                keys.update(t.topology_key for t in cls.rep.affinity)
    near = {n}
    for key in keys:
        ids = wm.state.domains(key)[0]
        if ids[n] >= 0:
            near.update(int(m) for m in np.flatnonzero(ids == ids[n]))
    return near


def _anti_keys(wm: WindowModel, cls, memo: dict[int, set[str]]) -> set[str]:
    """The topology keys of the required anti-affinity terms between ``cls`` and the model's
    potential victims: a victim's term matching the class, or the class's term matching the
    victim (once per class)."""
    hit = memo.get(cls.id)
    if hit is None:
        rep = cls.rep
        own = [(t.topology_key, PodMatcher.of_term(t)) for t in rep.anti_affinity]
        hit = set()
        for victim, _ in wm.evict_pod.values():
            hit.update(t.topology_key for t in victim.anti_affinity
                       if t.matches(rep.namespace, rep.labels, rep.ns_labels))
            hit.update(key for key, matcher in own if matcher.matches(victim))
        memo[cls.id] = hit
    return hit


def _domains_differ(wm: WindowModel, ne: dict, values: Values, near: set[int]) -> list:
    """Literals one of which is true when a solution differs from ``values`` on the nodes
    ``near`` (``_near``: what a verdict on one of them reads): their counts, which of a class's
    pods, and the victims there."""
    counts = [var for m in sorted(near) for _, var in wm.by_node.get(m, ())]
    bools = [wm.evict[key] for key, (_, node) in wm.evict_pod.items() if node in near]
    return [*_some_differ(wm, ne, values, counts, bools, f"domains_differ[{min(near)}]"),
            *(lit for m in sorted(near) for lit in _which_pods(wm, ne, values, m))]


def _plan_differs(wm: WindowModel, ne: dict, values: Values) -> list:
    """Literals one of which is true exactly when a solution's x or evict differ from ``values``':
    "x ≠ k" per variable set above 0 (``_differs``), "evict = 0" per victim, and one literal for
    "some variable at 0 is above 0" (a single sum: a model may hold many thousand of them)."""
    return _some_differ(wm, ne, values, wm.x.values(), wm.evict.values(), "plan_differs")


def _some_differ(wm: WindowModel, ne: dict, values: Values, counts, bools, name: str) -> list:
    """Literals one of which is true exactly when one of ``counts`` (integer variables) or
    ``bools`` (booleans) differs from its value in ``values``: "x ≠ k" per count above 0, "not b"
    per boolean set, and one literal ``name`` for "some variable at 0 rose" (one sum over them)."""
    lits: list = []
    zero: list = []
    for var in counts:
        k = int(values.value(var))
        if k:
            lits.append(_differs(wm, ne, var, k))
        else:
            zero.append(var)
    for var in bools:
        if values.value(var):
            lits.append(var.Not())
        else:
            zero.append(var)
    if zero:
        rises = wm.model.new_bool_var(name)
        wm.model.add(cp_model.LinearExpr.sum(zero) >= 1).only_enforce_if(rises)
        lits.append(rises)
    return lits


class PlanValues:
    """A plan (placements, victims) read as a solution's values (``plugin_api.Values``) of ``wm``:
    x, placed, evict and level; every other variable reads 0 (so ``decode.extract`` takes every pod,
    a decoded class's too, by its name here, never by a decoder's reading of the counts)."""

    def __init__(self, wm: WindowModel, placements: dict[str, int], victims: list[Victim]) -> None:
        ctx = wm.ctx
        self.pod_nodes = dict(placements)  # read by ``decode.extract``: the plan's own pods
        counts: dict[tuple[int, int], int] = defaultdict(int)
        for key, n in placements.items():
            counts[wm.class_of(ctx.window_pod(key)), n] += 1
        self.values: dict[int, int] = {var.index: counts.get(cn, 0) for cn, var in wm.x.items()}
        per_class: dict[int, int] = defaultdict(int)
        for (c, _), k in counts.items():
            per_class[c] += k
        for c, placed in wm.placed.items():  # placed[c] = sum of x[c, ·]: the placement level's terms
            if not isinstance(placed, int):
                self.values[placed.index] = per_class.get(c, 0)
        level_of = {v.pod.key: ctx.window_pod(v.preemptor).priority for v in victims}
        self.names = {v.pod.key: v.preemptor for v in victims}
        for key, evict in wm.evict.items():
            levels = wm.evict_level[key]
            on = key in level_of
            level = level_of.get(key) if level_of.get(key) in levels else max(levels)
            for lv, lam in levels.items():
                self.values[lam.index] = int(on and lv == level)
            self.values[evict.index] = int(on)
        # The model's naming is the replay's: a plan the model holds only by naming a victim's
        # preemptor otherwise is one whose pods lean on a victim already gone at their turn.
        for key, named in _named(wm):
            cls = wm.class_of(ctx.window_pod(self.names[key])) if key in self.names else None
            for c, b in named.items():
                self.values[b.index] = int(c == cls)

    def value(self, var) -> int:
        return self.values.get(var.index, 0)


def _plan_vars(wm: WindowModel) -> list:
    """The variables a ``PlanValues`` names: x, placed, evict, the eviction levels and the model's
    naming of a victim's preemptor (each once). ``placed`` is what ``placement_value`` reads: a
    plan without it would be worth nothing."""
    placed = [v for v in wm.placed.values() if not isinstance(v, int)]
    named = [b for _, lits in _named(wm) for b in lits.values()]
    return list({v.index: v for v in [*wm.x.values(), *placed, *wm.evict.values(),
                                      *(lam for lv in wm.evict_level.values() for lam in lv.values()),
                                      *named]}.values())


def _named(wm: WindowModel) -> list[tuple[str, Mapping[int, Any]]]:
    """Per victim the model names a preemptor's class for (``PreemptorNamer.named``), its literals."""
    namers = [enc for enc in wm.encodings.values() if isinstance(enc, PreemptorNamer)]
    out = []
    for key, (victim, _) in wm.evict_pod.items():
        for namer in namers:
            named = namer.named(victim)
            if named:
                out.append((key, named))
    return out


# How a repaired plan holds (``_holds``): a solution of the whole model, or only with the batch
# reprieve lifted (then it is an answer, but no hint for the model).
IN_MODEL, RELAXED = "model", "relaxed"


def _holds(wm: WindowModel, plan: PlanValues, deadline: float, relaxed: bool = True) -> Optional[str]:
    """Whether the repaired plan is a solution of the model: the repair takes out pods that
    cannot fit at their turn, which the rules that judge a group of the plan's pods (topology
    spread's skew, a gang's minimum) may not allow. Checked by completing the plan's placements
    and evictions to every variable; a plan not proven to hold is not used (the hints are left
    as the completion made them, or as they were).

    The model's reprieve takes a priority's pods on a node as one batch, kube-scheduler one at a
    time, and their victims can differ: the repaired plan's victims are the replay's own, which
    the batch may refuse. Refused by the whole model, the plan is checked once more with the
    reprieve relaxed (``plugin_api.Relaxable``): every other rule still holds it, and the replay
    has just judged its evictions exactly. Returns ``IN_MODEL``, ``RELAXED`` or None (refused, or
    not checked in time); unless ``IN_MODEL``, the model's hint is put back as it was.
    ``relaxed=False``: the whole model only (a neighbourhood round, whose replay sees the round's
    part of the window: a repair it judged, refused by the model, once failed the full
    validator under a loaded CI machine)."""
    from .hint import complete

    hint = wm.model.proto.solution_hint
    before = (list(hint.vars), list(hint.values), wm.hint_complete)
    wm.model.clear_hints()
    for var in _plan_vars(wm):
        wm.model.add_hint(var, plan.value(var))
    budget = min(HOLDS_SECONDS, max(0.05, (deadline - time.monotonic()) / 4))
    done = complete(wm, budget)
    if done:
        return IN_MODEL
    lifted = _holds_relaxed(wm, plan, budget) if done is None and relaxed else None
    if not lifted:
        log.debug("repair: the repaired plan %s",
                  "breaks a rule of the model" if done is None and lifted is None else "was not checked in time")
    # The hint the solve had (greedy's plan, completed) is a better start than a plan the model
    # refuses: a 20-node window found no solution in 2.5 s from the refused one.
    wm.model.clear_hints()
    hint.vars.extend(before[0])
    hint.values.extend(before[1])
    wm.hint_complete = before[2]
    return RELAXED if lifted else None


def _holds_relaxed(wm: WindowModel, plan: PlanValues, budget: float) -> Optional[bool]:
    """``complete``'s answer for the plan on a copy of the model with every ``Relaxable`` rule
    relaxed (None: infeasible there too; False: not decided in time). The model's own hints are
    left as they were."""
    relaxable = [enc for enc in wm.encodings.values() if isinstance(enc, Relaxable)]
    if not relaxable:
        return None
    copy = wm.model.clone()
    for enc in relaxable:
        enc.relax(copy)
    copy.clear_hints()
    for var in _plan_vars(wm):
        copy.add_hint(copy.get_int_var_from_proto_index(var.index), plan.value(var))
    from .hint import solve_hinted

    status, _ = solve_hinted(copy, budget)
    if status == cp_model.INFEASIBLE:
        return None
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        log.debug("repair: the repaired plan holds with the batch reprieve relaxed (its victims are the replay's)")
        return True
    return False


# The longest the check that a repaired plan is a solution of the model may take.
HOLDS_SECONDS = 1.0


def repair(wm: WindowModel, trial: Solution, view: Optional[ReplayOf] = None) -> Optional[PlanValues]:
    """``trial``'s placements with the replay's victims: a class's pods handed out by turns
    (``hand_by_turns``, on a model's own window), each pod that still cannot fit its node at its
    turn taken out, the places each class keeps handed back to its first pods (``by_counts``: the
    plan the model's counts are), and the replay run again, until every turn fits or preempts.
    None when the model has encodings that decode their own variables (gangs), or the repair does
    not settle (or a pod outside the model, which ``view`` replays too, is the one that cannot
    fit)."""
    if registry.POSTFILTER is None or _decodes_itself(wm):
        log.debug("repair: the model decodes gangs itself")
        return None
    # Swaps are tried on a model's own window only: a neighbourhood round's replay is the whole
    # plan's, too slow to run several times within a round.
    own = view is None or isinstance(view, OwnWindow)
    view = view or OwnWindow(wm)
    placements = dict(trial.placements)
    nodes = {v.node for v in trial.victims}
    found = view(placements, nodes)
    for _ in range(REPAIR_ROUNDS):
        if own:  # (each round: the class's pods by turns first, then what still cannot fit out)
            placements, found = hand_by_turns(wm, view, placements, nodes, found)
        stuck = [key for key, turn in found.turns.items() if not turn.outcome_ok]
        if any(key not in placements for key in stuck):
            log.debug("repair: a pod outside the model cannot fit at its turn")
            return None
        if not stuck:
            victims = [Victim(v, t.node, t.pod.key) for t in found.turns.values() if t.pod.key in placements
                       for v in t.victims]
            if any(v.pod.key not in wm.evict for v in victims):
                log.debug("repair: a victim of the replay has no eviction variable")
                return None  # a victim the model has no variable for
            return PlanValues(wm, placements, victims)
        log.debug("repair: %d pod(s) cannot fit at their turn", len(stuck))
        for key in stuck:
            del placements[key]
        placements = by_counts(wm, placements)
        found = view(placements, nodes)
    return None


# Swaps ``hand_by_turns`` tries (each a replay of the whole plan) per pod that cannot fit at its
# turn, and pods it tries them for, at most; and the most pods a plan may place for it to try
# (beyond, a dozen replays would eat the solve's time). Counts, not seconds: one worker and a
# seed give the same plan whatever the machine is doing.
SWAP_TRIES = 3
SWAP_PODS = 4
SWAP_MAX_PLACED = 1_000
# Pods on a kept victim's node whose units' trades are asked for, at most (each asks the decoder
# to walk its kind once: at 1,000 placed pods of one kind, 400 on the node cost 0.4 s a judgement).
TRADES_ASKED = 16


def hand_by_turns(wm: WindowModel, view: ReplayOf, placements: dict[str, int], nodes: set[int],
                  found: Any, victims: Sequence[Victim] = ()) -> tuple[dict[str, int], Any]:
    """``placements`` with pods of one class on each other's nodes, as long as a swap leaves the
    replay fewer faults (pods that cannot fit at their turn, and of ``victims``, the plan's, those
    it keeps), and its replay; ``placements`` itself (and ``found``) when no swap does.

    The model counts a class's pods per node, and the decode hands its places to them in queue
    order, node by node (or as a rule hands them out: spread keeps each turn within its skew).
    But the pods take their turns one after another, and which pod is where decides what each
    turn sees: an earlier pod's eviction can open a node to a later one through a rule that reads
    other nodes (a running pod's anti-affinity over a zone, evicted by the first pod on its own
    node); the support a victim gives the first pod, which the second then evicts; a victim a
    pod evicts only at the turn the skew makes it need to (the first pod of a spread class on the
    victim's node, not the second). The counts and victims are the same whichever pod goes
    where, so the plan is still the model's solution; only the hand-out follows the turns. A
    pod that cannot fit swaps with a later pod of its class; a pod on the node of a kept victim,
    with an earlier one. A pod of the class the plan leaves out may take the place instead (the
    first pod of a self-affine group may start only once an earlier pod's eviction has removed
    the last pod matching its terms). The classes the model decodes itself (gangs:
    ``_self_decoded``) are not swapped pod by pod; where their decoder lets its units trade
    places (``plugin_api.UnitTrades``: two gangs of a kind on each other's nodes), a unit with a
    pod that cannot fit trades with a later unit, a unit on the node of a kept victim with an
    earlier one: the decoder deals a kind's gangs in queue order, node by node, and the first
    gang may have to take the node whose victim opens the zone to the later ones. The plan
    then comes back by name (``PlanValues``, whose pods ``decode.extract`` reads as named)."""
    def faults(replay: Any, plan: dict[str, int]) -> tuple[list[str], list[int]]:
        stuck = [key for key, t in replay.turns.items() if not t.outcome_ok and key in plan]
        return stuck, sorted({v.node for v in victims if v.pod.key not in replay.evicted_by})

    out = placements
    stuck, kept = faults(found, out)
    if (not stuck and not kept) or len(placements) > SWAP_MAX_PLACED:
        return out, found
    turn = wm.ctx.turns()
    fixed = _self_decoded(wm)
    # every pod of the model's classes, placed or not (a place may pass to a pod left out)
    class_of = {p.key: cls.id for cls in wm.classes if cls.id not in fixed for p in cls.pods}
    members = sorted(class_of, key=turn.__getitem__)

    traders = [enc for enc in wm.encodings.values() if isinstance(enc, UnitTrades)] if fixed else []

    def trades(plan: dict[str, int], stuck: list[str], kept: list[int]) -> list[tuple[str, str, dict[str, int]]]:
        """The units' other deals worth a try (``UnitTrades``), as ``swaps`` picks its pairs: for
        the first stuck pod of a decoded class, deals with later pods; for the first
        ``TRADES_ASKED`` pods on the first kept victim's node, with earlier ones; (pod, the other
        pod, the plan), at most ``SWAP_TRIES`` distinct changes of each (the decoder makes only
        the plans taken)."""
        def taken(found: Iterator[tuple[str, str, Hashable, Callable[[], dict[str, int]]]]
                  ) -> list[tuple[str, str, dict[str, int]]]:
            out: list[tuple[str, str, dict[str, int]]] = []
            seen: set[Hashable] = set()
            for one, other, change, make in found:
                if change not in seen:
                    seen.add(change)
                    out.append((one, other, make()))
                    if len(out) == SWAP_TRIES:
                        break
            return out

        out: list[tuple[str, str, dict[str, int]]] = []
        decoded = [key for key in stuck if key not in class_of]
        if decoded:
            first = min(decoded, key=turn.__getitem__)
            out += taken((first, other, change, make) for trader in traders
                         for other, change, make in trader.trades(wm, plan, first) if turn[other] > turn[first])
        if kept:
            here = [key for key in sorted(plan, key=turn.__getitem__) if plan[key] == kept[0] and key not in class_of]
            out += taken((key, other, change, make) for key in here[:TRADES_ASKED] for trader in traders
                         for other, change, make in trader.trades(wm, plan, key) if turn[other] < turn[key])
        return out

    def swaps(plan: dict[str, int], stuck: list[str], kept: list[int]) -> list[tuple[str, str]]:
        """The pairs worth a try, for the first pod that cannot fit and the first node of a kept
        victim: (pod, the pod of its class it swaps with, or that takes its place when left
        out), ``SWAP_TRIES`` of each at most."""
        pairs: list[tuple[str, str]] = []
        swappable = [key for key in stuck if key in class_of]
        if swappable:
            first = min(swappable, key=turn.__getitem__)
            pairs += [(first, key) for key in members if plan.get(key) != plan[first] and turn[key] > turn[first]
                      and class_of[key] == class_of[first]][:SWAP_TRIES]
        if kept:
            node = kept[0]
            here_first = [here for here in sorted(plan, key=turn.__getitem__) if plan[here] == node and here in class_of]
            pairs += [(here, key) for here in here_first for key in members
                      if plan.get(key) != node and turn[key] < turn[here] and class_of[key] == class_of[here]][:SWAP_TRIES]
        return pairs

    for _ in range(SWAP_PODS):
        if not stuck and not kept:
            break
        tries: list[tuple[str, str, dict[str, int], str]] = []
        for one, other in swaps(out, stuck, kept):
            trial = dict(out)
            if other in out:
                trial[one], trial[other] = out[other], out[one]
            else:  # the place passes to a pod of the class the plan left out
                trial[other] = trial.pop(one)
            tries.append((one, other, trial, "of one class swap nodes"))
        if traders:
            tries += [(one, other, trial, "'s units trade places") for one, other, trial in trades(out, stuck, kept)]
        for one, other, trial, how in tries:
            again = view(trial, nodes)
            now = faults(again, trial)
            if len(now[0]) + len(now[1]) < len(stuck) + len(kept):
                log.debug("%s and %s%s: %d fault(s) of the replay before, %d after",
                          one, other, how, len(stuck) + len(kept), len(now[0]) + len(now[1]))
                out, found, (stuck, kept) = trial, again, now
                break
        else:
            break
    return out, found


def name_by_replay(ctx, sol: Solution, static, names: Optional[dict[str, str]] = None) -> None:
    """Name each of ``sol``'s victims for the pod at whose turn kube-scheduler's preemption evicts
    it (the model's decode names a pod of its level), and nominate that pod to its node. ``names``:
    what the solves' own replays found (``WindowModel.kube_names``); the plan is replayed again
    only for a victim they do not name."""
    if registry.POSTFILTER is None or not sol.victims:
        return
    names = names or {}
    if all(v.pod.key in names for v in sol.victims):
        sol.victims = [Victim(v.pod, v.node, names[v.pod.key]) for v in sol.victims]
    else:
        sol.victims = registry.POSTFILTER.kube_preemptors(ctx, sol.placements, sol.victims, static)
    for v in sol.victims:
        if v.preemptor in sol.placements:
            sol.nominations[v.preemptor] = sol.placements[v.preemptor]


def _differs(wm: WindowModel, ne: dict, var, k: int):
    """A literal that is true only when ``var`` ≠ ``k``."""
    key = (var.index, k)
    lit = ne.get(key)
    if lit is None:
        lit = ne[key] = wm.model.new_bool_var(f"ne[{var.index},{k}]")
        wm.model.add(var != k).only_enforce_if(lit)
    return lit

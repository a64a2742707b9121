"""Reading a plan off a solved model: placements from the counts x[c, n], victims with the pod each
is evicted for (``extract``), and greedy's placements standing in for a component the solve found
nothing for (``take_from_greedy``).

The engine calls no plugin by name here: an encoding the window model holds that decodes some
classes itself (gang kinds: whole gangs) declares it (``plugin_api.PlacementDecoder``), and one that
has a say in a victim's preemptor (inter-pod affinity) declares that (``plugin_api.PreemptorNamer``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Optional

from ..greedy import GreedyResult
from ..info import PodInfo
from ..plugin_api import PlacementDecoder, PreemptorNamer, Values, Victim
from ..plugins.registry import hand_out, may_preempt
from .model import WindowModel
from .outcome import Solution


def extract(wm: WindowModel, values: Values, sol: Solution) -> None:
    """Add the plan ``values`` (a solved CP-SAT solver, or a hint read as a plan) gives ``wm``'s
    classes to ``sol``."""
    counts: dict[int, list[tuple[int, int]]] = {}
    for (c, n), var in wm.x.items():
        k = values.value(var)
        if k:
            counts.setdefault(c, []).append((n, k))
    encodings = list(wm.encodings.values())
    decoders = [enc for enc in encodings if isinstance(enc, PlacementDecoder)]
    decoded: set[int] = set()
    for dec in decoders:
        decoded |= dec.decoded_classes()
    placed_on: dict[int, list] = {}
    # A plan read as values (``kube_victims.PlanValues``, a repaired plan) knows its pods by name:
    # the counts would hand a class's places to its first pods, and its victims are named for the
    # pods it keeps.
    by_name: Optional[Mapping[str, int]] = getattr(values, "pod_nodes", None)
    for cls in wm.classes:
        if cls.id in decoded:
            continue
        if by_name is not None:
            for pod in cls.pods:
                if pod.key in by_name:
                    sol.placements[pod.key] = by_name[pod.key]
                    placed_on.setdefault(by_name[pod.key], []).append(pod)
            continue
        # Places go to the class's pods in queue order, node by node unless a rule hands them
        # out its own way (``Plugin.hand_out``: spread keeps each pod's turn within its skew).
        for pod, n in _handed(wm, cls, counts.get(cls.id, [])):
            sol.placements[pod.key] = n
            placed_on.setdefault(n, []).append(pod)
    for dec in decoders:
        # (a plan read as values names the decoded pods too: its units may have traded places,
        # ``kube_victims.hand_by_turns``, which the counts would deal back)
        mine = dec.decoded_classes()
        named = None if by_name is None else {p.key: by_name[p.key] for cls in wm.classes
                                              if cls.id in mine for p in cls.pods if p.key in by_name}
        for key, n in (dec.decode(wm, counts) if named is None else named).items():
            sol.placements[key] = n
            placed_on.setdefault(n, []).append(wm.ctx.pod(key))
    namers = [enc for enc in encodings if isinstance(enc, PreemptorNamer)]
    for key, var in wm.evict.items():
        if values.value(var):
            victim, n = wm.evict_pod[key]
            level = next(lv for lv, lam in wm.evict_level[key].items() if values.value(lam))
            preemptors = [p for p in placed_on.get(n, []) if p.priority == level and may_preempt(p, victim)]
            for namer in namers:
                preemptors = namer.narrow(victim, preemptors, values, wm.class_of)
            preemptor = min(preemptors, key=lambda p: (tuple(namer.rank(p, victim) for namer in namers), p.key))
            sol.victims.append(Victim(victim, n, preemptor.key))
            sol.nominations[preemptor.key] = n


def by_counts(wm: WindowModel, placements: Mapping[str, int]) -> dict[str, int]:
    """``placements`` (the model's own classes' pods) as the model's counts decode them: each
    class's places handed to its first pods in queue order, as ``extract`` hands them. A plan
    whose kept pods of a class are not its first ones (a repair took out a pod that could not fit
    at its turn) is read by the model as if they were: the rules that lean on the order of a
    class's pods (a victim's support for the pods placed before its preemptor) hold only then."""
    per_class: dict[int, dict[int, int]] = {}
    for key, n in placements.items():
        nodes = per_class.setdefault(wm.class_of(wm.ctx.window_pod(key)), {})
        nodes[n] = nodes.get(n, 0) + 1
    return {pod.key: n for cls in wm.classes for pod, n in _handed(wm, cls, per_class.get(cls.id, {}).items())}


def _handed(wm: WindowModel, cls, counts) -> Iterable[tuple[PodInfo, int]]:
    """Each of ``cls``'s places (``counts``: node, pods) with the pod it goes to: its first pods in
    queue order, node by node unless a rule hands them out its own way (``Plugin.hand_out``)."""
    return zip(cls.pods, hand_out(wm.ctx, wm.static, cls.pods, sorted(counts)))


def take_from_greedy(wm: WindowModel, greedy: GreedyResult, ctx, sol: Solution) -> None:
    """Greedy's placements, victims and nominations for ``wm``'s classes (components share no
    node and no rule, so greedy's plan for one combines with the solver's for the others)."""
    classes = {c.id for c in wm.classes}
    members = {p.key for c in wm.classes for p in c.pods}
    for key, node in greedy.placements.items():
        if wm.class_of(ctx.pod(key)) in classes:
            sol.placements[key] = node
    for victim in greedy.victims:
        if victim.preemptor in members:
            sol.victims.append(victim)
    for key, node in greedy.nominations.items():
        if key in members:
            sol.nominations[key] = node


def packing_value(wm: WindowModel) -> int:
    """The packing hint's placement value, or -1 when the hint was not the packing."""
    return wm.hint_solution.placement_value if wm.hint_solution is not None else -1


def full_value(wm: WindowModel, weights: dict[int, int]) -> int:
    """The placement value of every pod of the component placed."""
    return sum(weights[c.rep.priority] * c.size for c in wm.classes)


def placement_value(wm: WindowModel, values: Values) -> int:
    return sum(coeff * values.value(var) for var, coeff in wm.level("placement").terms)

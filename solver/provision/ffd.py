"""The baseline: first-fit-decreasing over the cheapest shape that fits, what cluster
autoscalers' expanders approximate. Pods largest first (cpu, then memory); each goes to the
first existing node, then the first node already added, with room and allowed for it; else a
new node of the cheapest shape it may go to (fewest of the shape's room wasted breaks a tie), below
its maxCount and its file entry's over all zones.
A gang that must share a domain keeps the domain of its first pod placed. Classes that support
others' required pod affinity go before them (``support``'s levels), and a pod needing that
support goes only where a supporting pod already is in its domain: it opens no node of its own
on a hostname key (nor, once its first pod is in, a class that starts from its own first pod).
So each supporting pod, once placed, takes the pods it supports into its bin while there is room."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Optional

from .problem import PODS, PodClass, Problem, need
from .shapes import entry_limits
from .support import backed, domain


@dataclass
class Bins:
    """Where pods went: ``load[b]`` per bin (existing nodes first, then added ones in order)."""

    kind: list[tuple[str, int]]  # ("node", existing index) or ("shape", shape index)
    room: list[dict[str, int]]
    count: list[dict[int, int]]  # class id -> pods of it on the bin
    unplaced: list[str] = field(default_factory=list)

    def added(self) -> list[int]:
        return [i for k, i in self.kind if k == "shape"]


def _label(problem: Problem, kind: tuple[str, int], key: str) -> Optional[str]:
    if kind[0] == "node":
        return problem.existing_labels[kind[1]].get(key)
    return problem.shapes[kind[1]].node.metadata.labels.get(key)


def _fits(cls: PodClass, room: dict[str, int], where: tuple[str, int]) -> bool:
    """``room`` holds every resource and device kind of its bin ``where``."""
    return all(room[r] >= need(cls, r, where) for r in room)


def first_fit_decreasing(problem: Problem, *, per_pod: bool = False) -> Bins:
    """``per_pod`` False: the baseline, a new node of the cheapest shape that fits the pod.
    True: the shape cheapest per copy of the pod it holds (cost / how many fit), the model's
    second starting point (not the baseline)."""
    bins = Bins([("node", i) for i in range(len(problem.existing))], [dict(f) for f in problem.free],
                [{} for _ in problem.existing])
    opened = {s: 0 for s in range(len(problem.shapes))}
    domains: dict[str, str] = {}  # gang -> the domain its first pod took
    seeds: dict[int, tuple[tuple[str, int], int]] = {}  # class -> the bin its first pod started in
    label = partial(_label, problem)
    # (class, key) -> the domains of key holding a pod of the class (support's keys only)
    held: dict[tuple[int, str], set] = {}
    keys = sorted({k for sup in problem.support.values() for k in sup.keys})
    # class -> the classes it supports somewhere: their pods try its pod's bin right after it
    followers: dict[int, list[int]] = {}
    for cid, sup in sorted(problem.support.items()):
        for s in sorted({s for by in sup.by.values() for s in by}):
            followers.setdefault(s, []).append(cid)
    left = {c.id: list(c.keys) for c in problem.classes}

    def near(cid: int, key: str, d) -> bool:
        return d in held.get((cid, key), ())

    def allowed(cls: PodClass, kind: tuple[str, int], place: Optional[int] = None) -> bool:
        if kind[1] not in (cls.existing if kind[0] == "node" else cls.shapes):
            return False
        gang = cls.gang or ""
        topo = problem.gang_keys.get(gang) if gang else None
        if topo is not None and gang in domains and _label(problem, kind, topo) != domains[gang]:
            return False
        if not backed(problem.support.get(cls.id), kind, place, label, near, seeds.get(cls.id)):
            return False
        return not _domain_clash(problem, bins, cls.id, kind)

    def takes(cls: PodClass, b: int) -> bool:
        kind = bins.kind[b]
        return (allowed(cls, kind, b) and _fits(cls, bins.room[b], kind)
                and not (cls.one_per_node and bins.count[b].get(cls.id))
                and not any(_apart(problem, cls.id, other) for other in bins.count[b]))

    def put(cls: PodClass, target: int) -> None:
        left[cls.id].pop(0)
        where = bins.kind[target]
        for r in bins.room[target]:
            bins.room[target][r] -= need(cls, r, where)
        bins.count[target][cls.id] = bins.count[target].get(cls.id, 0) + 1
        for key in keys:
            d = domain(label, where, target, key)
            if d is not None:
                held.setdefault((cls.id, key), set()).add(d)
        sup = problem.support.get(cls.id)
        if sup is not None and sup.seed and cls.id not in seeds and where in sup.by:
            seeds[cls.id] = (where, target)
        gang = cls.gang or ""
        topo = problem.gang_keys.get(gang) if gang else None
        if topo is not None and gang not in domains:
            domains[gang] = _label(problem, bins.kind[target], topo) or ""
        # Pods it supports go beside it now, while its bin has room (left for later, a pod
        # needing support on its node would find every supporter's node full).
        for f in followers.get(cls.id, ()):
            other = problem.classes[f]
            while left[f] and takes(other, target):
                put(other, target)

    # Supporting classes before the classes they support (``support``: lower levels first).
    order = sorted(problem.classes, key=lambda c: (_level(problem, c.id), -c.requests.get("cpu", 0),
                                                   -c.requests.get("memory", 0), c.id))
    for cls in order:
        while left[cls.id]:
            target = next((b for b in range(len(bins.kind)) if takes(cls, b)), None)
            if target is None:
                target = _open(problem, bins, cls, opened, partial(allowed, cls), per_pod)
            if target is None:
                bins.unplaced.append(left[cls.id].pop(0))
                continue
            put(cls, target)
    return bins


def _level(problem: Problem, cid: int) -> int:
    sup = problem.support.get(cid)
    return 0 if sup is None else sup.level


def _domain_clash(problem: Problem, bins: Bins, cid: int, kind: tuple[str, int]) -> bool:
    """A pod of class ``cid`` on a bin like ``kind`` would share a domain of a wider key with a
    class it must stay apart from there (or, repelling its own, with a pod of its class)."""
    for (a, c), keys in problem.apart_in.items():
        if cid not in (a, c):
            continue
        other = c if a == cid else a
        for key in keys:
            value = _label(problem, kind, key)
            if value is not None and any(count.get(other) and _label(problem, k, key) == value
                                         for k, count in zip(bins.kind, bins.count)):
                return True
    return False


def _apart(problem: Problem, a: int, b: int) -> bool:
    return (min(a, b), max(a, b)) in problem.apart


def _copies(cls: PodClass, room: dict[str, int], where: tuple[str, int]) -> int:
    most = min((room[r] // need(cls, r, where) for r in room if need(cls, r, where)), default=1)
    return min(most, 1) if cls.one_per_node else most


def _full(problem: Problem, opened: dict[int, int], s: int) -> bool:
    """No more nodes of shape ``s``: its own maxCount (a zone's count), or its file entry's over
    all its zones, is reached."""
    if opened[s] >= problem.shapes[s].max_count:
        return True
    return any(s in members and sum(opened[t] for t in members) >= most
               for members, most in entry_limits(problem.shapes))


def _open(problem: Problem, bins: Bins, cls: PodClass, opened: dict[int, int], allowed,
          per_pod: bool) -> Optional[int]:
    best: Optional[tuple[float, int, int]] = None
    for s in cls.shapes:
        shape = problem.shapes[s]
        room = problem.room(("shape", s))
        if _full(problem, opened, s) or not allowed(("shape", s)) or not _fits(cls, room, ("shape", s)):
            continue
        waste = sum(room[r] - need(cls, r, ("shape", s)) for r in problem.resources if r != PODS)
        price = shape.cost / max(1, _copies(cls, room, ("shape", s))) if per_pod else shape.cost
        if best is None or (price, waste, s) < best:
            best = (price, waste, s)
    if best is None:
        return None
    s = best[2]
    opened[s] += 1
    shape = problem.shapes[s]
    bins.kind.append(("shape", s))
    bins.room.append(problem.room(("shape", s)))
    bins.count.append({})
    return len(bins.kind) - 1

"""Decoding a gang kind: which of its interchangeable gangs run and where their pods go, from the
pods per class and node the model placed. Below both the encoding (which decodes through it)
and Permit (which encodes the kinds)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence

from ...info import PodInfo
from .group import Gang, GangKind


def decode(kind: GangKind, counts: dict[int, list[tuple[int, int]]], domain_ids=None,
           preferred_ids: tuple = ()) -> dict[str, int]:
    """Pod key -> node for a kind whose model classes place ``counts`` (class id -> (node, pods)).

    The gangs that run are the first in queue order (priority, then creation, as the queue and
    greedy take them), as few as hold the pods; the pods go to them round robin, so each
    running gang gets at least ``need`` members. A kind with a topology key is decoded domain by
    domain (``domain_ids``: per node, its domain under the key), each domain's pods going to
    gangs of its own, so every gang lies in one domain."""
    if kind.topology_key is None:
        return _deal(kind, kind.gangs, counts, preferred_ids)
    assert domain_ids is not None, "a topology kind is decoded with its nodes' domains"
    out: dict[str, int] = {}
    first = 0
    for _, part in sorted(_by_domain(counts, domain_ids).items()):
        runs = kind.runs_needed(_totals(kind, part))
        out.update(_deal(kind, kind.gangs[first:first + runs], part, preferred_ids))
        first += runs
    return out


def _by_domain(counts: dict[int, list[tuple[int, int]]], domain_ids) -> dict[int, dict[int, list[tuple[int, int]]]]:
    """``counts`` (class id -> (node, pods)) split by the domain of each node."""
    parts: dict[int, dict[int, list[tuple[int, int]]]] = defaultdict(lambda: defaultdict(list))
    for c, entries in counts.items():
        for n, k in entries:
            parts[int(domain_ids[n])][c].append((n, k))
    return parts


def _totals(kind: GangKind, counts: dict[int, list[tuple[int, int]]]) -> dict[int, int]:
    """Pods placed per model class of the kind."""
    return {c.id: sum(k for _, k in counts.get(c.id, ())) for c in kind.classes}


def _deal(kind: GangKind, gangs: list[Gang], counts, domain_ids: tuple = ()) -> dict[str, int]:
    """The pods of ``counts`` dealt to as few of ``gangs`` (from the first) as hold them.

    How many pods of each class a gang gets is dealt round robin, one pod at a time over the
    running gangs (so each reaches ``need``); which nodes it gets, in node order: the first gang
    takes its pods of a class from the first nodes, the next from the ones after, and so on.
    Nodes are ordered by their domains under the kind's preferred keys (``domain_ids``: per key,
    per node), so a gang's members share as few domains as the counts allow."""
    totals = _totals(kind, counts)
    runs = kind.runs_needed(totals)
    if runs == 0:
        return {}
    free = [{c.id: [p for p in gang.members if kind.model_of[p.class_id] == c.id] for c in kind.classes}
            for gang in gangs[:runs]]
    share = [{c.id: 0 for c in kind.classes} for _ in range(runs)]
    turn = 0
    for cls in kind.classes:
        for _ in range(totals[cls.id]):
            while share[turn % runs][cls.id] == len(free[turn % runs][cls.id]):  # never loops when feasible
                turn += 1
            share[turn % runs][cls.id] += 1
            turn += 1
    out: dict[str, int] = {}
    for cls in kind.classes:
        slots = [n for n, k in sorted(counts.get(cls.id, ()), key=lambda e: (*(int(ids[e[0]]) for ids in domain_ids), e[0]))
                 for _ in range(k)]
        at = 0
        for i in range(runs):
            for pod in free[i][cls.id][: share[i][cls.id]]:
                out[pod.key] = slots[at]
                at += 1
    return out


def domain_runs(kind: GangKind, counts: dict[int, list[tuple[int, int]]], domain_ids, placements=None) -> dict[int, int]:
    """Per domain, a topology kind's gangs that run there: those of ``placements`` (pod key ->
    node) by the domain of their members, else the fewest that hold the pods ``counts`` put there."""
    if placements is not None:
        runs: dict[int, int] = defaultdict(int)
        for gang in kind.gangs:
            node = next((placements[p.key] for p in gang.members if p.key in placements), None)
            if node is not None:
                runs[int(domain_ids[node])] += 1
        return dict(runs)
    return {d: kind.runs_needed(_totals(kind, part)) for d, part in _by_domain(counts, domain_ids).items()}


def trades(kind: GangKind, placements: Mapping[str, int], key: str, domain_ids: Sequence = ()
           ) -> Iterator[tuple[str, Hashable, Callable[[], dict[str, int]]]]:
    """Other deals of the same counts for the gang of pod ``key``, lazily, each as (the other pod
    whose turn decides whether it may help, what changes — the same for the same change asked
    from another pod —, a function making the whole plan), in this order:

    * the gang trades places with another running gang of ``kind`` (queue order): the two gangs'
      pods of each model class on each other's nodes (the other pod: its first member);
    * pod ``key`` swaps nodes with a placed pod of its model class, of its own gang or another
      running one (the other pod: that one), only between nodes that share their domain under
      each of the kind's topology and preferred keys (``domain_ids``: per key, per node), so every
      gang stays in one domain and touches the domains it touched;
    * the gang's places go to a gang the plan leaves out, which is left out in its stead (the
      other pod: that gang's first member).

    The counts per class and node stay as they are, and every running gang holds a share the
    deal gave one: the plan is one the model's counts decode to. Nothing when ``key`` is no
    placed member of the kind. Plans are made only when asked for: a caller that takes a few
    pays for a few."""
    mine = next((g for g in kind.gangs if any(p.key == key for p in g.members)), None)
    if mine is None or key not in placements:
        return
    model_of = kind.model_of

    def nodes_of(gang: Gang) -> dict[int, list[int]]:
        out: dict[int, list[int]] = defaultdict(list)
        for p in gang.members:
            if p.key in placements:
                out[model_of[p.class_id]].append(placements[p.key])
        return out

    def traded(other: Gang) -> Callable[[], dict[str, int]]:
        def make() -> dict[str, int]:
            plan = dict(placements)
            for gang in (mine, other):
                for p in gang.members:
                    plan.pop(p.key, None)
            for gang, nodes in ((mine, nodes_of(other)), (other, nodes_of(mine))):
                for c in kind.classes:
                    members = [p for p in gang.members if model_of[p.class_id] == c.id]
                    plan.update((p.key, n) for p, n in zip(members, nodes.get(c.id, ())))
            return plan
        return make

    def swapped(pod: PodInfo, at: int) -> Callable[[], dict[str, int]]:
        def make() -> dict[str, int]:
            plan = dict(placements)
            plan[key], plan[pod.key] = at, node
            return plan
        return make

    running = [g for g in kind.gangs if any(p.key in placements for p in g.members)]
    here = nodes_of(mine)
    for other in running:
        if other is not mine and nodes_of(other) != here:
            yield other.members[0].key, ("trade", frozenset((mine.key, other.key))), traded(other)
    node = placements[key]
    cls = model_of[next(p.class_id for p in mine.members if p.key == key)]
    lone = sum(1 for p in mine.members if p.key in placements) == 1
    for other in [mine, *(g for g in running if g is not mine)]:
        if lone and other is not mine and sum(1 for p in other.members if p.key in placements) == 1:
            continue  # one placed pod each: the swap is the gangs' trade above
        for pod in other.members:
            at = placements.get(pod.key)
            if at is None or at == node or pod.key == key or model_of[pod.class_id] != cls:
                continue
            if any(int(ids[at]) != int(ids[node]) for ids in domain_ids):
                continue
            yield pod.key, ("swap", frozenset((key, pod.key))), swapped(pod, at)
    for other in kind.gangs:
        if other not in running:
            yield other.members[0].key, ("trade", frozenset((mine.key, other.key))), traded(other)

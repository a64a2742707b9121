"""Required pod affinity that pending pods meet: the bins a class may go to only beside support.

Step 2 (``problem``) filters one pod of each class against the running pods. A class with
required pod affinity that nothing running meets on a new node fails there with
kube-scheduler's "didn't match pod affinity rules", yet it may go there once a pod of another
pending class that matches all its terms is in the node's domain of each term's key
(kube-scheduler counts support per term from pods matching every term of the incoming pod). A
shape is kept for the class *beside support* when every filter failing on its probe node passes
in its dry run with one pod of a supporting class added (``Cycle.on_node``) there or on a sibling
of the node (another node of its shape: zone affinity to pods its hostname anti-affinity keeps off
its node), every other passing as it is. Existing nodes are not opened so: a class is on an existing node only where the
running pods let it be.

A class that matches its own terms where nothing running does passes the filter everywhere:
kube-scheduler lets its first pod in anywhere (the escape), and every later pod needs that first
pod, or another match, in its domains. So each of its bins is beside support too, its own
*seed*: one bin at most, holding one of its pods; its other pods in that bin's domains. Two such
classes may not both seed when one matches the other's terms and came first in class order (a
first pod must come before every pod matching its terms, so seeds must admit an order); the
later one is supported by the earlier.

Support is never circular: classes get a *level*, 0 for those placed without pending support
(and seeds), and a class is supported only by classes of lower levels, so an order exists in
which every supporting pod comes before the pods it supports (kube-scheduler's queue retries the
others once it is placed). The model (``constrain``) and first-fit-decreasing (``backed``) read
the same ``Support``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Hashable, Optional

from ortools.sat.python import cp_model

from ..filtering import Cycle
from ..info import PodInfo
from ..plugins.shared.all_terms import AllTerms
from ..state import ClusterState
from .shapes import HOSTNAME

Bin = tuple[str, int]  # ("node", existing index) or ("shape", shape index)


@dataclass(frozen=True)
class Support:
    """How a class whose required pod affinity pending pods may meet goes to its bins."""

    keys: tuple[str, ...]  # the topology keys of its required affinity terms, each once
    # bin it goes to only beside support -> the classes whose pods support it there (by id)
    by: dict[Bin, tuple[int, ...]]
    seed: bool  # its first pod may start from nothing, in one bin (the escape)
    level: int
    # bin -> the keys whose domain there has no running pod meeting the terms (only those need
    # a pending supporter); a bin not listed needs one on every key
    need: dict[Bin, tuple[str, ...]]

    def keys_at(self, where: Bin) -> tuple[str, ...]:
        return self.need.get(where, self.keys)


@dataclass
class Filtered:
    """One class's filter cycle on the cluster with a probe node per shape, and where it passed."""

    id: int
    rep: PodInfo
    cycle: Cycle
    ok: list[int]  # node indexes (existing nodes, then one probe per shape)
    by: dict[int, tuple[int, ...]] = field(default_factory=dict)  # node -> supporting class ids


def _may_start(rep: PodInfo, state: ClusterState) -> bool:
    """The escape: ``rep`` matches its own terms and no running pod on a node with one of the
    terms' keys matches them all (the filter's "no pod anywhere matches all terms")."""
    if not AllTerms(rep.affinity).matches(rep):
        return False
    per_node = state.match_counts(AllTerms(rep.affinity))
    return not any(per_node[state.domains(t.topology_key)[0] >= 0].any() for t in rep.affinity)


def _fixed_by(run: Filtered, node: int, supporter: PodInfo) -> bool:
    """The class passes every filter on ``node`` once a pod like ``supporter`` is there, or on a
    sibling of it (another node of its shape: every domain but the hostname's): each failing
    filter in its dry run with it added, the others as they are. Where the supporter may not
    share the node (the class's hostname anti-affinity to it), the model keeps them apart
    (``problem.apart``) and its support constraint finds it in the domain (``constrain``)."""
    return any(_passes_with(run, node, supporter, beside) for beside in (False, True))


def _passes_with(run: Filtered, node: int, supporter: PodInfo, beside: bool) -> bool:
    cycle = run.cycle
    if cycle.failed is not None or not cycle.static.statuses(run.rep)[node].ok:
        return False
    info = cycle.static.nodes[node]
    for f in cycle.filters:
        if f.status(info).ok:
            continue
        dry = f.on_node(node)
        if dry is None:
            return False
        # a dry run without ``add_beside`` reads the node alone: the sibling changes nothing there
        add = getattr(dry, "add_beside", None) if beside else dry.add_pod
        if add is None:
            return False
        add(supporter)
        if not dry.status().ok:
            return False
    return True


def find(runs: list[Filtered], state: ClusterState, probes: list[int],
         first: dict[int, tuple]) -> dict[int, Support]:
    """Per class id, its ``Support`` (bins as node indexes of the cycle: ``("node", n)``); each
    run's ``by`` set to the nodes it gains beside support. ``probes``: the probe nodes;
    ``first``: per class id, kube-scheduler's queue key of its first pod."""
    seeds: list[Filtered] = []
    dependent: list[Filtered] = []
    escaping: set[int] = set()
    for run in runs:
        if not run.rep.affinity:
            continue
        if _may_start(run.rep, state):
            escaping.add(run.id)
            # A pod kube-scheduler's queue takes before this class's first pod and matching its
            # terms closes the escape (it is then that pod's support); so does an earlier seed.
            # Only a class that may go somewhere on its own is placed before it: one that never
            # runs, or that waits for pending support, leaves the escape open.
            before = [r for r in runs if r.id != run.id and first[r.id] < first[run.id] and r.ok]
            if any(AllTerms(run.rep.affinity).matches(d.rep) for d in seeds + before):
                dependent.append(run)
            elif run.ok:
                seeds.append(run)
        elif any(n not in run.ok for n in probes):
            dependent.append(run)
    waiting = {d.id for d in dependent}
    # A seed's later pods go beside its first pod, or beside a pod of any class matching its
    # terms that needs no pending support itself (kube-scheduler retries them once it is bound).
    out = {s.id: Support(_keys(s.rep), {("node", n): _helpers(s, runs, waiting | escaping) for n in s.ok},
                         True, 0, {}) for s in seeds}
    # Classes that may support others: every class placed without pending support, and each
    # dependent once it has a bin. A dependent takes supporters until none is added (one that
    # could take it only later would otherwise be missed), never one it supports itself.
    able = {r.id for r in runs if r.ok and r.id not in waiting}
    by: dict[int, dict[int, set[int]]] = {d.id: {} for d in dependent}
    by_id = {r.id: r for r in runs}
    need: dict[tuple[int, int], tuple[str, ...]] = {}  # (class, node) -> keys pending pods must meet
    fixed: dict[tuple[int, int, int], bool] = {}  # _fixed_by, once per (class, node, supporter)
    for run in dependent:
        if run.id in escaping:
            for n in run.ok:
                need[run.id, n] = _keys(run.rep)
        else:
            for n in probes:
                if n not in run.ok:
                    need[run.id, n] = _pending_keys(run.rep, state, n)
    # per dependent, the classes whose pods match all its terms (what may support it)
    matching = {d.id: [r.id for r in runs if r.id != d.id and AllTerms(d.rep.affinity).matches(r.rep)]
                for d in dependent}
    changed = True
    while changed:
        changed = False
        for run in dependent:
            supporters = [s for s in matching[run.id] if s in able and run.id not in _under(s, by)]
            nodes = run.ok if run.id in escaping else [n for n in probes if n not in run.ok]
            for n in nodes:
                mine = by[run.id].setdefault(n, set())
                for s in supporters:
                    # an escaping dependent's bins are its ``by`` alone (a seed's are all it passed)
                    ok = [] if s in escaping and s in waiting else by_id[s].ok
                    if s in mine or not _may_be_near(ok, by.get(s, {}), need[run.id, n], state, n):
                        continue
                    if run.id not in escaping:
                        if (run.id, n, s) not in fixed:
                            fixed[run.id, n, s] = _fixed_by(run, n, by_id[s].rep)
                        if not fixed[run.id, n, s]:
                            continue
                    mine.add(s)
                    changed = True
                if not mine:
                    del by[run.id][n]
            if run.id not in able and (by[run.id] or (run.ok and run.id not in escaping)):
                able.add(run.id)
                changed = True
    levels: dict[int, int] = {}
    for run in dependent:
        if run.id not in able:
            continue
        run.by = {n: tuple(sorted(b)) for n, b in by[run.id].items()}
        out[run.id] = Support(_keys(run.rep), {("node", n): b for n, b in run.by.items()}, False,
                              _level(run.id, by, levels), {("node", n): need[run.id, n] for n in run.by})
    for run in dependent:
        if run.id in escaping:
            run.ok = []  # it passed only by the escape, which is a seed's: its bins are ``by``'s alone
    return out


def _helpers(seed: Filtered, runs: list[Filtered], resting: set[int]) -> tuple[int, ...]:
    """The classes whose pods support a seeding class's later pods beside its first pod's: each
    matches all its terms, may go somewhere on its own, and rests on no pending support (so no
    support is circular)."""
    return tuple(sorted(r.id for r in runs if r.id != seed.id and r.ok and r.id not in resting
                        and AllTerms(seed.rep.affinity).matches(r.rep)))


def _under(cid: int, by: dict[int, dict[int, set[int]]]) -> set[int]:
    """The classes ``cid`` rests on, directly or through others (its support, transitively)."""
    seen: set[int] = set()
    todo = [cid]
    while todo:
        for s in set().union(*by.get(todo.pop(), {}).values()) - seen:
            seen.add(s)
            todo.append(s)
    return seen


def _level(cid: int, by: dict[int, dict[int, set[int]]], memo: dict[int, int]) -> int:
    """0 for a class no pending pod supports; else one more than its supporters' highest."""
    if cid not in memo:
        below = set().union(*by.get(cid, {}).values())
        memo[cid] = 1 + max((_level(s, by, memo) for s in below), default=-1)
    return memo[cid]


def _pending_keys(rep: PodInfo, state: ClusterState, node: int) -> tuple[str, ...]:
    """The keys of ``rep``'s terms whose domain holding ``node`` has no running pod matching
    all its terms (kube-scheduler counts support per term: running pods meet the others)."""
    per_node = state.match_counts(AllTerms(rep.affinity))
    out = []
    for key in _keys(rep):
        ids = state.domains(key)[0]
        if ids[node] < 0 or not per_node[ids == ids[node]].any():
            out.append(key)
    return tuple(out)


def _may_be_near(ok: list[int], by: dict[int, set[int]], keys: tuple[str, ...],
                  state: ClusterState, node: int) -> bool:
    """A pod of a class that passes on nodes ``ok`` and goes beside support to ``by`` may go,
    for each of ``keys``, somewhere in ``node``'s domain of it."""
    where = list(ok) + list(by)
    for key in keys:
        ids = state.domains(key)[0]
        if ids[node] < 0 or not any(ids[m] == ids[node] for m in where):
            return False
    return True


def _keys(rep: PodInfo) -> tuple[str, ...]:
    return tuple(dict.fromkeys(t.topology_key for t in rep.affinity))


# -- where a bin's domain is, for the model and for first-fit-decreasing ------------------------

Label = Callable[[Bin, str], Optional[str]]


def domain(label: Label, where: Bin, place: Hashable, key: str) -> Optional[Hashable]:
    """The domain of key ``key`` a bin is in: a new node is its own hostname (``place`` names
    it), else its label's value; None when the node lacks the label."""
    if key == HOSTNAME and where[0] == "shape":
        return ("new", place)
    value = label(where, key)
    return None if value is None else ("label", value)


def constrain(model: cp_model.CpModel, supports: dict[int, Support], bins: list[tuple[str, int, int]],
              x: dict, label: Label, pods: dict[int, int]) -> None:
    """A class beside support has its pods in a bin only when, for each key its terms need met
    by pending pods there, the bin's domain holds a pod of a class supporting it there or its
    seed; a seeding class seeds one bin at most (``seed[c, b]``), holding one of its pods.
    ``pods``: per class, how many pods it has."""
    members: dict[tuple[str, Hashable], list] = {}  # (key, domain) -> the bins in it
    for key in sorted({k for sup in supports.values() for k in sup.keys}):
        for b in bins:
            d = domain(label, (b[0], b[1]), b, key)
            if d is not None:
                members.setdefault((key, d), []).append(b)
    for cid, sup in supports.items():
        if not sup.by:
            continue
        # seed[c, b]: the first pod of class c, let in with nothing matching, is in bin b.
        seed = {b: model.new_bool_var(f"seed[{cid},{b}]") for b in bins
                if sup.seed and (cid, b) in x and (b[0], b[1]) in sup.by}
        if seed:
            model.add_at_most_one(seed.values())
            for b, first in seed.items():
                model.add(x[cid, b] >= 1).only_enforce_if(first)
        groups: dict[tuple, list] = {}  # (key, domain, supporters) -> the class's bins there
        for b in bins:
            where = (b[0], b[1])
            if (cid, b) not in x or where not in sup.by:
                continue
            for key in sup.keys_at(where):
                d = domain(label, where, b, key)
                if d is None:
                    model.add(x[cid, b] == 0)
                    break
                groups.setdefault((key, d, sup.by[where]), []).append(b)
        # Per group, the class's pods there only with a supporting pod (or its seed) in the domain.
        for (key, d, by), held in sorted(groups.items(), key=lambda g: str(g[0])):
            there = [x[s, b] for b in members[key, d] for s in by if (s, b) in x]
            there += [seed[b] for b in members[key, d] if b in seed]
            if there:
                model.add(sum(x[cid, b] for b in held) <= pods[cid] * sum(there))
            else:
                for b in held:
                    model.add(x[cid, b] == 0)


def backed(sup: Optional[Support], where: Bin, place: Optional[int], label: Label,
           near: Callable[[int, str, Hashable], bool], seed: Optional[tuple[Bin, int]]) -> bool:
    """First-fit-decreasing's check: a pod of the class may go to bin ``where`` (``place``: its
    index among the bins, None for a node not yet added) — support of its own there, or a
    supporting pod already placed in the bin's domain of every key pending pods must meet, or
    it is the seed's. ``near(s, key, d)``: a pod of class s is in domain d of key; ``seed``: the
    class's seed bin so far."""
    if sup is None or where not in sup.by:
        return True
    if sup.seed and seed is None:
        return True  # this pod starts the class
    for key in sup.keys_at(where):
        d = domain(label, where, place, key)
        if d is None:
            return False
        if not (any(near(s, key, d) for s in sup.by[where])
                or (seed is not None and domain(label, seed[0], seed[1], key) == d)):
            return False
    return True

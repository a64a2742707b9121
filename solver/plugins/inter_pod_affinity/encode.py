"""InterPodAffinity as CP-SAT: required anti-affinity in the final state, required affinity met
by a running pod, a placed pod of the window, or the self-affinity seed a group's first pod is
allowed; the victims' support and the preemptor a plan names."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Optional

from dataclasses import dataclass, field

import networkx as nx
import numpy as np
from ortools.sat.python import cp_model

from ...info import PodInfo
from ...state import ClusterState, PodMatcher
from .book import term_book
from .filter import NAME, AllTerms
from ..shared.host_ports import ports_conflict
from ..shared.resource_fit import fits
from ..shared.preemption_rule import may_preempt

if TYPE_CHECKING:
    from ...plugin_api import EncodeModel as WindowModel

# The longest chain of kin steps within a support component the model states (``_Anchoring``):
# each step costs one more literal per class, term and domain of the component, and the search
# pays more: a cycle of three deployments and a self-affine one on 200 nodes (hostname) proves
# its optimum in 0.2 s with one or two steps and not within 10 s with three.
MAX_KIN_STEPS = 2


@dataclass
class AffinityEncoding:
    """InterPodAffinity's part of a window model."""

    # Self-affinity seed per (terms, domain), shared by the classes of one affinity group.
    seeds: dict[tuple, cp_model.IntVar] = field(default_factory=dict)
    # Per affinity terms, the eviction literals a seed of them needs.
    seed_clearing: dict[tuple, list] = field(default_factory=dict)
    # Per affinity terms, each running match's domain and the literals naming, as its preemptor,
    # a class that matches the terms too (``_closing_preemptors``).
    seed_closing: dict[tuple, list[tuple[int, list]]] = field(default_factory=dict)
    # Per (running pod, class, key) whose affinity it may support, the literal "it supports that
    # class's pods in its domain" (it stays, or is evicted for another pod).
    support: dict[tuple[str, int, str], object] = field(default_factory=dict)
    # Per victim, the class the plan names its preemptor from (``named_preemptor``); decode reads it.
    preemptor_named: dict[str, dict[int, cp_model.IntVar]] = field(default_factory=dict)
    # (class, class) -> how many pods of the second come before every pod of the first in queue
    # order (``_ahead``).
    ahead: dict[tuple[int, int], int] = field(default_factory=dict)
    # Per (class, key, domain), one variable counting the class's pods there (``_domain_count``).
    counts: dict[tuple[int, str, int], cp_model.IntVar] = field(default_factory=dict)
    # (victim, class, class) -> its ``_evicted_after`` literal, made once.
    evicted_after: dict[tuple[str, int, int], Optional[cp_model.IntVar]] = field(default_factory=dict)

    # Decoding (``plugin_api.PreemptorNamer``): which placed pod a victim is named for.
    def narrow(self, victim: PodInfo, preemptors: list[PodInfo], values, class_of) -> list[PodInfo]:
        """The preemptors of the class the model chose (the victim supports every other pod's
        affinity: ``named_preemptor``); all of them when the model named none."""
        named = self.preemptor_named.get(victim.key)
        if not named:
            return preemptors
        chosen = {c for c, b in named.items() if values.value(b)}
        return [p for p in preemptors if class_of(p) in chosen] or preemptors

    def rank(self, pod: PodInfo, victim: PodInfo) -> bool:
        """A pod whose affinity the victim may support is named last: the victim supports every
        pod but its own preemptor (``leans_on``)."""
        return leans_on(pod, victim)

    def named(self, victim: PodInfo) -> dict[int, cp_model.IntVar]:
        """Per class, the literal "the plan names a pod of this class as ``victim``'s preemptor"
        (``named_preemptor``); empty when the model names none for it."""
        return self.preemptor_named.get(victim.key, {})


# Window semantics (DESIGN.md): in the final state no two pods violate a required anti-affinity
# term of either, and every window pod with required affinity has a matching pod other than
# itself in its domain — or is the one seed of its class where nothing matched before.


def _running_matching(state: ClusterState, matcher) -> list[tuple[PodInfo, int]]:
    return state.pods_matching(matcher)


def prune(pod: PodInfo, state: ClusterState, can_evict) -> np.ndarray:
    """Nodes the pod can never use in this window, whatever the window does: a topology key is
    missing, or a running pod that may not be evicted blocks the domain by anti-affinity."""
    ok = np.ones(len(state.nodes), dtype=bool)
    for term in pod.affinity:
        ok &= state.domains(term.topology_key)[0] >= 0
    for term in pod.anti_affinity:
        ids = state.domains(term.topology_key)[0]
        for other, node in _running_matching(state, PodMatcher.of_term(term)):
            if ids[node] >= 0 and not can_evict(other):
                ok &= ids != ids[node]
    book = term_book(state)
    for term in book.owners:
        if not term.matches(pod.namespace, pod.labels, pod.ns_labels):
            continue
        ids = state.domains(term.topology_key)[0]
        for other, node in book.owner_pods(state, term):
            if ids[node] >= 0 and not can_evict(other):
                ok &= ids != ids[node]
    return ok


def encode(wm: WindowModel) -> AffinityEncoding:
    """The rule's constraints; returns its encoding (returned even when empty: the decode asks
    it to name every victim's preemptor), which the engine keeps."""
    enc = AffinityEncoding()
    state, m = wm.state, wm.model
    book = term_book(state)
    classes = [c for c in wm.classes if wm.by_class.get(c.id)]
    anchoring = _Anchoring(wm, enc, classes, _support_components(wm, classes))
    for cls in classes:
        rep = cls.rep
        # The class's own anti-affinity terms: where it is present, nothing it matches may be.
        for t, term in enumerate(rep.anti_affinity):
            matched = [o for o in classes if term.matches(o.rep.namespace, o.rep.labels, o.rep.ns_labels)]
            running = _running_matching(state, PodMatcher.of_term(term))
            ids = state.domains(term.topology_key)[0]
            running_by_domain: dict[int, list] = {}
            for other, node in running:
                if ids[node] >= 0:
                    running_by_domain.setdefault(int(ids[node]), []).append(other)
            for d, own in wm.class_vars_by_domain(cls.id, term.topology_key).items():
                if cls in matched:
                    m.add(cp_model.LinearExpr.sum(own) <= 1)
                others = [v for o in matched if o is not cls for v in wm.class_vars_by_domain(o.id, term.topology_key).get(d, [])]
                blockers = [wm.evictable(p) for p in running_by_domain.get(d, [])]
                if not others and not blockers:
                    continue
                present = wm.new_presence(f"anti[{cls.id},{t},{d}]", own, cls.size)
                if others:
                    m.add(cp_model.LinearExpr.sum(others) == 0).only_enforce_if(present)
                for evict in blockers:
                    if evict is None:
                        m.add(present == 0)
                    else:
                        m.add_implication(present, evict)
        # Running pods' anti-affinity terms that match this class: their domains need them gone.
        for term in book.owners:
            if not term.matches(rep.namespace, rep.labels, rep.ns_labels):
                continue
            ids = state.domains(term.topology_key)[0]
            owners_by_domain: dict[int, list] = {}
            for other, node in book.owner_pods(state, term):
                if ids[node] >= 0:
                    owners_by_domain.setdefault(int(ids[node]), []).append(other)
            for d, own in wm.class_vars_by_domain(cls.id, term.topology_key).items():
                owners = owners_by_domain.get(d)
                if not owners:
                    continue
                present = wm.new_presence(f"xanti[{cls.id},{d}]", own, cls.size)
                for other in owners:
                    evict = wm.evictable(other)
                    if evict is None:
                        m.add(present == 0)
                    else:
                        m.add_implication(present, evict)
        if rep.affinity:
            _encode_affinity(wm, enc, cls, anchoring)
    _order_seeds(wm, enc, classes)
    return enc


def _order_seeds(wm: WindowModel, enc: AffinityEncoding, classes) -> None:
    """Seeds go first, each before every pod matching its terms, so the seeds of a plan must
    admit an order in which none matches the terms of a seed before it (the validator's
    ``may_escape``). One seed per strongly connected component of "a member of group A matches
    B's terms" keeps them acyclic: a group matches its own terms, so that is one seed domain per
    group too. Other pods come after every seed, so a class that merely matches a seed's terms
    (with support of its own) leaves the seed alone. A seed whose domain has no node with a key
    of another group's terms fills none of that group's counts (kube-scheduler counts matches
    only on nodes with the key): where it blocks no other group of its component it may go
    first, so only the seeds that may block one share the component's one seed (a group on
    hostname seeding on a node without a zone label, beside a zone group's seed)."""
    by_terms: dict[tuple, list] = {}
    for (terms, d), seed in enc.seeds.items():
        by_terms.setdefault(terms, []).append((d, seed))
    members = {terms: [c.rep for c in classes if c.rep.affinity == terms and AllTerms(terms).matches(c.rep)]
               for terms in by_terms}
    graph = nx.DiGraph()
    graph.add_nodes_from(by_terms)
    graph.add_edges_from((a, b) for a in by_terms for b in by_terms
                         if a != b and any(AllTerms(b).matches(rep) for rep in members[a]))
    nodes = wm.state.nodes
    for component in nx.strongly_connected_components(graph):
        if len(component) == 1:
            wm.model.add_at_most_one([s for terms in component for _, s in by_terms[terms]])
            continue
        blocking = []
        for terms in component:
            wm.model.add_at_most_one([s for _, s in by_terms[terms]])  # one seed domain per group
            ids = wm.state.domains(terms[0].topology_key)[0]
            for d, s in by_terms[terms]:
                inside = [nodes[int(n)].labels for n in np.flatnonzero(ids == d)]
                if any(graph.has_edge(terms, other)
                       and any(t.topology_key in labels for t in other for labels in inside)
                       for other in component if other != terms):
                    blocking.append(s)
        wm.model.add_at_most_one(blocking)


def _support_components(wm: WindowModel, classes) -> dict[int, int]:
    """The strongly connected component of each class with required affinity, in the graph of
    who may anchor whom (an edge o -> c where o, itself with required affinity, matches all of
    c's terms and c may need a window pod: somewhere it can go, no running pod that stays
    supports it). Anchoring across components never closes a cycle, so an order exists in which
    each pod finds its support before it; within one, only seeds break the circle."""
    with_affinity = [c for c in classes if c.rep.affinity]
    graph = nx.DiGraph()
    graph.add_nodes_from(c.id for c in with_affinity)
    for c in with_affinity:
        if _settled_everywhere(wm, c):
            continue
        matcher = AllTerms(c.rep.affinity)
        graph.add_edges_from((o.id, c.id) for o in with_affinity if o is not c and matcher.matches(o.rep))
    return {cid: i for i, component in enumerate(nx.strongly_connected_components(graph)) for cid in component}


def _settled_everywhere(wm: WindowModel, cls) -> bool:
    """Whether, under every term, each domain the class can use holds a running pod matching
    all its terms that cannot be evicted: the class then needs no window pod at all."""
    state = wm.state
    supporters = _running_matching(state, AllTerms(cls.rep.affinity))
    for term in cls.rep.affinity:
        ids = state.domains(term.topology_key)[0]
        settled = {int(ids[n]) for p, n in supporters if ids[n] >= 0 and wm.evictable(p) is None}
        if not set(wm.class_vars_by_domain(cls.id, term.topology_key)) <= settled:
            return False
    return True


def leans_on(pod: PodInfo, victim: PodInfo) -> bool:
    """Whether ``victim`` could be what supports ``pod``'s required affinity (it matches all of
    its terms). A victim runs until its own preemptor arrives, so it supports every pod but that
    one: the model names the class of that pod (``named_preemptor``), and a plan names as
    preemptor a pod that does not lean on it where it can (``AffinityEncoding.rank``)."""
    return bool(pod.affinity) and AllTerms(pod.affinity).matches(victim)


def named_preemptor(wm: WindowModel, enc: AffinityEncoding, victim: PodInfo) -> dict[int, cp_model.IntVar]:
    """Per class that may evict ``victim`` at one of its levels, the literal "the plan names a pod
    of this class, placed on the victim's node, as its preemptor": exactly one when it is evicted,
    at the level it is evicted at (``victim_room``). Created once per victim, for victims whose
    support some pod's affinity reads (``AffinityEncoding.narrow`` names the preemptor from them)."""
    named = enc.preemptor_named.get(victim.key)
    if named is None:
        m, n = wm.model, wm.evict_pod[victim.key][1]
        levels = wm.evict_level[victim.key]
        named = {}
        for cls, var in wm.by_node.get(n, ()):
            if cls.rep.priority in levels and cls.rep.may_preempt_others and may_preempt(cls.rep, victim):
                b = m.new_bool_var(f"named[{victim.key},{cls.id}]")
                m.add_implication(b, levels[cls.rep.priority])
                m.add(var >= 1).only_enforce_if(b)
                named[cls.id] = b
        m.add(cp_model.LinearExpr.sum(list(named.values())) == wm.evict[victim.key])
        enc.preemptor_named[victim.key] = named
    return named


def _ahead(wm: WindowModel, enc: AffinityEncoding, other: int, cls) -> int:
    """How many of ``cls``'s pods come before every pod of class ``other`` in kube-scheduler's
    queue (``SchedulingContext.queue``: priority, creation, name, a gang's members together at
    its first member's place): a victim evicted for one of ``other``'s is still there at each of
    their turns. A class of pods outside gangs places its first pods (``decode.extract``; a
    repaired plan's too, ``decode.by_counts``), so when it places no more than that many, all of
    its placed pods come before. Which members of a gang class are placed is the gangs' choice,
    so for such a class only "all of its pods come before" is stated (otherwise 0). (A model
    that merges interchangeable gangs into kinds decodes the first gangs of a kind in queue
    order, so a kind's first pod is where its placed pods start.) 0 where ``other`` is no class
    of the model."""
    hit = enc.ahead.get((other, cls.id))
    if hit is None:
        later = next((c for c in wm.classes if c.id == other), None)
        if later is None:
            hit = 0
        else:
            turns = wm.ctx.turns()
            first = min(turns[p.key] for p in later.pods)
            hit = sum(1 for p in cls.pods if turns[p.key] < first)
            gangs = any(p.group is not None for p in (*later.pods, *cls.pods))
            if gangs and hit < cls.size and any(p.group is not None for p in cls.pods):
                hit = 0
        enc.ahead[(other, cls.id)] = hit
    return hit


def _evicted_after(wm: WindowModel, enc: AffinityEncoding, victim: PodInfo, other: int, named: cp_model.IntVar,
                   cls) -> Optional[cp_model.IntVar]:
    """The literal "``victim`` is evicted for a pod of class ``other`` (``named``) after every
    placed pod of ``cls`` had its turn": always so when all of ``cls``'s pods come before
    ``other``'s, else when ``cls`` places at most the pods that do; None when none does."""
    key = (victim.key, other, cls.id)
    if key in enc.evicted_after:
        return enc.evicted_after[key]
    ahead = _ahead(wm, enc, other, cls)
    placed = wm.placed.get(cls.id, 0)  # an int (0) for a class without a candidate node
    lit: Optional[cp_model.IntVar]
    if ahead >= cls.size or (isinstance(placed, int) and placed <= ahead):
        lit = named
    elif not ahead or isinstance(placed, int):
        lit = None
    else:
        lit = wm.model.new_bool_var(f"evicted_after[{victim.key},{other},{cls.id}]")
        wm.model.add_implication(lit, named)
        wm.model.add(placed <= ahead).only_enforce_if(lit)
    enc.evicted_after[key] = lit
    return lit


def _supports(wm: WindowModel, enc: AffinityEncoding, pod: PodInfo, evict, cls, key: str) -> object:
    """The literal "running pod ``pod`` supports the affinity of class ``cls``'s pods in its
    domain under ``key``": it stays, or it is evicted for a pod of another class that comes
    after all of ``cls``'s placed pods in queue order (``_evicted_after``: evicted for an earlier
    one, it is gone at their turns — kube-scheduler then names the first pod that needs its
    room), or for one of ``cls``'s own (a class matching its own terms) with another of them in
    that domain — that one has its support, and the preemptor has that one's (kube-scheduler
    checks affinity at each pod's turn and never again, so pods placed before the preemptor keep
    their support; the validator reads a victim as supporting every pod but its named
    preemptor). A victim that keeps the class's pods out of part of the domain while it runs
    (``_kept_out_region``: a required anti-affinity term over a smaller domain, a host port, no
    room beside it) supports no pod there: pods there come after it is gone. Evicted, it then
    supports the class only with one of its pods outside that part (a class matching its own
    terms: that pod supports the ones inside, which come later), or, for a class that does not,
    with none inside; where the part is the whole domain, only by staying. Created once per pod,
    class and key."""
    cache = enc.support
    lit = cache.get((pod.key, cls.id, key))
    if lit is not None:
        return lit
    m = wm.model
    d = int(wm.state.domains(key)[0][wm.evict_pod[pod.key][1]])
    region = _kept_out_region(wm, pod, cls.rep)
    kin = AllTerms(cls.rep.affinity).matches(cls.rep)
    inside: Optional[list] = None  # the class's x in the kept-out part of the domain, if any
    if region is not None:
        split = _kept_out_split(wm, cls, key, d, region) if d >= 0 else None
        if split is None or not split[1]:  # (no candidate node of the domain outside the part)
            lit = cache[(pod.key, cls.id, key)] = evict.Not()
            return lit
        inside = split[0]
    named = named_preemptor(wm, enc, pod)
    others: list[cp_model.IntVar] = []
    for c, b in named.items():
        after = _evicted_after(wm, enc, pod, c, b, cls) if c != cls.id else None
        if after is not None:
            others.append(after)
    own = named.get(cls.id)
    if own is not None and cls.size >= 2 and kin and d >= 0:
        if wm.class_vars_by_domain(cls.id, key).get(d):
            pair = m.new_bool_var(f"supports_kin[{pod.key},{cls.id},{key}]")
            m.add_implication(pair, own)
            m.add(_domain_count(wm, enc, cls, key, d) >= 2).only_enforce_if(pair)
            others.append(pair)
    if not others:
        lit = evict.Not()
    else:
        lit = m.new_bool_var(f"supports[{pod.key},{cls.id},{key}]")
        m.add_bool_or([evict.Not(), *others]).only_enforce_if(lit)
        if inside is not None:
            # Evicted, it supports the class only so: some pod of the class in the domain outside
            # the part (a class matching its own terms), or none inside it (any other).
            away = m.new_bool_var(f"support_outside[{pod.key},{cls.id},{key}]")
            if kin:
                m.add(_domain_count(wm, enc, cls, key, d) - cp_model.LinearExpr.sum(inside) >= 1).only_enforce_if(away)
            elif inside:
                m.add(cp_model.LinearExpr.sum(inside) == 0).only_enforce_if(away)
            m.add_bool_or([evict.Not(), away]).only_enforce_if(lit)
    cache[(pod.key, cls.id, key)] = lit
    return lit


def _keeping(victim: PodInfo, rep: PodInfo) -> tuple[list, bool]:
    """What keeps ``rep``'s pods away from the running ``victim``: the required anti-affinity terms
    of either that match the other, and whether both want a host port."""
    terms = [t for t in victim.anti_affinity if t.matches(rep.namespace, rep.labels, rep.ns_labels)]
    terms += [t for t in rep.anti_affinity if PodMatcher.of_term(t).matches(victim)]
    return terms, bool(victim.host_ports) and ports_conflict(victim.host_ports, rep.host_ports)


def _kept_out_region(wm: WindowModel, victim: PodInfo, rep: PodInfo) -> Optional[np.ndarray]:
    """The nodes (a mask) where the running ``victim`` keeps ``rep``'s pods out while it runs, or
    None where it keeps them out nowhere: the domain of a required anti-affinity term of either
    that matches the other (the victim's node's domain under the term's key), the victim's node
    for a host port both want or for a pod that cannot fit beside it (``_no_room_beside``), as the
    validator's ``kept_out_by`` reads it (which, for room, also counts the node's other pods)."""
    state = wm.state
    node = wm.evict_pod[victim.key][1]
    terms, port = _keeping(victim, rep)
    own_node = port or _no_room_beside(wm, victim, rep)
    if not terms and not own_node:
        return None
    region = np.zeros(len(state.nodes), dtype=bool)
    region[node] = own_node
    for t in terms:
        ids = state.domains(t.topology_key)[0]
        if ids[node] >= 0:
            region |= ids == ids[node]
    return region if region.any() else None


def _kept_out_split(wm: WindowModel, cls, key: str, d: int, region: np.ndarray) -> tuple[list, bool]:
    """(x of ``cls`` on the nodes of domain ``d`` under ``key`` inside ``region``, whether it has a
    candidate node of that domain outside it)."""
    pairs = wm.class_pairs_by_domain(cls.id, key).get(d, [])
    inside = [var for n, var in pairs if region[n]]
    return inside, len(inside) < len(pairs)


def _domain_count(wm: WindowModel, enc: AffinityEncoding, cls, key: str, d: int) -> cp_model.IntVar:
    """One variable for the class's pods in domain ``d`` under ``key``, shared by every victim's
    support literal that reads it (a sum per victim was quadratic in the domain's nodes)."""
    hit = enc.counts.get((cls.id, key, d))
    if hit is None:
        hit = wm.model.new_int_var(0, cls.size, f"in_domain[{cls.id},{key},{d}]")
        wm.model.add(hit == cp_model.LinearExpr.sum(wm.class_vars_by_domain(cls.id, key).get(d, [])))
        enc.counts[(cls.id, key, d)] = hit
    return hit


def _no_room_beside(wm: WindowModel, victim: PodInfo, rep: PodInfo) -> bool:
    """Whether ``rep``'s pods cannot fit the running ``victim``'s node beside it even alone: a pod
    of the class there is placed only once the victim is gone, so the victim supports none of its
    affinity (the validator's room reason, ``waits_for_room``, which also counts the node's other
    pods)."""
    state = wm.state
    node = wm.evict_pod[victim.key][1]
    return not bool(fits(state.vector(rep), state.alloc[node] - state.vector(victim)))


def _running_anchors(wm: WindowModel, enc: AffinityEncoding, supporters, key: str, cls) -> tuple[set[int], dict[int, list]]:
    """Domains (under ``key``) where a running supporter cannot be evicted, and per other domain
    the literals "this supporter supports ``cls``'s pods" (``_supports``)."""
    ids = wm.state.domains(key)[0]
    settled: set[int] = set()
    kept: dict[int, list] = {}
    for pod, node in supporters:
        d = int(ids[node])
        if d < 0:
            continue
        evict = wm.evictable(pod)
        if evict is None:
            settled.add(d)
        else:
            kept.setdefault(d, []).append(_supports(wm, enc, pod, evict, cls, key))
    return settled, kept


class _Anchoring:
    """Where the pods of a class are anchored without a window pod of their own support
    component: by a running pod that stays, by a window pod that needs no support (no required
    affinity) or comes from another component, or by their group's seed. A class anchored so in
    a domain may anchor a class of its own component there (``kin_support``) without closing a
    cycle: in the order, the outside support comes first, then it, then the class it anchors.
    Chains of such steps are stated step by step (``anchored``): a class anchored within k kin
    steps leans on one anchored within k - 1, so no chain closes on itself; a chain is at most
    one step shorter than its component has classes (``steps``), up to ``MAX_KIN_STEPS``."""

    def __init__(self, wm: WindowModel, enc: AffinityEncoding, classes, components: dict[int, int]) -> None:
        self.wm, self.enc, self.classes, self.components = wm, enc, classes, components
        self._sources: dict[int, tuple] = {}
        self._outside: dict[tuple[int, int, int], object] = {}
        self._anchored: dict[tuple[int, int, int, int], object] = {}
        self._pairs: dict[tuple[int, str], dict[int, list]] = {}
        self._running: dict[tuple[int, int], tuple] = {}
        sizes: dict[int, int] = defaultdict(int)
        for c in classes:
            if c.id in components:
                sizes[components[c.id]] += 1
        self._sizes = sizes

    def steps(self, cls) -> int:
        """The most kin steps a chain ending at ``cls`` takes: one fewer than its component has
        classes (a chain that passes a class twice is no shorter way to it; classes alike in
        terms and labels still differ in what anchors them from outside, their queue order and
        named preemptors say), at least one, at most ``MAX_KIN_STEPS``."""
        return max(1, min(self._sizes[self.components[cls.id]] - 1, MAX_KIN_STEPS))

    def sources(self, cls) -> tuple[list, list, list]:
        """Window classes matching all of ``cls``'s terms: without required affinity
        (grounded), with it from another component (anchored), of its own component (kin). The
        other classes of its own group are kin: their pods anchored from outside the component
        (by a running pod still there at their turn, say, that a later pod of ``cls`` evicts)
        support it as any kin's do; anchored by the group's seed, they add nothing the seed does
        not already allow."""
        hit = self._sources.get(cls.id)
        if hit is None:
            rep = cls.rep
            matcher = AllTerms(rep.affinity)
            grounded = [o for o in self.classes if o is not cls and not o.rep.affinity and matcher.matches(o.rep)]
            rivals = [o for o in self.classes if o is not cls and o.rep.affinity and matcher.matches(o.rep)]
            anchored = [o for o in rivals if self.components[o.id] != self.components[cls.id]]
            kin = [o for o in rivals if self.components[o.id] == self.components[cls.id]]
            hit = self._sources[cls.id] = (grounded, anchored, kin)
        return hit

    def outside(self, o, t: int, e: int):
        """For ``o``'s pods in domain ``e`` of its term ``t``: True where a running pod that
        cannot be evicted supports them, None where nothing outside their component can, else
        a literal that implies such support (created once)."""
        cache = (o.id, t, e)
        if cache in self._outside:
            return self._outside[cache]
        wm, key = self.wm, o.rep.affinity[t].topology_key
        running = self._running.get((o.id, t))
        if running is None:
            supporters = _running_matching(wm.state, AllTerms(o.rep.affinity))
            running = self._running[o.id, t] = _running_anchors(wm, self.enc, supporters, key, o)
        settled, kept = running
        lit: bool | cp_model.IntVar | None
        if e in settled:
            lit = True
        else:
            grounded, anchored, _ = self.sources(o)
            options = kept.get(e, []) + [v for q in (*grounded, *anchored)
                                         for v in wm.class_vars_by_domain(q.id, key).get(e, [])]
            if len(o.rep.affinity) == 1 and _may_seed(wm, self.enc, o):
                options.append(_seed(wm, self.enc, o.rep.affinity, e))
            lit = None
            if options:
                lit = wm.model.new_bool_var(f"outside[{o.id},{t},{e}]")
                wm.model.add(cp_model.LinearExpr.sum(options) >= 1).only_enforce_if(lit)
        self._outside[cache] = lit
        return lit

    def anchored(self, o, t: int, e: int, steps: int):
        """For ``o``'s pods in domain ``e`` of its term ``t``: anchored from outside the component
        (``outside``), or, with ``steps`` > 0, by pods of a kin class there that are themselves
        anchored within ``steps`` - 1 kin steps. True, None (never) or a literal (made once)."""
        if steps == 0:
            return self.outside(o, t, e)
        cache = (o.id, t, e, steps)
        if cache in self._anchored:
            return self._anchored[cache]
        first = self.outside(o, t, e)
        lit: bool | cp_model.IntVar | None = first
        if first is not True:
            options = [] if first is None else [first]
            for q in self.sources(o)[2]:
                options += self.kin_support(o, q, t, e, steps - 1)
            lit = None
            if options:
                lit = self.wm.model.new_bool_var(f"anchored[{o.id},{t},{e},{steps}]")
                self.wm.model.add(cp_model.LinearExpr.sum(options) >= 1).only_enforce_if(lit)
        self._anchored[cache] = lit
        return lit

    def _pairs_in(self, o, key: str) -> dict[int, list]:
        """``o``'s (node, x) pairs grouped by the node's domain under ``key`` (made once: every
        domain of every class leaning on ``o``, at every step, asks)."""
        hit = self._pairs.get((o.id, key))
        if hit is None:
            ids = self.wm.state.domains(key)[0]
            hit = self._pairs[o.id, key] = defaultdict(list)
            for n, var in self.wm.by_class.get(o.id, []):
                hit[int(ids[n])].append((n, var))
        return hit

    def kin_support(self, cls, o, t: int, d: int, steps: int = 0) -> list:
        """Support for ``cls`` in domain ``d`` of its term ``t`` from ``o``, a class of its own
        component: ``o``'s pods there, counted only on nodes whose domains (under each of
        ``o``'s terms) anchor them from outside the component, or within ``steps`` kin steps
        (``anchored``). One literal per such set of domains (just ``d`` when ``o``'s terms use
        ``cls``'s key)."""
        wm = self.wm
        o_ids = [wm.state.domains(u.topology_key)[0] for u in o.rep.affinity]
        by_domains: dict[tuple, list] = defaultdict(list)
        for n, var in self._pairs_in(o, cls.rep.affinity[t].topology_key).get(d, ()):
            by_domains[tuple(int(i[n]) for i in o_ids)].append(var)
        out = []
        for domains, o_vars in by_domains.items():
            lits = [self.anchored(o, u, e, steps) for u, e in enumerate(domains)]
            if any(lit is None for lit in lits):
                continue
            lits = [lit for lit in lits if lit is not True]
            if not lits:
                out += o_vars
                continue
            via = wm.model.new_bool_var(f"kin[{cls.id},{o.id},{t},{d},{steps},{len(out)}]")
            wm.model.add(cp_model.LinearExpr.sum(o_vars) >= 1).only_enforce_if(via)
            for lit in lits:
                wm.model.add_implication(via, lit)
            out.append(via)
        return out


def _clearing(wm: WindowModel, enc: AffinityEncoding, terms) -> list:
    """``evict[v]`` (or None where v may not be evicted) for every running pod matching all of
    ``terms`` on a node with the first term's key: a seed needs every one of them gone
    ("anywhere" is kube-scheduler's: a match on a node without the key does not count). Kept per
    terms: every seed domain of a group and every class it may anchor asks again."""
    clearing = enc.seed_clearing
    hit = clearing.get(terms)
    if hit is None:
        keyed = wm.state.domains(terms[0].topology_key)[0]
        hit = clearing[terms] = [
            wm.evictable(p) for p, n in _running_matching(wm.state, AllTerms(terms)) if keyed[n] >= 0
        ]
    return hit


def _may_seed(wm: WindowModel, enc: AffinityEncoding, cls) -> bool:
    """Whether pods of the class may start their group by the self-affinity escape: a single term
    they match themselves, and every running match could be evicted."""
    terms = cls.rep.affinity
    return (len(terms) == 1 and AllTerms(terms).matches(cls.rep)
            and all(e is not None for e in _clearing(wm, enc, terms)))


def _seed(wm: WindowModel, enc: AffinityEncoding, terms, d: int):
    """seed[terms, d]: the group with these terms starts from nothing in domain ``d`` of its
    term's key (created once, shared by the group's classes and by those it anchors)."""
    seeds = enc.seeds
    seed = seeds.get((terms, d))
    if seed is None:
        seed = seeds[terms, d] = wm.model.new_bool_var(f"seed[{terms[0].topology_key},{d},{len(seeds)}]")
        for evict in _clearing(wm, enc, terms):
            wm.model.add_implication(seed, evict)
        _closing_preemptors(wm, enc, terms, d, seed)
    return seed


def _closing_preemptors(wm: WindowModel, enc: AffinityEncoding, terms, d: int, seed) -> None:
    """A running match is gone only once its preemptor has come; a preemptor that matches the
    terms too is then there instead (the validator's ``closed_by``). So a seed in domain ``d``
    needs each running match evicted for a pod that does not match the terms, or for one in
    ``d`` itself (that pod may be the seed, evicting its own match)."""
    closing = enc.seed_closing.get(terms)
    if closing is None:
        matcher = AllTerms(terms)
        keyed = wm.state.domains(terms[0].topology_key)[0]
        matching = {cls.id for cls in wm.classes if matcher.matches(cls.rep)}
        closing = enc.seed_closing[terms] = [
            (int(keyed[node]), [named for cid, named in named_preemptor(wm, enc, victim).items() if cid in matching])
            for victim, node in _running_matching(wm.state, matcher) if keyed[node] >= 0
        ]
    for domain, named in closing:
        if domain != d:
            for lit in named:
                wm.model.add_implication(seed, lit.Not())


def _encode_affinity(wm: WindowModel, enc: AffinityEncoding, cls, anchoring: _Anchoring) -> None:
    """Every pod of the class is anchored, as a sequential order would need (the validator's
    reading): in its domain under each term's key, a running pod matches all its terms, or a
    window pod does that needs no support of its own (no required affinity) or is anchored from
    another component of the support graph (``_support_components``), or, of its own
    component, is anchored from outside it (``_Anchoring``). Where nothing running matches
    anywhere, a class that matches its own single term may instead start from one seed domain
    and grow there. Classes with the very same terms that match them (replicas differing only
    in priority or size) form one group with one seed domain; seeds are ordered in
    ``_order_seeds``."""
    state, m, rep = wm.state, wm.model, cls.rep
    grounded, anchored, kin = anchoring.sources(cls)
    supporters = _running_matching(state, AllTerms(rep.affinity))
    escape = _may_seed(wm, enc, cls)
    for t, term in enumerate(rep.affinity):
        ids = state.domains(term.topology_key)[0]
        # Running supporters per domain; one that cannot be evicted settles the domain.
        settled, kept = _running_anchors(wm, enc, supporters, term.topology_key, cls)
        for d, own in wm.class_vars_by_domain(cls.id, term.topology_key).items():
            if d in settled:
                continue  # a running pod that stays supports the whole domain
            support = kept.get(d, []) + [
                v for o in (*grounded, *anchored) for v in wm.class_vars_by_domain(o.id, term.topology_key).get(d, [])
            ]
            for o in kin:
                support += anchoring.kin_support(cls, o, t, d, anchoring.steps(cls) - 1)
            present = wm.new_presence(f"aff[{cls.id},{t},{d}]", own, cls.size)
            if escape:
                seed = _seed(wm, enc, rep.affinity, d)
                if support:
                    m.add(cp_model.LinearExpr.sum(support) >= 1).only_enforce_if([present, seed.Not()])
                else:
                    m.add_implication(present, seed)
            elif support:
                m.add(cp_model.LinearExpr.sum(support) >= 1).only_enforce_if(present)
            else:
                m.add(present == 0)

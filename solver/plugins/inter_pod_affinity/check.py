"""InterPodAffinity on a plan's final state (the validator's reading).

* anti-affinity: no two pods of the final state may violate a required anti-affinity term of
  either, when at least one of them is a window pod (terminating pods count, as in the filter).
* affinity: kube-scheduler admits a pod with required affinity only where, for every term, a
  pod matching all its terms already runs in the term's domain (the node carrying every key), or
  — the self-affinity escape — where no pod anywhere matches them yet and the pod matches its own
  terms. Lifted to the final state: an order of the plan's pods must exist in which each pod
  with required affinity finds that support among the pods before it (running pods, pods without
  required affinity, and pods already so placed), or is a *first pod* (it matches its own terms
  and no running pod does). First pods go first, so none may match the terms of a first pod
  after it. Hence a group of replicas may start from nothing, but grows only in its first pod's
  domain: replicas split over zones that merely support each other (2 + 1, or one pair per zone)
  are refused, as any sequential order would refuse them. Terminating pods support, as in the
  filter; so does a victim, for every pod but its own preemptor (it runs until that preemptor
  arrives, and kube-scheduler never rechecks the affinity of pods already placed), the pods
  after that preemptor in the queue (``SchedulingContext.queue``: priority, creation, name, a
  gang's members together at its first member's place; the victim is gone at their turn) and the
  pods it keeps out while it runs (a
  required anti-affinity term of either matching the other, a host port both want on its node):
  those come after it is gone. Room is such a reason too: a pod that does not fit its node at its
  own turn, beside the victims there whose preemptors come after it, is placed only once they are
  gone, so they support nothing of its (kube-scheduler's own preemption for it would remove them
  first, and its dry run then finds no support). A victim
  matching a pod's terms closes its escape when the victim's preemptor matches them too: before
  the preemptor comes the victim runs, after it the preemptor does.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ...framework import names
from ...info import PodInfo
from ...state import ClusterState, PodMatcher
from ..shared.host_ports import ports_conflict
from ..shared.resource_fit import fits
from .book import term_book
from .filter import AllTerms

if TYPE_CHECKING:
    from ...plugin_api import ReplayView as Replay, Victim


def check_anti_affinity(replay: Replay) -> None:
    """No pair of final-state pods, one of them placed now, breaks a required anti-affinity
    term of either: the owner's term matching the other pod in the owner's domain."""
    state, placed = replay.final, replay.assigned
    owners: dict = defaultdict(list)
    for index in sorted({int(n) for per_node in term_book(state).owners.values() for n in np.flatnonzero(per_node)}):
        for pod in state.pods_on[index].values():  # only nodes holding some term's owner
            for term in pod.anti_affinity:
                owners[term].append((pod, index))
    reported: set[tuple[str, str]] = set()
    domain_ids: dict[str, list[int]] = {}  # per topology key, each node's domain as a Python int
    placed_pods: list[tuple[PodInfo, int]] = []  # ``replay.placed()``, listed once when needed
    for term, holders in owners.items():
        ids = domain_ids.get(term.topology_key)
        if ids is None:
            ids = domain_ids[term.topology_key] = state.domains(term.topology_key)[0].tolist()
        # Only the domains of the term's holders can hold a pod it forbids, and in those of
        # running holders alone only a placed pod can break it (two running pods are no pair
        # of the plan's): other pods are never read, so they are not asked whether the term
        # matches them. A self anti-affinity term on hostname has its holders on the very nodes
        # it matches, nearly all of them running: those nodes' placed pods are all it reads.
        wanted = {ids[index] for _, index in holders}
        wanted.discard(-1)
        if not wanted:
            continue
        matcher = PodMatcher.of_term(term)
        full = {ids[index] for p, index in holders if p.key in placed}  # domains of placed holders
        if full:
            # Every final pod the term matches: only the nodes whose count says they hold one
            # (the state's counter, made from its label groups, not pod by pod), in node order;
            # a node's placed pods are in the order its pods are (added last, in plan order).
            counts = state.match_counts(matcher)
            pool: Iterable[tuple[PodInfo, int]] = (
                (pod, index) for index in np.flatnonzero(counts).tolist() if ids[index] in wanted
                for pod in (state.pods_on[index].values() if ids[index] in full
                            else replay.placed_on.get(index, ())))
        else:
            if not placed_pods:
                placed_pods = list(replay.placed())
            pool = ((pod, index) for pod, index in placed_pods if ids[index] in wanted)
        by_domain: dict[int, list[PodInfo]] = defaultdict(list)
        matches = state.matcher(matcher)  # looked up once, not per pod
        for pod, index in pool:
            if matches(pod):
                by_domain[ids[index]].append(pod)
        if not by_domain:
            continue
        for owner, index in holders:
            if ids[index] < 0:
                continue
            for other in by_domain.get(ids[index], ()):
                if other is owner or (owner.key not in placed and other.key not in placed):
                    continue
                pair = (owner.key, other.key)
                if pair in reported or pair[::-1] in reported:
                    continue
                reported.add(pair)
                value = replay.nodes[index].labels[term.topology_key]
                replay.report(
                    f"anti-affinity: {owner.key} (node {replay.node_name(index)}) and {other.key} "
                    f"(node {replay.node_name(state.where[other.key])}) share {term.topology_key}={value}, "
                    f"which a required anti-affinity term of {owner.key} forbids"
                )


def check_affinity(replay: Replay) -> None:
    """Each placed pod with required affinity is *anchored* (see the module docstring).

    kube-scheduler lets a pod with required affinity in only where, per term, a pod matching
    all its terms already runs in its domain, or — the self-affinity escape — where nothing
    anywhere matches yet and the pod matches its own terms. On the final state this becomes:
    an order of the placed pods must exist in which each one finds that support among the
    pods before it. Pods without required affinity need no support and go after the seeds;
    seeds (escapes) go first, so no seed may match the terms of a seed before it.
    """
    pods: list[tuple[PodInfo, int]] = []
    for pod, index in replay.placed():
        if not pod.affinity:
            continue
        node = replay.nodes[index]
        missing = [t.topology_key for t in pod.affinity if t.topology_key not in node.labels]
        if missing:
            replay.report(
                f"affinity: {pod.key} on node {node.name}: the node has no {missing[0]} label, "
                "which its required pod affinity needs"
            )
            continue
        pods.append((pod, index))
    if not pods:
        return
    anchoring = _FinalSupport(pods, replay.final, set(replay.assigned), replay.victims, replay.ctx.turns())
    progress = anchoring.start()
    seeds: list[str] = []
    while progress.waiting:
        best: _Progress | None = None
        best_key, tried = None, set()
        for key in sorted(progress.waiting):
            pod, index = anchoring.by_key[key]
            shape = (pod.class_id if pod.class_id >= 0 else key, anchoring.domains_of(key))
            if shape in tried or not anchoring.may_escape(key, seeds):
                continue
            tried.add(shape)
            trial = progress.copy()
            anchoring.place(trial, key)
            if best is None or len(trial.waiting) < len(best.waiting):
                best, best_key = trial, key
            if not best.waiting:
                break
        if best is None:
            break
        assert best_key is not None  # set together with best
        seeds.append(best_key)
        progress = best

    for key in sorted(progress.waiting):
        pod, index = anchoring.by_key[key]
        node = replay.nodes[index]
        where = f"affinity: {key} on node {node.name}"
        t = anchoring.unsupported_term(progress, key)
        topology = pod.affinity[t].topology_key
        domain = f"{topology}={node.labels[topology]}"
        candidates = anchoring.supporters(key, t)
        own_victims = [q for q in candidates if anchoring.victim_of.get(q) == key]
        gone = [q for q in candidates if q not in own_victims and q in anchoring.victim_of
                and anchoring.gone_before(q, key)]
        keeping_out = [q for q in candidates if q not in own_victims and q not in gone and q in anchoring.victim_of
                       and anchoring.kept_out_by(q, key)]
        leaning = [q for q in candidates if q not in own_victims and q not in gone and q not in keeping_out]
        if leaning:
            line = (
                f"{where}: in {domain} it is supported only by pods placed in the same plan that have no "
                f"support of their own there ({names(leaning)}); without a running pod to join, a group "
                "starts from one first pod and grows in that pod's domain"
            )
            if gone:
                line += (f"; {names(gone)} match too, but the plan evicts them for "
                         f"{names(sorted({anchoring.victim_of[q] for q in gone}))}, ahead of it in the queue")
            if keeping_out:
                line += f"; {names(keeping_out)} match too, but keep it out until the plan evicts them"
        elif gone:
            line = (
                f"{where}: its only support in {domain} is {names(gone)}, which the plan evicts for "
                f"{names(sorted({anchoring.victim_of[q] for q in gone}))}, ahead of it in the queue: gone at its turn"
            )
        elif keeping_out:
            why = ("it does not fit the node beside them at its turn" if anchoring.waits_for_room(key)
                   else "a required anti-affinity term or a host port")
            line = (
                f"{where}: its only support in {domain} is {names(keeping_out)}, which keep it out while they run "
                f"({why}) until the plan evicts them"
            )
        elif own_victims:
            line = (
                f"{where}: its only support in {domain} is {names(own_victims)}, which the plan evicts for it"
            )
        else:
            line = f"{where}: no other pod matching its required pod affinity is in {domain}"
            if anchoring.self_match[key]:
                if anchoring.runs_match[key]:
                    line += (
                        " (it matches its own terms, but running pods match them too: it is not the first"
                        " of its group)"
                    )
                elif key in anchoring.closed_by:
                    victim, by = anchoring.closed_by[key]
                    line += (f" (it matches its own terms, but {victim} matches them until {by} evicts it, and {by} "
                             "matches them too: it is not the first of its group)")
                else:
                    first = ", ".join(f"{s} in {anchoring.domain_text(s)}" for s in seeds) or "another pod"
                    line += f" (it matches its own terms, but the first pod of its group is {first})"
        replay.report(line)


@dataclass
class _Progress:
    """A placement order under construction: which anchored pods are in, which still wait."""

    ready: Counter  # (terms, topology key, domain id) -> placed pods matching those terms there
    satisfied: dict[str, set[int]]  # waiting pod -> indices of its terms that have support
    waiting: set[str]

    def copy(self) -> "_Progress":
        return _Progress(Counter(self.ready), {k: set(v) for k, v in self.satisfied.items()}, set(self.waiting))


class _FinalSupport:
    """Support bookkeeping for ``check_affinity`` (the filter's ``_Anchoring`` is the CP-SAT
    side of the same rule): per set of terms, per key and domain, how many
    already-placed pods match; a waiting pod is placed as soon as each of its terms has one."""

    def __init__(
        self, pods: list[tuple[PodInfo, int]], state: ClusterState, window: set[str], victims: list[Victim],
        turns: Mapping[str, int],
    ) -> None:
        self.state = state
        self.by_key = {pod.key: (pod, index) for pod, index in pods}
        self.matcher = {pod.key: AllTerms(pod.affinity) for pod, _ in pods}
        # A victim still runs until its preemptor arrives: it may support any pod but that one
        # (kube-scheduler's preemption never rechecks the affinity of pods already placed).
        self.victim_of = {v.pod.key: v.preemptor for v in victims}
        # ... unless its preemptor comes first in the queue, or its rules keep that pod out while
        # it runs (``gone_before``, ``kept_out_by``).
        self.victims = {v.pod.key: (v.pod, v.node) for v in victims}
        # Each window pod's turn in kube-scheduler's queue (``SchedulingContext.queue``: priority,
        # creation, name, and a gang's members together at its first member's place).
        self.turns = turns
        self.placed = window
        self._kept_out: dict[tuple[str, str], bool] = {}
        self._waits: dict[str, bool] = {}
        everyone = [*state.pods(), *((v.pod, v.node) for v in victims)]
        # Every pod matching each distinct set of terms, with its node.
        self.members: dict[AllTerms, list[tuple[PodInfo, int]]] = {}
        for matcher in set(self.matcher.values()):
            self.members[matcher] = [(q, n) for q, n in everyone if state.matches(matcher, q)]
        self.matched_by: dict[str, list[AllTerms]] = defaultdict(list)
        for matcher, found in self.members.items():
            for q, _ in found:
                self.matched_by[q.key].append(matcher)
        self.where = {q.key: n for found in self.members.values() for q, n in found}
        self.waiters: dict[tuple, list[tuple[str, int]]] = defaultdict(list)
        self.self_match: dict[str, bool] = {}
        self.runs_match: dict[str, bool] = {}  # a pod outside the window matches all its terms
        # A victim of another pod that matches all the pod's terms, and whose preemptor does too:
        # (victim, preemptor). Whichever of the pod and that preemptor comes first, the pod finds
        # one of the two in the cluster at its turn, so it is never a first pod.
        self.closed_by: dict[str, tuple[str, str]] = {}
        for pod, index in pods:
            matcher = self.matcher[pod.key]
            for t, term in enumerate(pod.affinity):
                self.waiters[(matcher, term.topology_key, self._domain(term.topology_key, index))].append((pod.key, t))
            keys = [t.topology_key for t in pod.affinity]
            self.self_match[pod.key] = matcher.matches(pod)
            counted = [(q, n) for q, n in self.members[matcher] if any(k in state.nodes[n].labels for k in keys)]
            self.runs_match[pod.key] = any(q.key not in window and q.key not in self.victim_of for q, _ in counted)
            matching = {q.key for q, _ in counted}
            closing = next(((q.key, by) for q, _ in counted
                            if (by := self.victim_of.get(q.key)) not in (None, pod.key) and by in matching), None)
            if closing is not None:
                self.closed_by[pod.key] = closing

    def _domain(self, key: str, node: int) -> int:
        return int(self.state.domains(key)[0][node])

    def domains_of(self, key: str) -> tuple[int, ...]:
        pod, index = self.by_key[key]
        return tuple(self._domain(t.topology_key, index) for t in pod.affinity)

    def domain_text(self, key: str) -> str:
        pod, index = self.by_key[key]
        topology = pod.affinity[0].topology_key
        return f"{topology}={self.state.nodes[index].labels[topology]}"

    def start(self) -> _Progress:
        """Every pod of the final state without required affinity placed (running or not)."""
        progress = _Progress(Counter(), {key: set() for key in self.by_key}, set(self.by_key))
        for key in self.where:
            if key not in self.by_key:
                self.place(progress, key)
        return progress

    def place(self, progress: _Progress, key: str) -> None:
        """Place ``key`` and, transitively, every waiting pod that this gives full support."""
        queue = [key]
        progress.waiting.discard(key)
        while queue:
            q = queue.pop()
            node = self.where.get(q)
            if node is None:  # matches no set of terms: supports nobody
                continue
            for matcher in self.matched_by[q]:
                for term in matcher.terms:
                    d = self._domain(term.topology_key, node)
                    if d < 0:
                        continue
                    slot = (matcher, term.topology_key, d)
                    progress.ready[slot] += 1
                    for p, t in self.waiters.get(slot, ()):
                        if p == q or p not in progress.waiting or p == self.victim_of.get(q):
                            continue
                        if q in self.victim_of and (self.gone_before(q, p) or self.kept_out_by(q, p)):
                            continue
                        done = progress.satisfied[p]
                        done.add(t)
                        if len(done) == len(self.by_key[p][0].affinity):
                            progress.waiting.discard(p)
                            queue.append(p)

    def gone_before(self, victim: str, key: str) -> bool:
        """Whether ``victim``'s preemptor comes before ``key`` in kube-scheduler's queue
        (``turns``: a gang member at its gang's place), so the victim is gone at ``key``'s turn."""
        preemptor = self.victim_of[victim]
        if preemptor not in self.turns or key not in self.turns:
            return False
        return self.turns[preemptor] < self.turns[key]

    def kept_out_by(self, victim: str, key: str) -> bool:
        """Whether ``key`` cannot be placed while ``victim`` still runs: a required anti-affinity
        term of either matches the other in the term's domain, or on one node they want one host
        port. Such a victim is gone before ``key`` comes, so it supports nothing of ``key``'s."""
        hit = self._kept_out.get((victim, key))
        if hit is None:
            v, vn = self.victims[victim]
            p, pn = self.by_key[key]
            hit = (any(self._forbids(t, vn, p, pn) for t in v.anti_affinity)
                   or any(self._forbids(t, pn, v, vn) for t in p.anti_affinity)
                   or (vn == pn and bool(v.host_ports) and ports_conflict(v.host_ports, p.host_ports))
                   or (vn == pn and self.waits_for_room(key)))
            self._kept_out[(victim, key)] = hit
        return hit

    def waits_for_room(self, key: str) -> bool:
        """Whether ``key`` does not fit its node at its own turn: beside the node's pods that stay,
        the plan's pods placed there before it in the queue and the victims there whose preemptors
        come after it (each asked resource and the pod count, as the filter reads them), in the
        queue's order (``turns``)."""
        hit = self._waits.get(key)
        if hit is None:
            pod, node = self.by_key[key]
            hit = False
            mine = self.turns.get(key)
            if mine is not None:
                vec = self.state.vector(pod)
                used = np.zeros_like(vec)  # what the others there at its turn request
                for q in self.state.pods_on[node].values():
                    if q.key == key:
                        continue
                    if q.key in self.placed and self.turns.get(q.key, -1) > mine:
                        continue  # placed after it
                    used += self.state.vector(q)
                for v, (q, vn) in self.victims.items():
                    if vn == node and self.turns.get(self.victim_of[v], -1) > mine:
                        used += self.state.vector(q)
                hit = not bool(fits(vec, self.state.alloc[node] - used))
            self._waits[key] = hit
        return hit

    def _forbids(self, term, owner_node: int, other: PodInfo, other_node: int) -> bool:
        d = self._domain(term.topology_key, owner_node)
        return (d >= 0 and d == self._domain(term.topology_key, other_node)
                and term.matches(other.namespace, other.labels, other.ns_labels))

    def may_escape(self, key: str, seeds: list[str]) -> bool:
        """Could ``key`` be a first pod: it matches its own terms, no running pod matches them, and
        the seeds can still be ordered so none matches the terms of one placed after it."""
        if not self.self_match[key] or self.runs_match[key] or key in self.closed_by:
            return False
        left = [*seeds, key]
        while left:
            free = [s for s in left if not any(self._blocks(s, o) for o in left if o != s)]
            if not free:
                return False
            left.remove(free[0])
        return True

    def _blocks(self, first: str, later: str) -> bool:
        """``first``, once placed, fills ``later``'s affinity counts: ``later`` cannot escape."""
        q, n = self.by_key[first]
        p, _ = self.by_key[later]
        labels = self.state.nodes[n].labels
        return self.matcher[later].matches(q) and any(t.topology_key in labels for t in p.affinity)

    def unsupported_term(self, progress: _Progress, key: str) -> int:
        done = progress.satisfied[key]
        return next(t for t in range(len(self.by_key[key][0].affinity)) if t not in done)

    def supporters(self, key: str, t: int) -> list[str]:
        """Pods other than ``key`` matching all its terms in its domain under term ``t``."""
        pod, index = self.by_key[key]
        topology = pod.affinity[t].topology_key
        d = self._domain(topology, index)
        return [q.key for q, n in self.members[self.matcher[key]] if q is not pod and self._domain(topology, n) == d]

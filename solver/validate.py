"""The independent plan validator: replay a plan's final state and check every hard rule.

It knows nothing of how the plan was made (greedy, CP-SAT, a hand-written file): it rebuilds the
cluster from the snapshot, removes the victims, adds the assignments, and checks the window
rules of DESIGN.md ("Window semantics") on that final state with the filter modules themselves.
Each violation is one line naming the rule, the pod(s) and the node, for example
``capacity: node n1 cpu over by 500m after placing default/web-1``.

Final-state readings of the sequential rules (kube-scheduler checks one pod at a time):

* capacity and ports: only what the plan causes counts. A node that real dumps show already
  overcommitted is reported only when the plan makes it worse; two running pods already sharing a
  host port are not the plan's business.
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
  arrives, and kube-scheduler never rechecks the affinity of pods already placed).
* topology spread: kube-scheduler checks a DoNotSchedule constraint only for the pod that carries
  it, at its arrival; pods placed later, without the constraint, may pile onto its domain. So the
  rule is read per group of placed pods sharing one constraint (namespace, selector with
  matchLabelKeys merged, key, maxSkew, minDomains, eligible nodes) and per domain d they land in:
  the last of them to arrive finds at least the matching pods running there (less victims) plus
  the k matching pods of the group, and at most, as the minimum, the emptiest other eligible
  domain with everything the plan could have put there first (0 below minDomains domains). If
  even that skew exceeds maxSkew, no order of the plan passes the filter. A cluster already
  skewed is not the plan's fault: pods that do not match their own selector (k = 0) are blamed
  only if the plan also raised d's skew; pods that do add to d are blamed, as kube-scheduler
  would refuse the last of them. Repairs — filling the low domains — always pass.
* gangs: a PodGroup that exists places no window member, or enough that placed plus running
  members reach minMember.
* preemption: each victim runs on the named node, has strictly lower priority than its preemptor,
  which is placed on that node and may preempt; with ``preemption.pdb: hard`` no budget's
  allowance is exceeded.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from models.config import SchedulerConfig
from models.plan import Plan
from models.quantity import format_quantity
from models.resources import PODS
from models.snapshot import ClusterSnapshot, pod_group_key

from .context import SchedulingContext, build_context
from .info import PodInfo
from .plugins.preemption.pdb import disruptions_allowed, pdbs_covering
from .filtering import StaticFilters
from .plugins.inter_pod_affinity import filter as inter_pod_affinity
from .plugins.node_ports import filter as node_ports
from .plugins.pod_topology_spread import filter as pod_topology_spread
from .state import ClusterState, PodMatcher
from .plugins.preemption.victim_room import needless_victims

# How many pods a message lists before it says "and N more".
LIST_LIMIT = 5


def validate(
    snapshot: ClusterSnapshot, plan: Plan, config: SchedulerConfig, *, all_pending: bool = False
) -> list[str]:
    """One line per violated hard rule; ``[]`` when the plan is valid."""
    ctx = build_context(snapshot, config, all_pending=all_pending)
    replay = _Replay(ctx, plan)
    replay.check_plan()
    replay.build_final_state()
    replay.check_static()
    replay.check_capacity()
    replay.check_ports()
    replay.check_anti_affinity()
    replay.check_affinity()
    replay.check_spread()
    replay.check_gangs()
    replay.check_preemption()
    return replay.problems


def _names(keys: Iterable[str]) -> str:
    keys = sorted(keys)
    head = ", ".join(keys[:LIST_LIMIT])
    return head if len(keys) <= LIST_LIMIT else f"{head} and {len(keys) - LIST_LIMIT} more"


@dataclass
class _Victim:
    pod: PodInfo
    node: int
    preemptor: str


@dataclass
class _Replay:
    ctx: SchedulingContext
    plan: Plan
    problems: list[str] = field(default_factory=list)
    assigned: dict[str, int] = field(default_factory=dict)  # well-formed assignments: pod -> node
    victims: list[_Victim] = field(default_factory=list)  # well-formed victims

    def __post_init__(self) -> None:
        self.nodes = self.ctx.nodes
        self.node_index = self.ctx.state.node_index
        self.window = {p.key: p for p in self.ctx.window}
        self.static = StaticFilters(self.ctx.nodes, self.ctx.window)

    def report(self, line: str) -> None:
        self.problems.append(line)

    def node_name(self, index: int) -> str:
        return self.nodes[index].name

    # -- the plan against the snapshot ---------------------------------------------------------

    def check_plan(self) -> None:
        snapshot, config = self.ctx.snapshot, self.ctx.config
        nodes_of: dict[str, list[str]] = defaultdict(list)
        for a in self.plan.assignments:
            nodes_of[a.pod].append(a.node)
        for key, names in nodes_of.items():
            if len(names) > 1:
                self.report(f"plan: {key} is assigned {len(names)} times ({', '.join(names)})")
            pod = snapshot.pod_by_key.get(key)
            if pod is None:
                self.report(f"plan: assigned pod {key} is not in the snapshot")
                continue
            if key not in self.window:
                if pod.spec.node_name:
                    why = f"is already bound to node {pod.spec.node_name}"
                elif pod.is_terminal:
                    why = f"has finished (phase {pod.status.phase})"
                elif pod.is_terminating:
                    why = "is terminating"
                else:
                    why = (
                        f"belongs to scheduler {pod.spec.scheduler_name!r}, not {config.scheduler_name!r}"
                        " (schedule every pending pod with all-pending)"
                    )
                self.report(f"plan: assigned pod {key} is not a pending pod of this scheduler: it {why}")
                continue
            index = self.node_index.get(names[0])
            if index is None:
                self.report(f"plan: {key} is assigned to node {names[0]}, which is not in the snapshot")
                continue
            self.assigned[key] = index

        listed = Counter(u.pod for u in self.plan.unschedulable)
        for key, count in listed.items():
            if count > 1:
                self.report(f"plan: {key} is listed unschedulable {count} times")
            if key in nodes_of:
                self.report(f"plan: {key} is both assigned and listed unschedulable")
            if key not in self.window:
                self.report(f"plan: {key} is listed unschedulable but is not a pending pod of this scheduler")
        for key in self.window:
            if key not in nodes_of and key not in listed:
                self.report(f"plan: pending pod {key} is neither assigned nor listed unschedulable")

        for nom in self.plan.nominations:
            if nom.pod not in self.assigned:
                self.report(f"plan: {nom.pod} is nominated to node {nom.node} but the plan does not place it")
            elif self.node_name(self.assigned[nom.pod]) != nom.node:
                placed_on = self.node_name(self.assigned[nom.pod])
                self.report(f"plan: {nom.pod} is nominated to node {nom.node} but assigned to {placed_on}")

        seen: Counter[str] = Counter()
        bound = {p.key: p for p in self.ctx.bound}
        for v in self.plan.preemptions:
            seen[v.pod] += 1
            if seen[v.pod] == 2:
                self.report(f"preemption: victim {v.pod} is listed more than once")
            if seen[v.pod] > 1:
                continue
            pod = snapshot.pod_by_key.get(v.pod)
            if pod is None:
                self.report(f"preemption: victim {v.pod} is not in the snapshot")
            elif v.pod in self.window or not pod.spec.node_name:
                self.report(f"preemption: victim {v.pod} is a pending pod, not one running on node {v.node}")
            elif pod.spec.node_name != v.node:
                self.report(f"preemption: victim {v.pod} runs on node {pod.spec.node_name}, not on {v.node}")
            elif v.node not in self.node_index:
                self.report(f"preemption: victim {v.pod} runs on node {v.node}, which is not in the snapshot")
            elif v.pod not in bound:
                self.report(f"preemption: victim {v.pod} has finished (phase {pod.status.phase}): nothing to evict")
            else:
                self.victims.append(_Victim(bound[v.pod], self.node_index[v.node], v.preemptor))

    # -- the final state -------------------------------------------------------------------------

    def build_final_state(self) -> None:
        """``before``: the snapshot's bound pods; ``base``: less the victims; ``final``: plus the
        assignments."""
        self.before = self.ctx.state
        self.base = self.before.copy()
        for v in self.victims:
            self.base.remove(v.pod)
        self.final = self.base.copy()
        self.placed_on: dict[int, list[PodInfo]] = defaultdict(list)
        for key, index in self.assigned.items():
            pod = self.window[key]
            self.final.add(pod, index)
            self.placed_on[index].append(pod)

    def placed(self) -> Iterable[tuple[PodInfo, int]]:
        for key, index in self.assigned.items():
            yield self.window[key], index

    # -- static rules ----------------------------------------------------------------------------

    def check_static(self) -> None:
        """NodeUnschedulable, NodeName, TaintToleration, NodeAffinity (with its PreFilter)."""
        for pod, index in self.placed():
            status = self.static.statuses(pod)[index]
            if not status.ok:
                self.report(f"{status.plugin}: {pod.key} on node {self.node_name(index)}: {'; '.join(status.reasons)}")

    # -- capacity ----------------------------------------------------------------------------------

    def check_capacity(self) -> None:
        """Every resource some placed pod requests, the pod count included, fits the final state;
        overcommit already in the snapshot is reported only where the plan makes it worse."""
        state = self.final
        for index, pods in sorted(self.placed_on.items()):
            free_before = self.before.alloc[index] - self.before.used[index]
            free_after = state.alloc[index] - state.used[index]
            vectors = {p.key: state.vector(p) for p in pods}
            for r, name in enumerate(state.resources):
                wanting = [k for k, vec in vectors.items() if vec[r] > 0]
                if not wanting or free_after[r] >= min(free_before[r], 0):
                    continue
                line = (
                    f"capacity: node {self.node_name(index)} {name} over by "
                    f"{_amount(name, -int(free_after[r]))} after placing {_names(wanting)}"
                )
                if free_before[r] < 0:
                    line += (
                        f" (already over by {_amount(name, -int(free_before[r]))} before the plan;"
                        " the plan makes it worse)"
                    )
                self.report(line)

    # -- host ports --------------------------------------------------------------------------------

    def check_ports(self) -> None:
        """No two pods of a node share a host port in the final state, one of them placed now."""
        for index, placed in sorted(self.placed_on.items()):
            if not any(p.host_ports for p in placed):
                continue
            placed_keys = {p.key for p in placed}
            holders = [p for p in self.final.pods_on[index].values() if p.host_ports]
            for i, a in enumerate(holders):
                for b in holders[i + 1 :]:
                    if a.key not in placed_keys and b.key not in placed_keys:
                        continue
                    port = _shared_port(a, b)
                    if port is not None:
                        first, second = sorted((a.key, b.key))
                        self.report(
                            f"ports: node {self.node_name(index)}: {first} and {second} both use host port {port}"
                        )

    # -- inter-pod anti-affinity -------------------------------------------------------------------

    def check_anti_affinity(self) -> None:
        """No pair of final-state pods, one of them placed now, breaks a required anti-affinity
        term of either: the owner's term matching the other pod in the owner's domain."""
        state, placed = self.final, self.assigned
        owners: dict = defaultdict(list)
        for pod, index in state.pods():
            for term in pod.anti_affinity:
                owners[term].append((pod, index))
        reported: set[tuple[str, str]] = set()
        for term, holders in owners.items():
            matcher = PodMatcher.of_term(term)
            if any(p.key in placed for p, _ in holders):
                pool: Iterable[tuple[PodInfo, int]] = state.pods()
            else:
                pool = self.placed()
            ids = state.domains(term.topology_key)[0]
            by_domain: dict[int, list[PodInfo]] = defaultdict(list)
            for pod, index in pool:
                if ids[index] >= 0 and state.matches(matcher, pod):
                    by_domain[int(ids[index])].append(pod)
            if not by_domain:
                continue
            for owner, index in holders:
                if ids[index] < 0:
                    continue
                for other in by_domain.get(int(ids[index]), ()):
                    if other is owner or (owner.key not in placed and other.key not in placed):
                        continue
                    pair = (owner.key, other.key)
                    if pair in reported or pair[::-1] in reported:
                        continue
                    reported.add(pair)
                    value = self.nodes[index].labels[term.topology_key]
                    self.report(
                        f"anti-affinity: {owner.key} (node {self.node_name(index)}) and {other.key} "
                        f"(node {self.node_name(state.where[other.key])}) share {term.topology_key}={value}, "
                        f"which a required anti-affinity term of {owner.key} forbids"
                    )

    # -- inter-pod affinity ------------------------------------------------------------------------

    def check_affinity(self) -> None:
        """Each placed pod with required affinity is *anchored* (see the module docstring).

        kube-scheduler lets a pod with required affinity in only where, per term, a pod matching
        all its terms already runs in its domain, or — the self-affinity escape — where nothing
        anywhere matches yet and the pod matches its own terms. On the final state this becomes:
        an order of the placed pods must exist in which each one finds that support among the
        pods before it. Pods without required affinity need no support and go after the seeds;
        seeds (escapes) go first, so no seed may match the terms of a seed before it.
        """
        pods: list[tuple[PodInfo, int]] = []
        for pod, index in self.placed():
            if not pod.affinity:
                continue
            node = self.nodes[index]
            missing = [t.topology_key for t in pod.affinity if t.topology_key not in node.labels]
            if missing:
                self.report(
                    f"affinity: {pod.key} on node {node.name}: the node has no {missing[0]} label, "
                    "which its required pod affinity needs"
                )
                continue
            pods.append((pod, index))
        if not pods:
            return
        anchoring = _Anchoring(pods, self.final, set(self.assigned), self.victims)
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
            seeds.append(best_key)
            progress = best

        for key in sorted(progress.waiting):
            pod, index = anchoring.by_key[key]
            node = self.nodes[index]
            where = f"affinity: {key} on node {node.name}"
            t = anchoring.unsupported_term(progress, key)
            topology = pod.affinity[t].topology_key
            domain = f"{topology}={node.labels[topology]}"
            candidates = anchoring.supporters(key, t)
            own_victims = [q for q in candidates if anchoring.victim_of.get(q) == key]
            leaning = [q for q in candidates if q not in own_victims]
            if leaning:
                line = (
                    f"{where}: in {domain} it is supported only by pods placed in the same plan that have no "
                    f"support of their own there ({_names(leaning)}); without a running pod to join, a group "
                    "starts from one first pod and grows in that pod's domain"
                )
            elif own_victims:
                line = (
                    f"{where}: its only support in {domain} is {_names(own_victims)}, which the plan evicts for it"
                )
            else:
                line = f"{where}: no other pod matching its required pod affinity is in {domain}"
                if anchoring.self_match[key]:
                    if anchoring.runs_match[key]:
                        line += (
                            " (it matches its own terms, but running pods match them too: it is not the first"
                            " of its group)"
                        )
                    else:
                        first = ", ".join(f"{s} in {anchoring.domain_text(s)}" for s in seeds) or "another pod"
                        line += f" (it matches its own terms, but the first pod of its group is {first})"
            self.report(line)

    # -- topology spread ---------------------------------------------------------------------------

    def check_spread(self) -> None:
        """DoNotSchedule constraints, per group of placed pods sharing one and per domain they land
        in (see the module docstring): the last of them to arrive must be able to find the
        domain within maxSkew of the emptiest other eligible domain."""
        groups: dict[tuple, _SpreadGroup] = {}
        for pod, index in self.placed():
            hard = pod.hard_spread
            if not hard:
                continue
            node = self.nodes[index]
            affinity_mask, tolerated_mask = self.static.affinity_mask(pod), self.static.tolerated_mask(pod)
            # The same constraint written twice is one rule: the pod counts once in its group.
            for c in dict.fromkeys(hard):
                d = int(self.final.domains(c.topology_key)[0][index])
                if d < 0:
                    self.report(
                        f"spread: {pod.key} on node {node.name}: the node has no {c.topology_key} label "
                        "(DoNotSchedule topology spread constraint)"
                    )
                    continue
                eligible = pod_topology_spread.eligible_nodes(
                    pod, hard, self.final, affinity_mask, tolerated_mask, policy=c
                )
                key = (pod.namespace, c.selector, c.topology_key, c.max_skew, c.min_domains, eligible.tobytes())
                group = groups.get(key)
                if group is None:
                    group = groups[key] = _SpreadGroup(c, pod.namespace, eligible)
                # Counted as the filter counts: an empty selector counts nobody, itself included.
                group.by_domain[d].append((pod, not c.selector.is_empty and c.selector.matches(pod.labels)))
        for group in groups.values():
            self._check_spread_group(group)

    def _check_spread_group(self, group: _SpreadGroup) -> None:
        c = group.constraint
        ids, values = self.final.domains(c.topology_key)
        matcher = PodMatcher.of_spread(c.selector, group.namespace)
        keep = group.eligible & (ids >= 0)

        def per_domain(state: ClusterState) -> np.ndarray:
            weights = state.match_counts(matcher)[keep]
            return np.bincount(ids[keep], weights=weights, minlength=len(values)).astype(np.int64)

        before, base, final = per_domain(self.before), per_domain(self.base), per_domain(self.final)
        most = final + (before - base)  # the final state with the victims still there
        present = np.zeros(len(values), dtype=bool)
        present[ids[keep]] = True
        few = int(present.sum()) < c.min_domains

        def skew(counts: np.ndarray, d: int) -> int:
            return int(counts[d]) - (0 if few or not present.any() else int(counts[present].min()))

        for d, members in sorted(group.by_domain.items()):
            matching = sum(1 for _, m in members if m)
            if few:
                least, least_text = 0, f"a minimum of 0 (fewer than minDomains={c.min_domains} eligible domains)"
            else:
                others = present.copy()
                others[d] = False
                if not others.any():
                    continue  # the only domain is the minimum itself
                least = int(most[others].min())
                least_text = f"{least} matching pod(s) in the emptiest other eligible domain"
            seen = int(base[d]) + matching
            if seen - least <= c.max_skew:
                continue
            if not matching and skew(final, d) <= skew(before, d):
                continue  # already this skewed before the plan, and these pods add nothing to it
            names = _names(p.key for p, _ in members)
            self.report(
                f"spread: {c.topology_key}={values[d]} exceeds maxSkew {c.max_skew} after placing {names}: "
                f"{int(base[d])} matching pod(s) were there and {matching} of these match, so the last to arrive "
                f"makes skew {seen - least} against {least_text}"
            )

    # -- gangs -------------------------------------------------------------------------------------

    def check_gangs(self) -> None:
        """A PodGroup places none of its window members, or reaches minMember with its running ones."""
        placed_by_group: dict[str, list[str]] = defaultdict(list)
        for pod, _ in self.placed():
            if pod.group is not None:
                placed_by_group[pod.group].append(pod.key)
        if not placed_by_group:
            return
        evicted = {v.pod.key for v in self.victims}
        running: Counter[str] = Counter()
        for pod in self.ctx.snapshot.bound_pods():
            group = pod_group_key(pod)
            if group in placed_by_group and pod.key not in evicted:
                running[group] += 1
        for group, members in sorted(placed_by_group.items()):
            pod_group = self.ctx.pod_groups.get(group)
            if pod_group is None:
                continue
            need = pod_group.spec.min_member
            have = len(members) + running[group]
            if have < need:
                self.report(
                    f"gang: PodGroup {group} places {len(members)} pod(s) ({_names(members)}) which with its "
                    f"{running[group]} running member(s) make {have} of minMember {need}"
                )

    # -- preemption --------------------------------------------------------------------------------

    def check_preemption(self) -> None:
        config = self.ctx.config
        if self.victims and not config.preemption.enabled:
            self.report(f"preemption: the plan evicts {len(self.victims)} pod(s) but preemption is disabled")
        sound: set[str] = set()  # victims whose named preemptor may evict them there
        for v in self.victims:
            victim, node = v.pod.key, self.node_name(v.node)
            preemptor = self.window.get(v.preemptor)
            before = len(self.problems)
            if preemptor is None or v.preemptor not in self.assigned:
                self.report(
                    f"preemption: {victim} is evicted from node {node} for {v.preemptor}, which the plan does not place"
                )
                continue
            if self.assigned[v.preemptor] != v.node:
                self.report(
                    f"preemption: {victim} is evicted from node {node} for {v.preemptor}, which is placed on "
                    f"node {self.node_name(self.assigned[v.preemptor])}"
                )
            if v.pod.priority >= preemptor.priority:
                self.report(
                    f"preemption: {victim} (priority {v.pod.priority}) is evicted for {v.preemptor} "
                    f"(priority {preemptor.priority}): a victim must have strictly lower priority"
                )
            if preemptor.preempt_never:
                self.report(f"preemption: {v.preemptor} has preemptionPolicy Never but evicts {victim}")
            if v.pod.group is not None and v.pod.group == preemptor.group:
                self.report(
                    f"preemption: {victim} is evicted for {v.preemptor}, a member of its own PodGroup "
                    f"{v.pod.group}: a gang never preempts itself"
                )
            if len(self.problems) == before:
                sound.add(victim)
        self._check_victims_needed(sound)
        if config.preemption.pdb == "hard" and self.victims:
            self._check_budgets()

    def _check_victims_needed(self, sound: set[str]) -> None:
        """Each victim's room is needed by the pods that outrank it (``victim_room``); checked
        for the victims whose preemptor is otherwise in order (the others are reported already)."""
        by_node: dict[int, list[PodInfo]] = defaultdict(list)
        for v in self.victims:
            by_node[v.node].append(v.pod)
        state = self.before
        for index, victims in sorted(by_node.items()):
            running = list(state.pods_on[index].values())
            placed = self.placed_on.get(index, [])
            for victim, users in needless_victims(
                state.alloc[index], state.used[index], running, placed, victims, state.vector
            ):
                if victim.key not in sound:
                    continue
                who = (
                    f"its room goes to {_names(p.key for p in users)}, which may not preempt it"
                    if users else "no placed pod needs its room"
                )
                self.report(
                    f"preemption: {victim.key} (priority {victim.priority}) is evicted from node "
                    f"{self.node_name(index)}, but the pods placed there that outrank it fit without it; {who}"
                )

    def _check_budgets(self) -> None:
        """No PodDisruptionBudget loses more pods than it allows (``preemption.pdb: hard``)."""
        pods = self.ctx.snapshot.pods
        pdbs = self.ctx.snapshot.pdbs
        covered: dict[str, list[str]] = defaultdict(list)
        for v in self.victims:
            for pdb in pdbs_covering(v.pod.pod, pdbs):
                covered[pdb.key].append(v.pod.key)
        for pdb in pdbs:
            evicted = covered.get(pdb.key)
            if not evicted:
                continue
            allowed = disruptions_allowed(pdb, pods)
            if len(evicted) > allowed:
                self.report(
                    f"pdb: PodDisruptionBudget {pdb.key} allows {allowed} disruption(s) but the plan evicts "
                    f"{len(evicted)} pod(s) it covers ({_names(evicted)})"
                )


@dataclass
class _SpreadGroup:
    """Placed pods sharing one DoNotSchedule constraint (same namespace, selector, key, maxSkew,
    minDomains and eligible nodes), by the domain id each landed in, with its self-match."""

    constraint: object
    namespace: str
    eligible: np.ndarray
    by_domain: dict[int, list[tuple[PodInfo, bool]]] = field(default_factory=lambda: defaultdict(list))


@dataclass
class _Progress:
    """A placement order under construction: which anchored pods are in, which still wait."""

    ready: Counter  # (terms, topology key, domain id) -> placed pods matching those terms there
    satisfied: dict[str, set[int]]  # waiting pod -> indices of its terms that have support
    waiting: set[str]

    def copy(self) -> "_Progress":
        return _Progress(Counter(self.ready), {k: set(v) for k, v in self.satisfied.items()}, set(self.waiting))


class _Anchoring:
    """Support bookkeeping for ``check_affinity``: per set of terms, per key and domain, how many
    already-placed pods match; a waiting pod is placed as soon as each of its terms has one."""

    def __init__(
        self, pods: list[tuple[PodInfo, int]], state: ClusterState, window: set[str], victims: list[_Victim]
    ) -> None:
        self.state = state
        self.by_key = {pod.key: (pod, index) for pod, index in pods}
        self.matcher = {pod.key: inter_pod_affinity.AllTerms(pod.affinity) for pod, _ in pods}
        # A victim still runs until its preemptor arrives: it may support any pod but that one
        # (kube-scheduler's preemption never rechecks the affinity of pods already placed).
        self.victim_of = {v.pod.key: v.preemptor for v in victims}
        everyone = [*state.pods(), *((v.pod, v.node) for v in victims)]
        # Every pod matching each distinct set of terms, with its node.
        self.members: dict[inter_pod_affinity.AllTerms, list[tuple[PodInfo, int]]] = {}
        for matcher in set(self.matcher.values()):
            self.members[matcher] = [(q, n) for q, n in everyone if state.matches(matcher, q)]
        self.matched_by: dict[str, list[inter_pod_affinity.AllTerms]] = defaultdict(list)
        for matcher, found in self.members.items():
            for q, _ in found:
                self.matched_by[q.key].append(matcher)
        self.where = {q.key: n for found in self.members.values() for q, n in found}
        self.waiters: dict[tuple, list[tuple[str, int]]] = defaultdict(list)
        self.self_match: dict[str, bool] = {}
        self.runs_match: dict[str, bool] = {}  # a pod outside the window matches all its terms
        for pod, index in pods:
            matcher = self.matcher[pod.key]
            for t, term in enumerate(pod.affinity):
                self.waiters[(matcher, term.topology_key, self._domain(term.topology_key, index))].append((pod.key, t))
            keys = [t.topology_key for t in pod.affinity]
            self.self_match[pod.key] = matcher.matches(pod)
            self.runs_match[pod.key] = any(
                q.key not in window and q.key not in self.victim_of and any(k in state.nodes[n].labels for k in keys)
                for q, n in self.members[matcher]
            )

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
                        done = progress.satisfied[p]
                        done.add(t)
                        if len(done) == len(self.by_key[p][0].affinity):
                            progress.waiting.discard(p)
                            queue.append(p)

    def may_escape(self, key: str, seeds: list[str]) -> bool:
        """Could ``key`` be a first pod: it matches its own terms, no running pod matches them, and
        the seeds can still be ordered so none matches the terms of one placed after it."""
        if not self.self_match[key] or self.runs_match[key]:
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


def _amount(resource: str, units: int) -> str:
    return str(units) if resource == PODS else format_quantity(resource, units)


def _shared_port(a: PodInfo, b: PodInfo) -> str | None:
    """The first host port of ``a`` that collides with one of ``b``, as ``80/TCP`` (with its IP
    when it is not the wildcard)."""
    for ip, proto, port in a.host_ports:
        if node_ports.conflicts((ip, proto, port), b.host_ports):
            return f"{port}/{proto}" + ("" if ip == node_ports.WILDCARD else f" on {ip}")
    return None


__all__ = ["validate"]

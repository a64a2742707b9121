"""kube-scheduler's own preemption, replayed on a plan: the one rule of which running pods a plan
may evict (issue 33).

kube-scheduler takes pending pods one at a time in queue order (priority, then creation time, then
name; a gang's members together, at its first member's place). A pod that does not fit its node as
the node is at its turn may preempt there: ``SelectVictimsOnNode`` takes off every pod of lower
priority, then puts them back one by one, the most important first (those whose eviction would
break a PodDisruptionBudget before the others), keeping each that still leaves room for the pod.
The pods not put back are evicted, for that pod.

The rule a plan is held to: replay the plan's placements in queue order, each pod pinned to the
node the plan gives it, with the pods placed before it present (but not one that could not fit its
node at its own turn: kube-scheduler retries such a pod only after later evictions make its room)
and the running pods not yet
evicted by the replay present, the room of nominated pods held as greedy holds it, every filter
judging as greedy's filter cycle does (resources, ports, volumes, devices, affinity, spread), and
``select_victims`` (greedy's SelectVictimsOnNode) choosing at each turn where the pod does not fit.
Budgets are weighed as kube-scheduler weighs them (violating ones reprieved first), whatever
``preemption.pdb`` says: with ``hard``, a plan that exceeds a budget is refused by the budget
check, and one that does not evicts what kube-scheduler's order evicts (keeping every violating
pod and still fitting means kube-scheduler's reprieve keeps them all too).
A plan may evict a running pod only if the replay evicts it, and names as its preemptor the pod at
whose turn the replay evicts it. A plan may keep a pod the replay evicts (it evicts less than
kube-scheduler would, and the final-state checks judge that the node still holds everything).

A gang the plan places protects its running members from the pods after its last member, as
greedy's Permit does (kube-scheduler 1.36 knows no such protection; evicting such a member would
break the gang, which the plan may not). Only nodes the plan evicts from are replayed turn by turn (elsewhere there is nothing to justify);
pods placed elsewhere are added to the state in their turn, so the rules that read other nodes
(spread, affinity) see them as kube-scheduler would.

Users: the validator (``check``), the plan's preemptor names (``kube_preemptors``) and the model,
which adds the replay's verdict for a node's placement as a constraint when its plan breaks it
(``solver/cpsat/kube_victims.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ...disruption import PdbBudgets
from ...framework import names
from ...group_disruption import co_victims, evicted_together
from ...info import PodInfo
from .postfilter import resources_only, select_victims
from ..shared.preemption_rule import may_preempt

# What a pod's turn came to on a replayed node.
FITS = "fits"  # the pod fits the node as it is: no preemption
PREEMPTS = "preempts"  # it did not fit and evicted ``victims``
NO_ROOM = "no room"  # it does not fit even with every pod it may evict gone (or may evict none)


@dataclass
class Turn:
    """One placed pod's turn on a replayed node."""

    pod: PodInfo
    node: int
    outcome: str
    victims: list[PodInfo] = field(default_factory=list)
    # The pods it could have evicted there at its turn (present, lower priority, evictable).
    lower: list[str] = field(default_factory=list)

    @property
    def outcome_ok(self) -> bool:
        """Whether the pod fits at its turn, as it is or by preempting."""
        return self.outcome != NO_ROOM


@dataclass
class KubeReplay:
    """The replay's verdicts: who kube-scheduler evicts, and each replayed pod's turn."""

    evicted_by: dict[str, str] = field(default_factory=dict)  # victim -> the pod at whose turn it goes
    turns: dict[str, Turn] = field(default_factory=dict)  # placed pod on a replayed node -> its turn

    def why_kept(self, victim: PodInfo, node: int, named: str) -> str:
        """Why kube-scheduler's preemption keeps ``victim`` on ``node``, for a plan that evicts it
        for ``named``."""
        turns = [t for t in self.turns.values() if t.node == node and may_preempt(t.pod, victim)]
        if not turns:
            return "no pod placed there may preempt it (none has a higher priority and may preempt)"
        turn = next((t for t in turns if t.pod.key == named), turns[0])
        who = f"{turn.pod.key} (priority {turn.pod.priority})"
        if turn.outcome == FITS:
            return f"{who} fits there at its turn without evicting anything"
        if turn.outcome == NO_ROOM:
            return f"{who} does not fit there at its turn even with every pod it may evict gone"
        if victim.key not in turn.lower:
            return f"{victim.key} was no longer there at {turn.pod.key}'s turn"
        return (f"at {turn.pod.key}'s turn it is reprieved: {turn.pod.key} fits with it back "
                f"(kube-scheduler evicts {names(v.key for v in turn.victims)} there)")


def queue(ctx, placed: Iterable[str]) -> list[PodInfo]:
    """The placed window pods in kube-scheduler's queue order (``ctx.queue()``: priority, creation,
    name, then the rules' QueueSort, e.g. a gang's members together at its first member's place,
    placed or not): the order greedy takes them in."""
    placed = set(placed)
    return [p for p in ctx.queue() if p.key in placed]


def replay(ctx, placements: Mapping[str, int], nodes: Iterable[int], static) -> KubeReplay:
    """Replay ``placements`` (pod key -> node index) in queue order, judging turn by turn the pods
    placed on ``nodes`` (the nodes a plan evicts from); ``static``: the window's static filters."""
    judged = set(nodes)
    out = KubeReplay()
    if not judged:
        return out
    state = ctx.state.copy()
    version = ctx.config.kubernetes_version
    budgets = PdbBudgets.of(ctx)
    window = frozenset(p.key for p in ctx.window)
    # Per budget, how many of the pods evicted so far it covers (``PdbBudgets.spent`` of them),
    # counted as they go: asking it of every victim so far at each turn grew with their square.
    spent = [0] * len(budgets.budgets)
    # The pods placed so far, a set: ``hold`` reads it as one (a list it would copy every turn).
    done: set[str] = set()
    order = queue(ctx, placements)
    # A gang whose members the plan places protects its running members from the preemptors after
    # it (as greedy's Permit does: evicting one would take the gang below its minimum).
    last_member = {p.group: p.key for p in order if p.group is not None}
    running_members: dict[str, set[str]] = {}
    if last_member:
        for q, _ in ctx.state.pods():
            if q.group in last_member and q.key not in window:
                running_members.setdefault(q.group, set()).add(q.key)
    never = window
    for pod in order:
        node = placements[pod.key]
        fits = True
        if node in judged:
            turn = out.turns[pod.key] = _turn(pod, node, state, static, ctx, budgets, never, spent, done, version)
            for victim in _with_group_mates(ctx, turn.victims, state):
                state.remove(victim)
                for i in budgets.covering(victim):
                    spent[i] += 1
                out.evicted_by[victim.key] = pod.key
            fits = turn.outcome_ok
        if fits:
            # A pod that cannot fit at its turn is not there for the turns after it: kube-scheduler
            # leaves it pending and retries it only after the evictions that make its room. Counted
            # present, it could lend a later preemptor the support (say, pod affinity) that makes
            # evictions look needed that kube-scheduler's dry run would not make.
            state.add(pod, node)
            done.add(pod.key)
        if pod.group is not None and last_member[pod.group] == pod.key:
            never = never | running_members.get(pod.group, set())
    return out


def _with_group_mates(ctx, victims: list[PodInfo], state) -> list[PodInfo]:
    """``victims`` and, for each in a ``disruptionMode: all`` PodGroup, its running group-mates:
    1.37's workload-aware preemption evicts such a group as a unit (``group_disruption``)."""
    out = list(victims)
    seen = {v.key for v in out}
    for victim in victims:
        if evicted_together(ctx.pod_groups, victim) is None:
            continue
        for mate, _ in co_victims(ctx.pod_groups, victim, list(state.pods())):
            if mate.key not in seen:
                seen.add(mate.key)
                out.append(mate)
    return out


def _turn(pod: PodInfo, node: int, state, static, ctx, budgets: PdbBudgets, window: frozenset[str],
          spent: list[int], done: set[str], version: str) -> Turn:
    """``pod``'s turn on ``node``: it fits, or preempts there as kube-scheduler would, or cannot.
    ``spent``: per budget, the evictions so far it covers."""
    held = ctx.claims.hold(state, pod, done)  # nominated pods' room, as greedy filters with it
    try:
        cycle = static.cycle(pod, state, version=version)
        if cycle.status(static.nodes[node]).ok:
            return Turn(pod, node, FITS)
        lower = [p.key for p in state.pods_on[node].values() if p.key not in window and may_preempt(pod, p)]
        candidate, _ = select_victims(pod, node, state, static, budgets, version, window=window,
                                      local=resources_only(pod, cycle, state), spent=list(spent),
                                      cycle=cycle)
    finally:
        ctx.claims.release(state, held)
    if candidate is None:
        return Turn(pod, node, NO_ROOM, lower=lower)
    return Turn(pod, node, PREEMPTS, list(candidate.victims), lower=lower)


def kube_preemptors(ctx, placements: Mapping[str, int], victims: list, static) -> list:
    """``victims`` (``plugin_api.Victim``) with each preemptor the pod at whose turn the replay
    evicts it (unchanged where the replay does not evict it: the validator then says why)."""
    if not victims:
        return victims
    from ...plugin_api import Victim

    found = replay(ctx, placements, {v.node for v in victims}, static)
    return [Victim(v.pod, v.node, found.evicted_by.get(v.pod.key, v.preemptor)) for v in victims]


def check(replayed, victims: list, static) -> list[str]:
    """The validator's lines for ``victims`` (well-formed ``Victim``s of the plan ``replayed``,
    each placed preemptor's victims that passed the who-may-preempt checks): every eviction one
    kube-scheduler's preemption makes, for the pod the plan names."""
    if not victims:
        return []
    found = replay(replayed.ctx, replayed.assigned, {v.node for v in victims}, static)
    lines = []
    for v in victims:
        node = replayed.node_name(v.node)
        who = found.evicted_by.get(v.pod.key)
        if who is None:
            takers = [p.key for p in replayed.placed_on.get(v.node, ()) if not may_preempt(p, v.pod)]
            taken = f"; in the plan its room goes to {names(takers)}, which may not preempt it" if takers else ""
            lines.append(
                f"preemption: {v.pod.key} (priority {v.pod.priority}) is evicted from node {node} for "
                f"{v.preemptor}, but kube-scheduler's preemption would keep it: "
                f"{found.why_kept(v.pod, v.node, v.preemptor)}{taken}")
        elif who != v.preemptor:
            lines.append(
                f"preemption: {v.pod.key} is evicted from node {node} for {v.preemptor}, but in kube-scheduler's "
                f"queue order it is {who}'s preemption that evicts it")
    return lines

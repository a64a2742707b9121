"""Pending pods a re-packing plan would leave without a place, or make preempt.

A plan that frees the nodes a waiting pod needs turns "pending for now" into "pending until
someone adds a node". The pending pods (whatever their scheduler) are therefore scheduled as
the scheduler itself would — one window, all together, by ``solver.schedule`` (greedy
scheduleOne, then CP-SAT when greedy falls short) — twice: on the cluster as it runs now, and
on the cluster after the plan (moved pods at their targets, freed nodes gone: they are freed to
be removed). Every rule between pending pods holds in both (capacity, host ports, inter-pod
(anti-)affinity, topology spread, gangs), so two pods that each fit alone but not together
are seen.

The plan *blocks* the backlog when, after it, fewer pending pods of some priority can be placed
than before, or placing them needs more evictions than before: the plan would have made room
for nothing but its own moves, and the backlog would pay for it with preemptions.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Optional

from models.config import SchedulerConfig
from models.plan import Plan
from models.snapshot import ClusterSnapshot

from ..memory import SolverMemory

# The backlog is scheduled with at most this CP-SAT time limit (seconds) per check: it is a
# side question of the plan, asked several times while a plan is looked for.
CHECK_TIME_LIMIT = 5.0


@dataclass(frozen=True)
class Backlog:
    """How the pending pods would be scheduled on one state of the cluster."""

    placed: dict[str, str]  # pending pod -> node
    priority: dict[str, int]  # pending pod -> priority (every pending pod of the window)
    victims: dict[str, tuple[str, ...]]  # preemptor -> the running pods it evicts
    unschedulable: dict[str, str]  # pending pod -> kube-scheduler's reason

    @property
    def evictions(self) -> int:
        return sum(len(v) for v in self.victims.values())

    def placed_by_priority(self) -> Counter[int]:
        return Counter(self.priority[key] for key in self.placed)


def schedule_backlog(snapshot: ClusterSnapshot, config: SchedulerConfig, *, engine: str = "greedy",
                     memory: Optional[SolverMemory] = None) -> Optional[Backlog]:
    """The pending pods of every scheduler scheduled together on ``snapshot`` (None if none)."""
    from ..api import ScheduleRequest, decide

    pending = snapshot.pending_pods(all_pending=True)
    if not pending or not snapshot.nodes:
        return None
    limit = min(config.solver.time_limit_seconds, CHECK_TIME_LIMIT)
    request = ScheduleRequest(snapshot, config.with_overrides(time_limit_seconds=limit), engine=engine, all_pending=True,
                              memory=memory)
    plan = decide(request).plan  # validated there; only its counts are read
    return _backlog(plan, {p.key: p.spec.priority or 0 for p in pending})


def _backlog(plan: Plan, priority: dict[str, int]) -> Backlog:
    victims: dict[str, list[str]] = {}
    for p in plan.preemptions:
        victims.setdefault(p.preemptor, []).append(p.pod)
    return Backlog(
        placed=plan.assignment_map(),
        priority=priority,
        victims={k: tuple(sorted(v)) for k, v in victims.items()},
        unschedulable={u.pod: u.message for u in plan.unschedulable},
    )


def worse(before: Backlog, after: Backlog) -> bool:
    """Does ``after`` place fewer pending pods of some priority, or evict more, than ``before``?"""
    if after.evictions > before.evictions:
        return True
    had, has = before.placed_by_priority(), after.placed_by_priority()
    return any(has[p] < n for p, n in had.items())


class BacklogCheck:
    """The pending pods scheduled on the cluster as it runs (once), and the question asked of
    every candidate plan: which of them does it block, and why."""

    def __init__(self, snapshot: ClusterSnapshot, config: SchedulerConfig, memory: Optional[SolverMemory] = None) -> None:
        self.snapshot = snapshot
        self.config = config
        self.memory = memory
        greedy = schedule_backlog(snapshot, config, engine="greedy", memory=memory)
        # Greedy is the cheap answer; when it leaves pods out, CP-SAT says how many fit at best.
        if greedy is not None and (greedy.unschedulable or greedy.victims):
            best = schedule_backlog(snapshot, config, engine="cpsat", memory=memory)
            if best is not None and not worse(greedy, best):
                greedy = best
        self.before: Optional[Backlog] = greedy

    @property
    def matters(self) -> bool:
        """Is there a pending pod that can be placed today at all?"""
        return self.before is not None and bool(self.before.placed)

    def packed(self) -> dict[str, str]:
        """Pending pod -> node, for the pods a packing scheduler (MostAllocated: the fewest, fullest
        nodes) places today without evicting anyone; empty when it places fewer pods, or evicts
        more, than the backlog's own schedule. Holding them there during re-packing keeps every
        rule between them and the moved pods."""
        before = self.before
        if before is None or not before.placed or before.victims:
            return {}
        packing = self.config.model_copy(update={"profile": "packing"})
        packed = schedule_backlog(self.snapshot, packing, engine="greedy", memory=self.memory)
        if packed is None or packed.victims or worse(before, packed):
            packed = schedule_backlog(self.snapshot, packing, engine="cpsat", memory=self.memory)
        if packed is None or packed.victims or worse(before, packed):
            return {}
        return packed.placed

    def blocked(self, final: dict[str, str], freed: list[str]) -> dict[str, str]:
        """Pending pod -> why, for the pods the plan (``final``: pod key -> node of every pod that
        moves; ``freed``: the nodes it frees) leaves with no place, or makes preempt; empty when
        the backlog fares as well after the plan as before it."""
        before = self.before
        if before is None or not before.placed:
            return {}
        if not final and not freed:
            return {}  # nothing changes
        state = after_plan(self.snapshot, final, set(freed))
        after = schedule_backlog(state, self.config, engine="greedy", memory=self.memory)
        if after is not None and worse(before, after):
            best = schedule_backlog(state, self.config, engine="cpsat", memory=self.memory)
            if best is not None and not worse(after, best):
                after = best
        if after is None:  # every node freed
            return {key: "no node is left after the plan" for key in sorted(before.placed)}
        if not worse(before, after):
            return {}
        return _why(before, after, set(final))


def _why(before: Backlog, after: Backlog, moved: set[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    had, has = before.placed_by_priority(), after.placed_by_priority()
    short = {p for p, n in had.items() if has[p] < n}
    for key in sorted(before.placed):
        if key not in after.placed and before.priority[key] in short:
            out[key] = ("fits today, not after the plan: "
                        + after.unschedulable.get(key, "no node left for it with the other pending pods"))
    if after.evictions > before.evictions:
        for key, victims in sorted(after.victims.items()):
            if before.victims.get(key) == victims:
                continue
            theirs = sorted(set(victims) & moved)
            out.setdefault(key, (
                f"would have to preempt {len(victims)} pod(s) after the plan ({', '.join(victims[:3])}"
                f"{' ...' if len(victims) > 3 else ''}"
                + (f"; {len(theirs)} of them moved by the plan" if theirs else "")
                + f"), {len(before.victims.get(key, ()))} today; the backlog needs {after.evictions} eviction(s) "
                f"after the plan, {before.evictions} before"))
    return out


def after_plan(snapshot: ClusterSnapshot, final: dict[str, str], freed: set[str]) -> ClusterSnapshot:
    """The cluster once the plan has run: moved pods on their targets, freed nodes removed with
    the pods that leave with them (DaemonSet pods and the like)."""
    pods = []
    for pod in snapshot.pods:
        target = final.get(pod.key)
        if target is not None:
            pod = pod.model_copy(update={"spec": pod.spec.model_copy(update={"node_name": target})})
        elif pod.spec.node_name in freed:
            continue
        pods.append(pod)
    return _with(snapshot, nodes=tuple(n for n in snapshot.nodes if n.metadata.name not in freed), pods=tuple(pods))


def with_pods_bound(snapshot: ClusterSnapshot, where: dict[str, str]) -> ClusterSnapshot:
    """``snapshot`` with the pending pods of ``where`` bound to their node (as running)."""
    pods = tuple(
        p.model_copy(update={"spec": p.spec.model_copy(update={"node_name": where[p.key]})}) if p.key in where else p
        for p in snapshot.pods
    )
    return _with(snapshot, pods=pods)


def _with(snapshot: ClusterSnapshot, **fields: object) -> ClusterSnapshot:
    # The plain constructor keeps the priorities resolved when the original was built; a
    # model_copy would carry the original's cached indexes (pod_by_key, ...) over.
    data = {name: getattr(snapshot, name) for name in ClusterSnapshot.model_fields}
    data.update(fields)
    return ClusterSnapshot(**data)  # type: ignore[arg-type]

"""The independent plan validator: replay a plan's final state and check every hard rule.

It knows nothing of how the plan was made (greedy, CP-SAT, a hand-written file): it rebuilds the
cluster from the snapshot, removes the victims, adds the assignments, and runs every final-state
check of ``plugins.registry.FINAL_CHECKS`` on that state — each lives beside its rule, in
``plugins/<plugin>/check.py``, with its reading of the sequential rule lifted to a final state
(DESIGN.md, "Window semantics"). Each violation is one line naming the rule, the pod(s) and the
node, for example ``capacity: node n1 cpu over by 500m after placing default/web-1``.

This module checks the plan itself against the snapshot (every pending pod decided once, every
node and victim real) and builds the states the checks read: ``before`` (the snapshot's bound
pods), ``base`` (less the victims) and ``final`` (plus the assignments).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Optional

from models.config import SchedulerConfig
from models.plan import Plan
from models.snapshot import ClusterSnapshot

from . import interrupt
from .context import SchedulingContext, build_context
from .filtering import StaticFilters
from .info import PodInfo
from .memory import SolverMemory
from .plugin_api import Victim
from .plugins import registry


def validate(
    snapshot: ClusterSnapshot, plan: Plan, config: SchedulerConfig, *, all_pending: bool = False,
    window_keys: Optional[list[str]] = None, memory: Optional[SolverMemory] = None,
) -> list[str]:
    """One line per violated hard rule; ``[]`` when the plan is valid. ``window_keys``: the
    pending pods the decision was restricted to, as given to ``schedule``. ``memory``: the
    caller's (``solver.memory``), to build on the state its decision built."""
    ctx = build_context(snapshot, config, all_pending=all_pending, window_keys=window_keys, memory=memory)
    replay = Replay(ctx, plan)
    # Ctrl-C (``interrupt.request``) is looked for between the steps, each a fraction of a second
    # at 5,000 nodes where the whole replay takes two: a validator cut short says nothing.
    interrupt.check()
    replay.check_plan()
    interrupt.check()
    replay.build_final_state()
    for check in registry.FINAL_CHECKS:
        interrupt.check()
        check(replay)
    return replay.problems


@dataclass
class Replay:
    """A plan replayed on its snapshot: what every final-state check reads, and where it reports."""

    ctx: SchedulingContext
    plan: Plan
    problems: list[str] = field(default_factory=list)
    assigned: dict[str, int] = field(default_factory=dict)  # well-formed assignments: pod -> node
    victims: list[Victim] = field(default_factory=list)  # well-formed victims

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
            pod = snapshot.pod(key)
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
        bound = self.ctx.bound_by_key
        for v in self.plan.preemptions:
            seen[v.pod] += 1
            if seen[v.pod] == 2:
                self.report(f"preemption: victim {v.pod} is listed more than once")
            if seen[v.pod] > 1:
                continue
            pod = snapshot.pod(v.pod)
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
                self.victims.append(Victim(bound[v.pod], self.node_index[v.node], v.preemptor))

    # -- the final state -------------------------------------------------------------------------

    def build_final_state(self) -> None:
        """``before``: the snapshot's bound pods; ``base``: less the victims; ``final``: plus the
        assignments."""
        self.before = self.ctx.state
        # No victim: ``base`` is ``before`` itself (the checks only read the states; one state
        # copy less per window, a tenth of a lone pod's replay on 500 nodes).
        self.base = self.before.copy() if self.victims else self.before
        for v in self.victims:
            self.base.remove(v.pod)
        self.final = self.base.copy()
        self.placed_on: dict[int, list[PodInfo]] = defaultdict(list)
        for key, index in self.assigned.items():
            pod = self.window[key]
            self.final.add(pod, index)
            self.placed_on[index].append(pod)

    def placed(self) -> Iterable[tuple[PodInfo, int]]:
        """Every well-formed assignment: the window pod and its node's index."""
        for key, index in self.assigned.items():
            yield self.window[key], index

"""A plan's score as kube-scheduler would judge its final state — independent of the model.

For each pod the plan places: take it out of the final state (the plan's evictions and every
other placement applied), find the nodes where it would be feasible, score them with
kube-scheduler's weighted plugins (``score_nodes``, normalizations included), and read its own
node's total — the score it would get as the last pod to arrive. The plan's score is the sum.

It shares no arithmetic with the CP-SAT objective: it is the yardstick the best-of choice
between the solver's and greedy's plans breaks ties with (``solver.cpsat.solve.not_worse``), and
what the tests and the bench compare engines by. It costs a feasibility pass over every node per
placed pod, so the engine uses it only on windows up to ``MAX_PAIRS`` pods × nodes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

import numpy as np

from models.config import SchedulerConfig
from models.plan import Plan
from models.snapshot import ClusterSnapshot

from ..context import SchedulingContext, build_context
from ..info import PodInfo
from ..filtering import Cycle, StaticFilters
from . import ScoreContext, score_nodes

# Windows up to this many pending pods × nodes get their plans compared on the final state.
MAX_PAIRS = 250_000


def affordable(ctx: SchedulingContext) -> bool:
    return len(ctx.window) * max(len(ctx.nodes), 1) <= MAX_PAIRS


def final_state_score(ctx: SchedulingContext, placements: dict[str, int], victims: Iterable[PodInfo]) -> int:
    """Σ over placed pods of kube-scheduler's weighted score of their node in the final state."""
    state = ctx.state.copy()
    for victim in victims:
        state.remove(victim)
    # A plan places window pods: each key is one of the context's.
    placed = [(cast(PodInfo, ctx.pod(key)), node) for key, node in placements.items()]
    for pod, node in placed:
        state.add(pod, node)
    static = StaticFilters(ctx.nodes, ctx.window)
    sctx = ScoreContext.of(ctx)
    total = 0
    for pod, node in placed:
        state.remove(pod)
        feasible = np.asarray(Cycle(pod, state, static, version=ctx.config.kubernetes_version).feasible(), dtype=np.int64)
        if len(feasible) > 1:
            hit = np.flatnonzero(feasible == node)
            if len(hit):
                total += int(score_nodes(pod, feasible, state, sctx)[hit[0]])
        state.add(pod, node)
    return total


def plan_score(snapshot: ClusterSnapshot, plan: Plan, config: SchedulerConfig) -> int:
    """``final_state_score`` of a printed plan against its snapshot."""
    ctx = build_context(snapshot, config)
    index = ctx.state.node_index
    victims = []
    for p in plan.preemptions:
        pod = ctx.state.pods_on[index[p.node]].get(p.pod)
        if pod is not None:
            victims.append(pod)
    return final_state_score(ctx, {a.pod: index[a.node] for a in plan.assignments}, victims)

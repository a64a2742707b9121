"""Moves between nodes that both stay are kept only when they make room for a freed node.

The model already prefers fewer moves, but a plan found within the time limit (not proven
optimal) may carry a move that frees nothing: the pod leaves one node that stays for another that
stays. Each such move is undone in turn, and the undoing kept when the final placement still
keeps every rule (the independent validator says so) with the same nodes freed.
"""

from __future__ import annotations

from models.plan import Assignment, Plan, PlanStats

from ..validate import validate
from .problem import RepackProblem, with_window


def idle_moves_undone(problem: RepackProblem, final: dict[str, int], freed: set[int]) -> tuple[dict[str, int], list[str]]:
    """``final`` without the moves between staying nodes that no freed node needs, and those pods."""
    origin = problem.origin
    idle = sorted(key for key, n in final.items()
                  if n != origin[key] and origin[key] not in freed and n not in freed)
    if not idle:
        return final, []
    snapshot = with_window(problem.snapshot, set(origin), problem.config.scheduler_name, problem.verdicts)
    final = dict(final)
    undone = []
    for key in idle:
        trial = {**final, key: origin[key]}
        if not validate(snapshot, _plan(problem, trial), problem.config, memory=problem.memory):
            final = trial
            undone.append(key)
    return final, undone


def _plan(problem: RepackProblem, final: dict[str, int]) -> Plan:
    names = problem.nodes
    return Plan(
        assignments=tuple(Assignment(pod=key, node=names[n].name) for key, n in sorted(final.items())),
        stats=PlanStats(engine="repack", status="final"),
    )

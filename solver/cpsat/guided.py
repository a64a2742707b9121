"""The solver's plan followed by kube-scheduler's own turns (``greedy.Guide``): a sound plan made
of the solve's best, where the replay of kube-scheduler's preemption refused it or the time ran out
before the cuts (``kube_victims``) found one as good.

A solve whose plans the replay keeps refusing ends on a repaired plan, which drops every pod that
cannot fit at its turn, or on greedy's. Both can place fewer high-priority pods than kube-scheduler
itself does (`contended-20n-s1070` in the peer table, one run in three on a loaded machine). A pass
in queue order that puts each pod on the node the solver chose when kube-scheduler's rules let it
(it fits, or kube's preemption on that node finds victims) and otherwise takes kube-scheduler's own
turn keeps the solver's decisions that hold and replaces the others with what kube would do. It
costs one greedy pass; it runs only when greedy's own pass took a small share of the limit, and
when greedy's plan came before the solve, that time is kept back from the solve.
"""

from __future__ import annotations

import logging
import time
from typing import Optional

from ..greedy import Guide, GreedyResult, schedule_greedy
from .choose import not_worse
from .model import WindowModel
from .outcome import Solution

log = logging.getLogger("cpsat_scheduler.solver")

# The guided passes (at most ``PASSES``, each as long as greedy's own pass) run when they take at
# most this share of the limit: kept back from the solve when greedy's plan came first
# (``reserve``), else past the limit by at most ``OVERRUN_SHARE`` of it.
GUIDED_SHARE = 0.15
OVERRUN_SHARE = 0.05
PASSES = 3


def reserve(greedy_seconds: float, limit: float) -> float:
    """Seconds to keep back from the solve for the guided passes, greedy's pass having taken
    ``greedy_seconds``: none when they would take more than ``GUIDED_SHARE`` of the limit."""
    need = PASSES * greedy_seconds
    return need if need <= GUIDED_SHARE * limit else 0.0


def guides(sol: Solution, models: list[WindowModel]) -> list[Guide]:
    """The plans worth following: the solver's own (greedy's turns for the pods it left
    pending), and, where a component's solve ended on a plan the replay refused, that plan in
    its component's place (its pods left out either way, or given kube's turn)."""
    out = [Guide(dict(sol.placements), others=True)]
    refused = [wm for wm in models if wm.refused is not None]
    if refused:
        nodes = dict(sol.placements)
        for wm in refused:
            for c in wm.classes:
                for pod in c.pods:
                    nodes.pop(pod.key, None)
        for wm in refused:
            assert wm.refused is not None
            nodes.update(wm.refused[1])
        out += [Guide(nodes, others=True), Guide(nodes, others=False)]
    return out


def room_left(sol: Solution, models: list[WindowModel]) -> bool:
    """Whether kube-scheduler's preemption, replayed on the solver's plan, evicts pods the plan
    keeps (``WindowModel.kube_names`` names every pod the replay evicts). The model takes a node's
    preemptors of one priority as one batch where kube takes them one at a time, and the batch can
    keep a pod the one-at-a-time order evicts: the room that leaves is room a pod the plan leaves
    pending may have, which a guided pass (kube's own turns) finds even where the model's plan is
    proven optimal for the model."""
    kept = {v.pod.key for v in sol.victims}
    return any(key not in kept for wm in models for key in wm.kube_names)


def follow(ctx, static, sol: Solution, models: list[WindowModel], weights: dict[int, int],
           greedy_seconds: float, limit: float, reserved: float = 0.0, *, room: bool = False) -> Optional[str]:
    """Replace ``sol``'s plan with the best guided pass's when that is strictly better in the
    model's order (``choose.not_worse``); returns what was done, for the stats (None: nothing).
    ``greedy_seconds``: what one pass costs (greedy's own, or its estimate where the decision
    must not read the clock). ``reserved``: the seconds the solve left for them (``reserve``).
    ``room``: the replay evicts pods the plan keeps (``room_left``): the passes run even on a plan
    proven optimal for the model."""
    todo = guides(sol, models)
    if (sol.status == "OPTIMAL" and not room) or greedy_seconds * len(todo) > max(reserved, OVERRUN_SHARE * limit):
        return None
    t0 = time.monotonic()
    best = _best_pass(ctx, static, todo, weights)
    if not _better(ctx, best, sol, weights):
        log.debug("guided passes: none better than the solver's plan (%.2fs)", time.monotonic() - t0)
        return None
    log.debug("guided pass: %d placed against the solver's %d (%.2fs)", len(best.placements), len(sol.placements),
              time.monotonic() - t0)
    sol.placements, sol.victims, sol.nominations = dict(best.placements), list(best.victims), dict(best.nominations)
    sol.status, sol.objective, sol.bound = "FEASIBLE", None, None
    return "the solver's plan followed where kube-scheduler's turns allow it, kube's own turns elsewhere"


# What a plan the validator refused gives the decision instead (``rescue``).
RESCUED = ("the solver's plan (refused by the validator) followed where kube-scheduler's turns allow it, "
           "kube's own turns elsewhere")


def rescue(ctx, static, placements: dict[str, int], greedy: GreedyResult, weights: dict[int, int],
           cost: float, time_left: Optional[float]) -> Optional[GreedyResult]:
    """A plan made of a solver plan the validator refused (``placements``): the passes that follow
    it where kube-scheduler's turns allow (each pod on the plan's node when it fits there at its
    turn, or with the victims kube's preemption picks there), the others given kube's own turn or
    left pending. Each pass is kube-scheduler's algorithm led by a plan, so what it places holds at
    every turn, whatever the refused plan got wrong. Returns the best pass when it is strictly
    better than greedy's plan (None otherwise, or when the passes do not fit: ``cost`` is one
    pass's seconds; they run when they take at most the time left, ``time_left``, or past the
    limit at most ``OVERRUN_SHARE`` of it; with ``time_left`` None, a decision that must not read
    the clock, at most ``GUIDED_SHARE`` of the limit, as the reserve for the guided passes)."""
    limit = ctx.config.solver.time_limit_seconds
    if limit <= 0:
        budget = float("inf")
    elif time_left is None:
        budget = GUIDED_SHARE * limit
    else:
        budget = max(OVERRUN_SHARE * limit, time_left)
    if 2 * cost > budget:
        return None
    best = _best_pass(ctx, static, [Guide(dict(placements), others=others) for others in (True, False)], weights)
    if not _better(ctx, best, greedy, weights):
        return None
    return best


def _best_pass(ctx, static, todo: list[Guide], weights: dict[int, int]) -> GreedyResult:
    """The best of the passes that follow each of ``todo`` (the first, of equals)."""
    best: Optional[GreedyResult] = None
    for guide in todo:
        result = schedule_greedy(ctx, static=static, guide=guide)
        if best is None or _better(ctx, result, best, weights):
            best = result
    assert best is not None
    return best


def _better(ctx, a, b, weights: dict[int, int]) -> bool:
    """Whether plan ``a`` is strictly better than ``b`` in the model's order (``b`` is not at least
    as good)."""
    return not not_worse(ctx, (b.placements, b.victims), (a.placements, a.victims), weights)

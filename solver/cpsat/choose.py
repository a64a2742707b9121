"""Which plan is better: the model's lexicographic order read off a plan (``plan_value``), and the
choice between the solver's plan and greedy's (``choose``)."""

from __future__ import annotations

from ..plugin_api import Victim
from ..plugins import registry
from ..disruption import PdbBudgets
from ..scoring import final_state


def tier_weights(priorities: list[int]) -> dict[int, int]:
    """Weight per priority so one pod of a tier outweighs every pod of the tiers below."""
    weights: dict[int, int] = {}
    weight, total = 1, 0
    for p in sorted(set(priorities)):
        weights[p] = weight
        total += weight * priorities.count(p)
        weight = total + 1
    return weights



# A plan as ``choose`` weighs it: (placements, victims).
PlanPair = tuple[dict[str, int], list[Victim]]


def not_worse(ctx, ours: PlanPair, theirs: PlanPair, weights: dict[int, int]) -> bool:
    """Whether plan ``ours`` (placements, victims) is at least as good as ``theirs`` in the model's
    own lexicographic order, both weighed on one scale: the victims' priority tiers are built from
    both plans' victims together (each plan's own tiers could rank one priority-5 victim below
    three priority-0 ones, the reverse of the model's order)."""
    return choose(ctx, ours, theirs, weights, scored=False)[0]


# Why one plan was chosen over the other, by the first level of ``plan_value`` that differs.
_LEVELS = ("places more by priority", "breaks fewer PodDisruptionBudgets", "evicts lower priorities",
           "evicts fewer pods", "gives claims earlier firstAvailable subrequests",
           "keeps preferred-topology gangs in fewer domains")


def choose(ctx, ours: PlanPair, theirs: PlanPair, weights: dict[int, int], *, scored: bool) -> tuple[bool, str]:
    """(whether the solver's plan ``ours`` is kept over greedy's ``theirs``, why). Ties on the model's
    lexicographic levels go to the higher final-state score when ``scored``, else to ``ours``."""
    scale = tier_weights([v.pod.priority for v in (*ours[1], *theirs[1])])
    a, b = plan_value(ctx, *ours, weights, scale), plan_value(ctx, *theirs, weights, scale)
    for level, x, y in zip(_LEVELS, a, b):
        if x != y:
            return (x > y), ("solver's plan " if x > y else "greedy's plan ") + level
    if scored:
        sa = final_state.final_state_score(ctx, ours[0], [v.pod for v in ours[1]])
        sb = final_state.final_state_score(ctx, theirs[0], [v.pod for v in theirs[1]])
        if sa != sb:
            return (sa > sb), ("solver's" if sa > sb else "greedy's") + f" plan scores higher on the final state ({max(sa, sb)} vs {min(sa, sb)})"
    return True, "equal plans: the solver's is kept"


def plan_value(ctx, placements: dict[str, int], victims: list[Victim], weights: dict[int, int],
               victim_weights: dict[int, int]) -> tuple:
    """Lexicographic value of a plan, as the model orders it: placement by priority tier, then
    PodDisruptionBudget violations, the victims' priority tiers (``victim_weights``, one scale for
    every plan compared), the number of victims, then the rules' own levels (``registry.PLAN_RANKS``, in
    the registry's order: how far down their ``firstAvailable`` lists the plan's device claims go,
    then the domains preferred-topology gangs span, widest level first)."""
    placed = sum(weights[ctx.pod(k).priority] for k in placements)
    return (
        placed,
        -PdbBudgets.of(ctx).violations(v.pod for v in victims),
        -sum(victim_weights[v.pod.priority] for v in victims),
        -len(victims),
        tuple(level for rank in registry.PLAN_RANKS for level in rank(ctx, placements, victims)),
    )

"""Preemption in a plan (the validator's reading).

Each victim runs on the named node and its preemptor is placed there and may preempt it
(``shared.preemption_rule.why_not``: strictly higher priority, not ``preemptionPolicy: Never``, not a
member of the victim's own PodGroup); kube-scheduler's own preemption, replayed on the plan in
queue order, evicts it at that preemptor's turn (``replay``); with ``preemption.pdb: hard`` no
budget's allowance is exceeded, read as the Eviction API reads budgets (an empty selector covers
its namespace; a running pod that is not Ready goes unspent where its one budget lets it,
``disruption.eviction_budgets``), and no victim is a pod two budgets or more cover (the Eviction
API refuses those).
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from ...framework import names
from ...group_disruption import evicted_together
from ...disruption import allowances, eviction_budgets
from . import replay as kube_replay
from ..shared.preemption_rule import why_not

if TYPE_CHECKING:
    from ...plugin_api import ReplayView as Replay


def check(replay: Replay) -> None:
    config = replay.ctx.config
    if replay.victims and not config.preemption.enabled:
        replay.report(f"preemption: the plan evicts {len(replay.victims)} pod(s) but preemption is disabled")
    sound: set[str] = set()  # victims whose named preemptor may evict them there
    for v in replay.victims:
        victim, node = v.pod.key, replay.node_name(v.node)
        preemptor = replay.window.get(v.preemptor)
        before = len(replay.problems)
        if preemptor is None or v.preemptor not in replay.assigned:
            replay.report(
                f"preemption: {victim} is evicted from node {node} for {v.preemptor}, which the plan does not place"
            )
            continue
        if replay.assigned[v.preemptor] != v.node and not _goes_with_group(replay, v):
            replay.report(
                f"preemption: {victim} is evicted from node {node} for {v.preemptor}, which is placed on "
                f"node {replay.node_name(replay.assigned[v.preemptor])}"
            )
        for reason in why_not(preemptor, v.pod):
            replay.report(f"preemption: {reason}")
        if len(replay.problems) == before:
            sound.add(victim)
    _check_victims_needed(replay, sound)
    if config.preemption.pdb == "hard" and replay.victims:
        _check_budgets(replay)


def _goes_with_group(replay: Replay, v) -> bool:
    """A member of a ``disruptionMode: all`` PodGroup evicted with a group-mate that its preemptor
    evicts on the preemptor's own node (the group goes as a unit, wherever its members run)."""
    unit = evicted_together(replay.ctx.pod_groups, v.pod)
    if unit is None:
        return False
    where = replay.assigned[v.preemptor]
    return any(evicted_together(replay.ctx.pod_groups, o.pod) == unit and o.preemptor == v.preemptor
               and o.node == where for o in replay.victims)


def _check_victims_needed(replay: Replay, sound: set[str]) -> None:
    """Each victim whose named preemptor may evict it there is one kube-scheduler's own
    preemption evicts, at that pod's turn, replaying the plan in queue order (``replay``)."""
    victims = [v for v in replay.victims if v.pod.key in sound]
    for line in kube_replay.check(replay, victims, replay.static):
        replay.report(line)


def _check_budgets(replay: Replay) -> None:
    """No PodDisruptionBudget loses more pods than it allows (``preemption.pdb: hard``)."""
    pods = replay.ctx.snapshot.pods
    pdbs = replay.ctx.snapshot.pdbs
    covered: dict[str, list[str]] = defaultdict(list)
    for v in replay.victims:
        mine = eviction_budgets(v.pod.pod, pdbs)
        if len(mine) > 1:
            replay.report(
                f"pdb: {v.pod.key} is covered by {len(mine)} PodDisruptionBudgets ({names(b.key for b in mine)}); "
                "the Eviction API refuses to evict such a pod"
            )
        for pdb in mine:
            covered[pdb.key].append(v.pod.key)
    touched = [pdb for pdb in pdbs if covered.get(pdb.key)]
    for pdb, allowed in zip(touched, allowances(touched, pods)):
        evicted = covered[pdb.key]
        if len(evicted) > allowed:
            replay.report(
                f"pdb: PodDisruptionBudget {pdb.key} allows {allowed} disruption(s) but the plan evicts "
                f"{len(evicted)} pod(s) it covers ({names(evicted)})"
            )

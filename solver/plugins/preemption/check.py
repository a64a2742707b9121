"""Preemption on a plan's final state (the validator's reading).

Each victim runs on the named node and its preemptor is placed there and may preempt it
(``victim_room.why_not``: strictly higher priority, not ``preemptionPolicy: Never``, not a
member of the victim's own PodGroup); the victim's room is needed at its level, its preemptor's
priority: with it back and the other victims of that level or above gone, the pods placed there at
that level or above would not fit (``victim_room.needless_victims``); with ``preemption.pdb: hard`` no budget's
allowance is exceeded.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

import numpy as np

from ...framework import names
from ...info import PodInfo
from . import nominated
from ...disruption import disruptions_allowed, pdbs_covering
from .victim_room import entangling, needless_victims, why_not

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
        if replay.assigned[v.preemptor] != v.node:
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


def _check_victims_needed(replay: Replay, sound: set[str]) -> None:
    """Each victim is needed at its level, its named preemptor's priority (``victim_room``);
    checked for the victims whose preemptor is otherwise in order (the others are reported
    already, and are judged here as if evicted just above their own priority)."""
    by_node: dict[int, list[PodInfo]] = defaultdict(list)
    levels: dict[str, int] = {}
    for v in replay.victims:
        by_node[v.node].append(v.pod)
        preemptor = replay.window.get(v.preemptor)
        levels[v.pod.key] = preemptor.priority if v.pod.key in sound and preemptor is not None else v.pod.priority + 1
    state = replay.before
    matchers = entangling(replay.ctx)
    frees = _device_freeing(replay)
    for index, victims in sorted(by_node.items()):
        running = list(state.pods_on[index].values())
        placed = replay.placed_on.get(index, [])

        def claimed(level: int, index: int = index) -> np.ndarray:
            return nominated.claimed(replay, index, level)  # room nominated pods wait for

        for victim, users in needless_victims(
            state.alloc[index], state.used[index], running, placed, victims, levels, state.vector, matchers, claimed, frees
        ):
            if victim.key not in sound:
                continue
            who = f"its room goes to {names(p.key for p in users)}, placed after it" if users else "no placed pod needs its room"
            replay.report(
                f"preemption: {victim.key} (priority {victim.priority}) is evicted from node "
                f"{replay.node_name(index)} for a pod of priority {levels[victim.key]}, but the pods placed there "
                f"at that priority or above fit without it (the other victims gone); {who}"
            )


def _device_freeing(replay: Replay):
    """Whether a victim's eviction gives devices back (one of its claims is reserved only for
    pods the plan evicts), or None when the snapshot has no allocated claim or config
    ``preemption.freeDevices`` is off (then no eviction gives devices back)."""
    snapshot = replay.ctx.snapshot
    if not replay.ctx.config.preemption.free_devices:
        return None
    if not any(c.status.allocation is not None for c in snapshot.resource_claims):
        return None
    from ..dynamic_resources import for_snapshot
    from ..dynamic_resources.check import freed_claims

    freed = freed_claims(for_snapshot(snapshot), {v.pod.key for v in replay.victims})
    if not freed:
        return None
    return lambda pod: bool(pod.pod.spec.resource_claims) and any(pc.key in freed for pc in snapshot.pod_claims(pod.pod))


def _check_budgets(replay: Replay) -> None:
    """No PodDisruptionBudget loses more pods than it allows (``preemption.pdb: hard``)."""
    pods = replay.ctx.snapshot.pods
    pdbs = replay.ctx.snapshot.pdbs
    covered: dict[str, list[str]] = defaultdict(list)
    for v in replay.victims:
        for pdb in pdbs_covering(v.pod.pod, pdbs):
            covered[pdb.key].append(v.pod.key)
    for pdb in pdbs:
        evicted = covered.get(pdb.key)
        if not evicted:
            continue
        allowed = disruptions_allowed(pdb, pods)
        if len(evicted) > allowed:
            replay.report(
                f"pdb: PodDisruptionBudget {pdb.key} allows {allowed} disruption(s) but the plan evicts "
                f"{len(evicted)} pod(s) it covers ({names(evicted)})"
            )

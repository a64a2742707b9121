"""Who may preempt whom: DefaultPreemption's eligibility, asked by its PostFilter, replay, check
and ``Plugin.may_preempt`` hook, and by the encodings that weigh evictions (inter-pod affinity's
victims' room)."""

from __future__ import annotations

from collections.abc import Collection, Iterable

from ...info import PodInfo


def why_not(preemptor: PodInfo, victim: PodInfo) -> list[str]:
    """Why ``preemptor`` may not evict ``victim`` at all, one sentence per reason; ``[]`` when it
    may. The rule of who may preempt whom, in one place: a victim has strictly lower priority, the
    preemptor's preemptionPolicy is not Never, and a gang never evicts a member of its own
    PodGroup (that would undo the gang)."""
    reasons = []
    if victim.priority >= preemptor.priority:
        reasons.append(
            f"{victim.key} (priority {victim.priority}) is evicted for {preemptor.key} "
            f"(priority {preemptor.priority}): a victim must have strictly lower priority"
        )
    if preemptor.preempt_never:
        reasons.append(f"{preemptor.key} has preemptionPolicy Never but evicts {victim.key}")
    if preemptor.waiting_on:
        reasons.append(f"{preemptor.key} evicts {victim.key}, but it waits for its victims on its nominated "
                       f"node {preemptor.waiting_on}: it may not preempt again")
    if victim.group is not None and victim.group == preemptor.group:
        reasons.append(
            f"{victim.key} is evicted for {preemptor.key}, a member of its own PodGroup "
            f"{victim.group}: a gang never preempts itself"
        )
    return reasons


def may_preempt(preemptor: PodInfo, victim: PodInfo) -> bool:
    """Whether ``preemptor`` may evict ``victim`` at all (``why_not`` finds no reason against)."""
    return not why_not(preemptor, victim)


def evictable(preemptor: PodInfo, pods: Iterable[PodInfo], excluded: Collection[str] = ()) -> list[PodInfo]:
    """The pods of ``pods`` (keys outside ``excluded``) that ``preemptor`` may evict: those
    ``may_preempt`` allows, with the preemptor's own reasons asked once instead of per pod (a
    preemption's dry runs ask this of ~30 pods per node, tens of thousands of times a window)."""
    if preemptor.preempt_never or preemptor.waiting_on:
        return []  # ``why_not`` has a reason against every victim
    priority, own = preemptor.priority, preemptor.group
    return [p for p in pods
            if p.priority < priority and p.key not in excluded and (own is None or p.group != own)]

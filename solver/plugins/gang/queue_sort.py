"""Coscheduling's QueueSort (``plugin_api.QueueSort``): a gang's members together in the queue,
at the place of its first member in priority order, so that the gang's turns follow each other.
Greedy's pass and the preemption replay both read the queue it gives (``SchedulingContext.queue``):
a plan is replayed in the order greedy took the pods, a member left unplaced included."""

from __future__ import annotations

from typing import Any

from ...info import PodInfo


def together(ctx: Any, queue: list[PodInfo]) -> list[PodInfo]:
    members: dict[str, list[PodInfo]] = {}
    for pod in queue:
        if pod.group is not None:
            members.setdefault(pod.group, []).append(pod)
    if not members:
        return queue
    out: list[PodInfo] = []
    for pod in queue:
        if pod.group is None:
            out.append(pod)
        elif pod.group in members:
            out.extend(members.pop(pod.group))
    return out

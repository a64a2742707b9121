"""Greedy's part (``plugin_api.GreedyPart``): once a preemption stands, a victim whose PodGroup
says ``disruptionMode: all`` takes every other running member of its group with it, for the
same preemptor, as 1.37's workload-aware preemption evicts such a group as a unit.

A gang member's preemption stands only at its gang's Permit (``gang``'s part settles it first, in
registry order): victims of a preemptor whose gang still has members to come wait for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...group_disruption import any_unit, co_victims, evicted_together
from ...info import PodInfo
from ...plugin_api import GreedyPart, PassResult, Victim
from ...state import ClusterState


@dataclass
class WholeGroupEviction(GreedyPart):
    ctx: Any
    last_member: dict[str, str]  # group -> key of its last window member (queue order keeps it last)
    turned: set[str] = field(default_factory=set)  # groups whose every window member had its turn
    co: set[str] = field(default_factory=set)  # keys evicted because a group-mate was

    active: bool = True  # some group is evicted only as a whole (else the part does nothing)

    @staticmethod
    def of(ctx, state: ClusterState, static, trial) -> "WholeGroupEviction":
        if not any_unit(ctx.pod_groups):
            return WholeGroupEviction(ctx, {}, active=False)
        last = {p.group: p.key for p in ctx.window if p.group is not None}
        return WholeGroupEviction(ctx, last)

    def settle(self, pod: PodInfo, state: ClusterState, result: PassResult) -> list[PodInfo]:
        if not self.active:
            return []
        if pod.group is not None and self.last_member.get(pod.group) == pod.key:
            self.turned.add(pod.group)
        if not any(v.pod.group is not None for v in result.victims):
            return []
        groups = self.ctx.pod_groups
        window = {p.key: p for p in self.ctx.window}
        for victim in list(result.victims):
            if victim.pod.key in self.co or evicted_together(groups, victim.pod) is None:
                continue
            preemptor = window.get(victim.preemptor)
            if preemptor is not None and preemptor.group is not None and preemptor.group not in self.turned:
                continue  # its gang's Permit has not settled it yet
            for mate, node in co_victims(groups, victim.pod, list(state.pods())):
                state.remove(mate)
                result.victims.append(Victim(mate, node, victim.preemptor))
                self.co.add(mate.key)
        return []

"""DynamicResources: devices for ResourceClaims (filter, encoding, final check)."""

from __future__ import annotations

from ...plugin_api import PlanPart, Plugin
from . import check, cycle, encode, filter, hold_for, plan
from .hint import DeviceBook
from .prebind import prebind
from .room import DeviceRoom


def prepare(snapshot, config, window, state, static):
    """A snapshot with claims or slices (or a window pod with claims): its devices held on the
    state (``DraHold``), and each claiming window pod's templates as part of its signature."""
    if snapshot.resource_claims or snapshot.resource_slices or any(p.pod.spec.resource_claims for p in window):
        hold = hold_for(snapshot, state.nodes, free_devices=config.preemption.free_devices)
        state.attach(filter.NAME, hold)
        for info in window:
            if info.pod.spec.resource_claims:
                info.devices_key = encode.template_signature(hold, info)


def plan_output(ctx, placements, victims, engine_state):
    """The plan's ``allocations``: each new claim allocation, the plan replayed on the snapshot."""
    return PlanPart(allocations=plan.plan_allocations(ctx, placements, victims))


PLUGIN = Plugin(filter.NAME, filter=filter, cycle=cycle.cycle, encode=(encode.encode,), checks=(check.check,),
                per_node_state=filter.uses_node_state, prepare=prepare, packing=DeviceBook,
                plan_rank=plan.plan_rank, plan_output=plan_output, kind_room=DeviceRoom(), prebind=prebind)

"""DynamicResources: devices for ResourceClaims (filter, encoding, final check)."""

from __future__ import annotations

from ...plugin_api import Plugin
from . import check, cycle, encode, filter, hold_for, plan
from .hint import DeviceBook


def prepare(snapshot, config, window, state):
    """A snapshot with claims or slices (or a window pod with claims): its devices held on the
    state (``DraHold``), and each claiming window pod's templates as part of its signature."""
    if snapshot.resource_claims or snapshot.resource_slices or any(p.pod.spec.resource_claims for p in window):
        state.dra = hold_for(snapshot, state.nodes, free_devices=config.preemption.free_devices)
        for info in window:
            if info.pod.spec.resource_claims:
                info.devices_key = encode.template_signature(state.dra, info)


PLUGIN = Plugin(filter.NAME, filter=filter, cycle=cycle.cycle, encode=(encode.encode,), checks=(check.check,),
                per_node_state=filter.uses_node_state, prepare=prepare, packing=DeviceBook,
                plan_rank=plan.plan_rank, plan_allocations=plan.plan_allocations)

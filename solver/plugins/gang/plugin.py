"""Coscheduling: all-or-nothing groups, their minResources, required and preferred topology
(window-wide encodings, final checks; its queue order, PreFilter and Permit in greedy's pass)."""

from __future__ import annotations

from ...plugin_api import Plugin
from . import check, min_resources, permit, preferred, topology
from .greedy import GangPass
from .window import GangWindow


def prune(pod, state, can_evict, window):
    """A topology gang's members: the nodes of the domains it may take."""
    part = window.get(permit.NAME)
    return topology.prune(pod, part.gangs if part is not None else {}, state)


def plan_rank(ctx, placements):
    """Of two plans otherwise equal, the one keeping preferred-topology gangs in fewer domains,
    widest level first."""
    return tuple(-count for count in preferred.spans(ctx, placements))


def couples(x):
    """A gang's members are placed all or nothing, together."""
    group = x.group
    return None if group is None else (lambda y: y.group == group)


PLUGIN = Plugin(permit.NAME, prune=prune, couples=couples, greedy=GangPass.of, window=GangWindow.of, plan_rank=plan_rank,
                # min_resources after permit: it orders the kinds' run counts permit.encode makes
                window_encode=(permit.encode, min_resources.encode, topology.encode, preferred.encode),
                checks=(check.check, topology.check))

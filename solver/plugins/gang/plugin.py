"""Coscheduling: all-or-nothing groups, their minResources, required and preferred topology
(window-wide encodings, final checks; its queue order, PreFilter and Permit in greedy's pass)."""

from __future__ import annotations

from ...plugin_api import Coupling, Plugin, Reads
from . import check, min_resources, permit, preferred, queue_sort, topology
from .encoding import GangEncoding
from .greedy import GangPass
from .window import GangWindow


def prune(pod, state, can_evict, window):
    """A topology gang's members: the nodes of the domains it may take."""
    part = window.get(permit.NAME)
    return topology.prune(pod, part.gangs if part is not None else {}, state)


def encode(wm):
    """The gang rules' encoding of a window, into one ``GangEncoding`` (the window part's, which
    carries the window's gangs and kinds; an empty one without it), returned for the engine to
    keep: minResources after Permit (it orders the kinds' run counts Permit makes), then
    required and preferred topology."""
    part = wm.window.get(permit.NAME)
    enc = part.encoding() if part is not None else GangEncoding()
    permit.encode(wm, enc)
    min_resources.encode(wm, enc)
    topology.encode(wm, enc)
    preferred.encode(wm, enc)
    return enc


def plan_rank(ctx, placements, victims):
    """Of two plans otherwise equal, the one keeping preferred-topology gangs in fewer domains,
    widest level first (the victims do not matter here)."""
    return tuple(-count for count in preferred.spans(ctx, placements))


def repack_keep(ctx, origin):
    """Re-packing: a gang with required topology whose members (moving or staying) share one
    domain today stays in it. A gang already split is left as it is (the plan's validation then
    names it)."""
    where: dict[str, list[int]] = {}
    for pod_key, n in origin.items():
        pod = ctx.pod(pod_key)
        if pod is not None and pod.group is not None:
            where.setdefault(pod.group, []).append(n)
    for pod, n in ctx.state.pods():
        if pod.group in where:
            where[pod.group].append(n)
    homes = {}
    for group, nodes in where.items():
        key = topology.key_of(ctx.pod_groups.get(group))
        domain = topology.home_domain(ctx.state, key, nodes) if key is not None else None
        if key is not None and domain is not None:
            homes[group] = (key, domain)

    def keep(rep):
        home = homes.get(rep.group) if rep.group else None
        if home is None:
            return None
        key, domain = home
        return topology.domain_ids(ctx.state, key) == domain

    return keep


def couples(x):
    """A gang's members are placed all or nothing, together."""
    group = x.group
    return None if group is None else (lambda y: y.group == group)


def coupling(pod, state):
    return Coupling.ACROSS if pod.group is not None else Coupling.NONE


PLUGIN = Plugin(permit.NAME, prune=prune, couples=couples, greedy=GangPass.of, queue_sort=queue_sort.together, window=GangWindow.of, plan_rank=plan_rank, repack_keep=repack_keep,
                window_encode=(encode,),
                checks=(check.check, topology.check), reads=Reads(coupling=coupling))

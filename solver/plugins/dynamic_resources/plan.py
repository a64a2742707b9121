"""The devices a plan's placed pods get, read off the plan (placements and victims), and how far
down their ``firstAvailable`` lists those allocations go.

``plan_hold`` replays a plan on the snapshot's state: its victims removed, its pods added in
placement order, each given what the DynamicResources filter finds on its node; when that order
strands a pod (an earlier pod took the devices a later one needed), the node's claims are
chosen again together (``DraHold.place_jointly``), as the model counted them — a node whose
pods still go unserved (a device several nodes reach taken by an earlier node) served first,
a few orders at most. The plan's
``allocations`` (``solver.api``) are this hold's, and ``preference_cost`` reads the same, so a
solver plan and greedy's are weighed on what each would really be given.
"""

from __future__ import annotations

from typing import Any, Optional

from models.plan import DeviceAllocation

from .allocator import _alternatives
from .hold import DraHold
from .hold import hold_of


# How many node orders ``plan_hold`` tries for a plan placement order strands.
_JOINT_TRIES = 3


def plan_hold(ctx: Any, placements: dict[str, int], victims: list[Any]) -> Optional[DraHold]:
    """The state's DRA hold after the plan, or None when no placed pod has claims."""
    if hold_of(ctx.state) is None or not any(ctx.pod(k).pod.spec.resource_claims for k in placements):
        return None
    cache = ctx.__dict__.setdefault("_dra_plan_holds", {})
    key = (tuple(placements.items()), tuple(sorted(v.pod.key for v in victims)))
    hit = cache.get(key)
    if hit is not None:
        return hit
    base = ctx.state.copy()
    for v in victims:
        base.remove(v.pod)
    final = base.copy()
    for name, n in placements.items():
        final.add(ctx.pod(name), n)
    dra, start = hold_of(final), hold_of(base)
    assert dra is not None and start is not None  # the context's state holds devices (checked above)
    pods = [ctx.pod(name) for name in placements]
    if not dra.complete(pods):
        # Node by node, and where a node's pods go unserved (an earlier node took a device it
        # needs: one several nodes reach, a preferred firstAvailable choice), that node first.
        order = [(ctx.pod(name), n) for name, n in placements.items()]
        for _ in range(_JOINT_TRIES):
            joint = start.copy()
            joint.place_jointly(order)
            if joint.complete(pods):
                dra = joint
                break
            stuck = {n for p, n in order if not joint.complete([p])}
            again = [e for e in order if e[1] in stuck] + [e for e in order if e[1] not in stuck]
            if again == order:
                break  # (the validator names what is missing on the placement-order one)
            order = again
    if len(cache) > 8:
        cache.clear()
    cache[key] = dra
    return dra


def preference_cost(ctx: Any, placements: dict[str, int], victims: list[Any]) -> int:
    """Σ over the plan's new allocations and their ``firstAvailable`` requests of the position of
    the subrequest given (0: the first) — what the model's ``dra_first_available`` level
    counts, negated. 0 without replaying anything when no placed pod's claim has such a request."""
    hold = hold_of(ctx.state)
    if hold is None or not any(
            pc.claim is not None and any(r.first_available for r in pc.claim.spec.devices.requests)
            for name in placements if ctx.pod(name).pod.spec.resource_claims for pc in hold.claims_of(ctx.pod(name))):
        return 0
    dra = plan_hold(ctx, placements, victims)
    if dra is None:
        return 0
    claims = {}
    for key, pods in dra.users.items():
        pod = ctx.pod(min(pods))
        for pc in dra.claims_of(pod):
            if pc.key == key and pc.claim is not None:
                claims[key] = pc.claim
    cost = 0
    for key, allocation in dra.added_allocations().items():
        claim = claims.get(key)
        if claim is None:
            continue
        given = {r.request for r in allocation.results}
        for request in claim.spec.devices.requests:
            if not request.first_available:
                continue
            for rank, alt in enumerate(_alternatives(request)):
                if alt.name in given:
                    cost += rank
                    break
    return cost


def plan_rank(ctx: Any, placements: dict[str, int], victims: list[Any]) -> tuple[int]:
    """The plan comparison's DynamicResources level: fewer steps down ``firstAvailable`` lists is
    better (``cpsat/choose.plan_value``)."""
    return (-preference_cost(ctx, placements, victims),)


def plan_allocations(ctx: Any, placements: dict[str, int], victims: list[Any]) -> tuple[Any, ...]:
    """The plan's ``allocations``: each claim allocated anew, with the pods using it."""
    dra = plan_hold(ctx, placements, victims)
    if dra is None:
        return ()
    return tuple(DeviceAllocation(claim=key, pods=tuple(sorted(dra.users[key])), allocation=a.to_json())
                 for key, a in dra.added_allocations().items())

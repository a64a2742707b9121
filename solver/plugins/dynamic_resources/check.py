"""The allocation rule read on a final state, independently of how it was reached: what the
validator asks of every plan whose pods use ResourceClaims.

``problems`` gets where every pod sits and every claim's allocation (those the snapshot had and
those the plan adds) and names each broken rule: a device given to two claims, a device that does
not exist or that its request may not take (class and request selectors, taints), a request with
the wrong number of devices, a ``matchAttribute`` / ``distinctAttribute`` broken, a shared
counter overdrawn, a shareable device's capacities overdrawn or a share given less than its
request consumes (``capacity``), a pod placed without its claims allocated or on a node its
allocation or its devices do not admit.
"""

from __future__ import annotations

import re
from collections import defaultdict
from fractions import Fraction
from typing import Any, Mapping

from models.dra import ResourceClaim
from models.objects import Node, Pod

from .allocator import AllocationError, ClaimAllocation, Rules, _alternatives, attribute_value
from .capacity import capacity_problems, consumed_of, shareable
from .devices import DeviceId


def problems(rules: Rules, claims: Mapping[str, ResourceClaim], allocations: Mapping[str, ClaimAllocation],
             placed: list[tuple[Pod, Node, list[Any]]]) -> list[str]:
    """Broken rules, one line each. ``claims``: every claim by key (templates' claims included);
    ``allocations``: the final allocation of each allocated claim; ``placed``: each pod holding
    a node with its node and its resolved claims (``ClusterSnapshot.pod_claims``)."""
    out: list[str] = []
    inventory = rules.inventory
    # Devices that allow multiple allocations: shared while their capacities last.
    # (an overdraw the snapshot's allocations make alone is the cluster's, not the plan's)
    over, shareable = capacity_problems(inventory, allocations, set(rules.allocated_claims))
    holders: dict[DeviceId, list[str]] = defaultdict(list)
    for key, allocation in sorted(allocations.items()):
        for r in allocation.results:
            if not r.admin:  # admin access holds no device
                holders[(r.driver, r.pool, r.device)].append(key)
    for device_id, keys in sorted(holders.items()):
        if len(keys) > 1 and device_id not in shareable:
            out.append(f"device {'/'.join(device_id)} is given to {len(keys)} claims: {', '.join(keys)}")
    out.extend(over)
    used: dict[tuple[str, str, str], dict[str, Fraction]] = defaultdict(dict)
    drawn: set[DeviceId] = set()  # a shared device draws its counters once
    for key, allocation in sorted(allocations.items()):
        claim = claims.get(key)
        if claim is None:
            out.append(f"resourceclaim {key} is allocated but is not in the snapshot")
            continue
        out.extend(_claim_problems(rules, key, claim, allocation))
        for r in allocation.results:
            record = inventory.devices.get((r.driver, r.pool, r.device))
            if record is None or r.admin or (record.id in shareable and record.id in drawn):
                continue
            drawn.add(record.id)
            for use in record.device.consumes_counters:
                held = used[(r.driver, r.pool, use.counter_set)]
                for name, c in use.counters.items():
                    held[name] = held.get(name, Fraction(0)) + c.value
    for (driver, pool, counter_set), held in sorted(used.items()):
        info = inventory.pools.get((driver, pool))
        totals = info.counters.get(counter_set, {}) if info is not None else {}
        for name, amount in sorted(held.items()):
            if amount > totals.get(name, Fraction(0)):
                out.append(f"pool {driver}/{pool}: counter {counter_set}.{name} is drawn to {amount}, "
                           f"above its {totals.get(name, Fraction(0))}")
    for pod, node, pod_claims in placed:
        for pc in pod_claims:
            if not pc.needed:
                continue
            given = allocations.get(pc.key) if pc.key else None
            if given is None:
                out.append(f"pod {pod.key} on {node.name}: resourceclaim {pc.key or pc.name} is not allocated"
                           + (f" ({pc.waiting})" if pc.waiting else ""))
                continue
            if not given.admits(node):
                out.append(f"pod {pod.key} on {node.name}: resourceclaim {pc.key}'s allocation does not admit the node")
            for r in given.results:
                record = inventory.devices.get((r.driver, r.pool, r.device))
                if record is not None and not record.scope.admits(node):
                    out.append(f"pod {pod.key} on {node.name}: device {r.driver}/{r.pool}/{r.device} of "
                               f"resourceclaim {pc.key} cannot be used from that node")
    return out


def _claim_problems(rules: Rules, key: str, claim: ResourceClaim, allocation: ClaimAllocation) -> list[str]:
    out: list[str] = []
    inventory = rules.inventory
    by_request: dict[str, list] = defaultdict(list)
    consumed = {(r.request, (r.driver, r.pool, r.device)): dict(r.consumed) for r in allocation.results
                if r.consumed and r.share_id is not None}  # (without shareID: held whole)
    for r in allocation.results:
        record = inventory.devices.get((r.driver, r.pool, r.device))
        if record is None:
            out.append(f"resourceclaim {key}: device {r.driver}/{r.pool}/{r.device} is in no ResourceSlice")
            continue
        by_request[r.request].append(record)
        admin = {a.name: a.admin for req in claim.spec.devices.requests for a in _alternatives(req)}.get(r.request)
        if admin is not None and admin != r.admin:
            out.append(f"resourceclaim {key}: device {r.driver}/{r.pool}/{r.device} of request {r.request}: "
                       f"adminAccess is {str(r.admin).lower()}, the request's is {str(admin).lower()}")
    refused = rules.admin_refused(key, claim) if key not in rules.allocated_claims else ""
    if refused:
        out.append(refused)
    alts = {alt.name: alt for request in claim.spec.devices.requests for alt in _alternatives(request)}
    for request in claim.spec.devices.requests:
        chosen = [alt for alt in _alternatives(request) if by_request.get(alt.name)]
        if len(chosen) != 1:
            out.append(f"resourceclaim {key}: request {request.name} has devices for "
                       f"{len(chosen)} of its alternatives, not 1")
            continue
        alt = chosen[0]
        records = by_request[alt.name]
        if alt.mode == "ExactCount" and len(records) != alt.count:
            out.append(f"resourceclaim {key}: request {alt.name} has {len(records)} devices, wants {alt.count}")
        for record in records:
            try:
                fits = rules.candidate(key, alt, record)
            except AllocationError as exc:
                out.append(f"resourceclaim {key}: {exc}")
                continue
            if not fits:
                out.append(f"resourceclaim {key}: device {'/'.join(record.id)} does not meet request {alt.name} "
                           "(class or request selectors, capacity requests, or an untolerated taint)")
            elif shareable(record) and not alt.admin and key not in rules.allocated_claims:
                # (a share the snapshot holds was sized by the policy of its day: a fact, kept)
                need = alt.demand(record) or {}
                given = consumed_of(record, consumed.get((alt.name, record.id)))
                short = sorted(n for n, q in need.items() if given.get(n, Fraction(0)) < q)
                if short:
                    out.append(f"resourceclaim {key}: device {'/'.join(record.id)} is given less of "
                               f"{', '.join(short)} than request {alt.name} consumes")
    for name in by_request:
        if name not in alts:
            out.append(f"resourceclaim {key}: devices for request {name}, which the claim does not have")
    for i, c in enumerate(claim.spec.devices.constraints):
        attribute = c.match_attribute or c.distinct_attribute or ""
        records = [rec for name, recs in by_request.items()
                   if not c.requests or name in c.requests or name.split("/")[0] in c.requests for rec in recs]
        values = [attribute_value(rec, attribute) for rec in records]
        if any(v is None for v in values):
            out.append(f"resourceclaim {key}: constraints[{i}]: a device has no attribute {attribute}")
        elif c.match_attribute is not None and len(set(map(repr, values))) > 1:
            out.append(f"resourceclaim {key}: constraints[{i}]: devices differ in {attribute} (matchAttribute)")
        elif c.distinct_attribute is not None and len(set(map(repr, values))) != len(values):
            out.append(f"resourceclaim {key}: constraints[{i}]: devices share a value of {attribute} (distinctAttribute)")
    return out


def freed_claims(rules: Rules, evicted: set[str]) -> set[str]:
    """The snapshot's allocated claims every pod of whose ``status.reservedFor`` is in
    ``evicted`` (pod keys): the plan's evictions deallocate them."""
    from .hold import claim_holders

    return {key for key, pods in claim_holders(rules).items() if pods <= evicted}


def check(replay: Any) -> None:
    """The validator's DRA check (``plugins.registry.FINAL_CHECKS``): the snapshot's allocations
    and the plan's (``Plan.allocations``) read together on the final state; one ``dra:`` line
    per broken rule."""
    from pydantic import ValidationError

    from models.dra import AllocationResult

    from . import for_snapshot
    from .allocator import DeviceResult

    ctx = replay.ctx
    snapshot = ctx.snapshot
    placed = [(pod, index) for pod, index in replay.placed() if pod.pod.spec.resource_claims]
    if not placed and not replay.plan.allocations:
        return  # (a plan's evictions alone free devices; nothing here can break)
    rules = for_snapshot(snapshot)
    claims: dict[str, ResourceClaim] = dict(snapshot.resource_claim_by_key)
    pod_claims = {}
    for pod, _ in placed:
        pod_claims[pod.key] = snapshot.pod_claims(pod.pod)
        for pc in pod_claims[pod.key]:
            if pc.claim is not None:
                claims.setdefault(pc.key, pc.claim)
    held: dict[str, ClaimAllocation] = dict(rules.initial_state().allocations)
    allocations = dict(held)
    # A claim reserved only for pods the plan evicts is deallocated once they are gone: with
    # ``preemption.freeDevices`` its devices are free for the plan's allocations; without (as in
    # kube-scheduler) it stays allocated and a plan giving its devices away is refused.
    freed = freed_claims(rules, {v.pod.key for v in replay.victims})
    free_devices = ctx.config.preemption.free_devices
    if free_devices:
        for key in freed:
            allocations.pop(key, None)
    for i, entry in enumerate(replay.plan.allocations):
        try:
            result = AllocationResult.model_validate(entry.allocation)
        except ValidationError as exc:
            replay.report(f"dra: plan allocations[{i}] ({entry.claim}): not a ResourceClaim allocation: "
                          f"{exc.errors(include_url=False)[0]['msg']}")
            continue
        if entry.claim in allocations:
            replay.report(f"dra: plan allocates resourceclaim {entry.claim}, which the snapshot has allocated already")
            continue
        if entry.claim not in claims:
            replay.report(f"dra: plan allocates resourceclaim {entry.claim}, which no placed pod uses")
            continue
        results = tuple(DeviceResult.of(r) for r in result.devices.results)
        allocations[entry.claim] = ClaimAllocation(entry.claim, results, result.node_selector)
    rows = [(pod.pod, ctx.nodes[index].node, pod_claims[pod.key]) for pod, index in placed]
    # What the snapshot's own allocations break before any plan (a claim allocated to a device
    # no ResourceSlice publishes any more: its driver unpublished it, its node is gone) is the
    # cluster's state, not the plan's fault: not reported, or no plan of the cluster would pass.
    # A line the plan changes (one more claim on a device, a counter drawn further) still is.
    known = set(problems(rules, claims, held, [])) if held else set()
    for line in problems(rules, claims, allocations, rows):
        if line in known:
            continue
        kept = [] if free_devices else sorted(k for k in freed if re.search(re.escape(k) + r"(?![\w.-])", line))
        if kept:
            line += (f" ({', '.join(kept)}: reserved only for evicted pods, but a victim's devices are not "
                     "free until its claim is deallocated after the pod is deleted; config "
                     "preemption.freeDevices: true counts them free)")
        replay.report(f"dra: {line}")

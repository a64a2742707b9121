"""Devices the window model's evictions give back (config ``preemption.freeDevices``): a literal
per snapshot claim reserved only for pods the model may evict (``freed_literals``), read by the
device counts (``encode``) and, through the book's ``plugin_api.GivesBackInModel``, by
DefaultPreemption's reprieve (``device_reasons``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ...plugin_api import EncodeModel as WindowModel


def freed_literals(wm: "WindowModel", dra: Any) -> dict[str, Any]:
    """Per snapshot claim of ``dra`` (the state's ``DraHold``, or None) that evictions can
    deallocate (``hold.claim_holders``: reserved only for pods), a literal true only when every
    pod it is reserved for is evicted (``evict[v]``; a reserving pod the model cannot evict keeps
    it allocated). Made once per model: the device counts and the reprieve read the same literal.
    None at all when config ``preemption.freeDevices`` is off (``DraHold.holders``)."""
    found = wm.__dict__.get("_dra_freed")
    if found is not None:
        return found
    found = {}
    if dra is not None and wm.evict:
        for key, pods in sorted(dra.holders().items()):
            if not all(p in wm.evict for p in pods) or key not in dra.state.allocations:
                continue
            evicts = [wm.evict[p] for p in sorted(pods)]
            lit = wm.model.new_bool_var(f"dra_freed[{key}]")
            for e in evicts:
                wm.model.add_implication(lit, e)
            found[key] = lit
    wm.__dict__["_dra_freed"] = found
    return found


def device_reasons(dra: Any, wm: "WindowModel", n: int, victim: Any, level: int, above: list) -> list:
    """Devices as room, in the model: a literal true only when one of ``victim``'s claims is given
    back (``freed_literals``) and a class with ResourceClaims is placed on node ``n`` at or above
    ``level`` — its devices are room such a pod may take. Read per node, not per device (the
    model counts devices by kind)."""
    if not victim.pod.spec.resource_claims:
        return []
    freed = freed_literals(wm, dra)
    lits = [freed[pc.key] for pc in dra.claims_of(victim) if pc.key in freed]
    users = [(cls, var) for cls, var in above if cls.rep.pod.spec.resource_claims]
    if not lits or not users:
        return []
    m = wm.model
    there = [wm.new_presence(f"dra_user[{n},{cls.id}]", [var], wm.ub_of(cls.id, n)) for cls, var in users]
    b = m.new_bool_var(f"dra_need[{n},{level},{victim.key}]")
    m.add_bool_or(lits).only_enforce_if(b)
    m.add_bool_or(there).only_enforce_if(b)
    return [b]

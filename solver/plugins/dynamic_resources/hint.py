"""Devices in the packing hint (``cpsat/hint.py`` asks the plugin's ``packing`` hook, never this
module by name; ``plugin_api.PackingBook``): where counting them is exact, the packing places pods
with claims and takes their devices as it goes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from .allocator import AllocationError, _alternatives, attribute_value

if TYPE_CHECKING:
    from ...plugin_api import EncodeModel as WindowModel


def devices_per_kind(rules: Any, claims: list, node: Any) -> Optional[dict[int, int]]:
    """Devices per kind one pod with ``claims`` takes on ``node``; None: it cannot go there;
    raises LookupError where one node-local kind per request does not describe the choice (the
    count would not be exact). Claims already allocated, or not needed, take nothing more."""
    kinds = rules.inventory.kinds_on(node)
    out: dict[int, int] = {}
    for pc in claims:
        if not pc.needed or (pc.claim is not None and pc.claim.status.allocation is not None):
            continue
        chosen: dict[str, tuple[Any, int]] = {}
        for request in pc.claim.spec.devices.requests:
            (alt,) = _alternatives(request)
            fits = [k for k in kinds if rules.candidate(pc.key, alt, k.members[0])]
            if not fits:
                return None
            if len(fits) > 1 or fits[0].scope.node_name is None:
                raise LookupError
            chosen[request.name] = (fits[0], alt.count)
        for c in pc.claim.spec.devices.constraints:
            covered = [v for name, v in chosen.items() if not c.requests or name in c.requests]
            attribute = c.match_attribute or c.distinct_attribute or ""
            values = [attribute_value(k.members[0], attribute) for k, _ in covered]
            if any(v is None for v in values):
                return None
            if c.match_attribute is not None and len({repr(v) for v in values}) > 1:
                return None
            if c.distinct_attribute is not None and (len(covered) > 1 or any(n > 1 for _, n in covered)):
                raise LookupError
        for k, n in chosen.values():
            out[k.index] = out.get(k.index, 0) + n
    return out


class DeviceBook:
    """Devices for the packing (DynamicResources), where counting them is exact: a class whose
    claims are all still to be made from ExactCount templates (``PodInfo.devices_key``) and
    whose every request may take, on each candidate node, devices of one node-local kind only
    (``matchAttribute`` then holds when that kind has the attribute; ``distinctAttribute`` only
    over single devices). Per such class and candidate, the devices one pod takes per kind;
    other classes with claims stay out of the packing."""

    def __init__(self, wm: WindowModel) -> None:
        self.free: dict[int, int] = {}
        self.rows: dict[int, list[Optional[dict[int, int]]]] = {}
        dra = wm.state.dra
        if dra is None:
            return
        rules = dra.rules
        for kind in rules.inventory.kinds:
            self.free[kind.index] = sum(1 for r in kind.members if r.id not in dra.state.used)

        for cls in wm.classes:
            rep = cls.rep
            if not rep.pod.spec.resource_claims or not rep.devices_key:
                continue
            claims = dra.claims_of(rep)
            try:
                self.rows[cls.id] = [devices_per_kind(rules, claims, wm.state.nodes[n].node) for n in wm.cand[cls.id].tolist()]
            except (LookupError, AllocationError, ValueError):
                continue

    def cap(self, row: Optional[dict[int, int]]) -> int:
        """Pods more that the free devices take (a large number for a pod that takes none)."""
        if row is None:
            return 0
        return min((self.free[k] // n for k, n in row.items() if n > 0), default=1 << 30)

    def take(self, row: Optional[dict[int, int]], pods: int) -> None:
        for k, n in (row or {}).items():
            self.free[k] -= pods * n

"""The DRA part of a ``ClusterState``: the devices held as pods come and go.

A state that has one (its book under ``NAME`` in ``ClusterState.books``, attached by the plugin's
``prepare`` when the snapshot has
claims or slices) allocates a pod's unallocated claims when the pod is added on a node — the
allocation the DynamicResources filter found there — and gives them back when the last pod of
the state using them is removed (a gang rolled back, a trial placement undone). Claims the
snapshot had allocated stay allocated whatever is removed: a preemption victim's devices are
not counted as freed (kube-scheduler frees them only once the claim is deallocated).
"""

from __future__ import annotations

from typing import Any, Optional

from models.dra import PodClaim

from .allocator import AllocationError, ClaimAllocation, DraState, Rules
from .freed import device_reasons

NAME = "DynamicResources"  # the plugin's name: its book's key in ``ClusterState.books``


def claim_holders(rules: Rules) -> dict[str, frozenset[str]]:
    """The snapshot's allocated claims a preemption can free: claim key -> the pods
    (``namespace/name``) its ``status.reservedFor`` names. A claim reserved for nothing, or for
    some consumer that is not a pod, is left out: evicting pods never frees it. (kube-controller-manager's
    resourceclaim controller deallocates a claim once no pod it is reserved for is left.)"""
    found = rules.__dict__.get("_holders")
    if found is None:
        found = {}
        for key, claim in rules.allocated_claims.items():
            refs = claim.status.reserved_for
            if refs and all(r.resource == "pods" and not r.api_group for r in refs):
                found[key] = frozenset(f"{claim.metadata.namespace}/{r.name}" for r in refs)
        rules.__dict__["_holders"] = found
    return found


class DraHold:
    """Kept current by ``ClusterState.add`` / ``remove``; what the filter asks it is cached per
    pod and node, and stays valid while nothing it read changed: an allocation found on a node
    while no device of that node (nor one reachable from several nodes) was taken or given back,
    a failure while no device of that node was given back, no device reachable from several
    nodes changed and no claim that several pods share changed (a failure cannot turn into a
    success by devices being taken, nor by another node's own devices given back)."""

    def __init__(self, rules: Rules, snapshot: Any, nodes: list[Any], state: DraState,
                 users: Optional[dict[str, set[str]]] = None, shared: Optional[dict] = None,
                 gone: Optional[dict[str, set[str]]] = None,
                 parked: Optional[dict[str, ClaimAllocation]] = None, free_devices: bool = False) -> None:
        self.rules, self.snapshot, self.nodes = rules, snapshot, nodes
        # config ``preemption.freeDevices``: whether removing the pods a snapshot claim is
        # reserved for gives its devices back. Off (kube-scheduler's rule): they stay allocated.
        self.free_devices = free_devices
        self.state = state
        # snapshot claims: the reserving pods removed from the state, and the allocations given
        # back because all of them are (kept to be taken again when one comes back)
        self.gone: dict[str, set[str]] = gone if gone is not None else {}
        self.parked: dict[str, ClaimAllocation] = parked if parked is not None else {}
        self.users: dict[str, set[str]] = users if users is not None else {}  # claims allocated here -> pods
        self._shared = shared if shared is not None else {"claims": {}}
        self.wide = 0  # devices reachable from several nodes changed, or a shared claim
        self.local: dict[int, int] = {}  # node -> changes of its own devices
        self.released = 0  # devices given back
        # node -> its own devices given back: a failure there can turn into a success only then
        # (or when a device reachable from several nodes, or a shared claim, changed: ``wide``)
        self.freed: dict[int, int] = {}
        self._fits: dict[tuple[str, int], tuple[int, int, int, Optional[list[ClaimAllocation]], str]] = {}
        self._shapes: dict[tuple[str, int], tuple[int, int, int, bool]] = {}  # ``fits`` per claim shape

    def copy(self) -> "DraHold":
        return DraHold(self.rules, self.snapshot, self.nodes, self.state.copy(),
                       {k: set(v) for k, v in self.users.items()}, self._shared,
                       {k: set(v) for k, v in self.gone.items()}, dict(self.parked), self.free_devices)

    # -- the state's book (``state.PluginState``): Reserve and Unreserve as pods come and go

    def reserve(self, pod: Any, node: int) -> None:
        self.add(pod, node)

    def reserve_many(self, placed: list[tuple[Any, int]]) -> None:
        for pod, node in placed:
            self.add(pod, node)

    def unreserve(self, pod: Any, node: int) -> None:
        self.remove(pod)

    def gives_back_to(self, pod: Any) -> bool:
        """With ``preemption.freeDevices``, a victim's devices may come back to a pod with claims."""
        return self.free_devices and bool(pod.pod.spec.resource_claims)

    def merged(self, members: list[list[int]]) -> None:
        """Devices are counted per node: merged nodes keep none (node classes leave such windows)."""
        return None

    def freed_reasons(self, wm: Any, node: int, victim: Any, level: int, above: list) -> list:
        """``plugin_api.GivesBackInModel``: a victim's claims given back are room for the classes
        with claims placed on ``node`` at or above ``level`` (``freed.device_reasons``)."""
        return device_reasons(self, wm, node, victim, level, above)

    def holders(self) -> dict[str, frozenset[str]]:
        """``claim_holders``, or none at all when ``preemption.freeDevices`` is off."""
        return claim_holders(self.rules) if self.free_devices else {}

    def freed_by(self, pods: Any) -> set[str]:
        """The snapshot claims that removing all of ``pods`` (PodInfos) gives back: those whose
        every reserving pod is among them."""
        keys = {p.key for p in pods}
        holders = self.holders()
        if not holders:
            return set()
        out: set[str] = set()
        for p in pods:
            if not p.pod.spec.resource_claims:
                continue
            for pc in self.claims_of(p):
                hold = holders.get(pc.key)
                if hold is not None and p.key in hold and hold <= keys:
                    out.add(pc.key)
        return out

    def returnable(self, pod: Any) -> bool:
        """Whether putting ``pod`` back can take again the devices of its claims the state gave
        back (none of them went to another claim meanwhile)."""
        if not pod.pod.spec.resource_claims:
            return True
        for pc in self.claims_of(pod):
            parked = self.parked.get(pc.key)
            if parked is None:
                continue
            for r in parked.results:
                holder = self.state.used.get((r.driver, r.pool, r.device))
                if holder is not None and holder != pc.key:
                    return False
        return True

    def claims_of(self, pod: Any) -> list[PodClaim]:
        """The pod's resolved claims (``ClusterSnapshot.pod_claims``), read once per pod."""
        cache = self._shared["claims"]
        hit = cache.get(pod.key)
        if hit is None:
            hit = cache[pod.key] = self.snapshot.pod_claims(pod.pod)
        return hit

    def _shared_claims(self) -> set[str]:
        """Claims more than one pod of the snapshot uses."""
        found = self._shared.get("shared")
        if found is None:
            seen: set[str] = set()
            found = set()
            for p in self.snapshot.pods:
                if p.spec.resource_claims:
                    for pc in self.snapshot.pod_claims(p):
                        if pc.key in seen:
                            found.add(pc.key)
                        seen.add(pc.key)
            self._shared["shared"] = found
        return found

    def _changed(self, allocations: list[ClaimAllocation], *, released: bool) -> None:
        index = self._shared.get("index")
        if index is None:
            index = self._shared["index"] = {n.name: n.index for n in self.nodes}
        devices = self.rules.inventory.devices
        shared = self._shared_claims()
        for allocation in allocations:
            if allocation.claim in shared:
                self.wide += 1
            for r in allocation.results:
                record = devices.get((r.driver, r.pool, r.device))
                node = index.get(record.scope.node_name) if record is not None and record.scope.node_name else None
                if node is None:
                    self.wide += 1
                else:
                    self.local[node] = self.local.get(node, 0) + 1
                    if released:
                        self.freed[node] = self.freed.get(node, 0) + 1
        if released:
            self.released += 1

    def allocation(self, pod: Any, node: int) -> tuple[Optional[list[ClaimAllocation]], str]:
        """What the pod's claims would be given on ``node`` now, or None and why not."""
        key = (pod.key, node)
        hit = self._fits.get(key)
        local = self.local.get(node, 0)
        if hit is not None:
            if hit[3] is not None and hit[0] == self.wide and hit[1] == local:
                return hit[3], hit[4]
            if hit[3] is None and hit[2] == self.freed.get(node, 0) and hit[0] == self.wide:
                return None, hit[4]
        try:
            found, why = self.rules.allocate(self.claims_of(pod), self.nodes[node].node, self.state)
        except AllocationError as exc:
            found, why = None, str(exc)
        self._fits[key] = (self.wide, local, self.freed.get(node, 0), found, why)
        return found, why

    def fits(self, pod: Any, node: int) -> bool:
        """Whether the pod's claims can be allocated on ``node`` now. Pods whose claims are all
        still to be made from equal templates (``PodInfo.devices_key``) get equal answers in
        one state, so the answer is kept per such shape too, under the same validity as
        ``allocation``'s: one pod's search serves its template's other pods."""
        shape = getattr(pod, "devices_key", "")
        if not shape:
            return self.allocation(pod, node)[0] is not None
        key = (shape, node)
        hit = self._shapes.get(key)
        local = self.local.get(node, 0)
        if hit is not None:
            if hit[3] and hit[0] == self.wide and hit[1] == local:
                return True
            if not hit[3] and hit[2] == self.freed.get(node, 0) and hit[0] == self.wide:
                return False
        ok = self.allocation(pod, node)[0] is not None
        self._shapes[key] = (self.wide, local, self.freed.get(node, 0), ok)
        return ok

    def add(self, pod: Any, node: int) -> None:
        if not pod.pod.spec.resource_claims:
            return
        if self.gone:
            self._restore(pod)
        found, _ = self.allocation(pod, node)
        if found:
            self.rules.commit(self.state, found, self.rules.inventory)
            self._changed(found, released=False)
        for pc in self.claims_of(pod):
            if pc.key and pc.key in self.state.allocations and pc.key not in self.rules.allocated_claims:
                self.users.setdefault(pc.key, set()).add(pod.key)

    def _restore(self, pod: Any) -> None:
        """``pod`` comes back: its snapshot claims given back are taken again (``returnable``
        says whether their devices are still free; callers that may have given them away ask)."""
        for pc in self.claims_of(pod):
            gone = self.gone.get(pc.key)
            if gone is None or pod.key not in gone:
                continue
            gone.discard(pod.key)
            if not gone:
                del self.gone[pc.key]
            parked = self.parked.pop(pc.key, None)
            if parked is not None:
                self.rules.commit(self.state, [parked], self.rules.inventory)
                self._changed([parked], released=False)

    def _park(self, pod: Any) -> None:
        """``pod`` leaves: a snapshot claim none of whose reserving pods is left gives back its
        devices."""
        holders = self.holders()
        for pc in self.claims_of(pod):
            hold = holders.get(pc.key)
            if hold is None or pod.key not in hold:
                continue
            gone = self.gone.setdefault(pc.key, set())
            gone.add(pod.key)
            if gone >= hold and pc.key not in self.parked and pc.key in self.state.allocations:
                allocation = self.state.allocations[pc.key]
                self.rules.release(self.state, allocation, self.rules.inventory)
                self.parked[pc.key] = allocation
                self._changed([allocation], released=True)

    def remove(self, pod: Any) -> None:
        if not pod.pod.spec.resource_claims:
            return
        if self.holders():
            self._park(pod)
        for pc in self.claims_of(pod):
            users = self.users.get(pc.key)
            if users is None or pod.key not in users:
                continue
            users.discard(pod.key)
            if not users:
                del self.users[pc.key]
                allocation = self.state.allocations[pc.key]
                self.rules.release(self.state, allocation, self.rules.inventory)
                self._changed([allocation], released=True)

    def place_jointly(self, placed: list[tuple[Any, int]]) -> None:
        """Allocate for pods already placed (a plan's), node by node, all claims of a node's
        pods in one search: a joint placement (the solver's) may need devices chosen together
        where allocating pod by pod in some order would strand them."""
        by_node: dict[int, list[Any]] = {}
        for pod, node in placed:
            if pod.pod.spec.resource_claims:
                by_node.setdefault(node, []).append(pod)
        for node, pods in by_node.items():
            claims = [pc for p in pods for pc in self.claims_of(p)]
            try:
                found, _ = self.rules.allocate(claims, self.nodes[node].node, self.state)
            except AllocationError:
                found = None
            if found:
                self.rules.commit(self.state, found, self.rules.inventory)
                self._changed(found, released=False)
            for p in pods:
                for pc in self.claims_of(p):
                    if pc.key and pc.key in self.state.allocations and pc.key not in self.rules.allocated_claims:
                        self.users.setdefault(pc.key, set()).add(p.key)

    def complete(self, pods: list[Any]) -> bool:
        """Whether every needed claim of ``pods`` is allocated in this state."""
        return all(not pc.needed or pc.key in self.state.allocations for p in pods for pc in self.claims_of(p))

    def added_allocations(self) -> dict[str, ClaimAllocation]:
        """The allocations made in this state (not the snapshot's), by claim."""
        return {k: self.state.allocations[k] for k in sorted(self.users)}


def hold_of(state: Any) -> Optional[DraHold]:
    """The devices held on ``state`` (its DynamicResources book), or None: the snapshot has no
    claims nor slices."""
    book = state.books.get(NAME)
    return book if isinstance(book, DraHold) else None

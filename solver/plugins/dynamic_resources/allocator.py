"""Allocation of a pod's ResourceClaims on one node, one pod at a time, as kube-scheduler's
DynamicResources plugin does it: requests in order, devices picked one by one, backtracking when
a later pick cannot be made (SEMANTICS §3.11).

Which devices a request may take (``Rules.candidate``): devices the node can use (the slice's
or, with ``perDeviceNodeSelection``, the device's ``nodeName`` / ``nodeSelector`` / ``allNodes``),
for which every selector of the request's DeviceClass and of the request itself is true, whose
``NoSchedule`` / ``NoExecute`` taints the request tolerates, that no claim holds (an allocated
claim's devices, and those given to earlier pods of the same decision) and whose
``consumesCounters`` still fit the pool's shared counters. ``ExactCount`` takes ``count``
devices, ``All`` every such device of the node (none of them may be taken, the pool must be
complete). ``firstAvailable`` tries its subrequests in order: a later one only when no
allocation of the earlier ones exists. ``matchAttribute`` makes every device of the constrained
requests share the attribute's value (a device without the attribute cannot be used),
``distinctAttribute`` makes them all differ.

The search branches on device *kinds* (``devices.DeviceKind``), not on devices: identical
devices of a pool are interchangeable, so trying one of each kind at every step finds an
allocation whenever trying every device would; within a request the kinds are picked in
non-decreasing order (a set of devices is tried once, not in every order).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable, Optional

from models.dra import (
    DeviceClass,
    DeviceConstraint,
    DeviceRequest,
    DeviceSelector,
    DeviceToleration,
    PodClaim,
    ResourceClaim,
)
from models.objects import Node, NodeSelector, NodeSelectorTerm

from . import capacity
from .capacity import quantity_text
from .cel import CelError, SelectorCache
from .devices import DeviceId, DeviceKind, DeviceRecord, Inventory, allocated_devices

# The most device picks one pod's allocation may try before giving up (kube-scheduler bounds
# its search by time instead; a bound keeps a decision's time bounded).
SEARCH_LIMIT = 200_000
# The namespace label that allows ``adminAccess`` requests (DRAAdminAccess).
ADMIN_LABEL = "resource.kubernetes.io/admin-access"


class AllocationError(Exception):
    """A claim that cannot be decided (a selector the library cannot evaluate): the pod gets
    this message as its reason, as kube-scheduler reports a CEL runtime error."""


@dataclass(frozen=True)
class DeviceResult:
    """One entry of ``status.allocation.devices.results``."""

    request: str  # "<request>" or "<request>/<subrequest>"
    driver: str
    pool: str
    device: str
    # A share of a device that allows multiple allocations (``capacity``): its id and what it
    # consumes, by capacity name.
    share_id: Optional[str] = None
    consumed: tuple[tuple[str, Fraction], ...] = ()
    admin: bool = False  # ``adminAccess``: the device is not held

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"request": self.request, "driver": self.driver, "pool": self.pool, "device": self.device}
        if self.admin:
            out["adminAccess"] = True
        if self.share_id is not None:
            out["shareID"] = self.share_id
        if self.consumed:
            out["consumedCapacity"] = {name: quantity_text(q) for name, q in self.consumed}
        return out

    @classmethod
    def of(cls, r: Any) -> "DeviceResult":
        """From a ``DeviceRequestAllocationResult`` (a snapshot's or a plan's)."""
        return cls(r.request, r.driver, r.pool, r.device, r.share_id, tuple(sorted(r.consumed_capacity.items())),
                   bool(r.admin_access))


@dataclass(frozen=True)
class ClaimAllocation:
    """What a claim is given: its devices and the nodes they can be used from."""

    claim: str  # namespace/name
    results: tuple[DeviceResult, ...]
    node_selector: Optional[NodeSelector]

    def to_json(self) -> dict[str, Any]:
        """In the shape of ``ResourceClaim.status.allocation``."""
        out: dict[str, Any] = {"devices": {"results": [r.to_json() for r in self.results]}}
        if self.node_selector is not None:
            out["nodeSelector"] = self.node_selector.model_dump(mode="json", by_alias=True, exclude_defaults=True)
        return out

    def admits(self, node: Node) -> bool:
        return self.node_selector is None or self.node_selector.matches(node.name, node.metadata.labels)


@dataclass
class DraState:
    """Devices and counters in use, and the allocations decided so far (claim key → allocation)."""

    used: dict[DeviceId, str] = field(default_factory=dict)
    counters: dict[tuple[str, str, str], dict[str, Fraction]] = field(default_factory=dict)
    allocations: dict[str, ClaimAllocation] = field(default_factory=dict)
    # Devices that allow multiple allocations: each share (claim, consumption). Such a device
    # is also in ``used`` (under its first claim) while any share holds it, so what counts free
    # devices (the model, the packing hint) sees it taken.
    shares: dict[DeviceId, list[tuple[str, dict[str, Fraction]]]] = field(default_factory=dict)

    def copy(self) -> "DraState":
        return DraState(dict(self.used), {k: dict(v) for k, v in self.counters.items()}, dict(self.allocations),
                        {k: list(v) for k, v in self.shares.items()})

    def add_share(self, record: DeviceRecord, claim: str, consumed: dict[str, Fraction]) -> None:
        held = self.shares.setdefault(record.id, [])
        held.append((claim, consumed))
        if len(held) == 1:
            self.used[record.id] = claim
            _consume(self, record, +1)

    def drop_share(self, record: DeviceRecord, claim: str, consumed: dict[str, Fraction]) -> None:
        held = self.shares.get(record.id, [])
        for i, (k, c) in enumerate(held):
            if k == claim and c == consumed:
                del held[i]
                break
        if not held:
            self.shares.pop(record.id, None)
            if record.id in self.used:
                del self.used[record.id]
                _consume(self, record, -1)
        elif self.used.get(record.id) == claim:
            self.used[record.id] = held[0][0]


@dataclass(frozen=True, eq=False)
class _Alt:
    """A request or one subrequest of ``firstAvailable``, ready to match devices."""

    name: str  # result name: "req" or "req/sub"
    parent: str
    class_name: str
    selectors: tuple[DeviceSelector, ...]
    mode: str
    count: int
    tolerations: tuple[DeviceToleration, ...]
    capacity: tuple[tuple[str, Fraction], ...] = ()  # ``capacity.requests``
    admin: bool = False  # ``adminAccess``: devices others hold may be taken, and are not held

    @property
    def match_key(self) -> tuple:
        """What decides which devices the alternative may take (not its name or count)."""
        return (self.class_name, tuple(s.cel.expression for s in self.selectors),
                tuple((t.key, t.operator, t.value, t.effect) for t in self.tolerations), self.capacity)

    def demand(self, record: DeviceRecord) -> Optional[dict[str, Fraction]]:
        """What the alternative consumes of ``record`` (``capacity.demand``)."""
        return capacity.demand(record, dict(self.capacity))


def _alternatives(request: DeviceRequest) -> list[_Alt]:
    if request.exactly is not None:
        e = request.exactly
        return [_Alt(request.name, request.name, e.device_class_name, tuple(e.selectors), e.allocation_mode,
                     e.count, tuple(e.tolerations), _capacity(e.capacity), bool(e.admin_access))]
    return [_Alt(f"{request.name}/{s.name}", request.name, s.device_class_name, tuple(s.selectors),
                 s.allocation_mode, s.count, tuple(s.tolerations), _capacity(s.capacity)) for s in request.first_available]


def _capacity(requirements: Any) -> tuple[tuple[str, Fraction], ...]:
    return tuple(sorted(requirements.requests.items())) if requirements is not None else ()


def qualified(driver: str, name: str) -> str:
    return name if "/" in name else f"{driver}/{name}"


def attribute_value(record: DeviceRecord, name: str) -> Any:
    """The value of a fully qualified attribute (``domain/name``) of a device, or None."""
    domain, _, local = name.rpartition("/")
    for key, attr in record.device.attributes.items():
        if qualified(record.driver, key) == name or (domain == record.driver and key == local):
            return attr.value
    return None


class Rules:
    """The allocation rule over one snapshot's devices and classes."""

    def __init__(self, inventory: Inventory, classes: dict[str, DeviceClass],
                 claims: list[ResourceClaim] | tuple[ResourceClaim, ...] = (),
                 namespaces: Optional[dict[str, dict[str, str]]] = None) -> None:
        self.inventory = inventory
        self.classes = classes
        self.cache = SelectorCache()
        self._candidate: dict[tuple[tuple, int], bool] = {}
        self._pins: dict[str, NodeSelector] = {}  # node name -> its selector (entries never change)
        self.allocated_claims = {c.key: c for c in claims if c.status.allocation is not None}
        # The labels of the namespaces the snapshot has objects for (admin access needs one).
        self.namespaces = namespaces or {}

    def admin_refused(self, key: str, claim: ResourceClaim) -> str:
        """Why the claim's ``adminAccess`` requests cannot be allocated ("" when they can): the
        namespace must carry ``resource.kubernetes.io/admin-access: "true"``. A namespace the
        snapshot has no object for is taken as the API server admitted the claim (it refuses
        admin access elsewhere when the claim is made)."""
        admin = [r.name for r in claim.spec.devices.requests if r.exactly is not None and r.exactly.admin_access]
        if not admin:
            return ""
        namespace = key.split("/", 1)[0]
        labels = self.namespaces.get(namespace)
        if labels is None or labels.get(ADMIN_LABEL) == "true":
            return ""
        return (f"resourceclaim {key}: request {admin[0]} asks for admin access, which namespace {namespace} "
                f'does not allow (it lacks the label {ADMIN_LABEL}: "true")')

    def initial_state(self) -> DraState:
        """Devices and counters the snapshot's allocated claims hold."""
        state = DraState()
        for claim in self.allocated_claims.values():
            allocation = claim.status.allocation
            assert allocation is not None
            results = tuple(DeviceResult.of(r) for r in allocation.devices.results)
            state.allocations[claim.key] = ClaimAllocation(claim.key, results, allocation.node_selector)
        # A result without ``shareID`` holds even a shareable device whole (``capacity.held_whole``).
        whole = {(r.driver, r.pool, r.device) for held in state.allocations.values() for r in held.results
                 if not r.admin and r.share_id is None}
        for device_id, holder in allocated_devices(list(self.allocated_claims.values())).items():
            record = self.inventory.devices.get(device_id)
            if record is not None and capacity.shareable(record) and device_id not in whole:
                continue
            state.used[device_id] = holder
            if record is not None:
                _consume(state, record, +1)
        for key, held in sorted(state.allocations.items()):
            for r in held.results:
                record = self.inventory.devices.get((r.driver, r.pool, r.device))
                if record is not None and capacity.shareable(record) and not r.admin and r.share_id is not None \
                        and record.id not in whole:
                    state.add_share(record, key, capacity.consumed_of(record, dict(r.consumed)))
        return state

    def node_pin(self, name: str) -> NodeSelector:
        """``node_pin(name)``, made once per node of this snapshot (a memo: two threads may
        make it twice, and either is right)."""
        pin = self._pins.get(name)
        if pin is None:
            pin = self._pins.setdefault(name, node_pin(name))
        return pin

    # -- which devices a request may take ----------------------------------------------------

    def candidate(self, claim: str, alt: _Alt, record: DeviceRecord) -> bool:
        """Whether ``record`` meets ``alt``'s class and selectors and its taints are tolerated
        (cached by request and device kind); ``AllocationError`` when a selector fails."""
        key = (alt.match_key, record.kind)
        hit = self._candidate.get(key)
        if hit is not None:
            return hit
        device_class = self.classes.get(alt.class_name)
        ok = device_class is not None
        if ok:
            assert device_class is not None
            for where, selectors in ((f"deviceclasses/{alt.class_name}: spec.selectors", device_class.spec.selectors),
                                     (f"resourceclaims/{claim}: request {alt.name}: selectors", alt.selectors)):
                for i, s in enumerate(selectors):
                    try:
                        if not self.cache.matches(self.cache.compile(s.cel.expression), record.id, record.device):
                            ok = False
                            break
                    except CelError as exc:
                        raise AllocationError(f"{where}[{i}] {s.cel.expression!r}: {exc}") from None
                if not ok:
                    break
        if ok and (alt.capacity or capacity.shareable(record)) and alt.demand(record) is None:
            ok = False  # asks for a capacity the device lacks, or more than it has
        if ok:
            for taint in record.device.taints:
                if taint.effect in ("NoSchedule", "NoExecute") and not any(t.tolerates(taint) for t in alt.tolerations):
                    ok = False
                    break
        self._candidate[key] = ok
        return ok

    # -- one pod ---------------------------------------------------------------------------

    def allocate(self, pod_claims: list[PodClaim], node: Node, state: DraState
                 ) -> tuple[Optional[list[ClaimAllocation]], str]:
        """The allocations the pod's claims need on ``node`` (empty when every claim is
        allocated already and admits the node), or None and the reason the node fails."""
        todo: list[tuple[str, ResourceClaim]] = []
        for pc in pod_claims:
            if not pc.needed:
                continue
            if pc.claim is None:
                return None, pc.waiting
            held = state.allocations.get(pc.key)
            if held is not None:
                if not held.admits(node):
                    return None, f"resourceclaim {pc.key} is allocated to devices node {node.name} cannot use"
                continue
            if pc.key not in {k for k, _ in todo}:
                todo.append((pc.key, pc.claim))
        if not todo:
            return [], ""
        for key, claim in todo:
            for request in claim.spec.devices.requests:
                for alt in _alternatives(request):
                    if alt.class_name not in self.classes:
                        return None, f"resourceclaim {key}: deviceclass {alt.class_name} does not exist"
            refused = self.admin_refused(key, claim)
            if refused:
                return None, refused
        search = _Search(self, todo, node, state)
        found = search.run()
        if found is None:
            why = search.reason or "cannot allocate all claims"
            return None, why
        return found, ""

    @staticmethod
    def commit(state: DraState, allocations: list[ClaimAllocation], inventory: Inventory) -> None:
        for allocation in allocations:
            state.allocations[allocation.claim] = allocation
            for r in allocation.results:
                if r.admin:
                    continue  # admin access holds nothing
                device_id = (r.driver, r.pool, r.device)
                record = inventory.devices.get(device_id)
                if record is not None and capacity.shareable(record):
                    state.add_share(record, allocation.claim, capacity.consumed_of(record, dict(r.consumed)))
                    continue
                state.used[device_id] = allocation.claim
                if record is not None:
                    _consume(state, record, +1)

    @staticmethod
    def release(state: DraState, allocation: ClaimAllocation, inventory: Inventory) -> None:
        """Undo ``commit`` of one allocation."""
        _release(state, allocation, inventory)


def _release(state: DraState, allocation: ClaimAllocation, inventory: Inventory) -> None:
    del state.allocations[allocation.claim]
    for r in allocation.results:
        if r.admin:
            continue
        device_id = (r.driver, r.pool, r.device)
        record = inventory.devices.get(device_id)
        if record is not None and capacity.shareable(record):
            state.drop_share(record, allocation.claim, capacity.consumed_of(record, dict(r.consumed)))
            continue
        if state.used.get(device_id) == allocation.claim:
            del state.used[device_id]
            record = inventory.devices.get(device_id)
            if record is not None:
                _consume(state, record, -1)


def _consume(state: DraState, record: DeviceRecord, sign: int) -> None:
    for use in record.device.consumes_counters:
        held = state.counters.setdefault((record.driver, record.pool, use.counter_set), {})
        for name, c in use.counters.items():
            held[name] = held.get(name, Fraction(0)) + sign * c.value


def counters_fit(inventory: Inventory, state: DraState, record: DeviceRecord) -> bool:
    """Whether taking ``record`` keeps every shared counter of its pool within its total."""
    pool = inventory.pools.get((record.driver, record.pool))
    for use in record.device.consumes_counters:
        totals = pool.counters.get(use.counter_set) if pool is not None else None
        if totals is None:
            return False
        held = state.counters.get((record.driver, record.pool, use.counter_set), {})
        for name, c in use.counters.items():
            if name not in totals or held.get(name, Fraction(0)) + c.value > totals[name]:
                return False
    return True


def node_pin(name: str) -> NodeSelector:
    """The node selector of one node by name (``matchFields metadata.name In [name]``), as
    kube-scheduler writes it for node-local devices (``Rules.node_pin`` keeps one per node)."""
    return NodeSelector(node_selector_terms=[NodeSelectorTerm.model_validate(
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [name]}]})])


class _Search:
    """The backtracking search over one pod's unallocated claims on one node."""

    def __init__(self, rules: Rules, claims: list[tuple[str, ResourceClaim]], node: Node, state: DraState) -> None:
        self.rules, self.node = rules, node
        self.state = state  # changed while searching; every change is undone before ``run`` returns
        self.undos: list[Callable[[], None]] = []
        self.kinds: list[DeviceKind] = rules.inventory.kinds_on(node)
        self.steps = 0
        self.reason = ""
        # (claim index, claim key, the request's alternatives), in the claims' request order
        self.items: list[tuple[int, str, list[_Alt]]] = []
        self.claims = claims
        self.constraints: list[list[DeviceConstraint]] = []
        for ci, (key, claim) in enumerate(claims):
            self.constraints.append(list(claim.spec.devices.constraints))
            for request in claim.spec.devices.requests:
                self.items.append((ci, key, _alternatives(request)))
        # per claim, per constraint: the value fixed (match) or the values seen (distinct)
        self.match: list[dict[int, list[Any]]] = [dict() for _ in claims]
        self.distinct: list[dict[int, list[Any]]] = [dict() for _ in claims]
        self.picked: list[list[DeviceResult]] = [[] for _ in claims]

    def run(self) -> Optional[list[ClaimAllocation]]:
        found = self._solve(0)
        out = []
        if found:
            for ci, (key, _claim) in enumerate(self.claims):
                results = tuple(self.picked[ci])
                out.append(ClaimAllocation(key, results, self._node_selector(results)))
        for undo in self.undos:  # recorded innermost first: the takes undone in reverse
            undo()
        self.undos.clear()
        return out if found else None

    def _node_selector(self, results: tuple[DeviceResult, ...]) -> Optional[NodeSelector]:
        """The nodes the allocation admits: the node itself when any device is node-local or
        several device selectors would have to be intersected; a device's selector when it is
        the only one; every node when every device is usable from every node."""
        scopes = [self.rules.inventory.devices[(r.driver, r.pool, r.device)].scope for r in results]
        if any(s.node_name is not None for s in scopes) or len({s.key() for s in scopes if s.selector is not None}) > 1:
            return self.rules.node_pin(self.node.name)
        for s in scopes:
            if s.selector is not None:
                return s.selector
        return None

    # -- search ----------------------------------------------------------------------------

    def _solve(self, i: int) -> bool:
        if i == len(self.items):
            return True
        ci, key, alts = self.items[i]
        for alt in alts:
            if alt.mode == "All":
                if self._take_all(i, ci, key, alt):
                    return True
            elif self._pick(i, ci, key, alt, alt.count, 0):
                return True
            if self.steps > SEARCH_LIMIT:
                return False
        return False

    def _pick(self, i: int, ci: int, key: str, alt: _Alt, remaining: int, start: int) -> bool:
        if remaining == 0:
            return self._solve(i + 1)
        for position in range(start, len(self.kinds)):
            self.steps += 1
            if self.steps > SEARCH_LIMIT:
                self.reason = f"cannot allocate all claims (search stopped after {SEARCH_LIMIT} steps)"
                return False
            kind = self.kinds[position]
            if alt.admin:
                if self._pick_admin(i, ci, key, alt, remaining, position, kind):
                    return True
                continue
            if capacity.shareable(kind.members[0]):
                if self._pick_shared(i, ci, key, alt, remaining, position, kind):
                    return True
                continue
            record = next((m for m in kind.members if m.id not in self.state.used), None)
            if record is None or not self.rules.candidate(key, alt, record):
                continue
            if self._descend(self._take(ci, key, alt, record), i, ci, key, alt, remaining, position):
                return True
        return False

    def _descend(self, undo: Optional[Callable[[], None]], i: int, ci: int, key: str, alt: _Alt, remaining: int,
                 position: int) -> bool:
        """After a device is taken (``undo`` gives it back; None: it could not be), the rest of
        the request and the claims after it; on failure the device is given back."""
        if undo is None:
            return False
        if self._pick(i, ci, key, alt, remaining - 1, position):
            self.undos.append(undo)
            return True
        undo()
        return False

    def _pick_admin(self, i: int, ci: int, key: str, alt: _Alt, remaining: int, position: int,
                    kind: DeviceKind) -> bool:
        """A device for an ``adminAccess`` request: held or not, each device once per request;
        it takes no device, counter or capacity from anyone."""
        if not self.rules.candidate(key, alt, kind.members[0]):
            return False
        mine = {(r.driver, r.pool, r.device) for r in self.picked[ci] if r.request == alt.name}
        record = next((m for m in kind.members if m.id not in mine), None)
        if record is None:
            return False
        return self._descend(self._take(ci, key, alt, record), i, ci, key, alt, remaining, position)

    def _pick_shared(self, i: int, ci: int, key: str, alt: _Alt, remaining: int, position: int,
                     kind: DeviceKind) -> bool:
        """One device of a kind that allows multiple allocations: devices of the kind whose
        shares differ are not interchangeable, so one of each distinct state is tried; a device
        is taken at most once per request."""
        if not self.rules.candidate(key, alt, kind.members[0]):
            return False
        need = alt.demand(kind.members[0])
        if need is None:
            return False
        mine = {(r.driver, r.pool, r.device) for r in self.picked[ci] if r.request == alt.name}
        tried: set[tuple] = set()
        for record in kind.members:
            if record.id in mine or capacity.held_whole(self.state, record.id):
                continue
            shares = self.state.shares.get(record.id, [])
            state = tuple(sorted((tuple(sorted(c.items())) for _, c in shares)))
            if state in tried:
                continue
            tried.add(state)
            if not capacity.room_for(record, shares, need):
                continue
            if self._descend(self._take(ci, key, alt, record, need), i, ci, key, alt, remaining, position):
                return True
        return False

    def _take_all(self, i: int, ci: int, key: str, alt: _Alt) -> bool:
        records = [m for kind in self.kinds for m in kind.members if self.rules.candidate(key, alt, m)]
        if not records:
            return False
        pools = {(r.driver, r.pool) for r in records}
        if any(not self.rules.inventory.pools[p].complete for p in pools):
            self.reason = f"resourceclaim {key}: request {alt.name} asks for all devices of a pool that is being updated"
            return False
        undos: list[Callable[[], None]] = []
        for record in records:
            need = alt.demand(record) if capacity.shareable(record) and not alt.admin else None
            if alt.admin:
                free = True
            elif need is not None:
                free = not capacity.held_whole(self.state, record.id) and \
                    capacity.room_for(record, self.state.shares.get(record.id, []), need)
            else:
                free = record.id not in self.state.used and not capacity.shareable(record)
            undo = self._take(ci, key, alt, record, need) if free else None
            if undo is None:
                for u in reversed(undos):
                    u()
                return False
            undos.append(undo)
        if self._solve(i + 1):
            self.undos.extend(undos)
            return True
        for u in reversed(undos):
            u()
        return False

    def _take(self, ci: int, key: str, alt: _Alt, record: DeviceRecord,
              need: Optional[dict[str, Fraction]] = None) -> Optional[Callable[[], None]]:
        """Take ``record`` for ``alt`` if the claim's constraints and the counters allow;
        returns how to give it back, or None. ``need``: a share of a device that allows
        multiple allocations, consuming that much (its counters drawn by its first share)."""
        if not alt.admin and (need is None or record.id not in self.state.shares) \
                and not counters_fit(self.rules.inventory, self.state, record):
            return None
        touched: list[tuple[dict[int, list[Any]], int, Any]] = []
        for k, c in enumerate(self.constraints[ci]):
            if c.requests and alt.parent not in c.requests and alt.name not in c.requests:
                continue
            name = c.match_attribute or c.distinct_attribute or ""
            value = attribute_value(record, name)
            if value is None:
                return None
            if c.match_attribute is not None:
                seen = self.match[ci].get(k)
                if seen and seen[0] != value:
                    return None
                touched.append((self.match[ci], k, value))
            else:
                seen = self.distinct[ci].get(k)
                if seen and value in seen:
                    return None
                touched.append((self.distinct[ci], k, value))
        for table, k, value in touched:
            table.setdefault(k, []).append(value)
        if alt.admin:
            self.picked[ci].append(DeviceResult(alt.name, record.driver, record.pool, record.device.name, admin=True))
        elif need is not None:
            self.state.add_share(record, key, need)
            self.picked[ci].append(DeviceResult(alt.name, record.driver, record.pool, record.device.name,
                                                capacity.share_id(key, alt.name, record.id), tuple(sorted(need.items()))))
        else:
            self.state.used[record.id] = key
            _consume(self.state, record, +1)
            self.picked[ci].append(DeviceResult(alt.name, record.driver, record.pool, record.device.name))

        def undo() -> None:
            self.picked[ci].pop()
            if alt.admin:
                pass
            elif need is not None:
                self.state.drop_share(record, key, need)
            else:
                _consume(self.state, record, -1)
                del self.state.used[record.id]
            for table, k, _value in touched:
                table[k].pop()
                if not table[k]:
                    del table[k]
        return undo

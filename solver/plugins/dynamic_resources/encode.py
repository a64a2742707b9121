"""DynamicResources in the CP-SAT window model: device kinds per node, counted.

For each pod of the window with unallocated claims and each node it may go to, every request
takes ``count`` devices spread over the device kinds (``devices.DeviceKind``) the node can use
and the request may take: ``y[pod, node, request, kind]`` integer counts summing to ``count`` when
the pod is on the node (``firstAvailable``: one subrequest chosen, ``use[...]`` booleans). Each
kind gives at most its free devices over the whole window (a kind reachable from several nodes
is one pool for all of them), shared counters of partitionable devices are not overdrawn,
``matchAttribute`` picks one value of the attribute for the constrained requests (kinds without
the attribute are out), ``distinctAttribute`` takes at most one device of each value.

``firstAvailable`` is an objective level (``PREFERENCE_LEVEL``, below pods placed, PDB
violations and victims, above the gang topology preferences and node scores): choosing the
subrequest at position i (0: the first) of a request costs i, so the model takes a less
preferred subrequest only where the better one cannot be had without placing fewer pods (or
evicting more), and otherwise moves the pod to a node where the better one is free.

``allocationMode: All`` takes every device of the node the alternative may take, all of them
free and from complete pools: each such kind counts all its devices, so no other claim of the
window takes one. A claim several pending pods share is allocated once: ``dra_at[claim, node]``
(at most one node) says from which node's devices, its devices are counted there once, and
every pod using it goes to that node (the node-local devices of kube-scheduler's allocation
admit that node only; for devices reachable from several nodes this is stricter than needed).

The model's size follows the device kinds a node can use, not its devices: identical devices of
a pool are one count. Pods whose claims are allocated already may only go where the allocation
admits, and a pod whose claims cannot be allocated on a node even in the snapshot's state (no
device there it may take) is kept off it. A solver plan the validator refuses is replaced by
greedy's (``solver.api``).
"""

from __future__ import annotations

from collections import defaultdict
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Optional

from ortools.sat.python import cp_model

from ...plugin_api import Level
from . import capacity
from .allocator import AllocationError, _alternatives, attribute_value
from .freed import freed_literals
from .hold import hold_of

if TYPE_CHECKING:
    from ...plugin_api import EncodeModel as WindowModel


# The objective level that counts how far down their ``firstAvailable`` lists claims go.
PREFERENCE_LEVEL = "dra_first_available"


def preference_level(wm: "WindowModel") -> Any:
    """The ``firstAvailable`` level, made on first use just below ``victims``."""
    found = next((lv for lv in wm.levels if lv.name == PREFERENCE_LEVEL), None)
    if found is None:
        found = Level(PREFERENCE_LEVEL)
        wm.levels.insert(wm.levels.index(wm.level("victims")) + 1, found)
    return found


def encode(wm: "WindowModel") -> None:
    dra = hold_of(wm.state)
    if dra is None:
        return
    rules, inventory, start = dra.rules, dra.rules.inventory, dra.state
    m = wm.model
    takes: dict[int, list[tuple[Any, int]]] = defaultdict(list)  # kind -> (count var, devices per unit)
    shares: dict[Any, list[tuple[Any, dict]]] = defaultdict(list)  # shareable device -> (uses, demand)
    counted: set[str] = set()  # claims encoded once, for the first pod that uses them
    # Claims several window pods share (named claims: each such pod is a class of its own):
    # allocated once, from one node, and every pod using them on that node.
    users: dict[str, list[int]] = defaultdict(list)
    for cls in wm.classes:
        if cls.rep.pod.spec.resource_claims:
            for pc in dra.claims_of(cls.rep):
                if pc.needed and pc.claim is not None and pc.key not in start.allocations and cls.id not in users[pc.key]:
                    users[pc.key].append(cls.id)
    shared = {key: ids for key, ids in users.items() if len(ids) > 1}
    anchors: dict[str, dict[int, Any]] = {}  # shared claim -> node -> "allocated from this node"
    for key, ids in shared.items():
        nodes = sorted({n for cid in ids for n, _ in wm.by_class.get(cid, [])})
        anchors[key] = {n: m.new_bool_var(f"dra_at[{key},{n}]") for n in nodes}
        m.add(cp_model.LinearExpr.sum(list(anchors[key].values())) <= 1)
    reach = _reach(wm, inventory, anchors)
    for cls in wm.classes:
        rep = cls.rep
        if not rep.pod.spec.resource_claims:
            continue
        claims = dra.claims_of(rep)
        own = []
        for pc in claims:
            if pc.needed and pc.claim is not None and pc.key not in start.allocations and pc.key not in counted \
                    and pc.key not in shared:
                own.append((pc.key, pc.claim))
                counted.add(pc.key)
        here = sorted({pc.key for pc in claims if pc.key in shared})
        # The full search only where counting kinds says too little (All requests); elsewhere
        # the counts below close a node with no kind a request may take.
        # (and admin access, whose namespace may refuse it).
        search = any(pc.claim is not None and any(a.mode == "All" or a.admin for r in pc.claim.spec.devices.requests
                                                  for a in _alternatives(r)) for pc in claims)
        for n, x in wm.by_class.get(cls.id, []):
            node = wm.state.nodes[n].node
            if not _may_use(claims, node, start):
                m.add(x == 0)
                continue
            if search:
                try:
                    found, _ = rules.allocate(claims, node, start)
                except AllocationError:
                    found = None
                if found is None:
                    m.add(x == 0)  # not even in the snapshot's state: never once others took devices
                    continue
            for key in here:
                # the shared claim is allocated from a node whose devices this pod's node reaches too
                m.add(x <= cp_model.LinearExpr.sum(reach[key].get(n, [])))
            kinds = inventory.kinds_on(node)
            ub = wm.ub_of(cls.id, n)
            for key, claim in own:
                _encode_claim(m, rules, key, claim, kinds, x, takes, ub, wm, start, shares)
    for key, at in anchors.items():
        claim = _claim_of(wm, dra, shared[key][0], key)
        for n, a in at.items():
            # allocated here only for a pod of the claim placed here
            m.add(a <= cp_model.LinearExpr.sum([x for cid in shared[key] for nn, x in wm.by_class.get(cid, []) if nn == n]))
            _encode_claim(m, rules, key, claim, inventory.kinds_on(wm.state.nodes[n].node), a, takes, 1, wm, start, shares)
    # Devices a preemption gives back: freed[c] only when every pod claim c is reserved for is
    # evicted; then its devices count as free for the window's claims.
    freed = freed_literals(wm, dra)
    back: dict[int, list[tuple[Any, int]]] = defaultdict(list)  # kind -> (freed[c], its devices there)
    for key, lit in freed.items():
        per_kind: dict[int, int] = defaultdict(int)
        for r in start.allocations[key].results:
            record = inventory.devices.get((r.driver, r.pool, r.device))
            if record is not None and _sole_holder(start, record.id, key):
                per_kind[record.kind] += 1
        for k, n in per_kind.items():
            back[k].append((lit, n))
    for k, entries in takes.items():
        kind = inventory.kinds[k]
        free = sum(1 for r in kind.members if r.id not in start.used)
        returned = back.get(k, [])
        m.add(cp_model.LinearExpr.weighted_sum([v for v, _ in entries], [c for _, c in entries])
              <= free + cp_model.LinearExpr.weighted_sum([lit for lit, _ in returned], [n for _, n in returned]))
    _encode_counters(m, inventory, start, takes, _freed_counters(inventory, start, freed))
    encode_shares(m, inventory, start, shares)


def _reach(wm: "WindowModel", inventory: Any, anchors: dict[str, dict[int, Any]]) -> dict[str, dict[int, list]]:
    """Per shared claim and node m, the anchors ``dra_at[claim, a]`` whose devices a pod on m
    reaches too: every kind node a can use, m can use (devices a node selector offers to a rack:
    the members of a group sharing its claim may spread over the rack). Node-local devices make
    that m = a, as before."""
    kinds = {n: frozenset(k.index for k in inventory.kinds_on(wm.state.nodes[n].node))
             for at in anchors.values() for n in at}
    return {key: {n: [a_var for a, a_var in at.items() if kinds[a] <= kinds[n]] for n in at}
            for key, at in anchors.items()}


def shared_kind(kind: Any) -> bool:
    """Whether the model shares the kind's devices among claims by capacity (devices that allow
    multiple allocations and draw no shared counters); other kinds are counted, each device
    to one claim."""
    return capacity.shareable(kind.members[0]) and not kind.sample.consumes_counters


def encode_shares(m: cp_model.CpModel, inventory: Any, start: Any, shares: dict[Any, list[tuple[Any, dict]]]) -> None:
    """Per shareable device and capacity: what the window's shares consume, plus what the
    snapshot's allocations hold, within its ``value`` (``capacity.room_for``, summed)."""
    for device_id, uses in shares.items():
        record = inventory.devices[device_id]
        if capacity.held_whole(start, device_id):
            for z, _need in uses:
                m.add(z == 0)  # a result without shareID holds it whole
            continue
        held = start.shares.get(device_id, [])
        for name, cap in record.device.capacity.items():
            room = cap.value - sum((c.get(name, Fraction(0)) for _, c in held), Fraction(0))
            terms = [(z, need.get(name, Fraction(0))) for z, need in uses if need.get(name, Fraction(0))]
            if not terms:
                continue
            den = room.denominator
            for _, q in terms:
                den = den * q.denominator // _gcd(den, q.denominator)
            m.add(cp_model.LinearExpr.weighted_sum([z for z, _ in terms], [int(q * den) for _, q in terms])
                  <= max(int(room * den), 0))


def _sole_holder(start: Any, device_id: Any, key: str) -> bool:
    """Whether deallocating claim ``key`` gives ``device_id`` back: it holds the device, and no
    other claim holds a share of it (a shareable device is in ``used`` under its first share's
    claim while any share lasts; counting it back with that one would free it too early)."""
    return start.used.get(device_id) == key and all(k == key for k, _ in start.shares.get(device_id, []))


def _freed_counters(inventory: Any, start: Any, freed: dict[str, Any]) -> dict[tuple[str, str, str, str], list[tuple[Any, Fraction]]]:
    """Per shared counter, what each freeable claim's devices draw from it (given back with it)."""
    out: dict[tuple[str, str, str, str], list[tuple[Any, Fraction]]] = defaultdict(list)
    for key, lit in freed.items():
        for r in start.allocations[key].results:
            record = inventory.devices.get((r.driver, r.pool, r.device))
            if record is None or not _sole_holder(start, record.id, key):
                continue
            for use in record.device.consumes_counters:
                for name, c in use.counters.items():
                    out[(r.driver, r.pool, use.counter_set, name)].append((lit, c.value))
    return out


def _claim_of(wm: "WindowModel", dra: Any, cls_id: int, key: str) -> Any:
    cls = next(c for c in wm.classes if c.id == cls_id)
    return next(pc.claim for pc in dra.claims_of(cls.rep) if pc.key == key)


def _may_use(claims: list, node: Any, start: Any) -> bool:
    """Whether none of the claims rules the node out before any device is counted: every
    needed claim exists, and an allocated one admits the node."""
    for pc in claims:
        if not pc.needed:
            continue
        if pc.claim is None:
            return False
        held = start.allocations.get(pc.key)
        if held is not None and not held.admits(node):
            return False
    return True


def template_signature(dra: Any, info: Any) -> str:
    """What a pod's claims ask for, as text, when each is still to be made from a template and
    asks for an exact count of devices (no ``firstAvailable``, no ``All``): pods with equal text
    may share a model class, whose requests are then counted ``count`` devices per pod placed.
    "" when some claim is named, made already, allocated or shared (the pod keeps a class of
    its own)."""
    cache = dra._shared.setdefault("signature", {})
    parts = []
    for pc in dra.claims_of(info):
        if not pc.needed:
            parts.append(f"{pc.name}=-")
            continue
        if pc.claim is None or not pc.from_template or pc.key in dra.state.allocations:
            return ""
        spec = pc.claim.spec
        text = cache.get(id(spec))
        if text is None:
            exact = all(r.exactly is not None and r.exactly.allocation_mode == "ExactCount" and not r.exactly.admin_access
                        for r in spec.devices.requests)
            text = cache[id(spec)] = (spec.model_dump_json() if exact else ""), spec
            # (the spec is kept with its text: an id is only unique while its object lives)
        if not text[0]:
            return ""
        parts.append(f"{pc.name}={text[0]}")
    return "dra-templates:" + "|".join(parts)


def _encode_claim(m: cp_model.CpModel, rules: Any, key: str, claim: Any, kinds: list, x: Any,
                  takes: dict[int, list[tuple[Any, int]]], ub: int = 1, wm: Any = None, start: Any = None,
                  shares: Optional[dict[Any, list[tuple[Any, dict]]]] = None) -> None:
    """``x`` pods on the node (at most ``ub``), each with a claim like ``claim``: a class of
    several pods only when ``template_signature`` let them share it (every request ExactCount).
    A request with subrequests costs the position of the one chosen on the preference level."""
    enc = _ClaimEncoding(m, rules, key, kinds, x, takes, ub, wm, start, shares)
    for request in claim.spec.devices.requests:
        enc.request(request)
    for c in claim.spec.devices.constraints:
        enc.constraint(c, claim)


class _ClaimEncoding:
    """One claim's variables on one node, request by request, then its constraints over them.
    ``per_alt`` holds, per request (alternative name), the count variable of each device kind
    (by index) it may take."""

    def __init__(self, m: cp_model.CpModel, rules: Any, key: str, kinds: list, x: Any,
                 takes: dict[int, list[tuple[Any, int]]], ub: int, wm: Any, start: Any,
                 shares: Optional[dict[Any, list[tuple[Any, dict]]]]) -> None:
        self.m, self.rules, self.key, self.kinds, self.x = m, rules, key, kinds, x
        self.takes, self.ub, self.wm, self.start, self.shares = takes, ub, wm, start, shares
        self.per_alt: dict[str, dict[int, Any]] = {}
        self.kind_by_index = {k.index: k for k in kinds}

    def request(self, request: Any) -> None:
        """A request's alternatives (itself, or its subrequests): each chosen (``use``) for every
        pod, or exactly one chosen per pod, the later ones costing their rank."""
        m, x = self.m, self.x
        alts = _alternatives(request)
        chosen = []
        for alt in alts:
            fits = self._fits(alt)
            use = x if len(alts) == 1 else m.new_bool_var(f"dra_use[{self.key},{alt.name}]")
            if not fits:
                m.add(use == 0)  # no kind on this node the alternative may take
            elif alt.mode == "All":
                self.per_alt[alt.name] = self._all(alt, use, fits)
            else:
                self.per_alt[alt.name] = self._counted(alt, use, fits)
            chosen.append(use)
        if len(alts) > 1:
            m.add(cp_model.LinearExpr.sum(chosen) == x)
            if self.wm is not None:
                level = preference_level(self.wm)
                for rank, use in enumerate(chosen):
                    if rank:
                        level.add(use, -rank, 0, 1)

    def _fits(self, alt: Any) -> list:
        """The device kinds on this node the alternative may take."""
        fits = []
        for kind in self.kinds:
            sample = kind.members[0]
            try:
                if self.rules.candidate(self.key, alt, sample):
                    fits.append(kind)
            except AllocationError:
                continue
        return fits

    def _by_share(self, alt: Any, k: Any) -> bool:
        return self.shares is not None and shared_kind(k) and not alt.admin

    def _all(self, alt: Any, use: Any, fits: list) -> dict[int, Any]:
        """allocationMode All: every device of the node the alternative may take, from complete
        pools (else the alternative cannot be chosen here): a kind's devices all at once, each of
        them free, so no other claim of the window may take any of them — or, for a shareable
        device, a share of each within what its capacities have left."""
        m, shares, start = self.m, self.shares, self.start
        whole = all(self.rules.inventory.pools[(k.driver, k.pool)].complete for k in fits) and (alt.admin or (
            start is None or not any(r.id in start.used for k in fits if not self._by_share(alt, k) for r in k.members)))
        if not whole:
            m.add(use == 0)
        ys = {}
        for kind in fits:
            y = m.new_int_var(0, len(kind.members), f"dra_all[{self.key},{alt.name},{kind.index}]")
            m.add(y == len(kind.members) * use)
            ys[kind.index] = y
            if self._by_share(alt, kind) and shares is not None:
                each = alt.demand(kind.members[0]) or {}
                for member in kind.members:
                    shares[member.id].append((use, each))
            elif not alt.admin:  # admin access takes nothing from anyone
                self.takes[kind.index].append((use, len(kind.members)))
        return ys

    def _counted(self, alt: Any, use: Any, fits: list) -> dict[int, Any]:
        """ExactCount: ``alt.count`` devices per pod choosing the alternative, spread over the
        kinds it may take."""
        m, shares, ub, key = self.m, self.shares, self.ub, self.key
        ys = {}
        for kind in fits:
            sharing = shares is not None and shared_kind(kind) and not alt.admin
            top = alt.count * ub if sharing else min(alt.count * ub, len(kind.members))
            y = m.new_int_var(0, top, f"dra_y[{key},{alt.name},{kind.index}]")
            ys[kind.index] = y
            if sharing and shares is not None:
                # A device that allows multiple allocations: which devices, each at most
                # once per pod, their capacities summed over the window (``encode_shares``).
                need = alt.demand(kind.members[0])
                parts = []
                for member in kind.members:
                    part = m.new_int_var(0, ub, f"dra_share[{key},{alt.name},{member.device.name}]")
                    m.add(part <= self.x)
                    shares[member.id].append((part, need or {}))
                    parts.append(part)
                m.add(y == cp_model.LinearExpr.sum(parts))
                continue
            if not alt.admin:  # admin access takes nothing from anyone
                self.takes[kind.index].append((y, 1))
        m.add(cp_model.LinearExpr.sum(list(ys.values())) == alt.count * use)
        return ys

    def constraint(self, c: Any, claim: Any) -> None:
        """A matchAttribute / distinctAttribute constraint over the requests it names: devices
        without the attribute are never taken; matched devices share one value (per pod, when the
        class has several), distinct ones take each value at most once (per pod)."""
        m, x, ub, key, per_alt, kind_by_index = self.m, self.x, self.ub, self.key, self.per_alt, self.kind_by_index
        attribute = c.match_attribute or c.distinct_attribute or ""
        covered = [(k, y) for name, row in per_alt.items()
                   if not c.requests or name in c.requests or name.split("/")[0] in c.requests for k, y in row.items()]
        by_value: dict[str, list[Any]] = defaultdict(list)
        for k, y in covered:
            value = attribute_value(kind_by_index[k].members[0], attribute)
            if value is None:
                m.add(y == 0)
            else:
                by_value[repr(value)].append(y)
        if c.match_attribute is not None and ub > 1:
            # Each pod picks one value: z[v] pods, each taking its requests' counts of devices
            # with value v.
            count_of = {alt.name: alt.count for r in claim.spec.devices.requests for alt in _alternatives(r)}
            names = [name for name in per_alt if not c.requests or name in c.requests or name.split("/")[0] in c.requests]
            z = {v: m.new_int_var(0, ub, f"dra_match[{key},{v}]") for v in by_value}
            m.add(cp_model.LinearExpr.sum(list(z.values())) == x)
            for v in by_value:
                for name in names:
                    group = [y for k, y in per_alt[name].items()
                             if repr(attribute_value(kind_by_index[k].members[0], attribute)) == v]
                    m.add(cp_model.LinearExpr.sum(group) == count_of[name] * z[v])
        elif c.match_attribute is not None:
            pick = {v: m.new_bool_var(f"dra_match[{key},{v}]") for v in by_value}
            m.add(cp_model.LinearExpr.sum(list(pick.values())) <= 1)
            for v, group in by_value.items():
                for y in group:
                    m.add(y == 0).only_enforce_if(pick[v].Not())
        else:
            for group in by_value.values():
                m.add(cp_model.LinearExpr.sum(group) <= (x if ub > 1 else 1))


def _encode_counters(m: cp_model.CpModel, inventory: Any, start: Any, takes: dict[int, list[tuple[Any, int]]],
                     returned: Any = None) -> None:
    rows: dict[tuple[str, str, str, str], list[tuple[Any, Fraction]]] = defaultdict(list)
    for k, entries in takes.items():
        kind = inventory.kinds[k]
        for use in kind.sample.consumes_counters:
            for name, c in use.counters.items():
                for y, per in entries:
                    rows[(kind.driver, kind.pool, use.counter_set, name)].append((y, per * c.value))
    for (driver, pool, counter_set, name), terms in rows.items():
        info = inventory.pools.get((driver, pool))
        total = info.counters.get(counter_set, {}).get(name) if info is not None else None
        if total is None:
            for y, _ in terms:
                m.add(y == 0)
            continue
        held = start.counters.get((driver, pool, counter_set), {}).get(name, Fraction(0))
        back = (returned or {}).get((driver, pool, counter_set, name), [])
        # Integer coefficients: every amount over the common denominator.
        den = 1
        for _, v in [*terms, *back]:
            den = den * v.denominator // _gcd(den, v.denominator)
        den = den * (total - held).denominator // _gcd(den, (total - held).denominator)
        m.add(cp_model.LinearExpr.weighted_sum([y for y, _ in terms], [int(v * den) for _, v in terms])
              - cp_model.LinearExpr.weighted_sum([lit for lit, _ in back], [int(v * den) for _, v in back])
              <= int((total - held) * den))


def _gcd(a: int, b: int) -> int:
    while b:
        a, b = b, a % b
    return a

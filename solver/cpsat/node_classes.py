"""Node classes: the first step down when the per-node model would not be built in time.

Nodes that are interchangeable for the window — the same values of the node labels the window's
rules read (``node_label_keys``: node selectors, node affinity, topology keys), taints,
schedulability, allocatable, and free room in the same bucket — become one *pseudo node*: its
free room is the members' bucket (free room rounded DOWN to the bucket's floor, so the model
never counts room a member does not have) times the number of members, and it holds every
running pod of its members (so rules that count pods per domain count the same). The ordinary
model is built over the pseudo nodes, with all its encodings unchanged: one count variable per
pod class and node class instead of per node.

Decoding puts each pseudo node's pods onto its real members (largest requests first; first
fit under the packing profile, else the member with room for the most copies) into their real
free room; a pod that fits no member (the aggregate hides
fragmentation) stays unplaced. Members share every label a rule reads, so the pods' domains —
and with them topology spread counts — are the ones the model decided. The plan then goes
through the same choice against greedy and the same validator as any other.

Only windows whose rules are all per-domain or per-class may be reduced this way: no gangs, no
host ports, no inter-pod (anti-)affinity (in the window or held by running pods), no
``nodeName``, no volume or device claim (counted per node), no preemption (no eviction
variable could name a concrete pod's node), and no rule that reads the hostname label.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Optional

import numpy as np

from .. import interrupt
from ..context import SchedulingContext
from ..info import NodeList
from ..plugin_api import Coupling, kept_apart
from ..plugins import registry
from ..plugins.registry import copies as room_copies, fits as room_fits
from ..plugins.registry import per_node_state  # volumes, devices: counted per node, which a class's aggregate cannot express

HOSTNAME = "kubernetes.io/hostname"
# Buckets per resource tried first; halved until the reduced model fits its budget.
FIRST_BUCKETS = 512
MIN_BUCKETS = 2


def node_label_keys(ctx: SchedulingContext) -> Optional[frozenset[str]]:
    """The node label keys the window's rules read, as each declares them (``Reads.node_label_keys``:
    node selectors, required and preferred node affinity, the topology keys of spread and inter-pod
    terms). None: a rule reads the node's name (``matchFields``). (``ctx.relevant_labels`` are *pod*
    label keys, those selectors read of pods: grouping nodes by them merged the zones a spread
    constraint counts.)"""
    keys: set[str] = set()
    for cls in ctx.classes:
        some = registry.node_label_keys(cls.rep)
        if some is None:
            return None
        keys |= some
    return frozenset(keys)


def not_eligible(ctx: SchedulingContext, allow_preemption: bool) -> Optional[str]:
    """Why this window cannot be reduced to node classes (None: it can)."""
    keys = node_label_keys(ctx)
    if keys is None:
        return "a node affinity term reads the node's name"
    if HOSTNAME in keys:
        return "a rule reads the hostname label"
    state = ctx.state
    apart = kept_apart(state)  # a rule's book telling nodes apart (running pods' inter-pod terms)
    if apart is not None:
        return apart
    if ctx.claims:
        return "pods nominated outside the window keep room on their nodes (counted per node)"
    lowest_running = min((p for p, n in state.priorities.items() if n > 0), default=None)
    for pod in ctx.window:
        if pod.group:
            return "the window has gangs"
        if pod.host_ports:
            return "the window has host ports"
        if pod.affinity or pod.anti_affinity:
            return "the window has inter-pod (anti-)affinity"
        if pod.pod.spec.node_name:
            return "the window has pods naming their node"
        if per_node_state(pod):
            return "the window has volumes or device claims (counted per node)"
        if registry.coupling(pod) in (Coupling.NODE, Coupling.ACROSS):  # DOMAIN: through labels kept
            return "a rule ties the window's pods to each other"
        if allow_preemption and not pod.preempt_never and lowest_running is not None and lowest_running < pod.priority:
            return "a window pod could preempt"
    return None


@dataclass
class Reduced:
    ctx: SchedulingContext  # over the pseudo nodes
    members: list[list[int]]  # per pseudo node, its real nodes
    buckets: int


def _floors(ctx: SchedulingContext, buckets: int) -> np.ndarray:
    """Per node, its free room rounded down to its bucket's floor (0 in resources no window pod
    requests)."""
    state = ctx.state
    requested = np.zeros(len(state.resources), dtype=bool)
    for cls in ctx.classes:
        requested |= state.vector(cls.rep) > 0
    free = np.clip(state.free, 0, None)
    width = np.maximum(1, -(-free.max(axis=0) // buckets))  # ceil: at most ``buckets`` steps
    return np.where(requested, free // width * width, 0)


def _groups(ctx: SchedulingContext, buckets: int) -> dict[tuple, list[int]]:
    """The nodes by node class: what the window's rules read of them, and their bucket."""
    state = ctx.state
    floor = _floors(ctx, buckets)
    keys = node_label_keys(ctx) or frozenset()
    groups: dict[tuple, list[int]] = defaultdict(list)
    for node in interrupt.checked(ctx.nodes, every=256):
        n = node.index
        key = (
            tuple(sorted((k, v) for k, v in node.labels.items() if k in keys)),
            tuple((t.key, t.value, t.effect) for t in node.taints),
            node.unschedulable,
            state.alloc[n].tobytes(),
            floor[n].tobytes(),
        )
        groups[key].append(n)
    return groups


def reduce(ctx: SchedulingContext, buckets: int) -> Reduced:
    """The window's context over node classes, with ``buckets`` free-room buckets per resource
    the window requests."""
    state = ctx.state
    floor = _floors(ctx, buckets)
    groups = _groups(ctx, buckets)
    members = list(groups.values())
    pseudo = NodeList()  # its derived values kept while the reduced context lives
    for k, group in enumerate(members):
        rep = ctx.nodes[group[0]]
        pseudo.append(dataclasses.replace(rep, index=k, name=f"{rep.name}(+{len(group) - 1})"))
    alloc = np.array([state.used[group].sum(axis=0) + len(group) * floor[group[0]] for group in members],
                     dtype=np.int64).reshape(len(members), len(state.resources))
    # Every running pod of the members on its pseudo node, from the per-node aggregates (150,000
    # running pods added one by one took 4 s at 5,000 nodes).
    reduced = state.merged(pseudo, members, alloc)
    return Reduced(dataclasses.replace(ctx, nodes=pseudo, state=reduced), members, buckets)


def count(ctx: SchedulingContext, buckets: int) -> int:
    """How many node classes ``reduce`` would make (cheap: no state is built)."""
    return len(_groups(ctx, buckets))


def choose_buckets(ctx: SchedulingContext, max_classes: int) -> Optional[int]:
    """The finest bucketing whose node classes number at most ``max_classes`` (None: none does)."""
    buckets = FIRST_BUCKETS
    while buckets >= MIN_BUCKETS:
        if count(ctx, buckets) <= max_classes:
            return buckets
        buckets //= 2
    return None


def decode(reduced: Reduced, ctx: SchedulingContext, placements: dict[str, int]) -> tuple[dict[str, int], int]:
    """Real nodes for a plan over pseudo nodes: per pseudo node, its pods (largest request
    first) go, in real free room, to the first member with room for them under the packing
    profile, else to the member with room for the most further copies (the spreading profiles
    spread). Returns the placements and how many pods fit no member."""
    state = ctx.state
    packing = ctx.config.profile == "packing"
    on: dict[int, list] = defaultdict(list)
    for key, k in placements.items():
        on[k].append(ctx.pod(key))
    out: dict[str, int] = {}
    lost = 0
    for k, pods in on.items():
        group = reduced.members[k]
        room = state.free[group].copy()
        pods.sort(key=lambda p: (tuple(-state.vector(p)), p.key))
        for pod in pods:
            vec = state.vector(pod)
            if packing:
                fits = np.flatnonzero(room_fits(vec, room))
                if not len(fits):
                    lost += 1
                    continue
                i = int(fits[0])
            else:
                copies = room_copies(vec, room)
                i = int(np.argmax(copies))
                if copies[i] <= 0:
                    lost += 1
                    continue
            room[i] -= vec
            out[pod.key] = group[i]
    return out, lost


def pairs_budget(seconds: float, seconds_per_pair: float) -> int:
    return max(0, math.floor(seconds / seconds_per_pair))

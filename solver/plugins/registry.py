"""Every rule the scheduler knows, listed once: where greedy, CP-SAT, re-packing and the validator
find them. Adding a rule means a package in ``plugins/`` exporting ``PLUGIN`` (``plugin.py``) and
one line in ``PLUGINS`` below, nowhere else.

``PLUGINS`` is in kube-scheduler's default filter order (the first failure is a node's status),
and score plugins follow it too. The CP-SAT model is built, and the validator reports, in orders
of their own, as kube-scheduler's profile lists plugins per extension point: ``ENCODE_ORDER`` and
``CHECK_ORDER`` name the plugins whose place there differs; a plugin they do not name runs after
them, in ``PLUGINS`` order. What the engines read:

* ``STATIC_FILTERS``: filters reading only pod and node (they prune the solver's variables);
  ``STATIC_NODE_NAMES``: their PreFilterResults (the nodes a pod is restricted to by name);
  ``VOLUME_FILTERS``: the volume rules greedy runs as one cycle for a pod with claims;
* ``CYCLE_FILTERS``: the dynamic filters' ``cycle`` hooks, greedy's filter cycle runs them in
  this order (``filtering.Cycle``; the four volume rules as one, VolumeBinding's);
* ``SCORE_PLUGINS``: score plugins; their weights come from the configuration (``scoring.weights``,
  kube-scheduler's defaults unless set);
* ``SCORE_CACHE``: the score plugins' parts in greedy's score cache;
* ``FILTER_ENCODERS``: the dynamic filters as CP-SAT constraints on a window model (re-packing
  uses these); ``WINDOW_ENCODERS`` adds the window-wide rules a scheduling window has and a
  re-packing does not (gangs, their required and preferred topology, victims' room, volumes);
  ``FILTER_ENCODINGS``/``WINDOW_ENCODINGS`` pair each with its plugin's name, under which the
  engine keeps the encoding object it returns;
* ``COUPLERS``: which pods each rule ties together (CP-SAT's independent components);
* ``FINAL_CHECKS``: the validator's final-state checks, in the order their lines are reported;
* ``PER_NODE_STATE``: per pod, whether a rule keeps state per node for it (volumes, devices);
* ``fits``/``copies``: a request against a node's room, by every rule with a ``capacity``;
* ``KIND_ROOMS``: the rules' per-node room counted in kinds (devices), for provisioning;
  ``apart``: which pods the rules never let share a node (host ports), for provisioning;
* ``GREEDY_PARTS``: each rule's part in greedy's pass beyond its filter (gangs, spread's guard);
  ``QUEUE_SORTS``: the rules' QueueSort, in order (a gang's and a tree's pods together);
  ``POSTFILTER``: greedy's PostFilter (DefaultPreemption; None: no plugin gives one);
* ``window_parts``: each rule's view of a whole window for CP-SAT (gang kinds), by plugin name;
* ``PACKING_BOOKS``: the rules' state the packing hint counts exactly (devices), by plugin name;
* ``may_preempt``: whether a preemptor may evict a victim (DefaultPreemption's eligibility);
  ``PLAN_RANKS``: the rules' levels after the evictions' when two plans are compared;
  ``PLAN_OUTPUTS``: what the rules add to a plan beyond its placements (devices per claim, volumes);
* ``CROWDING``: the score plugins' crowding terms for the CP-SAT objective;
* ``REPACK_KEEPS``: for re-packing, the rules' limits on where a moving pod may go;
* ``PREPARES``: each rule's part in building a context (``context.build_context``);
  ``NOMINATIONS``: the one hook giving the room pods outside the window keep (None: no plugin).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Optional, TypeVar, cast

import numpy as np

from ..framework import SUCCESS, Status
from ..info import NodeInfo, PodInfo
from ..plugin_api import (Apart, Capacity, HandOut, Check, Coupling, CouplingHook, Crowding, ScoreCacheHook, Couples, CycleHook, Encoder,
                          GreedyHook, QueueSort, NodeNames, NominationsHook, Plugin, StaticFilter, PackingBook, PlanOutput, BindWrite, PostFilter, PreBind,
                          Prepare, Prune, KindRoom, WindowPart)
from ..state import ClusterState
from . import static_check
from .balanced_allocation.plugin import PLUGIN as balanced_allocation
from .dynamic_resources.plugin import PLUGIN as dynamic_resources
from .composite_group.plugin import PLUGIN as composite_group
from .gang.plugin import PLUGIN as gang
from .group_disruption.plugin import PLUGIN as group_disruption
from .image_locality.plugin import PLUGIN as image_locality
from .inter_pod_affinity.plugin import PLUGIN as inter_pod_affinity
from .node_affinity.plugin import PLUGIN as node_affinity
from .node_name.plugin import PLUGIN as node_name
from .node_ports.plugin import PLUGIN as node_ports
from .node_resources_fit.plugin import PLUGIN as node_resources_fit
from .node_unschedulable.plugin import PLUGIN as node_unschedulable
from .pod_topology_spread.plugin import PLUGIN as pod_topology_spread
from .preemption.plugin import PLUGIN as preemption
from .taint_toleration.plugin import PLUGIN as taint_toleration
from .volumes.node_volume_limits.plugin import PLUGIN as node_volume_limits
from .volumes.volume_binding.plugin import PLUGIN as volume_binding
from .volumes.volume_restrictions.plugin import PLUGIN as volume_restrictions
from .volumes.volume_zone.plugin import PLUGIN as volume_zone

if TYPE_CHECKING:
    from models.objects import Node, Pod
    from models.plan import Plan
    from models.snapshot import ClusterSnapshot

T = TypeVar("T")

PLUGINS: tuple[Plugin, ...] = (
    node_unschedulable,
    node_name,
    taint_toleration,
    node_affinity,
    node_ports,
    node_resources_fit,
    volume_restrictions,
    node_volume_limits,
    volume_binding,
    volume_zone,
    pod_topology_spread,
    inter_pod_affinity,
    dynamic_resources,
    balanced_allocation,
    image_locality,
    gang,
    composite_group,
    group_disruption,
    preemption,
)

# The CP-SAT model's build order (variables and constraints are numbered in it, and the search
# follows them): the filters' encodings first, then the window-wide ones.
ENCODE_ORDER = (node_resources_fit, node_ports, inter_pod_affinity, pod_topology_spread, dynamic_resources,
                gang, preemption, volume_restrictions, node_volume_limits, volume_binding)
# The validator's report order, after the static filters' one check.
CHECK_ORDER = (node_resources_fit, node_ports, volume_restrictions, node_volume_limits, volume_binding, volume_zone,
               inter_pod_affinity, pod_topology_spread, gang, preemption, dynamic_resources)


def _ordered(first: Iterable[Plugin]) -> tuple[Plugin, ...]:
    """``first``, then every other plugin in ``PLUGINS`` order."""
    named = tuple(first)
    return named + tuple(p for p in PLUGINS if p not in named)


# What the engines read, derived from ``PLUGINS`` by ``_derive`` (again at each ``register``):
# an engine reads them as ``registry.NAME`` when it runs, never copies one at import.
STATIC_FILTERS: tuple[StaticFilter, ...] = ()
STATIC_NODE_NAMES: tuple[NodeNames, ...] = ()
CYCLE_FILTERS: tuple[CycleHook, ...] = ()
PRUNES: tuple[Prune, ...] = ()
SCORE_PLUGINS: tuple[Any, ...] = ()
SCORE_PLUGIN_NAMES: tuple[str, ...] = ()
# (score NAME, hook): the score plugins' parts in greedy's score cache, in PLUGINS order.
SCORE_CACHE: tuple[tuple[str, ScoreCacheHook], ...] = ()
# (plugin name, encoder), in build order: the engine keeps what an encoder returns by the name.
FILTER_ENCODINGS: tuple[tuple[str, Encoder], ...] = ()
WINDOW_ENCODINGS: tuple[tuple[str, Encoder], ...] = ()
FILTER_ENCODERS: tuple[Encoder, ...] = ()
WINDOW_ENCODERS: tuple[Encoder, ...] = ()
COUPLERS: tuple[Couples, ...] = ()
FINAL_CHECKS: tuple[Check, ...] = ()
CAPACITY: tuple[Capacity, ...] = ()
KIND_ROOMS: tuple[KindRoom, ...] = ()
GREEDY_PARTS: tuple[GreedyHook, ...] = ()
QUEUE_SORTS: tuple[QueueSort, ...] = ()
POSTFILTER: PostFilter | None = None
# (plugin name, hook): the books the packing hint counts exactly (devices).
PACKING_BOOKS: tuple[tuple[str, Callable[[Any], PackingBook]], ...] = ()
PLAN_RANKS: tuple[Callable[[Any, dict[str, int], list[Any]], tuple], ...] = ()
# The rules that give a plan more than placements and evictions (devices per claim, volumes).
PLAN_OUTPUTS: tuple[PlanOutput, ...] = ()
CROWDING: tuple[Crowding, ...] = ()
REPACK_KEEPS: tuple[Any, ...] = ()
PREPARES: tuple[Prepare, ...] = ()
NOMINATIONS: NominationsHook | None = None
_WINDOWS: tuple[tuple[str, Callable[[Any], WindowPart]], ...] = ()
_MAY_PREEMPT: tuple[Callable[[PodInfo, PodInfo], bool], ...] = ()
_PER_NODE: tuple[tuple[str, Callable[[PodInfo], bool]], ...] = ()
_APART: tuple[Apart, ...] = ()
HAND_OUT: HandOut | None = None  # the one rule that hands a class's places to its pods (``Plugin.hand_out``)


def _one(hooks: list[T]) -> T | None:
    assert len(hooks) <= 1, "one plugin at most gives this hook (kube-scheduler's default profile has one)"
    return hooks[0] if hooks else None


def _derive() -> None:
    """Every list the engines read, from ``PLUGINS`` as it is now."""
    global STATIC_FILTERS, STATIC_NODE_NAMES, CYCLE_FILTERS, PRUNES, SCORE_PLUGINS, SCORE_PLUGIN_NAMES, SCORE_CACHE
    global FILTER_ENCODINGS, WINDOW_ENCODINGS, FILTER_ENCODERS, WINDOW_ENCODERS, COUPLERS, FINAL_CHECKS, CAPACITY
    global GREEDY_PARTS, QUEUE_SORTS, POSTFILTER, PACKING_BOOKS, PLAN_RANKS, PLAN_OUTPUTS, CROWDING, REPACK_KEEPS, PREPARES
    global NOMINATIONS, _WINDOWS, _MAY_PREEMPT, _PER_NODE, KIND_ROOMS, _APART, HAND_OUT
    STATIC_FILTERS = tuple(cast(StaticFilter, p.filter) for p in PLUGINS if p.static)
    STATIC_NODE_NAMES = tuple(p.node_names for p in PLUGINS if p.node_names is not None)
    CYCLE_FILTERS = tuple(p.cycle for p in PLUGINS if p.cycle is not None)
    # Candidate pruning before CP-SAT's variables exist (every plugin's mask is and-ed).
    PRUNES = tuple(p.prune for p in PLUGINS if p.prune is not None)
    SCORE_PLUGINS = tuple(p.score for p in PLUGINS if p.score is not None)
    SCORE_PLUGIN_NAMES = tuple(p.NAME for p in SCORE_PLUGINS)
    SCORE_CACHE = tuple((p.score.NAME, p.score_cache) for p in PLUGINS
                        if p.score is not None and p.score_cache is not None)
    FILTER_ENCODINGS = tuple((p.name, e) for p in _ordered(ENCODE_ORDER) for e in p.encode)
    WINDOW_ENCODINGS = FILTER_ENCODINGS + tuple((p.name, e) for p in _ordered(ENCODE_ORDER) for e in p.window_encode)
    FILTER_ENCODERS = tuple(e for _, e in FILTER_ENCODINGS)
    WINDOW_ENCODERS = tuple(e for _, e in WINDOW_ENCODINGS)
    COUPLERS = tuple(p.couples for p in PLUGINS if p.couples is not None)
    FINAL_CHECKS = (static_check.check,) + tuple(c for p in _ordered(CHECK_ORDER) for c in p.checks)
    CAPACITY = tuple(p.capacity for p in PLUGINS if p.capacity is not None)
    assert CAPACITY, "some rule must count requests against a node's room"
    KIND_ROOMS = tuple(p.kind_room for p in PLUGINS if p.kind_room is not None)
    _APART = tuple(p.apart for p in PLUGINS if p.apart is not None)
    GREEDY_PARTS = tuple(p.greedy for p in PLUGINS if p.greedy is not None)
    QUEUE_SORTS = tuple(p.queue_sort for p in PLUGINS if p.queue_sort is not None)
    POSTFILTER = _one([p.postfilter for p in PLUGINS if p.postfilter is not None])
    PACKING_BOOKS = tuple((p.name, p.packing) for p in PLUGINS if p.packing is not None)
    PLAN_RANKS = tuple(p.plan_rank for p in PLUGINS if p.plan_rank is not None)
    PLAN_OUTPUTS = tuple(p.plan_output for p in PLUGINS if p.plan_output is not None)
    CROWDING = tuple(p.crowding for p in PLUGINS if p.crowding is not None)
    REPACK_KEEPS = tuple(p.repack_keep for p in PLUGINS if p.repack_keep is not None)
    PREPARES = tuple(p.prepare for p in PLUGINS if p.prepare is not None)
    NOMINATIONS = _one([p.nominations for p in PLUGINS if p.nominations is not None])
    _WINDOWS = tuple((p.name, p.window) for p in PLUGINS if p.window is not None)
    _MAY_PREEMPT = tuple(p.may_preempt for p in PLUGINS if p.may_preempt is not None)
    _PER_NODE = tuple((p.name, p.per_node_state) for p in PLUGINS if p.per_node_state is not None)
    HAND_OUT = _one([p.hand_out for p in PLUGINS if p.hand_out is not None])
    _derive_facts()
    ClusterState.book_makers = tuple((p.name, p.state) for p in PLUGINS if p.state is not None)


def register(plugin: Plugin) -> None:
    """Add ``plugin`` after every plugin listed, and derive every list again: the one line a
    plugin living outside this package (a test's) needs. Its encoders and checks run after the
    others'. ``unregister`` takes it out again."""
    global PLUGINS
    if any(p.name == plugin.name for p in PLUGINS):
        raise ValueError(f"a plugin named {plugin.name!r} is registered already")
    PLUGINS = PLUGINS + (plugin,)
    _derive()


def unregister(plugin: Plugin) -> None:
    """Take a plugin ``register`` added out again (the lists are derived anew)."""
    global PLUGINS
    PLUGINS = tuple(p for p in PLUGINS if p is not plugin)
    _derive()


@contextmanager
def registered(plugin: Plugin) -> Iterator[Plugin]:
    """``register(plugin)`` for the length of a ``with`` block (a test's plugin)."""
    register(plugin)
    try:
        yield plugin
    finally:
        unregister(plugin)


def fits(vec: np.ndarray, room: Any) -> Any:
    """Whether one pod of request ``vec`` fits ``room`` (a node's row, or a bool per row) for every
    rule counting requests against room."""
    out = CAPACITY[0].fits(vec, room)
    for rule in CAPACITY[1:]:
        out = out & rule.fits(vec, room)
    return out


def copies(vec: np.ndarray, room: np.ndarray) -> np.ndarray:
    """How many pods of request ``vec`` fit ``room`` together (per row), the fewest any rule allows."""
    out = CAPACITY[0].copies(vec, room)
    for rule in CAPACITY[1:]:
        out = np.minimum(out, rule.copies(vec, room))
    return out


def apart(pod: PodInfo) -> Optional[Callable[[PodInfo], bool]]:
    """None when no rule keeps ``pod`` off a node for another pod's sake, else whether some rule
    never lets ``pod`` and another pod share a node (``Apart``: their host ports collide)."""
    rules = [rule for make in _APART if (rule := make(pod)) is not None]
    if not rules:
        return None
    return lambda other: any(rule(other) for rule in rules)


def window_parts(ctx: Any) -> dict[str, WindowPart]:
    """Every rule's view of the window ``ctx`` for CP-SAT, by plugin name (``WindowPart``)."""
    return {name: make(ctx) for name, make in _WINDOWS}


def static_verdict(pod: PodInfo, node: NodeInfo) -> Status:
    """The static rules' verdict on ``pod`` and ``node``: a PreFilter restricting the pod to other
    nodes by name, else the first static Filter that fails (``StaticVerdict``)."""
    for node_names in STATIC_NODE_NAMES:
        narrowed = node_names(pod)
        if narrowed is not None and node.name not in narrowed[0]:
            return narrowed[1]
    for plugin in STATIC_FILTERS:
        status = plugin.filter(pod, node)
        if not status.ok:
            return status
    return SUCCESS


def hands_out(rep: PodInfo) -> bool:
    """Whether a rule hands the places of ``rep``'s class to its pods in an order of its own
    (``Plugin.hand_out``), not node by node."""
    return HAND_OUT is not None and HAND_OUT.applies(rep)


def hand_out(ctx: Any, static: Any, pods: Sequence[PodInfo], slots: Sequence[tuple[int, int]]) -> list[int]:
    """The node of each of the first pods of a class (queue order), one per place of ``slots``
    ((node, pods there), by node): the rule's order where one has a say, else node by node."""
    rule = HAND_OUT
    if pods and rule is not None and rule.applies(pods[0]):
        return list(rule.order(ctx, static, pods, slots))
    return [n for n, k in slots for _ in range(k)]


def may_preempt(preemptor: PodInfo, victim: PodInfo) -> bool:
    """Whether ``preemptor`` may evict ``victim`` at all, by every rule that says (none: never)."""
    return bool(_MAY_PREEMPT) and all(rule(preemptor, victim) for rule in _MAY_PREEMPT)


def per_node_state(pod: PodInfo, besides: Collection[str] = ()) -> bool:
    """Whether some rule keeps state per node for ``pod`` (its volumes, its devices): nodes alike in
    every other way are then not interchangeable for it. ``besides``: the names of plugins whose
    per-node state the caller accounts for itself (the packing hint counts devices where exact)."""
    return any(uses(pod) for name, uses in _PER_NODE if name not in besides)


# --------------------------------------------------------------------------- declared facts

_SIGNATURES: tuple[Callable[[PodInfo], Hashable], ...] = ()
_POD_LABEL_KEYS: tuple[Callable[[PodInfo], Iterable[str]], ...] = ()
_NODE_LABEL_KEYS: tuple[Callable[[PodInfo], Optional[Iterable[str]]], ...] = ()
_TOPOLOGY_KEYS: tuple[Callable[[PodInfo], Iterable[str]], ...] = ()
_COUPLINGS: tuple[CouplingHook, ...] = ()
PREBINDS: tuple[tuple[str, PreBind], ...] = ()


def _derive_facts() -> None:
    global _SIGNATURES, _POD_LABEL_KEYS, _NODE_LABEL_KEYS, _TOPOLOGY_KEYS, _COUPLINGS, PREBINDS
    reads = [p.reads for p in PLUGINS]
    _SIGNATURES = tuple(r.signature for r in reads if r.signature is not None)
    _POD_LABEL_KEYS = tuple(r.pod_label_keys for r in reads if r.pod_label_keys is not None)
    _NODE_LABEL_KEYS = tuple(r.node_label_keys for r in reads if r.node_label_keys is not None)
    _TOPOLOGY_KEYS = tuple(r.topology_keys for r in reads if r.topology_keys is not None)
    _COUPLINGS = tuple(r.coupling for r in reads if r.coupling is not None)
    PREBINDS = tuple((p.name, p.prebind) for p in PLUGINS if p.prebind is not None)


def signature(pod: PodInfo) -> tuple:
    """What the rules read of ``pod`` beyond ``PodInfo.scheduling_signature`` (each rule's
    ``Reads.signature``; () when no rule declares one): part of the pod's class."""
    return tuple(part(pod) for part in _SIGNATURES) if _SIGNATURES else ()


def _union(reads: Iterable[Callable[[PodInfo], Iterable[str]]], pod: PodInfo) -> set[str]:
    keys: set[str] = set()
    for read in reads:
        keys.update(read(pod))
    return keys


def pod_label_keys(pod: PodInfo) -> set[str]:
    """The pod label keys the pod's own selectors read, by every rule (``Reads.pod_label_keys``)."""
    return _union(_POD_LABEL_KEYS, pod)


def node_label_keys(pod: PodInfo) -> Optional[set[str]]:
    """The node label keys the rules read for ``pod`` (``Reads.node_label_keys``); None: some rule
    reads the node's name."""
    keys: set[str] = set()
    for read in _NODE_LABEL_KEYS:
        some = read(pod)
        if some is None:
            return None
        keys.update(some)
    return keys


def topology_keys(pod: PodInfo) -> set[str]:
    """The node label keys whose domains the rules couple ``pod`` through (``Reads.topology_keys``)."""
    return _union(_TOPOLOGY_KEYS, pod)


def coupling(pod: PodInfo, state: Optional[ClusterState] = None) -> Coupling:
    """How far the rules tie ``pod`` to other pods: the furthest any rule says (``Coupling``).
    ``state``: also count what pods in it hold on this one (running pods' anti-affinity)."""
    out = Coupling.NONE
    for rule in _COUPLINGS:
        out = max(out, rule(pod, state))
        if out is Coupling.ACROSS:
            break
    return out


def prebinds(plan: Plan, snapshot: ClusterSnapshot) -> Callable[[Pod, Pod, Node], list[tuple[str, BindWrite]]]:
    """Every rule's PreBind for the pods ``plan`` places, in ``PLUGINS`` order: given a pod as the
    snapshot holds it, as read from the cluster and the node it goes to, what each rule writes
    before the bind (plugin name, record)."""
    hooks = [(name, make(plan, snapshot)) for name, make in PREBINDS]

    def writes(pod: Pod, read: Pod, node: Node) -> list[tuple[str, BindWrite]]:
        out = []
        for name, hook in hooks:
            write = hook(pod, read, node)
            if write is not None:
                out.append((name, write))
        return out

    return writes


_derive()

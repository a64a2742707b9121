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
* ``GREEDY_PARTS``: each rule's part in greedy's pass beyond its filter (gangs, spread's guard);
  ``POSTFILTER``: greedy's PostFilter (DefaultPreemption; None: no plugin gives one);
* ``window_parts``: each rule's view of a whole window for CP-SAT (gang kinds), by plugin name;
* ``PACKING_BOOKS``: the rules' state the packing hint counts exactly (devices), by plugin name;
* ``may_preempt``: whether a preemptor may evict a victim (DefaultPreemption's eligibility);
  ``PLAN_RANKS``: the rules' levels after the evictions' when two plans are compared;
  ``PLAN_ALLOCATIONS``: what the rules add to a plan beyond its placements (devices per claim);
* ``CROWDING``: the score plugins' crowding terms for the CP-SAT objective;
* ``REPACK_KEEPS``: for re-packing, the rules' limits on where a moving pod may go;
* ``PREPARES``: each rule's part in building a context (``context.build_context``);
  ``NOMINATIONS``: the one hook giving the room pods outside the window keep (None: no plugin).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from typing import Any

import numpy as np

from ..info import PodInfo
from ..plugin_api import (Capacity, Check, Crowding, ScoreCacheHook, Couples, CycleHook, Encoder, GreedyHook, NodeNames, NominationsHook, Plugin,
                          PackingBook, PostFilter, Prepare, WindowPart)
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
from .node_volume_limits.plugin import PLUGIN as node_volume_limits
from .pod_topology_spread.plugin import PLUGIN as pod_topology_spread
from .pod_topology_spread.score import soft_constraints as _soft_spread
from .preemption.plugin import PLUGIN as preemption
from .taint_toleration.plugin import PLUGIN as taint_toleration
from .volume_binding.plugin import PLUGIN as volume_binding
from .volume_restrictions.plugin import PLUGIN as volume_restrictions
from .volume_zone.plugin import PLUGIN as volume_zone

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


STATIC_FILTERS: tuple[Any, ...] = tuple(p.filter for p in PLUGINS if p.static)
STATIC_NODE_NAMES: tuple[NodeNames, ...] = tuple(p.node_names for p in PLUGINS if p.node_names is not None)
# Greedy runs the volume rules as one cycle for a pod with claims (``volume_binding/filter.py``).
_VOLUME_PLUGINS = (volume_restrictions, node_volume_limits, volume_binding, volume_zone)
VOLUME_FILTERS = tuple(p.filter for p in _VOLUME_PLUGINS)
DYNAMIC_FILTERS = tuple(p.filter for p in PLUGINS if not p.static and p.filter is not None and p not in _VOLUME_PLUGINS)
CYCLE_FILTERS: tuple[CycleHook, ...] = tuple(p.cycle for p in PLUGINS if p.cycle is not None)
FILTER_NAMES = tuple(p.name for p in PLUGINS if p.filter is not None)

# Candidate pruning before CP-SAT's variables exist (every plugin's mask is and-ed).
PRUNES = tuple(p.prune for p in PLUGINS if p.prune is not None)

SCORE_PLUGINS: tuple[Any, ...] = tuple(p.score for p in PLUGINS if p.score is not None)
SCORE_PLUGIN_NAMES = tuple(p.NAME for p in SCORE_PLUGINS)
# (score NAME, hook): the score plugins' parts in greedy's score cache, in PLUGINS order.
SCORE_CACHE: tuple[tuple[str, ScoreCacheHook], ...] = tuple(
    (p.score.NAME, p.score_cache) for p in PLUGINS if p.score is not None and p.score_cache is not None)

# (plugin name, encoder), in build order: the engine keeps what an encoder returns by the name.
FILTER_ENCODINGS: tuple[tuple[str, Encoder], ...] = tuple((p.name, e) for p in _ordered(ENCODE_ORDER) for e in p.encode)
WINDOW_ENCODINGS: tuple[tuple[str, Encoder], ...] = FILTER_ENCODINGS + tuple(
    (p.name, e) for p in _ordered(ENCODE_ORDER) for e in p.window_encode)
FILTER_ENCODERS: tuple[Encoder, ...] = tuple(e for _, e in FILTER_ENCODINGS)
WINDOW_ENCODERS: tuple[Encoder, ...] = tuple(e for _, e in WINDOW_ENCODINGS)

COUPLERS: tuple[Couples, ...] = tuple(p.couples for p in PLUGINS if p.couples is not None)

FINAL_CHECKS: tuple[Check, ...] = (static_check.check,) + tuple(c for p in _ordered(CHECK_ORDER) for c in p.checks)

CAPACITY: tuple[Capacity, ...] = tuple(p.capacity for p in PLUGINS if p.capacity is not None)
assert CAPACITY, "some rule must count requests against a node's room"


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


GREEDY_PARTS: tuple[GreedyHook, ...] = tuple(p.greedy for p in PLUGINS if p.greedy is not None)
_POSTFILTERS = [p.postfilter for p in PLUGINS if p.postfilter is not None]
assert len(_POSTFILTERS) <= 1, "one PostFilter at most (kube-scheduler's default profile has DefaultPreemption)"
POSTFILTER: PostFilter | None = _POSTFILTERS[0] if _POSTFILTERS else None

_WINDOWS = tuple((p.name, p.window) for p in PLUGINS if p.window is not None)


def window_parts(ctx: Any) -> dict[str, WindowPart]:
    """Every rule's view of the window ``ctx`` for CP-SAT, by plugin name (``WindowPart``)."""
    return {name: make(ctx) for name, make in _WINDOWS}


# (plugin name, hook): the books the packing hint counts exactly (devices).
PACKING_BOOKS: tuple[tuple[str, Callable[[Any], PackingBook]], ...] = tuple(
    (p.name, p.packing) for p in PLUGINS if p.packing is not None)

_MAY_PREEMPT = tuple(p.may_preempt for p in PLUGINS if p.may_preempt is not None)
PLAN_RANKS: tuple[Callable[[Any, dict[str, int], list[Any]], tuple], ...] = tuple(
    p.plan_rank for p in PLUGINS if p.plan_rank is not None)
# The rules that give a plan more than placements and evictions (devices per claim).
PLAN_ALLOCATIONS: tuple[Callable[[Any, dict[str, int], list[Any]], tuple], ...] = tuple(
    p.plan_allocations for p in PLUGINS if p.plan_allocations is not None)


def may_preempt(preemptor: PodInfo, victim: PodInfo) -> bool:
    """Whether ``preemptor`` may evict ``victim`` at all, by every rule that says (none: never)."""
    return bool(_MAY_PREEMPT) and all(rule(preemptor, victim) for rule in _MAY_PREEMPT)


CROWDING: tuple[Crowding, ...] = tuple(p.crowding for p in PLUGINS if p.crowding is not None)
REPACK_KEEPS = tuple(p.repack_keep for p in PLUGINS if p.repack_keep is not None)

PREPARES: tuple[Prepare, ...] = tuple(p.prepare for p in PLUGINS if p.prepare is not None)
_NOMINATIONS = [p.nominations for p in PLUGINS if p.nominations is not None]
assert len(_NOMINATIONS) <= 1, "one plugin at most says which room pods outside the window keep"
NOMINATIONS: NominationsHook | None = _NOMINATIONS[0] if _NOMINATIONS else None

_PER_NODE: tuple[tuple[str, Callable[[PodInfo], bool]], ...] = tuple(
    (p.name, p.per_node_state) for p in PLUGINS if p.per_node_state is not None)


def per_node_state(pod: PodInfo, besides: Collection[str] = ()) -> bool:
    """Whether some rule keeps state per node for ``pod`` (its volumes, its devices): nodes alike in
    every other way are then not interchangeable for it. ``besides``: the names of plugins whose
    per-node state the caller accounts for itself (the packing hint counts devices where exact)."""
    return any(uses(pod) for name, uses in _PER_NODE if name not in besides)


def soft_spread_keys(pod: PodInfo) -> frozenset[str]:
    """The topology keys PodTopologySpread's score reads of nodes for ``pod``: those of its
    ScheduleAnyway constraints, or, for a controller's pod with none, kube-scheduler's system
    defaults (hostname and zone)."""
    return frozenset(c.topology_key for c in _soft_spread(pod)[0])

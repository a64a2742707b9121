"""Preferred multi-level topology for gangs: as few domains as possible, widest level first.

A PodGroup (any shape) may carry the ``cpsat-scheduler.io/preferred-topology`` annotation, node
label keys from widest to narrowest (``topology.example.com/block,topology.example.com/rack``):
its members should share one block if they can, then as few racks as they can. It is a
preference, never a rule: the gang is still placed whole or not at all, and the objective keeps
it below placement, PodDisruptionBudgets and victims (``spans_level``), so a pod is never left out,
nor another evicted, to save a domain. ``models.objects.preferred_topology_keys`` parses the
annotation once (an empty key is refused with the object and field named).

* ``encode``: per gang and key, a bool per domain its members use; their count, summed over the
  gangs of the window, is one lexicographic level per depth (widest first), below victims;
* ``spans``: the same count read from a plan, so the solver's plan and greedy's are weighed alike;
* ``narrow``: greedy's light touch — among a member's feasible nodes, those in the domains its
  gang already uses, widest level first, whenever there are any.

A node without a key's label is a domain of its own under that key (``place_ids``): where its
members run next to the others is not known, so it never counts for less than a domain and a
gang is not steered onto unlabelled nodes. Interchangeable gangs with
the same keys share a kind (``permit.kinds``); the kind counts, per domain, the fewest of its
gangs that its pods there must touch (``encode``), and its decoding deals each gang's pods from
nodes in domain order, so the plan's gangs span what the model counted wherever the counts divide
into whole gangs (``spans`` reads the plan itself, so greedy's plan wins any tie it loses).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING, Optional

import numpy as np
from ortools.sat.python import cp_model

from models.objects import PodGroup, preferred_topology_keys

from ...plugin_api import Level
from . import topology
from .encoding import GangEncoding

if TYPE_CHECKING:
    from ...plugin_api import EncodeModel as WindowModel
    from ...state import ClusterState

NAME = "GangPreferredTopology"
# Objective levels, one per depth of the keys (0: the widest), placed just above ``score``.
LEVEL_PREFIX = "topology_domains"


def keys_of(group: Optional[PodGroup]) -> tuple[str, ...]:
    """The group's preferred topology keys, widest first (empty: no preference)."""
    return preferred_topology_keys(group.metadata.annotations) if group is not None else ()


def spans_level(wm: WindowModel, depth: int) -> Level:
    """The objective level counting domains at ``depth``, created below victims, above scores."""
    name = f"{LEVEL_PREFIX}[{depth}]"
    found = next((lv for lv in wm.levels if lv.name == name), None)
    if found is None:
        found = Level(name)
        # Wider levels first: each new depth goes just above the score level.
        wm.levels.insert(wm.levels.index(wm.level("score")), found)
    return found


# --------------------------------------------------------------------------- CP-SAT encoding


def encode(wm: WindowModel, enc: GangEncoding) -> None:
    """For each gang with preferred keys, each key and each domain of it its members could use:
    ``uses[g, k, d]`` is 1 whenever a member lands in domain ``d``; −Σ uses is the level of the
    key's depth. A gang whose members can reach one domain only needs nothing. A kind of such
    gangs: ``touch[k, key, d]``, at least the gangs its pods in domain ``d`` come from (each gang
    brings at most its members of a class), summed into the same level."""
    in_kind = enc.in_kinds
    for kind in enc.kinds:
        if kind.preferred_keys:
            _encode_kind(wm, kind)
    for gang in enc.gangs.values():
        keys = keys_of(gang.group)
        if not keys or gang.key in in_kind:
            continue
        members = topology.member_classes(wm, gang.key)
        if not members:
            continue
        for depth, key in enumerate(keys):
            in_domain, bound = topology.members_by_domain(wm, members, key, lambda c, k: places(wm, c, k))
            if len(in_domain) < 2:
                continue
            level = spans_level(wm, depth)
            for d, vars_ in sorted(in_domain.items()):
                # uses[g, k, d]: some member of gang g runs in domain d of key k.
                uses = wm.model.new_bool_var(f"uses[{gang.key},{key},{d}]")
                wm.model.add(cp_model.LinearExpr.sum(vars_) <= bound[d] * uses)
                level.add(uses, -1, 0, 1)


def place_ids(state: ClusterState, key: str) -> np.ndarray:
    """Per node, the place its members count under ``key``: its domain's id, or for a node
    lacking the label a place of its own (the domain count plus its index): where such a member
    runs next to the others is not known, so it is never cheaper than a domain."""
    ids, values = state.domains(key)
    return np.where(ids >= 0, ids, len(values) + np.arange(len(ids)))


def places(wm: WindowModel, cls_id: int, key: str) -> dict[int, list]:
    """x[c, n] grouped by the place of n under ``key`` (``place_ids``)."""
    ids = place_ids(wm.state, key)
    out: dict[int, list] = defaultdict(list)
    for n, var in wm.by_class.get(cls_id, []):
        out[int(ids[n])].append(var)
    return out


def _encode_kind(wm: WindowModel, kind) -> None:
    # The kind's classes in this component's model that may still place a pod.
    classes = [c for c in kind.classes if c.id in wm.placed and not isinstance(wm.placed[c.id], int)]
    if not classes:
        return
    for depth, key in enumerate(kind.preferred_keys):
        by_domain: dict[int, list[tuple]] = defaultdict(list)
        for c in classes:
            for d, vars_ in places(wm, c.id, key).items():
                by_domain[d].append((c, vars_))
        if len(by_domain) < 2:
            continue
        level = spans_level(wm, depth)
        for d, entries in sorted(by_domain.items()):
            # touch[k, key, d]: gangs of kind k with a member in domain d of key.
            touch = wm.model.new_int_var(0, len(kind.gangs), f"touch[{kind.name},{key},{d}]")
            for c, vars_ in entries:
                wm.model.add(cp_model.LinearExpr.sum(vars_) <= kind.per_gang[c.id] * touch)
            level.add(touch, -1, 0, len(kind.gangs))


# --------------------------------------------------------------------------- plans


def spans(ctx, placements: dict[str, int]) -> tuple[int, ...]:
    """Per depth, the domains the window's preferred-topology gangs span in ``placements`` (pod
    key -> node index), summed over the gangs: what ``encode``'s levels count."""
    preferring = {g: keys for g, group in ctx.pod_groups.items() if (keys := keys_of(group))}
    # One length for every plan of the window, so that tuples compare level by level.
    out = [0] * max((len(keys) for keys in preferring.values()), default=0)
    if not preferring:
        return ()
    nodes_of: dict[str, list[int]] = defaultdict(list)
    for key, node in placements.items():
        pod = ctx.pod(key)
        if pod is not None and pod.group in preferring:
            nodes_of[pod.group].append(node)
    for group, nodes in nodes_of.items():
        for depth, key in enumerate(preferring[group]):
            ids = place_ids(ctx.state, key)
            out[depth] += len({int(ids[n]) for n in nodes})
    return tuple(out)


# --------------------------------------------------------------------------- greedy


def narrow(keys: tuple[str, ...], state: ClusterState, feasible: np.ndarray, used: Iterable[int]) -> np.ndarray:
    """``feasible`` nodes narrowed, level by level from the widest, to the domains the gang's
    members already use (``used``: their nodes), as long as some feasible node is left."""
    used = list(used)
    if not used or not len(feasible):
        return feasible
    for key in keys:
        ids = state.domains(key)[0]
        taken = {int(ids[n]) for n in used} - {-1}
        inside = feasible[np.isin(ids[feasible], np.array(sorted(taken), dtype=ids.dtype))]
        if not len(inside):
            break
        feasible = inside
    return feasible

"""VolumeBinding (and VolumeZone) in the CP-SAT model.

What one pod's claims allow of a node alone — its bound volumes' node affinity and zone labels,
a delayed claim having some matching volume that admits the node or a class that provisions
there, a PreFilter failure — prunes the class's candidate nodes (``prune``). What couples pods of
the window is that one volume serves one claim: for each delayed claim c and each volume p that
matches it, ``bind[c, p]``; ``prov[c]`` when it is provisioned instead;

    Σ_p bind[c, p] + prov[c] ≤ 1                    (one volume per claim)
    Σ_c bind[c, p] ≤ 1                              (one claim per volume)
    x[k, n] ≤ ub · (prov[c]·[class provisions on n] + Σ_{p admits n} bind[c, p])
                                                    (for every class k mounting c)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from ortools.sat.python import cp_model

from ....info import PodInfo
from ....state import ClusterState
from . import rules
from .filter import VolumeCycle

if TYPE_CHECKING:
    from ....plugin_api import EncodeModel as WindowModel


def prune(pod: PodInfo, state: ClusterState, can_evict=lambda other: False) -> np.ndarray:
    """Nodes the pod's claims allow by VolumeBinding and VolumeZone with no volume yet taken in
    the window; False everywhere when a PreFilter fails. When running pods hold one of its
    ReadWriteOncePod claims, only their node, if they are all there and the pod may evict them
    (kube-scheduler's preemption frees the claim by evicting on the candidate node only)."""
    ok = np.ones(len(state.nodes), dtype=bool)
    if not pod.claims:
        return ok
    cycle = VolumeCycle(pod, state)
    if cycle.failed is not None:
        ok[:] = False
        return ok
    if cycle.holders:
        where = {state.where[k] for k in cycle.holders}
        holders = [state.pods_on[n][k] for k in cycle.holders for n in where if k in state.pods_on[n]]
        ok[:] = False
        if len(where) != 1 or not all(can_evict(h) for h in holders):
            return ok
        ok[next(iter(where))] = True
    for node in state.nodes:
        if rules.reasons(cycle.binding, node.name, node.labels, {}):
            ok[node.index] = False
        elif not cycle_zone_fits(cycle, node.labels):
            ok[node.index] = False
    return ok


def cycle_zone_fits(cycle: VolumeCycle, labels) -> bool:
    from ..volume_zone import rules as zone

    return zone.fits(cycle.zone, labels)


def encode(wm: WindowModel) -> None:
    catalog = wm.state.volumes
    with_claims = [c for c in wm.classes if c.rep.claims and wm.by_class.get(c.id)]
    if not with_claims or not catalog:
        return
    m = wm.model
    nodes = wm.state.nodes
    delayed: dict[str, rules.Delayed] = {}
    users: dict[str, list] = {}
    for cls in with_claims:
        claims = rules.prefilter(cls.rep.namespace, cls.rep.claims, catalog)
        for d in claims.delayed:
            delayed[d.key] = d
            users.setdefault(d.key, []).append(cls)
    # Per delayed claim, ({volume: bind var}, provisioned var): read only here (the plan's
    # bindings are matched on the final state, ``filter.bindings_of``), so not kept on the model.
    volume_vars: dict[str, tuple[dict[str, cp_model.IntVar], cp_model.IntVar]] = {}
    by_volume: dict[str, list] = {}
    for key in sorted(delayed):
        d = delayed[key]
        binds = {pv.name: m.new_bool_var(f"bind[{key},{pv.name}]") for pv in d.candidates}
        prov = m.new_bool_var(f"prov[{key}]")
        m.add(cp_model.LinearExpr.sum([*binds.values(), prov]) <= 1)
        for name, var in binds.items():
            by_volume.setdefault(name, []).append(var)
        volume_vars[key] = (binds, prov)
        pvs = {pv.name: pv for pv in d.candidates}
        for cls in users[key]:
            for n, x in wm.by_class[cls.id]:
                node = nodes[n]
                options = [var for name, var in binds.items() if rules.admits(pvs[name], node.name, node.labels)]
                if rules.can_provision(d.storage_class, node.labels):
                    options.append(prov)
                m.add(x <= wm.ub_of(cls.id, n) * cp_model.LinearExpr.sum(options) if options else x == 0)
    for name, vars_ in by_volume.items():
        if len(vars_) > 1:
            m.add(cp_model.LinearExpr.sum(vars_) <= 1)

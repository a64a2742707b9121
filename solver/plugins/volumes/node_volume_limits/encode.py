"""NodeVolumeLimits in the CP-SAT model: on each node with a CSINode limit for a driver the
window's pods use, one flag per unique claim of that driver on the node,

    on[c, n] ≥ x[k, n] / ub        for every class k mounting c
    on[c, n] ≥ 1 − evict[v]        for every running pod v on n mounting c (1 if v stays for sure)
    Σ_c on[c, n] ≤ limit(n, driver)    enforced when a claim no running pod there holds is on
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ortools.sat.python import cp_model

from . import rules

if TYPE_CHECKING:
    from ....plugin_api import EncodeModel as WindowModel


def encode(wm: WindowModel) -> None:
    catalog = wm.state.volumes
    if not catalog.limits:
        return
    m = wm.model
    for n, entries in sorted(wm.by_node.items()):
        limits = catalog.limits.get(wm.state.nodes[n].name)
        if not limits:
            continue
        mounting = [(cls, var) for cls, var in entries if cls.rep.claims]
        if not mounting:
            continue
        flags: dict[str, dict[str, list]] = {}  # driver -> claim -> what puts it on the node
        for cls, var in mounting:
            for driver, mounted in rules.by_driver(cls.rep.claims, catalog).items():
                for claim in mounted:
                    flags.setdefault(driver, {}).setdefault(claim, []).append(("x", var, wm.ub_of(cls.id, n)))
        for pod in wm.state.pods_on[n].values():
            for driver, held in rules.by_driver(pod.claims, catalog).items():
                if driver in flags:
                    for claim in held:
                        flags[driver].setdefault(claim, []).append(("run", wm.evictable(pod), 1))
        for driver, claims in sorted(flags.items()):
            limit = limits.get(driver)
            if limit is None:
                continue
            total: list[cp_model.IntVar] = []
            attached: list[cp_model.IntVar] = []
            # Claims running pods of the node hold that the plan may evict, with a window pod
            # mounting them: (mounted[c, n], the holders' evict literals).
            reattached: list[tuple[cp_model.IntVar, list]] = []
            fixed = 0
            for claim, sources in sorted(claims.items()):
                if any(kind == "run" and var is None for kind, var, _ in sources):
                    fixed += 1  # a running pod that stays holds it
                    continue
                on = m.new_bool_var(f"vol[{n},{claim}]")
                for kind, var, ub in sources:
                    if kind == "x":
                        m.add(var <= ub * on)
                    else:
                        m.add(on >= 1 - var)
                total.append(on)
                if all(kind == "x" for kind, _, _ in sources):
                    attached.append(on)  # no running pod of the node holds it: the window attaches it
                    continue
                mounts = [(var, ub) for kind, var, ub in sources if kind == "x"]
                if mounts:
                    mounted_here = m.new_bool_var(f"vol_mounted[{n},{claim}]")
                    for var, ub in mounts:
                        m.add(var <= ub * mounted_here)
                    reattached.append((mounted_here, [var for kind, var, _ in sources if kind == "run"]))
            if not attached and not reattached:
                continue
            # The limit binds when the window attaches a volume (a node already over it keeps
            # what it has, as the filter only refuses what adds to it) — also one a running pod
            # held, when the plan evicts every holder and a window pod mounts it again.
            adds = m.new_bool_var(f"vol_added[{n},{driver}]")
            for on in attached:
                m.add(on <= adds)
            for mounted_here, holders in reattached:
                m.add(mounted_here + cp_model.LinearExpr.sum(holders) - len(holders) <= adds)
            m.add(cp_model.LinearExpr.sum(total) + fixed <= limit).only_enforce_if(adds)

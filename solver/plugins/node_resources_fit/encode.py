"""NodeResourcesFit as CP-SAT: on every node, what stays and what the window places fits
allocatable, with the same request vectors the filter uses."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from ortools.sat.python import cp_model


if TYPE_CHECKING:
    from ...plugin_api import EncodeModel as WindowModel


def encode(wm: WindowModel) -> None:
    """Capacity: on every node, for every resource some candidate pod requests (the pod count
    included), the window's pods fit what is free plus what evicted pods give back.

    A node that running pods already overcommit is not the window's to fix: there the row for an
    overcommitted resource holds only when the window places a pod requesting that resource on it
    (which then needs evictions to make room)."""
    state = wm.state
    free = state.free
    victims_on: dict[int, list] = {}
    for key, (pod, node) in wm.evict_pod.items():
        victims_on.setdefault(node, []).append((state.vector(pod), wm.evict[key]))
    # Nodes with the same candidate classes share one coefficient matrix.
    shapes: dict[tuple[int, ...], np.ndarray] = {}
    for n, entries in wm.by_node.items():
        ids = tuple(cls.id for cls, _ in entries)
        vecs = shapes.get(ids)
        if vecs is None:
            vecs = shapes[ids] = np.array([wm.vec[i] for i in ids])
        ubs = np.fromiter((wm.ub_of(i, n) for i in ids), dtype=np.int64, count=len(ids))
        # Not ``ubs @ vecs`` in int64: products of huge quantities (2**62 bytes) wrap around and
        # hid the row. Floats first; exact Python integers where floats lose precision.
        load = ubs.astype(np.float64) @ vecs.astype(np.float64)
        if load.max(initial=0.0) >= 2.0**53:
            load = np.array([sum(int(u) * int(v) for u, v in zip(ubs, col)) for col in vecs.T], dtype=object)
        victims = victims_on.get(n)
        rows = np.nonzero(vecs.any(axis=0) & ((load > free[n]) | bool(victims)))[0]
        for r in rows.tolist():
            col = vecs[:, r]
            vars_ = [var for (_, var), v in zip(entries, col) if v]
            coeffs = [int(v) for v in col if v]
            for vvec, evict in victims or ():
                if vvec[r]:
                    vars_.append(evict)
                    coeffs.append(-int(vvec[r]))
            row = wm.model.add(cp_model.LinearExpr.weighted_sum(vars_, coeffs) <= int(free[n, r]))
            if free[n, r] < 0:
                # Only a placed pod that requests this resource must see it fit (kube-scheduler
                # checks just the resources a pod requests); a pod that does not may still land.
                requesting = [var for (_, var), v in zip(entries, col) if v]
                bound = int(sum(wm.ub_of(cls.id, n) for (cls, _), v in zip(entries, col) if v))
                row.only_enforce_if(wm.new_presence(f"requests[{n},{r}]", requesting, bound))

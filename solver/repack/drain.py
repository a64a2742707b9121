"""A quick greedy re-packing, the CP-SAT model's starting point on large clusters.

Drain the lightest nodes first: for each, move its movable pods (largest first) one at a time to
the fullest node that admits them — kube-scheduler's filters on the cluster as it is at that
moment — never onto a node already drained. A node whose pods cannot all leave is restored as it
was. PodDisruptionBudgets, ``--max-moves`` and ``--target-free`` are respected as in the model.

The result is only a hint: the model checks it, keeps what holds, and improves on it. On a cluster
of a thousand nodes it is what lets CP-SAT start from hundreds of freed nodes instead of none.
"""

from __future__ import annotations

from typing import cast

import numpy as np

from models.resources import CPU, MEMORY

from ..info import PodInfo
from ..filtering import Cycle
from .problem import RepackProblem


def greedy_drain(problem: RepackProblem, *, max_moves=None, target_free=None, by_cost: bool = False) -> dict[str, int]:
    """Final node of every movable pod after draining what the greedy walk can drain."""
    now = problem.running()
    state, nodes = now.state.copy(), problem.nodes
    version = problem.ctx.config.kubernetes_version
    current: dict[str, PodInfo] = {key: cast(PodInfo, now.pod(key)) for key in problem.origin}
    window = {key: problem.window_pod(key) for key in problem.origin}
    cpu, mem = state.res_index[CPU], state.res_index[MEMORY]
    alloc = np.maximum(state.alloc[:, [cpu, mem]], 1)

    budgets = problem.budgets
    covering = {key: budgets.covering(pod) for key, pod in window.items()}
    left = [b.allowed for b in budgets.budgets]
    on: dict[int, list[str]] = {}
    for key, n in problem.origin.items():
        on.setdefault(n, []).append(key)

    def load(n: int) -> float:
        return float((state.used[n, [cpu, mem]] / alloc[n]).max())

    drainable = [n for n in on if problem.freeable(n)]
    drainable.sort(key=lambda n: (-problem.cost[n] if by_cost else 0.0, load(n), n))
    drained: set[int] = set()
    blocked = np.zeros(len(nodes), dtype=bool)  # drained nodes: never a target again
    moved = 0  # pods away from their node of origin
    for n in drainable:
        if target_free is not None and len(drained) >= target_free:
            break
        pods = sorted(on.get(n, []), key=lambda k: (-int(state.vector(window[k])[cpu]), k))
        first_moves = sum(1 for k in pods if state.where[k] == problem.origin[k])
        if max_moves is not None and moved + first_moves > max_moves:
            continue
        blocked[n] = True
        done: list[tuple[str, int]] = []
        for key in pods:
            leaves_home = state.where[key] == problem.origin[key]
            if leaves_home and any(left[i] <= 0 for i in covering[key]):
                break
            state.remove(current[key])
            feasible = Cycle(window[key], state, problem.static, version=version).feasible()
            cand = feasible[~blocked[feasible]]
            if not len(cand):
                state.add(current[key], n)
                break
            # The fullest node that admits the pod: least room left after it, in cpu and memory.
            after = (state.free[cand][:, [cpu, mem]] - state.vector(window[key])[[cpu, mem]]) / alloc[cand]
            target = int(cand[int(np.argmin(after.max(axis=1)))])
            state.add(window[key], target)
            done.append((key, target))
            if leaves_home:
                for i in covering[key]:
                    left[i] -= 1
        if len(done) == len(pods):
            drained.add(n)
            moved += first_moves
            on[n] = []
            for key, target in done:
                current[key] = window[key]
                on.setdefault(target, []).append(key)
            continue
        blocked[n] = False
        for key, _ in reversed(done):  # not all could leave: put the node back as it was
            state.remove(window[key])
            state.add(current[key], n)
            if state.where[key] == problem.origin[key]:
                for i in covering[key]:
                    left[i] += 1
    return {key: state.where[key] for key in problem.origin}

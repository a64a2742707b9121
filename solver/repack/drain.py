"""A quick greedy re-packing, the CP-SAT model's starting point on large clusters.

Drain the lightest nodes first: for each, move its movable pods (largest first) one at a time to
the fullest node that admits them — kube-scheduler's filters on the cluster as it is at that
moment — never onto a node already drained. A node whose pods cannot all leave is restored as it
was. PodDisruptionBudgets, ``--max-moves`` and ``--target-free`` are respected as in the model.

The result is only a hint: the model checks it, keeps what holds, and improves on it. On a cluster
of a thousand nodes it is what lets CP-SAT start from hundreds of freed nodes instead of none.
"""

from __future__ import annotations

import numpy as np

from models.resources import CPU, MEMORY

from ..context import build_context
from ..info import PodInfo
from ..predicates import Cycle
from .problem import RepackProblem, with_window


def greedy_drain(problem: RepackProblem, *, max_moves=None, target_free=None, by_cost: bool = False) -> dict[str, int]:
    """Final node of every movable pod after draining what the greedy walk can drain."""
    now = build_context(with_window(problem.snapshot, set(), problem.config.scheduler_name), problem.ctx.config)
    state, nodes = now.state, problem.nodes
    version = problem.ctx.config.kubernetes_version
    current: dict[str, PodInfo] = {key: now.pod(key) for key in problem.origin}
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
    for n in drainable:
        if target_free is not None and len(drained) >= target_free:
            break
        pods = sorted(on.get(n, []), key=lambda k: (-int(state.vector(window[k])[cpu]), k))
        first_moves = sum(1 for k in pods if state.where[k] == problem.origin[k])
        moved = sum(1 for k, m in problem.origin.items() if state.where[k] != m)
        if max_moves is not None and moved + first_moves > max_moves:
            continue
        done: list[tuple[str, int]] = []
        for key in pods:
            leaves_home = state.where[key] == problem.origin[key]
            if leaves_home and any(left[i] <= 0 for i in covering[key]):
                break
            state.remove(current[key])
            feasible = Cycle(window[key], state, problem.static, version=version).feasible()
            keep = [int(m) for m in feasible.tolist() if m != n and m not in drained]
            if not keep:
                state.add(current[key], n)
                break
            cand = np.array(keep, dtype=np.int64)
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
            on[n] = []
            for key, target in done:
                current[key] = window[key]
                on.setdefault(target, []).append(key)
            continue
        for key, _ in reversed(done):  # not all could leave: put the node back as it was
            state.remove(window[key])
            state.add(current[key], n)
            if state.where[key] == problem.origin[key]:
                for i in covering[key]:
                    left[i] += 1
    return {key: state.where[key] for key in problem.origin}

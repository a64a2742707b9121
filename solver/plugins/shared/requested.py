"""A node's allocatable and requested amounts as the resource scores read them: which configured
resources count (``scored_column``), and per node what is allocatable and what would be requested
with the pod (``allocatable_and_requested``; the score cache's gathered rows: ``requested_rows``,
``source``). NodeResourcesFit's score and BalancedAllocation both read them, each with its own
requests (the scoring-only non-zero ones, or the actual ones).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from models.resources import CPU, EPHEMERAL_STORAGE, MEMORY, is_scalar_resource

from ...info import PodInfo
from ...state import ClusterState


def scored_column(pod: PodInfo, state: ClusterState, resource: str) -> Optional[int]:
    """The state's column of a configured score resource, or None when the resource scores are
    left out: a scalar resource the pod does not request, ``pods``, a name kube-scheduler does not
    account for, or one no node has. NodeResourcesFit's and BalancedAllocation's rule, asked by
    both plugins and by the incremental score cache."""
    if is_scalar_resource(resource) and pod.requests.get(resource, 0) == 0:
        return None
    tracked = resource in (CPU, MEMORY, EPHEMERAL_STORAGE) or is_scalar_resource(resource)
    column = state.res_index.get(resource)
    return column if tracked else None


def allocatable_and_requested(
    pod: PodInfo, nodes: np.ndarray, state: ClusterState, resource: str, *, nonzero: bool
) -> tuple[np.ndarray, np.ndarray] | None:
    """(allocatable, requested with the pod) of one resource over ``nodes``, or None to skip it.

    ``nonzero`` selects the scoring-only non-zero requests for cpu and memory (NodeResourcesFit);
    BalancedAllocation passes False and sees actual requests everywhere.
    """
    column = scored_column(pod, state, resource)
    if column is None:
        return None
    pod_request = pod.requests.get(resource, 0)
    alloc = state.alloc[nodes, column]
    if nonzero and resource == CPU:  # the pod's own scored request leaves pod-level resources out
        requested = state.nonzero[nodes, 0] + pod.score_cpu
    elif nonzero and resource == MEMORY:
        requested = state.nonzero[nodes, 1] + pod.score_mem
    else:
        requested = state.used[nodes, column] + pod_request
    return alloc, requested


# Columns of the per-node "requested" rows the kernels gather: the two scoring-only non-zero
# requests (cpu, memory) first, then every column of ``state.used``.
NONZERO_COLUMNS = 2


def requested_rows(state: ClusterState, nodes: np.ndarray) -> np.ndarray:
    """The per-node requested rows ``source`` columns index (non-zero cpu and memory, then used:
    ``ClusterState.requested``)."""
    return state.requested[nodes]


def source(pod: PodInfo, state: ClusterState, name: str, *, nonzero: bool) -> Optional[tuple[int, int, int]]:
    """(column in the gathered requested row, allocatable column, amount the pod adds) of one
    configured resource, or None when the plugin leaves it out — the same rules as
    ``allocatable_and_requested``."""
    column = scored_column(pod, state, name)
    if column is None:
        return None
    pod_request = pod.requests.get(name, 0)
    if nonzero and name == CPU:
        return 0, column, pod.score_cpu
    if nonzero and name == MEMORY:
        return 1, column, pod.score_mem
    return NONZERO_COLUMNS + column, column, pod_request

"""NodeResourcesBalancedAllocation score against hand-computed kube-scheduler numbers
(SEMANTICS.md §4), with the arithmetic shown next to the case where it is not obvious."""

from __future__ import annotations

import pytest

from solver.plugins.balanced_allocation import score as balanced_allocation

from tests.solver.plugins.score_helpers import as_list, cluster, node, pod

# --------------------------------------------------------------------------- score


@pytest.mark.parametrize(
    "version, want",
    [
        pytest.param("1.31", [100], id="v1.31-scores-best-effort"),
        pytest.param("1.33", None, id="v1.33-skips-best-effort"),
        pytest.param("1.34", None, id="v1.34-skips-best-effort"),
    ],
)
def test_balanced_best_effort_by_version(version, want):
    incoming = pod("p")
    state, sctx, nodes = cluster([node("n1")], [], incoming, kubernetesVersion=version)
    assert as_list(balanced_allocation.score(incoming, nodes, state, sctx)) == want


@pytest.mark.parametrize(
    "requests, balanced, want",
    [
        # Actual requests, not non-zero ones: 1/4 and 0/8Gi → |0.25 − 0| / 2 = 0.125 → 87.
        pytest.param({"cpu": "1"}, None, 87, id="actual-requests"),
        # cpu 8 of 4 caps at 1; memory 0.5 → 0.25 → 75.
        pytest.param({"cpu": "8", "memory": "4Gi"}, None, 75, id="fraction-capped-at-one"),
        # 0.5, 0.25, 0 → population std sqrt(0.125 / 3) = 0.2041 → 79.
        pytest.param(
            {"cpu": "2", "memory": "2Gi"},
            [{"name": "cpu"}, {"name": "memory"}, {"name": "ephemeral-storage"}],
            79,
            id="three-resources-population-std",
        ),
    ],
)
def test_balanced_allocation(requests, balanced, want):
    incoming = pod("p", requests=requests)
    config = {"scoring": {"balancedResources": balanced}} if balanced else {}
    state, sctx, nodes = cluster([node("n1", extra={"ephemeral-storage": "10Gi"})], [], incoming, **config)
    assert as_list(balanced_allocation.score(incoming, nodes, state, sctx)) == [want]

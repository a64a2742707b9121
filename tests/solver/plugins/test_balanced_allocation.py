"""NodeResourcesBalancedAllocation score against hand-computed kube-scheduler numbers
(SEMANTICS.md §4), with the arithmetic shown next to the case where it is not obvious."""

from __future__ import annotations

import numpy as np
import pytest

from models.config import SchedulerConfig
from solver import schedule
from solver.plugins.balanced_allocation import score as balanced_allocation

from tests.builders import make_node, make_pod, make_snapshot
from tests.solver.plugins.score_helpers import as_list, cluster, node, pod

# --------------------------------------------------------------------------- score


@pytest.mark.parametrize(
    "version, want",
    [
        pytest.param("1.31", [100], id="v1.31-scores-best-effort"),
        pytest.param("1.33", None, id="v1.33-skips-best-effort"),
        pytest.param("1.34", None, id="v1.34-skips-best-effort"),
        pytest.param("1.36", None, id="v1.36-skips-best-effort"),
    ],
)
def test_balanced_best_effort_by_version(version, want):
    incoming = pod("p")
    state, sctx, nodes = cluster([node("n1")], [], incoming, kubernetesVersion=version)
    assert as_list(balanced_allocation.score(incoming, nodes, state, sctx)) == want


@pytest.mark.parametrize(
    "requests, balanced, before, want",
    [
        # Actual requests, not non-zero ones: 1/4 and 0/8Gi → |0.25 − 0| / 2 = 0.125 → 87; the
        # empty node balances 100 without the pod, so v1.36 gives 50 + (50 + 87 − 100) / 2 = 68.
        pytest.param({"cpu": "1"}, None, 87, 68, id="actual-requests"),
        # cpu 8 of 4 caps at 1; memory 0.5 → 0.25 → 75; v1.36: 50 + (50 − 25) / 2 = 62.
        pytest.param({"cpu": "8", "memory": "4Gi"}, None, 75, 62, id="fraction-capped-at-one"),
        # 0.5, 0.25, 0 → population std sqrt(0.125 / 3) = 0.2041 → 79; v1.36: 50 + 29 / 2 = 64.
        pytest.param(
            {"cpu": "2", "memory": "2Gi"},
            [{"name": "cpu"}, {"name": "memory"}, {"name": "ephemeral-storage"}],
            79,
            64,
            id="three-resources-population-std",
        ),
    ],
)
def test_balanced_allocation(requests, balanced, before, want):
    """The balance with the pod (before v1.36) and the change it brings (v1.36)."""
    incoming = pod("p", requests=requests)
    config = {"scoring": {"balancedResources": balanced}} if balanced else {}
    for version, expected in (("1.34", before), ("1.36", want)):
        state, sctx, nodes = cluster([node("n1", extra={"ephemeral-storage": "10Gi"})], [], incoming,
                                     kubernetesVersion=version, **config)
        assert as_list(balanced_allocation.score(incoming, nodes, state, sctx)) == [expected], version


@pytest.mark.parametrize("version, want", [pytest.param("1.34", 100, id="v1.34-balance-with-pod"),
                                           pytest.param("1.36", 75, id="v1.36-change-in-balance")])
def test_semantics_example(version, want):
    """SEMANTICS.md §4.2: alloc 4000m/8Gi, used 1000m/2Gi, pod 500m/1Gi. With the pod .375 and
    .375 (balance 100), without it .25 and .25 (balance 100): v1.36 scores 50 + (50 + 0) / 2."""
    incoming = pod("p", requests={"cpu": "500m", "memory": "1Gi"})
    running = pod("r", requests={"cpu": "1", "memory": "2Gi"})
    state, sctx, nodes = cluster([node("n1")], [(running, "n1")], incoming, kubernetesVersion=version)
    assert as_list(balanced_allocation.score(incoming, nodes, state, sctx)) == [want]


def test_the_default_version_scores_the_change():
    """1.36, the release the project is tested against, is the default."""
    incoming = pod("p", requests={"cpu": "500m", "memory": "1Gi"})
    running = pod("r", requests={"cpu": "1", "memory": "2Gi"})
    state, sctx, nodes = cluster([node("n1")], [(running, "n1")], incoming)
    assert as_list(balanced_allocation.score(incoming, nodes, state, sctx)) == [75]


@pytest.mark.parametrize(
    "with_pod, without_pod, want",
    [
        pytest.param(100, 100, 75, id="no-change"),
        pytest.param(100, 50, 100, id="evened-out"),
        pytest.param(50, 100, 50, id="unbalanced"),
        pytest.param(89, 93, 73, id="odd-numerator-truncates"),      # 50 + 46 / 2
        pytest.param(54, 59, 72, id="odd-numerator-rounds-down"),    # 50 + 45 / 2 = 50 + 22
        # Never reached by real balances (each is at least 50), but Go's division truncates
        # towards zero: 50 + (−3) / 2 = 50 − 1, where Python's // would give 50 − 2.
        pytest.param(0, 53, 49, id="negative-numerator-truncates-towards-zero"),
    ],
)
def test_change_score(with_pod, without_pod, want):
    got = balanced_allocation.change_score(np.array([with_pod]), np.array([without_pod]))
    assert as_list(got) == [want]
    assert balanced_allocation.change_score_one(with_pod, without_pod) == want


@pytest.mark.parametrize("version, want", [pytest.param("1.34", "a", id="v1.34-balance-after"),
                                           pytest.param("1.36", "b", id="v1.36-change-in-balance")])
def test_the_two_formulas_pick_different_nodes(version, want):
    """Default profile, two 4-CPU/8Gi nodes; pod 500m/256Mi. Node a runs 2 CPU/3Gi, node b
    3250m and no memory (busy CPU, free memory).

    a: balance .5/.375 → 93 without the pod, .625/.40625 → 89 with it; LeastAllocated
       (1500·100//4000 = 37, 4864Mi·100//8192Mi = 59) → 48.
    b: .8125/0 → 59 without, .9375/.03125 → 54 with; LeastAllocated (6, 96) → 51.
    Before v1.36 (balance with the pod): a 48 + 89 = 137, b 51 + 54 = 105 → a.
    v1.36: a 48 + 50 + (50 − 4) / 2 = 121, b 51 + 50 + (50 − 5) / 2 = 123 → b (the pod
    unbalances b about as much as a, and b has more room)."""
    nodes = [make_node("a"), make_node("b")]
    pods = [make_pod("default/ra", cpu="2", memory="3Gi", node="a"),
            make_pod("default/rb", cpu="3250m", memory="0", node="b"),
            make_pod("default/p", cpu="500m", memory="256Mi")]
    plan = schedule(make_snapshot(nodes, pods), SchedulerConfig(kubernetes_version=version), engine="greedy")
    assert plan.assignment_map() == {"default/p": want}

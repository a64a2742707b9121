"""The scoring machinery as a whole against hand-computed kube-scheduler numbers (SEMANTICS.md §4).

Each score plugin's own cases live beside it in ``tests/solver/plugins/``. Here: the shared
arithmetic of ``solver/plugins/helper.py``, a worked example over two plugins, the node index's
term masks, the per-plugin and weighted totals, and the score context. Every expected integer
below is worked out from the formulas in SEMANTICS.md, with the arithmetic shown next to the
case where it is not obvious.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest

from models.config import SchedulerConfig
from models.objects import NodeSelectorTerm, Pod
from solver.info import NodeInfo
from solver.scoring import SCORE_PLUGIN_NAMES, ScoreContext, plugin_scores, score_nodes
from solver.plugins.balanced_allocation import score as balanced_allocation
from solver.plugins.image_locality import score as image_locality
from solver.plugins.node_resources_fit import score as node_resources_fit
from solver.plugins.helper import broken_linear, default_normalize, go_log, round_half_away, trunc_div

from tests.solver.plugins.score_helpers import MI, NGINX, PNS, as_list, cluster, node, pod

# --------------------------------------------------------------------------- helpers


@pytest.mark.parametrize(
    "raw, reverse, want",
    [
        pytest.param([0, 0, 0], False, [0, 0, 0], id="all-zero-stays-zero"),
        pytest.param([0, 0, 0], True, [100, 100, 100], id="all-zero-reversed-is-100"),
        pytest.param([1, 2, 3], False, [33, 66, 100], id="scaled-by-max-truncating"),
        pytest.param([0, 1, 2], True, [100, 50, 0], id="reversed"),
    ],
)
def test_default_normalize(raw, reverse, want):
    assert as_list(default_normalize(np.array(raw, dtype=np.int64), reverse=reverse)) == want


def test_trunc_div_truncates_toward_zero():
    assert as_list(trunc_div(np.array([7, -7, -1, 0]), 2)) == [3, -3, 0, 0]


def test_round_half_away_from_zero():
    x = np.array([0.5, 1.5, 2.4999999999999996, 0.49999999999999994, 41.5])
    assert as_list(round_half_away(x)) == [1, 2, 2, 0, 42]


def test_go_log_is_fdlibm_rounding():
    # Go's math.Log (like fdlibm, which V8 also uses) gives ln 3 one ulp below the correctly
    # rounded C library value; sums of these logs are rounded by PodTopologySpread.
    assert go_log(3.0) == 1.0986122886681096
    assert math.log(3.0) == 1.0986122886681098
    for n in range(2, 5000):
        assert abs(go_log(float(n)) - math.log(n)) <= math.ulp(math.log(n))


@pytest.mark.parametrize(
    "u, want",
    [
        pytest.param(0, 100, id="at-first-point"),
        pytest.param(25, 65, id="exact-interpolation"),
        pytest.param(33, 54, id="negative-slope-truncates-toward-zero"),  # 100 + trunc(-70*33/50 = -46.2)
        pytest.param(50, 30, id="at-middle-point"),
        pytest.param(100, 0, id="at-last-point"),
    ],
)
def test_broken_linear(u, want):
    shape = ((0, 100), (50, 30), (100, 0))
    assert int(broken_linear(shape, np.array([u]))[0]) == want


def test_broken_linear_beyond_last_point():
    assert int(broken_linear(((10, 20), (60, 70)), np.array([80]))[0]) == 70
    assert int(broken_linear(((10, 20), (60, 70)), np.array([5]))[0]) == 20


# --------------------------------------------------------------------------- worked example


@pytest.mark.parametrize("version, balanced", [pytest.param("1.36", 75, id="v1.36"), pytest.param("1.34", 100, id="v1.34")])
def test_worked_example_section_4_2(version, balanced):
    """alloc 4000m/8Gi, used 1000m/2Gi, pod 500m/1Gi: BalancedAllocation 75 on v1.36 (balance
    100 with the pod and 100 without: 50 + (50 + 0) / 2), 100 before; LeastAllocated 62."""
    incoming = pod("p", requests={"cpu": "500m", "memory": "1Gi"})
    state, sctx, nodes = cluster(
        [node("n1")], [(pod("e", requests={"cpu": "1", "memory": "2Gi"}), "n1")], incoming,
        kubernetesVersion=version,
    )
    assert as_list(balanced_allocation.score(incoming, nodes, state, sctx)) == [balanced]
    assert as_list(node_resources_fit.score(incoming, nodes, state, sctx)) == [62]


# --------------------------------------------------------------------------- node index


def test_node_index_term_masks_agree_with_the_model():
    """The vectorised requirement evaluation gives the model's verdict on every node."""
    label_sets = [{}, {"k": "a"}, {"k": "b"}, {"k": "10"}, {"k": "abc", "j": "x"}, {"j": "x"}, {"k": "", "j": "y"}]
    nodes_ = [node(f"n{i}", labels=labels) for i, labels in enumerate(label_sets)]
    infos = [NodeInfo.of(i, n) for i, n in enumerate(nodes_)]
    sctx = ScoreContext.build(SchedulerConfig(), infos)
    requirements = [
        {"key": "k", "operator": "In", "values": ["a", "10", "zz"]},
        {"key": "k", "operator": "NotIn", "values": ["a"]},
        {"key": "k", "operator": "Exists"},
        {"key": "k", "operator": "DoesNotExist"},
        {"key": "k", "operator": "Gt", "values": ["5"]},
        {"key": "k", "operator": "Lt", "values": ["11"]},
        {"key": "j", "operator": "In", "values": ["x"]},
        {"key": "missing", "operator": "NotIn", "values": ["x"]},
    ]
    fields = [[], [{"key": "metadata.name", "operator": "In", "values": ["n1"]}], [{"key": "metadata.name", "operator": "NotIn", "values": ["n2"]}]]
    for r1, r2 in itertools.combinations_with_replacement(requirements, 2):
        for f in fields:
            t = NodeSelectorTerm.model_validate({"matchExpressions": [r1, r2], "matchFields": f})
            want = [t.matches(n.name, n.labels) for n in infos]
            assert sctx.index.term_mask(t).tolist() == want, (r1, r2, f)
    empty = NodeSelectorTerm.model_validate({})
    assert not sctx.index.term_mask(empty).any()


# --------------------------------------------------------------------------- totals


def two_nodes(**config: Any):
    incoming = pod("p", requests={"cpu": "1", "memory": "2Gi"})
    nodes_ = [node("n1"), node("n2", taints=[{"key": "a", "value": "b", "effect": PNS}])]
    placed = [(pod("e", requests={"cpu": "2", "memory": "2Gi"}), "n2")]
    state, sctx, nodes = cluster(nodes_, placed, incoming, **config)
    return incoming, state, sctx, nodes


def test_plugin_scores_per_plugin():
    incoming, state, sctx, nodes = two_nodes()
    scores = {name: as_list(s) for name, s in plugin_scores(incoming, nodes, state, sctx).items()}
    assert list(scores) == list(SCORE_PLUGIN_NAMES)
    assert scores == {
        "TaintToleration": [100, 0],
        "NodeAffinity": None,
        "NodeResourcesFit": [75, 37],  # n2: cpu 3 of 4 → 25, memory 4Gi of 8Gi → 50
        "PodTopologySpread": None,
        "InterPodAffinity": None,
        # The change in balance (v1.36): n1 100 with the pod and without; n2 |0.75 − 0.5| / 2 =
        # 0.125 with it and |0.5 − 0.25| / 2 without (87 both): 50 + (50 + 0) / 2 on each.
        "NodeResourcesBalancedAllocation": [75, 75],
        "ImageLocality": [0, 0],
    }


@pytest.mark.parametrize(
    "config, want",
    [
        pytest.param({}, [450, 112], id="default-weights"),  # 3×100 + 75 + 75 + 0; 0 + 37 + 75 + 0
        pytest.param({"scoring": {"weights": {"NodeResourcesFit": 5}}}, [750, 260], id="custom-weight"),
        pytest.param({"profile": "packing"}, [400, 137], id="packing"),  # MostAllocated 25 and (75 + 50) // 2
        # before v1.36 BalancedAllocation was the balance with the pod: 100 and 87
        pytest.param({"kubernetesVersion": "1.34"}, [475, 124], id="v1.34-default-weights"),
    ],
)
def test_score_nodes_weighted_totals(config, want):
    incoming, state, sctx, nodes = two_nodes(**config)
    assert as_list(score_nodes(incoming, nodes, state, sctx)) == want


def test_score_nodes_without_nodes():
    incoming, state, sctx, _ = two_nodes()
    assert len(score_nodes(incoming, np.zeros(0, dtype=np.int64), state, sctx)) == 0


def test_score_context_from_scheduling_context():
    from models.snapshot import ClusterSnapshot
    from solver.context import build_context

    images = [NGINX, NGINX, None, None]
    nodes_ = [node(f"n{i}", images=[img] if img else []) for i, img in enumerate(images)]
    pending = Pod.model_validate(
        {"metadata": {"name": "p"}, "spec": {"schedulerName": "cpsat-scheduler", "containers": [{"name": "c", "image": "nginx"}]}}
    )
    ctx = build_context(ClusterSnapshot.build(nodes=nodes_, pods=[pending]), SchedulerConfig())
    sctx = ScoreContext.of(ctx)
    assert sctx.num_nodes == 4 and sctx.image_nodes["nginx:latest"] == (500 * MI, 2)
    nodes = np.arange(4, dtype=np.int64)
    assert as_list(image_locality.score(ctx.window[0], nodes, ctx.state, sctx)) == [23, 23, 0, 0]

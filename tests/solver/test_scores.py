"""Score plugins against hand-computed kube-scheduler numbers (SEMANTICS.md §4).

Every expected integer below is worked out from the formulas in SEMANTICS.md, with the
arithmetic shown next to the case where it is not obvious.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Optional

import numpy as np
import pytest

from models.config import SchedulerConfig
from models.objects import Node, NodeSelectorTerm, Pod
from models.resources import is_tracked_resource
from solver.info import NodeInfo, PodInfo
from solver.scoring import SCORE_PLUGIN_NAMES, ScoreContext, plugin_scores, score_nodes
from solver.plugins.balanced_allocation import score as balanced_allocation
from solver.plugins.image_locality import score as image_locality
from solver.plugins.inter_pod_affinity import score as inter_pod_affinity
from solver.plugins.node_affinity import score as node_affinity
from solver.plugins.node_resources_fit import score as node_resources_fit
from solver.plugins.pod_topology_spread import score as pod_topology_spread
from solver.plugins.taint_toleration import score as taint_toleration
from solver.plugins.helper import broken_linear, default_normalize, go_log, round_half_away, trunc_div
from solver.state import ClusterState

MI = 1024 * 1024
GI = 1024 * MI
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"

# --------------------------------------------------------------------------- builders


def node(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "8Gi",
    labels: Optional[dict[str, str]] = None,
    taints: Optional[list[dict[str, str]]] = None,
    images: Optional[list[tuple[list[str], int]]] = None,
    extra: Optional[dict[str, str]] = None,
) -> Node:
    allocatable = {"cpu": cpu, "memory": memory, "pods": "110", **(extra or {})}
    return Node.model_validate(
        {
            "metadata": {"name": name, "labels": labels or {}},
            "spec": {"taints": taints or []},
            "status": {
                "allocatable": allocatable,
                "images": [{"names": names, "sizeBytes": size} for names, size in images or []],
            },
        }
    )


def pod(
    name: str,
    *,
    namespace: str = "default",
    requests: Optional[dict[str, str]] = None,
    labels: Optional[dict[str, str]] = None,
    affinity: Optional[dict[str, Any]] = None,
    tolerations: Optional[list[dict[str, str]]] = None,
    spread: Optional[list[dict[str, Any]]] = None,
    owner: Optional[str] = None,
    image: str = "",
    init_image: Optional[str] = None,
    terminating: bool = False,
    node_selector: Optional[dict[str, str]] = None,
) -> PodInfo:
    container: dict[str, Any] = {"name": "c", "image": image}
    if requests is not None:
        container["resources"] = {"requests": requests}
    spec: dict[str, Any] = {"containers": [container]}
    if init_image is not None:
        spec["initContainers"] = [{"name": "init", "image": init_image}]
    if affinity:
        spec["affinity"] = affinity
    if node_selector:
        spec["nodeSelector"] = node_selector
    if tolerations:
        spec["tolerations"] = tolerations
    if spread:
        spec["topologySpreadConstraints"] = spread
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels or {}}
    if owner:
        metadata["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner, "name": "w", "controller": True}]
    if terminating:
        metadata["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    return PodInfo.of(Pod.model_validate({"metadata": metadata, "spec": spec}), {"kubernetes.io/metadata.name": namespace})


def cluster(
    nodes: list[Node], placed: Optional[list[tuple[PodInfo, str]]] = None, incoming: Optional[PodInfo] = None, **config: Any
) -> tuple[ClusterState, ScoreContext, np.ndarray]:
    """A state with ``placed`` pods assumed, its score context, and every node as feasible."""
    infos = [NodeInfo.of(i, n) for i, n in enumerate(nodes)]
    resources = {r for n in infos for r in n.allocatable if is_tracked_resource(r)}
    for p in [*(p for p, _ in placed or []), *([incoming] if incoming else [])]:
        resources.update(p.requests)
    state = ClusterState(infos, resources)
    for p, where in placed or []:
        state.add(p, state.node_index[where])
    sctx = ScoreContext.build(SchedulerConfig.model_validate(config), infos)
    return state, sctx, np.arange(len(nodes), dtype=np.int64)


def zone_nodes(*zones: Optional[str], **kw: Any) -> list[Node]:
    """``n1, n2, ...`` with hostname labels and the given zones (None: no zone label)."""
    out = []
    for i, z in enumerate(zones, start=1):
        labels = {HOST: f"n{i}"}
        if z is not None:
            labels[ZONE] = z
        out.append(node(f"n{i}", labels=labels, **kw))
    return out


def web(name: str, **kw: Any) -> PodInfo:
    return pod(name, labels={"app": "web"}, **kw)


def term(key: str, weight: int = 0, **labels: str) -> dict[str, Any]:
    """A pod (anti-)affinity term on ``labels``; weighted when ``weight`` is given."""
    t = {"labelSelector": {"matchLabels": labels}, "topologyKey": key}
    return {"weight": weight, "podAffinityTerm": t} if weight else t


def as_list(scores: Optional[np.ndarray]) -> Optional[list[int]]:
    return None if scores is None else [int(s) for s in scores]


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


# --------------------------------------------------------------------------- NodeResourcesFit


def test_worked_example_section_4_2():
    """alloc 4000m/8Gi, used 1000m/2Gi, pod 500m/1Gi: BalancedAllocation 100, LeastAllocated 62."""
    incoming = pod("p", requests={"cpu": "500m", "memory": "1Gi"})
    state, sctx, nodes = cluster(
        [node("n1")], [(pod("e", requests={"cpu": "1", "memory": "2Gi"}), "n1")], incoming
    )
    assert as_list(balanced_allocation.score(incoming, nodes, state, sctx)) == [100]
    assert as_list(node_resources_fit.score(incoming, nodes, state, sctx)) == [62]


@pytest.mark.parametrize(
    "strategy, want",
    [
        # cpu 900m + 500m = 1400m over 1000m; memory 512Mi + 200Mi (non-zero default) of 1Gi.
        pytest.param("LeastAllocated", [15], id="least-over-capacity-scores-zero"),  # (0 + 30) // 2
        pytest.param("MostAllocated", [84], id="most-caps-at-allocatable"),  # (100 + 69) // 2
    ],
)
def test_fit_capping(strategy, want):
    incoming = pod("p", requests={"cpu": "500m"})
    placed = [(pod("e", requests={"cpu": "900m", "memory": "512Mi"}), "n1")]
    state, sctx, nodes = cluster([node("n1", cpu="1", memory="1Gi")], placed, incoming, scoring={"strategy": strategy})
    assert as_list(node_resources_fit.score(incoming, nodes, state, sctx)) == want


@pytest.mark.parametrize(
    "requests, want",
    [
        pytest.param(None, [85], id="no-requests-count-100m-200Mi"),  # (90 + 80) // 2
        pytest.param({"cpu": "0", "memory": "0"}, [100], id="explicit-zero-stays-zero"),
        pytest.param({"cpu": "500m"}, [65], id="memory-defaulted-only"),  # (50 + 80) // 2
    ],
)
def test_fit_nonzero_defaults(requests, want):
    incoming = pod("p", requests=requests)
    state, sctx, nodes = cluster([node("n1", cpu="1", memory="1000Mi")], [], incoming)
    assert as_list(node_resources_fit.score(incoming, nodes, state, sctx)) == want


@pytest.mark.parametrize(
    "requests, want",
    [
        # cpu 1000m of 4000m → 75, memory 2Gi of 8Gi → 75; the gpu (weight 2) only where requested.
        pytest.param({"cpu": "1", "memory": "2Gi"}, [75, 75], id="unrequested-scalar-skipped"),
        # n1: gpu 3 of 4 → 25: (75 + 75 + 2×25) // 4 = 50; n2 has no gpu (allocatable 0): skipped.
        pytest.param({"cpu": "1", "memory": "2Gi", "example.com/gpu": "3"}, [50, 75], id="scalar-weighted"),
    ],
)
def test_fit_scalar_resources(requests, want):
    incoming = pod("p", requests=requests)
    nodes_ = [node("n1", extra={"example.com/gpu": "4"}), node("n2")]
    resources = [{"name": "cpu"}, {"name": "memory"}, {"name": "example.com/gpu", "weight": 2}]
    state, sctx, nodes = cluster(nodes_, [], incoming, scoring={"resources": resources})
    assert as_list(node_resources_fit.score(incoming, nodes, state, sctx)) == want


def test_fit_resource_weights():
    # cpu 500m of 1000m → 50 (weight 1); memory 200Mi default of 1000Mi → 80 (weight 2): 210 // 3.
    incoming = pod("p", requests={"cpu": "500m"})
    resources = [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 2}]
    state, sctx, nodes = cluster([node("n1", cpu="1", memory="1000Mi")], [], incoming, scoring={"resources": resources})
    assert as_list(node_resources_fit.score(incoming, nodes, state, sctx)) == [70]


@pytest.mark.parametrize(
    "shape, requests, cpu, want",
    [
        # cpu u=33 → 100 + trunc(-70×33/50) = 54; memory u=50 → 30; (54 + 30) / 2 = 42.
        pytest.param([(0, 10), (50, 3), (100, 0)], {"cpu": "330m", "memory": "512Mi"}, "1", 42, id="truncating-interpolation"),
        # f(u) = u: cpu 33, memory 50 → 41.5 rounds half away from zero.
        pytest.param([(0, 0), (100, 10)], {"cpu": "330m", "memory": "512Mi"}, "1", 42, id="rounds-half-up"),
        # cpu u = 100m×100 // 1000000m = 0 → f 0: left out of the mean, so memory's 50 alone.
        pytest.param([(0, 0), (100, 10)], {"cpu": "100m", "memory": "512Mi"}, "1000", 50, id="zero-scores-left-out"),
        # cpu 2 of 1 is over capacity → u 100 → f 100; memory 50 → 75.
        pytest.param([(0, 0), (100, 10)], {"cpu": "2", "memory": "512Mi"}, "1", 75, id="over-capacity-is-full"),
    ],
)
def test_requested_to_capacity_ratio(shape, requests, cpu, want):
    incoming = pod("p", requests=requests)
    scoring = {"strategy": "RequestedToCapacityRatio", "shape": [{"utilization": u, "score": s} for u, s in shape]}
    state, sctx, nodes = cluster([node("n1", cpu=cpu, memory="1Gi")], [], incoming, scoring=scoring)
    assert as_list(node_resources_fit.score(incoming, nodes, state, sctx)) == [want]


def test_packing_profile_uses_most_allocated():
    incoming = pod("p", requests={"cpu": "1", "memory": "2Gi"})
    state, sctx, nodes = cluster([node("n1")], [], incoming, profile="packing")
    assert sctx.strategy == "MostAllocated"
    assert as_list(node_resources_fit.score(incoming, nodes, state, sctx)) == [25]


# --------------------------------------------------------------------------- BalancedAllocation


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


# --------------------------------------------------------------------------- TaintToleration

PNS = "PreferNoSchedule"


@pytest.mark.parametrize(
    "tolerations, want",
    [
        pytest.param(None, [100, 50, 0, 100], id="counts-reversed"),
        pytest.param([{"key": "a", "operator": "Exists", "effect": PNS}], [100, 100, 0, 100], id="tolerated-one"),
        pytest.param([{"key": "a", "operator": "Exists", "effect": "NoSchedule"}], [100, 50, 0, 100], id="wrong-effect"),
        pytest.param([{"operator": "Exists"}], [100, 100, 100, 100], id="all-zero-is-100"),
    ],
)
def test_taint_toleration(tolerations, want):
    nodes_ = [
        node("n1"),
        node("n2", taints=[{"key": "a", "value": "b", "effect": PNS}]),
        node("n3", taints=[{"key": "a", "value": "b", "effect": PNS}, {"key": "c", "value": "d", "effect": PNS}]),
        node("n4", taints=[{"key": "x", "value": "y", "effect": "NoSchedule"}]),  # not a scoring taint
    ]
    incoming = pod("p", tolerations=tolerations)
    state, sctx, nodes = cluster(nodes_, [], incoming)
    assert as_list(taint_toleration.score(incoming, nodes, state, sctx)) == want


# --------------------------------------------------------------------------- NodeAffinity


def preferred(*terms: tuple[int, dict[str, Any]]) -> dict[str, Any]:
    return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": w, "preference": t} for w, t in terms]}}


ZONE_A = {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["a"]}]}
HAS_DISK = {"matchExpressions": [{"key": "disk", "operator": "Exists"}]}


@pytest.mark.parametrize(
    "affinity, want",
    [
        pytest.param(None, None, id="no-preferred-terms-skips"),
        pytest.param(preferred((10, ZONE_A), (30, HAS_DISK)), [25, 100, 0], id="sum-of-weights-normalized"),  # 10, 40, 0
        pytest.param(
            preferred((10, ZONE_A), (30, HAS_DISK), (50, {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n3"]}]})),
            [20, 80, 100],  # 10, 40, 50
            id="match-fields",
        ),
        pytest.param(
            preferred((10, {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["z"]}]})), [0, 0, 0], id="nothing-matches"
        ),
    ],
)
def test_node_affinity_preferred(affinity, want):
    nodes_ = [
        node("n1", labels={ZONE: "a"}),
        node("n2", labels={ZONE: "a", "disk": "ssd"}),
        node("n3", labels={ZONE: "b"}),
    ]
    incoming = pod("p", affinity=affinity)
    state, sctx, nodes = cluster(nodes_, [], incoming)
    assert as_list(node_affinity.score(incoming, nodes, state, sctx)) == want


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


# --------------------------------------------------------------------------- InterPodAffinity


def pod_affinity(*, preferred: tuple = (), anti: tuple = (), required: tuple = ()) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if preferred or required:
        out["podAffinity"] = {
            "preferredDuringSchedulingIgnoredDuringExecution": list(preferred),
            "requiredDuringSchedulingIgnoredDuringExecution": list(required),
        }
    if anti:
        out["podAntiAffinity"] = {"preferredDuringSchedulingIgnoredDuringExecution": list(anti)}
    return out


def inter_pod(incoming: PodInfo, placed: list[tuple[PodInfo, str]], zones=("a", "a", "b"), **config: Any):
    state, sctx, nodes = cluster(zone_nodes(*zones), placed, incoming, **config)
    return as_list(inter_pod_affinity.score(incoming, nodes, state, sctx))


@pytest.mark.parametrize(
    "incoming, placed, config, want",
    [
        pytest.param(
            pod("p", affinity=pod_affinity(preferred=[term(ZONE, 5, app="web")])),
            [(web("e"), "n1")], {}, [100, 100, 0], id="preferred-affinity",  # raw 5, 5, 0
        ),
        pytest.param(
            pod("p", affinity=pod_affinity(anti=[term(ZONE, 5, app="web")])),
            [(web("e"), "n1")], {}, [0, 0, 100], id="preferred-anti-affinity",  # raw -5, -5, 0
        ),
        pytest.param(
            pod("p", affinity=pod_affinity(preferred=[term(ZONE, 5, app="web")])),
            [(web("e", terminating=True), "n1")], {}, [100, 100, 0], id="terminating-pods-count",
        ),
        pytest.param(
            web("p"),
            [(pod("e", affinity=pod_affinity(required=[term(HOST, app="web")])), "n2")],
            {}, [0, 100, 0], id="existing-required-affinity-hard-weight",  # raw 0, 1, 0
        ),
        pytest.param(
            web("p"),
            [(pod("e", affinity=pod_affinity(required=[term(HOST, app="web")])), "n2")],
            {"scoring": {"hardPodAffinityWeight": 0}}, None, id="hard-weight-zero-skips",
        ),
        pytest.param(
            pod("p", labels={"app": "db"}),
            [(pod("e", affinity=pod_affinity(required=[term(HOST, app="web")])), "n2")],
            {}, None, id="existing-term-not-matching-skips",
        ),
        pytest.param(
            web("p"),
            [(pod("e", affinity=pod_affinity(anti=[term(ZONE, 7, app="web")])), "n3")],
            {}, [100, 100, 0], id="existing-preferred-anti-affinity",  # raw 0, 0, -7
        ),
        pytest.param(
            pod("p", affinity=pod_affinity(preferred=[term(ZONE, 5, app="web")])),
            [(web("e1"), "n1"), (web("e2"), "n3")], {}, [0, 0, 0], id="min-equals-max",
        ),
        pytest.param(
            pod("p", affinity=pod_affinity(preferred=[term(ZONE, 5, app="web")])),
            [(web("e", namespace="other"), "n1")], {}, None, id="other-namespace-skips",
        ),
        pytest.param(pod("p"), [(web("e"), "n1")], {}, None, id="no-terms-skips"),
    ],
)
def test_inter_pod_affinity(incoming, placed, config, want):
    assert inter_pod(incoming, placed, **config) == want


def test_inter_pod_affinity_normalizes_in_go_float_order():
    # raw 0, 29, 100: 100 × (29 / 100) = 28.999999999999996 in float64, so 28 (not 29).
    incoming = pod("p", affinity=pod_affinity(preferred=[term(ZONE, 29, app="b"), term(ZONE, 100, app="c")]))
    placed = [(pod("eb", labels={"app": "b"}), "n2"), (pod("ec", labels={"app": "c"}), "n3")]
    assert inter_pod(incoming, placed, zones=("a", "b", "c")) == [0, 28, 100]


# --------------------------------------------------------------------------- PodTopologySpread


def soft(key: str, max_skew: int = 1, when: str = "ScheduleAnyway", **policies: str) -> dict[str, Any]:
    return {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when, "labelSelector": {"matchLabels": {"app": "web"}}, **policies}


def spread_scores(incoming: PodInfo, nodes_: list[Node], placed, feasible=None) -> Optional[list[int]]:
    state, sctx, nodes = cluster(nodes_, placed, incoming)
    if feasible is not None:
        nodes = np.array(feasible, dtype=np.int64)
    return as_list(pod_topology_spread.score(incoming, nodes, state, sctx))


@pytest.mark.parametrize(
    "constraint, want",
    [
        # Zone a holds 3 matching pods, b none; n4 has no zone and is ignored. Two domains → ln 4.
        # raw: a 3 × 1.386 = 4.16 → 4, b 0 → 100 × (4 + 0 − raw) // 4.
        pytest.param(soft(ZONE), [0, 0, 100, 0], id="skewed-zone"),
        # maxSkew 2 adds 1 to every raw score: 5, 5, 1 → 100 × (5 + 1 − raw) // 5.
        pytest.param(soft(ZONE, 2), [20, 20, 100, 0], id="max-skew-offset"),
    ],
)
def test_spread_soft_zone(constraint, want):
    placed = [(web("e1"), "n1"), (web("e2"), "n1"), (web("e3"), "n2")]
    assert spread_scores(web("p", spread=[constraint]), zone_nodes("a", "a", "b", None), placed) == want


def test_spread_soft_hostname():
    # Three nodes → ln 5 = 1.609; pods 2, 0, 1 → raw 3, 0, 2 → 100 × (3 + 0 − raw) // 3.
    placed = [(web("e1"), "n1"), (web("e2"), "n1"), (web("e3"), "n3")]
    assert spread_scores(web("p", spread=[soft(HOST)]), zone_nodes("a", "a", "b"), placed) == [0, 100, 33]


def test_spread_ignores_other_namespaces_and_terminating_pods():
    placed = [(web("e1", namespace="other"), "n1"), (web("e2", terminating=True), "n1")]
    assert spread_scores(web("p", spread=[soft(ZONE)]), zone_nodes("a", "b"), placed) == [100, 100]


@pytest.mark.parametrize(
    "incoming",
    [
        pytest.param(web("p", spread=[soft(ZONE, when="DoNotSchedule")]), id="only-hard-constraints"),
        pytest.param(web("p"), id="no-constraints-no-owner"),
        pytest.param(pod("p", owner="ReplicaSet"), id="owner-but-no-labels"),
        pytest.param(web("p", owner="DaemonSet"), id="owner-kind-without-defaults"),
    ],
)
def test_spread_skipped(incoming):
    assert spread_scores(incoming, zone_nodes("a", "b"), [(web("e"), "n1")]) is None


def test_spread_system_defaults_for_replicaset_pods():
    # hostname (maxSkew 3, 3 nodes → ln 5) and zone (maxSkew 5, 2 zones → ln 4); siblings on n1, n3.
    # n1: 1×1.609 + 2 + 1×1.386 + 4 = 8.996 → 9; n2: 2 + 5.386 → 7; n3: 9 → 100 × (16 − raw) // 9.
    labels = {"app": "web", "pod-template-hash": "abc"}
    sibling = lambda name: pod(name, labels=labels, owner="ReplicaSet")  # noqa: E731
    old = pod("old", labels={"app": "web", "pod-template-hash": "old"}, owner="ReplicaSet")  # another revision
    placed = [(sibling("s1"), "n1"), (old, "n2"), (sibling("s3"), "n3")]
    assert spread_scores(sibling("p"), zone_nodes("a", "a", "b"), placed) == [77, 100, 77]


def test_spread_system_defaults_keep_nodes_without_zone():
    # No requireAll: n2 lacks a zone yet is scored; its missing label registers zone "" (2 domains).
    # n1: 1×ln4 + 2 + 1×ln4 + 4 = 8.77 → 9; n2: hostname only, 0 + 2 → 2. 100 × (11 − raw) // 9.
    labels = {"app": "web", "pod-template-hash": "abc"}
    placed = [(pod("s1", labels=labels, owner="ReplicaSet"), "n1")]
    assert spread_scores(pod("p", labels=labels, owner="ReplicaSet"), zone_nodes("a", None), placed) == [22, 100]


def test_spread_system_defaults_ignore_statefulset_pod_labels():
    # The sibling differs only in its per-pod labels and still counts: n1 9, n2 6 → 100 × (15 − raw) // 9.
    def member(name: str, index: int) -> PodInfo:
        labels = {"app": "db", "statefulset.kubernetes.io/pod-name": name, "apps.kubernetes.io/pod-index": str(index)}
        return pod(name, labels=labels, owner="StatefulSet")

    assert spread_scores(member("db-1", 1), zone_nodes("a", "b"), [(member("db-0", 0), "n1")]) == [66, 100]


@pytest.mark.parametrize(
    "policies, want",
    [
        # Honor (default): n2 fails the pod's nodeSelector, so zone a counts 0 and zone b 1: raw 0, 1.
        pytest.param({}, [100, 0], id="node-affinity-honored"),
        # Ignore: zone a counts n2's 3 pods: raw 4, 1 → 100 × (5 − raw) // 4.
        pytest.param({"nodeAffinityPolicy": "Ignore"}, [25, 100], id="node-affinity-ignored"),
    ],
)
def test_spread_node_affinity_policy(policies, want):
    nodes_ = [
        node("n1", labels={ZONE: "a", "disk": "ssd"}),
        node("n2", labels={ZONE: "a"}),
        node("n3", labels={ZONE: "b", "disk": "ssd"}),
    ]
    placed = [(web("e1"), "n2"), (web("e2"), "n2"), (web("e3"), "n2"), (web("e4"), "n3")]
    incoming = web("p", spread=[soft(ZONE, **policies)], node_selector={"disk": "ssd"})
    assert spread_scores(incoming, nodes_, placed, feasible=[0, 2]) == want


@pytest.mark.parametrize(
    "policies, want",
    [
        pytest.param({}, [25, 100], id="taints-ignored-by-default"),
        pytest.param({"nodeTaintsPolicy": "Honor"}, [100, 0], id="taints-honored"),
    ],
)
def test_spread_node_taints_policy(policies, want):
    nodes_ = [
        node("n1", labels={ZONE: "a"}),
        node("n2", labels={ZONE: "a"}, taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]),
        node("n3", labels={ZONE: "b"}),
    ]
    placed = [(web("e1"), "n2"), (web("e2"), "n2"), (web("e3"), "n2"), (web("e4"), "n3")]
    assert spread_scores(web("p", spread=[soft(ZONE, **policies)]), nodes_, placed, feasible=[0, 2]) == want


# --------------------------------------------------------------------------- ImageLocality

NGINX = (["nginx:latest"], 500 * MI)


@pytest.mark.parametrize(
    "incoming, images, want",
    [
        # 500 MiB on 2 of 4 nodes → 250 MiB: 100 × 227 // 977 = 23.
        pytest.param(pod("p", image="nginx"), [NGINX, NGINX, None, None], [23, 23, 0, 0], id="section-4-7-example"),
        # Two containers (init counts): 500 MiB against 2000 MiB: 100 × 477 // 1977 = 24.
        pytest.param(pod("p", image="nginx", init_image="nginx"), [NGINX, NGINX, None, None], [24, 24, 0, 0], id="init-containers"),
        pytest.param(pod("p", image="nginx:1.25"), [NGINX, NGINX, None, None], [0, 0, 0, 0], id="other-tag"),
        pytest.param(pod("p", image="big"), [(["big:latest"], 2000 * MI)] * 4, [100] * 4, id="clamped-at-max"),
    ],
)
def test_image_locality(incoming, images, want):
    nodes_ = [node(f"n{i}", images=[img] if img else []) for i, img in enumerate(images)]
    state, sctx, nodes = cluster(nodes_, [], incoming)
    assert as_list(image_locality.score(incoming, nodes, state, sctx)) == want


def test_image_spread_scaling_uses_go_floats():
    # float64(881397594) × (3.0 / 11.0) truncates to one byte below the exact quotient.
    assert image_locality.scaled_image_score(881397594, 3, 11) == 240381161
    assert 881397594 * 3 // 11 == 240381162


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
        "NodeResourcesBalancedAllocation": [100, 87],  # n2: |0.75 − 0.5| / 2 = 0.125
        "ImageLocality": [0, 0],
    }


@pytest.mark.parametrize(
    "config, want",
    [
        pytest.param({}, [475, 124], id="default-weights"),  # 3×100 + 75 + 100 + 0; 0 + 37 + 87 + 0
        pytest.param({"scoring": {"weights": {"NodeResourcesFit": 5}}}, [775, 272], id="custom-weight"),
        pytest.param({"profile": "packing"}, [425, 149], id="packing"),  # MostAllocated 25 and (75 + 50) // 2
    ],
)
def test_score_nodes_weighted_totals(config, want):
    incoming, state, sctx, nodes = two_nodes(**config)
    assert as_list(score_nodes(incoming, nodes, state, sctx)) == want


def test_score_nodes_without_nodes():
    incoming, state, sctx, _ = two_nodes()
    assert len(score_nodes(incoming, np.zeros(0, dtype=np.int64), state, sctx)) == 0


def test_inter_pod_affinity_follows_state_changes():
    """The interned existing-pod terms are reused across calls, but the state is read afresh."""
    incoming = web("p")
    state, sctx, nodes = cluster(zone_nodes("a", "a", "b"), [], incoming)
    assert inter_pod_affinity.score(incoming, nodes, state, sctx) is None
    holder = pod("e", affinity=pod_affinity(required=[term(ZONE, app="web")]))
    state.add(holder, 2)
    assert as_list(inter_pod_affinity.score(incoming, nodes, state, sctx)) == [0, 0, 100]
    state.remove(holder)
    state.add(holder, 0)
    assert as_list(inter_pod_affinity.score(incoming, nodes, state, sctx)) == [100, 100, 0]


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

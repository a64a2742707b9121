"""NodeResourcesFit: the filter against the conformance table of SEMANTICS.md §3.6, plus edge
cases; the score strategies against hand-computed kube-scheduler numbers (§4), with the
arithmetic shown next to the case where it is not obvious."""

from __future__ import annotations

import numpy as np
import pytest

from models.config import SchedulerConfig
from solver.plugins.node_resources_fit import score as node_resources_fit

from tests.builders import make_node, make_pod, pod_info, scene
from tests.solver.plugins.filter_helpers import OK, U, UU, case, verdict
from tests.solver.plugins.score_helpers import as_list, cluster, node, pod

TOO_MANY_PODS = "Too many pods"

# --------------------------------------------------------------------------- filter


@pytest.mark.parametrize(
    "node_kw, running, pod_kw, want",
    [
        case("equality-fits", dict(cpu="1000m"), [], dict(cpu="1"), (OK, ())),
        case("cpu-short", dict(cpu="1000m"), [dict(cpu="600m")], dict(cpu="500m"), (U, ("Insufficient cpu",))),
        case(
            "cpu-and-memory-short",
            dict(cpu="1", memory="1Gi"),
            [dict(cpu="800m", memory="800Mi")],
            dict(cpu="500m", memory="500Mi"),
            (U, ("Insufficient cpu", "Insufficient memory")),
        ),
        case("pod-count-full", dict(pods=3), [{}, {}, {}], {}, (U, (TOO_MANY_PODS,))),
        case("no-pods-allocatable", dict(pods=None), [], dict(cpu="100m"), (U, (TOO_MANY_PODS,))),
        case(
            "extended-resource-missing-on-node",
            {},
            [],
            dict(requests={"example.com/gpu": "1"}),
            (UU, ("Insufficient example.com/gpu",)),
        ),
        case("zero-request-only-pod-count", dict(cpu="0", memory="0"), [], {}, (OK, ())),
        # Edge cases.
        case("exactly-at-capacity", dict(cpu="2", memory="2Gi"), [dict(cpu="1500m", memory="1Gi")], dict(cpu="500m", memory="1Gi"), (OK, ())),
        case("one-milli-over", dict(cpu="2"), [dict(cpu="1500m")], dict(cpu="501m"), (U, ("Insufficient cpu",))),
        case("pod-count-one-left", dict(pods=3), [{}, {}], {}, (OK, ())),
        case(
            "pods-and-cpu-short",
            dict(cpu="1", pods=1),
            [dict(cpu="1")],
            dict(cpu="100m"),
            (U, (TOO_MANY_PODS, "Insufficient cpu")),
        ),
        case("request-above-allocatable-unresolvable", dict(cpu="1"), [], dict(cpu="2"), (UU, ("Insufficient cpu",))),
        case(
            "one-resource-above-allocatable-makes-all-unresolvable",
            dict(cpu="1", memory="1Gi"),
            [dict(memory="1Gi")],
            dict(cpu="2", memory="1Mi"),
            (UU, ("Insufficient cpu", "Insufficient memory")),
        ),
        case(
            "ephemeral-storage-short",
            dict(ephemeral_storage="10Gi"),
            [dict(requests={"ephemeral-storage": "8Gi"})],
            dict(requests={"ephemeral-storage": "4Gi"}),
            (U, ("Insufficient ephemeral-storage",)),
        ),
        case(
            "extended-resource-used-up",
            dict(extra={"nvidia.com/gpu": "2"}),
            [dict(requests={"nvidia.com/gpu": "2"})],
            dict(requests={"nvidia.com/gpu": "1"}),
            (U, ("Insufficient nvidia.com/gpu",)),
        ),
        case(
            "hugepages",
            dict(extra={"hugepages-2Mi": "4Mi"}),
            [],
            dict(requests={"hugepages-2Mi": "4Mi"}),
            (OK, ()),
        ),
        case("untracked-resource-ignored", {}, [], dict(requests={"foo": "5"}), (OK, ())),
        case("zero-request-full-cpu", dict(cpu="1"), [dict(cpu="1")], {}, (OK, ())),
    ],
)
def test_node_resources_fit(node_kw, running, pod_kw, want):
    nodes = [make_node("n1", **node_kw)]
    pods = [make_pod(f"default/r{i}", node="n1", **kw) for i, kw in enumerate(running)]
    pods.append(make_pod("default/p", **pod_kw))
    status = scene(nodes, pods).status("n1", "default/p")
    assert verdict(status) == want
    if not status.ok:
        assert status.plugin == "NodeResourcesFit"


@pytest.mark.parametrize(
    "version, want",
    [case("v1.36-unresolvable", "1.36", UU), case("v1.34-unresolvable", "1.34", UU),
     case("v1.33-unschedulable", "1.33", U), case("v1.31-unschedulable", "1.31", U)],
)
def test_node_resources_fit_whole_allocatable_by_version(version, want):
    s = scene([make_node("n1", cpu="1")], [make_pod("default/p", cpu="2")], config=SchedulerConfig(kubernetes_version=version))
    assert verdict(s.status("n1")) == (want, ("Insufficient cpu",))


def test_node_resources_fit_short_but_resolvable_is_unschedulable_in_every_version():
    for version in ("1.31", "1.33", "1.34", "1.36"):
        pods = [make_pod("default/r", node="n1", cpu="1"), make_pod("default/p", cpu="500m")]
        s = scene([make_node("n1", cpu="1")], pods, config=SchedulerConfig(kubernetes_version=version))
        assert verdict(s.status("n1", "default/p")) == (U, ("Insufficient cpu",))


# --------------------------------------------------------------------------- score


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


# -- the rule itself, asked by greedy, CP-SAT, the hint and preemption alike ------------------


def test_fits_is_every_requested_resource_at_most_what_is_there() -> None:
    from solver.plugins.shared.resource_fit import asked, copies, fits

    vec = np.array([500, 0, 1])  # cpu 500m, no memory, one pod
    assert fits(vec, np.array([500, 0, 1]))  # exactly enough
    assert fits(vec, np.array([500, -7, 1]))  # a resource not asked for may be overcommitted
    assert not fits(vec, np.array([499, 10**9, 1]))
    assert not fits(vec, np.array([500, 0, 0]))  # the pod count is always asked for
    rows = np.array([[1000, 0, 3], [400, 0, 9], [500, 5, 1]])
    assert fits(vec, rows).tolist() == [True, False, True]
    assert copies(vec, rows).tolist() == [2, 0, 1]
    # Exact Python integers beyond int64 (preemption's dry run sums such amounts).
    assert fits(np.array([2**62, 1]), [2**63 + 5, 1])
    assert not fits(np.array([2**62, 1]), [2**61, 1])
    # The dry run's form (the request as ``asked`` pairs, one node as a list) answers the same.
    for row in [*rows.tolist(), [500, -7, 1], [500, 0, 0], [499, 10**9, 1]]:
        assert fits(asked(vec), row) == bool(fits(vec, np.array(row)))
    assert fits(asked(np.array([2**62, 1])), [2**63 + 5, 1])


def test_feasible_and_fits_alone_are_fits_on_free_and_allocatable() -> None:
    from solver.info import NodeInfo
    from solver.plugins.node_resources_fit.filter import feasible, fits, fits_alone
    from solver.state import ClusterState

    nodes = [NodeInfo.of(0, make_node("n1", cpu="2")), NodeInfo.of(1, make_node("n2", cpu="1"))]
    pod = pod_info(make_pod("default/p", cpu="1"))
    state = ClusterState(nodes, pod.requests)
    state.add(pod_info(make_pod("default/r", cpu="1500m", node="n1")), 0)
    idx = np.arange(2)
    vec = state.vector(pod)
    assert feasible(pod, idx, state).tolist() == fits(vec, state.free[idx]).tolist() == [False, True]
    assert fits_alone(pod, idx, state).tolist() == fits(vec, state.alloc[idx]).tolist() == [True, True]


def _pod_level(name: str, cpu: str, memory: str, *, node: str = "") -> "PodInfo":
    """A pod whose requests are pod-level only (``spec.resources``), its container asking nothing."""
    from models.objects import Pod
    from solver.info import PodInfo

    spec: dict = {"resources": {"requests": {"cpu": cpu, "memory": memory}}, "containers": [{"name": "c", "image": "i"}]}
    if node:
        spec["nodeName"] = node
    return PodInfo.of(Pod.model_validate({"metadata": {"name": name, "namespace": "default"}, "spec": spec}),
                      {"kubernetes.io/metadata.name": "default"})


def test_the_scored_pod_counts_without_its_pod_level_resources():
    """kube-scheduler 1.36 (seed 201 of the kube differential): NodeResourcesFit's scorer is built
    without PodLevelResources, so the scored pod (pod-level 500m/2Gi, a container asking nothing)
    adds its containers' non-zero defaults, 100m and 200Mi, not 500m and 2Gi; the fit filter and
    BalancedAllocation do read the pod-level requests. Empty 8-CPU/8Gi node: cpu 7900·100//8000 =
    98, memory (8192 − 200)·100//8192 = 97 → 97 (kube's log: 97; with the pod-level request it
    would be (93 + 75) // 2 = 84)."""
    incoming = _pod_level("p", "500m", "2Gi")
    state, sctx, nodes = cluster([node("n1", cpu="8", memory="8Gi")], [], incoming)
    assert as_list(node_resources_fit.score(incoming, nodes, state, sctx)) == [97]
    assert state.vector(incoming)[state.res_index["cpu"]] == 500


def test_a_running_pods_pod_level_resources_count_on_its_node():
    """The node's non-zero sum counts a bound pod's pod-level requests (1 CPU, 4Gi), not its
    containers' defaults: the scored 100m/200Mi pod on a 4-CPU/8Gi node → cpu 2900·100//4000 =
    72, memory (8192 − 4296)·100//8192 = 47 → 59."""
    incoming = pod("p")
    state, sctx, nodes = cluster([node("n1")], [(_pod_level("r", "1", "4Gi"), "n1")], incoming)
    assert as_list(node_resources_fit.score(incoming, nodes, state, sctx)) == [59]

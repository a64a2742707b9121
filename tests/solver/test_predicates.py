"""The filtering machinery as a whole (SEMANTICS.md §3): plugin order, FitError text, and a
differential test.

Each filter plugin's own conformance table lives beside it in ``tests/solver/plugins/``. Here:
the filters stop at the first failure in kube's plugin order, the FitError text is checked for
its exact shape, and a differential test checks that ``Cycle.feasible`` (vectorised) and
``Cycle.status`` (per node) agree on random small clusters.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from solver.framework import fit_error_message

from tests.builders import make_node, make_pod, scene, spread, term
from tests.solver.plugins.filter_helpers import NODE_AFFINITY, PORTS, U, UNSCHEDULABLE, UU, case, untolerated, verdict

# --------------------------------------------------------------------------- filter order


def test_filters_stop_at_first_failure_in_plugin_order():
    nodes = [make_node("n1", cpu="1", labels={"zone": "a"}, taints=["a=b:NoSchedule"], unschedulable=True)]
    pods = [make_pod("default/p", cpu="2", host_ports=[80], node_selector={"zone": "b"})]
    assert verdict(scene(nodes, pods).status("n1")) == (UU, (UNSCHEDULABLE,))
    nodes = [make_node("n1", cpu="1", labels={"zone": "a"}, taints=["a=b:NoSchedule"])]
    assert verdict(scene(nodes, pods).status("n1")) == (UU, (untolerated("a", "b"),))
    nodes = [make_node("n1", cpu="1", labels={"zone": "a"})]
    assert verdict(scene(nodes, pods).status("n1")) == (UU, (NODE_AFFINITY,))
    running = make_pod("default/r", node="n1", host_ports=[80])
    nodes = [make_node("n1", cpu="1", labels={"zone": "b"})]
    assert verdict(scene(nodes, [running, *pods]).status("n1", "default/p")) == (U, (PORTS,))


# --------------------------------------------------------------------------- FitError text


@pytest.mark.parametrize(
    "num_nodes, hist, kw, want",
    [
        case("no-nodes", 0, {}, {}, "no nodes available to schedule pods"),
        case("single-reason", 3, {"Insufficient cpu": 3}, {}, "0/3 nodes are available: 3 Insufficient cpu."),
        case(
            "sorted-as-strings",
            12,
            {"y reason": 2, "x reason": 10},
            {},
            "0/12 nodes are available: 10 x reason, 2 y reason.",
        ),
        case(
            "equal-counts-by-reason",
            2,
            {"b": 1, "a": 1},
            {},
            "0/2 nodes are available: 1 a, 1 b.",
        ),
        case(
            "postfilter-appended",
            3,
            {"Insufficient cpu": 1, untolerated("dedicated", "gpu"): 2},
            {"postfilter": "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."},
            "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint {dedicated: gpu}."
            " preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.",
        ),
        case(
            "prefilter-replaces-histogram",
            2,
            {"anything": 2},
            {"prefilter": "pod affinity terms conflict"},
            "0/2 nodes are available: pod affinity terms conflict.",
        ),
    ],
)
def test_fit_error_message(num_nodes, hist, kw, want):
    assert fit_error_message(num_nodes, Counter(hist), **kw) == want


def test_two_reasons_make_two_histogram_entries():
    nodes = [make_node("n1", cpu="1", memory="1Gi"), make_node("n2", cpu="1", memory="1Gi")]
    pods = [
        make_pod("default/r1", node="n1", cpu="900m", memory="900Mi"),
        make_pod("default/r2", node="n2", cpu="900m"),
        make_pod("default/p", cpu="500m", memory="500Mi"),
    ]
    cycle = scene(nodes, pods).cycle("default/p")
    assert cycle.histogram() == Counter({"Insufficient cpu": 2, "Insufficient memory": 1})
    assert cycle.fit_error() == "0/2 nodes are available: 1 Insufficient memory, 2 Insufficient cpu."


def test_cycle_fit_error_counts_every_node():
    nodes = [make_node(f"n{i}", cpu="1") for i in range(10)] + [
        make_node("t1", taints=["a=b:NoSchedule"]),
        make_node("t2", taints=["a=b:NoSchedule"]),
    ]
    s = scene(nodes, [make_pod("default/p", cpu="2")])
    assert s.cycle().fit_error() == (
        "0/12 nodes are available: 10 Insufficient cpu, 2 node(s) had untolerated taint {a: b}."
    )
    assert s.feasible() == []


def test_cycle_fit_error_without_nodes():
    assert scene([], [make_pod("default/p")]).cycle().fit_error() == "no nodes available to schedule pods"


# --------------------------------------------------------------------------- differential

ZONE_VALUES = ("a", "b", "c", None)
APPS = ("web", "db")


@st.composite
def small_cluster(draw):
    n_nodes = draw(st.integers(1, 5))
    nodes = []
    for i in range(n_nodes):
        labels = {}
        zone = draw(st.sampled_from(ZONE_VALUES))
        if zone is not None:
            labels["zone"] = zone
        if draw(st.booleans()):
            labels["disk"] = draw(st.sampled_from(("ssd", "hdd")))
        taints = ["dedicated=x:NoSchedule"] if draw(st.integers(0, 4)) == 0 else []
        nodes.append(
            make_node(
                f"n{i}",
                cpu=f"{draw(st.integers(1, 4))}",
                memory="4Gi",
                pods=draw(st.sampled_from((2, 3, 110))),
                labels=labels,
                taints=taints,
                unschedulable=draw(st.integers(0, 6)) == 0,
            )
        )
    pods = []
    for j in range(draw(st.integers(0, 6))):
        node = draw(st.sampled_from([n.metadata.name for n in nodes]))
        anti = [term({"app": draw(st.sampled_from(APPS))}, "zone")] if draw(st.integers(0, 3)) == 0 else []
        pods.append(
            make_pod(
                f"{draw(st.sampled_from(('default', 'other')))}/r{j}",
                node=node,
                cpu=f"{draw(st.sampled_from((0, 250, 500, 1000)))}m",
                labels={"app": draw(st.sampled_from(APPS))},
                host_ports=[80] if draw(st.integers(0, 4)) == 0 else [],
                pod_anti_affinity=anti,
                terminating=draw(st.integers(0, 5)) == 0,
            )
        )
    app = draw(st.sampled_from(APPS))
    kw: dict = dict(cpu=f"{draw(st.sampled_from((0, 500, 1500)))}m", labels={"app": app})
    if draw(st.booleans()):
        kw["node_selector"] = {"disk": "ssd"}
    if draw(st.booleans()):
        kw["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    if draw(st.integers(0, 2)) == 0:
        kw["pod_affinity"] = [term({"app": draw(st.sampled_from(APPS))}, draw(st.sampled_from(("zone", "kubernetes.io/hostname"))))]
    if draw(st.integers(0, 2)) == 0:
        kw["pod_anti_affinity"] = [term({"app": draw(st.sampled_from(APPS))}, draw(st.sampled_from(("zone", "kubernetes.io/hostname"))))]
    if draw(st.booleans()):
        kw["spread"] = [
            spread(
                "zone",
                {"app": draw(st.sampled_from(APPS))},
                max_skew=draw(st.integers(1, 2)),
                min_domains=draw(st.sampled_from((None, 2, 4))),
                node_taints_policy=draw(st.sampled_from((None, "Honor"))),
            )
        ]
    if draw(st.integers(0, 3)) == 0:
        kw["host_ports"] = [80]
    pods.append(make_pod("default/p", **kw))
    return nodes, pods


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_cluster())
def test_feasible_mask_equals_per_node_status(cluster):
    nodes, pods = cluster
    s = scene(nodes, pods)
    cycle = s.cycle("default/p")
    per_node = [cycle.status(n) for n in s.ctx.nodes]
    by_status = [n.name for n, st in zip(s.ctx.nodes, per_node) if st.ok]
    assert s.feasible("default/p") == by_status
    # Cycle.statuses may take a vectorised path of its own: it must give the same statuses.
    assert s.cycle("default/p").statuses() == per_node
    hist = cycle.histogram()
    assert sum(hist.values()) >= len(nodes) - len(by_status)

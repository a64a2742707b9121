"""PodTopologySpread: the filter against the conformance table of SEMANTICS.md §3.8, plus edge
cases; the score against hand-computed kube-scheduler numbers (§4), with the arithmetic shown
next to the case where it is not obvious."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import pytest

from models.objects import Node
from solver.info import PodInfo
from solver.plugins.pod_topology_spread import score as pod_topology_spread

from tests.builders import make_node, make_pod, scene, spread
from tests.solver.plugins.filter_helpers import NODE_AFFINITY, OK, U, UU, case, untolerated
from tests.solver.plugins.score_helpers import HOST, ZONE, as_list, cluster, node, pod, web, zone_nodes

SPREAD = "node(s) didn't match pod topology spread constraints"
SPREAD_MISSING = "node(s) didn't match pod topology spread constraints (missing required label)"

# --------------------------------------------------------------------------- filter


def spread_scene(counts: dict[str, int], pod_kw: dict, *, nodes=None, running_kw=None):
    """One node per zone ``z`` named ``n-z``; ``counts[z]`` matching app=web pods on it."""
    nodes = nodes or [make_node(f"n-{z}", labels={"zone": z}) for z in counts]
    pods = []
    for z, count in counts.items():
        for i in range(count):
            pods.append(make_pod(f"default/w-{z}-{i}", node=f"n-{z}", labels={"app": "web"}, **(running_kw or {})))
    pods.append(make_pod("default/p", **pod_kw))
    return scene(nodes, pods)


def spread_verdicts(s) -> dict[str, object]:
    out = {}
    for name, status in s.statuses("default/p").items():
        out[name] = OK if status.ok else (status.code, status.reasons[0])
    return out


WEB = dict(labels={"app": "web"})


@pytest.mark.parametrize(
    "counts, pod_kw, want",
    [
        case("a2-b0", {"a": 2, "b": 0}, dict(WEB, spread=[spread("zone", {"app": "web"})]), {"n-a": (U, SPREAD), "n-b": OK}),
        case("a1-b1", {"a": 1, "b": 1}, dict(WEB, spread=[spread("zone", {"app": "web"})]), {"n-a": OK, "n-b": OK}),
        case(
            "min-domains-not-reached",
            {"a": 1, "b": 1},
            dict(WEB, spread=[spread("zone", {"app": "web"}, min_domains=3)]),
            {"n-a": (U, SPREAD), "n-b": (U, SPREAD)},
        ),
        case(
            "pod-not-matching-its-selector",
            {"a": 1, "b": 0},
            dict(labels={"app": "api"}, spread=[spread("zone", {"app": "web"})]),
            {"n-a": OK, "n-b": OK},
        ),
        # Edge cases.
        case(
            "min-domains-reached",
            {"a": 1, "b": 1, "c": 1},
            dict(WEB, spread=[spread("zone", {"app": "web"}, min_domains=3)]),
            {"n-a": OK, "n-b": OK, "n-c": OK},
        ),
        case(
            "max-skew-two",
            {"a": 2, "b": 0},
            dict(WEB, spread=[spread("zone", {"app": "web"}, max_skew=2)]),
            {"n-a": (U, SPREAD), "n-b": OK},
        ),
        case(
            "schedule-anyway-is-not-a-filter",
            {"a": 5, "b": 0},
            dict(WEB, spread=[spread("zone", {"app": "web"}, hard=False)]),
            {"n-a": OK, "n-b": OK},
        ),
        case(
            "nil-selector-counts-nothing",
            {"a": 3, "b": 0},
            dict(WEB, spread=[spread("zone", label_selector=None)]),
            {"n-a": OK, "n-b": OK},
        ),
        case(
            "empty-selector-counts-zero",
            {"a": 3, "b": 0},
            dict(WEB, spread=[spread("zone", label_selector={})]),
            {"n-a": OK, "n-b": OK},
        ),
        case(
            "match-label-keys-add-the-pods-value",
            {"a": 2, "b": 0},
            dict(labels={"app": "web", "rev": "2"}, spread=[spread("zone", {"app": "web"}, match_label_keys=["rev"])]),
            {"n-a": OK, "n-b": OK},
        ),
        case(
            "match-label-keys-empty-selector-becomes-the-merged-set",
            {"a": 2, "b": 0},
            dict(labels={"app": "web"}, spread=[spread("zone", label_selector={}, match_label_keys=["app"])]),
            {"n-a": (U, SPREAD), "n-b": OK},
        ),
        case(
            "two-constraints-first-failure-wins",
            {"a": 2, "b": 0},
            dict(WEB, spread=[spread("zone", {"app": "web"}), spread("kubernetes.io/hostname", {"app": "web"}, max_skew=5)]),
            {"n-a": (U, SPREAD), "n-b": OK},
        ),
    ],
)
def test_pod_topology_spread(counts, pod_kw, want):
    assert spread_verdicts(spread_scene(counts, pod_kw)) == want


def test_spread_node_without_key_is_unresolvable():
    nodes = [make_node("n-a", labels={"zone": "a"}), make_node("n-x")]
    s = spread_scene({"a": 0}, dict(WEB, spread=[spread("zone", {"app": "web"})]), nodes=nodes)
    assert spread_verdicts(s) == {"n-a": OK, "n-x": (UU, SPREAD_MISSING)}


def test_spread_other_namespace_and_terminating_pods_not_counted():
    nodes = [make_node("n-a", labels={"zone": "a"}), make_node("n-b", labels={"zone": "b"})]
    pods = [
        make_pod("other/w1", node="n-a", labels={"app": "web"}),
        make_pod("other/w2", node="n-a", labels={"app": "web"}),
        make_pod("default/w3", node="n-a", labels={"app": "web"}, terminating=True),
        make_pod("default/w4", node="n-a", labels={"app": "web"}, terminating=True),
        make_pod("default/p", labels={"app": "web"}, spread=[spread("zone", {"app": "web"})]),
    ]
    s = scene(nodes, pods)
    assert spread_verdicts(s) == {"n-a": OK, "n-b": OK}


def test_spread_domain_failing_node_affinity_is_not_a_domain():
    # zone c (empty) fails the pod's nodeSelector: with nodeAffinityPolicy Honor it does not lower
    # the minimum, so zone a (1) vs b (1) gives skew 1 on both.
    nodes = [make_node(f"n-{z}", labels={"zone": z, "pool": "x" if z != "c" else "y"}) for z in "abc"]
    pod_kw = dict(WEB, node_selector={"pool": "x"}, spread=[spread("zone", {"app": "web"})])
    s = spread_scene({"a": 1, "b": 1, "c": 0}, pod_kw, nodes=nodes)
    assert spread_verdicts(s) == {"n-a": OK, "n-b": OK, "n-c": (UU, NODE_AFFINITY)}


def test_spread_node_affinity_policy_ignore_counts_that_domain():
    nodes = [make_node(f"n-{z}", labels={"zone": z, "pool": "x" if z != "c" else "y"}) for z in "abc"]
    pod_kw = dict(WEB, node_selector={"pool": "x"}, spread=[spread("zone", {"app": "web"}, node_affinity_policy="Ignore")])
    s = spread_scene({"a": 1, "b": 1, "c": 0}, pod_kw, nodes=nodes)
    assert spread_verdicts(s) == {"n-a": (U, SPREAD), "n-b": (U, SPREAD), "n-c": (UU, NODE_AFFINITY)}


@pytest.mark.parametrize(
    "policy, want_a",
    [case("taints-ignored-by-default", None, (U, SPREAD)), case("taints-honored", "Honor", OK)],
)
def test_spread_node_taints_policy(policy, want_a):
    # zone c has one empty node, tainted. Ignored policy: it is a domain with 0, so zone a (1) + 1 − 0 = 2.
    nodes = [
        make_node("n-a", labels={"zone": "a"}),
        make_node("n-b", labels={"zone": "b"}),
        make_node("n-c", labels={"zone": "c"}, taints=["dedicated=x:NoSchedule"]),
    ]
    pod_kw = dict(WEB, spread=[spread("zone", {"app": "web"}, node_taints_policy=policy)])
    s = spread_scene({"a": 1, "b": 1, "c": 0}, pod_kw, nodes=nodes)
    want = {"n-a": want_a, "n-b": want_a, "n-c": (UU, untolerated("dedicated", "x"))}
    assert spread_verdicts(s) == want


def test_spread_inclusion_policies_apply_per_constraint():
    # Constraint 1 honours taints (zone c excluded), constraint 2 ignores them (zone c counts as 0
    # on the hostname key). On n-a: constraint 1 skew 1+1−1 = 1 passes; constraint 2 is hostname
    # with maxSkew 5, passes. Then a third constraint on the zone key with policy Ignore fails.
    nodes = [
        make_node("n-a", labels={"zone": "a"}),
        make_node("n-b", labels={"zone": "b"}),
        make_node("n-c", labels={"zone": "c"}, taints=["dedicated=x:NoSchedule"]),
    ]
    honor = spread("zone", {"app": "web"}, node_taints_policy="Honor")
    ignore = spread("zone", {"app": "web"})
    s = spread_scene({"a": 1, "b": 1, "c": 0}, dict(WEB, spread=[honor]), nodes=nodes)
    assert spread_verdicts(s)["n-a"] == OK
    s = spread_scene({"a": 1, "b": 1, "c": 0}, dict(WEB, spread=[honor, ignore]), nodes=nodes)
    assert spread_verdicts(s)["n-a"] == (U, SPREAD)
    s = spread_scene({"a": 1, "b": 1, "c": 0}, dict(WEB, spread=[ignore, honor]), nodes=nodes)
    assert spread_verdicts(s)["n-a"] == (U, SPREAD)


def test_spread_requires_all_keys_for_domain_eligibility():
    # n-b2 lacks the hostname key... every node has it; drop it on one node to make zone b vanish.
    nodes = [
        make_node("n-a", labels={"zone": "a"}),
        make_node("n-b", labels={"zone": "b"}, hostname_label=False),
    ]
    pod_kw = dict(WEB, spread=[spread("zone", {"app": "web"}), spread("kubernetes.io/hostname", {"app": "web"}, max_skew=9)])
    s = spread_scene({"a": 1, "b": 0}, pod_kw, nodes=nodes)
    # zone b is not a domain (its only node lacks the hostname key): min is 1, a passes with 1+1−1.
    assert spread_verdicts(s) == {"n-a": OK, "n-b": (UU, SPREAD_MISSING)}


# --------------------------------------------------------------------------- score


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
def test_spread_node_taints_policy_score(policies, want):
    nodes_ = [
        node("n1", labels={ZONE: "a"}),
        node("n2", labels={ZONE: "a"}, taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]),
        node("n3", labels={ZONE: "b"}),
    ]
    placed = [(web("e1"), "n2"), (web("e2"), "n2"), (web("e3"), "n2"), (web("e4"), "n3")]
    assert spread_scores(web("p", spread=[soft(ZONE, **policies)]), nodes_, placed, feasible=[0, 2]) == want


# -- the global minimum a skew is measured from ------------------------------------------------


def test_skew_floor_is_the_emptiest_eligible_domain_or_zero_below_min_domains() -> None:
    from solver.plugins.pod_topology_spread.filter import floor_is_zero, skew_floor

    counts = np.array([3, 1, 7, 0])
    present = np.array([True, True, True, False])  # the fourth domain has no eligible node
    assert skew_floor(counts, present, 1) == 1
    assert skew_floor(counts, present, 3) == 1
    assert skew_floor(counts, present, 4) == 0  # fewer eligible domains than minDomains
    assert skew_floor(counts, np.zeros(4, dtype=bool), 1) == 0  # no eligible domain at all
    assert floor_is_zero(0, 1) and floor_is_zero(2, 3) and not floor_is_zero(3, 3)

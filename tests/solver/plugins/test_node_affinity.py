"""NodeAffinity: the filter and its PreFilter against the conformance table of SEMANTICS.md §3.4,
plus edge cases; the preferred-terms score against hand-computed kube-scheduler numbers (§4)."""

from __future__ import annotations

from typing import Any

import pytest

from solver.plugins.node_affinity import filter as node_affinity_filter
from solver.plugins.node_affinity import score as node_affinity

from tests.builders import make_node, make_pod, node_info, node_term, pod_info, required_node_affinity, scene
from tests.solver.plugins.filter_helpers import NODE_AFFINITY, OK, UNSCHEDULABLE, UU, case, verdict
from tests.solver.plugins.score_helpers import ZONE, as_list, cluster, node, pod

NODE_AFFINITY_PREFILTER = "node(s) didn't satisfy plugin(s) [NodeAffinity]"
NODE_AFFINITY_CONFLICT = "pod affinity terms conflict"

# --------------------------------------------------------------------------- filter


@pytest.mark.parametrize(
    "node_selector, affinity, labels, want",
    [
        case("selector-match", {"disk": "ssd"}, None, {"disk": "ssd", "x": "y"}, True),
        case("selector-key-missing", {"disk": "ssd"}, None, {"x": "y"}, False),
        case(
            "terms-ored",
            None,
            required_node_affinity(node_term(("zone", "In", ["a"])), node_term(("zone", "In", ["b"]))),
            {"zone": "b"},
            True,
        ),
        case(
            "expressions-anded",
            None,
            required_node_affinity(node_term(("zone", "In", ["a"]), ("gpu", "Exists"))),
            {"zone": "a"},
            False,
        ),
        case("notin-key-missing", None, required_node_affinity(node_term(("zone", "NotIn", ["a"]))), {}, True),
        case("gt-numeric", None, required_node_affinity(node_term(("cores", "Gt", ["5"]))), {"cores": "10"}, True),
        case("gt-label-not-integer", None, required_node_affinity(node_term(("cores", "Gt", ["5"]))), {"cores": "abc"}, False),
        case("empty-node-selector-terms", None, required_node_affinity(), {"zone": "a"}, False),
        # Edge cases.
        case("selector-value-differs", {"disk": "ssd"}, None, {"disk": "hdd"}, False),
        case("notin-value-listed", None, required_node_affinity(node_term(("zone", "NotIn", ["a"]))), {"zone": "a"}, False),
        case("in-key-missing", None, required_node_affinity(node_term(("zone", "In", ["a"]))), {}, False),
        case("exists", None, required_node_affinity(node_term(("gpu", "Exists"))), {"gpu": ""}, True),
        case("does-not-exist", None, required_node_affinity(node_term(("gpu", "DoesNotExist"))), {"gpu": "x"}, False),
        case("gt-equal-is-not-greater", None, required_node_affinity(node_term(("cores", "Gt", ["5"]))), {"cores": "5"}, False),
        case("gt-key-missing", None, required_node_affinity(node_term(("cores", "Gt", ["5"]))), {}, False),
        case("lt-numeric", None, required_node_affinity(node_term(("cores", "Lt", ["5"]))), {"cores": "4"}, True),
        case("lt-negative", None, required_node_affinity(node_term(("cores", "Lt", ["0"]))), {"cores": "-3"}, True),
        case("lt-not-less", None, required_node_affinity(node_term(("cores", "Lt", ["5"]))), {"cores": "7"}, False),
        case("only-empty-term", None, required_node_affinity({}), {"zone": "a"}, False),
        case(
            "empty-term-skipped-other-term-matches",
            None,
            required_node_affinity({}, node_term(("zone", "In", ["a"]))),
            {"zone": "a"},
            True,
        ),
        case(
            "selector-and-affinity-both-required",
            {"disk": "ssd"},
            required_node_affinity(node_term(("zone", "In", ["a"]))),
            {"zone": "a"},
            False,
        ),
        case(
            "match-fields-notin-other-node",
            None,
            required_node_affinity(node_term(fields=[("metadata.name", "NotIn", ["n2"])])),
            {},
            True,
        ),
        case(
            "match-fields-notin-this-node",
            None,
            required_node_affinity(node_term(fields=[("metadata.name", "NotIn", ["n1"])])),
            {},
            False,
        ),
        case(
            "match-fields-and-expressions-anded",
            None,
            required_node_affinity(node_term(("zone", "In", ["b"]), fields=[("metadata.name", "In", ["n1"])])),
            {"zone": "a"},
            False,
        ),
    ],
)
def test_node_affinity_filter(node_selector, affinity, labels, want):
    pod = pod_info(make_pod("default/p", node_selector=node_selector, affinity=affinity))
    node = node_info(make_node("n1", labels=labels, hostname_label=False))
    status = node_affinity_filter.filter(pod, node)
    assert verdict(status) == ((OK, ()) if want else (UU, (NODE_AFFINITY,)))


@pytest.mark.parametrize(
    "affinity, want",
    [
        case(
            "match-fields-in-excludes-other-nodes",
            required_node_affinity(node_term(fields=[("metadata.name", "In", ["n1"])])),
            {"n1": (OK, ()), "n2": (UU, (NODE_AFFINITY_PREFILTER,)), "n3": (UU, (NODE_AFFINITY_PREFILTER,))},
        ),
        case(
            "union-over-terms",
            required_node_affinity(
                node_term(fields=[("metadata.name", "In", ["n1"])]),
                node_term(fields=[("metadata.name", "In", ["n3"])]),
            ),
            {"n1": (OK, ()), "n2": (UU, (NODE_AFFINITY_PREFILTER,)), "n3": (OK, ())},
        ),
        case(
            "a-term-without-fields-lifts-the-restriction",
            required_node_affinity(node_term(fields=[("metadata.name", "In", ["n1"])]), node_term(("zone", "In", ["b"]))),
            {"n1": (OK, ()), "n2": (UU, (UNSCHEDULABLE,)), "n3": (UU, (NODE_AFFINITY,))},
        ),
        case(
            "prefilter-wins-over-later-failures",  # n2 is also cordoned: never filtered at all
            required_node_affinity(node_term(("zone", "In", ["a"]), fields=[("metadata.name", "In", ["n1"])])),
            {"n1": (OK, ()), "n2": (UU, (NODE_AFFINITY_PREFILTER,)), "n3": (UU, (NODE_AFFINITY_PREFILTER,))},
        ),
        case(
            "intersection-in-a-term-empty",
            required_node_affinity(
                node_term(fields=[("metadata.name", "In", ["n1"]), ("metadata.name", "In", ["n2"])])
            ),
            {n: (UU, (NODE_AFFINITY_CONFLICT,)) for n in ("n1", "n2", "n3")},
        ),
    ],
)
def test_node_affinity_prefilter(affinity, want):
    nodes = [
        make_node("n1", labels={"zone": "a"}),
        make_node("n2", labels={"zone": "a"}, unschedulable=True),
        make_node("n3", labels={"zone": "c"}),
    ]
    s = scene(nodes, [make_pod("default/p", affinity=affinity)])
    assert {n: verdict(st) for n, st in s.statuses().items()} == want


def test_node_affinity_conflict_fit_error_is_the_prefilter_message():
    affinity = required_node_affinity(
        node_term(fields=[("metadata.name", "In", ["n1"]), ("metadata.name", "In", ["n2"])])
    )
    s = scene([make_node("n1"), make_node("n2")], [make_pod("default/p", affinity=affinity)])
    assert s.cycle().fit_error() == "0/2 nodes are available: pod affinity terms conflict."


# --------------------------------------------------------------------------- score


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

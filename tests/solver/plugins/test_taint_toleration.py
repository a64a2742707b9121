"""TaintToleration: the filter against the conformance table of SEMANTICS.md §3.3, plus edge
cases; the score against hand-computed kube-scheduler numbers (§4)."""

from __future__ import annotations

import pytest

from solver.plugins.taint_toleration import filter as taint_toleration_filter
from solver.plugins.taint_toleration import score as taint_toleration

from tests.builders import make_node, make_pod, node_info, pod_info
from tests.solver.plugins.filter_helpers import OK, UU, case, untolerated, verdict
from tests.solver.plugins.score_helpers import PNS, as_list, cluster, node, pod

# --------------------------------------------------------------------------- filter


@pytest.mark.parametrize(
    "taints, tolerations, want",
    [
        case("noschedule-untolerated", ["a=b:NoSchedule"], [], (UU, (untolerated("a", "b"),))),
        case("prefer-no-schedule-ignored", ["a=b:PreferNoSchedule"], [], (OK, ())),
        case(
            "noexecute-vs-noschedule-toleration",
            ["a=b:NoExecute"],
            [{"key": "a", "operator": "Equal", "value": "b", "effect": "NoSchedule"}],
            (UU, (untolerated("a", "b"),)),
        ),
        case("noexecute-exists-any-effect", ["a=b:NoExecute"], [{"key": "a", "operator": "Exists"}], (OK, ())),
        case(
            "second-taint-untolerated",
            ["a=b:NoSchedule", "c=d:NoSchedule"],
            [{"key": "a", "operator": "Exists"}],
            (UU, (untolerated("c", "d"),)),
        ),
        case("empty-value-equal-empty-operator", ["a:NoSchedule"], [{"key": "a", "value": ""}], (OK, ())),
        # Edge cases.
        case(
            "first-untolerated-in-list-order",
            ["a=b:NoSchedule", "c=d:NoExecute"],
            [{"key": "c", "operator": "Exists"}],
            (UU, (untolerated("a", "b"),)),
        ),
        case(
            "list-order-not-sorted",
            ["z=1:NoSchedule", "a=2:NoSchedule"],
            [],
            (UU, (untolerated("z", "1"),)),
        ),
        case("empty-value-reason-format", ["foo:NoSchedule"], [], (UU, (untolerated("foo", ""),))),
        case(
            "equal-value-mismatch",
            ["a=b:NoSchedule"],
            [{"key": "a", "operator": "Equal", "value": "c"}],
            (UU, (untolerated("a", "b"),)),
        ),
        case("empty-key-exists-tolerates-all", ["a=b:NoSchedule", "c=d:NoExecute"], [{"operator": "Exists"}], (OK, ())),
        case(
            "empty-key-equal-matches-on-value",  # rejected by API validation, but the function allows it
            ["a=b:NoSchedule"],
            [{"operator": "Equal", "value": "b"}],
            (OK, ()),
        ),
        case(
            "exists-with-effect-only-that-effect",
            ["a=b:NoExecute"],
            [{"key": "a", "operator": "Exists", "effect": "NoSchedule"}],
            (UU, (untolerated("a", "b"),)),
        ),
        case("no-taints", [], [], (OK, ())),
    ],
)
def test_taint_toleration(taints, tolerations, want):
    pod = pod_info(make_pod("default/p", tolerations=tolerations))
    node = node_info(make_node("n1", taints=taints))
    status = taint_toleration_filter.filter(pod, node)
    assert verdict(status) == want
    if not status.ok:
        assert status.plugin == "TaintToleration"


# --------------------------------------------------------------------------- score


@pytest.mark.parametrize(
    "tolerations, want",
    [
        pytest.param(None, [100, 50, 0, 100], id="counts-reversed"),
        pytest.param([{"key": "a", "operator": "Exists", "effect": PNS}], [100, 100, 0, 100], id="tolerated-one"),
        pytest.param([{"key": "a", "operator": "Exists", "effect": "NoSchedule"}], [100, 50, 0, 100], id="wrong-effect"),
        pytest.param([{"operator": "Exists"}], [100, 100, 100, 100], id="all-zero-is-100"),
    ],
)
def test_taint_toleration_score(tolerations, want):
    nodes_ = [
        node("n1"),
        node("n2", taints=[{"key": "a", "value": "b", "effect": PNS}]),
        node("n3", taints=[{"key": "a", "value": "b", "effect": PNS}, {"key": "c", "value": "d", "effect": PNS}]),
        node("n4", taints=[{"key": "x", "value": "y", "effect": "NoSchedule"}]),  # not a scoring taint
    ]
    incoming = pod("p", tolerations=tolerations)
    state, sctx, nodes = cluster(nodes_, [], incoming)
    assert as_list(taint_toleration.score(incoming, nodes, state, sctx)) == want

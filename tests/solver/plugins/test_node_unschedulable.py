"""NodeUnschedulable filter against the conformance table of SEMANTICS.md §3.1."""

from __future__ import annotations

import pytest

from solver.plugins.node_unschedulable import filter as node_unschedulable

from tests.builders import make_node, make_pod, node_info, pod_info
from tests.solver.plugins.filter_helpers import OK, UNSCHEDULABLE, UU, case, verdict

# --------------------------------------------------------------------------- filter

UNSCHEDULABLE_KEY = "node.kubernetes.io/unschedulable"


@pytest.mark.parametrize(
    "cordoned, tolerations, want",
    [
        case("cordoned-no-tolerations", True, [], (UU, (UNSCHEDULABLE,))),
        case(
            "cordoned-tolerates-unschedulable-noschedule",
            True,
            [{"key": UNSCHEDULABLE_KEY, "operator": "Exists", "effect": "NoSchedule"}],
            (OK, ()),
        ),
        case("cordoned-tolerates-everything", True, [{"operator": "Exists"}], (OK, ())),
        case(
            "cordoned-toleration-effect-mismatch",
            True,
            [{"key": UNSCHEDULABLE_KEY, "operator": "Exists", "effect": "NoExecute"}],
            (UU, (UNSCHEDULABLE,)),
        ),
        case("not-cordoned", False, [], (OK, ())),
    ],
)
def test_node_unschedulable(cordoned, tolerations, want):
    pod = pod_info(make_pod("default/p", tolerations=tolerations))
    node = node_info(make_node("n1", unschedulable=cordoned))
    status = node_unschedulable.filter(pod, node)
    assert verdict(status) == want
    if not status.ok:
        assert status.plugin == "NodeUnschedulable"

"""NodeName filter against the conformance table of SEMANTICS.md §3.2."""

from __future__ import annotations

import pytest

from solver.plugins.node_name import filter as node_name

from tests.builders import make_node, make_pod, node_info, pod_info
from tests.solver.plugins.filter_helpers import OK, UU, case, verdict

NODE_NAME = "node(s) didn't match the requested node name"

# --------------------------------------------------------------------------- filter


@pytest.mark.parametrize(
    "wanted, want",
    [
        case("no-node-name", "", (OK, ())),
        case("same-node", "n1", (OK, ())),
        case("other-node", "n2", (UU, (NODE_NAME,))),
    ],
)
def test_node_name(wanted, want):
    pod = make_pod("default/p")
    pod = pod.model_copy(update={"spec": pod.spec.model_copy(update={"node_name": wanted})})
    assert verdict(node_name.filter(pod_info(pod), node_info(make_node("n1")))) == want

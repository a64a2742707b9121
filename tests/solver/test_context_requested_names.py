"""The resource names the kept bound pods request are counted once per pod (``_Assumed``): a
fresh build counts them so (``place_many``), and a pod brought in or taken out by an update must
count alike, or a name no pod requests any more stays a column of the kept state, which a state
built afresh does not have."""

from __future__ import annotations

from models import ClusterSnapshot, SchedulerConfig
from solver.context import build_context
from solver.memory import SolverMemory
from tests.builders import make_node, make_pod


def test_a_resource_no_pod_requests_any_more_is_no_column_as_in_a_fresh_state() -> None:
    config = SchedulerConfig()
    nodes = [make_node(f"n{i}", cpu="8") for i in range(2)]
    base = [make_pod(f"default/p{i}", cpu="100m", node="n0") for i in range(3)]
    first = make_pod("default/first", cpu="100m", node="n0", requests={"example.com/dongle": 1})
    memory = SolverMemory()
    build_context(ClusterSnapshot.build(nodes=nodes, pods=[*base, first]), config, memory=memory)
    # A second pod requesting two of a resource no node has is bound (brought in by the update) ...
    odd = make_pod("default/odd", cpu="100m", node="n1", requests={"example.com/dongle": 2})
    with_odd = ClusterSnapshot.build(nodes=nodes, pods=[*base, first, odd])
    assert "example.com/dongle" in build_context(with_odd, config, memory=memory).state.resources
    # ... and both are deleted: the kept state must have the columns a fresh one has.
    after = ClusterSnapshot.build(nodes=nodes, pods=list(base))
    kept = build_context(after, config, memory=memory)
    fresh = build_context(after, config)
    assert sorted(kept.state.resources) == sorted(fresh.state.resources)

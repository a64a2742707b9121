"""The proof plugin (``tests/proof_plugin``, CrewRack) in the live scheduler, registered with one
line: the crew's pods are decided together (its coupling makes the queue wait for peers), bound
on one rack, and each carries the annotation its PreBind wrote before the bind; the validator's
replay of the binds, with the plugin's check, finds nothing."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from solver.plugins import registry
from tests.adapters.live_harness import Cluster, cluster_factory, fast_options, node, pod, wait_for
from tests.proof_plugin import PLUGIN
from tests.proof_plugin.rule import CREW, PLACED, RACK


def rack_node(name: str, rack: str | None, cpu: str) -> dict[str, Any]:
    obj = node(name, cpu=cpu)
    if rack:
        obj["metadata"]["labels"][RACK] = rack
    return obj


def crew_pod(name: str, crew: str) -> dict[str, Any]:
    obj = pod(name, cpu="1")
    obj["metadata"]["annotations"] = {CREW: crew}
    return obj


@pytest.fixture
def cluster() -> Iterator[Any]:
    with registry.registered(PLUGIN):
        yield from cluster_factory([rack_node("r1-a", "r1", "2"), rack_node("r2-a", "r2", "3"),
                                    rack_node("r2-b", "r2", "3"), rack_node("free", None, "16")])


@pytest.mark.parametrize("engine", ["greedy", "cpsat"])
def test_a_crew_is_bound_on_one_rack_with_the_prebind_annotation(cluster, engine) -> None:
    c: Cluster = cluster()
    c.scheduler(options=fast_options(engine=engine))
    names = [f"db-{i}" for i in range(3)]
    c.create(*(crew_pod(n, "db") for n in names), pod("plain", cpu="1"))
    assert wait_for(lambda: all(c.node_of(n) for n in [*names, "plain"]), timeout=20)
    assert {c.node_of(n) for n in names} <= {"r2-a", "r2-b"}  # only r2 holds all three
    for n in names:
        pod_obj = c.pod(n)
        assert pod_obj is not None and pod_obj["metadata"]["annotations"][PLACED] == "r2"
    plain = c.pod("plain")
    assert plain is not None and PLACED not in (plain["metadata"].get("annotations") or {})
    assert c.violations() == []


def test_a_refused_prebind_write_leaves_the_pod_unbound_until_it_succeeds(cluster) -> None:
    """The API server refuses the PreBind patch: the pod is not bound, the event names the
    plugin, and once the server takes writes again the pod is bound with its annotation."""
    c: Cluster = cluster()
    c.server.faults.fail("PATCH", r"/pods/solo$", status=403, count=None, message="patching is off")
    c.scheduler(options=fast_options())
    c.create(crew_pod("solo", "db"))
    assert wait_for(lambda: any("running PreBind plugin \"CrewRack\"" in (e.get("message") or "")
                                for e in c.events("FailedScheduling")), timeout=10)
    assert c.node_of("solo") is None
    c.server.faults.clear()
    assert wait_for(lambda: c.node_of("solo"), timeout=20)
    solo = c.pod("solo")
    assert solo is not None and solo["metadata"]["annotations"][PLACED] in ("r1", "r2")

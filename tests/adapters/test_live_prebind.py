"""The rules' PreBind in the live scheduler (``adapters/live/prebind.py``): every kind of record a
rule may declare has its writer, the built-in rules declare theirs through ``Plugin.prebind`` in
registry order, and a refused write sends the pod back unbound with kube-scheduler's event."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from adapters.live.prebind import WRITERS
from models import SchedulerConfig
from solver import schedule
from solver.plugin_api import BindWrite
from solver.plugins import registry
from tests.adapters.live_harness import Cluster, cluster_factory, fast_options, node, pod, wait_for
from tests.adapters.test_live_volumes import claim, mounting, storage_class
from tests.builders import make_node, make_pod, make_snapshot


def test_every_kind_of_record_has_a_writer() -> None:
    kinds = set(BindWrite.__subclasses__())
    assert kinds and kinds <= set(WRITERS)


def test_prebinds_run_in_registry_order_and_a_plain_pod_writes_nothing() -> None:
    """The built-in PreBinds (VolumeBinding's, DynamicResources') come through the registry in
    ``PLUGINS`` order; a pod with neither volumes nor claims gets no record."""
    snapshot = make_snapshot([make_node("n1")], [make_pod("default/plain")])
    plan = schedule(snapshot, SchedulerConfig(), engine="greedy")
    writes = registry.prebinds(plan, snapshot)
    plain = snapshot.pods[0]
    assert writes(plain, plain, snapshot.nodes[0]) == []
    names = [p for p, _ in registry.PREBINDS]
    assert names == [p.name for p in registry.PLUGINS if p.prebind is not None]
    assert names.index("VolumeBinding") < names.index("DynamicResources")


@pytest.fixture
def cluster() -> Iterator[Any]:
    yield from cluster_factory([node("n-a", zone="a"), storage_class("zonal", "disk.csi.example.com"),
                                claim("scratch", "zonal")])


def test_a_refused_volume_write_leaves_the_pod_unbound_with_the_prebind_event(cluster) -> None:
    c: Cluster = cluster()
    c.server.faults.fail("PATCH", r"/persistentvolumeclaims/scratch$", status=403, count=None, message="no writes")
    c.scheduler(options=fast_options())
    c.create(mounting("user", "scratch"), pod("plain", cpu="100m"))
    assert wait_for(lambda: any("running PreBind plugin \"VolumeBinding\"" in (e.get("message") or "")
                                for e in c.events("FailedScheduling")), timeout=10)
    assert c.node_of("user") is None
    assert wait_for(lambda: c.node_of("plain"), timeout=10)
    c.server.faults.clear()
    assert wait_for(lambda: c.node_of("user"), timeout=20)

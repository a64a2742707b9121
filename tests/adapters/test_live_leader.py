"""Leader election on a coordination.k8s.io/v1 Lease, with two scheduler instances.

Only the lease holder binds; the standby keeps its cache warm and takes over when the leader
stops — at once when the leader releases the lease on a clean shutdown, after the lease
duration when it just disappears. A leader that cannot renew stops scheduling within the renew
deadline. Durations are shortened (2 s lease, 1 s renew deadline, 0.1 s retry).
"""

from __future__ import annotations

import time
from typing import Any, Iterator

import pytest

from adapters.live.clock import ManualClock
from adapters.live.api_client import KubeApi, configured_client
from adapters.live.leader import LeaderElector, LeaseSettings
from tests.adapters.live_harness import NS, Cluster, fast_options, live_threads, node, pod, wait_for

LEASE_PATH = rf"/namespaces/{NS}/leases/cpsat-scheduler$"


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    c = Cluster([node("n1"), node("n2")])
    yield c
    c.close()
    assert wait_for(lambda: not live_threads(), timeout=5.0), live_threads()


def elected(**overrides: Any) -> Any:
    return fast_options(leader_elect=True, **overrides)


# For the hand-over timings: a lease long enough that "at once" and "after the lease ran out"
# stay apart on a loaded machine. A standby counts a lease's life from the last change it saw,
# which can trail the leader's stop by up to the renew deadline: it takes over no sooner than
# duration - renew deadline (3 s) after a crash.
def handover() -> LeaseSettings:   # a settings object per candidate: each makes its own identity
    return LeaseSettings(namespace=NS, duration=4.0, renew_deadline=1.0, retry_period=0.1)


def lease_holder(cluster: Cluster) -> str:
    lease = cluster.server.store.get("leases", NS, "cpsat-scheduler") or {}
    return (lease.get("spec") or {}).get("holderIdentity") or ""


def binds_by(sched: Any) -> float:
    return sched.metrics.binds.labels(result="bound")._value.get()


def test_only_the_leader_binds(cluster: Cluster) -> None:
    a, b = cluster.scheduler(options=elected()), cluster.scheduler(options=elected())
    assert wait_for(lambda: a.elector.is_leader() != b.elector.is_leader())
    leader, standby = (a, b) if a.elector.is_leader() else (b, a)
    assert lease_holder(cluster) == leader.elector.identity
    cluster.create(*[pod(f"p{i}") for i in range(6)])
    assert wait_for(lambda: len(cluster.bound()) == 6)
    assert wait_for(lambda: binds_by(leader) == 6)  # counted once the bind call has returned
    assert binds_by(standby) == 0
    assert standby.ready() == (True, "ok (standby)") and leader.ready() == (True, "ok (leader)")
    assert cluster.double_binds() == []


def test_clean_stop_hands_over_at_once(cluster: Cluster) -> None:
    a, b = cluster.scheduler(options=elected(lease=handover())), cluster.scheduler(options=elected(lease=handover()))
    assert wait_for(lambda: a.elector.is_leader() or b.elector.is_leader())
    leader, standby = (a, b) if a.elector.is_leader() else (b, a)
    leader.stop()  # releases the lease
    assert lease_holder(cluster) in ("", standby.elector.identity)
    start = time.monotonic()
    assert wait_for(lambda: standby.elector.is_leader(), timeout=10.0)
    assert time.monotonic() - start < 2.5  # a retry period or so, not the 3-4 s of a lease running out
    cluster.create(pod("after-failover"))
    assert wait_for(lambda: cluster.node_of("after-failover"))
    assert wait_for(lambda: binds_by(standby) == 1)


def test_crashed_leader_is_replaced_after_the_lease_expires(cluster: Cluster) -> None:
    a, b = cluster.scheduler(options=elected(lease=handover())), cluster.scheduler(options=elected(lease=handover()))
    assert wait_for(lambda: a.elector.is_leader() or b.elector.is_leader())
    leader, standby = (a, b) if a.elector.is_leader() else (b, a)
    start = time.monotonic()
    leader.stop(release_lease=False)  # gone without a word: the lease must expire first
    assert lease_holder(cluster) == leader.elector.identity
    assert wait_for(lambda: standby.elector.is_leader(), timeout=15.0)
    assert time.monotonic() - start >= 2.9  # it waited for the lease (4 s) to run out
    cluster.create(pod("after-crash"))
    assert wait_for(lambda: cluster.node_of("after-crash"))


def test_a_leader_that_cannot_renew_stops_scheduling(cluster: Cluster) -> None:
    sched = cluster.scheduler(options=elected())
    assert wait_for(sched.elector.is_leader)
    cluster.server.faults.fail("PUT", LEASE_PATH, status=500, count=None)
    assert wait_for(lambda: not sched.elector.is_leader(), timeout=10.0)
    cluster.create(pod("while-not-leading"))
    time.sleep(0.3)
    assert cluster.node_of("while-not-leading") is None
    assert sched.metrics.leader._value.get() == 0
    cluster.server.faults.clear()
    assert wait_for(sched.elector.is_leader, timeout=10.0)
    assert wait_for(lambda: cluster.node_of("while-not-leading"))


def test_leadership_ends_at_the_renew_deadline_even_if_the_elector_is_stuck(cluster: Cluster) -> None:
    # The elector thread is never started: is_leader() must still turn false on its own clock.
    clock = ManualClock()
    api = KubeApi(configured_client(cluster.server.client_configuration()))
    try:
        elector = LeaderElector(api, LeaseSettings(namespace=NS, duration=15, renew_deadline=10, retry_period=2),
                                clock=clock)
        assert elector._try_acquire_or_renew()
        elector._last_renew = clock.now()
        elector._leading.set()
        assert elector.is_leader()
        clock.advance(9.9)
        assert elector.is_leader()
        clock.advance(0.2)
        assert not elector.is_leader()
    finally:
        api.close()


def test_a_held_lease_is_not_taken_before_it_expires(cluster: Cluster) -> None:
    clock = ManualClock()
    api = KubeApi(configured_client(cluster.server.client_configuration()))
    try:
        settings = dict(namespace=NS, duration=15, renew_deadline=10, retry_period=2)
        first = LeaderElector(api, LeaseSettings(identity="first", **settings), clock=clock)
        second = LeaderElector(api, LeaseSettings(identity="second", **settings), clock=clock)
        assert first._try_acquire_or_renew()
        assert not second._try_acquire_or_renew()  # observed now, held by "first"
        clock.advance(14.0)
        assert not second._try_acquire_or_renew()
        clock.advance(1.5)  # 15.5 s since second saw it change: expired
        assert second._try_acquire_or_renew()
        assert lease_holder(cluster) == "second"
        lease = cluster.server.store.get("leases", NS, "cpsat-scheduler")
        assert lease["spec"]["leaseTransitions"] == 1 and lease["spec"]["leaseDurationSeconds"] == 15
        assert not first._try_acquire_or_renew()  # its next renewal finds someone else's fresh lease
    finally:
        api.close()

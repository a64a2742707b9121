"""The live scheduler end to end: real HTTP, the official client, the in-memory API server.

Each test starts an API server with a few nodes, runs the unchanged scheduler against it and
checks what a cluster would show: pods bound (and never twice), the final state accepted by
the plan validator, events, conditions, metrics and health endpoints, and recovery from
conflicts, dropped watches and expired resourceVersions.
"""

from __future__ import annotations

import logging
import threading
import urllib.request
from typing import Any, Callable, Iterator

import pytest

from adapters.live.cache import DRY_RUN
from tests.adapters.live_harness import (
    cluster_factory,
    NS,
    Cluster,
    fast_config,
    fast_options,
    live_threads,
    node,
    pod,
    pod_group,
    wait_for,
)

NODES = [node("n1"), node("n2"), node("n3", zone="b")]


@pytest.fixture
def make_cluster() -> Iterator[Callable[..., Cluster]]:
    yield from cluster_factory(NODES)


@pytest.mark.parametrize("engine", ["cpsat", "greedy"])
def test_pods_created_after_start_are_bound_and_nothing_is_double_booked(make_cluster: Callable[..., Cluster],
                                                                         engine: str) -> None:
    # Three nodes of 4 CPU; 22 pods of 500m fit exactly 24 slots minus what two running pods take.
    cluster = make_cluster(NODES + [pod("running-1", cpu="500m", node_name="n1", running=True, scheduler="other"),
                                    pod("running-2", cpu="500m", node_name="n2", running=True, scheduler="other")])
    cluster.scheduler(fast_config(), fast_options(engine=engine))
    cluster.create(*[pod(f"web-{i}", cpu="500m", labels={"app": "web"}) for i in range(22)])
    assert wait_for(lambda: len(cluster.bound()) == 24)
    cluster.create(pod("one-too-many", cpu="500m"))
    assert wait_for(lambda: cluster.events("FailedScheduling"))
    assert cluster.node_of("one-too-many") is None
    assert cluster.double_binds() == []
    assert cluster.violations() == []


def test_other_schedulers_pods_are_left_alone(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster()
    sched = cluster.scheduler()
    cluster.create(pod("theirs", scheduler="default-scheduler"), pod("ours"))
    assert wait_for(lambda: cluster.node_of("ours"))
    assert cluster.node_of("theirs") is None
    assert sched.queue.where(f"{NS}/theirs") is None


def test_events_and_condition_say_what_happened(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster([node("n1", cpu="1")])
    cluster.scheduler()
    cluster.create(pod("fits", cpu="500m"), pod("too-big", cpu="2"))
    assert wait_for(lambda: cluster.events("Scheduled") and cluster.events("FailedScheduling"))
    scheduled = cluster.events("Scheduled")[0]
    assert scheduled["message"] == "Successfully assigned default/fits to n1"
    assert scheduled["involvedObject"]["name"] == "fits" and scheduled["type"] == "Normal"
    assert scheduled["source"]["component"] == "cpsat-scheduler"
    failed = cluster.events("FailedScheduling")[0]
    assert failed["involvedObject"]["name"] == "too-big" and failed["type"] == "Warning"
    assert failed["message"] == ("0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are "
                                 "available: 1 Preemption is not helpful for scheduling.")
    condition = wait_for(lambda: [c for c in (cluster.pod("too-big")["status"].get("conditions") or [])
                                  if c["type"] == "PodScheduled"])
    assert condition[0]["status"] == "False" and condition[0]["reason"] == "Unschedulable"
    assert condition[0]["message"] == failed["message"]


def test_unschedulable_pod_is_bound_once_a_node_arrives(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster([node("small", cpu="1")])
    sched = cluster.scheduler()
    cluster.create(pod("big", cpu="2"))
    assert wait_for(lambda: sched.queue.where(f"{NS}/big") == "unschedulable")
    cluster.create(node("large", cpu="8"))  # a relevant event: the pod is retried at once
    assert wait_for(lambda: cluster.node_of("big") == "large")


def test_bind_conflict_requeues_and_the_pod_ends_bound(make_cluster: Callable[..., Cluster],
                                                       caplog: pytest.LogCaptureFixture) -> None:
    cluster = make_cluster()
    sched = cluster.scheduler()
    cluster.server.faults.fail("POST", r"/pods/conflicted/binding$", status=409, count=2)
    with caplog.at_level(logging.INFO, logger="adapters.live"):
        cluster.create(pod("conflicted"))
        assert wait_for(lambda: cluster.node_of("conflicted"))
    assert cluster.server.faults.injected["fail"] == 2
    assert "bind of default/conflicted to" in caplog.text and "retrying after backoff" in caplog.text
    assert wait_for(lambda: not sched.cache.assumed())
    assert sched.metrics.binds.labels(result="error")._value.get() == 2
    # both failed binds told (a repeat still queued is folded into its count), by a background
    # writer: they may trail the successful bind
    assert wait_for(lambda: sum(e.get("count", 1) for e in cluster.events("FailedScheduling")) == 2)
    rejected = [e["message"] for e in cluster.events("FailedScheduling")]
    assert all(m.startswith("Binding rejected: bind default/conflicted to ") for m in rejected), rejected
    assert cluster.double_binds() == []


def test_bind_answer_lost_but_pod_bound_counts_as_success(make_cluster: Callable[..., Cluster]) -> None:
    # The connection drops after the server bound the pod; the retry gets a 409 for our own
    # bind, and reading the pod back shows it on our node: success, not a requeue.
    cluster = make_cluster([node("n1")])
    sched = cluster.scheduler()
    handle = cluster.server.api.handle
    cut = {"left": 1}

    def bind_then_cut(request: Any) -> Any:
        answer = handle(request)
        if request.path.endswith("/lost/binding") and cut["left"]:
            cut["left"] -= 1
            cluster.server.faults.disconnect("POST", r"/lost/binding$")  # the *next* one is cut...
            raise ConnectionResetError  # ...and this answer never arrives
        return answer

    cluster.server.api.handle = bind_then_cut  # type: ignore[method-assign]
    cluster.create(pod("lost"))
    assert wait_for(lambda: cluster.events("Scheduled"))
    assert cluster.node_of("lost") == "n1"
    assert sched.metrics.binds.labels(result="bound")._value.get() == 1
    assert sched.queue.where(f"{NS}/lost") is None
    assert cluster.double_binds() == []


def test_pod_deleted_before_its_bind_is_dropped(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster()
    sched = cluster.scheduler()
    cluster.server.faults.delay("POST", r"/binding$", seconds=0.3, count=1)
    cluster.create(pod("short-lived"))
    assert wait_for(lambda: sched.cache.is_assumed(f"{NS}/short-lived"))
    cluster.core.delete_namespaced_pod("short-lived", NS)
    assert wait_for(lambda: not sched.cache.assumed() and sched.idle())
    assert sched.queue.keys() == set()


def test_watch_drop_and_expired_version_lose_no_pod(make_cluster: Callable[..., Cluster],
                                                    caplog: pytest.LogCaptureFixture) -> None:
    cluster = make_cluster()
    sched = cluster.scheduler()
    with caplog.at_level(logging.INFO, logger="adapters.live"):
        cluster.create(pod("before"))
        assert wait_for(lambda: cluster.node_of("before"))
        # Watches cut, and pods created while they are down: resumed from the last version.
        cluster.server.faults.fail("GET", r"/pods$", watch=True, status=500, count=3)
        assert cluster.server.faults.drop_watches() >= 5
        cluster.create(pod("during-drop"))
        assert wait_for(lambda: cluster.node_of("during-drop"))
        # History compacted while the watches are down: resuming gets 410, the informer relists.
        cluster.server.faults.fail("GET", r"/pods$", watch=True, status=503, count=2)
        cluster.server.faults.drop_watches()
        cluster.create(pod("during-compaction"))
        cluster.server.faults.compact()
        assert wait_for(lambda: cluster.node_of("during-compaction"))
    assert "watch of pods failed" in caplog.text and "reconnecting in" in caplog.text
    assert "watch of pods expired" in caplog.text and "listing again" in caplog.text
    assert sched.metrics.watch_restarts.labels(resource="pods", reason="expired")._value.get() >= 1
    assert cluster.double_binds() == []


def test_relist_sees_deletions_missed_while_disconnected(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster([node("n1", cpu="1")])
    sched = cluster.scheduler()
    cluster.create(pod("blocker", cpu="1"), pod("waiting", cpu="1"))
    assert wait_for(lambda: cluster.node_of("blocker") and sched.queue.where(f"{NS}/waiting") == "unschedulable")
    cluster.server.faults.fail("GET", r"/pods$", watch=True, status=500, count=5)
    cluster.server.faults.drop_watches()
    cluster.core.delete_namespaced_pod("blocker", NS, grace_period_seconds=0)
    cluster.server.faults.compact()  # the DELETED event is gone from history: only a relist shows it
    assert wait_for(lambda: cluster.node_of("waiting") == "n1")
    assert cluster.violations() == []


def test_api_server_restart(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster()
    cluster.scheduler()
    cluster.create(pod("a"))
    assert wait_for(lambda: cluster.node_of("a"))
    cluster.server.faults.restart(keep_store=True, down_seconds=0.2)
    cluster.create(pod("b"))
    assert wait_for(lambda: cluster.node_of("b"))
    assert cluster.double_binds() == []


def test_dry_run_decides_but_writes_nothing(make_cluster: Callable[..., Cluster],
                                            caplog: pytest.LogCaptureFixture) -> None:
    cluster = make_cluster()
    writes: list[str] = []
    handle = cluster.server.api.handle

    def recording(request: Any) -> Any:
        if request.method != "GET":
            writes.append(f"{request.method} {request.path}")
        return handle(request)

    cluster.server.api.handle = recording  # type: ignore[method-assign]
    bound: list[str] = []
    with caplog.at_level(logging.INFO, logger="adapters.live"):
        sched = cluster.scheduler(options=fast_options(dry_run=True, leader_elect=True),
                                  on_bound=lambda p: bound.append(p.key))
        before = len(writes)
        cluster.create(pod("p1"), pod("p2"), pod("huge", cpu="64"))
        assert wait_for(lambda: len(bound) == 2 and sched.queue.where(f"{NS}/huge") == "unschedulable")
    assert [w for w in writes[before:] if "/binding" in w or "/eviction" in w or "events" in w
            or "leases" in w or "/status" in w] == []
    assert cluster.bound() == {}
    assert "dry run: would bind default/p1" in caplog.text
    assert {a.state for a in sched.cache.assumed().values()} == {DRY_RUN}  # later windows see them placed


def test_gang_binds_whole_or_not_at_all(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster([node("n1", cpu="2"), node("n2", cpu="2"), pod_group("train", 4), pod_group("big", 3)])
    cluster.scheduler(fast_config(), fast_options(engine="cpsat", window_wait=0.2))
    cluster.create(*[pod(f"train-{i}", cpu="1", gang="train") for i in range(4)])
    assert wait_for(lambda: all(cluster.node_of(f"train-{i}") for i in range(4)))
    # No room for a gang of three: none of its members is bound, every one says why.
    cluster.create(*[pod(f"big-{i}", cpu="1", gang="big") for i in range(3)])
    assert wait_for(lambda: len({e["involvedObject"]["name"] for e in cluster.events("FailedScheduling")}) == 3)
    assert [cluster.node_of(f"big-{i}") for i in range(3)] == [None, None, None]
    assert cluster.violations() == []


def test_gang_waits_for_its_last_member(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster([node("n1"), pod_group("job", 3)])
    sched = cluster.scheduler()
    cluster.create(pod("job-0", gang="job"), pod("job-1", gang="job"))
    assert wait_for(lambda: sched.queue.where(f"{NS}/job-1") == "unschedulable")
    assert cluster.bound() == {}
    cluster.create(pod("job-2", gang="job"))  # the last sibling arrives: the gang is tried again
    assert wait_for(lambda: all(cluster.node_of(f"job-{i}") for i in range(3)))


def test_gang_partly_bound_is_reported_and_the_rest_retried(make_cluster: Callable[..., Cluster],
                                                            caplog: pytest.LogCaptureFixture) -> None:
    cluster = make_cluster([node("n1"), pod_group("pair", 2)])
    sched = cluster.scheduler()
    cluster.server.faults.fail("POST", r"/pods/pair-1/binding$", status=500, count=3)  # outlasts the retries
    with caplog.at_level(logging.WARNING, logger="adapters.live"):
        cluster.create(pod("pair-0", gang="pair"), pod("pair-1", gang="pair"))
        assert wait_for(lambda: cluster.node_of("pair-0") and cluster.node_of("pair-1"))
    assert "gang default/pair is partly bound: 1 of 2 members bound" in caplog.text
    assert sched.metrics.gang_partial._value.get() == 1
    assert wait_for(lambda: any("partly bound" in e["message"] and e["involvedObject"]["name"] == "pair-1"
                                for e in cluster.events("FailedScheduling")))   # written in the background


def test_metrics_health_and_readiness(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster()
    sched = cluster.scheduler(options=fast_options(metrics_addr=("127.0.0.1", 0), engine="cpsat", quick_window=0))
    cluster.create(pod("p"), pod("huge", cpu="64"))
    assert wait_for(lambda: cluster.node_of("p") and sched.queue.where(f"{NS}/huge") == "unschedulable")
    assert wait_for(lambda: sched.metrics.attempts.labels(result="scheduled")._value.get() == 1)
    host, port = sched.status_address  # type: ignore[misc]
    assert host == "127.0.0.1"

    def get(path: str) -> tuple[int, str]:
        return get_status(sched, path)

    assert get("/healthz") == (200, "ok")
    assert get("/readyz") == (200, "ok (leader)")
    sched.update_gauges()
    code, text = get("/metrics")
    assert code == 200
    for line in ('cpsat_scheduler_schedule_attempts_total{result="scheduled"} 1.0',
                 'cpsat_scheduler_schedule_attempts_total{result="unschedulable"}',
                 'cpsat_scheduler_pending_pods{queue="unschedulable"} 1.0',
                 'cpsat_scheduler_pending_pods{queue="active"} 0.0',
                 "cpsat_scheduler_e2e_scheduling_duration_seconds_count 1.0",
                 'cpsat_scheduler_solver_duration_seconds_count{engine="cpsat"}',
                 'cpsat_scheduler_solver_status_total{status="OPTIMAL"}',
                 "cpsat_scheduler_solver_fallbacks_total 0.0",
                 "cpsat_scheduler_preemption_victims_total 0.0",
                 "cpsat_scheduler_window_size_count",
                 "cpsat_scheduler_is_leader 1.0"):
        assert line in text, line
    assert get("/nope")[0] == 404


def get_status(sched: Any, path: str) -> tuple[int, str]:
    host, port = sched.status_address
    try:
        with urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=2) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        with err:
            return err.code, err.read().decode()


def test_a_hung_window_fails_liveness_and_recovers(make_cluster: Callable[..., Cluster]) -> None:
    # The loop still runs but never finishes its window (a call that never returns): /healthz must
    # say so once the stall timeout is past, so kubelet restarts the scheduler, and say ok again
    # if the window ends after all.
    cluster = make_cluster()
    release = threading.Event()
    sched = cluster.scheduler(options=fast_options(metrics_addr=("127.0.0.1", 0), stall_timeout=0.5))
    decide = sched.decide

    def hang_then_decide(snapshot: Any, window: Any) -> Any:
        release.wait(30)
        return decide(snapshot, window)

    sched.decide = hang_then_decide  # type: ignore[method-assign]
    cluster.create(pod("p"))
    assert wait_for(lambda: get_status(sched, "/healthz")[0] == 500)
    code, text = get_status(sched, "/healthz")
    assert text.startswith("the scheduling loop has been on one window for ") and "(phase decide)" in text
    assert text.endswith("past the stall timeout of 0.5s")
    assert get_status(sched, "/readyz") == (200, "ok (leader)")  # readiness is not liveness
    release.set()
    assert wait_for(lambda: cluster.node_of("p"))
    assert wait_for(lambda: get_status(sched, "/healthz") == (200, "ok"))


def test_a_dead_watch_fails_liveness(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster()
    sched = cluster.scheduler(options=fast_options(metrics_addr=("127.0.0.1", 0)))
    assert get_status(sched, "/healthz") == (200, "ok")
    informer = next(i for i in sched.informers if i.resource.name == "nodes")
    informer._run = lambda: None  # type: ignore[method-assign]  # the next start exits at once, as a crash would
    informer.start()
    assert wait_for(lambda: get_status(sched, "/healthz") == (500, "the watch of nodes has stopped"))


def test_stop_finishes_binds_in_flight_and_leaves_nothing_behind(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster()
    sched = cluster.scheduler()
    cluster.server.faults.delay("POST", r"/binding$", seconds=0.3)
    cluster.create(*[pod(f"p{i}") for i in range(3)])
    assert wait_for(lambda: len(sched.cache.assumed()) == 3)
    sched.stop()  # returns once the slow binds are done
    assert len(cluster.bound()) == 3
    assert cluster.double_binds() == []
    assert not [t for t in live_threads() if t.startswith("cpsat-live")]


def test_light_load_windows_are_quick_and_coupled_ones_go_to_the_engine(make_cluster: Callable[..., Cluster]) -> None:
    # Two pods on their own: scheduleOne decides them at once, whatever the engine. A gang needs
    # a joint decision: CP-SAT decides it. Every plan is bound and the final state is valid.
    cluster = make_cluster([node("n1", cpu="4"), node("n2", cpu="4"), pod_group("job", 2)])
    sched = cluster.scheduler(fast_config(), fast_options(engine="cpsat", window_wait=0.2))
    cluster.create(pod("web-0"), pod("web-1"))
    assert wait_for(lambda: cluster.node_of("web-0") and cluster.node_of("web-1"))
    statuses = sched.metrics.solver_status
    assert statuses.labels(status="GREEDY")._value.get() >= 1
    assert sched.metrics.solver_latency.labels(engine="cpsat")._sum.get() == 0
    cluster.create(pod("job-0", gang="job"), pod("job-1", gang="job"))
    assert wait_for(lambda: cluster.node_of("job-0") and cluster.node_of("job-1"))
    assert sched.metrics.solver_latency.labels(engine="cpsat")._sum.get() > 0
    assert cluster.violations() == []


def _backlog(make_cluster: Callable[..., Cluster], extra: list[dict[str, Any]], **options: Any) -> Any:
    """Six independent pods (and ``extra``) waiting before the scheduler starts: one window of
    more than the quick window's two pods."""
    cluster = make_cluster()
    cluster.create(*[pod(f"web-{i}", cpu="500m") for i in range(6)], *extra)
    sched = cluster.scheduler(fast_config(), fast_options(engine="cpsat", quick_window=2, **options))
    assert wait_for(lambda: all(cluster.node_of(f"web-{i}") for i in range(6)))
    assert cluster.violations() == []
    return sched


def status_count(sched: Any, status: str) -> float:
    return sched.metrics.solver_status.labels(status=status)._value.get()


def test_a_backlog_window_scheduleone_places_whole_is_bound_as_it_decided(make_cluster: Callable[..., Cluster]) -> None:
    sched = _backlog(make_cluster, [])
    assert status_count(sched, "GREEDY") >= 1 and status_count(sched, "OPTIMAL") == 0


def test_a_backlog_window_scheduleone_leaves_pods_out_of_goes_to_the_model(make_cluster: Callable[..., Cluster]) -> None:
    sched = _backlog(make_cluster, [pod("huge", cpu="64")])
    assert wait_for(lambda: sched.queue.where(f"{NS}/huge") == "unschedulable")
    assert status_count(sched, "OPTIMAL") >= 1


def test_without_greedy_whole_windows_every_large_window_goes_to_the_model(make_cluster: Callable[..., Cluster]) -> None:
    sched = _backlog(make_cluster, [], greedy_whole=False)
    assert status_count(sched, "OPTIMAL") >= 1 and status_count(sched, "GREEDY") == 0


def test_a_running_scheduler_shortens_the_switch_interval_and_gives_it_back(make_cluster: Callable[..., Cluster]) -> None:
    # A pod passes through the watch, loop, bind and event threads; each hand-over may wait a
    # whole switch interval behind a busy thread, so the scheduler runs with a shorter one.
    import sys

    before = sys.getswitchinterval()
    cluster = make_cluster()
    sched = cluster.scheduler(options=fast_options(switch_interval=0.002))
    assert sys.getswitchinterval() == pytest.approx(0.002)
    cluster.create(pod("quick"))
    assert wait_for(lambda: cluster.node_of("quick"))
    sched.stop()
    assert sys.getswitchinterval() == pytest.approx(before)


def test_the_interpreter_settings_last_until_the_last_scheduler_stops(make_cluster: Callable[..., Cluster]) -> None:
    # Two replicas in one process (as the leader-election tests run them): the first to stop
    # leaves the settings to the one still running; the last gives back the process's own.
    import gc
    import sys

    before, thresholds = sys.getswitchinterval(), gc.get_threshold()
    cluster = make_cluster()
    first = cluster.scheduler(options=fast_options(switch_interval=0.002))
    second = cluster.scheduler(options=fast_options(switch_interval=0.002))
    assert gc.get_threshold()[0] > thresholds[0]
    first.stop()
    assert sys.getswitchinterval() == pytest.approx(0.002) and gc.get_threshold()[0] > thresholds[0]
    second.stop()
    assert sys.getswitchinterval() == pytest.approx(before) and gc.get_threshold() == thresholds


def test_debug_log_breaks_each_pods_latency_down(make_cluster: Callable[..., Cluster],
                                                 caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="adapters.live")
    cluster = make_cluster()
    cluster.scheduler()
    cluster.create(pod("traced"))
    assert wait_for(lambda: cluster.node_of("traced"))
    line = wait_for(lambda: next((r.getMessage() for r in caplog.records
                                  if r.getMessage().startswith(f"latency of {NS}/traced:")), None))
    assert "ms in the queue" in line and "the bind call" in line and "(monotonic)" in line
    # the window's line is logged after its bind is handed to the pool, so it may trail the bind's
    window = wait_for(lambda: next((r.getMessage() for r in caplog.records
                                    if r.getMessage().startswith("window of 1 pods:")), None))
    assert window and "collector so far" in window

"""Preemption through the Eviction API, end to end against the in-memory API server.

A high-priority pod that fits nowhere gets room by evicting lower-priority pods: its
`status.nominatedNodeName` is set, the victims are evicted through `pods/eviction` (so the API
server enforces PodDisruptionBudgets, answering 429 when a budget forbids it), each victim gets a
`Preempted` event, and the preemptor is bound on the nominated node only once its victims are
gone. A refused eviction gives the room back and the preemptor backs off and tries again.
"""

from __future__ import annotations

import logging
import threading
import traceback
from typing import Any, Callable, Iterator, Optional

import pytest

from tests.adapters.live_harness import (
    cluster_factory,
    NS,
    Cluster,
    fast_config,
    fast_options,
    node,
    pdb,
    pod,
    priority_class,
    wait_for,
)


def cluster_with_victims(extra: list[dict[str, Any]] = ()) -> list[dict[str, Any]]:  # type: ignore[assignment]
    return [node("n1", cpu="2"), priority_class("low", 10), priority_class("high", 1000),
            pod("low-0", cpu="1", priority_class="low", node_name="n1", running=True, labels={"app": "batch"}),
            pod("low-1", cpu="1", priority_class="low", node_name="n1", running=True, labels={"app": "batch"}),
            *extra]


@pytest.fixture
def make_cluster() -> Iterator[Callable[..., Cluster]]:
    yield from cluster_factory()


def _order_recorder(cluster: Cluster) -> list[tuple[str, str]]:
    """(what, pod) in the order the API server committed it: deletions and binds."""
    seen: list[tuple[str, str]] = []

    def record(key: str, event: str, obj: dict[str, Any], prev: Any) -> None:
        if key != "pods":
            return
        name = obj["metadata"]["name"]
        if event == "DELETED":
            seen.append(("deleted", name))
        elif prev is not None and obj["spec"].get("nodeName") and not prev["spec"].get("nodeName"):
            seen.append(("bound", name))

    cluster.server.store.add_listener(record)
    return seen


@pytest.mark.parametrize("engine", ["cpsat", "greedy"])
def test_victims_are_evicted_and_the_preemptor_bound_on_the_nominated_node(make_cluster: Callable[..., Cluster],
                                                                           engine: str) -> None:
    cluster = make_cluster(cluster_with_victims())
    order = _order_recorder(cluster)
    patches: list[dict[str, Any]] = []
    handle = cluster.server.api.handle

    def recording(request: Any) -> Any:
        if request.method == "PATCH" and request.path.endswith("/pods/high/status"):
            import json

            patches.append(json.loads(request.body))
        return handle(request)

    cluster.server.api.handle = recording  # type: ignore[method-assign]
    sched = cluster.scheduler(fast_config(), fast_options(engine=engine))
    cluster.create(pod("high", cpu="2", priority_class="high"))
    assert wait_for(lambda: cluster.node_of("high") == "n1")
    assert {"status": {"nominatedNodeName": "n1"}} in patches
    assert cluster.pod("low-0") is None and cluster.pod("low-1") is None
    assert order.index(("bound", "high")) > max(order.index(("deleted", "low-0")), order.index(("deleted", "low-1")))
    # events are written by a background writer, never ahead of a bind: they may trail it
    expected = [("low-0", "Preempted by pod default/high on node n1"),
                ("low-1", "Preempted by pod default/high on node n1")]
    wait_for(lambda: len(cluster.events("Preempted")) >= len(expected))
    assert sorted((e["involvedObject"]["name"], e["message"]) for e in cluster.events("Preempted")) == expected
    assert sched.metrics.preemption_victims._value.get() == 2
    assert wait_for(lambda: not sched.cache.assumed())
    assert cluster.violations() == []


def test_pods_a_budget_protects_are_not_chosen_as_victims(make_cluster: Callable[..., Cluster]) -> None:
    # The Eviction API would refuse them (429), so the live scheduler plans with hard budgets.
    cluster = make_cluster(cluster_with_victims([pdb("batch", min_available=2, app="batch")]))
    sched = cluster.scheduler()
    assert sched.config.preemption.pdb == "hard"
    cluster.create(pod("high", cpu="2", priority_class="high"))
    assert wait_for(lambda: sched.queue.where(f"{NS}/high") == "unschedulable")
    assert sched.metrics.evictions.labels(result="refused")._value.get() == 0
    assert cluster.pod("low-0") is not None and cluster.pod("low-1") is not None
    cluster.server.store.delete("poddisruptionbudgets", NS, "batch")  # the budget goes: room can be made
    assert wait_for(lambda: cluster.node_of("high") == "n1")


def test_a_budget_with_an_empty_selector_guards_its_whole_namespace(make_cluster: Callable[..., Cluster]) -> None:
    # policy/v1: `selector: {}` selects every pod of the namespace for the Eviction API. The
    # planner read it as kube-scheduler's preemption does (nothing covered) and evicted for
    # `high`; the validator refused that plan, and the window, `side` with it, was never bound.
    cluster = make_cluster(cluster_with_victims([node("n2", cpu="1"), pdb("everything", min_available=2)]))
    sched = cluster.scheduler()
    cluster.create(pod("high", cpu="2", priority_class="high"))
    cluster.create(pod("side", cpu="1", priority_class="low"))
    assert wait_for(lambda: cluster.node_of("side") == "n2")
    assert wait_for(lambda: sched.queue.where(f"{NS}/high") == "unschedulable")
    assert sched.metrics.evictions.labels(result="refused")._value.get() == 0
    assert cluster.pod("low-0") is not None and cluster.pod("low-1") is not None


def test_a_pod_two_budgets_select_is_not_chosen_as_a_victim(make_cluster: Callable[..., Cluster]) -> None:
    # The Eviction API answers 500 for a pod more than one budget selects, whatever they allow.
    budgets = [pdb("by-app", min_available=0, app="batch"), pdb("by-tier", min_available=0, tier="x")]
    cluster = make_cluster([node("n1", cpu="2"), node("n2", cpu="2"), priority_class("low", 10),
                            priority_class("mid", 500), priority_class("high", 1000),
                            pod("twice", cpu="2", priority_class="low", node_name="n1", running=True,
                                labels={"app": "batch", "tier": "x"}),
                            pod("once", cpu="2", priority_class="mid", node_name="n2", running=True,
                                labels={"app": "web", "tier": "x"}), *budgets])
    sched = cluster.scheduler()
    cluster.create(pod("high", cpu="2", priority_class="high"))
    assert wait_for(lambda: cluster.node_of("high") == "n2")
    assert cluster.pod("twice") is not None and cluster.pod("once") is None
    assert sched.metrics.evictions.labels(result="error")._value.get() == 0


def test_a_running_pod_its_budget_names_as_disrupted_is_not_chosen_as_a_victim(
        make_cluster: Callable[..., Cluster]) -> None:
    # `web-0` is in the budget's status.disruptedPods (a StatefulSet pod recreated under its name
    # within two minutes of an eviction): the budget counts it as gone and allows none. The
    # planner took it as a free victim, as kube-scheduler's preemption does; the Eviction API
    # does not read that map, and the validator refused every plan of the window.
    from adapters.apiserver.controllers import now_rfc3339

    budget = pdb("web", min_available=1, app="web")
    budget["status"] = {"disruptedPods": {"web-0": now_rfc3339()}}
    cluster = make_cluster([node("n1", cpu="2"), node("n2", cpu="2"), node("n3", cpu="1"),
                            priority_class("low", 10), priority_class("high", 1000),
                            pod("web-0", cpu="2", priority_class="low", node_name="n1", running=True,
                                labels={"app": "web"}),
                            pod("web-1", cpu="2", priority_class="low", node_name="n2", running=True,
                                labels={"app": "web"}),
                            budget])
    assert cluster.server.store.get("poddisruptionbudgets", NS, "web")["status"]["disruptionsAllowed"] == 0
    sched = cluster.scheduler()
    cluster.create(pod("high", cpu="2", priority_class="high"))
    cluster.create(pod("side", cpu="1", priority_class="low"))
    assert wait_for(lambda: cluster.node_of("side") == "n3")
    assert wait_for(lambda: sched.queue.where(f"{NS}/high") == "unschedulable")
    assert sched.metrics.invalid_plans._value.get() == 0
    assert sched.metrics.evictions.labels(result="refused")._value.get() == 0
    assert cluster.pod("web-0") is not None and cluster.pod("web-1") is not None


@pytest.mark.parametrize(("policy", "min_available"), [pytest.param("AlwaysAllow", 2, id="always-allow"),
                                                      pytest.param(None, 1, id="if-healthy-budget-healthy-enough")])
def test_a_running_pod_that_is_not_ready_goes_without_spending_its_budget(
        make_cluster: Callable[..., Cluster], policy: Optional[str], min_available: int) -> None:
    # `sick` runs but is not Ready; its budget allows no disruption. The Eviction API still lets
    # it go (the budget says AlwaysAllow, or the budget is healthy enough without it), so the
    # planner may take it: before, it charged the budget and `high` stayed pending.
    budget = pdb("web", min_available=min_available, app="web")
    if policy is not None:
        budget["spec"]["unhealthyPodEvictionPolicy"] = policy
    sick = pod("sick", cpu="2", priority_class="low", node_name="n1", running=True, labels={"app": "web"})
    sick["status"]["conditions"] = [{"type": "Ready", "status": "False", "reason": "ContainersNotReady"}]
    cluster = make_cluster([node("n1", cpu="2"), node("n2", cpu="2"), priority_class("low", 10),
                            priority_class("high", 1000), sick,
                            pod("well", cpu="2", priority_class="low", node_name="n2", running=True,
                                labels={"app": "web"}), budget])
    assert cluster.server.store.get("poddisruptionbudgets", NS, "web")["status"]["disruptionsAllowed"] == 0
    sched = cluster.scheduler()
    cluster.create(pod("high", cpu="2", priority_class="high"))
    assert wait_for(lambda: cluster.node_of("high") == "n1")
    assert cluster.pod("sick") is None and cluster.pod("well") is not None
    assert sched.metrics.evictions.labels(result="refused")._value.get() == 0


def test_refused_eviction_429_requeues_the_preemptor(make_cluster: Callable[..., Cluster],
                                                     caplog: pytest.LogCaptureFixture) -> None:
    cluster = make_cluster(cluster_with_victims())
    sched = cluster.scheduler()
    cluster.server.faults.fail("POST", r"/eviction$", status=429, count=None,
                               message="Cannot evict pod as it would violate the pod's disruption budget.")
    with caplog.at_level(logging.INFO, logger="adapters.live"):
        cluster.create(pod("high", cpu="2", priority_class="high"))
        assert wait_for(lambda: sched.metrics.evictions.labels(result="refused")._value.get() >= 2)
    assert "Cannot evict pod as it would violate the pod's disruption budget" in caplog.text
    assert "the pods counting on it back off" in caplog.text
    assert cluster.pod("low-0") is not None and cluster.pod("low-1") is not None  # nobody evicted
    assert cluster.node_of("high") is None
    assert wait_for(lambda: not sched.cache.is_evicting(f"{NS}/low-0") and not sched.cache.is_evicting(f"{NS}/low-1"))
    assert wait_for(lambda: any(e["message"].startswith("preemption: eviction of default/low-") and
                                e["involvedObject"]["name"] == "high" for e in cluster.events("FailedScheduling")))
    condition = wait_for(lambda: [c for c in cluster.pod("high")["status"].get("conditions") or []
                                  if c["type"] == "PodScheduled" and c["reason"] == "SchedulerError"])
    assert condition
    cluster.server.faults.clear()  # the API lets evictions through again: the next attempt gets its room
    assert wait_for(lambda: cluster.node_of("high") == "n1")


def test_injected_429_on_eviction_is_retried_later(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster(cluster_with_victims())
    sched = cluster.scheduler()
    cluster.server.faults.fail("POST", r"/eviction$", status=429, count=1)
    cluster.create(pod("high", cpu="2", priority_class="high"))
    assert wait_for(lambda: cluster.node_of("high") == "n1")
    assert sched.metrics.evictions.labels(result="refused")._value.get() == 1
    assert cluster.double_binds() == []


def test_victims_that_never_leave_give_the_room_back(make_cluster: Callable[..., Cluster],
                                                     caplog: pytest.LogCaptureFixture) -> None:
    # The kubelet is slow to stop the victims: the preemptor gives up waiting, forgets its
    # assumption and tries again (and binds once they are finally gone).
    cluster = make_cluster(cluster_with_victims(), kubelet_grace_seconds=1.0)
    sched = cluster.scheduler(options=fast_options(preemption_timeout=0.3))
    with caplog.at_level(logging.WARNING, logger="adapters.live"):
        cluster.create(pod("high", cpu="2", priority_class="high"))
        assert wait_for(lambda: "did not leave within" in caplog.text)
        assert wait_for(lambda: cluster.node_of("high") == "n1")
    assert cluster.violations() == []


def test_room_being_freed_is_not_promised_twice(make_cluster: Callable[..., Cluster]) -> None:
    # Two preemptors, room for one: the second must not count the first one's victims again.
    cluster = make_cluster(cluster_with_victims(), kubelet_grace_seconds=0.3)
    sched = cluster.scheduler(options=fast_options(window_wait=0.0))
    cluster.create(pod("high-a", cpu="2", priority_class="high"))
    assert wait_for(lambda: sched.cache.is_evicting(f"{NS}/low-0"))
    cluster.create(pod("high-b", cpu="2", priority_class="high"))
    assert wait_for(lambda: cluster.node_of("high-a") == "n1")
    assert wait_for(lambda: sched.queue.where(f"{NS}/high-b") == "unschedulable")
    assert cluster.node_of("high-b") is None
    assert cluster.violations() == []


def _capacity_at_every_bind(cluster: Cluster) -> list[str]:
    """Overcommits seen at the moment of each bind (terminating pods still hold their room)."""
    from models import pod_requests
    from adapters.live.convert import parse_object

    problems: list[str] = []
    store = cluster.server.store

    def check(key: str, event: str, obj: dict[str, Any], prev: Any) -> None:
        if key != "pods" or prev is None or not obj["spec"].get("nodeName") or prev["spec"].get("nodeName"):
            return
        node_name = obj["spec"]["nodeName"]
        used = sum(pod_requests(parse_object(o, "Pod")).get("cpu", 0) for o in store.items("pods")
                   if o["spec"].get("nodeName") == node_name)
        allocatable = parse_object(store.peek("nodes", "", node_name), "Node").allocatable["cpu"]
        if used > allocatable:
            problems.append(f"binding {obj['metadata']['name']} put {used}m on {node_name} ({allocatable}m)")

    store.add_listener(check)
    return problems


def one_big_victim() -> list[dict[str, Any]]:
    """A node filled by one low-priority pod twice the size a preemptor needs."""
    return [node("n1", cpu="2"), priority_class("low", 10), priority_class("high", 1000),
            pod("big", cpu="2", priority_class="low", node_name="n1", running=True, labels={"app": "batch"})]


def rider() -> dict[str, Any]:
    """A pod of high priority that may not preempt: it can only use room other pods' victims free."""
    obj = pod("rider", cpu="1", priority_class="high")
    obj["spec"]["preemptionPolicy"] = "Never"
    return obj


def test_every_pod_using_freed_room_waits_for_the_victims(make_cluster: Callable[..., Cluster]) -> None:
    # The window places a preemptor *and* a pod that is not one into the room its victims free:
    # neither may be bound while the victims still hold it.
    cluster = make_cluster(one_big_victim(), kubelet_grace_seconds=0.3)
    overcommits = _capacity_at_every_bind(cluster)
    order = _order_recorder(cluster)
    cluster.create(pod("high", cpu="1", priority_class="high"), rider())
    sched = cluster.scheduler(fast_config(), fast_options(engine="cpsat", window_wait=0.1))
    assert wait_for(lambda: cluster.node_of("high") == "n1" and cluster.node_of("rider") == "n1")
    assert overcommits == []
    victim_gone = order.index(("deleted", "big"))
    assert order.index(("bound", "rider")) > victim_gone and order.index(("bound", "high")) > victim_gone
    assert wait_for(lambda: cluster.events("Preempted"))   # written in the background: may trail the bind
    assert [(e["involvedObject"]["name"], e["message"]) for e in cluster.events("Preempted")] == \
        [("big", "Preempted by pod default/high on node n1")]
    assert wait_for(lambda: not sched.cache.assumed())


def test_a_refused_eviction_releases_every_pod_counting_on_it(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster(one_big_victim())
    overcommits = _capacity_at_every_bind(cluster)
    cluster.server.faults.fail("POST", r"/eviction$", status=429, count=None)
    cluster.create(pod("high", cpu="1", priority_class="high"), rider())
    sched = cluster.scheduler(fast_config(), fast_options(engine="cpsat", window_wait=0.1))
    assert wait_for(lambda: sched.metrics.evictions.labels(result="refused")._value.get() >= 1)
    assert wait_for(lambda: all(a.state != "awaiting-victims" for a in sched.cache.assumed().values()))
    assert cluster.node_of("rider") is None and cluster.node_of("high") is None and overcommits == []
    assert cluster.pod("big") is not None



def test_a_preemptor_given_up_midway_leaves_its_other_victims_running(make_cluster: Callable[..., Cluster]) -> None:
    # The first eviction hangs past the preemption timeout, so the preemptor gives its room back
    # while its second victim was never asked to go: that one must be shown running again, or no
    # later decision could pick it, and the preemptor would wait for a room nobody frees.
    cluster = make_cluster(cluster_with_victims())
    cluster.server.faults.delay("POST", r"/pods/low-[01]/eviction$", seconds=0.6, count=1)
    sched = cluster.scheduler(options=fast_options(preemption_timeout=0.2))
    cluster.create(pod("high", cpu="2", priority_class="high"))
    assert wait_for(lambda: sched.metrics.evictions.labels(result="evicted")._value.get() == 1)
    assert wait_for(lambda: cluster.node_of("high") == "n1")
    assert cluster.violations() == []
    assert wait_for(lambda: not sched.cache.assumed())


class _Owned:
    """The binder's lock, remembering which thread holds it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.owner: Optional[int] = None

    def __enter__(self) -> "_Owned":
        self._lock.acquire()
        self.owner = threading.get_ident()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.owner = None
        self._lock.release()


class _Checked:
    """The cache's lock, noting every time it is taken by a thread that holds the binder's."""

    def __init__(self, inner: Any, binder_lock: _Owned, violations: list[str]) -> None:
        self._inner, self._binder_lock, self._violations = inner, binder_lock, violations

    def __enter__(self) -> Any:
        if self._binder_lock.owner == threading.get_ident():
            self._violations.append("".join(traceback.format_stack(limit=6)))
        return self._inner.__enter__()

    def __exit__(self, *exc: Any) -> Any:
        return self._inner.__exit__(*exc)


def test_the_binder_never_reads_the_cache_under_its_own_lock(make_cluster: Callable[..., Cluster]) -> None:
    # Deletions reach the binder from the watch while it holds the cache's lock; a binder thread
    # reading the cache while holding its own lock takes them in the other order: a deadlock
    # (the soak found one: the leader froze, still renewing its lease, so nobody took over).
    cluster = make_cluster(one_big_victim(), kubelet_grace_seconds=0.1)
    cluster.create(pod("high", cpu="1", priority_class="high"), rider())
    sched = cluster.scheduler(fast_config(), fast_options(engine="cpsat", window_wait=0.1), start=False)
    violations: list[str] = []
    binder_lock = _Owned()
    sched.binder._lock = binder_lock  # type: ignore[assignment]
    sched.cache.lock = _Checked(sched.cache.lock, binder_lock, violations)  # type: ignore[assignment]
    sched.start()
    assert wait_for(lambda: cluster.node_of("high") == "n1" and cluster.node_of("rider") == "n1")
    assert violations == []

"""The scheduling queue on an injected clock: order, backoff, unschedulable pods, gangs, windows.

No test here sleeps: the clock is a `ManualClock`, moved by hand.
"""

from __future__ import annotations

from typing import Any, Optional

import pytest

from adapters.live.clock import ManualClock
from adapters.live.queue import ACTIVE, BACKOFF, GATED, IN_FLIGHT, UNSCHEDULABLE, QueueSettings, SchedulingQueue
from models import Pod
from tests.adapters.live_harness import pod as pod_dict


def make_pod(name: str, *, priority: int = 0, gang: Optional[str] = None, gated: bool = False,
             labels: Optional[dict[str, str]] = None) -> Pod:
    obj: dict[str, Any] = pod_dict(name, gang=gang, labels=labels)
    obj["spec"]["priority"] = priority
    if gated:
        obj["spec"]["schedulingGates"] = [{"name": "example.com/wait"}]
    return Pod.model_validate(obj)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def queue(clock: ManualClock) -> SchedulingQueue:
    return SchedulingQueue(clock=clock)  # kube-scheduler's defaults: 1 s .. 10 s, 5 min


def keys(window: list[Any]) -> list[str]:
    return [qp.key for qp in window]


def test_higher_priority_first_then_longest_waiting(queue: SchedulingQueue, clock: ManualClock) -> None:
    queue.add(make_pod("old-low", priority=0))
    clock.advance(1)
    queue.add(make_pod("high", priority=100))
    clock.advance(1)
    queue.add(make_pod("new-low", priority=0))
    assert keys(queue.pop_window(10, 0)) == ["default/high", "default/old-low", "default/new-low"]


def test_window_takes_at_most_its_size(queue: SchedulingQueue) -> None:
    for i in range(5):
        queue.add(make_pod(f"p{i}"))
    assert len(queue.pop_window(3, 0)) == 3
    assert queue.counts()[ACTIVE] == 2 and queue.counts()[IN_FLIGHT] == 3


@pytest.mark.parametrize("failures, seconds", [(1, 1), (2, 2), (3, 4), (4, 8), (5, 10), (6, 10)])
def test_backoff_doubles_from_one_second_to_ten(queue: SchedulingQueue, failures: int, seconds: float) -> None:
    assert queue.backoff_duration(failures) == seconds


def test_an_error_backs_off_then_the_pod_is_active_again(queue: SchedulingQueue, clock: ManualClock) -> None:
    queue.add(make_pod("p"))
    queue.pop_window(1, 0)
    queue.requeue_error("default/p")
    assert queue.where("default/p") == BACKOFF
    clock.advance(0.99)
    queue.flush()
    assert queue.where("default/p") == BACKOFF
    clock.advance(0.02)
    queue.flush()
    assert queue.where("default/p") == ACTIVE
    queue.pop_window(1, 0)
    queue.requeue_error("default/p")  # second failure: two seconds
    clock.advance(1.5)
    queue.flush()
    assert queue.where("default/p") == BACKOFF
    clock.advance(0.6)
    queue.flush()
    assert queue.where("default/p") == ACTIVE


def test_unschedulable_waits_for_an_event(queue: SchedulingQueue, clock: ManualClock) -> None:
    queue.add(make_pod("p"))
    queue.pop_window(1, 0)
    queue.requeue_unschedulable("default/p", "0/1 nodes are available: 1 Insufficient cpu.")
    clock.advance(60)
    queue.flush()
    assert queue.where("default/p") == UNSCHEDULABLE
    assert queue.unschedulable() == {"default/p": "0/1 nodes are available: 1 Insufficient cpu."}
    assert queue.move_all() == 1  # e.g. a node was added; its 1 s backoff is long over
    assert queue.where("default/p") == ACTIVE


def test_an_event_right_after_the_failure_sends_the_pod_to_backoff(queue: SchedulingQueue) -> None:
    queue.add(make_pod("p"))
    queue.pop_window(1, 0)
    queue.requeue_unschedulable("default/p", "no")
    queue.move_all()
    assert queue.where("default/p") == BACKOFF


def test_unschedulable_pods_are_retried_after_five_minutes(queue: SchedulingQueue, clock: ManualClock) -> None:
    queue.add(make_pod("p"))
    queue.pop_window(1, 0)
    queue.requeue_unschedulable("default/p", "no")
    clock.advance(299)
    queue.flush()
    assert queue.where("default/p") == UNSCHEDULABLE
    clock.advance(1)
    queue.flush()
    assert queue.where("default/p") == ACTIVE


def test_an_event_while_in_flight_makes_an_unschedulable_verdict_a_backoff(queue: SchedulingQueue) -> None:
    queue.add(make_pod("p"))
    queue.pop_window(1, 0)
    queue.move_all()  # the cluster changed while the window was being decided
    queue.requeue_unschedulable("default/p", "no")
    assert queue.where("default/p") == BACKOFF


def test_move_all_can_pick_pods(queue: SchedulingQueue) -> None:
    for name in ("a", "b"):
        queue.add(make_pod(name))
    queue.pop_window(2, 0)
    for name in ("a", "b"):
        queue.requeue_unschedulable(f"default/{name}", "no")
    assert queue.move_all(lambda qp: qp.key == "default/b") == 1
    assert queue.where("default/a") == UNSCHEDULABLE


def test_gated_pods_wait_for_their_gates(queue: SchedulingQueue) -> None:
    queue.add(make_pod("g", gated=True))
    assert queue.where("default/g") == GATED
    assert queue.pop_window(10, 0, stop=_set_event()) == []
    queue.update(make_pod("g"), relevant=True)
    assert queue.where("default/g") == ACTIVE


def test_a_gang_member_brings_its_waiting_siblings(queue: SchedulingQueue, clock: ManualClock) -> None:
    queue.add(make_pod("job-0", gang="job"))
    queue.pop_window(1, 0)
    queue.requeue_unschedulable("default/job-0", "not enough siblings")
    for i in (1, 2):
        queue.add(make_pod(f"job-{i}", gang="job"))
    queue.add(make_pod("other", priority=100))
    window = queue.pop_window(1, 0)  # size 1, but a gang travels whole
    assert keys(window) == ["default/other"]
    window = queue.pop_window(1, 0)
    assert sorted(keys(window)) == ["default/job-0", "default/job-1", "default/job-2"]


def test_a_member_of_a_group_tree_brings_the_whole_tree(queue: SchedulingQueue) -> None:
    """Gangs under one CompositePodGroup are placed together or not at all: a window taking one
    member takes every waiting member of every gang of the tree (``tree_of``), no other gang."""
    trees = {"default/a": frozenset({"default/a", "default/b"}), "default/b": frozenset({"default/a", "default/b"})}
    queue.tree_of = lambda gang: trees.get(gang, frozenset())
    queue.add(make_pod("b-0", gang="b"))
    queue.pop_window(1, 0)
    queue.requeue_unschedulable("default/b-0", "its tree's other gang is not there")
    for name, gang in (("a-0", "a"), ("a-1", "a"), ("c-0", "c")):
        queue.add(make_pod(name, priority=100 if gang == "a" else 0, gang=gang))
    window = queue.pop_window(1, 0)  # size 1, but a tree travels whole
    assert sorted(keys(window)) == ["default/a-0", "default/a-1", "default/b-0"]
    assert keys(queue.pop_window(1, 0)) == ["default/c-0"]


def test_deleted_pods_leave_even_while_in_flight(queue: SchedulingQueue) -> None:
    queue.add(make_pod("p"))
    queue.pop_window(1, 0)
    queue.delete("default/p")
    queue.requeue_error("default/p")
    assert queue.where("default/p") is None and queue.keys() == set()


def test_a_pod_created_again_while_in_flight_stays_queued(queue: SchedulingQueue) -> None:
    # Deleted and created again under the same name (a StatefulSet's pod) while its window is
    # decided: the attempt for the old pod fails, and the new pod must be tried, not dropped.
    queue.add(make_pod("p"))
    queue.pop_window(1, 0)
    queue.delete("default/p")
    queue.add(make_pod("p"))
    queue.requeue_error("default/p")
    assert queue.where("default/p") == BACKOFF


def test_a_relevant_update_moves_an_unschedulable_pod(queue: SchedulingQueue, clock: ManualClock) -> None:
    queue.add(make_pod("p"))
    queue.pop_window(1, 0)
    queue.requeue_unschedulable("default/p", "no")
    clock.advance(5)
    queue.update(make_pod("p"), relevant=False)  # a status change: nothing to retry for
    assert queue.where("default/p") == UNSCHEDULABLE
    queue.update(make_pod("p", labels={"tier": "gold"}), relevant=True)
    assert queue.where("default/p") == ACTIVE


def test_abandoned_windows_come_back_as_new(queue: SchedulingQueue) -> None:
    queue.add(make_pod("p"))
    queue.pop_window(1, 0)
    queue.requeue_active("default/p")
    assert queue.where("default/p") == ACTIVE
    assert queue.get("default/p").failures == 0  # type: ignore[union-attr]


def test_custom_backoff_settings(clock: ManualClock) -> None:
    q = SchedulingQueue(clock=clock, settings=QueueSettings(initial_backoff=0.5, max_backoff=1.0))
    assert [q.backoff_duration(n) for n in range(5)] == [0.0, 0.5, 1.0, 1.0, 1.0]


def test_closed_queue_returns_no_window(queue: SchedulingQueue) -> None:
    queue.close()
    assert queue.pop_window(10, 0) == []


def _set_event() -> Any:
    import threading

    event = threading.Event()
    event.set()
    return event


def test_adaptive_window_takes_independent_pods_at_once_and_waits_for_coupled_ones() -> None:
    import threading
    import time

    from adapters.live.clock import SystemClock

    queue = SchedulingQueue(clock=SystemClock())
    queue.add(make_pod("web-0"))
    start = time.monotonic()
    assert keys(queue.pop_window(10, 5.0, adaptive=True)) == ["default/web-0"]
    assert time.monotonic() - start < 1.0  # nothing to gain from waiting: not the 5 s
    # A gang member waits for company: a sibling created during the wait shares its window.
    queue.add(make_pod("job-0", gang="job"))
    threading.Timer(0.1, lambda: queue.add(make_pod("job-1", gang="job"))).start()
    start = time.monotonic()
    assert sorted(keys(queue.pop_window(10, 0.5, adaptive=True))) == ["default/job-0", "default/job-1"]
    assert time.monotonic() - start >= 0.45
    # Without the adaptive window every window waits its full wait.
    queue.add(make_pod("web-1"))
    start = time.monotonic()
    assert keys(queue.pop_window(10, 0.3)) == ["default/web-1"]
    assert time.monotonic() - start >= 0.25


def test_a_stream_of_pods_shares_windows_but_a_lone_pod_never_waits() -> None:
    """The batch wait: while pods keep coming, each within the wait of the one before, a window
    of independent pods waits that long for the pods right behind its first; a pod after a lull
    (or the first one ever) is taken at once, as kube-scheduler would take it."""
    import threading
    import time

    from adapters.live.clock import SystemClock

    queue = SchedulingQueue(clock=SystemClock())
    queue.add(make_pod("lone"))
    start = time.monotonic()
    assert keys(queue.pop_window(10, 5.0, adaptive=True, batch_wait=0.3)) == ["default/lone"]
    assert time.monotonic() - start < 0.2  # no stream: taken at once
    time.sleep(0.35)  # a lull longer than the wait
    queue.add(make_pod("after-lull"))
    start = time.monotonic()
    assert keys(queue.pop_window(10, 5.0, adaptive=True, batch_wait=0.3)) == ["default/after-lull"]
    assert time.monotonic() - start < 0.2
    # Now a stream: pods 50 ms apart. The window waits for the ones behind its first.
    queue.add(make_pod("s-0"))
    for i, delay in enumerate((0.05, 0.1, 0.15), start=1):
        threading.Timer(delay, lambda i=i: queue.add(make_pod(f"s-{i}"))).start()
    time.sleep(0.06)  # s-1 arrived within the wait of s-0: streaming
    start = time.monotonic()
    window = keys(queue.pop_window(10, 5.0, adaptive=True, batch_wait=0.3))
    assert window[:2] == ["default/s-0", "default/s-1"] and len(window) == 4
    assert time.monotonic() - start < 1.0  # the batch wait, not the 5 s window wait
    # With no batch wait, the stream's first pod is taken at once.
    queue.add(make_pod("t-0"))
    queue.add(make_pod("t-1"))
    start = time.monotonic()
    assert sorted(keys(queue.pop_window(10, 5.0, adaptive=True, batch_wait=0.0))) == ["default/t-0", "default/t-1"]
    assert time.monotonic() - start < 0.2


def test_the_batch_wait_never_outlasts_the_window_wait() -> None:
    import threading
    import time

    from adapters.live.clock import SystemClock

    queue = SchedulingQueue(clock=SystemClock())
    queue.add(make_pod("a"))
    queue.add(make_pod("b"))  # right behind: a stream
    threading.Timer(0.4, lambda: queue.add(make_pod("late"))).start()
    start = time.monotonic()
    assert sorted(keys(queue.pop_window(10, 0.1, adaptive=True, batch_wait=5.0))) == ["default/a", "default/b"]
    assert time.monotonic() - start < 0.35  # the 0.1 s window wait, not the 5 s batch wait

"""The search's second start (``solver/cpsat/small_first.py``): greedy's pass with the smaller pods
first in each priority, made sound in kube-scheduler's order, computed in a forked child beside
greedy's own pass; the search starts from it when it is the better plan."""

from __future__ import annotations

import os
import time
from datetime import timedelta

import pytest

from models.config import SchedulerConfig
from models.errors import Interrupted
from solver import interrupt, schedule, validate
from solver.context import build_context
from solver.cpsat import degraded, small_first
from solver.filtering import StaticFilters
from tests.builders import T0, make_node, make_pod, make_snapshot, term

CONFIG = SchedulerConfig().with_overrides(time_limit_seconds=6.0, workers=2, seed=1)

pytestmark = pytest.mark.skipif(not small_first.available(), reason="needs os.fork and two cores")


@pytest.fixture
def too_big(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every model reads as too large to build in time: the decision takes the search."""
    monkeypatch.setattr(degraded, "BUILD_SECONDS_PER_PAIR", 10.0)


@pytest.fixture(autouse=True)
def fresh() -> None:
    interrupt.reset()
    yield
    interrupt.reset()


def _children() -> set[int]:
    """This process's children, running or not yet reaped (Linux: ``/proc/self/task/*/children``).
    Other tests in the same worker may leave processes of their own: each test compares the set
    before and after."""
    out: set[int] = set()
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/children") as f:
                out |= {int(pid) for pid in f.read().split()}
        except OSError:
            continue
    return out


@pytest.fixture
def no_child_left():
    """The test leaves no child of its own behind, running or unreaped."""
    if not os.path.exists(f"/proc/self/task/{os.getpid()}/children"):
        pytest.skip("needs /proc/self/task/*/children")
    before = _children()
    yield
    assert _children() <= before, "a child was left behind"


def _big_first():
    """Two 4-CPU nodes; two 3-CPU pods created first, then eight 1-CPU pods, one priority.
    kube-scheduler's order puts a big pod on each node and one small pod beside each: 4 placed.
    Smallest first, the small pods fill both nodes: 8 placed. A hostname anti-affinity on the big
    pods keeps node classes out, so the decision takes the search."""
    nodes = [make_node(f"n{i}", cpu="4", memory="64Gi") for i in range(2)]
    big = [make_pod(f"default/big-{i}", cpu="3", created=T0 + timedelta(seconds=i), labels={"app": "big"},
                    pod_anti_affinity=[term({"app": "big"}, "kubernetes.io/hostname")]) for i in range(2)]
    small = [make_pod(f"default/small-{i}", cpu="1", created=T0 + timedelta(seconds=10 + i)) for i in range(8)]
    return make_snapshot(nodes, big + small)


def test_the_order_takes_each_priority_s_smaller_pods_first() -> None:
    nodes = [make_node("n0", cpu="8", memory="64Gi")]
    pods = [make_pod("default/a-big", cpu="4", priority=10, created=T0),
            make_pod("default/b-small", cpu="1", priority=10, created=T0 + timedelta(seconds=1)),
            make_pod("default/c-high-big", cpu="6", priority=100, created=T0 + timedelta(seconds=2)),
            make_pod("default/d-mem", cpu="1", memory="48Gi", priority=10, created=T0 + timedelta(seconds=3)),
            make_pod("default/e-small", cpu="1", priority=10, created=T0 + timedelta(seconds=4)),
            make_pod("default/f-both", cpu="3", memory="16Gi", priority=10, created=T0 + timedelta(seconds=5))]
    ctx = build_context(make_snapshot(nodes, pods), CONFIG)
    # priority first; within it the shares of the cluster's cpu and memory, summed (a-big 4/8,
    # f-both 3/8 + 16/64, d-mem 1/8 + 48/64), equal sizes in kube-scheduler's order
    assert [p.key for p in small_first.order(ctx)] == [
        "default/c-high-big", "default/b-small", "default/e-small", "default/a-big", "default/f-both", "default/d-mem"]


def test_the_order_keeps_a_gang_s_members_together() -> None:
    nodes = [make_node("n0", cpu="16", memory="64Gi")]
    pods = [make_pod("default/g-0", cpu="4", group="g", created=T0),
            make_pod("default/lone", cpu="2", created=T0 + timedelta(seconds=1)),
            make_pod("default/g-1", cpu="1", group="g", created=T0 + timedelta(seconds=2))]
    ctx = build_context(make_snapshot(nodes, pods), CONFIG)
    keys = [p.key for p in small_first.order(ctx)]
    assert abs(keys.index("default/g-0") - keys.index("default/g-1")) == 1


def test_the_search_starts_from_the_small_first_plan_when_it_places_more(too_big: None, no_child_left: None) -> None:
    """With the child's own search off, one search starts from the better of the two plans."""
    snapshot = _big_first()
    config = CONFIG.with_overrides(second_search=False)
    greedy = schedule(snapshot, config, engine="greedy")
    assert len(greedy.assignments) == 4
    plan = schedule(snapshot, config)
    assert validate(snapshot, plan, config) == []
    assert {a.pod for a in plan.assignments} == {f"default/small-{i}" for i in range(8)}
    stats = plan.stats
    assert stats.plan_from == "solver" and stats.degraded == "large-neighbourhood search"
    assert "started from the small-first pass's plan" in (stats.lns_start or "")
    assert (stats.lns_history or ("",))[0].startswith("start: the small-first pass's plan against greedy's: +4 placed")
    assert stats.lns_placed_gain == 4
    assert "small-first pass's plan beat greedy's" in (stats.plan_reason or "")


def test_switched_off_the_search_starts_from_greedy_s_plan(too_big: None) -> None:
    config = CONFIG.with_overrides(small_first_start=False)
    plan = schedule(_big_first(), config)
    assert plan.stats.lns_start is None and plan.stats.degraded == "large-neighbourhood search"
    assert not any(line.startswith("start:") for line in plan.stats.lns_history or ())


def test_the_config_names_the_switches_in_camel_case() -> None:
    assert SchedulerConfig.model_validate({"solver": {"smallFirstStart": False}}).solver.small_first_start is False
    assert SchedulerConfig.model_validate({"solver": {"secondSearch": False}}).solver.second_search is False


def test_its_victims_are_the_ones_kube_scheduler_s_preemption_picks(too_big: None) -> None:
    """One 4-CPU node full of low-priority pods; the pending pods of priority 100 are a 3-CPU pod
    created first and three 1-CPU pods. Smallest first, the small pods evict; the pass that follows
    it in queue order takes the big pod's turn first and leaves it pending (the plan says so), so
    the victims are the ones kube's preemption picks at each small pod's turn: the validator's
    replay accepts them."""
    nodes = [make_node("n0", cpu="4", memory="64Gi")]
    running = [make_pod(f"default/low-{i}", cpu="1", priority=0, node="n0") for i in range(4)]
    pending = [make_pod("default/big", cpu="3", priority=100, created=T0, labels={"app": "big"},
                        pod_anti_affinity=[term({"app": "big"}, "kubernetes.io/hostname")])]
    pending += [make_pod(f"default/small-{i}", cpu="1", priority=100, created=T0 + timedelta(seconds=1 + i))
                for i in range(3)]
    snapshot = make_snapshot(nodes, running + pending)
    greedy = schedule(snapshot, CONFIG, engine="greedy")
    plan = schedule(snapshot, CONFIG)
    assert validate(snapshot, plan, CONFIG) == []
    assert len(plan.assignments) >= len(greedy.assignments)
    assert plan.stats.lns_start is not None
    assert len(plan.assignments) == 3 and len(plan.preemptions) == 3


def test_a_child_that_fails_leaves_greedy_s_start_and_says_so(too_big: None, monkeypatch: pytest.MonkeyPatch,
                                                              no_child_left: None) -> None:
    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(small_first, "plan", broken)  # the fork copies the patched module
    plan = schedule(_big_first(), CONFIG)
    assert "the small-first pass failed (RuntimeError('boom'))" in (plan.stats.lns_start or "")
    assert validate(_big_first(), plan, CONFIG) == []


def _slow_child(monkeypatch: pytest.MonkeyPatch) -> small_first.SmallFirstRun:
    """A child whose pass takes 30 s, started on the two-node window."""
    monkeypatch.setattr(small_first, "plan", lambda *args, **kwargs: time.sleep(30))
    ctx = build_context(_big_first(), CONFIG)
    return small_first.SmallFirstRun(ctx, StaticFilters(ctx.nodes, ctx.window))


def test_a_stop_requested_while_the_child_runs_ends_the_wait_and_reaps_it(monkeypatch: pytest.MonkeyPatch,
                                                                         no_child_left: None) -> None:
    run = _slow_child(monkeypatch)
    interrupt.request()
    began = time.monotonic()
    with pytest.raises(Interrupted):
        try:
            run.result(timeout=20)
        finally:
            run.stop()
    assert time.monotonic() - began < 1.0


def test_a_child_not_done_in_time_is_stopped_and_the_plan_is_greedy_s_start(monkeypatch: pytest.MonkeyPatch,
                                                                            no_child_left: None) -> None:
    run = _slow_child(monkeypatch)
    began = time.monotonic()
    assert run.result(timeout=0.2) is None
    assert time.monotonic() - began < 1.0
    assert "not done in time" in (small_first.start_note(run, None, False) or "")


def test_a_fork_refused_by_the_system_leaves_greedy_s_start(too_big: None, monkeypatch: pytest.MonkeyPatch) -> None:
    def refused():
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(small_first.os, "fork", refused)
    snapshot = _big_first()
    plan = schedule(snapshot, CONFIG)
    assert validate(snapshot, plan, CONFIG) == []
    assert "the small-first pass failed (could not fork: [Errno 11]" in (plan.stats.lns_start or "")
    assert plan.stats.degraded == "large-neighbourhood search"


def test_two_searches_run_one_from_each_plan_and_the_better_is_kept(too_big: None, no_child_left: None) -> None:
    """By default the child searches from the small-first plan while this process searches from
    greedy's: the stats say both ran, and the plan (8 placed, as either finds) passes the
    validator."""
    snapshot = _big_first()
    plan = schedule(snapshot, CONFIG)
    assert validate(snapshot, plan, CONFIG) == []
    assert len(plan.assignments) == 8
    note = plan.stats.lns_start or ""
    assert note.startswith("two searches: ") and "from the small-first pass's plan" in note, note
    assert "this process's search from greedy's plan ran" in note and plan.stats.lns_start_child_mib


def _only_in_the_child(monkeypatch: pytest.MonkeyPatch, child) -> None:
    """``lns.improve`` as the fork leaves it to the child: ``child`` there, and in this process a
    search that finds nothing (greedy's plan, no round)."""
    from solver.cpsat import lns

    here, real = os.getpid(), lns.improve

    def improve(ctx, static, greedy, deadline, **kwargs):
        if os.getpid() != here:
            return child(real, ctx, static, greedy, deadline, **kwargs)
        stats = lns.LnsStats()
        return lns.Solution(placements=dict(greedy.placements), victims=list(greedy.victims), status="FEASIBLE"), stats

    monkeypatch.setattr(lns, "improve", improve)


def test_the_second_process_s_plan_is_kept_when_it_is_the_better(too_big: None, monkeypatch: pytest.MonkeyPatch,
                                                                no_child_left: None) -> None:
    _only_in_the_child(monkeypatch, lambda real, *args, **kwargs: real(*args, **kwargs))
    snapshot = _big_first()
    plan = schedule(snapshot, CONFIG)
    assert validate(snapshot, plan, CONFIG) == []
    assert {a.pod for a in plan.assignments} == {f"default/small-{i}" for i in range(8)}
    stats = plan.stats
    assert stats.plan_from == "solver" and stats.lns_placed_gain == 4
    assert (stats.lns_start or "").startswith("two searches: the plan is the second process's")
    assert (stats.lns_history or ("",))[0].startswith("start: the small-first pass's plan against greedy's: +4 placed")
    assert "searched in a second process" in (stats.plan_reason or "")


def test_a_second_search_that_fails_still_gives_its_start(too_big: None, monkeypatch: pytest.MonkeyPatch,
                                                         no_child_left: None) -> None:
    def broken(real, *args, **kwargs):
        raise RuntimeError("search boom")

    _only_in_the_child(monkeypatch, broken)
    snapshot = _big_first()
    plan = schedule(snapshot, CONFIG)
    assert validate(snapshot, plan, CONFIG) == []
    assert len(plan.assignments) == 8  # the small-first plan, which this process's search did not reach
    note = plan.stats.lns_start or ""
    assert "its search failed (RuntimeError('search boom'))" in note and "the plan is the second process's" in note


def test_a_second_search_still_running_at_the_deadline_gives_its_last_incumbent(
        too_big: None, monkeypatch: pytest.MonkeyPatch, no_child_left: None) -> None:
    """The child sends each new incumbent as its search goes: one whose last round would end
    after the deadline (here, one that hangs after its first incumbent) is not waited for; the
    decision takes the incumbent it sent, within the limit, and stops it."""
    from solver.cpsat import lns

    def hangs(real, ctx, static, start, deadline, **kwargs):
        kwargs["on_better"](dict(start.placements), list(start.victims), {v.pod.key: v.preemptor for v in start.victims},
                            lns.LnsStats(rounds=1, improved=1))
        time.sleep(60)

    _only_in_the_child(monkeypatch, hangs)
    snapshot = _big_first()
    plan = schedule(snapshot, CONFIG)
    assert validate(snapshot, plan, CONFIG) == []
    assert len(plan.assignments) == 8
    assert plan.stats.wall_time_s < CONFIG.solver.time_limit_seconds + 0.5
    assert "its search ran 1 round(s), 1 improving" in (plan.stats.lns_start or "")


def test_a_stop_requested_while_both_searches_run_ends_the_decision_and_reaps_the_child(
        too_big: None, monkeypatch: pytest.MonkeyPatch, no_child_left: None) -> None:
    """Ctrl-C (``interrupt.request``) while this process searches and the child's search runs
    (here both run until stopped; the child ignores Ctrl-C): the decision stops within a second
    and the child is reaped."""
    import threading

    from solver.cpsat import lns

    here = os.getpid()
    searching = threading.Event()

    def improve(*args, **kwargs):
        if os.getpid() != here:  # the child's search: never ends by itself
            time.sleep(60)
        searching.set()
        while True:  # this process's: until stopped
            interrupt.check()
            time.sleep(0.01)

    monkeypatch.setattr(lns, "improve", improve)
    stopped: list[float] = []

    def stop_when_searching() -> None:
        searching.wait(20)
        stopped.append(time.monotonic())
        interrupt.request()

    threading.Thread(target=stop_when_searching, daemon=True).start()
    with pytest.raises(Interrupted):
        schedule(_big_first(), CONFIG)
    assert stopped and time.monotonic() - stopped[0] < 1.0


def test_this_process_hears_that_the_child_s_plan_is_settled_from_its_last_message_only() -> None:
    """``SmallFirstRun.settled``: the child's search ends early on a plan no round can improve
    and says why in its last message's stats; then this process's search may stop. Its start, an
    incumbent sent on the way, or a failure say nothing of the kind."""
    import threading

    from solver.cpsat import lns

    run = object.__new__(small_first.SmallFirstRun)  # the messages alone, no child
    run._lock, run._messages = threading.Lock(), []
    start = ({}, [], {}, 1.5, 10.0)
    on_the_way = ({"a/p": 0}, [], {}, lns.LnsStats(rounds=1, improved=1), 11.0)
    final = ({"a/p": 0}, [], {}, lns.LnsStats(rounds=1, improved=1, settled="every window pod is placed"), 11.0)
    for messages, expected in (([], None), ([start], None), ([start, on_the_way], None),
                               ([start, on_the_way, ("error", "boom")], None),
                               ([start, on_the_way, final], "every window pod is placed")):
        run._messages = list(messages)
        said = run.settled()
        if expected is None:
            assert said is None, messages
        else:
            assert said is not None and expected in said, messages

"""Which evictions the model may make, against kube-scheduler's one-pod-at-a-time preemption
(issue 38's "worse than kube-scheduler" cases).

* A pod evicts a victim for a reason beyond room only through a rule of its own that reads the
  victim (its anti-affinity or spread counting it) or the victim's anti-affinity against it. A
  running pod's anti-affinity against *another* pending pod is no reason: kube-scheduler never
  evicts it for a pod that fits beside it, so the lower pod it keeps out stays pending.
* The model's reprieve takes a priority's pods on a node as one batch; kube-scheduler takes them
  one at a time and can evict differently. Its plan is still the bar: the project places at least
  what kube-scheduler's own order places (greedy's plan stands in when the batch cannot say it).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from models.config import SchedulerConfig
from solver import schedule, validate
from tests.builders import make_node, make_pod, make_snapshot, term

SOLVER = SchedulerConfig().with_overrides(time_limit_seconds=10.0, workers=2, seed=1)
GREEDY = SOLVER.with_overrides(time_limit_seconds=0.0)
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)

ANTI_WEB = term({"app": "web"}, "kubernetes.io/hostname")


def anti_affinity_window():
    """node-a has 1 CPU free. critical (priority 10000, 500m) fits beside everything; web-new
    (priority 100, app=web) is kept off node-a by web-old's anti-affinity (and its own), and may
    not evict web-old (equal priority)."""
    return make_snapshot(
        nodes=[make_node("node-a", cpu="4")],
        pods=[
            make_pod("default/web-old", cpu="1", priority=100, node="node-a", labels={"app": "web"},
                     pod_anti_affinity=[ANTI_WEB], start_time=T0),
            make_pod("default/filler", cpu="2", priority=100, node="node-a", start_time=T0),
            make_pod("default/critical", cpu="500m", priority=10000, created=T0),
            make_pod("default/web-new", cpu="500m", priority=100, labels={"app": "web"},
                     pod_anti_affinity=[ANTI_WEB], created=T0 + timedelta(seconds=1)),
        ],
    )


def test_a_pod_that_fits_evicts_nothing_for_another_pods_anti_affinity() -> None:
    snapshot = anti_affinity_window()
    for cfg, engine in ((SOLVER, "cpsat"), (GREEDY, "greedy")):
        plan = schedule(snapshot, cfg, engine=engine)
        assert validate(snapshot, plan, cfg) == []
        assert plan.assignment_map() == {"default/critical": "node-a"}, engine
        assert not plan.preemptions, engine
        assert [u.pod for u in plan.unschedulable] == ["default/web-new"]
    # The model states the rule itself: no round of the replay's cuts was needed to find it.
    assert schedule(snapshot, SOLVER).stats.victim_cut_rounds == 0


def one_at_a_time_window():
    """node-a: 10 CPU, full. v1 (4 CPU, the oldest: reprieved first), v2 and v3 (2 each) at
    priority 100, a system pod of 2. p1 and p2 (priority 1000, 3 CPU each), then l1 and l2
    (priority 100, 1 CPU each, no preemption possible: equal priority).

    One at a time (kube-scheduler): p1 evicts v2 and v3 (v1 fits back beside it), p2 then evicts
    v1; 2 CPU are left, for l1 and l2. As one batch, p1 and p2 together keep v2 and evict v1 and
    v3, leaving no room for l1 or l2."""
    return make_snapshot(
        nodes=[make_node("node-a", cpu="10")],
        pods=[
            make_pod("kube-system/agent", cpu="2", priority=2000001000, node="node-a", start_time=T0),
            make_pod("default/v1", cpu="4", priority=100, node="node-a", start_time=T0),
            make_pod("default/v2", cpu="2", priority=100, node="node-a", start_time=T0 + timedelta(minutes=1)),
            make_pod("default/v3", cpu="2", priority=100, node="node-a", start_time=T0 + timedelta(minutes=2)),
            make_pod("default/p1", cpu="3", priority=1000, created=T0),
            make_pod("default/p2", cpu="3", priority=1000, created=T0 + timedelta(seconds=1)),
            make_pod("default/l1", cpu="1", priority=100, created=T0 + timedelta(seconds=2)),
            make_pod("default/l2", cpu="1", priority=100, created=T0 + timedelta(seconds=3)),
        ],
    )


def test_the_plan_places_what_kube_schedulers_one_at_a_time_preemption_places() -> None:
    snapshot = one_at_a_time_window()
    greedy = schedule(snapshot, GREEDY, engine="greedy")
    assert validate(snapshot, greedy, GREEDY) == []
    assert {(p.pod, p.preemptor) for p in greedy.preemptions} == {
        ("default/v2", "default/p1"), ("default/v3", "default/p1"), ("default/v1", "default/p2")}
    assert set(greedy.assignment_map()) == {"default/p1", "default/p2", "default/l1", "default/l2"}
    plan = schedule(snapshot, SOLVER)
    assert validate(snapshot, plan, SOLVER) == []
    assert set(plan.assignment_map()) == {"default/p1", "default/p2", "default/l1", "default/l2"}

"""``limits.maxNodes`` and ``limits.maxWindowPods`` at the solver's entry points.

The limit is on the window decided, not on the backlog: the live scheduler passes a snapshot with
every pending pod and ``window_keys`` for the ones it decides now, and only those count.
"""

from __future__ import annotations

import pytest

from models import InputError, SchedulerConfig
from solver import schedule
from solver.limits import check_snapshot
from tests.builders import make_node, make_pod, make_snapshot

HINT = "raise it in the config's limits section"


def limited(**limits: int) -> SchedulerConfig:
    return SchedulerConfig.model_validate({"limits": limits, "solver": {"timeLimitSeconds": 2, "workers": 1}})


def backlog(nodes: int, pending: int):
    return make_snapshot([make_node(f"n{i}") for i in range(nodes)], [make_pod(f"p{i}", cpu="100m") for i in range(pending)])


@pytest.mark.parametrize(
    ("call", "limits", "message"),
    [
        pytest.param(lambda s, c: check_snapshot(s, c), dict(maxNodes=2),
                     f"snapshot: nodes: 3 nodes exceed limits.maxNodes=2 ({HINT})", id="nodes"),
        pytest.param(lambda s, c: check_snapshot(s, c), dict(maxWindowPods=4),
                     f"snapshot: pods: 5 pending pods exceed limits.maxWindowPods=4 ({HINT})", id="pods"),
        pytest.param(lambda s, c: schedule(s, c, engine="greedy"), dict(maxNodes=2),
                     f"snapshot: nodes: 3 nodes exceed limits.maxNodes=2 ({HINT})", id="schedule-nodes"),
        pytest.param(lambda s, c: schedule(s, c), dict(maxWindowPods=4),
                     f"snapshot: pods: 5 pending pods exceed limits.maxWindowPods=4 ({HINT})", id="schedule-pods"),
        pytest.param(lambda s, c: schedule(s, c, window_keys=[f"default/p{i}" for i in range(5)]), dict(maxWindowPods=4),
                     f"snapshot: pods: 5 pods in the window exceed limits.maxWindowPods=4 ({HINT})", id="live-window"),
    ],
)
def test_refused_with_object_and_field(call, limits, message) -> None:
    with pytest.raises(InputError) as info:
        call(backlog(nodes=3, pending=5), limited(**limits))
    assert str(info.value) == message


def test_other_schedulers_pods_count_only_when_taken() -> None:
    snapshot = make_snapshot([make_node("n0")], [make_pod(f"p{i}", scheduler="default-scheduler") for i in range(5)])
    check_snapshot(snapshot, limited(maxWindowPods=4))
    with pytest.raises(InputError):
        check_snapshot(snapshot, limited(maxWindowPods=4), all_pending=True)


def test_a_backlog_past_the_limit_is_decided_window_by_window() -> None:
    snapshot, config = backlog(nodes=2, pending=10), limited(maxWindowPods=4)
    keys = [f"default/p{i}" for i in range(10)]
    placed = []
    for start in range(0, 10, 4):
        plan = schedule(snapshot, config, window_keys=keys[start:start + 4])
        placed += [a.pod for a in plan.assignments]
    assert sorted(placed) == sorted(keys)

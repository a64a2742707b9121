"""The default profile spreads a window as kube-scheduler would; the packing profile packs.

kube-scheduler scores each pod against what the pods before it left, so identical pods on empty
nodes go round-robin under LeastAllocated. The window model used to score every pod against the
cluster before the window, and piled whole classes onto one node (issue 14, item 1).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from adapters.snapshot_io import read_snapshot
from models.config import SchedulerConfig
from solver import schedule, validate
from tests.builders import make_node, make_pod, make_snapshot, spread

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "snapshots" / "quickstart.yaml"
DEFAULT = SchedulerConfig().with_overrides(time_limit_seconds=10.0, workers=2, seed=1)
PACKING = DEFAULT.model_copy(update={"profile": "packing"})


def per_node(plan) -> list[int]:
    return sorted(Counter(a.node for a in plan.assignments).values())


def identical(pods: int, nodes: int = 5):
    return make_snapshot(
        nodes=[make_node(f"node-{i}", cpu="4", memory="16Gi") for i in range(nodes)],
        pods=[make_pod(f"default/web-{i}", cpu="100m", memory="128Mi", labels={"app": "web"}) for i in range(pods)],
    )


@pytest.mark.parametrize(("pods", "want"), [(10, [2] * 5), (20, [4] * 5), (7, [1, 1, 1, 2, 2])])
def test_default_profile_spreads_identical_pods_like_kube_scheduler(pods: int, want: list[int]) -> None:
    snapshot = identical(pods)
    plan = schedule(snapshot, DEFAULT)
    assert validate(snapshot, plan, DEFAULT) == []
    assert plan.stats.engine == "cpsat" and not plan.stats.fallback
    assert per_node(plan) == want
    greedy = schedule(snapshot, DEFAULT, engine="greedy")
    assert per_node(greedy) == want


def test_packing_profile_still_packs() -> None:
    snapshot = identical(20)
    plan = schedule(snapshot, PACKING)
    assert validate(snapshot, plan, PACKING) == []
    assert per_node(plan) == [20]


def test_soft_hostname_spread_keeps_replicas_apart() -> None:
    """Two replicas with a ScheduleAnyway hostname spread, big nodes: they land on two nodes."""
    constraint = spread("kubernetes.io/hostname", max_skew=1, hard=False, labels={"app": "api"})
    snapshot = make_snapshot(
        nodes=[make_node(f"node-{i}", cpu="64", memory="256Gi") for i in range(3)],
        pods=[make_pod(f"default/api-{i}", cpu="10m", memory="16Mi", labels={"app": "api"}, spread=[constraint])
              for i in range(2)],
    )
    plan = schedule(snapshot, DEFAULT)
    assert validate(snapshot, plan, DEFAULT) == []
    assert per_node(plan) == [1, 1]


def test_quickstart_spreads_its_workers_and_api_replicas() -> None:
    snapshot = read_snapshot(QUICKSTART).snapshot
    plan = schedule(snapshot, DEFAULT)
    assert validate(snapshot, plan, DEFAULT) == []
    assert max(per_node(plan)) <= 3
    api_nodes = [a.node for a in plan.assignments if a.pod.startswith("shop/api-")]
    assert len(api_nodes) == len(set(api_nodes)) >= 4

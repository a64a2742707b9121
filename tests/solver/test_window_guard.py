"""Greedy's window guard (``plugins/pod_topology_spread/window_guard.py``): which guards a pod is
asked about. The guards are indexed by their selector's first label pair; a pod must get exactly
the guards a scan of every guard would give, in the order they came."""

from __future__ import annotations

import random

from models.config import SchedulerConfig
from solver.context import build_context
from solver.filtering import StaticFilters
from solver.plugins.pod_topology_spread.window_guard import SpreadGuard
from tests.builders import make_node, make_pod, make_snapshot, spread

CONFIG = SchedulerConfig()

# Selectors of every kind the index sorts: by a label pair (one or two equalities), by
# expressions alone (no pair: the open list), the empty one (every pod: the open list too), and
# none at all (a nil selector counts no pod; the open list).
SELECTORS = [
    {"matchLabels": {"app": "a"}},
    {"matchLabels": {"app": "b", "tier": "web"}},
    {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["web", "db"]}]},
    {"matchExpressions": [{"key": "app", "operator": "Exists"}]},
    {"matchLabels": {"app": "a"}, "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]}]},
    {},
    None,
]
LABELS = [{"app": "a"}, {"app": "a", "tier": "db"}, {"app": "b", "tier": "web"}, {"tier": "web"}, {"app": "c"}, {}]


def _scan(guard: SpreadGuard, pod) -> list:
    return [g for g in guard._order if g.namespace == pod.namespace and g.constraint.selector.matches(pod.labels)]


def test_a_pod_is_asked_about_exactly_the_guards_a_scan_finds_in_the_order_they_came() -> None:
    rng = random.Random(7)
    nodes = [make_node(f"n{i}", cpu="64", memory="256Gi", labels={"zone": f"z{i % 3}"}) for i in range(6)]
    placed = []
    for i in range(60):
        sel = rng.choice(SELECTORS)
        placed.append(make_pod(f"{rng.choice(['ns1', 'ns2'])}/p{i}", cpu="100m", labels=rng.choice(LABELS),
                               spread=[spread("zone", label_selector=sel, max_skew=5)]))
    asking = [make_pod(f"{ns}/q{j}-{i}", cpu="100m", labels=labels)
              for i, labels in enumerate(LABELS) for j, ns in enumerate(("ns1", "ns2"))]
    ctx = build_context(make_snapshot(nodes, placed + asking), CONFIG)
    guard = SpreadGuard(ctx.state, StaticFilters(ctx.nodes, ctx.window))
    by_key = {p.key: p for p in ctx.window}
    questions = 0
    for i, pod in enumerate(placed):
        guard.placed(by_key[pod.metadata.namespace + "/" + pod.metadata.name], i % len(nodes))
        if i % 7 == 0:  # asked between placements: each answer is extended by the guards since
            for q in asking:
                info = by_key[q.metadata.namespace + "/" + q.metadata.name]
                assert guard._guards_of(info) == _scan(guard, info), info.key
                questions += 1
    assert len(guard._order) > 20 and guard._index.open and guard._index.by_pair  # every kind of guard came
    assert questions > 100

"""``ClusterState.copy`` shares the per-node pod dicts, port counters and per-group node counters
until either side writes (copy on write): a copy and its source, each changed afterwards, must read
exactly as two states built apart — the greedy trials, the validator's replay and the kept
context state all copy and then change both sides."""

from __future__ import annotations

import random

import pytest

from models import SchedulerConfig
from solver.plugins.node_ports.book import ports_on
from solver.context import build_context
from solver.state import ClusterState, PodMatcher
from solver.terms import Selector
from tests.builders import make_node, make_pod, make_snapshot

NODES = [make_node(f"n{i}", cpu="64") for i in range(3)]
WEB = PodMatcher(Selector(equals=(("app", "web"),)), frozenset(["default"]), None, False)


def reading(state: ClusterState) -> tuple:
    return (
        [sorted(p) for p in state.pods_on],
        [sorted(c.items()) for c in ports_on(state)],
        state.used.tolist(),
        sorted(state.where.items()),
        state.match_counts(WEB).tolist(),
        sorted((k, sorted(c.items())) for k, (_, c) in state._groups.items()),
    )


@pytest.mark.parametrize("seed", range(20))
def test_a_copy_and_its_source_change_apart(seed: int) -> None:
    rng = random.Random(seed)
    pods = [make_pod(f"default/p{i}", cpu="100m", labels={"app": rng.choice(["web", "db"])},
                     host_ports=[8000 + rng.randrange(3)] if rng.random() < 0.3 else ()) for i in range(24)]
    ctx = build_context(make_snapshot(NODES, pods), SchedulerConfig())
    window = list(ctx.window)
    states = [ctx.state]
    twins = [ClusterState(ctx.state.nodes, ctx.state.resources)]  # built apart, changed alike
    for step in range(60):
        i = rng.randrange(len(states))
        if rng.random() < 0.2:
            states.append(states[i].copy())
            twin = ClusterState(ctx.state.nodes, ctx.state.resources)
            for pod, n in twins[i].pods():
                twin.add(pod, n)
            twins.append(twin)
            continue
        state, twin = states[i], twins[i]
        placed = [p for p in window if p.key in state.where]
        if placed and rng.random() < 0.4:
            pod = rng.choice(placed)
            state.remove(pod)
            twin.remove(pod)
        else:
            free = [p for p in window if p.key not in state.where]
            if free:
                pod, n = rng.choice(free), rng.randrange(len(NODES))
                state.add(pod, n)
                twin.add(pod, n)
    for state, twin in zip(states, twins):
        assert reading(state) == reading(twin)

"""The state's kept topology-domain counts (``ClusterState.domain_counts``) and its changed-node
query (``ClusterState.changed_since``): what greedy's spread PreFilter, window guard and spread
score read instead of summing every node per pod. Whatever happened to the state (adds,
removes, copies, a kept state forgetting its records), an answer must equal a count made afresh,
and an answer handed out earlier must not change under its holder (a cycle's PreFilter counts
are those of its own turn)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from models import SchedulerConfig
from solver.context import build_context
from solver.state import ClusterState, PodMatcher
from solver.terms import Selector
from tests.builders import make_node, make_pod, make_snapshot

ZONE = "topology.kubernetes.io/zone"
NODES = [make_node(f"n{i}", cpu="64", labels={ZONE: f"z{i % 3}"} if i != 5 else {}) for i in range(8)]
WEB = PodMatcher(Selector(equals=(("app", "web"),)), frozenset(["default"]), None, False)


def afresh(state: ClusterState, eligible: np.ndarray) -> tuple[list[int], list[bool]]:
    """The counts summed over every node, as the filter did before the state kept them."""
    ids, values = state.domains(ZONE)
    counts = [0] * len(values)
    present = [False] * len(values)
    for pod, node in state.pods():
        if eligible[node] and ids[node] >= 0 and WEB.matches(pod):
            counts[ids[node]] += 1
    for node in range(len(state.nodes)):
        if eligible[node] and ids[node] >= 0:
            present[ids[node]] = True
    return counts, present


@pytest.mark.parametrize("seed", range(12))
def test_kept_counts_equal_a_fresh_count_through_adds_removes_and_copies(seed: int) -> None:
    rng = random.Random(seed)
    pods = [make_pod(f"default/p{i}", cpu="100m", labels={"app": rng.choice(["web", "db"])}) for i in range(30)]
    ctx = build_context(make_snapshot(NODES, pods), SchedulerConfig())
    window = list(ctx.window)
    masks = [np.ones(len(NODES), dtype=bool), np.array([i % 2 == 0 for i in range(len(NODES))])]
    states = [ctx.state.copy()]
    held: list[tuple[np.ndarray, list[int]]] = []  # answers handed out, and what they said then
    for _ in range(120):
        i = rng.randrange(len(states))
        state = states[i]
        roll = rng.random()
        if roll < 0.1:
            states.append(state.copy())
        elif roll < 0.15:
            state.forget_touched()
            state.forget_changes()
        elif roll < 0.45 and state.where:
            key = rng.choice(sorted(state.where))
            state.remove(next(p for p in window if p.key == key))
        else:
            free = [p for p in window if p.key not in state.where]
            if free:
                state.add(rng.choice(free), rng.randrange(len(NODES)))
        eligible = rng.choice(masks)
        counts, present, counted = state.domain_counts(WEB, ZONE, eligible)
        assert (counts.tolist(), present.tolist()) == afresh(state, eligible)
        assert counted.tolist() == (eligible & (state.domains(ZONE)[0] >= 0)).tolist()
        assert not counts.flags.writeable and not present.flags.writeable
        held.append((counts, counts.tolist()))
    for counts, then in held:
        assert counts.tolist() == then


def test_changed_since_names_every_node_changed_after_the_point() -> None:
    nodes = [make_node(f"n{i}", cpu="64") for i in range(300)]
    pods = [make_pod(f"default/p{i}", cpu="100m", labels={"app": "web"}) for i in range(400)]
    ctx = build_context(make_snapshot(nodes, pods), SchedulerConfig())
    state = ctx.state.copy()
    rng = random.Random(7)
    for pod in ctx.window:
        state.add(pod, rng.randrange(len(nodes)))
    # A short record since the point is read entry by entry, a long one from the stamps: the
    # same nodes either way (those with an entry from the point on), at every point.
    for seen in range(len(state.touched) + 1):
        want = sorted(set(state.touched[seen:]))
        assert sorted(state.changed_since(seen).tolist()) == want, seen

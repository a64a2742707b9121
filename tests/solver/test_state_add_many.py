"""``ClusterState.add_many`` (the running pods entering a fresh context's state as per-node
aggregates) must leave the state reading exactly as adding the pods one by one does: what the
node's room, ports, group counts, anti-affinity owners and claims say is what every rule reads."""

from __future__ import annotations

import random

import pytest

from models import SchedulerConfig
from solver.plugins.volumes.volume_restrictions.book import volume_book
from solver.plugins.inter_pod_affinity.book import term_book
from solver.plugins.node_ports.book import ports_on
from solver.context import build_context
from solver.state import ClusterState, PodMatcher
from solver.terms import Selector
from tests.builders import make_node, make_pod, make_snapshot, term

NODES = [make_node(f"n{i}", cpu="64", labels={"zone": f"z{i % 2}"}) for i in range(4)]
WEB = PodMatcher(Selector(equals=(("app", "web"),)), frozenset(["default"]), None, False)


def reading(state: ClusterState) -> tuple:
    return (
        [list(p) for p in state.pods_on],  # the order too: it is the order pods are tried as victims
        [sorted(c.items()) for c in ports_on(state)],
        state.used.tolist(),
        state.free.tolist(),
        state.nonzero.tolist(),
        list(state.where.items()),
        sorted(state.priorities.items()),
        [(k, list(c.items()), pod.key) for k, (pod, c) in state._groups.items()],
        [(t, c.tolist()) for t, c in term_book(state).owners.items()],
        list(term_book(state).scored),
        sorted(volume_book(state).claim_users.items()),
        state.match_counts(WEB).tolist(),
        sorted(set(state.touched)),
    )


def cluster(seed: int) -> list:
    rng = random.Random(seed)
    pods = []
    for i in range(40):
        app = rng.choice(["web", "db", "cache"])
        pods.append(make_pod(
            f"{rng.choice(['default', 'other'])}/p{i}", cpu=rng.choice(["100m", "250m", "1"]),
            memory=rng.choice([None, "64Mi"]), labels={"app": app},
            node=rng.choice([n.metadata.name for n in NODES]),
            priority=rng.choice([None, 0, 100]),
            host_ports=[8000 + rng.randrange(2)] if rng.random() < 0.2 else (),
            pod_anti_affinity=[term({"app": app}, "kubernetes.io/hostname")] if rng.random() < 0.2 else (),
            pod_affinity=[term({"app": "db"}, "zone")] if rng.random() < 0.1 else (),
            terminating=rng.random() < 0.1,
            claims=[f"c{i}"] if rng.random() < 0.1 else (),
        ))
    return pods


@pytest.mark.parametrize("seed", range(10))
def test_running_pods_added_as_aggregates_read_as_added_one_by_one(seed: int) -> None:
    ctx = build_context(make_snapshot(NODES, cluster(seed)), SchedulerConfig())
    placed = [(pod, ctx.state.where[pod.key]) for pod in ctx.bound]
    assert placed
    one_by_one = ClusterState(ctx.state.nodes, ctx.state.resources)
    for pod, node in placed:
        one_by_one.add(pod, node)
    aggregated = ClusterState(ctx.state.nodes, ctx.state.resources)
    aggregated.add_many(placed)
    assert reading(aggregated) == reading(one_by_one)
    # and both go on alike: a pod taken out of each leaves them equal
    pod, _ = placed[seed % len(placed)]
    one_by_one.remove(pod)
    aggregated.remove(pod)
    assert reading(aggregated) == reading(one_by_one)


def test_a_pod_already_in_the_state_is_refused_as_add_refuses_it() -> None:
    ctx = build_context(make_snapshot(NODES, cluster(0)), SchedulerConfig())
    placed = [(pod, ctx.state.where[pod.key]) for pod in ctx.bound]
    state = ClusterState(ctx.state.nodes, ctx.state.resources)
    state.add_many(placed[:3])
    with pytest.raises(ValueError, match="already on node"):
        state.add_many(placed[2:5])

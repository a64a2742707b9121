"""A dynamic filter is a plugin's ``cycle`` hook (``plugin_api.CycleFilter``): greedy's filter cycle
runs every hook the registry lists and names none itself. A toy rule that exists only as an entry
of ``registry.CYCLE_FILTERS`` refuses nodes in greedy's placements, in the nodes' statuses and in
the FitError message a user reads; a score plugin the score cache does not know still counts."""

from __future__ import annotations

import numpy as np
import pytest

from models.config import SchedulerConfig
from solver.context import build_context
from solver.filtering import Cycle, StaticFilters
from solver.framework import SUCCESS, unschedulable
from solver.greedy import schedule_greedy
from solver.plugin_api import NodeByNode
from solver.plugins import registry
from solver.scoring.cache import ScoreCache
from tests.builders import make_node, make_pod, make_snapshot

REFUSED = "node(s) were refused by the toy rule"


class _Toy(NodeByNode):
    """Refuses the nodes labelled ``toy/refuse``; ``local``: reads only the node itself."""

    def __init__(self, nodes, local: bool) -> None:
        self.nodes, self.local = nodes, local

    def status(self, node):
        return unschedulable("Toy", REFUSED) if "toy/refuse" in node.labels else SUCCESS


def _snapshot():
    nodes = [make_node("a", labels={"toy/refuse": "1"}), make_node("b"), make_node("c", labels={"toy/refuse": "1"})]
    pods = [make_pod("default/small", cpu="1"), make_pod("default/big", cpu="4")]
    return make_snapshot(nodes, pods)


@pytest.mark.parametrize("local", [False, True], ids=["cluster-wide", "node-local"])
def test_a_hook_listed_in_the_registry_filters_greedy_and_names_its_reason(monkeypatch, local: bool) -> None:
    ctx = build_context(_snapshot(), SchedulerConfig())
    without = schedule_greedy(ctx)
    assert set(without.placements) == {"default/small", "default/big"}  # every node fits without the rule

    monkeypatch.setattr(registry, "CYCLE_FILTERS",
                        registry.CYCLE_FILTERS + (lambda pod, state, static, version: _Toy(static.nodes, local),))
    ctx = build_context(_snapshot(), SchedulerConfig())
    result = schedule_greedy(ctx, allow_preemption=False)
    names = [n.name for n in ctx.nodes]
    assert {k: names[v] for k, v in result.placements.items()} == {"default/big": "b"}
    message = result.unschedulable["default/small"]  # b is full after big (queue order)
    assert message.startswith("0/3 nodes are available:"), message
    assert f"2 {REFUSED}" in message and "1 Insufficient cpu" in message, message


def test_per_node_and_all_node_statuses_agree_with_a_hook(monkeypatch) -> None:
    monkeypatch.setattr(registry, "CYCLE_FILTERS",
                        registry.CYCLE_FILTERS + (lambda pod, state, static, version: _Toy(static.nodes, False),))
    ctx = build_context(_snapshot(), SchedulerConfig())
    pod = next(p for p in ctx.window if p.key == "default/small")
    cycle = Cycle(pod, ctx.state, StaticFilters(ctx.nodes, ctx.window))
    assert [s.reasons for s in cycle.statuses()] == [cycle.status(n).reasons for n in ctx.nodes]
    assert [ctx.nodes[n].name for n in cycle.feasible()] == ["b"]


class _NameLength:
    """A toy score plugin: a node scores its name's length (10 per character, at most 100)."""

    NAME = "ToyNameLength"

    @staticmethod
    def score(pod, nodes, state, sctx):
        return np.array([min(100, 10 * len(state.nodes[n].name)) for n in nodes.tolist()], dtype=np.int64)


def test_a_score_plugin_the_cache_does_not_know_counts_in_its_totals() -> None:
    """Greedy scores through ``ScoreCache``; a score plugin added to the list (no line in the
    cache) still counts, as ``score_nodes`` counts it, and decides where a pod goes."""
    import solver.scoring as scoring
    from solver.plugin_api import Plugin
    from solver.plugins import registry

    nodes = [make_node("a"), make_node("bbbbbbbbbb"), make_node("cc")]
    snapshot = make_snapshot(nodes, [make_pod("default/p", cpu="1")])
    ctx = build_context(snapshot, SchedulerConfig())
    assert [ctx.nodes[v].name for v in schedule_greedy(ctx).placements.values()] != ["bbbbbbbbbb"]

    with registry.registered(Plugin(_NameLength.NAME, score=_NameLength)):
        ctx = build_context(snapshot, SchedulerConfig())
        sctx = scoring.ScoreContext.of(ctx)
        every = np.arange(len(ctx.nodes), dtype=np.int64)
        assert ScoreCache(ctx.state.copy(), sctx).totals(ctx.window[0], every).tolist() == \
            scoring.score_nodes(ctx.window[0], every, ctx.state, sctx).tolist()
        for score_cache in (True, False):
            placed = schedule_greedy(ctx, score_cache=score_cache).placements
            assert [ctx.nodes[v].name for v in placed.values()] == ["bbbbbbbbbb"]
    assert _NameLength not in scoring.SCORE_PLUGINS  # taken out again

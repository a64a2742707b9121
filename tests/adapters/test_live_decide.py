"""The live scheduler decides each window with one ``solver.decide`` call and acts on what the
decision's typed fields say: a model's plan the validator refuses is replaced by greedy's,
validated too, and counted; a solver that fails is replaced by greedy without a second call."""

from __future__ import annotations

import sys
from typing import Any, Callable, Iterator

import pytest

import solver.api as api
from tests.adapters.live_harness import Cluster, cluster_factory, fast_config, fast_options, node, pod, wait_for

# Greedy spreads the two small pods over both nodes and has no room left for a large one; the
# model puts the small ones together and places a large one as well.
NODES = [node("n1", cpu="2"), node("n2", cpu="2")]
PODS = [pod("a1", cpu="1"), pod("a2", cpu="1"), pod("b1", cpu="2"), pod("b2", cpu="2")]


@pytest.fixture
def make_cluster() -> Iterator[Callable[..., Cluster]]:
    yield from cluster_factory(NODES)


def _counter(metric: Any) -> float:
    return sum(s.value for m in metric.collect() for s in m.samples if s.name.endswith("_total"))


def _one_window(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A scheduler that sends every window to the model, the four pods as one window, and every
    decision it gets recorded."""
    options = fast_options(engine="cpsat", quick_window=0, adaptive_window=False, window_wait=1.0)
    sched = cluster.scheduler(fast_config(), options)
    calls: list[Any] = []
    real = api.decide

    def counting(request: Any) -> Any:
        decision = real(request)
        calls.append(decision)
        return decision

    monkeypatch.setattr("solver.decide", counting)  # what the scheduler calls, looked up per window
    cluster.create(*PODS)
    return sched, calls


def test_a_refused_model_plan_gives_greedys_validated_plan(make_cluster: Callable[..., Cluster],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    module = sys.modules["solver.validate"]
    real_validate = module.validate

    def refuse_the_models(snapshot: Any, plan: Any, *args: Any, **kwargs: Any) -> list[str]:
        if plan.stats.plan_from == "solver":
            return ["capacity: node n1 cpu over by 1m"]
        return real_validate(snapshot, plan, *args, **kwargs)

    monkeypatch.setattr(module, "validate", refuse_the_models)
    cluster = make_cluster()
    sched, calls = _one_window(cluster, monkeypatch)
    assert wait_for(lambda: len(cluster.bound()) >= 2, timeout=15)
    assert wait_for(lambda: calls, timeout=5)
    first = calls[0]
    assert first.solver_ran and first.validated and first.source.value == "fallback"
    assert first.fallback_reason.startswith("solver plan failed validation")
    # the model's plan, then the pass that follows it by kube's turns (it places more than
    # greedy's, ``guided.rescue``), both refused; greedy's passes
    assert (first.validations, [r.source.value for r in first.rejected]) == (3, ["solver", "solver"])
    assert _counter(sched.metrics.invalid_plans) >= 1 and _counter(sched.metrics.fallbacks) >= 1
    assert sorted(cluster.bound()) == ["default/a1", "default/a2"]  # greedy's plan, as it is
    assert cluster.violations() == [] and cluster.double_binds() == []


def test_a_failing_solver_is_replaced_by_greedy_in_the_same_call(make_cluster: Callable[..., Cluster],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(ctx: Any, **_: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(api, "solve_window", boom)
    cluster = make_cluster()
    sched, calls = _one_window(cluster, monkeypatch)
    assert wait_for(lambda: len(cluster.bound()) >= 2, timeout=15)
    assert wait_for(lambda: calls, timeout=5)
    first = calls[0]
    assert first.source.value == "fallback" and first.validated
    assert first.fallback_reason == "the solver failed: RuntimeError: boom"
    assert (first.greedy_runs, first.validations) == (1, 1)
    assert _counter(sched.metrics.fallbacks) >= 1
    assert cluster.violations() == []

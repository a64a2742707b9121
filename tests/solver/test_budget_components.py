"""Classes that may evict pods of one PodDisruptionBudget are decided in one model.

Components split a window where nothing ties its classes together; a budget does: its allowance
is the whole plan's, so two models that each spend it in full evict more than it allows between
them. A 1,000-CPU pod of pool a may evict either a database pod (covered by the budget, priority
0) or a filler pod (no budget, priority 10); a pod of pool b can only evict the other database
pod. Apart, pool a's model evicts the database pod (the lower-priority victim, and the budget
seems to allow it) and the plan breaks the budget; together, it evicts the filler and the plan
keeps it."""

from __future__ import annotations

from datetime import timedelta

import pytest

from models.config import SchedulerConfig
from solver import schedule, validate
from solver.context import build_context
from solver.cpsat.components import budget_links
from tests.builders import T0, make_node, make_pdb, make_pod, make_snapshot


def _window():
    nodes = [make_node("a-1", cpu="2", memory="8Gi", labels={"pool": "a"}),
             make_node("a-2", cpu="2", memory="8Gi", labels={"pool": "a"}),
             make_node("b-1", cpu="2", memory="8Gi", labels={"pool": "b"})]
    pods = [make_pod("default/db-0", cpu="2", node="a-1", priority=0, labels={"app": "db"}),
            make_pod("default/filler", cpu="2", node="a-2", priority=10, labels={"app": "filler"}),
            make_pod("default/db-1", cpu="2", node="b-1", priority=0, labels={"app": "db"}),
            make_pod("default/in-a", cpu="2", priority=1000, node_selector={"pool": "a"}, created=T0),
            make_pod("default/in-b", cpu="2", priority=1000, node_selector={"pool": "b"},
                     created=T0 + timedelta(seconds=1))]
    return make_snapshot(nodes, pods, pdbs=[make_pdb("default/db", {"app": "db"}, max_unavailable=1, allowed=1)])


@pytest.mark.parametrize("pdb", ["soft", "hard"])
def test_two_pools_sharing_a_budget_keep_it_between_them(pdb: str) -> None:
    snapshot = _window()
    config = SchedulerConfig().with_overrides(time_limit_seconds=10.0, workers=1, seed=0)
    config = config.model_copy(update={"preemption": config.preemption.model_copy(update={"pdb": pdb})})
    plan = schedule(snapshot, config)
    assert validate(snapshot, plan, config) == []
    assert {a.pod: a.node for a in plan.assignments} == {"default/in-a": "a-2", "default/in-b": "b-1"}
    assert sorted(v.pod for v in plan.preemptions) == ["default/db-1", "default/filler"]
    assert plan.stats.plan_from == "solver", plan.stats.plan_reason


def test_the_classes_a_budget_ties_are_named_and_others_are_not() -> None:
    snapshot = _window()
    config = SchedulerConfig()
    ctx = build_context(snapshot, config)
    ids = {c.rep.key: c.id for c in ctx.classes}
    from solver.cpsat.build import candidates
    from solver.filtering import StaticFilters

    cand, _ = candidates(ctx, ctx.classes, StaticFilters(ctx.nodes, ctx.window), {}, True)
    assert budget_links(ctx, ctx.classes, cand, True) == [sorted([ids["default/in-a"], ids["default/in-b"]])]
    assert budget_links(ctx, ctx.classes, cand, False) == []


def test_budgets_allowing_nothing_tie_no_pools_together() -> None:
    # Under hard budgets a pod two budgets select is covered by one more budget, allowing none,
    # that spans namespaces: four namespaces, each its own pool and budgets, became one model.
    # A budget that allows nothing has nothing to share between models.
    nodes, pods, pdbs = [], [], []
    for i in range(4):
        ns = f"ns{i}"
        nodes.append(make_node(f"n{i}", cpu="2", labels={"kubernetes.io/hostname": f"n{i}"}))
        pods += [make_pod(f"{ns}/twice", cpu="1", priority=0, labels={"app": "a", "tier": "x"}, node=f"n{i}"),
                 make_pod(f"{ns}/free", cpu="1", priority=0, labels={"app": "b"}, node=f"n{i}"),
                 make_pod(f"{ns}/high", cpu="1", priority=100, node_selector={"kubernetes.io/hostname": f"n{i}"})]
        pdbs += [make_pdb(f"{ns}/by-app", {"app": "a"}, allowed=1), make_pdb(f"{ns}/by-tier", {"tier": "x"}, allowed=1)]
    snapshot = make_snapshot(nodes, pods, pdbs=pdbs)
    base = SchedulerConfig().with_overrides(time_limit_seconds=5.0, workers=1, seed=0)
    hard = base.model_copy(update={"preemption": base.preemption.model_copy(update={"pdb": "hard"})})
    plan = schedule(snapshot, hard)
    assert validate(snapshot, plan, hard) == []
    assert plan.stats.components == 4
    assert sorted(p.pod for p in plan.preemptions) == [f"ns{i}/free" for i in range(4)]

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

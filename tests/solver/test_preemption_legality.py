"""Who may use the room a preemption frees (issue 13's wrong plans).

kube-scheduler places pods one at a time, highest priority first, and a pod preempts only when it
does not fit as the node is at its turn; its victims are the fewest lower-priority pods that make
it fit. So a victim is evicted only when the pods that outrank it cannot fit without its room, and
its room never goes to a pod that could not have preempted it (equal or lower priority, or
``preemptionPolicy: Never``). Each case runs both engines; every plan must pass the validator, and
the validator must reject the plans cpsat used to print.
"""

from __future__ import annotations

import pytest

from models import Assignment, Plan, PlanStats, Preemption
from models.config import SchedulerConfig
from solver import schedule, validate
from tests.builders import make_node, make_pdb, make_pod, make_pod_group, make_snapshot

SOLVER = SchedulerConfig().with_overrides(time_limit_seconds=10.0, workers=2, seed=1)
FALLBACK = SOLVER.with_overrides(time_limit_seconds=0.0)
SOFT_PDB = SOLVER
ENGINES = pytest.mark.parametrize("config", [SOLVER, FALLBACK], ids=["cpsat", "greedy-fallback"])


def placed(plan) -> dict[str, str]:
    return {a.pod: a.node for a in plan.assignments}


def evicted(plan) -> set[str]:
    return {p.pod for p in plan.preemptions}


def plan_of(snapshot, config):
    plan = schedule(snapshot, config)
    assert validate(snapshot, plan, config) == []
    return plan


def equal_priority_window():
    """One 2-CPU node; running-a (priority 0, 1 CPU); pending high (1000, 1 CPU) and low (0, 1 CPU)."""
    return make_snapshot(
        nodes=[make_node("node-a", cpu="2")],
        pods=[
            make_pod("default/running-a", cpu="1", node="node-a", priority=0),
            make_pod("default/high", cpu="1", priority=1000),
            make_pod("default/low", cpu="1", priority=0),
        ],
    )


def daemonset_port_window():
    """node-exporter holds host port 9100; high fits without evicting it; scraper wants 9100."""
    exporter = make_pod("monitoring/node-exporter", cpu="100m", node="node-a", priority=0, host_ports=[9100])
    return make_snapshot(
        nodes=[make_node("node-a", cpu="2")],
        pods=[
            exporter,
            make_pod("default/high", cpu="1", priority=1000),
            make_pod("default/scraper", cpu="100m", priority=0, host_ports=[9100]),
        ],
    )


def pdb_sibling_window():
    """web-a runs under a PDB that allows no disruption; high fits beside it; web-b, web-a's sibling
    of the same priority, could only take web-a's place."""
    return make_snapshot(
        nodes=[make_node("node-a", cpu="2")],
        pods=[
            make_pod("default/web-a", cpu="1", node="node-a", priority=0, labels={"app": "web"}),
            make_pod("default/high", cpu="1", priority=1000),
            make_pod("default/web-b", cpu="1", priority=0, labels={"app": "web"}),
        ],
        pdbs=[make_pdb("default/web", {"app": "web"}, allowed=0)],
    )


@ENGINES
@pytest.mark.parametrize(
    ("window", "victim", "user"),
    [
        (equal_priority_window, "default/running-a", "default/low"),
        (daemonset_port_window, "monitoring/node-exporter", "default/scraper"),
        (pdb_sibling_window, "default/web-a", "default/web-b"),
    ],
    ids=["equal-priority-takes-the-room", "daemonset-host-port", "pdb-zero-sibling"],
)
def test_no_eviction_that_only_a_pod_unable_to_preempt_needs(config, window, victim, user) -> None:
    snapshot = window()
    plan = plan_of(snapshot, config)
    assert evicted(plan) == set(), plan.preemptions
    assert placed(plan) == {"default/high": "node-a"}
    assert user in {u.pod for u in plan.unschedulable}
    # The plan cpsat used to print: the victim evicted "for high", its room given to the other pod.
    old = Plan(
        assignments=[Assignment(pod="default/high", node="node-a"), Assignment(pod=user, node="node-a")],
        preemptions=[Preemption(pod=victim, node="node-a", preemptor="default/high")],
        stats=PlanStats(engine="cpsat", status="OPTIMAL"),
    )
    problems = validate(snapshot, old, config)
    assert any(victim in line and user in line and "fit" in line for line in problems), problems


@ENGINES
def test_an_eviction_the_preemptor_needs_is_kept(config) -> None:
    """high needs 2 CPU: running-a must go, and the plan says so."""
    snapshot = make_snapshot(
        nodes=[make_node("node-a", cpu="2")],
        pods=[
            make_pod("default/running-a", cpu="1", node="node-a", priority=0),
            make_pod("default/high", cpu="2", priority=1000),
        ],
    )
    plan = plan_of(snapshot, config)
    assert evicted(plan) == {"default/running-a"}
    assert placed(plan) == {"default/high": "node-a"}


def two_levels_window():
    """A 4-CPU node running big (priority 100, 2 CPU) and tiny (0, 1 CPU); pending high (1000,
    3 CPU) and small (50, 1 CPU)."""
    return make_snapshot(
        nodes=[make_node("node-a", cpu="4")],
        pods=[
            make_pod("default/big", cpu="2", node="node-a", priority=100),
            make_pod("default/tiny", cpu="1", node="node-a", priority=0),
            make_pod("default/high", cpu="3", priority=1000),
            make_pod("default/small", cpu="1", priority=50),
        ],
    )


@ENGINES
def test_a_lower_pod_may_use_what_the_preemptor_left(config) -> None:
    """high must evict big to fit; small then needs tiny's room, which it may take (it outranks
    tiny). kube-scheduler allows this: each eviction is needed by a pod that outranks its victim."""
    plan = plan_of(two_levels_window(), config)
    assert placed(plan) == {"default/high": "node-a", "default/small": "node-a"}
    assert evicted(plan) == {"default/big", "default/tiny"}


@ENGINES
def test_every_assignment_on_a_node_losing_pods_is_nominated(config) -> None:
    """A consumer binding assignments at once must see which ones wait for victims to leave."""
    plan = plan_of(two_levels_window(), config)
    assert {n.pod: n.node for n in plan.nominations} == {"default/high": "node-a", "default/small": "node-a"}


def test_validator_rejects_a_preemptor_from_the_victims_own_gang() -> None:
    snapshot = make_snapshot(
        nodes=[make_node("node-a", cpu="2")],
        pods=[
            make_pod("default/train-0", cpu="2", node="node-a", priority=0, group="train"),
            make_pod("default/train-1", cpu="2", priority=1000, group="train"),
        ],
        pod_groups=[make_pod_group("default/train", 1)],
    )
    plan = Plan(
        assignments=[Assignment(pod="default/train-1", node="node-a")],
        preemptions=[Preemption(pod="default/train-0", node="node-a", preemptor="default/train-1")],
        stats=PlanStats(engine="cpsat", status="OPTIMAL"),
    )
    problems = validate(snapshot, plan, SOLVER)
    assert any("own PodGroup" in line and "default/train-0" in line for line in problems), problems


def test_best_of_weighs_both_plans_victims_on_one_scale() -> None:
    """Three priority-0 victims cost less than one priority-5 victim, as the model orders them;
    weighing each plan by its own victims' tiers used to rank them the other way round."""
    from solver.context import build_context
    from solver.cpsat.solve import not_worse, tier_weights
    from solver.greedy import Victim

    snapshot = make_snapshot(
        nodes=[make_node("node-a", cpu="4")],
        pods=[
            *(make_pod(f"default/batch-{i}", cpu="1", node="node-a", priority=0) for i in range(3)),
            make_pod("default/service", cpu="3", node="node-a", priority=5),
            make_pod("default/high", cpu="3", priority=1000),
        ],
    )
    ctx = build_context(snapshot, SOLVER)
    running = {p.key: p for p in ctx.state.pods_on[0].values()}
    weights = tier_weights([p.priority for p in ctx.window])
    three_low = [Victim(running[f"default/batch-{i}"], 0, "default/high") for i in range(3)]
    one_higher = [Victim(running["default/service"], 0, "default/high")]
    placements = {"default/high": 0}
    assert not_worse(ctx, (placements, three_low), (placements, one_higher), weights)
    assert not not_worse(ctx, (placements, one_higher), (placements, three_low), weights)


def test_a_budget_steered_preemption_and_a_later_one_make_a_legal_plan() -> None:
    """kube-scheduler's own order (found by the long property run in greedy's plans): `high`
    reprieves the budget-protected `low-a` and evicts `mid-b` instead; `mid` then evicts `low-a`
    (the only way it fits, the budget notwithstanding: `pdb: soft`). In the final state `high`
    would fit with `mid-b` kept, but only because `low-a` is gone — for `mid`, which comes after
    `high` in the queue. The plan is kube-scheduler's, and the validator accepts it."""
    node = make_node("n1", cpu="8", pods=2)
    snapshot = make_snapshot(
        [node],
        [
            make_pod("default/low-a", cpu="100m", labels={"app": "a"}, priority=0, node="n1"),
            make_pod("default/mid-b", cpu="100m", labels={"app": "b"}, priority=10, node="n1"),
            make_pod("default/high", cpu="100m", priority=100),
            make_pod("default/mid", cpu="100m", priority=10),
        ],
        pdbs=[make_pdb("default/keep-a", {"app": "a"}, min_available=1, allowed=0)],
    )
    greedy = schedule(snapshot, FALLBACK, engine="greedy")
    assert {(p.pod, p.preemptor) for p in greedy.preemptions} == {
        ("default/mid-b", "default/high"), ("default/low-a", "default/mid")}
    assert validate(snapshot, greedy, FALLBACK) == []
    plan = schedule(snapshot, SOLVER)
    assert validate(snapshot, plan, SOLVER) == [] and len(plan.assignments) >= len(greedy.assignments)


def test_an_overcommitted_resource_is_a_need_only_for_a_placed_pod_asking_for_it() -> None:
    """Found by the long run: a node whose running pods already overcommit CPU. The model read
    "the outranking pods need more CPU than is free" as true with no such pod placed there (free
    is negative), so it evicted a pod whose room only a pod unable to preempt needed."""
    nodes = [make_node("n0", cpu="1", pods=3, labels={"disk": "ssd"}), make_node("n1", cpu="1", pods=2)]
    running = [make_pod("default/r0", cpu="100m", node="n0"), make_pod("default/r1", cpu="1", node="n0")]
    pending = [
        make_pod("default/cpu-high", cpu="100m", priority=10),  # may go to n0 or n1
        make_pod("default/slot-high", cpu="0", priority=10, node_selector={"disk": "ssd"}),
        make_pod("default/slot-low", cpu="0", priority=0, preemption_policy="Never", node_selector={"disk": "ssd"}),
    ]
    snapshot = make_snapshot(nodes, [*running, *pending])
    plan = schedule(snapshot, SOLVER)
    assert validate(snapshot, plan, SOLVER) == []
    assert "solver plan failed validation" not in (plan.stats.fallback_reason or "") + (plan.stats.plan_reason or ""), \
        plan.stats
    if evicted(plan):
        assert placed(plan).get("default/cpu-high") == "n0"  # the one pod whose need is real

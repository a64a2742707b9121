"""Only evictions kube-scheduler's own preemption makes (issue 33): the plan's placements replayed
in queue order, each pod's preemption on its node as ``SelectVictimsOnNode`` does it, is the rule
for the validator, the model and greedy alike (``plugins/preemption/replay.py``).

The first case is the one the issue was filed with, run as a user runs it: ``schedule`` with both
engines and ``validate`` of the plan the final-state rule used to print (and accept).
"""

from __future__ import annotations

import json
import time
from datetime import timedelta
from pathlib import Path

import pytest

from adapters.cli import main
from models import Assignment, Plan, PlanStats, Preemption
from models.config import SchedulerConfig
from solver import schedule, validate
from solver.context import build_context
from solver.filtering import StaticFilters
from solver.plugins.preemption.replay import replay
from tests.builders import T0, make_node, make_pod, make_snapshot

SOLVER = SchedulerConfig().with_overrides(time_limit_seconds=10.0, workers=2, seed=1)


def _pod(name: str, cpu: str, priority: int, *, node: str = "", created: int = 0, pinned: bool = False) -> str:
    spec = {"priority": priority, "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}]}
    if node:
        spec["nodeName"] = node
    else:
        spec["schedulerName"] = "cpsat-scheduler"
    if pinned:
        spec["nodeSelector"] = {"kubernetes.io/hostname": "node-1"}
    meta = {"name": name, "namespace": "default", "creationTimestamp": f"2026-01-01T00:00:{created:02d}Z"}
    status = {"phase": "Running", "startTime": f"2026-01-01T00:00:{created:02d}Z"} if node else {}
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status})


# One node of 4 CPUs; four running pods; four pending, two of them at priority 1000.
ISSUE_CASE = "\n".join([
    "apiVersion: v1", "kind: List", "items:",
    "- " + json.dumps({"apiVersion": "v1", "kind": "Node",
                       "metadata": {"name": "node-1", "labels": {"kubernetes.io/hostname": "node-1"}},
                       "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}}}),
    "- " + _pod("run-a", "500m", 0, node="node-1", created=1),
    "- " + _pod("run-b", "100m", 100, node="node-1", created=2),
    "- " + _pod("run-c", "250m", 0, node="node-1", created=3),
    "- " + _pod("run-d", "100m", 10, node="node-1", created=4),
    "- " + _pod("p4-web", "2", 1000, created=10),
    "- " + _pod("p9-db", "500m", 1000, created=11),
    "- " + _pod("p16-api", "1", 500, created=12),
    "- " + _pod("p7-web", "500m", 100, created=13, pinned=True),
]) + "\n"

# What the model printed before (and the validator accepted): all four running pods evicted,
# p7-web (priority 100) in run-b's (priority 100) room.
ISSUE_WRONG = {
    "assignments": [{"pod": f"default/{p}", "node": "node-1"} for p in ("p4-web", "p9-db", "p16-api", "p7-web")],
    "preemptions": [
        {"pod": "default/run-a", "node": "node-1", "preemptor": "default/p7-web"},
        {"pod": "default/run-b", "node": "node-1", "preemptor": "default/p4-web"},
        {"pod": "default/run-c", "node": "node-1", "preemptor": "default/p4-web"},
        {"pod": "default/run-d", "node": "node-1", "preemptor": "default/p4-web"},
    ],
    "unschedulable": [],
}


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("engine", ["cpsat", "greedy"])
def test_the_issue_case_evicts_what_kube_scheduler_evicts(engine: str, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """p4-web and p9-db fit as they are; p16-api preempts run-a alone (run-b, run-d and run-c are
    reprieved); p7-web (priority 100) may not preempt run-b (priority 100) and stays pending."""
    snapshot = tmp_path / "snapshot.yaml"
    snapshot.write_text(ISSUE_CASE)
    code, out, err = _run(capsys, "schedule", str(snapshot), "--engine", engine, "-o", "json")
    assert code == 0, err
    plan = json.loads(out)
    assert {a["pod"] for a in plan["assignments"]} == {"default/p4-web", "default/p9-db", "default/p16-api"}
    assert [(p["pod"], p["preemptor"]) for p in plan["preemptions"]] == [("default/run-a", "default/p16-api")]
    assert [u["pod"] for u in plan["unschedulable"]] == ["default/p7-web"]
    if engine == "cpsat":
        assert plan["stats"]["status"] == "OPTIMAL" and plan["stats"]["plan_from"] == "solver"
    path = tmp_path / "plan.json"
    path.write_text(out)
    assert _run(capsys, "validate", str(snapshot), str(path))[0] == 0


def test_validate_refuses_the_evictions_kube_scheduler_would_not_make(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    snapshot = tmp_path / "snapshot.yaml"
    snapshot.write_text(ISSUE_CASE)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(ISSUE_WRONG))
    code, out, err = _run(capsys, "validate", str(snapshot), str(plan))
    assert code == 1, (out, err)
    lines = (out + err).splitlines()

    def about(victim: str) -> str:
        found = [line for line in lines if f"default/{victim} " in line and "would keep it" in line]
        assert len(found) == 1, lines
        return found[0]

    # run-b: p4-web fits as it is; p7-web, its taker, may not preempt it (equal priority).
    assert "default/p4-web (priority 1000) fits there at its turn without evicting anything" in about("run-b")
    assert "its room goes to default/p7-web, which may not preempt it" in about("run-b")
    # run-c and run-d: named for p4-web, which needed no room at all.
    assert "default/p4-web (priority 1000) fits there" in about("run-c")
    assert "default/p4-web (priority 1000) fits there" in about("run-d")
    # run-a goes, but at p16-api's turn, not p7-web's.
    assert any("default/run-a" in line and "it is default/p16-api's preemption that evicts it" in line for line in lines)


def _snapshot(running: list[tuple[str, str, int]], pending: list[tuple[str, str, int]], cpu: str = "10"):
    pods = [make_pod(f"default/{n}", cpu=c, priority=p, node="n1", start_time=T0 + timedelta(seconds=i))
            for i, (n, c, p) in enumerate(running)]
    pods += [make_pod(f"default/{n}", cpu=c, priority=p, created=T0 + timedelta(seconds=i))
             for i, (n, c, p) in enumerate(pending)]
    return make_snapshot([make_node("n1", cpu=cpu, memory="64Gi")], pods)


def _replayed(snapshot, placed: list[str]) -> dict[str, str]:
    ctx = build_context(snapshot, SOLVER)
    return replay(ctx, {k: 0 for k in placed}, {0}, StaticFilters(ctx.nodes, ctx.window)).evicted_by


def test_the_queue_order_decides_which_pods_go() -> None:
    """One at a time, in queue order: q1 (4 CPUs) keeps a (5, the most important) and evicts b;
    q2 (2 CPUs, the same priority, created later) then finds a in its way and evicts it too. A
    single reprieve for both (6 CPUs) would have kept b: the replay follows kube-scheduler's order,
    so both go, each for the pod at whose turn it goes."""
    snapshot = _snapshot([("a", "5", 0), ("b", "3", 0)], [("q1", "4", 1000), ("q2", "2", 1000)])
    assert _replayed(snapshot, ["default/q1", "default/q2"]) == {"default/b": "default/q1", "default/a": "default/q2"}
    # The created order reversed: q2 first (2 CPUs) fits beside both; q1 then evicts a alone.
    snapshot = _snapshot([("a", "5", 0), ("b", "3", 0)], [("q2", "2", 1000), ("q1", "4", 1000)])
    assert _replayed(snapshot, ["default/q1", "default/q2"]) == {"default/a": "default/q1"}


def _plan(assigned: dict[str, str], victims: dict[str, str]) -> Plan:
    return Plan(assignments=tuple(Assignment(pod=k, node=n) for k, n in assigned.items()),
                preemptions=tuple(Preemption(pod=v, node="n1", preemptor=p) for v, p in victims.items()),
                stats=PlanStats(engine="test", status="test"))


def test_a_plan_may_keep_what_kube_scheduler_evicts_but_not_the_reverse() -> None:
    """Of the victims kube-scheduler evicts (b for q1, a for q2), a plan may keep b when the node
    still holds everything (fewer evictions than kube-scheduler); evicting b alone, which the
    replay keeps at q2's turn, is refused."""
    snapshot = _snapshot([("a", "5", 0), ("b", "3", 0)], [("q1", "4", 1000), ("q2", "2", 1000)])
    both = {"default/q1": "n1", "default/q2": "n1"}
    assert validate(snapshot, _plan(both, {"default/b": "default/q1", "default/a": "default/q2"}), SOLVER) == []
    assert validate(snapshot, _plan(both, {"default/a": "default/q2"}), SOLVER) == []
    for engine in ("cpsat", "greedy"):
        plan = schedule(snapshot, SOLVER, engine=engine)
        assert validate(snapshot, plan, SOLVER) == []
        assert [(p.pod, p.preemptor) for p in plan.preemptions] == [("default/a", "default/q2")], engine


def test_a_lower_pod_takes_no_room_a_higher_one_freed_for_it() -> None:
    """high (priority 1000) fits as it is; mid (500) needs 3 CPUs and may evict only low (0): kube
    evicts low for mid. Evicting peer (priority 500) too, so that late (500) fits, is refused:
    a pod of equal priority is never a victim, whatever pod the plan names."""
    snapshot = _snapshot([("low", "3", 0), ("peer", "3", 500)],
                         [("high", "2", 1000), ("mid", "3", 500), ("late", "3", 500)])
    wrong = _plan({"default/high": "n1", "default/mid": "n1", "default/late": "n1"},
                  {"default/low": "default/mid", "default/peer": "default/high"})
    problems = validate(snapshot, wrong, SOLVER)
    assert any("default/peer" in line and "default/high (priority 1000) fits there at its turn" in line
               for line in problems), problems
    plan = schedule(snapshot, SOLVER)
    assert [(p.pod, p.preemptor) for p in plan.preemptions] == [("default/low", "default/mid")]
    assert validate(snapshot, plan, SOLVER) == []


def test_a_repaired_plan_is_worth_what_it_places() -> None:
    """A plan read back as the model's values (a repaired plan, an earlier solution) is weighed
    against the solve's by the model's placement level, whose terms are each class's ``placed``
    count: a plan that named only x and evict read as placing nothing, so a 10 s solve that cut
    its way below greedy won over the better repaired plan kept on the way (contended-40n-s1065:
    greedy's 19 in the lowest tier returned, where a repaired plan held 45)."""
    from solver.cpsat import solve as cpsat
    from solver.cpsat.decode import placement_value
    from solver.cpsat.kube_victims import PlanValues, _plan_vars
    from solver.scoring import ScoreContext

    snapshot = _snapshot([("a", "5", 0), ("b", "3", 0)], [("q1", "4", 1000), ("q2", "2", 1000)])
    ctx = build_context(snapshot, SOLVER)
    static = StaticFilters(ctx.nodes, ctx.window)
    window, classes, alias = cpsat.model_classes(ctx)
    cand, ubs = cpsat.candidates(ctx, classes, static, window, True)
    weights = cpsat.tier_weights([p.priority for p in ctx.window])
    wm = cpsat.build_component(cpsat.BuildInput(ctx, static, cand, ubs, ScoreContext.of(ctx), weights, True,
                                                window, alias), [c for c in classes if len(cand[c.id])])
    one = PlanValues(wm, {"default/q1": 0}, [])
    both = PlanValues(wm, {"default/q1": 0, "default/q2": 0}, [])
    assert 0 < placement_value(wm, one) < placement_value(wm, both)
    assert placement_value(wm, both) == 2 * weights[1000]
    # The recorded variables (an earlier solution, the next solve's hint) name the counts too.
    placed = {v.index for v in wm.placed.values() if not isinstance(v, int)}
    assert placed and placed <= {v.index for v in _plan_vars(wm)}


def test_a_gang_is_replayed_where_greedy_took_it_though_its_first_member_stays_pending() -> None:
    """Found by the long property run: gang g1's first member (t0, priority 10) fits no node, so
    its other member (t2, priority 0) takes its turn at t0's place, before t1 (priority 10): t2
    takes n0's last pod slot, and t1 then evicts a running pod. The replay ordered only the
    placed pods, so it put t2 after t1, found that t1 fit without evicting anything, and refused
    greedy's own plan. Both now follow the one queue (``SchedulingContext.queue``)."""
    from tests.builders import make_pod_group

    nodes = [make_node("n0", cpu="1", pods=3)]
    running = [make_pod(f"default/run{i}", cpu="100m", node="n0", priority=0) for i in range(2)]
    pending = [
        make_pod("default/t0", priority=10, group="g1", node_selector={"disk": "ssd"}, created=T0),
        make_pod("default/t1", priority=10, created=T0 + timedelta(minutes=1)),
        make_pod("default/t2", priority=0, group="g1", preemption_policy="Never", created=T0 + timedelta(minutes=2)),
    ]
    snapshot = make_snapshot(nodes, running + pending, pod_groups=[make_pod_group("default/g1", 1)])
    for engine in ("greedy", "cpsat"):
        plan = schedule(snapshot, SOLVER, engine=engine)
        assert validate(snapshot, plan, SOLVER) == [], engine
        assert {a.pod for a in plan.assignments} == {"default/t1", "default/t2"}, engine
        assert len(plan.preemptions) == 1, engine
    assert [p.key for p in build_context(snapshot, SOLVER).queue()] == ["default/t0", "default/t2", "default/t1"]


def test_a_repair_hands_each_class_s_kept_places_to_its_first_pods() -> None:
    """Found by review of the rule that a victim supports a class's pods placed before its
    preemptor (``inter_pod_affinity/encode.py``, ``_evicted_after``), which reads a class's places
    as going to its first pods. a1 and a2 are one class (required affinity to app b in zone z),
    with p between them in the queue; v, the only app b pod, sits on nv. A trial puts a1, p and r
    on nv and a2 on m2: a1 has no room at its turn and p evicts v. The repair took a1 out and
    kept a2, which comes after v is gone: the model read that as its first pod placed, and the
    validator refused it. The repair now hands the class's place to a1, which still has v."""
    from solver.cpsat import solve as cpsat
    from solver.cpsat.kube_victims import IN_MODEL, _holds, repair
    from solver.cpsat.outcome import Solution
    from solver.plugin_api import Victim
    from solver.scoring import ScoreContext
    from tests.builders import term
    from tests.reliability.test_preemption_optimum import _plan_of

    zone = "topology.kubernetes.io/zone"
    nodes = [make_node("nv", cpu="3", memory="64Gi", labels={zone: "z"}),
             make_node("m2", cpu="1", memory="64Gi", labels={zone: "z"})]
    leaning = {"priority": 10, "labels": {"app": "a"}, "preemption_policy": "Never",
               "pod_affinity": [term({"app": "b"}, zone)]}
    pods = [make_pod("default/v", cpu="2500m", node="nv", labels={"app": "b"}, priority=0),
            make_pod("default/a1", cpu="1", created=T0 + timedelta(minutes=1), **leaning),
            make_pod("default/p", cpu="1", priority=10, labels={"app": "p"}, created=T0 + timedelta(minutes=2)),
            make_pod("default/a2", cpu="1", created=T0 + timedelta(minutes=3), **leaning),
            make_pod("default/r", cpu="1", priority=10, labels={"app": "r"}, created=T0 + timedelta(minutes=4))]
    snapshot = make_snapshot(nodes, pods)
    config = SchedulerConfig().with_overrides(time_limit_seconds=5.0, workers=1, seed=1)
    ctx = build_context(snapshot, config)
    static = StaticFilters(ctx.nodes, ctx.window)
    cand, ubs = cpsat.candidates(ctx, ctx.classes, static, {}, True)
    weights = cpsat.tier_weights([p.priority for p in ctx.window])
    wm = cpsat.build_component(cpsat.BuildInput(ctx, static, cand, ubs, ScoreContext.of(ctx), weights, True),
                               [c for c in ctx.classes if len(cand[c.id])])
    index = {node.name: i for i, node in enumerate(ctx.nodes)}
    nv, m2 = index["nv"], index["m2"]
    trial = Solution()
    trial.placements = {"default/a1": nv, "default/p": nv, "default/r": nv, "default/a2": m2}
    trial.victims = [Victim(wm.evict_pod["default/v"][0], nv, "default/r")]
    fixed = repair(wm, trial)
    assert fixed is not None
    assert fixed.pod_nodes == {"default/a1": m2, "default/p": nv, "default/r": nv}
    assert fixed.names == {"default/v": "default/p"}
    assert _holds(wm, fixed, time.monotonic() + 5) == IN_MODEL
    plan = _plan_of(ctx, fixed.pod_nodes, [Victim(wm.evict_pod["default/v"][0], nv, "default/p")])
    assert validate(snapshot, plan, config) == []

"""kube-scheduler's reprieve, ties of priority included (issue 23, case 1 and its host-port and live
variants): a victim stays evicted only if, with every other victim of its level gone, the pods
placed at or above its preemptor's priority would not fit with it back (``victim_room``).

Each case is what a user runs: ``schedule`` with both engines, ``validate`` of the plan the old rule
let through (exit 1, naming the victim and the pod that took its room), and the live scheduler in
simulation. Cases with preemptors of several priorities on one node check that greedy's sequential
plans (kube-scheduler's) stay valid under the rule.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adapters.cli import main
from models import Assignment, Plan, PlanStats, Preemption
from models.config import SchedulerConfig
from solver import schedule, validate
from tests.builders import make_node, make_pdb, make_pod, make_snapshot

SOLVER = SchedulerConfig().with_overrides(time_limit_seconds=10.0, workers=2, seed=1)
FALLBACK = SOLVER.with_overrides(time_limit_seconds=0.0)
ENGINES = pytest.mark.parametrize("engine", ["cpsat", "greedy"])

EQUAL_PRIORITY = """\
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Node, metadata: {name: node-a}, status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}}
- apiVersion: v1
  kind: Pod
  metadata: {name: batch-a, namespace: default}
  spec: {nodeName: node-a, priority: 0, containers: [{name: c, image: busybox, resources: {requests: {cpu: '2'}}}]}
  status: {phase: Running}
- apiVersion: v1
  kind: Pod
  metadata: {name: batch-b, namespace: default}
  spec: {nodeName: node-a, priority: 0, containers: [{name: c, image: busybox, resources: {requests: {cpu: '1'}}}]}
  status: {phase: Running}
- apiVersion: v1
  kind: Pod
  metadata: {name: critical, namespace: default}
  spec: {schedulerName: cpsat-scheduler, priority: 1000000, containers: [{name: c, image: busybox, resources: {requests: {cpu: 2500m}}}]}
- apiVersion: v1
  kind: Pod
  metadata: {name: low, namespace: default}
  spec: {schedulerName: cpsat-scheduler, priority: 0, containers: [{name: c, image: busybox, resources: {requests: {cpu: '1'}}}]}
"""

# The plan the old rule printed and accepted: both batch pods evicted "for critical", low in batch-b's room.
EQUAL_PRIORITY_WRONG = {
    "assignments": [{"pod": "default/critical", "node": "node-a"}, {"pod": "default/low", "node": "node-a"}],
    "preemptions": [
        {"pod": "default/batch-a", "node": "node-a", "preemptor": "default/critical"},
        {"pod": "default/batch-b", "node": "node-a", "preemptor": "default/critical"},
    ],
    "unschedulable": [],
}

DAEMONSET_PORT = """\
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Node, metadata: {name: node-a}, status: {allocatable: {cpu: '2', memory: 8Gi, pods: '110'}}}
- apiVersion: v1
  kind: Pod
  metadata:
    name: node-exporter-x7k2p
    namespace: monitoring
    ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: node-exporter, uid: ds-1, controller: true}]
  spec:
    nodeName: node-a
    priority: 0
    containers: [{name: exporter, image: prom/node-exporter, ports: [{containerPort: 9100, hostPort: 9100}], resources: {requests: {cpu: 100m}}}]
  status: {phase: Running}
- apiVersion: v1
  kind: Pod
  metadata: {name: batch, namespace: default}
  spec: {nodeName: node-a, priority: 0, containers: [{name: c, image: busybox, resources: {requests: {cpu: 1500m}}}]}
  status: {phase: Running}
- apiVersion: v1
  kind: Pod
  metadata: {name: high, namespace: default}
  spec: {schedulerName: cpsat-scheduler, priority: 1000, containers: [{name: c, image: busybox, resources: {requests: {cpu: '1'}}}]}
- apiVersion: v1
  kind: Pod
  metadata: {name: scraper, namespace: default}
  spec: {schedulerName: cpsat-scheduler, priority: 0, containers: [{name: c, image: busybox, ports: [{containerPort: 9100, hostPort: 9100}], resources: {requests: {cpu: 100m}}}]}
"""

# The old plan: the exporter (priority 0, like the batch pod high needs gone) evicted too, and
# scraper (priority 0) given its host port: the DaemonSet could never run there again.
DAEMONSET_PORT_WRONG = {
    "assignments": [{"pod": "default/high", "node": "node-a"}, {"pod": "default/scraper", "node": "node-a"}],
    "preemptions": [
        {"pod": "default/batch", "node": "node-a", "preemptor": "default/high"},
        {"pod": "monitoring/node-exporter-x7k2p", "node": "node-a", "preemptor": "default/high"},
    ],
    "unschedulable": [],
}

CASES = {
    "equal-priority": (EQUAL_PRIORITY, EQUAL_PRIORITY_WRONG, "default/batch-a", "default/batch-b", "default/low"),
    "daemonset-host-port": (DAEMONSET_PORT, DAEMONSET_PORT_WRONG, "default/batch", "monitoring/node-exporter-x7k2p",
                            "default/scraper"),
}


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@ENGINES
@pytest.mark.parametrize("case", list(CASES))
def test_schedule_evicts_only_what_the_preemptor_needs(case: str, engine: str, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    snapshot_text, _, needed, kept, pending = CASES[case]
    snapshot = _write(tmp_path, "snapshot.yaml", snapshot_text)
    code, out, err = _run(capsys, "schedule", snapshot, "--engine", engine, "--time-limit", "10", "-o", "json")
    assert code == 0, err
    plan = json.loads(out)
    assert [p["pod"] for p in plan["preemptions"]] == [needed]
    assert pending in {u["pod"] for u in plan["unschedulable"]}
    assert kept not in {p["pod"] for p in plan["preemptions"]}
    plan_path = _write(tmp_path, "plan.json", out)
    assert _run(capsys, "validate", snapshot, plan_path)[0] == 0


@pytest.mark.parametrize("case", list(CASES))
def test_validate_rejects_the_needless_eviction_naming_victim_and_taker(case: str, tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    snapshot_text, wrong, _, kept, taker = CASES[case]
    snapshot = _write(tmp_path, "snapshot.yaml", snapshot_text)
    plan = _write(tmp_path, "plan.json", json.dumps(wrong))
    code, out, err = _run(capsys, "validate", snapshot, plan)
    assert code == 1, (out, err)
    lines = [line for line in (out + err).splitlines() if kept in line]
    assert lines, out + err
    assert any(taker in line and "would keep it" in line for line in lines), lines


def test_simulate_backlog_keeps_batch_b_and_leaves_low_pending(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The live scheduler deciding the backlog in one window (the issue's `run --simulate
    --arrival-rate 0`; the quick and adaptive windows off so both pods are decided together, as a
    backlog of pods that need a joint decision is)."""
    snapshot = _write(tmp_path, "snapshot.yaml", EQUAL_PRIORITY)
    code, out, _ = _run(capsys, "run", "--simulate", snapshot, "--arrival-rate", "0", "--quick-window", "0",
                        "--no-adaptive-window", "--no-leader-elect", "--time-limit", "5")
    assert code == 0, out
    assert "evicted       default/batch-a from node-a for default/critical" in out
    assert "default/batch-b" not in out
    assert "bound 1 pod(s), evicted 1, left 1 unschedulable" in out
    assert "unschedulable default/low" in out
    assert "final state replayed through the validator: no violations" in out


def _plan(assignments: dict[str, str], victims: dict[str, str]) -> Plan:
    return Plan(
        assignments=[Assignment(pod=p, node=n) for p, n in assignments.items()],
        preemptions=[Preemption(pod=v, node="node-a", preemptor=p) for v, p in victims.items()],
        stats=PlanStats(engine="cpsat", status="OPTIMAL"),
    )


def two_preemptor_window(second_priority: int):
    """A 10-CPU node running v1 (3 CPU) and v2 (5 CPU, started first: more important), both
    priority 0; pending p1 (priority 100, 4 CPU) and p2 (``second_priority``, 2 CPU).
    One at a time, p1 reprieves v2 and evicts v1; p2 then needs v2 gone too. Together, evicting
    v2 alone makes room for both."""
    from datetime import datetime, timezone

    early, late = datetime(2026, 1, 1, tzinfo=timezone.utc), datetime(2026, 1, 2, tzinfo=timezone.utc)
    return make_snapshot(
        [make_node("node-a", cpu="10", pods=110)],
        [
            make_pod("default/v1", cpu="3", node="node-a", priority=0, start_time=late),
            make_pod("default/v2", cpu="5", node="node-a", priority=0, start_time=early),
            make_pod("default/p1", cpu="4", priority=100, created=early),
            make_pod("default/p2", cpu="2", priority=second_priority, created=late),
        ],
    )


def test_preemptors_of_two_priorities_each_judge_their_victims_at_their_own_level() -> None:
    """kube-scheduler's sequential plan: p1 evicts v1, p2 (priority 50) then evicts v2. Each is
    needed at its preemptor's level (v2 was there at p1's turn), so the plan is valid. Greedy makes
    the same evictions during its pass and, once every pod has had its turn, puts v1 back (the room
    v2 left holds it); the solver finds the same cheaper plan (v2 alone)."""
    snapshot = two_preemptor_window(50)
    sequential = _plan({"default/p1": "node-a", "default/p2": "node-a"}, {"default/v1": "default/p1", "default/v2": "default/p2"})
    assert validate(snapshot, sequential, FALLBACK) == []
    greedy = schedule(snapshot, FALLBACK, engine="greedy")
    assert {(p.pod, p.preemptor) for p in greedy.preemptions} == {("default/v2", "default/p2")}
    assert validate(snapshot, greedy, FALLBACK) == []
    plan = schedule(snapshot, SOLVER)
    assert validate(snapshot, plan, SOLVER) == []
    assert {p.pod for p in plan.preemptions} == {"default/v2"} and len(plan.assignments) == 2


def test_preemptors_of_one_priority_are_one_batch() -> None:
    """Two preemptors of one priority: one at a time, kube-scheduler evicts v1 for p1 and v2 for
    p2, though v2 alone makes room for both. That plan is kube-scheduler's own, so the validator
    accepts it (issue 33: the replay is the rule); greedy puts v1 back once the pass is done and
    the solver evicts v2 alone — fewer evictions, each one kube-scheduler makes."""
    snapshot = two_preemptor_window(100)
    greedy = schedule(snapshot, FALLBACK, engine="greedy")
    assert {p.pod for p in greedy.preemptions} == {"default/v2"}
    assert validate(snapshot, greedy, FALLBACK) == []
    sequential = _plan({"default/p1": "node-a", "default/p2": "node-a"}, {"default/v1": "default/p1", "default/v2": "default/p2"})
    assert validate(snapshot, sequential, FALLBACK) == []
    plan = schedule(snapshot, SOLVER)
    assert validate(snapshot, plan, SOLVER) == [] and {p.pod for p in plan.preemptions} == {"default/v2"}


def test_a_never_pod_above_the_level_is_there_at_its_turn() -> None:
    """keeper (priority 500, preemptionPolicy Never) preempts nothing; high (1000) fits beside
    batch. Evicting batch "for high" so that keeper fits is refused: keeper is below high's level
    (it comes after high, when batch would still be there) and may not preempt for itself."""
    snapshot = make_snapshot(
        [make_node("node-a", cpu="4", pods=110)],
        [
            make_pod("default/batch", cpu="2", node="node-a", priority=0),
            make_pod("default/high", cpu="2", priority=1000),
            make_pod("default/keeper", cpu="2", priority=500, preemption_policy="Never"),
        ],
    )
    for config, engine in ((SOLVER, "cpsat"), (FALLBACK, "greedy")):
        plan = schedule(snapshot, config, engine=engine)
        assert validate(snapshot, plan, config) == []
        assert not plan.preemptions and {a.pod for a in plan.assignments} == {"default/high"}
    wrong = _plan({"default/high": "node-a", "default/keeper": "node-a"}, {"default/batch": "default/high"})
    problems = validate(snapshot, wrong, SOLVER)
    assert any("default/batch" in line and "default/keeper" in line for line in problems), problems


def test_a_gangs_members_of_one_priority_are_one_batch_too() -> None:
    """The two preemptors are one gang's members (minMember 2): one at a time, the first evicts v1
    and the second v2; once the gang stands, v1 is reprieved (v2 alone makes room for both)."""
    from datetime import datetime, timezone

    from tests.builders import make_pod_group

    early, late = datetime(2026, 1, 1, tzinfo=timezone.utc), datetime(2026, 1, 2, tzinfo=timezone.utc)
    snapshot = make_snapshot(
        [make_node("node-a", cpu="10", pods=110)],
        [
            make_pod("default/v1", cpu="3", node="node-a", priority=0, start_time=late),
            make_pod("default/v2", cpu="5", node="node-a", priority=0, start_time=early),
            make_pod("default/m1", cpu="4", priority=100, group="train", created=early),
            make_pod("default/m2", cpu="2", priority=100, group="train", created=late),
        ],
        pod_groups=[make_pod_group("default/train", 2)],
    )
    greedy = schedule(snapshot, FALLBACK, engine="greedy")
    assert {a.pod for a in greedy.assignments} == {"default/m1", "default/m2"}
    assert {p.pod for p in greedy.preemptions} == {"default/v2"}
    assert validate(snapshot, greedy, FALLBACK) == []
    plan = schedule(snapshot, SOLVER)
    assert validate(snapshot, plan, SOLVER) == [] and {p.pod for p in plan.preemptions} == {"default/v2"}


def budget_spent_elsewhere_window():
    """Two nodes with room for two pods each. web-0 on node-a holds host port 80; web-1 (older)
    and web-2 (younger) fill node-b. One budget covers the three (minAvailable 1: two disruptions
    allowed). edge-0 and edge-1 want port 80 and half a CPU each, at priority 10."""
    from datetime import datetime, timezone

    early, late = datetime(2026, 1, 1, tzinfo=timezone.utc), datetime(2026, 1, 2, tzinfo=timezone.utc)
    app = {"app": "web"}
    return make_snapshot(
        [make_node("node-a", cpu="1", pods=2), make_node("node-b", cpu="1", pods=2)],
        [
            make_pod("default/web-0", cpu="500m", node="node-a", priority=0, labels=app, host_ports=[80], start_time=early),
            make_pod("default/web-1", cpu="500m", node="node-b", priority=0, labels=app, start_time=early),
            make_pod("default/web-2", cpu="500m", node="node-b", priority=0, labels=app, start_time=late),
            make_pod("default/edge-0", cpu="500m", priority=10, host_ports=[80], created=early),
            make_pod("default/edge-1", cpu="500m", priority=10, host_ports=[80], created=late),
        ],
        pdbs=[make_pdb("default/web", app, min_available=1)],
    )


def test_a_budget_spent_on_another_node_moves_the_older_pod_ahead() -> None:
    """Where edge-0 evicts web-0 on node-a (the port), it spends one of the budget's two
    disruptions. At edge-1's turn on node-b one is left: kube-scheduler walks web-1 then web-2,
    web-2's eviction would break the budget, so web-2 is reprieved first and the older web-1 goes.
    Read with the budget as the window starts, the reprieve would keep web-1: the model must not
    hold to that order, or it cannot state kube-scheduler's plan and proves nothing (it answered
    FEASIBLE with the plan its cuts repaired). Greedy places both too, edge-0 on node-b: at its
    turn there the older web-1 is reprieved first and web-2 goes, then edge-1 evicts web-0. The
    model's counts are the same for both plans (one edge on each node); handed out by turns
    (``kube_victims.hand_by_turns``) it may return either, each one kube-scheduler's replay
    allows."""
    snapshot = budget_spent_elsewhere_window()
    greedy = schedule(snapshot, FALLBACK, engine="greedy")
    assert validate(snapshot, greedy, FALLBACK) == [] and (len(greedy.assignments), len(greedy.preemptions)) == (2, 2)
    plan = schedule(snapshot, SOLVER)
    assert validate(snapshot, plan, SOLVER) == []
    assert plan.stats.status == "OPTIMAL"
    assert {(p.pod, p.preemptor) for p in plan.preemptions} in (
        {("default/web-0", "default/edge-0"), ("default/web-1", "default/edge-1")},
        {("default/web-2", "default/edge-0"), ("default/web-0", "default/edge-1")})
    younger = Plan(assignments=[Assignment(pod="default/edge-0", node="node-a"), Assignment(pod="default/edge-1", node="node-b")],
                   preemptions=[Preemption(pod="default/web-0", node="node-a", preemptor="default/edge-0"),
                                Preemption(pod="default/web-2", node="node-b", preemptor="default/edge-1")],
                   stats=PlanStats(engine="cpsat", status="OPTIMAL"))
    problems = validate(snapshot, younger, SOLVER)
    assert any("default/web-2" in line for line in problems), problems

"""Nominated pods (issue 23, item 3): a pod waiting for its victims does not preempt again, and the
room a nominated pod outside the window waits for is not given to pods of lower priority
(``solver/plugins/preemption/nominated.py``). Each case for greedy and the solver, each plan
through the validator; the wrong plans a user could hand in are refused, naming the pods."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from models.config import SchedulerConfig
from solver import schedule, validate
from solver.plugins.preemption.nominated import REASON_TERMINATING
from tests.builders import T0, make_node, make_pod, make_snapshot
from tests.solver.test_validate import make_plan

CONFIG = SchedulerConfig().with_overrides(time_limit_seconds=5.0, workers=2, seed=1)
ENGINES = ["greedy", "cpsat"]
OTHER = "default-scheduler"  # a pending pod of another scheduler is outside our window


def waiting_cluster(*, victim_condition: bool = True, nominated_taint: bool = False, room_on_n1: bool = False):
    """The issue's case: on n0 a victim of an earlier preemption is terminating (DisruptionTarget,
    PreemptionByScheduler); ``waiter`` (priority 100) is nominated to n0; n2 runs a priority-0 pod
    that a new preemption could evict."""
    n0 = make_node("n0", cpu="2", taints=["dedicated=x:NoSchedule"] if nominated_taint else ())
    nodes = [n0, make_node("n1", cpu="2"), make_node("n2", cpu="2")]
    pods = [
        make_pod("default/victim", cpu="2", node="n0", priority=0, preempted=victim_condition,
                 terminating=not victim_condition),
        make_pod("default/other", cpu="2", node="n2", priority=0),
        make_pod("default/waiter", cpu="2", priority=100, nominated="n0", created=T0),
    ]
    if not room_on_n1:
        pods.append(make_pod("default/important", cpu="2", node="n1", priority=1000))
    return make_snapshot(nodes, pods)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_pod_waiting_for_its_victims_does_not_preempt_again(engine: str) -> None:
    snapshot = waiting_cluster()
    plan = schedule(snapshot, CONFIG, engine=engine)
    assert validate(snapshot, plan, CONFIG) == []
    assert plan.preemptions == ()
    assert plan.assignments == ()
    (left,) = plan.unschedulable
    assert left.pod == "default/waiter"
    assert left.message == f"0/3 nodes are available: 3 Insufficient cpu. preemption: {REASON_TERMINATING}"


@pytest.mark.parametrize("engine", ENGINES)
def test_a_waiting_pod_is_still_placed_where_it_fits(engine: str) -> None:
    snapshot = waiting_cluster(room_on_n1=True)
    plan = schedule(snapshot, CONFIG, engine=engine)
    assert validate(snapshot, plan, CONFIG) == []
    assert plan.assignment_map() == {"default/waiter": "n1"} and plan.preemptions == ()


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("case", ["terminating-without-condition", "nominated-node-unresolvable"])
def test_a_nominated_pod_may_preempt_again(engine: str, case: str) -> None:
    """A victim deleted without DisruptionTarget/PreemptionByScheduler is not the pod's own
    preemption (kube-scheduler's PodTerminatingByPreemption); a nominated node the pod can no
    longer use (an untolerated taint: UnschedulableAndUnresolvable) frees it to preempt."""
    snapshot = waiting_cluster(victim_condition=case != "terminating-without-condition",
                               nominated_taint=case == "nominated-node-unresolvable")
    plan = schedule(snapshot, CONFIG, engine=engine)
    assert validate(snapshot, plan, CONFIG) == []
    (node,) = plan.assignment_map().values()
    victim = "default/victim" if node == "n0" else "default/other"
    assert [(p.pod, p.node, p.preemptor) for p in plan.preemptions] == [(victim, node, "default/waiter")]


def test_the_validator_refuses_a_new_preemption_by_a_waiting_pod() -> None:
    snapshot = waiting_cluster()
    wrong = make_plan(snapshot, {"default/waiter": "n2"}, victims=[("default/other", "n2", "default/waiter")])
    assert validate(snapshot, wrong, CONFIG) == [
        "preemption: default/waiter evicts default/other, but it waits for its victims on its nominated node n0: "
        "it may not preempt again"
    ]


def claim_cluster(*, ports: bool = False):
    """n0 (4 CPU) holds the claim of ``nominee`` (priority 100, 3 CPU, another scheduler's pending
    pod nominated there). ``high`` (priority 200) outranks it; ``low`` (priority 10) does not."""
    port = {"host_ports": [8080]} if ports else {}
    return make_snapshot(
        [make_node("n0", cpu="4")],
        [make_pod("default/nominee", cpu="3", priority=100, nominated="n0", scheduler=OTHER, **port),
         make_pod("default/high", cpu="2", priority=200, created=T0),
         make_pod("default/low", cpu="1", priority=10, created=T0, **port)],
    )


@pytest.mark.parametrize("engine", ENGINES)
def test_a_lower_pod_does_not_take_the_room_a_nominated_pod_waits_for(engine: str) -> None:
    snapshot = claim_cluster()
    plan = schedule(snapshot, CONFIG, engine=engine)
    assert validate(snapshot, plan, CONFIG) == []
    assert plan.assignment_map() == {"default/high": "n0"}
    assert [u.pod for u in plan.unschedulable] == ["default/low"]
    if engine == "greedy":
        assert plan.unschedulable[0].message.startswith("0/1 nodes are available: 1 Insufficient cpu.")


@pytest.mark.parametrize("engine", ENGINES)
def test_a_lower_pod_does_not_take_the_host_port_a_nominated_pod_waits_for(engine: str) -> None:
    snapshot = claim_cluster(ports=True)
    plan = schedule(snapshot, CONFIG, engine=engine)
    assert validate(snapshot, plan, CONFIG) == []
    assert "default/low" not in plan.assignment_map()


def test_the_validator_names_the_pod_that_took_a_nominated_pods_room() -> None:
    snapshot = claim_cluster()
    wrong = make_plan(snapshot, {"default/high": "n0", "default/low": "n0"})
    assert validate(snapshot, wrong, CONFIG) == [
        "nominated: default/low (priority 10) takes room on node n0 that default/nominee (priority ≥ its own, "
        "nominated there) is waiting for: cpu short once they are added"
    ]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_pod_preempts_for_room_a_nominated_pod_keeps(engine: str) -> None:
    """kube-scheduler's preemption dry run filters with nominated pods too: ``mid`` (priority 50)
    needs ``old`` gone, since ``nominee`` (priority 100) keeps 2 of the 4 CPUs: the victim is
    needed, for the model and the validator as for greedy."""
    snapshot = make_snapshot(
        [make_node("n0", cpu="4")],
        [make_pod("default/old", cpu="2", node="n0", priority=0),
         make_pod("default/nominee", cpu="2", priority=100, nominated="n0", scheduler=OTHER),
         make_pod("default/mid", cpu="2", priority=50, created=T0)],
    )
    plan = schedule(snapshot, CONFIG, engine=engine)
    assert validate(snapshot, plan, CONFIG) == []
    if engine == "cpsat":
        assert plan.stats.status == "OPTIMAL"  # the model's own plan, not greedy's fallback
    assert plan.assignment_map() == {"default/mid": "n0"}
    assert [(p.pod, p.preemptor) for p in plan.preemptions] == [("default/old", "default/mid")]


def test_a_nominated_pod_in_the_window_claims_nothing() -> None:
    """Inside the window the plan decides the nominated pod: a pod of ours nominated to n0 that
    the plan places elsewhere leaves n0 to the others."""
    snapshot = make_snapshot(
        [make_node("n0", cpu="2"), make_node("n1", cpu="2")],
        [make_pod("default/nominee", cpu="2", priority=100, nominated="n0", created=T0),
         make_pod("default/low", cpu="2", priority=10, created=T0)],
    )
    for engine in ENGINES:
        plan = schedule(snapshot, CONFIG, engine=engine)
        assert validate(snapshot, plan, CONFIG) == []
        assert set(plan.assignment_map()) == {"default/nominee", "default/low"}


SNAPSHOT_YAML = """\
apiVersion: v1
kind: List
items:
- {kind: Node, apiVersion: v1, metadata: {name: n0}, status: {allocatable: {cpu: "2", memory: 4Gi, pods: "110"}}}
- {kind: Node, apiVersion: v1, metadata: {name: n1}, status: {allocatable: {cpu: "2", memory: 4Gi, pods: "110"}}}
- kind: Pod
  apiVersion: v1
  metadata: {name: victim, namespace: default, deletionTimestamp: "2024-01-01T01:00:00Z"}
  spec: {nodeName: n0, priority: 0, containers: [{name: c, resources: {requests: {cpu: "2"}}}]}
  status:
    phase: Running
    conditions: [{type: DisruptionTarget, status: "True", reason: PreemptionByScheduler}]
- kind: Pod
  apiVersion: v1
  metadata: {name: other, namespace: default}
  spec: {nodeName: n1, priority: 0, containers: [{name: c, resources: {requests: {cpu: "2"}}}]}
  status: {phase: Running}
- kind: Pod
  apiVersion: v1
  metadata: {name: waiter, namespace: default}
  spec: {priority: 100, containers: [{name: c, resources: {requests: {cpu: "2"}}}]}
  status: {nominatedNodeName: n0}
"""

WRONG_PLAN = """\
{"assignments": [{"pod": "default/waiter", "node": "n1"}],
 "preemptions": [{"pod": "default/other", "node": "n1", "preemptor": "default/waiter"}]}
"""


def test_validate_on_the_command_line_refuses_a_waiting_pods_new_preemption(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from adapters.cli import main

    snap = tmp_path / "snap.yaml"
    snap.write_text(SNAPSHOT_YAML)
    plan = tmp_path / "plan.json"
    plan.write_text(WRONG_PLAN)
    code = main(["validate", str(snap), str(plan), "--all-pending"])
    out, err = capsys.readouterr()
    assert code == 1, (out, err)
    assert "default/waiter evicts default/other, but it waits for its victims on its nominated node n0" in out + err
    code = main(["schedule", str(snap), "--all-pending", "--output", "json"])
    out, _ = capsys.readouterr()
    printed = json.loads(out)
    assert code == 0 and printed["preemptions"] == [] and printed["assignments"] == []


def test_greedy_tries_the_nominated_node_first() -> None:
    """kube-scheduler's scheduleOne filters a nominated pod on its nominated node first and takes
    it when it passes, without scoring: ``busy`` (half full) wins over the empty ``idle`` that
    LeastAllocated would pick; without the nomination, ``idle`` is chosen."""
    def cluster(nominated):
        return make_snapshot(
            [make_node("idle", cpu="4"), make_node("busy", cpu="4")],
            [make_pod("default/running", cpu="2", node="busy"),
             make_pod("default/p", cpu="1", priority=100, nominated=nominated, created=T0)],
        )

    for nominated, expected in ((None, "idle"), ("busy", "busy")):
        snapshot = cluster(nominated)
        plan = schedule(snapshot, CONFIG, engine="greedy")
        assert validate(snapshot, plan, CONFIG) == []
        assert plan.assignment_map() == {"default/p": expected}


CLAIM_YAML = """\
apiVersion: v1
kind: List
items:
- {kind: Node, apiVersion: v1, metadata: {name: n0}, status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}}
- kind: Pod
  apiVersion: v1
  metadata: {name: nominee, namespace: default}
  spec: {schedulerName: default-scheduler, priority: 100, containers: [{name: c, resources: {requests: {cpu: "3"}}}]}
  status: {nominatedNodeName: n0}
- kind: Pod
  apiVersion: v1
  metadata: {name: low, namespace: default}
  spec: {schedulerName: cpsat-scheduler, priority: 10, containers: [{name: c, resources: {requests: {cpu: "2"}}}]}
"""


def test_validate_on_the_command_line_names_the_pod_that_took_a_nominated_pods_room(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from adapters.cli import main

    snap = tmp_path / "snap.yaml"
    snap.write_text(CLAIM_YAML)
    plan = tmp_path / "plan.json"
    plan.write_text('{"assignments": [{"pod": "default/low", "node": "n0"}]}')
    code = main(["validate", str(snap), str(plan)])
    out, err = capsys.readouterr()
    assert code == 1, (out, err)
    assert ("nominated: default/low (priority 10) takes room on node n0 that default/nominee "
            "(priority ≥ its own, nominated there) is waiting for: cpu short once they are added") in out + err
    code = main(["schedule", str(snap), "--output", "json"])
    printed = json.loads(capsys.readouterr().out)
    assert code == 0 and printed["assignments"] == [] and [u["pod"] for u in printed["unschedulable"]] == ["default/low"]


def late_claim_cluster():
    """n0 (5 CPU) runs ``old`` (priority 5, 2 CPU); ``nominee`` (priority 0, 1 CPU, another
    scheduler's) waits for room there. ``high`` (priority 10, 3 CPU) fits beside ``old`` (it
    honours no claim below its own priority); ``low`` (priority 0, 1 CPU) honours the claim and
    does not fit, and may not evict ``old``."""
    return make_snapshot(
        [make_node("n0", cpu="5")],
        [make_pod("default/old", cpu="2", node="n0", priority=5),
         make_pod("default/nominee", cpu="1", priority=0, nominated="n0", scheduler=OTHER),
         make_pod("default/high", cpu="3", priority=10, created=T0),
         make_pod("default/low", cpu="1", priority=0, created=T0)],
    )


@pytest.mark.parametrize("engine", ENGINES)
def test_a_claim_only_a_later_lower_pod_honours_needs_no_victim(engine: str) -> None:
    """kube-scheduler places ``high`` without preempting (the claim of priority 0 is not held for
    a pod of priority 10) and leaves ``low`` pending: evicting ``old`` "for high" only so that
    ``low`` gets in beside the claim is an eviction no higher-priority pod needs (issue 23 item 1)."""
    snapshot = late_claim_cluster()
    plan = schedule(snapshot, CONFIG, engine=engine)
    assert validate(snapshot, plan, CONFIG) == []
    assert plan.assignment_map() == {"default/high": "n0"}
    assert plan.preemptions == ()


def test_the_validator_refuses_a_victim_only_a_lower_pods_claim_needs() -> None:
    snapshot = late_claim_cluster()
    wrong = make_plan(snapshot, {"default/high": "n0", "default/low": "n0"},
                      victims=[("default/old", "n0", "default/high")])
    assert validate(snapshot, wrong, CONFIG) == [
        "preemption: default/old (priority 5) is evicted from node n0 for default/high, but kube-scheduler's "
        "preemption would keep it: default/high (priority 10) fits there at its turn without evicting anything; "
        "in the plan its room goes to default/low, which may not preempt it"
    ]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_reprieve_keeps_the_room_a_nominated_pod_waits_for(engine: str) -> None:
    """Three pods of priority 10 come to a two-pod node whose pods are leaving, beside another
    scheduler's pod of priority 10 nominated there with host port 80. Greedy's same-level
    reprieve put a victim back where only the claim's room was free, and the plan gave the
    nominated pod's slot away (found by the long property run; the validator refused greedy's
    plan). Every plan now keeps the claim's room and port."""
    snapshot = make_snapshot(
        [make_node("n0", cpu="1", pods=2)],
        [make_pod("default/run-0", node="n0", cpu="100m", priority=0, terminating=True, host_ports=[80]),
         make_pod("default/run-1", node="n0", cpu="100m", priority=0, terminating=True),
         *(make_pod(f"default/t1-{i}", cpu="0", priority=10) for i in range(3)),
         make_pod("default/theirs-0", cpu="0", priority=10, nominated="n0", host_ports=[80],
                  scheduler="default-scheduler")],
    )
    plan = schedule(snapshot, CONFIG, engine=engine)
    assert validate(snapshot, plan, CONFIG) == []


@pytest.mark.parametrize("engine", ENGINES)
def test_a_held_claim_is_never_a_victim(engine: str) -> None:
    # A second review's fuzzed window (issue 34, thirtieth round). g0's members sit together at
    # its first member's place, so a tier-100 member is placed before the tier-1000 pods; nom-0's
    # claim on n1 (priority 100) is then held while g1's members are filtered, as that placed
    # member honours it. A member that had to preempt there took the claim for a pod of the node
    # and evicted it, and releasing the claim afterwards raised KeyError: both engines crashed.
    from datetime import timedelta

    from tests.builders import make_pod_group, term

    zone, host = "topology.kubernetes.io/zone", "kubernetes.io/hostname"
    nodes = [make_node("n0", cpu="2", pods=2, labels={zone: "z0"}), make_node("n1", cpu="1", labels={zone: "z0"}),
             make_node("n2", cpu="1", labels={zone: "z0"})]

    def member(key: str, cpu: str, priority: int, app: str, group: str, minutes: int, key_: str):
        return make_pod(key, cpu=cpu, priority=priority, labels={"app": app}, group=group,
                        created=T0 + timedelta(minutes=minutes), pod_affinity=[term({"app": "b"}, key_)])

    pods = [make_pod("default/run-2", node="n2", cpu="1", priority=0, labels={"app": "a"}),
            make_pod("default/run-3", node="n1", cpu="1", priority=0, labels={"app": "b"}),
            member("default/g0-0", "0", 100, "a", "g0", 44, zone),
            member("default/g0-1", "500m", 100, "a", "g0", 2, zone),
            member("default/g0-2", "1", 1000, "c", "g0", 9, zone),
            member("default/g1-0", "500m", 1000, "b", "g1", 49, host),
            member("default/g1-2", "500m", 1000, "a", "g1", 15, host),
            make_pod("default/nom-0", cpu="1", priority=100, labels={"app": "b"}, nominated="n1", scheduler=OTHER)]
    snapshot = make_snapshot(nodes, pods, pod_groups=[make_pod_group("default/g0", 1), make_pod_group("default/g1", 2)])
    plan = schedule(snapshot, CONFIG, engine=engine)
    assert validate(snapshot, plan, CONFIG) == []
    assert all(p.pod != "default/nom-0" for p in plan.preemptions)

"""Kubernetes 1.37's PodGroup priority and ``disruptionMode`` (issue 35), on the issue's repro
(examples/snapshots/gangs/disruption-all.yaml): a running gang of three whose PodGroup says
``disruptionMode: all`` and ``priorityClassName: batch-low`` (100) while its pods name
critical-job (2000), and web-0 (serving, 1000) that fits nowhere."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml

from adapters.snapshot_io import read_snapshot
from models import SchedulerConfig
from solver import schedule, validate

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "snapshots" / "gangs" / "disruption-all.yaml"
TRAINER = ["ml/trainer-0", "ml/trainer-1", "ml/trainer-2"]


def snapshot_with(edit=None, extra: list | None = None):
    doc = yaml.safe_load(EXAMPLE.read_text())
    group = next(i for i in doc["items"] if i["kind"] == "PodGroup")
    if edit is not None:
        edit(group["spec"])
    doc["items"] += extra or []
    return read_snapshot(io.StringIO(json.dumps(doc))).snapshot


def web(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "shop"},
            "spec": {"schedulerName": "cpsat-scheduler", "priorityClassName": "serving",
                     "containers": [{"name": "main", "image": "app", "resources": {"requests": {"cpu": "3"}}}]},
            "status": {"phase": "Pending"}}


def decide(snapshot, engine: str):
    plan = schedule(snapshot, SchedulerConfig(), engine=engine)
    assert validate(snapshot, plan, SchedulerConfig()) == []
    return plan


def victims(plan) -> list[str]:
    return sorted(p.pod for p in plan.preemptions)


@pytest.mark.parametrize("engine", ["cpsat", "greedy"])
def test_disruption_mode_all_evicts_the_whole_group_or_none(engine: str) -> None:
    """The issue's repro: web-0 preempts the trainer, all three members, never one of them."""
    plan = decide(snapshot_with(), engine)
    assert victims(plan) == TRAINER
    assert {p.preemptor for p in plan.preemptions} == {"shop/web-0"}
    assert [n.pod for n in plan.nominations] == ["shop/web-0"]


@pytest.mark.parametrize("engine", ["cpsat", "greedy"])
def test_disruption_mode_single_evicts_one_member(engine: str) -> None:
    plan = decide(snapshot_with(lambda spec: spec.update(disruptionMode={"single": {}})), engine)
    assert len(victims(plan)) == 1 and victims(plan)[0] in TRAINER


@pytest.mark.parametrize("engine", ["cpsat", "greedy"])
def test_the_groups_priority_is_its_members(engine: str) -> None:
    """Without the group's priorityClassName its pods are critical-job (2000): web-0 (1000) may
    not preempt them, and waits."""
    plan = decide(snapshot_with(lambda spec: spec.pop("priorityClassName")), engine)
    assert plan.preemptions == ()
    assert [u.pod for u in plan.unschedulable] == ["shop/web-0"]


@pytest.mark.parametrize("engine", ["cpsat", "greedy"])
def test_the_groups_preemption_policy_is_its_members(engine: str) -> None:
    """A pending group whose PodGroup says preemptionPolicy: Never does not preempt, whatever its
    pods' class says."""
    extra = [{"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
              "metadata": {"name": "frontend", "namespace": "shop"},
              "spec": {"schedulingPolicy": {"basic": {}}, "preemptionPolicy": "Never"}}]
    pod = web("web-0")
    doc_pod = dict(pod, spec=dict(pod["spec"], schedulingGroup={"podGroupName": "frontend"}))
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["items"] = [i for i in doc["items"] if i["metadata"]["name"] != "web-0"] + extra + [doc_pod]
    snapshot = read_snapshot(io.StringIO(json.dumps(doc))).snapshot
    assert snapshot.pod_by_key["shop/web-0"].spec.preemption_policy == "Never"
    plan = decide(snapshot, engine)
    assert plan.preemptions == ()


def test_the_model_evicts_a_whole_group_for_three_preemptors() -> None:
    """Three web pods, one per node: the solver itself (not greedy's fallback) evicts the group,
    each member for the web pod on its node."""
    snapshot = snapshot_with(extra=[web("web-1"), web("web-2")])
    plan = decide(snapshot, "cpsat")
    assert victims(plan) == TRAINER
    assert sorted(a.pod for a in plan.assignments) == ["shop/web-0", "shop/web-1", "shop/web-2"]
    assert plan.stats.fallback is False


def test_the_validator_refuses_a_plan_breaking_an_all_group_up() -> None:
    """The single-mode plan (one member evicted), checked against the all-mode cluster."""
    single = snapshot_with(lambda spec: spec.update(disruptionMode={"single": {}}))
    plan = decide(single, "greedy")
    problems = validate(snapshot_with(), plan, SchedulerConfig())
    assert any(p.startswith("disruption: PodGroup ml/trainer (disruptionMode all) loses 1 of its 3 running member(s)")
               for p in problems), problems

"""Which cluster events move which waiting pods (`adapters/live/handlers.py`), on a manual clock.

Budgets: the live scheduler plans with hard PodDisruptionBudgets, so a budget that lets go of
its pods is an event that can make a preemptor schedulable; one that holds them tighter is not.
"""

from __future__ import annotations

from typing import Any, Optional

import pytest

from adapters.live.clock import ManualClock
from adapters.live.handlers import QueueFeeder
from adapters.live.queue import BACKOFF, UNSCHEDULABLE, SchedulingQueue
from models import Namespace, Pod, PodDisruptionBudget
from tests.adapters.live_harness import pdb, pod


def budget(min_available: int = 2, allowed: Optional[int] = None, healthy: Optional[tuple[int, int]] = None,
           policy: Optional[str] = None) -> PodDisruptionBudget:
    obj: dict[str, Any] = pdb("batch", min_available=min_available, app="batch")
    if allowed is not None:
        obj["status"] = {"disruptionsAllowed": allowed}
    if healthy is not None:
        obj.setdefault("status", {}).update(currentHealthy=healthy[0], desiredHealthy=healthy[1])
    if policy is not None:
        obj["spec"]["unhealthyPodEvictionPolicy"] = policy
    return PodDisruptionBudget.model_validate(obj)


def waiting(name: str, *, policy: Optional[str] = None) -> Pod:
    obj = pod(name)
    if policy:
        obj["spec"]["preemptionPolicy"] = policy
    return Pod.model_validate(obj)


@pytest.mark.parametrize("old, new, moves", [
    pytest.param(budget(), None, True, id="budget deleted"),
    pytest.param(budget(min_available=2), budget(min_available=1), True, id="spec loosened"),
    pytest.param(budget(min_available=1), budget(min_available=2), True, id="spec changed (any way)"),
    pytest.param(budget(allowed=0), budget(allowed=1), True, id="more disruptions allowed"),
    pytest.param(budget(allowed=0), budget(), True, id="status cleared: computed from the pods"),
    pytest.param(None, budget(), False, id="budget created"),
    pytest.param(budget(allowed=1), budget(allowed=0), False, id="fewer disruptions allowed"),
    pytest.param(budget(allowed=1), budget(allowed=1), False, id="status unchanged"),
    pytest.param(budget(allowed=0, healthy=(1, 2)), budget(allowed=0, healthy=(2, 2)), True,
                 id="healthy enough now: its pods that are not Ready may go"),
    pytest.param(budget(allowed=0, healthy=(2, 2)), budget(allowed=0, healthy=(1, 2)), False,
                 id="no longer healthy enough"),
])
def test_a_budget_that_lets_go_moves_pods_that_may_preempt(old: Optional[PodDisruptionBudget],
                                                           new: Optional[PodDisruptionBudget], moves: bool) -> None:
    queue = SchedulingQueue(clock=ManualClock())
    feeder = QueueFeeder(queue, scheduler_name="cpsat-scheduler", cache=lambda: None, victim_gone=lambda key: None,
                         pod_gone=lambda key: None)
    for p in (waiting("preemptor"), waiting("polite", policy="Never")):
        queue.add(p)
    queue.pop_window(2, 0)
    for name in ("preemptor", "polite"):
        queue.requeue_unschedulable(f"default/{name}", "0/1 nodes are available: 1 Insufficient cpu.")
    feeder.pdb_changed(old, new)
    assert queue.where("default/preemptor") == (BACKOFF if moves else UNSCHEDULABLE)
    assert queue.where("default/polite") == UNSCHEDULABLE  # it can never use a budget's room


def _running(name: str, ready: bool) -> Pod:
    obj = pod(name, node_name="n1", running=True, labels={"app": "batch"})
    obj["spec"]["schedulerName"] = "default-scheduler"
    obj["status"]["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    return Pod.model_validate(obj)


@pytest.mark.parametrize("policy, moves", [("AlwaysAllow", True), (None, False)],
                         ids=["AlwaysAllow: it goes unspent now", "IfHealthyBudget, not healthy enough"])
def test_a_running_pod_losing_its_readiness_moves_pods_that_may_preempt(policy: Optional[str], moves: bool) -> None:
    """Found by a review: a budget that lets a pod that is not Ready go unspent makes that pod a
    free victim when its readiness goes; waiting preemptors stayed for the five-minute flush."""
    queue = SchedulingQueue(clock=ManualClock())
    feeder = QueueFeeder(queue, scheduler_name="cpsat-scheduler", cache=lambda: None, victim_gone=lambda key: None,
                         pod_gone=lambda key: None)
    feeder.pdb_changed(None, budget(allowed=0, healthy=(1, 2), policy=policy))
    queue.add(waiting("preemptor"))
    queue.pop_window(1, 0)
    queue.requeue_unschedulable("default/preemptor", "0/1 nodes are available: 1 Insufficient cpu.")
    feeder.pod_updated(_running("victim", ready=True), _running("victim", ready=True))
    assert queue.where("default/preemptor") == UNSCHEDULABLE
    feeder.pod_updated(_running("victim", ready=True), _running("victim", ready=False))
    assert queue.where("default/preemptor") == (BACKOFF if moves else UNSCHEDULABLE)


def team(labels: Optional[dict[str, str]], name: str = "data") -> Optional[Namespace]:
    return None if labels is None else Namespace.model_validate(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})


def selecting(name: str) -> Pod:
    """A pod whose required anti-affinity selects namespaces by label."""
    obj = pod(name)
    obj["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": {"app": "db"}}, "namespaceSelector": {"matchLabels": {"team": "a"}},
        "topologyKey": "kubernetes.io/hostname"}]}}
    return Pod.model_validate(obj)


@pytest.mark.parametrize("old, new, moved", [
    pytest.param(team({"team": "a"}), team({"team": "b"}), ["inside", "selecting"], id="relabelled"),
    pytest.param(None, team({"team": "a"}), ["inside", "selecting"], id="namespace seen after its pods"),
    pytest.param(team({"team": "a"}), None, ["inside", "selecting"], id="namespace gone"),
    pytest.param(team({"team": "a"}), team({"team": "a"}), [], id="labels unchanged"),
])
def test_a_namespace_relabelled_moves_its_pods_and_those_selecting_namespaces(
        old: Optional[Namespace], new: Optional[Namespace], moved: list[str]) -> None:
    """Its own waiting pods (a running pod's anti-affinity may select their namespace by label)
    and the pods whose own required terms have a namespaceSelector; no other pod."""
    queue = SchedulingQueue(clock=ManualClock())
    feeder = QueueFeeder(queue, scheduler_name="cpsat-scheduler", cache=lambda: None, victim_gone=lambda key: None,
                         pod_gone=lambda key: None)
    inside = Pod.model_validate(pod("inside", ns="data"))
    for p in (inside, selecting("selecting"), waiting("elsewhere")):
        queue.add(p)
    queue.pop_window(3, 0)
    for key in ("data/inside", "default/selecting", "default/elsewhere"):
        queue.requeue_unschedulable(key, "0/1 nodes are available: 1 node(s) didn't match pod anti-affinity rules.")
    feeder.namespace_changed(old, new)
    assert all(queue.where(key) == UNSCHEDULABLE for key in ("data/inside", "default/selecting", "default/elsewhere"))
    feeder.settle()  # (the scheduler's housekeeping: one pass for every change since the last)
    where = {key.split("/")[1]: queue.where(key) for key in ("data/inside", "default/selecting", "default/elsewhere")}
    assert sorted(name for name, pool in where.items() if pool != UNSCHEDULABLE) == moved


def test_many_namespace_changes_are_one_pass_over_the_waiting_pods() -> None:
    """Found by a review: each namespace event walked every waiting pod under the cache's lock
    (2,000 relabelled namespaces over 10,000 waiting pods: 73 s); they are gathered and moved
    together."""
    queue = SchedulingQueue(clock=ManualClock())
    feeder = QueueFeeder(queue, scheduler_name="cpsat-scheduler", cache=lambda: None, victim_gone=lambda key: None,
                         pod_gone=lambda key: None)
    passes = []
    move_all = queue.move_all
    queue.move_all = lambda predicate=None: passes.append(1) or move_all(predicate)  # type: ignore[method-assign]
    for i in range(50):
        feeder.namespace_changed(None, Namespace.model_validate({"metadata": {"name": f"ns-{i}", "labels": {"team": "a"}}}))
    feeder.settle()
    feeder.settle()
    assert passes == [1]

"""The live scheduler and two 1.37 PodGroup fields a dump's reader applies: the device claims a
group owns (``spec.resourceClaims``: members share the claim the group's status names) and a
PodGroup's own ``priorityClassName`` when it names no parent. A live snapshot gives the solver
what ``schedule`` gives it for a dump of the same objects, so both decide alike; end to end
over HTTP against the in-memory API server, the shared claim is written as the plan allocates
it, and a group's class outranks its pods' own priority."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import yaml

from adapters.live.api_client import (CORE_PODGROUPS, DRA_RESOURCES, DEVICE_CLASSES, GANG_RESOURCES, NODES, PDBS, PODS,
                                      PRIORITY_CLASSES, RESOURCE_CLAIMS, RESOURCE_SLICES, VOLUME_RESOURCES)
from adapters.live.cache import ClusterCache
from adapters.snapshot_io import read_snapshot
from models import ClusterSnapshot, SchedulerConfig
from solver import schedule, validate
from tests.adapters.live_harness import (NS, Cluster, cluster_factory, fast_config, fast_options, node, pod,
                                         priority_class, wait_for)

V137 = ["scheduling.k8s.io/v1beta1", "scheduling.k8s.io/v1alpha3"]
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "snapshots" / "gangs" / "group-claims.yaml"
MEMBERS = [f"{NS}/allreduce-0", f"{NS}/allreduce-1"]
MADE = "allreduce-fabric-x7k2p"  # the claim the resourceclaim controller made for the group's entry
BY_KIND = {"Node": NODES, "Pod": PODS, "PodGroup": CORE_PODGROUPS, "PriorityClass": PRIORITY_CLASSES,
           "DeviceClass": DEVICE_CLASSES, "ResourceSlice": RESOURCE_SLICES, "ResourceClaim": RESOURCE_CLAIMS}


def claim_objects(*, made: bool = True) -> list[dict[str, Any]]:
    """examples/snapshots/gangs/group-claims.yaml in one namespace; ``made``: the controller has
    made the group's claim and its status names it."""
    items = yaml.safe_load(EXAMPLE.read_text())["items"]
    for item in items:
        if "namespace" in item["metadata"]:
            item["metadata"]["namespace"] = NS
    if made:
        group = next(i for i in items if i["kind"] == "PodGroup")
        group["status"] = {"resourceClaimStatuses": [{"name": "fabric", "resourceClaimName": MADE}]}
        template = next(i for i in items if i["kind"] == "ResourceClaimTemplate")
        items.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                      "metadata": {"name": MADE, "namespace": NS,
                                   "annotations": {"resource.kubernetes.io/podgroup-claim-name": "fabric"}},
                      "spec": copy.deepcopy(template["spec"]["spec"])})
    return items


def synced_cache(objects: list[dict[str, Any]]) -> ClusterCache:
    cache = ClusterCache()
    for resource in (NODES, PODS, PDBS, PRIORITY_CLASSES, *GANG_RESOURCES, *VOLUME_RESOURCES, *DRA_RESOURCES):
        cache.replace(resource, [o for o in objects if BY_KIND.get(o["kind"]) is resource])
    return cache


def from_dump(objects: list[dict[str, Any]], tmp_path: Path) -> ClusterSnapshot:
    path = tmp_path / "dump.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    return read_snapshot(path).snapshot


def pending(objects: list[dict[str, Any]]) -> list[str]:
    return [f"{NS}/{o['metadata']['name']}" for o in objects if o["kind"] == "Pod" and not o["spec"].get("nodeName")]


def decided(snapshot: ClusterSnapshot) -> tuple[list[tuple[str, str]], list[tuple[str, tuple[str, ...], Any]],
                                                list[tuple[str, str]]]:
    plan = schedule(snapshot, SchedulerConfig(), engine="cpsat")
    assert validate(snapshot, plan, SchedulerConfig()) == []
    return (sorted((a.pod, a.node) for a in plan.assignments),
            [(a.claim, a.pods, a.allocation) for a in plan.allocations],
            sorted((v.pod, v.preemptor) for v in plan.preemptions))


# --- group-owned claims --------------------------------------------------------------------------

def test_members_share_the_claim_their_groups_status_names_as_in_a_dump(tmp_path: Path) -> None:
    objects = claim_objects()
    live = synced_cache(objects).snapshot(pending(objects))
    dump = from_dump(objects, tmp_path)
    for key in MEMBERS:
        assert live.pod(key).status == dump.pod_by_key[key].status  # type: ignore[union-attr]
        assert [pc.key for pc in live.pod_claims(live.pod(key))] == [f"{NS}/{MADE}"]  # type: ignore[arg-type]
    got = decided(live)
    assert got == decided(dump)
    assert [(claim, pods) for claim, pods, _ in got[1]] == [(f"{NS}/{MADE}", tuple(MEMBERS))]
    assert {n for _, n in got[0]} == {"n0", "n1"}  # rack-1: rack-2's link is held


def test_members_wait_for_the_groups_claim_the_controller_has_not_made() -> None:
    """Live, as for a pod's own template, the scheduler makes no claim: the members' entries stay
    their own (a dump's reader makes the group's claim from the template it holds)."""
    objects = claim_objects(made=False)
    live = synced_cache(objects).snapshot(pending(objects))
    for key in MEMBERS:
        member = live.pod(key)
        assert member is not None and member.status.resource_claim_statuses == []
    assert decided(live)[0] == []


def test_a_bound_member_is_shown_again_when_its_groups_claim_is_named() -> None:
    objects = claim_objects(made=False)
    member = next(o for o in objects if o["kind"] == "Pod" and o["metadata"]["name"] == "allreduce-0")
    member["spec"]["nodeName"] = "n0"
    cache = synced_cache(objects)
    first = cache.snapshot()
    assert first.pod(MEMBERS[0]).status.resource_claim_statuses == []  # type: ignore[union-attr]
    group = next(o for o in claim_objects() if o["kind"] == "PodGroup")
    cache.apply(CORE_PODGROUPS, "MODIFIED", group)  # the controller made the group's claim
    second = cache.snapshot()
    statuses = second.pod(MEMBERS[0]).status.resource_claim_statuses  # type: ignore[union-attr]
    assert [(s.name, s.resource_claim_name) for s in statuses] == [("fabric", MADE)]
    assert second.delta is not None and MEMBERS[0] in second.delta.pods
    cache.apply(CORE_PODGROUPS, "DELETED", group)  # the group gone: the entry is the pod's own again
    assert cache.snapshot().pod(MEMBERS[0]).status.resource_claim_statuses == []  # type: ignore[union-attr]


@pytest.fixture
def make_cluster() -> Iterator[Callable[..., Cluster]]:
    yield from cluster_factory()


def devices(claim: dict[str, Any]) -> list[tuple[str, str, str]]:
    results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
    return sorted((r["driver"], r["pool"], r["device"]) for r in results)


def test_the_groups_claim_is_written_live_as_the_offline_plan_allocates_it(
        make_cluster: Callable[..., Cluster], tmp_path: Path) -> None:
    objects = claim_objects()
    members = [o for o in objects if o["kind"] == "Pod" and not o["spec"].get("nodeName")]
    others = [o for o in objects if o not in members]
    offline = decided(from_dump(objects, tmp_path))
    cluster = make_cluster(others, gang_apis=V137)
    cluster.scheduler(fast_config(), fast_options(engine="cpsat", window_wait=0.2))
    cluster.create(*members)
    assert wait_for(lambda: all(cluster.node_of(k.split("/")[1]) for k in MEMBERS), timeout=15)
    assert {cluster.node_of(k.split("/")[1]) for k in MEMBERS} == {n for _, n in offline[0]}
    claim = cluster.server.store.get("resourceclaims", NS, MADE) or {}
    ((_, _, allocation),) = offline[1]
    assert devices(claim) == devices({"status": {"allocation": allocation}}) == [("fabric.example.com", "rack-1", "link-0")]
    assert sorted(r["name"] for r in claim["status"]["reservedFor"]) == ["allreduce-0", "allreduce-1"]
    # the replay of the final state (``simulate.final_state_violations``, as ``run --simulate``
    # ends) reads the group's claim as shared too: one allocation for both, not one per member
    assert cluster.violations() == []
    assert cluster.double_binds() == []


# --- a PodGroup's own priorityClassName ---------------------------------------------------------------

def urgent_group(class_name: str = "gold") -> dict[str, Any]:
    """A v1beta1 PodGroup of one naming no parent, at ``class_name``'s priority."""
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": "urgent", "namespace": NS},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 1}}, "priorityClassName": class_name}}


def priority_objects() -> list[dict[str, Any]]:
    """One node of 1 CPU full with a pod at 500; a pod at 0 of a group at "gold" (1000) wants it."""
    busy = pod("busy", cpu="1", priority_class="mid", node_name="n1", running=True)
    urgent = pod("urgent-0", cpu="1", scheduling_group="urgent")
    return [node("n1", cpu="1"), priority_class("gold", 1000), priority_class("mid", 500), busy, urgent_group(), urgent]


def test_a_groups_own_priority_class_is_its_members_priority_as_in_a_dump(tmp_path: Path) -> None:
    objects = priority_objects()
    live = synced_cache(objects).snapshot(pending(objects))
    dump = from_dump(objects, tmp_path)
    assert live.pod_group_by_key[f"{NS}/urgent"].spec == dump.pod_group_by_key[f"{NS}/urgent"].spec
    assert live.pod(f"{NS}/urgent-0").spec.priority == 1000  # type: ignore[union-attr]
    got = decided(live)
    assert got == decided(dump)
    assert got[2] == [(f"{NS}/busy", f"{NS}/urgent-0")]  # at its pod's own 0 it could not preempt


def test_a_group_naming_a_missing_class_keeps_its_pods_waiting_saying_why() -> None:
    objects = [o for o in priority_objects() if o["metadata"]["name"] != "gold"]
    cache = synced_cache(objects)
    snapshot = cache.snapshot(pending(objects))  # one bad group stops no window
    assert f"{NS}/urgent" not in snapshot.pod_group_by_key
    assert cache.group_problem(f"{NS}/urgent") == (
        f"PodGroup {NS}/urgent cannot be used by the scheduler until it is fixed: "
        f'podgroups/{NS}/urgent: spec.priorityClassName: priority class "gold" not found')
    cache.apply(PRIORITY_CLASSES, "ADDED", priority_class("gold", 1000))  # the class comes: it is used
    assert cache.group_problem(f"{NS}/urgent") is None
    assert cache.snapshot(pending(objects)).pod_group_by_key[f"{NS}/urgent"].spec.priority == 1000


def test_a_groups_priority_class_preempts_live_once_it_exists(make_cluster: Callable[..., Cluster]) -> None:
    """The group's class missing, its pod waits saying so; the class created, the pod is tried
    again at the group's priority and preempts (at its own 0 it could not)."""
    objects = priority_objects()
    cluster = make_cluster([o for o in objects[:-1] if o["metadata"]["name"] != "gold"], gang_apis=V137)
    cluster.scheduler(fast_config(), fast_options(engine="cpsat", window_wait=0.2))
    cluster.create(objects[-1])
    why = f"PodGroup {NS}/urgent cannot be used by the scheduler until it is fixed: "
    assert wait_for(lambda: any(e["involvedObject"]["name"] == "urgent-0" and e["message"].startswith(why)
                                for e in cluster.events("FailedScheduling")), timeout=15)
    assert cluster.node_of("urgent-0") is None and cluster.pod("busy") is not None
    cluster.create(priority_class("gold", 1000))
    assert wait_for(lambda: cluster.node_of("urgent-0"), timeout=15) == "n1"
    assert cluster.pod("busy") is None
    assert [e["involvedObject"]["name"] for e in cluster.events("Preempted")] == ["busy"]
    assert cluster.violations() == []

"""A device claim the PodGroup owns (Kubernetes 1.37, KEP-5729), on
examples/snapshots/gangs/group-claims.yaml: ml/allreduce's two members share one claim made for
the group, one rack fabric link; each rack has one link and rack-2's is taken."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml

from adapters.snapshot_io import read_snapshot
from models import SchedulerConfig
from solver import schedule, validate

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "snapshots" / "gangs" / "group-claims.yaml"
MEMBERS = ["ml/allreduce-0", "ml/allreduce-1"]


def snapshot_with(edit=None):
    items = yaml.safe_load(EXAMPLE.read_text())["items"]
    if edit is not None:
        edit(items)
    return read_snapshot(io.StringIO(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))).snapshot


def group(items) -> dict:
    return next(i for i in items if i["kind"] == "PodGroup")


def decide(snapshot, engine: str):
    plan = schedule(snapshot, SchedulerConfig(), engine=engine)
    assert validate(snapshot, plan, SchedulerConfig()) == []
    return plan


@pytest.mark.parametrize("engine", ["cpsat", "greedy"])
def test_members_share_the_groups_claim_on_the_nodes_its_device_reaches(engine: str) -> None:
    plan = decide(snapshot_with(), engine)
    assert sorted((a.pod, a.node) for a in plan.assignments) in (
        [("ml/allreduce-0", "n0"), ("ml/allreduce-1", "n1")], [("ml/allreduce-0", "n1"), ("ml/allreduce-1", "n0")])
    assert [(a.claim, a.pods) for a in plan.allocations] == [("ml/allreduce-fabric-", tuple(MEMBERS))]
    assert plan.allocations[0].allocation["devices"]["results"][0]["pool"] == "rack-1"
    if engine == "cpsat":
        assert plan.stats.fallback is False  # the model spreads the sharing pods over the rack itself


@pytest.mark.parametrize("engine", ["cpsat", "greedy"])
def test_without_the_groups_claim_each_pod_needs_a_link_and_the_gang_waits(engine: str) -> None:
    plan = decide(snapshot_with(lambda items: group(items)["spec"].pop("resourceClaims")), engine)
    assert plan.assignments == () and sorted(u.pod for u in plan.unschedulable) == MEMBERS


def test_a_claim_the_controller_made_for_the_group_is_the_one_shared() -> None:
    """The group's status names ml/allreduce-fabric-x7k2p: the members share that claim."""
    def made(items):
        group(items)["status"] = {"resourceClaimStatuses": [{"name": "fabric", "resourceClaimName": "allreduce-fabric-x7k2p"}]}
        template = next(i for i in items if i["kind"] == "ResourceClaimTemplate")
        items.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                      "metadata": {"name": "allreduce-fabric-x7k2p", "namespace": "ml"}, "spec": template["spec"]["spec"]})
    plan = decide(snapshot_with(made), "cpsat")
    assert [(a.claim, a.pods) for a in plan.allocations] == [("ml/allreduce-fabric-x7k2p", tuple(MEMBERS))]


def test_an_entry_naming_another_template_is_the_pods_own() -> None:
    snapshot = snapshot_with(lambda items: group(items)["spec"]["resourceClaims"][0].update(
        resourceClaimTemplateName="other"))
    pod = snapshot.pod_by_key["ml/allreduce-0"]
    assert pod.status.resource_claim_statuses == []
    assert [pc.key for pc in snapshot.pod_claims(pod)] == ["ml/allreduce-0-fabric-"]

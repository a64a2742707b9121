"""``allocationMode: All`` and claims several pending pods share, decided in the model itself
(not left to the validator with greedy's plan standing in): the solver's own plan is kept,
valid, and places at least what greedy places."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adapters.snapshot_io import load_snapshot
from models import SchedulerConfig
from solver.api import schedule
from solver.validate import validate
from tests.solver.dra_cli import EXAMPLES, cli_plan


def test_a_request_for_all_devices_takes_a_whole_node(tmp_path: Path) -> None:
    cpsat = cli_plan("cpsat", "all-devices.yaml", tmp_path)
    greedy = cli_plan("greedy", "all-devices.yaml", tmp_path)
    assert len(greedy["assignments"]) == 2  # spreading parts the singles; whole finds no free node
    placed = {a["pod"]: a["node"] for a in cpsat["assignments"]}
    assert set(placed) == {"ml/one-a", "ml/one-b", "ml/whole"}
    assert placed["ml/one-a"] == placed["ml/one-b"] != placed["ml/whole"]
    whole = next(a for a in cpsat["allocations"] if a["claim"] == "ml/whole-gpu-")
    assert sorted(r["device"] for r in whole["allocation"]["devices"]["results"]) == ["gpu-0", "gpu-1"]
    assert {r["pool"] for r in whole["allocation"]["devices"]["results"]} == {placed["ml/whole"]}
    assert cpsat["stats"]["plan_from"] == "solver"


def test_a_claim_two_pending_pods_share_is_allocated_once_and_both_land_with_it(tmp_path: Path) -> None:
    plan = cli_plan("cpsat", "shared-claim.yaml", tmp_path)
    assert plan["stats"]["plan_from"] == "solver"
    placed = {a["pod"]: a["node"] for a in plan["assignments"]}
    assert len(placed) == 3 and placed["ml/reader-0"] == placed["ml/reader-1"] != placed["ml/solo"]
    shared = [a for a in plan["allocations"] if a["claim"] == "ml/shared-gpu"]
    assert len(shared) == 1 and shared[0]["pods"] == ["ml/reader-0", "ml/reader-1"]
    assert [r["pool"] for r in shared[0]["allocation"]["devices"]["results"]] == [placed["ml/reader-0"]]


@pytest.mark.parametrize("readers", [2, 3])
def test_shared_claim_readers_that_cannot_all_fit_one_node_stay_together(tmp_path: Path, readers: int) -> None:
    """Each node has room (CPU) for two readers: with three readers sharing one node-local GPU,
    two run and the third waits — never a reader on a node the claim's GPU is not on."""
    import yaml

    items = yaml.safe_load((EXAMPLES / "shared-claim.yaml").read_text())["items"]
    items = [i for i in items if not (i["kind"] == "Pod" and i["metadata"]["name"] == "solo")]
    for i in items:
        if i["kind"] == "Node":
            i["status"]["allocatable"]["cpu"] = "8"
    reader = next(i for i in items if i["kind"] == "Pod")
    for k in range(2, readers):
        extra = json.loads(json.dumps(reader))
        extra["metadata"]["name"] = f"reader-{k}"
        items.append(extra)
    path = tmp_path / "snap.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    snap = load_snapshot(path)
    greedy = schedule(snap, engine="greedy")
    plan = schedule(snap, engine="cpsat")
    assert validate(snap, plan, SchedulerConfig()) == []
    assert plan.stats.plan_from == "solver"
    assert len(plan.assignments) == 2 == len(greedy.assignments)
    assert len({a.node for a in plan.assignments}) == 1

"""``firstAvailable`` as the model's objective level: a claim gets a less preferred subrequest
only when the better one cannot be had without placing fewer pods, and the plan names the
subrequest given (``request: <request>/<subrequest>``, as kube-scheduler writes it)."""

from __future__ import annotations

from pathlib import Path

from adapters.snapshot_io import load_snapshot
from models import SchedulerConfig
from solver.api import schedule
from solver.validate import validate
from tests.solver.dra_cli import EXAMPLES, cli_plan


def run(engine: str, name: str, tmp_path: Path) -> tuple[dict, dict[str, list[tuple[str, str]]]]:
    data = cli_plan(engine, name, tmp_path)
    given = {a["claim"]: [(r["request"], f"{r['pool']}/{r['device']}") for r in a["allocation"]["devices"]["results"]]
             for a in data["allocations"]}
    return {a["pod"]: a["node"] for a in data["assignments"]}, given


def test_first_subrequest_chosen_where_it_can_be_had(tmp_path: Path) -> None:
    """The T4 node scores higher (the A100 node is half busy), but the A100 is free: the
    solver sends the pod there with its first subrequest."""
    placed, given = run("cpsat", "first-available.yaml", tmp_path)
    assert placed == {"ml/infer": "a100-node"}
    assert given == {"ml/infer-gpu-": [("gpu/big", "a100-node/gpu-0")]}
    # greedy has no such preference across nodes: node scores send it to the T4
    placed, given = run("greedy", "first-available.yaml", tmp_path)
    assert placed == {"ml/infer": "t4-node"} and given == {"ml/infer-gpu-": [("gpu/small", "t4-node/gpu-0")]}


def test_pods_placed_outrank_the_preference(tmp_path: Path) -> None:
    """flex (first in the queue) would take the node's only A100 and leave train waiting; the
    solver gives flex its second choice so both run."""
    placed, given = run("cpsat", "first-available-contended.yaml", tmp_path)
    assert placed == {"ml/flex": "mixed", "ml/train": "mixed"}
    assert given == {"ml/flex-gpu-": [("gpu/small", "mixed/gpu-1")], "ml/train-gpu-": [("gpu", "mixed/gpu-0")]}
    placed, given = run("greedy", "first-available-contended.yaml", tmp_path)
    assert placed == {"ml/flex": "mixed"} and given == {"ml/flex-gpu-": [("gpu/big", "mixed/gpu-0")]}


def test_a_plan_naming_a_later_subrequest_is_still_valid_but_weighs_less(tmp_path: Path) -> None:
    """The validator checks the rules, not the preference: a plan giving infer its T4 is valid;
    the preference is an objective, which the engine's choice between plans reads too."""
    from solver.context import build_context
    from solver.cpsat.choose import plan_value, tier_weights

    snap = load_snapshot(EXAMPLES / "first-available.yaml")
    ctx = build_context(snap, SchedulerConfig())
    index = {n.name: n.index for n in ctx.nodes}
    weights = tier_weights([p.priority for p in ctx.window])
    on_a100 = plan_value(ctx, {"ml/infer": index["a100-node"]}, [], weights, {})
    on_t4 = plan_value(ctx, {"ml/infer": index["t4-node"]}, [], weights, {})
    assert on_a100 > on_t4 and on_a100[:4] == on_t4[:4]
    plan = schedule(snap, engine="greedy")
    assert validate(snap, plan, SchedulerConfig()) == []


def test_a_preferred_device_another_node_needs_is_left_to_it(tmp_path: Path) -> None:
    """net-0 (an A100 every node reaches) is the only A100 n0 can use, and one of the two that
    `whole` (allocationMode All, too big for n0) takes on n1. The solver puts flex on n0 with its
    second choice, the T4. Its devices used to be chosen node by node in placement order, flex's
    first: flex took net-0 as its first choice, whole found it gone, and the solver's plan
    failed validation — greedy's, with flex alone, stood in. Now the node that cannot be served
    in that order is served first."""
    import yaml

    v1 = "resource.k8s.io/v1"
    items: list[dict] = [{"apiVersion": v1, "kind": "DeviceClass", "metadata": {"name": m}, "spec": {"selectors": [
        {"cel": {"expression": f'device.attributes["gpu.example.com"].model == "{m}"'}}]}} for m in ("a100", "t4")]
    for name, cpu, model in (("n0", "4", "t4"), ("n1", "32", "a100")):
        items.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                      "status": {"allocatable": {"cpu": cpu, "memory": "64Gi", "pods": "110"}}})
        items.append({"apiVersion": v1, "kind": "ResourceSlice", "metadata": {"name": f"{name}-gpus"}, "spec": {
            "driver": "gpu.example.com", "nodeName": name, "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0", "attributes": {"model": {"string": model}}}]}})
    items.append({"apiVersion": v1, "kind": "ResourceSlice", "metadata": {"name": "net"}, "spec": {
        "driver": "gpu.example.com", "allNodes": True, "pool": {"name": "net", "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": "net-0", "attributes": {"model": {"string": "a100"}}}]}})
    requests = {"flex": [{"name": "g", "firstAvailable": [{"name": "big", "deviceClassName": "a100"},
                                                          {"name": "small", "deviceClassName": "t4"}]}],
                "whole": [{"name": "g", "exactly": {"deviceClassName": "a100", "allocationMode": "All"}}]}
    for t, (name, cpu) in enumerate((("flex", "1"), ("whole", "8"))):
        items.append({"apiVersion": v1, "kind": "ResourceClaimTemplate", "metadata": {"name": name, "namespace": "ml"},
                      "spec": {"spec": {"devices": {"requests": requests[name]}}}})
        items.append({"apiVersion": "v1", "kind": "Pod",
                      "metadata": {"name": name, "namespace": "ml", "creationTimestamp": f"2026-01-01T00:00:0{t}Z"},
                      "spec": {"schedulerName": "cpsat-scheduler",
                               "resourceClaims": [{"name": "g", "resourceClaimTemplateName": name}],
                               "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}, "claims": [{"name": "g"}]}}]}})
    path = tmp_path / "snap.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    snap = load_snapshot(path)
    assert len(schedule(snap, engine="greedy").assignments) == 1  # flex takes an A100 whole needs
    plan = schedule(snap, engine="cpsat")
    assert plan.stats.plan_from == "solver", plan.stats.fallback_reason
    assert {a.pod: a.node for a in plan.assignments} == {"ml/flex": "n0", "ml/whole": "n1"}
    given = {a.claim: sorted((r["request"], r["pool"], r["device"]) for r in a.allocation["devices"]["results"])
             for a in plan.allocations}
    assert given == {"ml/flex-g-": [("g/small", "n0", "gpu-0")],
                     "ml/whole-g-": [("g", "n1", "gpu-0"), ("g", "net", "net-0")]}
    assert validate(snap, plan, SchedulerConfig()) == []

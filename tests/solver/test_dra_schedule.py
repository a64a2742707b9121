"""Dynamic Resource Allocation wired into the decision: greedy allocates like kube-scheduler's
DynamicResources plugin, every plan carries its allocations and passes the validator, and the
validator refuses a plan that shares a device."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from adapters.snapshot_io import load_plan, load_snapshot
from models import SchedulerConfig
from solver.api import schedule
from solver.context import build_context
from solver.validate import validate
from solver.plugins.dynamic_resources.hold import hold_of

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples/snapshots/dra"
CLI = Path(sys.executable).with_name("cpsat-scheduler")


def devices(plan) -> dict[str, list[str]]:
    return {a.claim: [f"{r['pool']}/{r['device']}" for r in a.allocation["devices"]["results"]] for a in plan.allocations}


@pytest.mark.parametrize("engine", ["greedy", "cpsat"])
def test_contended_gpus_one_pod_waits_and_no_device_is_shared(engine: str) -> None:
    snap = load_snapshot(EXAMPLES / "contended.yaml")
    plan = schedule(snap, engine=engine)
    placed = {a.pod: a.node for a in plan.assignments}
    assert len(placed) == 2 and sorted(placed.values()) == ["n0", "n1"]
    (left,) = plan.unschedulable
    assert left.message.startswith("0/2 nodes are available: 2 cannot allocate all claims")
    assert devices(plan) == {f"{pod}-gpus-": [f"{node}/gpu-0", f"{node}/gpu-1"] for pod, node in placed.items()}
    assert validate(snap, plan, SchedulerConfig()) == []
    if engine == "greedy":  # kube-scheduler's queue order: the first two by name
        assert placed == {"ml/train-0": "n0", "ml/train-1": "n1"}
    else:  # the model counts the devices: its own plan is valid, no fallback
        assert plan.stats.fallback_reason is None or "validation" not in plan.stats.fallback_reason


def test_example_keeps_allocated_claim_and_pair_in_one_domain() -> None:
    snap = load_snapshot(EXAMPLES / "gpus.yaml")
    plan = schedule(snap)
    assert validate(snap, plan, SchedulerConfig()) == []
    got = devices(plan)
    assert "ml/held" not in got  # allocated in the snapshot: not allocated again
    assert "gpu-node-1/gpu-0" not in sum(got.values(), [])  # held's device
    pair = got["ml/pair-nvlink"]
    assert len(pair) == 2 and all(d.startswith("gpu-node-0/") for d in pair)  # the big-GPU class: node 0's a100s
    assert len({int(d[-1]) // 2 for d in pair}) == 1  # one NVLink domain (gpu-0/1 or gpu-2/3)
    assert {a.pod: a.node for a in plan.assignments}["ml/train-pair"] == "gpu-node-0"


def test_state_gives_devices_back_when_a_pod_is_removed() -> None:
    snap = load_snapshot(EXAMPLES / "contended.yaml")
    ctx = build_context(snap, SchedulerConfig())
    state = ctx.state.copy()
    first, second, third = ctx.window
    state.add(first, 0)
    assert len(hold_of(state).state.used) == 2
    copy = state.copy()
    copy.add(second, 0)  # nothing left on n0 for it: no allocation is made
    assert len(hold_of(copy).state.used) == 2 and len(hold_of(state).state.used) == 2
    state.remove(first)
    assert hold_of(state).state.used == {} and hold_of(state).added_allocations() == {}


def test_plan_round_trips_and_validate_names_both_claims_of_a_shared_device(tmp_path: Path) -> None:
    snapshot_path = EXAMPLES / "contended.yaml"
    out = subprocess.run([str(CLI), "schedule", "--engine", "greedy", "-o", "json", str(snapshot_path)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(out.stdout)
    assert load_plan(plan_path).allocations[0].allocation == data["allocations"][0]["allocation"]
    ok = subprocess.run([str(CLI), "validate", str(snapshot_path), str(plan_path)], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    # train-1 gets n0's devices too, and is moved onto n0
    data["allocations"][1]["allocation"] = data["allocations"][0]["allocation"]
    data["assignments"] = [{"pod": a["pod"], "node": "n0"} for a in data["assignments"]]
    plan_path.write_text(json.dumps(data))
    bad = subprocess.run([str(CLI), "validate", str(snapshot_path), str(plan_path)], capture_output=True, text=True)
    assert bad.returncode == 1
    assert ("dra: device gpu.example.com/n0/gpu-0 is given to 2 claims: ml/train-0-gpus-, ml/train-1-gpus-"
            in bad.stdout + bad.stderr)


def test_plan_without_allocations_is_invalid_for_pods_with_claims(tmp_path: Path) -> None:
    snap = load_snapshot(EXAMPLES / "contended.yaml")
    plan = schedule(snap, engine="greedy")
    stripped = plan.model_copy(update={"allocations": ()})
    assert validate(snap, stripped, SchedulerConfig()) == [
        "dra: pod ml/train-0 on n0: resourceclaim ml/train-0-gpus- is not allocated",
        "dra: pod ml/train-1 on n1: resourceclaim ml/train-1-gpus- is not allocated",
    ]


def test_table_lists_devices() -> None:
    out = subprocess.run([str(CLI), "schedule", str(EXAMPLES / "gpus.yaml")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "DEVICES: 3 claims allocated" in out.stdout
    assert "ml/worker-gpu-x7k2q  ml/worker      gpu      gpu.example.com/gpu-node-1/gpu-1" in out.stdout


def test_pods_differing_only_in_their_claim_are_decided_apart(tmp_path: Path) -> None:
    import yaml

    items = yaml.safe_load((EXAMPLES / "contended.yaml").read_text())["items"]
    pods = [i for i in items if i["kind"] == "Pod"]
    for i, name in enumerate(["big", "small"]):
        count = 8 if name == "big" else 1
        items.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                      "metadata": {"name": name, "namespace": "ml"},
                      "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
                          "deviceClassName": "gpu.example.com", "count": count}}]}}})
        pods[i]["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimName": name}]
    items.remove(pods[2])
    path = tmp_path / "snap.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    snap = load_snapshot(path)
    ctx = build_context(snap, SchedulerConfig())
    assert len(ctx.classes) == 2
    plan = schedule(snap, engine="greedy")
    assert [a.pod for a in plan.assignments] == ["ml/train-1"]
    assert [u.pod for u in plan.unschedulable] == ["ml/train-0"]


def _gpu_cluster(tmp_path: Path, devices_per_node: int) -> Path:
    import yaml

    items = yaml.safe_load((EXAMPLES / "contended.yaml").read_text())["items"]
    for item in items:
        if item["kind"] == "ResourceSlice":
            item["spec"]["devices"] = [{"name": f"gpu-{i}"} for i in range(devices_per_node)]
        if item["kind"] == "ResourceClaimTemplate":
            item["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = devices_per_node // 2
    path = tmp_path / f"gpus-{devices_per_node}.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


def test_model_size_follows_device_kinds_not_devices(tmp_path: Path) -> None:
    sizes = {}
    for per_node in (2, 20):
        snap = load_snapshot(_gpu_cluster(tmp_path, per_node))
        plan = schedule(snap, engine="cpsat")
        assert validate(snap, plan, SchedulerConfig()) == []
        assert len(plan.assignments) == 3  # two nodes, each with room for two pods
        assert plan.stats.fallback_reason is None or "validation" not in plan.stats.fallback_reason
        sizes[per_node] = plan.stats.variables
    assert sizes[2] is not None and sizes[20] == sizes[2]


@pytest.mark.parametrize("pinned, moved", [(True, "ml/web"), (False, "ml/serving")])
def test_repack_leaves_a_pod_with_node_local_devices_where_they_are(tmp_path: Path, pinned: bool, moved: str) -> None:
    """``serving`` (1 CPU) holds a GPU of gpu-node-1 through an allocated claim; ``web`` (8 CPU)
    runs on gpu-node-0. Freeing a node moves the small pod — unless its devices pin it."""
    import yaml

    items = [i for i in yaml.safe_load((EXAMPLES / "gpus.yaml").read_text())["items"]
             if i["kind"] != "Pod" or i["metadata"]["name"] == "serving"]
    items.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "ml"},
                  "spec": {"nodeName": "gpu-node-0", "containers": [{"name": "c", "resources": {"requests": {"cpu": "8"}}}]},
                  "status": {"phase": "Running"}})
    if not pinned:
        serving = next(i for i in items if i["kind"] == "Pod" and i["metadata"]["name"] == "serving")
        del serving["spec"]["resourceClaims"], serving["spec"]["containers"][0]["resources"]["claims"]
    snap = tmp_path / "snap.yaml"
    snap.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    config = tmp_path / "config.yaml"
    config.write_text("repack:\n  moveBarePods: true\n")
    out = subprocess.run([str(CLI), "repack", "--config", str(config), "-o", "json", str(snap)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    steps = json.loads(out.stdout)
    moves = [m["pod"] for m in steps.get("moves", [])]
    assert moves == [moved], steps


@pytest.mark.parametrize("engine", ["greedy", "cpsat"])
def test_a_device_every_node_reaches_is_given_once(tmp_path: Path, engine: str) -> None:
    """One network-attached device (``allNodes``) and two pods wanting it on different nodes:
    taking it from n0 must be seen from n1 (the filter's cache is per node for node-local
    devices only)."""
    import yaml

    items = [i for i in yaml.safe_load((EXAMPLES / "contended.yaml").read_text())["items"]
             if i["kind"] not in ("ResourceSlice", "Pod")]
    items.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "fabric"},
                  "spec": {"driver": "gpu.example.com", "allNodes": True,
                           "pool": {"name": "fabric", "generation": 1, "resourceSliceCount": 1},
                           "devices": [{"name": "switch-0"}]}})
    for i, node in enumerate(["n0", "n1"]):
        items.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}", "namespace": "ml"},
                      "spec": {"schedulerName": "cpsat-scheduler", "nodeSelector": {"kubernetes.io/hostname": node},
                               "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "one"}],
                               "containers": [{"name": "c"}]}})
    items.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                  "metadata": {"name": "one", "namespace": "ml"},
                  "spec": {"spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
                      "deviceClassName": "gpu.example.com"}}]}}}})
    for item in items:
        if item["kind"] == "Node":
            item["metadata"]["labels"] = {"kubernetes.io/hostname": item["metadata"]["name"]}
    path = tmp_path / "snap.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    snap = load_snapshot(path)
    if engine == "greedy":  # the filter asked before and after the other pod takes the device
        state = build_context(snap, SchedulerConfig()).state
        p0, p1 = (next(p for p in build_context(snap, SchedulerConfig()).window if p.key == k) for k in ("ml/p0", "ml/p1"))
        assert hold_of(state).allocation(p1, 1)[0] is not None
        state.add(p0, 0)
        assert hold_of(state).allocation(p1, 1) == (None, "cannot allocate all claims")
        state.remove(p0)
        assert hold_of(state).allocation(p1, 1)[0] is not None
    plan = schedule(snap, engine=engine)
    assert len(plan.assignments) == 1 and len(plan.unschedulable) == 1
    assert [a.allocation for a in plan.allocations] == [
        {"devices": {"results": [{"request": "gpus", "driver": "gpu.example.com", "pool": "fabric", "device": "switch-0"}]}}]
    assert validate(snap, plan, SchedulerConfig()) == []


def test_solver_places_more_gpu_pods_than_one_pod_at_a_time(tmp_path: Path) -> None:
    """6 nodes of 8 GPUs in two NVLink domains, 20 pods of 1, 2, 4 or 8 GPUs (pairs and quads
    within a domain): kube-scheduler's order strands devices that a joint choice uses."""
    pool = tmp_path / "pool.yaml"
    pool.write_text(subprocess.run([sys.executable, str(ROOT / "examples/dra_gpu_pool.py"), "6", "20"],
                                   capture_output=True, text=True, check=True).stdout)
    snap = load_snapshot(pool)
    greedy = schedule(snap, engine="greedy")
    cpsat = schedule(snap, engine="cpsat")
    assert (len(greedy.assignments), len(cpsat.assignments)) == (18, 19)
    assert cpsat.stats.plan_from == "solver"
    for plan in (greedy, cpsat):
        assert validate(snap, plan, SchedulerConfig()) == []
        assert len(plan.allocations) == len(plan.assignments)


def test_a_gang_that_falls_short_gives_its_devices_back(tmp_path: Path) -> None:
    """Two nodes of 2 GPUs; a gang of three 2-GPU pods (minMember 3) cannot all land, so none
    does — and a pod behind it in the queue gets the GPUs the gang's members held for a moment."""
    import yaml

    items = [i for i in yaml.safe_load((EXAMPLES / "contended.yaml").read_text())["items"] if i["kind"] != "Pod"]
    items.append({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                  "metadata": {"name": "trainers", "namespace": "ml"}, "spec": {"minMember": 3}})
    for i in range(4):
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": f"t{i}", "namespace": "ml",
                            "creationTimestamp": f"2026-01-01T00:00:0{i}Z"},
               "spec": {"schedulerName": "cpsat-scheduler",
                        "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "two-gpus"}],
                        "containers": [{"name": "c"}]}}
        if i < 3:
            pod["metadata"]["labels"] = {"scheduling.x-k8s.io/pod-group": "trainers"}
        items.append(pod)
    path = tmp_path / "snap.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    snap = load_snapshot(path)
    plan = schedule(snap, engine="greedy")
    assert [a.pod for a in plan.assignments] == ["ml/t3"]
    assert [a.claim for a in plan.allocations] == ["ml/t3-gpus-"]
    assert validate(snap, plan, SchedulerConfig()) == []

"""``cpsat-scheduler repack``: exit codes, the JSON contract, table and YAML, --plot, bad input."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from adapters.cli import main

CONTRACT_KEYS = {"moves", "freed_nodes", "before", "after", "lower_bound_nodes", "stats"}
MOVE_KEYS = {"pod", "from", "to", "step"}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


NODE = (
    "- {apiVersion: v1, kind: Node, metadata: {name: %s, labels: {node.kubernetes.io/instance-type: %s}}, "
    "status: {allocatable: {cpu: '10', memory: 40Gi, pods: '110'}}}\n"
)
POD = (
    "- apiVersion: v1\n  kind: Pod\n"
    "  metadata: {name: %s, namespace: default, labels: {app: web}, ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web-1, controller: true}]%s}\n"
    "  spec: {nodeName: %s, containers: [{name: web, image: nginx, resources: {requests: {cpu: '%s', memory: 1Gi}}}]}\n"
    "  status: {phase: Running}\n"
)


def half_empty(tmp_path: Path, extra: str = "") -> str:
    """Four 10-CPU nodes, each 40% full with two 2-CPU pods: the optimum frees two with four moves."""
    items = "".join(NODE % (f"n{i}", "m5.xlarge") for i in range(4))
    items += "".join(POD % (f"web-{i}-{j}", "", f"n{i}", "2") for i in range(4) for j in range(2))
    path = tmp_path / "cluster.yaml"
    path.write_text("apiVersion: v1\nkind: List\nitems:\n" + items + extra)
    return str(path)


# --------------------------------------------------------------------------- results


def test_json_contract(tmp_path, capsys):
    code, out, err = run(capsys, "repack", half_empty(tmp_path), "-o", "json", "--time-limit", "10")
    assert code == 0, err
    data = json.loads(out)
    assert CONTRACT_KEYS <= set(data)
    assert len(data["moves"]) == 4 and all(MOVE_KEYS <= set(m) for m in data["moves"])
    assert [m["step"] for m in data["moves"]] == [1, 2, 3, 4]
    assert len(data["freed_nodes"]) == 2
    assert data["before"] == {"active_nodes": 4, "cost": 4.0}
    assert data["after"] == {"active_nodes": 2, "cost": 2.0}
    assert data["lower_bound_nodes"] == 2
    assert data["stats"]["status"] == "OPTIMAL" and isinstance(data["stats"]["wall_time_s"], float)
    assert {n["name"] for n in data["nodes"]} == {"n0", "n1", "n2", "n3"}
    freed = {n["name"]: n for n in data["nodes"] if n["state"] == "freed"}
    assert set(freed) == set(data["freed_nodes"]) and all(n["cpu_after"] == 0 for n in freed.values())


def test_yaml_is_the_json_data(tmp_path, capsys):
    path = half_empty(tmp_path)
    _, out_json, _ = run(capsys, "repack", path, "-o", "json")
    code, out_yaml, _ = run(capsys, "repack", path, "-o", "yaml")
    assert code == 0
    as_json, as_yaml = json.loads(out_json), yaml.safe_load(out_yaml)
    for data in (as_json, as_yaml):
        data["stats"].pop("wall_time_s")
        data["stats"].pop("build_time_s")
        data["stats"].pop("solve_time_s")
    assert as_yaml == as_json


def test_table_names_moves_freed_nodes_and_bounds(tmp_path, capsys):
    code, out, _ = run(capsys, "repack", half_empty(tmp_path))
    assert code == 0
    assert out.startswith("MOVES: 4 steps (4 pods moved)")
    assert "FREED: 2 nodes:" in out
    assert "TOTALS: active nodes 4 -> 2 | cost 4 -> 2 | moves 4" in out
    assert "LOWER BOUND: 2 nodes" in out and "gap 0 node(s)" in out


def test_options_reach_the_plan(tmp_path, capsys):
    path = half_empty(tmp_path)
    code, out, _ = run(capsys, "repack", path, "-o", "json", "--max-moves", "2")
    assert code == 0 and len(json.loads(out)["moves"]) == 2
    code, out, _ = run(capsys, "repack", path, "-o", "json", "--target-free", "1")
    assert code == 0 and len(json.loads(out)["freed_nodes"]) == 1
    code, out, _ = run(capsys, "repack", path, "-o", "json", "--keep-node", "n0", "n1", "n2")
    data = json.loads(out)
    assert code == 0 and data["freed_nodes"] == ["n3"]
    code, out, _ = run(capsys, "repack", path, "-o", "json", "--objective", "cost", "--seed", "3", "--workers", "1")
    assert code == 0 and json.loads(out)["stats"]["objective"] == "cost"


def test_unmovable_pod_shows_why_its_node_stays(tmp_path, capsys):
    pinned = POD % ("ledger", ", annotations: {cluster-autoscaler.kubernetes.io/safe-to-evict: 'false'}", "n0", "500m")
    code, out, _ = run(capsys, "repack", half_empty(tmp_path, pinned), "-o", "json")
    data = json.loads(out)
    assert code == 0 and "n0" not in data["freed_nodes"]
    n0 = next(n for n in data["nodes"] if n["name"] == "n0")
    assert "default/ledger" in n0["pinned_by"] and "safe-to-evict" in n0["pinned_by"]
    assert data["unmovable"] == {'annotated cluster-autoscaler.kubernetes.io/safe-to-evict: "false"': 1}


def test_plot_writes_a_png(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    picture = tmp_path / "util.png"
    code, _, err = run(capsys, "repack", half_empty(tmp_path), "--plot", str(picture))
    assert code == 0, err
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_exits_2(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    code, out, err = run(capsys, "repack", half_empty(tmp_path), "--plot", str(tmp_path / "x.png"))
    assert code == 2 and out == ""
    assert "--plot needs matplotlib" in err and "cpsat-scheduler[plot]" in err


def test_no_safe_order_exits_1_and_prints_no_plan(tmp_path, capsys, monkeypatch):
    from solver.repack import api

    def refuse(*args, **kwargs):
        raise api.OrderError("no safe order for 2 remaining move(s): ...", [])

    monkeypatch.setattr(api, "order_moves", refuse)
    code, out, err = run(capsys, "repack", half_empty(tmp_path), "-o", "json")
    assert code == 1 and out == ""
    assert err.startswith("cpsat-scheduler: no plan: no safe order")


def test_plan_failing_replay_is_refused(tmp_path, capsys, monkeypatch):
    from solver.repack import api

    monkeypatch.setattr(api, "replay", lambda *a, **k: ["step 1: default/x n0 -> n1: NodeResourcesFit: Insufficient cpu"])
    code, out, err = run(capsys, "repack", half_empty(tmp_path))
    assert code == 1 and out == ""
    assert "refusing to print a plan that fails its replay" in err and "Insufficient cpu" in err


# --------------------------------------------------------------------------- bad input: exit 2


def test_bad_quantity_names_object_and_field(tmp_path, capsys):
    path = half_empty(tmp_path, POD % ("bad", "", "n0", "12x"))
    code, out, err = run(capsys, "repack", path)
    assert code == 2 and out == ""
    assert err == (
        'cpsat-scheduler: error: pods/default/bad: spec.containers[0].resources.requests.cpu: "12x" is not a quantity\n'
    )


@pytest.mark.parametrize(
    "argv, message",
    [
        pytest.param(["--keep-node", "nope"], "error: --keep-node: nope: no node of that name in the snapshot", id="unknown-keep-node"),
        pytest.param(["--max-moves", "-1"], "argument --max-moves: '-1' must be >= 0", id="negative-max-moves"),
        pytest.param(["--target-free", "x"], "argument --target-free: 'x' is not an integer", id="bad-target-free"),
        pytest.param(["--objective", "speed"], "argument --objective: invalid choice: 'speed'", id="unknown-objective"),
    ],
)
def test_bad_options_exit_2(tmp_path, capsys, argv, message):
    code, out, err = run(capsys, "repack", half_empty(tmp_path), *argv)
    assert code == 2 and out == ""
    assert message in err


def test_missing_snapshot_exits_2(tmp_path, capsys):
    code, out, err = run(capsys, "repack", str(tmp_path / "missing.yaml"))
    assert code == 2 and out == "" and "missing.yaml" in err


def test_bad_config_exits_2(tmp_path, capsys):
    config = tmp_path / "config.yaml"
    config.write_text("repack: {moveBarePods: maybe}\n")
    code, out, err = run(capsys, "repack", half_empty(tmp_path), "--config", str(config))
    assert code == 2 and out == "" and "moveBarePods" in err


# --------------------------------------------------------------------------- benchmark


def test_bench_reports_plan_and_baseline_side_by_side():
    from adapters.bench.repack_bench import run_repack_bench

    report = run_repack_bench(30, 0, 5.0)
    assert report["nodes"] == 30 and report["active_before"] == 30
    for side in ("cpsat", "baseline"):
        assert {"freed", "moves", "active_after", "wall_s"} <= set(report[side])
    assert report["baseline"]["safe"] is True
    assert report["cpsat"]["active_after"] >= report["lower_bound_nodes"]
    assert report["cpsat"]["freed"] >= report["baseline"]["freed"]


def test_quickstart_keeps_postgres_in_its_volume_zone_and_coredns_in_place(capsys) -> None:
    """The bundled cluster: postgres-0's disk (a PersistentVolume in eu-west-1b) lets it move only
    within eu-west-1b; coredns (kube-system, no PodDisruptionBudget) pins its nodes."""
    quickstart = Path(__file__).resolve().parents[2] / "examples" / "snapshots" / "quickstart.yaml"
    assert main(["repack", str(quickstart), "-o", "json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    zones = {"worker-a-1": "a", "gpu-a-1": "a", "worker-b-1": "b", "worker-b-2": "b", "worker-c-1": "c", "worker-c-2": "c"}
    for move in plan["moves"]:
        if move["pod"] == "shop/postgres-0":
            assert zones.get(move["to"]) == "b", move
        assert not move["pod"].startswith("kube-system/"), move
    pinned = {n["name"]: n["pinned"] for n in plan["nodes"]}
    assert any(p["pod"].startswith("kube-system/coredns") for p in pinned["worker-a-1"])
    assert plan["blocked_pending"] == []


def test_the_runbook_cordons_first_then_evicts_in_order_then_removes(capsys) -> None:
    # The plan that frees worker-b-2 strands a pending web replica (issue 23): only the
    # --allow-blocking-pending plan moves anything on the bundled cluster.
    quickstart = Path(__file__).resolve().parents[2] / "examples" / "snapshots" / "quickstart.yaml"
    assert main(["repack", str(quickstart), "-o", "json", "--allow-blocking-pending"]) == 0
    plan = json.loads(capsys.readouterr().out)
    book = plan["runbook"]
    kinds = [a["action"] for a in book]
    freed = plan["freed_nodes"]
    assert freed and kinds == ["cordon"] * len(freed) + ["evict"] * len(plan["moves"]) + ["remove"] * len(freed)
    assert [a["node"] for a in book if a["action"] == "cordon"] == freed
    evictions = [a for a in book if a["action"] == "evict"]
    assert [(a["pod"], a["from"], a["to"]) for a in evictions] == [(m["pod"], m["from"], m["to"]) for m in plan["moves"]]
    for a in evictions:
        namespace, name = a["pod"].split("/")
        assert f"/api/v1/namespaces/{namespace}/pods/{name}/eviction" in a["command"]  # the Eviction API, not delete
        assert a["to"] in a["waits_for"]
    assert main(["repack", str(quickstart), "--allow-blocking-pending"]) == 0
    text = capsys.readouterr().out
    assert "RUNBOOK" in text and f"kubectl cordon {freed[0]}" in text


def test_plot_colours_say_what_became_of_each_node() -> None:
    """Freed nodes are the gain (green), nodes with DaemonSet pods only are not in use (pale),
    and long cloud node names are shortened in the middle."""
    from types import SimpleNamespace

    from adapters.repack_output import ACTIVE_COLOR, EMPTY_COLOR, FREED_COLOR, MAX_LABEL, _after_color, short_name

    assert _after_color(SimpleNamespace(freed=True, busy_after=False)) == FREED_COLOR
    assert _after_color(SimpleNamespace(freed=False, busy_after=False)) == EMPTY_COLOR
    assert _after_color(SimpleNamespace(freed=False, busy_after=True)) == ACTIVE_COLOR
    long = "ip-10-0-12-34.eu-west-1.compute.internal"
    assert len(short_name(long)) == MAX_LABEL and short_name(long).startswith("ip-10-0-") and short_name(long).endswith("internal")
    assert short_name("node-1") == "node-1"


def test_blocked_pending_says_which_pod_and_why(capsys) -> None:
    """Issue 23: freeing worker-b-2 strands a pending web replica (required hostname
    anti-affinity); the default plan does not free it and says why, the other names the pod."""
    quickstart = Path(__file__).resolve().parents[2] / "examples" / "snapshots" / "quickstart.yaml"
    assert main(["repack", str(quickstart), "-o", "json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["moves"] == [] and plan["freed_nodes"] == [] and plan["blocked_pending_reasons"] == []
    assert any("would leave 1 pending pod(s)" in n for n in plan["notes"])
    assert main(["repack", str(quickstart), "-o", "json", "--allow-blocking-pending"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["freed_nodes"] == ["worker-b-2"]
    [blocked] = plan["blocked_pending"]
    assert blocked.startswith("shop/web-")
    [why] = plan["blocked_pending_reasons"]
    assert why["pod"] == blocked and "didn't match pod anti-affinity rules" in why["reason"]
    assert main(["repack", str(quickstart), "--allow-blocking-pending"]) == 0
    assert f"blocked pending: {blocked}: fits today, not after the plan: 0/5 nodes are available" in capsys.readouterr().out


def test_repack_gives_the_collector_back(tmp_path, capsys):
    """The command plans with the cyclic collector paused (for speed on large dumps) and turns
    it back on when done, with a plan and when no plan is printed, so a caller in the same
    process (the live loop, a test run) keeps collecting."""
    import gc

    assert gc.isenabled()
    code, out, _ = run(capsys, "repack", half_empty(tmp_path), "-o", "json")
    assert code == 0 and json.loads(out)["freed_nodes"]
    assert gc.isenabled()
    code, _, _ = run(capsys, "repack", half_empty(tmp_path), "--objective", "nonsense")
    assert code == 2
    assert gc.isenabled()

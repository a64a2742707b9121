"""Re-packing in rounds (``solver/repack/rounds.py``): the path large clusters take.

Rounds start above ``ROUNDS_ABOVE`` movable pods; the tests lower it so small clusters take the
same path (the path is the subject, not the size).
"""

from __future__ import annotations

import json

import pytest

from adapters.repack_output import dump_repack
from models.config import SchedulerConfig
from solver.repack import RepackOptions, plan_repack, rounds
from tests.builders import make_node, make_snapshot, spread
from tests.solver.test_repack import daemon, replay_ok, workload


@pytest.fixture
def in_rounds(monkeypatch):
    monkeypatch.setattr(rounds, "ROUNDS_ABOVE", 0)
    monkeypatch.setattr(rounds, "BATCH", 4)


def zoned_cluster(count: int = 18):
    """``count`` 10-CPU nodes in 3 zones, each 30% full: three 1-CPU pods, one of them of a
    Deployment spread over zones (maxSkew 1, DoNotSchedule), placed unevenly (zone a holds most)."""
    zones = "abc"
    nodes = [make_node(f"n{i:02d}", cpu="10", memory="40Gi", labels={"zone": zones[i % 3]}) for i in range(count)]
    pods = []
    for i in range(count):
        name = f"n{i:02d}"
        pods.append(daemon(name))
        for j in range(2):
            pods.append(workload(f"default/plain-{i}-{j}", name, cpu="1", owner=f"plain-{j}", labels={"app": f"plain-{j}"}))
        if i % 3 == 0 or i % 2 == 0:  # more spread pods in zone a: the cluster is skewed today
            pods.append(workload(f"default/web-{i}", name, cpu="1", owner="web",
                                 labels={"app": "web"}, spread=[spread("zone", {"app": "web"})]))
    return make_snapshot(nodes=nodes, pods=pods)


def test_rounds_give_a_valid_ordered_plan(in_rounds):
    snapshot = zoned_cluster()
    result = plan_repack(snapshot, options=RepackOptions(time_limit=10))
    assert result.stats["rounds"], "decided in rounds"
    assert len(result.freed_nodes) >= 6  # 18 nodes 30% full: most of them can go
    replay_ok(snapshot, result)  # every step fits when it runs, budgets and the end state hold
    assert [s.number for s in result.steps] == list(range(1, len(result.steps) + 1))
    assert result.stats["evictions"] == len(result.steps)
    assert sum(r["moves"] for r in result.stats["rounds"]) >= result.stats["evictions_needed_by_freed"]
    assert any("node(s) freed for" in note for note in result.notes)


def test_rounds_plan_on_a_generated_cluster(in_rounds):
    from adapters.bench import repack

    snapshot = repack(40, 3).snapshot()
    result = plan_repack(snapshot, options=RepackOptions(time_limit=10))
    assert len(result.stats["rounds"]) >= 2
    assert result.freed_nodes
    assert result.after_active >= result.lower_bound_nodes
    replay_ok(snapshot, result)


@pytest.mark.parametrize("cap", [0, 5, 8])
def test_rounds_honour_the_eviction_cap(in_rounds, cap):
    snapshot = zoned_cluster()
    result = plan_repack(snapshot, options=RepackOptions(time_limit=10, max_moves=cap))
    assert len(result.steps) <= cap
    assert result.stats["evictions_needed_by_freed"] <= len(result.steps)  # a freed node's pods all moved
    replay_ok(snapshot, result, max_moves=cap)
    if cap >= 2:
        assert result.freed_nodes  # nodes with two movable pods exist: the cap leaves room for one
    else:
        assert not result.steps


def test_rounds_json_keeps_its_shape(in_rounds, monkeypatch):
    snapshot = zoned_cluster(9)
    in_rounds_out = json.loads(dump_repack(plan_repack(snapshot, options=RepackOptions(time_limit=5)), "json"))
    monkeypatch.setattr(rounds, "ROUNDS_ABOVE", 10**9)
    one_model = json.loads(dump_repack(plan_repack(snapshot, SchedulerConfig(), RepackOptions(time_limit=5)), "json"))
    assert set(in_rounds_out) == set(one_model)
    assert set(one_model["stats"]) <= set(in_rounds_out["stats"])
    for key in ("evictions", "evictions_needed_by_freed", "evictions_per_freed_node"):
        assert key in one_model["stats"]
    assert {"round", "candidates", "receivers", "freed", "moves", "status", "seconds"} <= set(in_rounds_out["stats"]["rounds"][0])
    assert in_rounds_out["stats"]["evictions"] == len(in_rounds_out["moves"])


def test_repack_command_reports_each_round_and_caps_evictions(in_rounds, tmp_path, capsys):
    from adapters.bench.parse import dump
    from adapters.bench.workloads import repack
    from adapters.cli import main

    path = dump(repack(40, 3), tmp_path / "cluster.json")
    code = main(["repack", str(path), "--progress", "-o", "json", "--max-moves", "20", "--time-limit", "10"])
    out, err = capsys.readouterr()
    assert code == 0, err
    plan = json.loads(out)
    assert plan["stats"]["evictions"] == len(plan["moves"]) <= 20
    lines = [line for line in err.splitlines() if " round " in line and "candidate node(s) freed" in line]
    assert len(lines) == len(plan["stats"]["rounds"]) >= 1
    last = plan["stats"]["rounds"][-1]
    assert f"round {last['round']}: {last['freed']} of {last['candidates']}" in lines[-1]
    assert any("--max-moves 20 capped them" in note for note in plan["notes"])


@pytest.mark.parametrize("target", [1, 3])
def test_rounds_honour_target_free(in_rounds, target):
    snapshot = zoned_cluster()
    result = plan_repack(snapshot, options=RepackOptions(time_limit=10, target_free=target))
    assert len(result.freed_nodes) == target  # 18 nodes 30% full: the cap, not the cluster, stops it
    replay_ok(snapshot, result)

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


def two_receivers():
    """Two 5-CPU nodes to drain (one 1-CPU pod, one 4.5-CPU pod) and two 10-CPU receivers: ``rb``
    balanced (5 CPU, 5Gi free), ``ra`` short of memory (6 CPU, 1Gi free). The small pod fits
    both; only ``ra`` leaves room for the large one."""
    nodes = [make_node(n, cpu=c, memory=m) for n, c, m in
             (("c1", "5", "5Gi"), ("c2", "5", "5Gi"), ("rb", "10", "10Gi"), ("ra", "10", "10Gi"))]
    pods = [workload("default/small", "c1", cpu="1", memory="1Gi", owner="small"),
            workload("default/large", "c2", cpu="4500m", memory="4608Mi", owner="large"),
            workload("default/rb-pod", "rb", cpu="5", memory="5Gi", owner="rb"),
            workload("default/ra-pod", "ra", cpu="4", memory="9Gi", owner="ra")]
    return make_snapshot(nodes=nodes, pods=pods)


def test_round_walk_fills_the_receiver_full_in_every_resource(monkeypatch):
    """The walk puts the small pod where it leaves the least room in every resource together
    (``ra``: no memory left), so the large one still finds ``rb``: both nodes are emptied by the
    walk itself, each move checked once in order (by the largest single room left it went to
    ``rb`` and the large pod had no place: the walk failed and the round needed the model)."""
    import time

    from solver.repack.model import RepackOptions as Options
    from solver.repack.problem import build_problem

    monkeypatch.setattr(rounds, "BATCH", 2)
    problem = build_problem(two_receivers(), SchedulerConfig())
    done = rounds.solve_in_rounds(problem, Options(time_limit=10), time.monotonic() + 10)
    names = [n.name for n in problem.nodes]
    assert {k: names[n] for k, n in done.placement.final.items()} == {
        "default/small": "ra", "default/large": "rb", "default/rb-pod": "rb", "default/ra-pod": "ra"}
    assert done.checked == {"default/small", "default/large"}  # the walk's moves: no model ran
    assert done.rounds[0].freed == 2


def test_running_cluster_is_the_snapshot_as_it_runs():
    """``problem.running()`` (the order walk's start) is the cluster a context built afresh from
    the snapshot holds: the same pods on the same nodes, the same requests per node."""
    from solver.context import build_context
    from solver.repack.problem import build_problem, with_window

    snapshot = zoned_cluster()
    config = SchedulerConfig()
    problem = build_problem(snapshot, config)
    fresh = build_context(with_window(snapshot, set(), config.scheduler_name), problem.ctx.config).state
    mine = problem.running()
    assert dict(mine.state.where) == dict(fresh.where)
    assert (mine.state.used == fresh.used).all()
    for key in problem.origin:
        assert mine.pod(key) is not None and mine.pod(key).key == key

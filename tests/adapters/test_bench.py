"""``cpsat-scheduler bench``: both engines on the same workloads, the JSON contract, the table,
invalid plans and the quality floor flagged loudly, exit codes, windows, and the chart.

Runs tiny workloads (quick scale, a few seconds in all). Broken plans are injected through the
runner's seam (``schedule_fn`` / ``runner._schedule``), never by breaking the solver.
"""

from __future__ import annotations

import json
import logging
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest

from adapters.bench import generate
from adapters.bench import runner as bench_runner
from adapters.bench.objects import Factory, PodTemplate
from adapters.bench.report import plot_report, repack_table, report_table
from adapters.bench.runner import BenchReport, cut_windows, measure, queue_order, run_suite
from adapters.bench.workload_kit import Workload, finish
from adapters.cli import main
from models import Assignment, Plan, PlanStats, SchedulerConfig, Unschedulable, pod_group_key

CONFIG = SchedulerConfig().with_overrides(time_limit_seconds=2.0)
CONTRACT_RESULT = {"placed", "weighted", "nodes_used", "gap", "p50_ms", "p99_ms", "pods_per_s"}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["bench", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@lru_cache(maxsize=None)
def suite() -> BenchReport:
    return run_suite(["basic", "fragmentation"], "quick", config=CONFIG)


def suite_json() -> dict[str, Any]:
    return suite().to_json()


def tiny_priorities() -> Workload:
    """One 4-CPU node; a 4-CPU pod of priority 1000 and three 1-CPU pods of priority 0."""
    f = Factory(0)
    f.priority_class("high", 1000)
    f.node("node-0", cpu="4", memory="16Gi", zone="bench-1a")
    f.pods(f.replicaset("small", "t"), PodTemplate("small", {"cpu": "1", "memory": "1Gi"}), [None] * 3)
    f.pods(f.replicaset("big", "t"), PodTemplate("big", {"cpu": "4", "memory": "1Gi"}, priority=1000, priority_class="high"), [None])
    return finish("tiny", "quick", 0, f, None, "tiny")


# --------------------------------------------------------------------------- the JSON contract


def test_both_engines_run_on_each_workload_and_fill_the_contract() -> None:
    report = suite_json()
    assert [w["name"] for w in report["workloads"]] == ["basic", "fragmentation"]
    assert report["machine"]["cpus"] >= 1 and report["machine"]["python"].startswith("3.")
    assert report["ok"] is True and report["failures"] == []
    for w in report["workloads"]:
        assert {"name", "nodes", "pods", "results", "bound"} <= set(w)
        assert set(w["results"]) == {"cpsat", "greedy"}
        assert w["bound"]["max_placeable"] <= w["pods"]
        for engine, r in w["results"].items():
            assert CONTRACT_RESULT <= set(r), engine
            assert r["valid"] is True and r["violations"] == []
            assert 0 <= r["placed"] <= w["bound"]["max_placeable"]
            assert r["placed"] <= w["bound"]["cpsat_placeable"]
            for tier, most in w["bound"]["tiers"]["at_or_above_priority"].items():
                assert sum(n for p, n in r["placed_by_priority"].items() if int(p) >= int(tier)) <= most
            assert r["p50_ms"] <= r["p99_ms"] and r["pods_per_s"] > 0
        assert w["results"]["cpsat"]["placed"] >= w["results"]["greedy"]["placed"]
        cpsat = w["results"]["cpsat"]
        # A gap where the solver's plan was returned (GREEDY_BETTER: greedy's won a tie on the
        # final-state score, and has no gap).
        assert (cpsat["gap"] is not None) != ("GREEDY_BETTER" in cpsat["status"]), cpsat["status"]
        assert w["results"]["greedy"]["gap"] is None
    json.dumps(report)  # serialisable as it is


def test_fragmentation_shows_the_joint_placement_winning() -> None:
    frag = next(w for w in suite_json()["workloads"] if w["name"] == "fragmentation")
    cpsat, greedy = frag["results"]["cpsat"], frag["results"]["greedy"]
    assert cpsat["placed"] == frag["pods"] == frag["bound"]["max_placeable"]
    assert greedy["placed"] < cpsat["placed"]
    assert frag["ratios"]["placed"] == round(cpsat["placed"] / greedy["placed"], 3)
    assert cpsat["variables"] and cpsat["constraints"] and cpsat["classes"] == 3


def test_topology_gangs_joint_placement_places_more_gangs_and_reports_them() -> None:
    """The contended quick topology-gang window: CP-SAT places strictly more whole gangs than
    greedy's one-gang-at-a-time TAS, and both report gangs, spans and fragmentation."""
    result = measure(generate("topology-gang", "quick", 0), SchedulerConfig.model_validate({"solver": {"timeLimitSeconds": 5}}))
    out = {engine: r.to_json() for engine, r in result.results.items()}
    assert all(r["valid"] for r in out.values())
    cpsat, greedy = out["cpsat"]["gangs"], out["greedy"]["gangs"]
    assert cpsat["gangs"] == greedy["gangs"] and cpsat["placed"] > greedy["placed"]
    assert set(cpsat["spans"]) == {"block", "rack"} and set(cpsat["fragmented"]) == {"rack"}
    table = report_table(BenchReport([result], {"scale": "quick", "seed": 0, "window_size": 50000, "repeat": 1}))
    assert "GANGS (placed" in table and f"{cpsat['placed']} / {cpsat['gangs']}" in table


def test_weighted_placement_is_the_tier_weighted_sum() -> None:
    result = measure(tiny_priorities(), CONFIG)
    for engine in ("cpsat", "greedy"):
        r = result.results[engine].to_json()
        # Tier weights: priority 0 weighs 1, priority 1000 weighs 3 * 1 + 1 = 4.
        assert r["placed_by_priority"] == {"1000": 1}, engine
        assert r["weighted"] == 4 and r["placed"] == 1
    assert bench_runner.tier_weights([0, 0, 0, 1000]) == {0: 1, 1000: 4}


def test_spread_skew_is_read_from_the_final_state() -> None:
    # The window solves to optimality in about half a second; the limit is only a ceiling, kept
    # far above that so a loaded machine cannot turn this into a timing test.
    result = measure(generate("spread", "quick"), CONFIG.with_overrides(time_limit_seconds=30.0))
    cpsat, greedy = (result.results[e].to_json() for e in ("cpsat", "greedy"))
    assert cpsat["spread_skew"] == 0 and cpsat["spread_above_max"] == 0
    assert greedy["spread_skew"] is not None and greedy["spread_skew"] >= cpsat["spread_skew"]
    basic = next(w for w in suite_json()["workloads"] if w["name"] == "basic")
    assert basic["results"]["cpsat"]["spread_skew"] is None  # no DoNotSchedule constraint at all


# --------------------------------------------------------------------------- windows


def test_windows_are_near_equal_slices_in_queue_order() -> None:
    pods = queue_order(generate("basic", "quick").snapshot().pending_pods())
    windows = cut_windows(pods, 30)
    assert [len(w) for w in windows] == [25, 25, 25, 25]
    assert [p.key for w in windows for p in w] == [p.key for p in pods]
    assert cut_windows(pods, 10_000) == [pods]
    assert cut_windows([], 5) == []


def test_a_window_cut_never_splits_a_gang() -> None:
    pods = queue_order(generate("gang", "quick").snapshot().pending_pods())
    windows = cut_windows(pods, 10)
    assert sum(len(w) for w in windows) == len(pods)
    seen: dict[str, int] = {}
    for i, window in enumerate(windows):
        for pod in window:
            group = pod_group_key(pod)
            assert seen.setdefault(group, i) == i, f"{group} spans windows {seen[group]} and {i}"


def test_queue_order_is_priority_then_age() -> None:
    pods = queue_order(tiny_priorities().snapshot().pending_pods())
    assert [p.metadata.labels["app"] for p in pods] == ["big", "small", "small", "small"]


def test_each_window_is_decided_on_the_state_the_earlier_ones_left() -> None:
    result = measure(generate("basic", "quick"), CONFIG, window_size=30)
    for engine in ("cpsat", "greedy"):
        r = result.results[engine].to_json()
        assert r["windows"] == 4 and r["valid"], engine
        assert r["placed"] == 100
        assert len(result.results[engine].latencies) == 4
    final = result.results["cpsat"].first.final
    assert not final.pending_pods() and len(final.bound_pods()) == 150


# --------------------------------------------------------------------------- failures are loud


def _crowd_the_first_node(snapshot, config, engine, **_) -> Plan:
    """An invalid plan: every pending pod on the first node."""
    node = snapshot.nodes[0].metadata.name
    pods = snapshot.pending_pods(config.scheduler_name)
    return Plan(assignments=tuple(Assignment(pod=p.key, node=node) for p in pods), stats=PlanStats(engine=engine, status="BROKEN"))


def _cpsat_places_nothing(snapshot, config, engine, **_) -> Plan:
    """A valid plan that places nothing, from cpsat only; greedy is the real one."""
    if engine == "greedy":
        return bench_runner._schedule(snapshot, config, engine)
    pods = snapshot.pending_pods(config.scheduler_name)
    return Plan(unschedulable=tuple(Unschedulable(pod=p.key, message="left out") for p in pods), stats=PlanStats(engine=engine, status="OPTIMAL"))


def test_an_invalid_plan_is_flagged_in_json_and_table() -> None:
    result = measure(generate("basic", "quick"), CONFIG, schedule_fn=_crowd_the_first_node)
    r = result.results["greedy"].to_json()
    assert r["valid"] is False and r["invalid_plans"] == 1
    assert any("capacity" in line or "pods" in line for line in r["violations"])
    failures = result.failures()
    assert any("greedy plan of window 1 (repeat 1) is INVALID" in line for line in failures)
    report = BenchReport([result], {"scale": "quick", "seed": 0, "window_size": 10_000, "repeat": 1})
    assert report.ok is False and report.to_json()["ok"] is False
    table = report_table(report)
    assert "INVALID x1" in table and "!!! FAILED" in table


def test_cpsat_below_greedy_breaks_the_quality_floor() -> None:
    result = measure(generate("basic", "quick"), CONFIG, schedule_fn=_cpsat_places_nothing)
    assert result.results["cpsat"].to_json()["valid"] is True
    below = result.below_greedy()
    assert below is not None and "cpsat placed 0 pods" in below and "greedy 100" in below
    report = BenchReport([result], {"scale": "quick", "seed": 0, "window_size": 10_000, "repeat": 1})
    table = report_table(report)
    assert "BELOW GREEDY" in table and "!!! FAILED" in table


# --------------------------------------------------------------------------- the command


def test_table_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--quick", "--workload", "basic", "--time-limit", "2")
    assert code == 0, err
    for heading in ("QUALITY", "TIME", "CPSAT / GREEDY", "OK: every plan valid"):
        assert heading in out
    assert "basic" in out and "cpsat" in out and "greedy" in out
    assert "bench: basic:" in err  # progress goes to stderr


def test_json_output_is_the_contract(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "-w", "fragmentation", "--time-limit", "2", "--repeat", "2", "--output", "json")
    assert code == 0
    report = json.loads(out)
    (w,) = report["workloads"]
    assert w["name"] == "fragmentation" and w["results"]["cpsat"]["placed_per_repeat"] == [145, 145]
    assert CONTRACT_RESULT <= set(w["results"]["greedy"])
    assert report["settings"]["repeat"] == 2


def test_invalid_plan_exits_1(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench_runner, "_schedule", _crowd_the_first_node)
    code, out, _ = run(capsys, "-w", "basic", "--time-limit", "1")
    assert code == 1
    assert "INVALID" in out and "!!! FAILED" in out


def test_below_greedy_exits_1(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    real = bench_runner._schedule

    def cpsat_empty(snapshot, config, engine, **kw):
        return _cpsat_places_nothing(snapshot, config, engine) if engine == "cpsat" else real(snapshot, config, engine, **kw)

    monkeypatch.setattr(bench_runner, "_schedule", cpsat_empty)
    code, out, _ = run(capsys, "-w", "basic", "--time-limit", "1", "-o", "json")
    assert code == 1
    assert json.loads(out)["failures"][0].startswith("BELOW GREEDY: basic (quick, seed 0)")


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["--workload", "no-such-workload"], id="unknown workload"),
        pytest.param(["--scale", "huge"], id="unknown scale"),
        pytest.param(["--repeat", "0"], id="repeat 0"),
        pytest.param(["--window-size", "0"], id="window 0"),
        pytest.param(["--time-limit", "-1"], id="negative time limit"),
        pytest.param(["--output", "yaml"], id="unknown output"),
    ],
)
def test_bad_usage_exits_2(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert "usage:" in err or "error:" in err


def test_plot_without_matplotlib_exits_2_before_running(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    code, out, err = run(capsys, "-w", "basic", "--plot", str(tmp_path / "chart.png"))
    assert code == 2 and out == ""
    assert "--plot needs matplotlib" in err and "cpsat-scheduler[plot]" in err
    assert "bench: basic" not in err  # refused before any work
    assert not (tmp_path / "chart.png").exists()


PNG = b"\x89PNG\r\n\x1a\n"


def test_plot_writes_a_png(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    chart = tmp_path / "chart.png"
    code, _, err = run(capsys, "-w", "basic", "--time-limit", "1", "--plot", str(chart))
    assert code == 0, err
    assert chart.read_bytes()[:8] == PNG
    assert f"chart written to {chart}" in err
    both = tmp_path / "both.png"
    plot_report(suite(), str(both))
    assert both.read_bytes()[:8] == PNG


def test_dump_writes_each_workload(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, _ = run(capsys, "-w", "basic", "--time-limit", "1", "--dump", str(tmp_path / "out"))
    assert code == 0
    dumped = json.loads((tmp_path / "out" / "basic-quick-seed0.json").read_text())
    assert dumped["kind"] == "List" and any(o["kind"] == "Node" for o in dumped["items"])


def test_model_size_of_a_fallback_comes_from_the_solver_log(capsys: pytest.CaptureFixture[str]) -> None:
    logger = logging.getLogger(bench_runner.SOLVER_LOGGER)
    before = (logger.level, logger.propagate, list(logger.handlers))
    with bench_runner._capture_solver_log() as log:
        logger.debug("built %d component(s): %d variables, %d constraints in %.2fs; hint: %s", 2, 1913, 649, 0.17, "greedy plan")
        logger.debug("component %d: %s in %.2fs (objective %s, bound %s)", 0, "UNKNOWN", 0.25, None, None)
        logger.debug("component %d: %s in %.2fs (objective %s, bound %s)", 1, "UNKNOWN", 0.5, None, None)
        logger.debug("an unrelated line %s", "x")
    assert log.figures == {"components": 2, "variables": 1913, "constraints": 649, "build_time_s": 0.17, "solve_time_s": 0.75}
    assert (logger.level, logger.propagate, list(logger.handlers)) == before
    assert capsys.readouterr().err == ""  # captured, not printed


def test_repack_is_offered_only_when_its_benchmark_exists() -> None:
    from adapters.commands import bench as command

    assert ("repack" in command.workload_names()) == command._repack_available()


def test_repack_table_shows_both_planners() -> None:
    result = {
        "nodes": 100, "running_pods": 645, "movable_pods": 250, "active_before": 100, "lower_bound_nodes": 66,
        "cpsat": {"freed": 34, "moves": 59, "active_after": 66, "status": "OPTIMAL", "wall_s": 1.9},
        "baseline": {"name": "HighNodeUtilization-like", "freed": 30, "moves": 255, "active_after": 70, "safe": True, "wall_s": 0.4},
    }
    lines = repack_table(result)
    assert lines[0].startswith("REPACK")
    assert any("cpsat" in line and "34" in line and "OPTIMAL" in line for line in lines)
    assert any("baseline" in line and "30" in line and "safe" in line for line in lines)


def test_the_whole_queue_is_one_decision_unless_a_window_size_is_given() -> None:
    """A pod-count cut buys no model size (the model follows the window's classes) and costs
    foresight: by default the queue is decided at once, up to limits.maxWindowPods."""
    result = measure(generate("basic", "quick"), CONFIG)
    assert result.to_json()["windows"] == [100]
    small = CONFIG.model_copy(update={"limits": CONFIG.limits.model_copy(update={"max_window_pods": 40})})
    assert measure(generate("basic", "quick"), small, engines=("greedy",)).to_json()["windows"] == [33, 34, 33]


def test_max_windows_measures_only_the_first_windows() -> None:
    result = measure(generate("basic", "quick"), CONFIG, window_size=30, max_windows=2)
    w = result.to_json()
    assert w["pods"] == 50 and w["queue"] == 100 and w["windows"] == [25, 25]
    assert w["bound"]["max_placeable"] == 50 and w["bound"]["achievable"] is None
    for engine in ("cpsat", "greedy"):
        assert w["results"][engine]["placed"] == 50 and w["results"][engine]["valid"]
    final = result.results["cpsat"].first.final
    assert not final.pending_pods() and len(final.bound_pods()) == 100  # 50 running + 50 placed


# --------------------------------------------------------------------------- peak memory


def test_peak_rss_is_reported_per_workload() -> None:
    report = suite_json()
    for w in report["workloads"]:
        assert w["peak_rss_scope"] in ("workload", "process")
        assert w["peak_rss_mib"] is not None and w["peak_rss_mib"] > 10  # an interpreter with numpy and OR-tools


def test_peak_rss_follows_what_the_process_held() -> None:
    from adapters.bench import memory

    if not memory.reset_peak():
        pytest.skip("this system cannot reset the resident-memory high-water mark")
    before = memory.peak_rss_mib()
    block = bytearray(200 * 1024 * 1024)
    block[:: 4096] = b"x" * len(block[:: 4096])  # touch every page so it is resident
    held = memory.peak_rss_mib()
    del block
    memory.reset_peak()
    after = memory.peak_rss_mib()
    assert held >= before + 190
    assert after < held - 150  # a new mark, not the old one


def test_the_search_s_rounds_and_gain_are_in_the_cpsat_result(monkeypatch: pytest.MonkeyPatch) -> None:
    """When the decision takes the large-neighbourhood search (issue 34), the cpsat result says
    how many rounds ran, how many improved greedy's plan, and the pods and victims they changed;
    greedy's result has none of it."""
    from solver.cpsat import degraded

    monkeypatch.setattr(degraded, "BUILD_SECONDS_PER_PAIR", 10.0)  # every model reads as too large
    result = measure(generate("anti-affinity", "quick", 0), CONFIG.with_overrides(time_limit_seconds=4.0)).to_json()
    cpsat, greedy = result["results"]["cpsat"], result["results"]["greedy"]
    assert cpsat["lns_rounds"] >= 1 and 0 <= cpsat["lns_improved_rounds"] <= cpsat["lns_rounds"]
    assert cpsat["placed"] - greedy["placed"] == cpsat["lns_placed_gain"] >= 0
    assert "lns_rounds" not in greedy

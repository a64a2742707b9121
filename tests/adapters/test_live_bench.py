"""The live benchmark runs end to end: on the in-memory API server, and in `--kubeconfig` mode
against an API server it must set up (fake Ready nodes, a namespace) and clean up after itself."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from adapters.apiserver import FakeApiServer
from adapters.bench import live as bench
from adapters.bench.live_target import RUN_LABEL


def _check(result: bench.EngineResult, *, steady: int, burst: int, backlog: int) -> None:
    assert (result.sustained.pods, result.sustained.bound) == (steady, steady)
    sustained = result.sustained
    assert sustained.p50 is not None and sustained.p90 is not None and sustained.p99 is not None
    assert 0 < sustained.p50 <= sustained.p90 <= sustained.p99 <= sustained.max
    assert result.burst is not None and result.burst.bound == burst and result.burst.throughput
    assert result.backlog is not None and result.backlog.bound == backlog and result.backlog.seconds > 0
    for phase in (result.sustained, result.burst, result.backlog):
        assert phase.cpu_seconds is not None and phase.cpu_seconds >= 0
        assert phase.events == phase.bound  # every Scheduled event written, the last ones on SIGTERM


def test_tiny_benchmark_prints_three_rows_with_cpu_and_events() -> None:
    (result,) = bench.run(nodes=20, rate=20.0, duration=1.0, burst=30, backlog=25, engine="greedy", window_wait=20)
    assert result.engine == "greedy"
    _check(result, steady=20, burst=30, backlog=25)
    assert result.windows >= 2 and result.solver_status == {"GREEDY": float(result.windows)}
    text = bench.report([result], argparse.Namespace(**{**vars(bench._parser().parse_args([])), "nodes": 20}))
    rows = [line.split()[:2] for line in text.splitlines() if line.startswith("greedy ")]
    assert rows == [["greedy", "burst"], ["greedy", "backlog"], ["greedy", "steady"]]


def test_kubeconfig_mode_creates_fake_nodes_and_cleans_up(tmp_path: Path) -> None:
    # No simulated kubelets: like fake nodes on a real cluster, nothing runs the pods.
    server = FakeApiServer([], kubelet=False).start()
    made: list[dict] = []
    server.store.add_listener(lambda key, event, obj, prev: made.append(obj) if key == "nodes" and event == "ADDED"
                              else None)
    try:
        kubeconfig = server.kubeconfig_path(tmp_path)
        logs = tmp_path / "logs"
        logs.mkdir()
        (result,) = bench.run(kubeconfig=kubeconfig, nodes=6, rate=10.0, duration=1.0, burst=12, backlog=8,
                              engine="greedy", window_wait=20, keep_logs=str(logs))
        _check(result, steady=10, burst=12, backlog=8)
        # --keep-logs: each pod's creation and binding as the bench saw them, on the clock the
        # scheduler's debug log uses for its own latency breakdown of the same pods
        times = [line.split("\t") for line in (logs / "pods-greedy.tsv").read_text().splitlines()]
        assert len(times) == 10 + 12 + 8 and all(float(bound) >= float(created) for _, created, bound in times)
        assert "ms in the queue" in (logs / "scheduler-greedy.log").read_text()
        assert len(made) == 6 and all(RUN_LABEL in n["metadata"]["labels"] for n in made)
        assert all({"type": "Ready", "status": "True"}.items() <= c.items()
                   for n in made for c in n["status"]["conditions"])
        # Everything the run made is gone: its nodes, its namespace and the pods in it.
        assert server.store.list("nodes") == []
        assert [n["metadata"]["name"] for n in server.store.list("namespaces")
                if n["metadata"]["name"].startswith("cpsat-bench-")] == []
        assert server.store.list("pods") == []
    finally:
        server.stop()


@pytest.mark.parametrize("module", ["adapters.bench.live", "adapters.live.bench"])
def test_the_live_bench_runs_by_its_path_and_by_the_path_kept_for_scripts(module: str) -> None:
    """`python -m adapters.bench.live` is the live bench; `python -m adapters.live.bench`, the
    command the README gave before the move, runs the same main: same flags, same checks."""
    root = Path(__file__).resolve().parents[2]
    helped = subprocess.run([sys.executable, "-m", module, "--help"], cwd=root, capture_output=True, text=True,
                            timeout=60)
    assert helped.returncode == 0, helped.stderr
    assert "--kube-scheduler PATH" in helped.stdout and "*burst*" in helped.stdout
    refused = subprocess.run([sys.executable, "-m", module, "--engine", "peer"], cwd=root, capture_output=True,
                             text=True, timeout=60)
    assert refused.returncode != 0
    assert "--engine peer and kube-scheduler need --kube-scheduler PATH" in refused.stderr


def test_window_cost_times_each_step_of_a_window(capsys: pytest.CaptureFixture[str]) -> None:
    """`python -m adapters.live.window_cost`: windows through the loop's steps over a cache fed
    directly, every plan validated (an invalid one ends the run), each step's time printed."""
    from adapters.live import window_cost

    assert window_cost.main(["--nodes", "20", "--bound", "60", "--window", "3", "--windows", "5"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("20 nodes, 60 running pods, windows of 3: ms per window: snapshot ")
    assert all(step in out for step in ("decide", "check", "assume and confirm", "total"))

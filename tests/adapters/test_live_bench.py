"""The live benchmark runs end to end: on the in-memory API server, and in `--kubeconfig` mode
against an API server it must set up (fake Ready nodes, a namespace) and clean up after itself."""

from __future__ import annotations

import argparse
import json
import socket
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
    assert refused.returncode == 2
    assert refused.stderr == ("python -m adapters.bench.live: error: --engine: peer needs --kube-scheduler PATH "
                              "(its binary) and --kubeconfig PATH (a real API server)\n")


def test_cpsat_scheduler_bench_live_runs_the_live_bench(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`cpsat-scheduler bench --live ...`, the command issue 25 names: every option after --live
    is the live bench's; the logs' directory is made when missing; the JSON holds what the table says."""
    from adapters import cli

    logs, out = tmp_path / "runs" / "today", tmp_path / "live.json"
    assert cli.main(["bench", "--live", "--engine", "greedy", "--nodes", "6", "--rate", "10", "--duration", "1",
                     "--burst", "0", "--backlog", "0", "--keep-logs", str(logs), "--json", str(out)]) == 0
    table = capsys.readouterr().out
    assert "live scheduler benchmark on the in-memory API server: 6 nodes" in table
    assert "\ngreedy  steady      10/10 " in table
    (result,) = json.loads(out.read_text())["results"]
    assert result["engine"] == "greedy" and result["sustained"]["bound"] == 10 == result["sustained"]["events"]
    assert len((logs / "pods-greedy.tsv").read_text().splitlines()) == 10


def _dead_server(tmp_path: Path) -> str:
    """A kubeconfig naming a port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    path = tmp_path / "dead.kubeconfig"
    path.write_text(f"""apiVersion: v1
kind: Config
current-context: dead
clusters: [{{name: dead, cluster: {{server: "http://127.0.0.1:{port}"}}}}]
users: [{{name: dead, user: {{token: t}}}}]
contexts: [{{name: dead, context: {{cluster: dead, user: dead}}}}]
""")
    return str(path)


@pytest.mark.parametrize("argv, message", [
    (["--engine", "peer"], "--engine: peer needs --kube-scheduler PATH"),
    (["--engine", "kube-scheduler", "--kube-scheduler", "ks"], "--engine: kube-scheduler needs --kube-scheduler PATH"),
    (["--nodes", "0"], "--nodes: must be above 0, not 0"),
    (["--rate", "-1"], "--rate: must be above 0, not -1"),
    (["--burst", "-5"], "--burst: must be 0 or more, not -5"),
    (["--rate", "nan"], "--rate: must be above 0, not nan"),
    (["--duration", "inf"], "--duration: must be 0 or more, not inf"),
    (["--window-size", "0"], "--window-size: must be above 0, not 0"),
    (["--time-limit", "-1"], "--time-limit: must be 0 or more, not -1"),
    (["--engine", "peer", "--kubeconfig", "{tmp}/a-file", "--kube-scheduler", "ks", "--peer-qps", "0"],
     "--peer-qps: must be above 0, not 0"),
    (["--json", "{tmp}"], "--json: {tmp}: is a directory, not a file"),
    (["--kubeconfig", "{tmp}/missing"], "--kubeconfig: {tmp}/missing: no such file"),
    (["--json", "{tmp}/no/such/dir/out.json"], "--json: {tmp}/no/such/dir/out.json: its directory does not exist"),
    (["--keep-logs", "{tmp}/a-file/logs"], "--keep-logs: {tmp}/a-file/logs: cannot make the directory: "),
    (["--engine", "peer", "--kubeconfig", "{tmp}/a-file", "--kube-scheduler", sys.executable],
     f"--kube-scheduler: {sys.executable}: not a kube-scheduler binary"),
    (["--engine", "peer", "--kubeconfig", "{tmp}/a-file", "--kube-scheduler", "{tmp}/a-file"],
     "--kube-scheduler: {tmp}/a-file: cannot run it: "),
    # another Kubernetes binary (kube-apiserver beside kube-scheduler): its --version answers the same
    (["--engine", "peer", "--kubeconfig", "{tmp}/a-file", "--kube-scheduler", "{tmp}/kube-apiserver"],
     "--kube-scheduler: {tmp}/kube-apiserver: not a kube-scheduler binary"),
    (["--kubeconfig", "{tmp}/a-file"], "{tmp}/a-file: not a kubeconfig: expected a mapping "),
    (["--kubeconfig", "{dead}"], "{dead}: cannot set up the bench on http://127.0.0.1:"),
    (["--context", "prod"], "--context: prod: names a context of a kubeconfig: give --kubeconfig too"),
])
def test_bad_settings_and_unusable_servers_end_in_one_line_and_status_2(
        argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Checked before a scheduler starts or anything is made on a server: a run of minutes never
    ends on a setting it could have refused at once; no traceback, nothing printed on stdout."""
    from adapters import cli

    (tmp_path / "a-file").write_text("not a kubeconfig, nor a program\n")
    apiserver = tmp_path / "kube-apiserver"
    apiserver.write_text('#!/bin/sh\ncase "$1" in --version) echo "Kubernetes v1.36.3";; '
                         '*) printf "Usage:\\n  kube-apiserver [flags]\\n";; esac\n')
    apiserver.chmod(0o755)
    places = {"tmp": str(tmp_path), "dead": _dead_server(tmp_path) if "{dead}" in argv else ""}
    argv = [a.format(**places) for a in argv]
    assert cli.main(["bench", "--live", "--duration", "1", "--burst", "0", "--backlog", "0", *argv]) == 2
    captured = capsys.readouterr()
    last = captured.err.strip().splitlines()[-1]
    assert last.startswith("cpsat-scheduler bench --live: error: " + message.format(**places)), captured.err
    assert "Traceback" not in captured.err and captured.out == ""


def test_a_scheduler_that_refuses_its_arguments_ends_the_run_at_once(capsys: pytest.CaptureFixture[str]) -> None:
    """A `--scheduler-arg` that `cpsat-scheduler run` refuses: the bench says so in its words, with
    status 2, as soon as the scheduler has exited, not after the backlog waited its two minutes."""
    import time

    from adapters import cli

    started = time.monotonic()
    assert cli.main(["bench", "--live", "--engine", "greedy", "--nodes", "3", "--backlog", "3", "--burst", "0",
                     "--rate", "2", "--duration", "1", "--scheduler-arg=--no-such-option"]) == 2
    assert time.monotonic() - started < bench.DRAIN_SECONDS / 2
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines()[-1] == (
        "cpsat-scheduler bench --live: error: the scheduler: exited with status 2: cpsat-scheduler: error: "
        "unrecognized arguments: --no-such-option")
    assert captured.out == ""


def test_options_of_the_solver_bench_before_live_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """`bench --time-limit 3 --live ...` would look like a live run with a 3 s limit and silently
    not be one: the options go after --live."""
    from adapters import cli

    assert cli.main(["bench", "--time-limit", "3", "--seed", "2", "--live", "--nodes", "5"]) == 2
    assert capsys.readouterr().err == ("cpsat-scheduler: error: --live: --time-limit, --seed before --live: the live "
                                       "bench takes its own options, after --live (`cpsat-scheduler bench --live "
                                       "--help`)\n")


@pytest.mark.parametrize("before, named", [
    (["--quick"], "--quick"), (["--scale", "quick"], "--scale"), (["-w", "spread", "--seed", "0"], "-w, --seed"),
    (["--output", "table"], "--output"),
])
def test_options_before_live_are_refused_even_at_their_default_value(
        before: list[str], named: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`bench --quick --live` reads as a quick live run; --quick is the solver bench's default
    scale, and the live bench would have run at its full size (minutes) with it unused."""
    from adapters import cli

    # the live settings of a run of seconds, had the options before --live been let pass
    assert cli.main(["bench", *before, "--live", "--engine", "greedy", "--nodes", "5", "--burst", "0", "--backlog", "0",
                     "--duration", "0"]) == 2
    assert capsys.readouterr().err.startswith(f"cpsat-scheduler: error: --live: {named} before --live: ")


def test_window_cost_times_each_step_of_a_window(capsys: pytest.CaptureFixture[str]) -> None:
    """`python -m adapters.live.window_cost`: windows through the loop's steps over a cache fed
    directly, every plan validated (an invalid one ends the run), each step's time printed."""
    from adapters.live import window_cost

    assert window_cost.main(["--nodes", "20", "--bound", "60", "--window", "3", "--windows", "5"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("20 nodes, 60 running pods, windows of 3: ms per window: snapshot ")
    assert all(step in out for step in ("decide", "check", "assume and confirm", "total"))


def test_the_table_gives_latencies_under_10_ms_to_a_tenth() -> None:
    """On a real server a lone pod's p50 is a few milliseconds: 2.6 and 3.4 ms must not both read '3ms'."""
    steady = bench.PhaseResult(pods=10, bound=10, seconds=1.0, p50=0.0034, p90=0.0261, p99=0.0999, max=0.2)
    text = bench.report([bench.EngineResult(engine="greedy", sustained=steady, burst=None)],
                        bench._parser().parse_args([]))
    (row,) = [line for line in text.splitlines() if line.startswith("greedy ")]
    assert row.split()[6:9] == ["3.4ms", "26ms", "100ms"]


def test_a_user_who_may_make_namespaces_but_not_nodes_is_told_so_and_nothing_is_left(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Node creation refused (403): one line naming the rights, exit 2; the namespace made for
    the run is deleted, and no cleanup of nodes that were never made is asked of the user."""
    from adapters import cli

    server = FakeApiServer([], kubelet=False).start()
    try:
        server.faults.fail("POST", "/api/v1/nodes", status=403, count=None, reason="Forbidden")
        assert cli.main(["bench", "--live", "--kubeconfig", server.kubeconfig_path(tmp_path), "--nodes", "3",
                         "--burst", "0", "--backlog", "0", "--duration", "1"]) == 2
        err = capsys.readouterr().err
        assert err.strip().splitlines()[-1].endswith("403 Forbidden (the bench needs rights to create and delete "
                                                     "nodes, namespaces and pods)"), err
        assert "cleanup incomplete" not in err and "and no node (none was made)" in err
        assert [n["metadata"]["name"] for n in server.store.list("namespaces")
                if n["metadata"]["name"].startswith("cpsat-bench-")] == []
        assert server.store.list("nodes") == []
    finally:
        server.stop()

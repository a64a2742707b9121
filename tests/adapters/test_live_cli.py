"""`cpsat-scheduler run`: the command line, in simulation and against an API server process.

`--simulate` runs in-process through `adapters.cli.main`; the cluster mode runs as a real
subprocess with a kubeconfig pointing at the in-memory API server, is stopped with SIGTERM,
and must exit 0 having released its lease. Credentials never reach the logs, even with --debug.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest

from adapters.apiserver import FakeApiServer
from adapters.cli import main
from tests.adapters.live_harness import NS, live_threads, node, pod, wait_for

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "snapshots" / "quickstart.yaml"
TOKEN = "s3cr3t-bearer-token-do-not-log"


def test_simulate_binds_the_stream_and_checks_the_final_state(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["run", "--simulate", str(QUICKSTART), "--arrival-rate", "100", "--engine", "cpsat",
                   "--time-limit", "2", "--no-leader-elect"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert re.search(r"bound +shop/api-6b8f9c7d4-5fz8c -> \S+ +\(\d+\.\d+s after arrival\)", out)
    assert "unschedulable shop/search-indexer-0: 0/6 nodes are available:" in out
    assert "bound 10 pod(s), evicted 0, left 1 unschedulable" in out
    assert "(every pod that can be placed is bound)" in out
    assert "final state replayed through the validator: no violations" in out
    assert wait_for(lambda: not live_threads(), timeout=5.0), live_threads()


def test_simulate_dry_run_and_duration(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["run", "--simulate", str(QUICKSTART), "--arrival-rate", "0", "--engine", "greedy", "--dry-run",
                   "--duration", "30"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "would bind" in out and "would bind 10 pod(s)" in out


def test_simulate_bad_snapshot_names_object_and_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    broken = pod("web-1")
    broken["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "12x"
    bad.write_text(json.dumps(broken))
    assert main(["run", "--simulate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert 'pods/default/web-1: spec.containers[0].resources.requests.cpu: "12x" is not a quantity' in err


@pytest.mark.parametrize("argv, message", [
    (["--metrics-addr", "nowhere"], "is not HOST:PORT"),
    (["--window-size", "0"], "must be at least 1"),
    (["--lease-duration", "5", "--renew-deadline", "10"], "lease duration > renew deadline"),
    (["--kubeconfig", "/nonexistent/kubeconfig"], "cannot load cluster credentials"),
])
def test_usage_errors_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", *argv]) == 2
    assert message in capsys.readouterr().err


@pytest.fixture
def apiserver(tmp_path: Path) -> Iterator[tuple[FakeApiServer, Path]]:
    server = FakeApiServer([node("n1"), node("n2")], kubelet_start_seconds=0.01).start()
    config = server.kubeconfig()
    config["users"][0]["user"] = {"token": TOKEN}  # the fake server ignores it; the logs must too
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps(config))
    yield server, path
    server.stop()


def test_run_against_an_api_server_stops_cleanly_on_sigterm(apiserver: tuple[FakeApiServer, Path]) -> None:
    server, kubeconfig = apiserver
    proc = subprocess.Popen(
        [sys.executable, "-m", "adapters", "--debug", "run", "--kubeconfig", str(kubeconfig), "--engine", "greedy",
         "--metrics-addr", "127.0.0.1:0", "--lease-namespace", NS, "--lease-duration", "3", "--renew-deadline", "2",
         "--retry-period", "0.2", "--window-wait", "20"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "CPSAT_DEBUG": ""})
    try:
        server.store.create("pods", pod("from-cli"))
        assert wait_for(lambda: (server.store.get("pods", NS, "from-cli") or {}).get("spec", {}).get("nodeName"),
                        timeout=30)
        lease = server.store.get("leases", NS, "cpsat-scheduler")
        assert lease["spec"]["holderIdentity"]
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "received SIGTERM; shutting down" in err
    assert re.search(r"serving /healthz, /readyz and /metrics on 127\.0\.0\.1:\d+", err)
    assert server.store.get("leases", NS, "cpsat-scheduler")["spec"]["holderIdentity"] == ""  # released
    assert TOKEN not in out + err
    assert "Authorization" not in err and "Bearer" not in err


def test_status_endpoints_of_a_running_process(apiserver: tuple[FakeApiServer, Path]) -> None:
    server, kubeconfig = apiserver
    proc = subprocess.Popen(
        [sys.executable, "-m", "adapters", "run", "--kubeconfig", str(kubeconfig), "--no-leader-elect",
         "--metrics-addr", "127.0.0.1:0", "--duration", "20"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        port = None
        deadline = time.monotonic() + 30
        while port is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            found = re.search(r"metrics on 127\.0\.0\.1:(\d+)", line)
            port = int(found.group(1)) if found else None
        assert port

        def get(path: str) -> Any:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
                return resp.status, resp.read().decode()

        assert wait_for(lambda: _try(get, "/readyz") == (200, "ok (leader)"), timeout=10)
        assert get("/healthz") == (200, "ok")
        assert "cpsat_scheduler_is_leader 1.0" in get("/metrics")[1]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert proc.returncode == 0


def _try(get: Any, path: str) -> Any:
    try:
        return get(path)
    except Exception:  # noqa: BLE001 - not up yet
        return None


def test_verbose_run_logs_each_successful_bind(apiserver: tuple[FakeApiServer, Path]) -> None:
    server, kubeconfig = apiserver
    proc = subprocess.Popen(
        [sys.executable, "-m", "adapters", "run", "-v", "--kubeconfig", str(kubeconfig), "--no-leader-elect",
         "--engine", "greedy", "--metrics-addr", "127.0.0.1:0"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        server.store.create("pods", pod("logged"))
        assert wait_for(lambda: (server.store.get("pods", NS, "logged") or {}).get("spec", {}).get("nodeName"),
                        timeout=30)
        node_name = server.store.get("pods", NS, "logged")["spec"]["nodeName"]
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert f"cpsat-scheduler: bound {NS}/logged to {node_name}\n" in err


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again on exit: connections to it are refused


def test_unreachable_api_server_logs_one_line_per_back_off(tmp_path: Path) -> None:
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "c",
              "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{_closed_port()}"}}],
              "users": [{"name": "u", "user": {"token": TOKEN}}],
              "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps(config))
    proc = subprocess.run(
        [sys.executable, "-m", "adapters", "run", "--kubeconfig", str(kubeconfig), "--metrics-addr", "127.0.0.1:0",
         "--duration", "4"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert not [line for line in lines if "Retrying" in line or not line.startswith("cpsat-scheduler: ")]
    # Each watch logs its failure once per back-off (0.2, 0.5, 1, 2 s ...: at most six in 4 s),
    # not once per urllib3 retry inside it.
    node_failures = [line for line in lines if line.startswith("cpsat-scheduler: watch of nodes failed")]
    assert 1 <= len(node_failures) <= 6, node_failures
    assert all(re.search(r"; reconnecting in \d", line) for line in node_failures)
    assert TOKEN not in proc.stderr

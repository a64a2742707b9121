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
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Iterator, Optional

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
    server.store.create("pods", pod("from-cli"))

    def bound_and_leading() -> bool:
        bound = (server.store.get("pods", NS, "from-cli") or {}).get("spec", {}).get("nodeName")
        lease = server.store.get("leases", NS, "cpsat-scheduler") or {}
        return bool(bound and lease.get("spec", {}).get("holderIdentity"))

    err = _run_until(["--debug", "--kubeconfig", str(kubeconfig), "--engine", "greedy", "--metrics-addr", "127.0.0.1:0",
                      "--lease-namespace", NS, "--lease-duration", "3", "--renew-deadline", "2", "--retry-period", "0.2",
                      "--window-wait", "20"], bound_and_leading)
    assert server.store.get("pods", NS, "from-cli")["spec"]["nodeName"]
    assert "received SIGTERM; shutting down" in err
    assert re.search(r"serving /healthz, /readyz and /metrics on 127\.0\.0\.1:\d+", err)
    assert server.store.get("leases", NS, "cpsat-scheduler")["spec"]["holderIdentity"] == ""  # released
    assert TOKEN not in err
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
        deadline = time.monotonic() + 120  # a new process on a loaded 2-core machine takes 10-20 s to import and take the lease
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


def _run_until(argv: list[str], done: Any, timeout: float = 120, lines: Optional[list[str]] = None) -> str:
    """Run `cpsat-scheduler run ...` until `done()` holds (or `timeout`: a new process on a loaded 2-core machine takes 10-20 s to import and take the lease), SIGTERM it,
    return stderr. `lines`: filled with stderr's lines as they come."""
    proc = subprocess.Popen([sys.executable, "-m", "adapters", "run", *argv], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "CPSAT_DEBUG": ""})
    reader = None
    if lines is not None:
        assert proc.stderr is not None
        reader = threading.Thread(target=lambda: lines.extend(iter(proc.stderr.readline, "")), daemon=True)
        reader.start()
    try:
        held = wait_for(done, timeout=timeout)
        proc.send_signal(signal.SIGTERM)
        if reader is None:
            _, err = proc.communicate(timeout=30)
        else:
            proc.wait(30)
            reader.join(30)
            err = "".join(lines or [])
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert held, f"never happened before SIGTERM: {getattr(done, '__doc__', None) or done}\n{err}"
    assert proc.returncode == 0, err
    return err


@pytest.mark.parametrize("verbose", [True, False], ids=["-v", "default"])
def test_successful_binds_are_logged_with_verbose(apiserver: tuple[FakeApiServer, Path], verbose: bool) -> None:
    server, kubeconfig = apiserver
    server.store.create("pods", pod("logged"))
    argv = ["--kubeconfig", str(kubeconfig), "--engine", "greedy", "--metrics-addr", "127.0.0.1:0",
            "--lease-namespace", NS, "--lease-duration", "3", "--renew-deadline", "2", "--retry-period", "0.2"]
    err = _run_until(argv + (["-v"] if verbose else []),
                     lambda: (server.store.get("pods", NS, "logged") or {}).get("spec", {}).get("nodeName"))
    node_name = server.store.get("pods", NS, "logged")["spec"]["nodeName"]
    line = f"cpsat-scheduler: bound {NS}/logged to {node_name}"
    assert (line in err.splitlines()) is verbose, err


def test_an_unreachable_api_server_is_one_line_per_back_off(tmp_path: Path) -> None:
    """No urllib3 "Retrying (Retry(...))" lines: each failed attempt is one line of ours, saying
    what failed and when the next try is (it used to be ~180 lines a minute)."""
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "x",
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "u", "user": {"token": TOKEN}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
    }))
    # ~8 s of trying, counted from its first line (not from the launch: starting takes seconds
    # under load, and a SIGTERM before it is up would end it before it tried anything)
    seen: list[str] = []
    began: list[float] = []

    def eight_seconds_up() -> bool:
        if seen and not began:
            began.append(time.monotonic())
        return bool(began) and time.monotonic() - began[0] > 8

    err = _run_until(["--kubeconfig", str(kubeconfig), "--metrics-addr", "127.0.0.1:0", "--lease-namespace", NS],
                     eight_seconds_up, lines=seen)
    lines = err.splitlines()
    assert not [line for line in lines if "Retrying" in line], err
    failures = [line for line in lines if "failed" in line or "cannot read lease" in line]
    assert failures, err
    # Each informer backs off 1, 2, 4, ... s and the elector retries every --retry-period (2 s by
    # default): over ~8 s that is a handful of lines per watched kind, never a flood.
    per_source = {}
    for line in failures:
        source = line.split(":")[1].strip()
        per_source[source] = per_source.get(source, 0) + 1
    assert max(per_source.values()) <= 8, per_source
    assert all("reconnecting in" in line for line in failures if line.startswith("cpsat-scheduler: watch of"))
    assert TOKEN not in err

"""Ctrl-C during a long decision: exit 130 at once, one line on stderr, no plan on stdout.

CP-SAT used to catch the SIGINT itself and hand back its incumbent, which the command printed
as an ordinary FEASIBLE plan with exit 0. The user pressed Ctrl-C: nothing cut short is a plan.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from adapters.bench import workloads

SCRIPT = Path(sys.executable).with_name("cpsat-scheduler")


def test_ctrl_c_during_a_solve_exits_130_without_a_plan(tmp_path: Path) -> None:
    # 1,000 nodes and 2,910 gang pods: about a minute to its limit, so the signal lands mid-decision.
    snapshot = tmp_path / "gangs.json"
    snapshot.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": workloads.gang("medium", 0).objects}))
    proc = subprocess.Popen([str(SCRIPT), "schedule", str(snapshot), "--time-limit", "120", "-o", "json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(6)
    assert proc.poll() is None, "the decision ended before the interrupt"
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert time.monotonic() - sent < 30  # stopped, not run to its 120 s limit
    assert out == b""
    lines = err.decode().strip().splitlines()
    assert lines == ["cpsat-scheduler: interrupted: no plan printed"], err.decode()


ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "snapshots" / "quickstart.yaml"


def _started(proc: subprocess.Popen, stream, marker: str, timeout: float = 60.0) -> list[str]:
    """Lines read from ``stream`` until one holds ``marker`` (the process is then mid-run)."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = stream.readline()
        if not line:
            break
        seen.append(line.decode())
        if marker in seen[-1]:
            return seen
    raise AssertionError(f"never saw {marker!r}: {seen}")


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 0)], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_on_a_simulation_exits_130_without_a_summary(sig: int, status: int) -> None:
    """Eleven pods arriving at one a second: the signal lands while they still arrive. Ctrl-C
    is an interruption (130, no "bound N pod(s)" summary of half a run); SIGTERM, how a
    cluster stops a scheduler, still ends it in order with its summary."""
    proc = subprocess.Popen([str(SCRIPT), "run", "--simulate", str(QUICKSTART), "--arrival-rate", "1",
                             "--engine", "greedy", "--no-leader-elect"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    head = _started(proc, proc.stdout, "simulating http://")
    time.sleep(1.5)
    assert proc.poll() is None, "the simulation ended before the signal"
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    out_text = "".join(head) + out.decode()
    assert proc.returncode == status, err.decode()
    if status == 130:
        assert "pod(s), evicted" not in out_text and "replayed through the validator" not in out_text
        assert err.decode().strip().splitlines()[-1] == "cpsat-scheduler: interrupted: no summary printed"
    else:
        assert "pod(s), evicted" in out_text


def test_ctrl_c_during_a_repack_exits_130_without_a_plan(tmp_path: Path) -> None:
    snapshot = tmp_path / "repack.json"
    snapshot.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": workloads.repack(1000, 0).objects}))
    proc = subprocess.Popen([str(SCRIPT), "repack", str(snapshot), "--time-limit", "120", "-o", "json", "--progress"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _started(proc, proc.stderr, "re-packing model:")  # CP-SAT's C++ search is under way
    time.sleep(1)
    assert proc.poll() is None, "the plan was made before the interrupt"
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert time.monotonic() - sent < 30
    assert out == b""
    assert err.decode().strip().splitlines()[-1] == "cpsat-scheduler: interrupted: no plan printed"


def test_ctrl_c_on_the_live_scheduler_stops_in_order_and_exits_130(tmp_path: Path) -> None:
    """Against an API server: Ctrl-C stops it as SIGTERM does (the lease is released), but the
    exit status says it was interrupted."""
    from adapters.apiserver import FakeApiServer
    from tests.adapters.live_harness import NS, node, pod, wait_for

    server = FakeApiServer([node("n1")], kubelet_start_seconds=0.01).start()
    try:
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(json.dumps(server.kubeconfig()))
        server.store.create("pods", pod("web-1"))
        proc = subprocess.Popen([str(SCRIPT), "run", "--kubeconfig", str(kubeconfig), "--engine", "greedy",
                                 "--metrics-addr", "127.0.0.1:0", "--lease-namespace", NS, "--lease-duration", "3",
                                 "--renew-deadline", "2", "--retry-period", "0.2"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            def leading_and_bound() -> bool:
                lease = server.store.get("leases", NS, "cpsat-scheduler") or {}
                bound = (server.store.get("pods", NS, "web-1") or {}).get("spec", {}).get("nodeName")
                return bool(bound and lease.get("spec", {}).get("holderIdentity"))

            assert wait_for(leading_and_bound, timeout=120)  # a new process on a loaded 2-core machine takes 10-20 s to import and take the lease
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert proc.returncode == 130, err.decode()
        assert err.decode().strip().splitlines()[-1] == "cpsat-scheduler: interrupted"
        assert server.store.get("leases", NS, "cpsat-scheduler")["spec"]["holderIdentity"] == ""  # released
    finally:
        server.stop()


def test_ctrl_c_during_repack_apply_stops_between_polls_and_exits_130(tmp_path: Path) -> None:
    """No scheduler places the replacement, so the run waits for it; Ctrl-C then stops the run
    where it is, says so, and exits 130 (the plan printed before stays printed)."""
    from tests.adapters.live_harness import Cluster
    from tests.adapters.test_repack_apply import dump, two_nodes

    cluster = Cluster(two_nodes(), replica_controllers=True)
    try:
        kubeconfig = cluster.server.kubeconfig_path(tmp_path)
        proc = subprocess.Popen([str(SCRIPT), "repack", dump(tmp_path, two_nodes()), "-o", "json", "--apply",
                                 "--kubeconfig", kubeconfig, "--wait-seconds", "120"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            _started(proc, proc.stderr, "apply: cordoned")
            time.sleep(2)  # evicting, then waiting for a replacement nobody schedules
            sent = time.monotonic()
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert proc.returncode == 130, err.decode()
        assert time.monotonic() - sent < 10
        assert json.loads(out)["moves"]  # printed before the run began
        assert "interrupted (Ctrl-C)" in err.decode()
    finally:
        cluster.close()


def _interrupt_at(snapshot: Path, stage: str, *extra: str) -> tuple[int, float, bytes, list[str]]:
    """Run `schedule --progress` on ``snapshot``, press Ctrl-C once the progress line ``stage``
    is out, and return (exit status, seconds from the signal to the exit, stdout, stderr lines).
    Standard output goes to a file: a run that never prints ``stage`` ends with its plan written
    instead of blocking on a full pipe while its progress is read."""
    with tempfile.TemporaryFile() as stdout:
        proc = subprocess.Popen([str(SCRIPT), "schedule", str(snapshot), "--progress", "-o", "json", *extra],
                                stdout=stdout, stderr=subprocess.PIPE)
        assert proc.stderr is not None
        lines = []
        for raw in proc.stderr:
            lines.append(raw.decode().rstrip())
            if stage in lines[-1]:
                break
        else:
            proc.wait(timeout=120)
            raise AssertionError(f"no progress line {stage!r}: {lines}")
        time.sleep(0.3)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        seconds = time.monotonic() - sent
        stdout.seek(0)
        out = stdout.read()
    return proc.returncode, seconds, out, lines + err.decode().splitlines()


def _dump(path: Path, objects: list) -> Path:
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}, separators=(",", ":")))
    return path


def test_ctrl_c_while_reading_stops_the_read(tmp_path: Path) -> None:
    """A dump of 45,000 pods takes seconds to read; Ctrl-C during the read ends the command
    there (no later stage starts), exit 130, nothing on stdout."""
    objects = workloads.realistic("quick", 0).objects
    pods = [o for o in objects if o["kind"] == "Pod"]
    copies = [{**o, "metadata": {**o["metadata"], "name": f"{o['metadata']['name']}-{k}"}} for k in range(8) for o in pods]
    status, seconds, out, lines = _interrupt_at(_dump(tmp_path / "big.json", objects + copies), "reading ")
    assert (status, out) == (130, b"")
    assert lines[-1] == "cpsat-scheduler: interrupted: no plan printed"
    assert not any("] read " in line for line in lines), lines  # stopped inside the read
    assert seconds < 10


def test_ctrl_c_while_building_the_model_stops_the_build(tmp_path: Path) -> None:
    """The model of 300 classes x 100 nodes takes seconds to build; Ctrl-C during the build
    ends the command before any solve starts, exit 130, nothing on stdout. (A limit of 120 s
    leaves the per-node model inside its budget: at the default 10 s the window may be decided
    on node classes instead, whose build is too short to interrupt.)"""
    snapshot = _dump(tmp_path / "realistic.json", workloads.realistic("quick", 0).objects)
    status, seconds, out, lines = _interrupt_at(snapshot, "building the CP-SAT model", "--time-limit", "120")
    assert (status, out) == (130, b"")
    assert lines[-1] == "cpsat-scheduler: interrupted: no plan printed"
    assert not any("solving:" in line for line in lines), lines  # stopped inside the build
    assert seconds < 10


LATE_CTRL_C = """
import io, os, signal, sys
from adapters import cli
real = sys.stdout
class Pressed(io.TextIOBase):  # Ctrl-C the moment the result is handed to stdout
    def write(self, s):
        n = real.write(s)
        if len(s) > 50:
            os.kill(os.getpid(), signal.SIGINT)
        return n
    def flush(self):
        real.flush()
    def fileno(self):
        return real.fileno()
sys.stdout = Pressed()
sys.argv = ["cpsat-scheduler", *sys.argv[1:]]
sys.exit(cli.main())
"""


@pytest.mark.parametrize("command", [["schedule", str(QUICKSTART), "-o", "json"], ["why", "all", str(QUICKSTART), "-o", "json"]],
                         ids=["schedule", "why"])
def test_ctrl_c_after_the_result_is_written_leaves_the_result_standing(command: list[str]) -> None:
    """A Ctrl-C that lands once the whole result is on its way out has nothing left to stop: the
    command ends as it would have (exit 0, the result whole), not with 130 and "no plan printed"
    beside a plan a script would then throw away."""
    proc = subprocess.run([sys.executable, "-c", LATE_CTRL_C, *command], capture_output=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    assert json.loads(proc.stdout)  # whole
    assert b"interrupted" not in proc.stderr


def test_ctrl_c_while_standard_input_is_silent_stops_the_read() -> None:
    """`kubectl get ... | cpsat-scheduler schedule -` while kubectl is still listing: the read
    waits on a pipe nobody writes to yet, and Ctrl-C must stop it there, not when the writer
    finally writes or closes."""
    proc = subprocess.Popen([str(SCRIPT), "schedule", "-", "--progress", "-o", "json"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _started(proc, proc.stderr, "reading ")
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        status = proc.wait(timeout=15)  # standard input stays open: the writer is still "listing"
        err = proc.stderr.read().decode()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
    assert status == 130
    assert err.strip().splitlines()[-1] == "cpsat-scheduler: interrupted: no plan printed"


def test_ctrl_c_while_a_bench_cluster_is_made_stops_the_making(monkeypatch) -> None:
    """`bench --scale large` spends 15 s making its 175,000 pods before any decision: the maker
    looks for Ctrl-C as it goes (every 256 pods), as a decision does."""
    from adapters import interrupts
    from models.errors import Interrupted
    from solver import interrupt

    monkeypatch.setattr(interrupts, "_check", interrupt.check)  # as inside a deciding command
    interrupt.request()
    try:
        with pytest.raises(Interrupted):
            workloads.realistic("quick", 0)
    finally:
        interrupt.reset()

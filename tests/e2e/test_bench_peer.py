"""The live benchmark's peer mode on the real server: the same phases against cpsat-scheduler
and against the real kube-scheduler 1.36, one after the other (`--engine peer`), run as a user
runs it: `cpsat-scheduler bench --live --kubeconfig ... --engine peer`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.e2e.controlplane import ControlPlane

ROOT = Path(__file__).resolve().parents[2]


def _bench(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "adapters", "bench", "--live", *argv], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


def _bench_namespaces(control_plane: ControlPlane) -> list[str]:
    from kubernetes import client, config

    api = config.new_client_from_config(str(control_plane.admin_kubeconfig))
    try:
        return [n.metadata.name for n in client.CoreV1Api(api).list_namespace().items
                if n.metadata.name.startswith("cpsat-bench-") and n.status.phase == "Active"]
    finally:
        api.close()


def test_peer_mode_runs_the_same_phases_against_both_schedulers(control_plane: ControlPlane, tmp_path: Path) -> None:
    assert control_plane.built is not None
    out = tmp_path / "peer.json"
    done = _bench("--kubeconfig", str(control_plane.admin_kubeconfig), "--engine", "peer",
                  "--kube-scheduler", str(control_plane.built.path("kube-scheduler")), "--nodes", "10",
                  "--burst", "60", "--backlog", "40", "--rate", "10", "--duration", "2", "--json", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(out.read_text())["results"]
    assert [r["engine"] for r in results] == ["cpsat", "kube-scheduler"]
    for result in results:
        for phase in (result["burst"], result["backlog"], result["sustained"]):
            assert phase is not None and phase["pods"] and phase["bound"] == phase["pods"], result
            assert phase["events"] == phase["bound"], result           # every Scheduled event written
            assert phase["cpu_seconds"] is not None and phase["cpu_seconds"] > 0
    assert "vs kube" in done.stdout and "\nkube-scheduler burst" in done.stdout
    assert _bench_namespaces(control_plane) == []                      # the runs deleted what they made


def test_a_kubeconfig_without_the_rights_it_needs_is_told_so_before_anything_runs(control_plane: ControlPlane) -> None:
    """The scheduler's own identity (the deploy manifests' RBAC) may not create namespaces or
    nodes: the bench says so in one line, exit 2, and leaves nothing on the server."""
    done = _bench("--kubeconfig", str(control_plane.scheduler_kubeconfig), "--engine", "cpsat", "--nodes", "3",
                  "--burst", "0", "--backlog", "0", "--duration", "1")
    assert done.returncode == 2, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("cpsat-scheduler bench --live: error: ") and "403 Forbidden" in last, done.stderr
    assert "Traceback" not in done.stderr
    assert _bench_namespaces(control_plane) == []


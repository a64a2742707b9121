"""The control plane itself: cached builds, the APIs it serves, its one command, and what a
failed start leaves behind (one line naming the step and its log; no process)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from kubernetes import client, config

from tests.e2e.controlplane import ControlPlane, ControlPlaneError, State, ensure_built
from tests.e2e.controlplane import cluster as cluster_module
from tests.e2e.controlplane.cluster import _is_ours
from tests.e2e.harness import REPO

NAMES = {"etcd", "kube-apiserver", "kube-scheduler"}


def test_a_second_build_builds_nothing(control_plane: ControlPlane) -> None:
    again = ensure_built(quiet=True)
    assert not again.built and again.seconds < 5
    assert control_plane.built is not None and again.bin_dir == control_plane.built.bin_dir
    assert not str(again.bin_dir).startswith(str(REPO))      # the cache is outside the repository


def test_the_server_is_1_37_and_serves_the_gang_and_dra_apis(control_plane: ControlPlane) -> None:
    """The default control plane is go.mod's 1.37.2 with the gang APIs of features.py on:
    v1beta1 PodGroup/Workload, v1alpha3 CompositePodGroup; v1alpha2 is gone in 1.37."""
    assert control_plane.built is not None
    if control_plane.built.version != "v1.37.2":
        pytest.skip(f"CPSAT_E2E_KUBERNETES chose {control_plane.built.version} (test_k8s_1_36.py covers 1.36)")
    api = config.new_client_from_config(str(control_plane.admin_kubeconfig))
    assert client.VersionApi(api).get_code().git_version == "v1.37.2"
    served = {v.group_version for g in client.ApisApi(api).get_api_versions().groups for v in g.versions}
    assert {"scheduling.k8s.io/v1beta1", "scheduling.k8s.io/v1alpha3", "resource.k8s.io/v1"} <= served
    assert "scheduling.k8s.io/v1alpha2" not in served
    custom = client.CustomObjectsApi(api)
    beta = {r.name for r in custom.get_api_resources("scheduling.k8s.io", "v1beta1").resources}
    assert {"podgroups", "podgroups/status", "workloads"} <= beta
    alpha = {r.name for r in custom.get_api_resources("scheduling.k8s.io", "v1alpha3").resources}
    assert {"compositepodgroups", "compositepodgroups/status"} <= alpha
    api.close()


def test_an_unknown_version_is_refused_with_exit_2() -> None:
    done = subprocess.run([sys.executable, "-m", "tests.e2e.controlplane", "build", "--version", "1.35.0"],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip() == ("control plane: choosing the Kubernetes version failed: v1.35.0 is not pinned here"
                                   f" (known: v1.36.3, v1.37.2) (log: {REPO / 'tests/e2e/controlplane/go.mod'})")


def test_a_failed_start_names_the_step_and_its_log_and_leaves_nothing_running(
        control_plane: ControlPlane, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cluster_module, "START_TIMEOUT", 0.0)     # nothing can be ready in no time
    plane = ControlPlane(tmp_path / "cp")
    with pytest.raises(ControlPlaneError) as failed:
        plane.start()
    message = str(failed.value)
    assert "\n" not in message and message.startswith("control plane: starting etcd failed")
    assert f"(log: {tmp_path / 'cp' / 'etcd.log'})" in message
    assert plane.state is not None and plane.state.pids
    assert not any(_is_ours(pid, NAMES) for pid in plane.state.pids.values())


def test_up_and_down_start_and_stop_exactly_their_processes(control_plane: ControlPlane, tmp_path: Path) -> None:
    directory = tmp_path / "cp"
    command = [sys.executable, "-m", "tests.e2e.controlplane"]
    up = subprocess.run([*command, "up", "--dir", str(directory)], cwd=REPO, capture_output=True, text=True,
                        timeout=300)
    assert up.returncode == 0, up.stderr
    state = State.load(directory)
    try:
        assert f"server      {state.server}" in up.stdout
        assert all(_is_ours(pid, NAMES) for pid in state.pids.values())
        as_scheduler = client.CoreV1Api(config.new_client_from_config(str(directory / "cpsat-scheduler.kubeconfig")))
        assert as_scheduler.list_node().items == []             # it may list nodes, and there are none
        down = subprocess.run([*command, "down", "--dir", str(directory)], cwd=REPO, capture_output=True,
                              text=True, timeout=60)
        assert down.returncode == 0, down.stderr
        assert not any(_is_ours(pid, NAMES) for pid in state.pids.values())
        # the session's own control plane was not touched
        assert control_plane.state is not None
        assert all(_is_ours(pid, NAMES) for pid in control_plane.state.pids.values())
        # `up` again on the same directory: etcd keeps the scheduler's identity, which is reused
        again = subprocess.run([*command, "up", "--dir", str(directory)], cwd=REPO, capture_output=True, text=True,
                               timeout=300)
        assert again.returncode == 0, again.stderr
        state = State.load(directory)
        as_scheduler = client.CoreV1Api(config.new_client_from_config(str(directory / "cpsat-scheduler.kubeconfig")))
        assert as_scheduler.list_node().items == []
        down = subprocess.run([*command, "down", "--dir", str(directory)], cwd=REPO, capture_output=True,
                              text=True, timeout=60)
        assert down.returncode == 0, down.stderr
    finally:
        cluster_module.stop_processes(state.pids, state.pgid)

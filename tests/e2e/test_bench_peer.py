"""The live benchmark's peer mode on the real server: the same phases against cpsat-scheduler
and against the real kube-scheduler 1.36, one after the other (`--engine peer`)."""

from __future__ import annotations

from adapters.bench import live as bench
from tests.e2e.controlplane import ControlPlane


def test_peer_mode_runs_the_same_phases_against_both_schedulers(control_plane: ControlPlane) -> None:
    assert control_plane.built is not None
    results = bench.run(kubeconfig=str(control_plane.admin_kubeconfig), engine="peer",
                        kube_scheduler=str(control_plane.built.path("kube-scheduler")),
                        nodes=10, burst=60, backlog=40, rate=10.0, duration=2.0)
    assert [r.engine for r in results] == ["cpsat", "kube-scheduler"]
    for result in results:
        for phase in (result.burst, result.backlog, result.sustained):
            assert phase is not None and phase.pods and phase.bound == phase.pods, result
            assert phase.events == phase.bound, result           # every Scheduled event written
            assert phase.cpu_seconds is not None and phase.cpu_seconds > 0
    text = bench.report(results, bench._parser().parse_args(
        ["--kubeconfig", "k", "--engine", "peer", "--kube-scheduler", "ks"]))
    assert "vs kube" in text and "\nkube-scheduler burst" in text

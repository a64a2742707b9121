"""Gangs against the real kube-scheduler: the same contended PodGroup workload (v1beta1 on the
1.37 control plane) placed by kube-scheduler's gang plugins and by cpsat-scheduler on the same
server."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.controlplane import ControlPlane
from tests.e2e.gang_peer import compare


def test_never_fewer_gangs_than_kube_scheduler_and_never_a_partial_gang(control_plane: ControlPlane,
                                                                         tmp_path: Path) -> None:
    kube, ours = compare(control_plane, 3, tmp_path)
    assert kube.pods_placed > 0 and kube.gangs_placed > 0            # kube-scheduler's gang plugins ran
    assert kube.partial_gangs == ours.partial_gangs == 0             # all-or-nothing, both
    assert ours.gangs_placed >= kube.gangs_placed, (kube, ours)

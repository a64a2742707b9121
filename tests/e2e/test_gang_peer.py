"""Gangs against the real kube-scheduler: the same contended PodGroup workload (v1beta1 on the
1.37 control plane) placed by kube-scheduler's gang plugins and by cpsat-scheduler on the same
server; and the same with CompositePodGroup trees among the gangs (1.37)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.controlplane import ControlPlane
from tests.e2e.gang_peer import compare


def test_never_fewer_gangs_than_kube_scheduler_and_never_a_partial_gang(control_plane: ControlPlane,
                                                                         tmp_path: Path) -> None:
    kube, ours = compare(control_plane, 3, tmp_path)
    assert kube.pods_placed > 0 and kube.gangs_placed > 0            # kube-scheduler's gang plugins ran
    assert kube.partial_gangs == ours.partial_gangs == 0             # all-or-nothing, both
    assert ours.gangs_placed >= kube.gangs_placed, (kube, ours)


def test_never_fewer_group_trees_than_kube_scheduler_and_never_a_partial_tree(control_plane: ControlPlane,
                                                                              tmp_path: Path) -> None:
    """CompositePodGroup trees (each asking for all its child gangs) among standalone gangs."""
    if control_plane.features.composite_api is None:
        pytest.skip("CompositePodGroup is 1.37's")
    kube, ours = compare(control_plane, 1, tmp_path, trees=True)
    assert kube.pods_placed > 0 and kube.trees_placed > 0            # kube-scheduler placed trees
    assert kube.partial_trees == ours.partial_trees == 0             # all-or-nothing trees, both
    assert kube.partial_gangs == ours.partial_gangs == 0
    assert ours.trees_placed >= kube.trees_placed, (kube, ours)
    assert ours.gangs_placed >= kube.gangs_placed, (kube, ours)
    assert ours.pods_placed >= kube.pods_placed, (kube, ours)

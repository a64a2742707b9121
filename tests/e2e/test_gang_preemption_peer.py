"""Workload-aware preemption (1.37, KEP-5710) on a real server (``tests/e2e/gang_preemption_peer.py``):
a full cluster of low-priority gangs, half ``disruptionMode: all``, and a high-priority gang that
needs two whole nodes. 1.37's kube-scheduler places the preemptor and evicts an ``all`` group
only whole; the project's plan, read from the same server first, places the preemptor too."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.controlplane import ControlPlane
from tests.e2e.gang_preemption_peer import MEMBERS, compare


def test_both_place_the_preemptor_gang_and_kube_scheduler_evicts_all_groups_whole(
        control_plane: ControlPlane, tmp_path: Path) -> None:
    if control_plane.features.composite_api is None:
        pytest.skip("workload-aware preemption is 1.37's; this plane is " + str(control_plane.built and
                                                                                 control_plane.built.version))
    kube, ours = compare(control_plane, 0, tmp_path)
    assert kube.preemptor_placed, kube
    assert kube.evicted and kube.partial_all == set(), kube      # `all` groups go whole, or not at all
    assert ours.preemptor_placed, ours
    assert ours.evicted                                           # two whole nodes had to be freed
    assert len(ours.evicted) <= len(kube.evicted) + MEMBERS * 0, (kube, ours)

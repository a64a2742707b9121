"""Workload-aware preemption (1.37, KEP-5710) on a real server (``tests/e2e/gang_preemption_peer.py``):
a full cluster of low-priority gangs, half ``disruptionMode: all``, and a high-priority gang that
needs two whole nodes. 1.37's kube-scheduler places the preemptor and evicts an ``all`` group
only whole; the project's plan, read from the same server first, places the preemptor too and
cuts no ``all`` group either (issue 35's GroupDisruption plugin)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.controlplane import ControlPlane
from tests.e2e.gang_preemption_peer import Verdict, compare


@pytest.fixture(scope="module")
def verdicts(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> tuple[Verdict, Verdict]:
    if control_plane.features.composite_api is None:
        pytest.skip(f"workload-aware preemption is 1.37's; this plane is {control_plane.built and control_plane.built.version}")
    return compare(control_plane, 0, tmp_path_factory.mktemp("wap"))


def test_kube_scheduler_evicts_all_groups_whole_and_both_place_the_preemptor(verdicts: tuple[Verdict, Verdict]) -> None:
    kube, ours = verdicts
    assert kube.preemptor_placed and kube.evicted, kube
    assert kube.partial_all == set(), kube        # 1.37: an `all` group goes whole or not at all
    assert ours.preemptor_placed and ours.evicted, ours


def test_the_plan_cuts_no_all_group(verdicts: tuple[Verdict, Verdict]) -> None:
    _, ours = verdicts
    assert ours.partial_all == set(), ours

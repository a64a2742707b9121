"""Greedy against the real kube-scheduler 1.36 on random windows (``tests/e2e/kube_differential.py``):
kube's placements pass the project's validator, greedy picks kube's node for every pod whose
best total score is unique, and kube binds every placement of the project's plan where the plan
puts it (each pod pinned to its node). Disagreements go to a JSON file (``CPSAT_DIFF_OUT``, else the test's
temporary folder) and fail the test unless their kind is a known difference the README lists.

    pytest tests/e2e/test_kube_differential.py                      # 50 windows (CPSAT_DIFF_WINDOWS)
    CPSAT_DIFF_LONG_WINDOWS=1000 pytest -m long tests/e2e/test_kube_differential.py
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.e2e import kube_differential
from tests.e2e.controlplane import ControlPlane

README = Path(__file__).resolve().parents[2] / "README.md"


def _run(control_plane: ControlPlane, tmp_path: Path, seeds: range) -> None:
    out = Path(os.environ.get("CPSAT_DIFF_OUT") or tmp_path / "kube-differential.json")
    summary = kube_differential.run(control_plane, seeds, tmp_path, out=out, pinned=True)
    print(summary.line())
    assert summary.refused == 0, summary.refusals
    assert summary.pods and summary.unique and summary.planned, summary.line()
    unknown = summary.unknown()
    shown = "\n".join(f"seed {d.seed} {d.pod}: {d.kind}: {d.detail} (kube {d.kube_node}, greedy {d.greedy_node})"
                      for d in unknown[:20])
    assert not unknown, f"{len(unknown)} disagreement(s) with kube-scheduler, written to {out}:\n{shown}"


def test_every_known_difference_is_in_the_readme() -> None:
    text = README.read_text()
    for kind in kube_differential.KNOWN:
        assert f"`{kind}`" in text, kind


def test_greedy_decides_as_kube_scheduler_does(control_plane: ControlPlane, tmp_path: Path) -> None:
    count = int(os.environ.get("CPSAT_DIFF_WINDOWS", "50"))
    _run(control_plane, tmp_path, range(count))


@pytest.mark.long
def test_greedy_decides_as_kube_scheduler_does_long(control_plane: ControlPlane, tmp_path: Path) -> None:
    count = int(os.environ.get("CPSAT_DIFF_LONG_WINDOWS", "1000"))
    _run(control_plane, tmp_path, range(10_000, 10_000 + count))

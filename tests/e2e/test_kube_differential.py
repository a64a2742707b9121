"""Greedy against the real kube-scheduler 1.36 on random windows (``tests/e2e/kube_differential.py``):
kube's placements pass the project's validator; greedy's filters, every plugin's score of every
node (from kube-scheduler's -v=10 log) and FitError messages are kube's, and greedy picks kube's
node for every pod whose best total score is unique; kube binds every placement of the project's
plan where the plan puts it (each pod pinned to its node). Disagreements go to a JSON file
(``CPSAT_DIFF_OUT``, else the test's temporary folder) and fail the test unless their kind is a
known difference docs/rules.md lists.

    pytest tests/e2e/test_kube_differential.py                      # 50 windows (CPSAT_DIFF_WINDOWS)
    CPSAT_DIFF_LONG_WINDOWS=1000 pytest -m long tests/e2e/test_kube_differential.py
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.e2e import kube_differential
from tests.e2e.controlplane import ControlPlane

README = Path(__file__).resolve().parents[2] / "docs" / "rules.md"   # the page listing the known differences


def _run(control_plane: ControlPlane, tmp_path: Path, seeds: range) -> None:
    out = Path(os.environ.get("CPSAT_DIFF_OUT") or tmp_path / "kube-differential.json")
    summary = kube_differential.run(control_plane, seeds, tmp_path, out=out, pinned=True)
    print(summary.line())
    assert summary.refused == 0, summary.refusals
    assert summary.pods and summary.unique and summary.planned and summary.admitted, summary.line()
    unknown = summary.unknown()
    shown = "\n".join(f"seed {d.seed} {d.pod}: {d.kind}: {d.detail} (kube {d.kube_node}, greedy {d.greedy_node})"
                      for d in unknown[:20])
    assert not unknown, f"{len(unknown)} disagreement(s) with kube-scheduler, written to {out}:\n{shown}"


def test_the_known_1_36_wording_differences_read_alike() -> None:
    ours = ("0/8 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, 1 node(s) had untolerated "
            "taint {maintenance: soon}, 6 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never.")
    kube = ("0/8 nodes are available: 2 node(s) had untolerated taint(s), 6 Insufficient cpu. no new claims to "
            "deallocate, preemption: not eligible due to preemptionPolicy=Never.")
    assert kube_differential.comparable_message(ours) == kube_differential.comparable_message(kube)
    other = kube.replace("6 Insufficient cpu", "6 Insufficient memory")
    assert kube_differential.comparable_message(ours) != kube_differential.comparable_message(other)


def test_windows_are_seeded_and_the_project_reads_them() -> None:
    assert kube_differential.generate(7) == kube_differential.generate(7)
    window = kube_differential.generate(7)
    snapshot = kube_differential._snapshot([kube_differential.PRIORITY_CLASS, *window.nodes, *window.running,
                                            *window.pending])
    assert len(snapshot.nodes) == len(window.nodes)
    assert len(snapshot.pending_pods(kube_differential.SCHEDULER)) == len(window.pending)


def test_a_pin_is_added_to_every_required_term() -> None:
    body = {"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Exists"}]},
                              {"matchExpressions": [{"key": "b", "operator": "Exists"}]}]}}}}}
    terms = kube_differential._pinned(body, "n1")["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert [t["matchFields"] for t in terms] == [[{"key": "metadata.name", "operator": "In", "values": ["n1"]}]] * 2
    alone = kube_differential._pinned({"spec": {}}, "n2")["spec"]["affinity"]["nodeAffinity"]
    assert alone["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]


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

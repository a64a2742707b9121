"""The model-gap reader (``gap_windows``): a window the long property run writes out
(``generators.dump``) reads back as the same window, volume objects included — a gap window
holding a StorageClass was once lost because the reader knew only nodes, pods, budgets and
groups — and solving it again says whether its gap is still open."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings

from tests.builders import make_node, make_pod, make_snapshot
from tests.reliability import gap_windows
from tests.reliability.generators import Window, dump, windows

from models.config import SchedulerConfig

LISTS = ("nodes", "pods", "pdbs", "pod_groups", "storage_classes", "pvs", "pvcs", "csi_nodes")


def _lists(window: Window) -> dict[str, list]:
    snap = window.snapshot
    return {name: [o.model_dump(mode="json") for o in getattr(snap, name)] for name in LISTS}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(window=windows())
def test_a_dumped_window_reads_back_whole(window: Window, tmp_path_factory) -> None:
    path = tmp_path_factory.mktemp("gap") / "window.jsonl"
    path.write_text(dump(window))
    again = gap_windows.load(path)
    assert _lists(again) == _lists(window)
    assert again.config == window.config


def test_a_window_with_volumes_reads_back(tmp_path: Path) -> None:
    # (the generator draws volumes in about one window in four; this one has every kind)
    from tests.builders import make_csi_node, make_pv, make_pvc, make_storage_class
    snapshot = make_snapshot(
        [make_node("n0", cpu="2")],
        [make_pod("default/p", cpu="1", claims=["data"])],
        storage_classes=[make_storage_class("standard")],
        pvs=[make_pv("pv-0", storage_class="standard")],
        pvcs=[make_pvc("default/data", storage_class="standard")],
        csi_nodes=[make_csi_node("n0", {"disk.csi": 4})],
    )
    window = Window(snapshot, SchedulerConfig())
    path = tmp_path / "window.jsonl"
    path.write_text(dump(window))
    again = gap_windows.load(path)
    assert _lists(again) == _lists(window)
    assert all(_lists(again)[name] for name in LISTS if name not in ("pdbs", "pod_groups"))


def test_a_kind_the_reader_does_not_know_is_named(tmp_path: Path) -> None:
    path = tmp_path / "window.jsonl"
    path.write_text('{"kind": "ConfigMap", "metadata": {"name": "x"}}\n{"config": {}}\n')
    try:
        gap_windows.load(path)
    except ValueError as err:
        assert "window.jsonl:1" in str(err) and "ConfigMap" in str(err)
    else:
        raise AssertionError("an unknown kind was read")


def test_the_reader_solves_a_window_again_and_says_it_is_closed(tmp_path: Path, capsys) -> None:
    snapshot = make_snapshot([make_node("n0", cpu="2")], [make_pod("default/p", cpu="1")])
    path = tmp_path / "window.jsonl"
    path.write_text(dump(Window(snapshot, SchedulerConfig())))
    assert gap_windows.main([str(path)]) == 0
    assert capsys.readouterr().out.strip() == "window.jsonl: model OPTIMAL 1, greedy 1: closed"


def test_with_no_window_kept_the_reader_says_so(monkeypatch, tmp_path: Path, capsys) -> None:
    monkeypatch.setattr(gap_windows, "GAPS", tmp_path / "gaps")
    assert gap_windows.main([]) == 0
    assert "no model gap kept" in capsys.readouterr().out

"""Reading a large dump costs a few times the file, not tens of times (issue 14, item 4).

A 200 MB dump used to take 5.8 GB before a limit could refuse it: the whole input became Python
dicts at once (about ten times compact JSON), then models. Items are now read one at a time and
the models share what repeats. The figure is the one ``cpsat-scheduler bench`` reports: peak
resident memory of a fresh interpreter reading the file, above the interpreter itself.
"""

from __future__ import annotations

import json

import pytest

from adapters.bench import workloads
from adapters.bench.input_memory import MAX_RATIO, measure
from adapters.bench.parse import as_list, dump
from adapters.snapshot_io import read_snapshot


@pytest.fixture(scope="module")
def objects() -> list[dict]:
    return workloads.spread("medium", 0).objects  # 1,000 nodes, 3,300 pods: about 5 MiB compact


@pytest.mark.parametrize("yaml", [False, True], ids=["compact-json", "yaml"])
def test_reading_a_dump_peaks_below_five_times_its_size(objects, yaml: bool) -> None:
    figures = measure(objects, yaml=yaml)
    assert "error" not in figures, figures
    assert figures["file_mib"] > 1
    assert figures["ratio"] <= MAX_RATIO, figures


def test_json_and_yaml_dumps_read_the_same_objects_in_the_same_order(objects, tmp_path) -> None:
    compact = tmp_path / "dump.json"
    compact.write_text(json.dumps(as_list(objects), separators=(",", ":")))
    from_json = read_snapshot(compact).snapshot
    from_yaml = read_snapshot(dump(objects, tmp_path / "dump.yaml")).snapshot
    assert [n.name for n in from_json.nodes] == [o["metadata"]["name"] for o in objects if o["kind"] == "Node"]
    assert from_json.nodes == from_yaml.nodes
    assert from_json.pods == from_yaml.pods
    want = [o["metadata"]["name"] for o in objects if o["kind"] == "Pod"]
    assert [p.metadata.name for p in from_json.pods] == want

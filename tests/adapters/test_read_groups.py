"""``adapters.reading.groups.read_groups``: the objects a server lists (dicts) in, the scheduler's
groups out, with the same checks as a dump (the cluster side reads 1.37's groups with it)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from adapters.reading.groups import read_groups
from models import InputError

GANGS = Path(__file__).resolve().parents[2] / "examples" / "snapshots" / "gangs"


def items(name: str) -> list[dict]:
    return yaml.safe_load((GANGS / name).read_text())["items"]


def test_a_tree_listed_from_a_server_reads_as_from_a_dump() -> None:
    found = read_groups(items("composite-block-rack.yaml"), {})
    assert sorted(g.key for g in found.pod_groups) == ["ml/train-a", "ml/train-b"]
    assert {g.spec.parent for g in found.pod_groups} == {"ml/train"}
    assert [(c.key, c.min_group_count, c.topology_key) for c in found.composites] == [
        ("ml/train", 2, "topology.example.com/block")]


def test_the_groups_priority_and_disruption_unit() -> None:
    listed = items("disruption-all.yaml")
    classes = {i["metadata"]["name"]: i for i in listed if i["kind"] == "PriorityClass"}
    from models import PriorityClass
    found = read_groups(listed, {n: PriorityClass.model_validate(c) for n, c in classes.items()})
    (group,) = found.pod_groups
    assert (group.spec.priority, group.spec.disruption_unit) == (100, "PodGroup ml/trainer")


def test_a_bad_tree_is_one_input_error() -> None:
    listed = items("composite-block-rack.yaml")
    for i in listed:
        if i["kind"] == "CompositePodGroup":
            i["spec"]["schedulingPolicy"]["gang"]["minGroupCount"] = 5
    with pytest.raises(InputError, match="minGroupCount: 5 is above the 2 child group"):
        read_groups(listed, {})

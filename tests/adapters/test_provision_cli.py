"""``cpsat-scheduler provision`` on the command line: the nodes, where each pod goes, the
baseline beside; a bad shape file refused with one line and exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from adapters.cli import main

NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "old", "labels": {"kubernetes.io/hostname": "old"}},
        "status": {"allocatable": {"cpu": "1", "memory": "4Gi", "pods": "110"}}}


def pod(name: str, cpu: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "a"},
            "spec": {"schedulerName": "cpsat-scheduler",
                     "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}}


SHAPES = [{"name": "small", "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}, "cost": 4},
          {"name": "big", "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}, "cost": 5}]


def files(tmp_path: Path, shapes) -> tuple[str, str]:
    snap = tmp_path / "snap.yaml"
    snap.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List",
                                    "items": [NODE] + [pod(f"p{i}", "3") for i in range(3)]}))
    shape_file = tmp_path / "shapes.yaml"
    shape_file.write_text(yaml.safe_dump(shapes))
    return str(snap), str(shape_file)


def run(capsys, *argv: str) -> tuple[int, str, list[str]]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err.strip().splitlines()


def test_table_lists_the_nodes_the_baseline_and_where_pods_go(capsys, tmp_path: Path) -> None:
    snap, shapes = files(tmp_path, {"shapes": SHAPES})
    code, out, _ = run(capsys, "provision", snap, "--shapes", shapes)
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "ADD 2 node(s), cost 9 — optimal (proven)"
    assert "     1 x big (cost 5 each)" in lines and "     1 x small (cost 4 each)" in lines
    assert "first-fit-decreasing would add 3 node(s), cost 12" in out
    assert sum(1 for line in lines if "  ->  " in line) == 3


def test_json(capsys, tmp_path: Path) -> None:
    snap, shapes = files(tmp_path, SHAPES)
    code, out, _ = run(capsys, "provision", snap, "--shapes", shapes, "-o", "json")
    doc = json.loads(out)
    assert code == 0 and doc["cost"] == 9.0 and doc["proven"] and doc["gap"] == 0.0
    assert doc["firstFitDecreasing"] == {"nodes": 3, "cost": 12.0, "unplaced": 0}
    assert sorted(doc["placement"]) == ["a/p0", "a/p1", "a/p2"]


@pytest.mark.parametrize(("bad", "line"), [
    ({"cost": -1}, "shapes[0] (small): cost: -1 must be a number >= 0"),
    ({"allocatable": {"cpu": "4", "gpus": "1"}}, "shapes[0] (small): allocatable.gpus: unknown resource"),
    # A list or a string for labels was an internal error (dict() of it), exit 1.
    ({"labels": ["gpu"]}, "shapes[0] (small): labels: expected a mapping of label to value"),
    ({"labels": "gpu"}, "shapes[0] (small): labels: expected a mapping of label to value"),
    # 1e308 was an internal error (OverflowError); 1e18 made the model give up without a word.
    ({"cost": 1e308}, "shapes[0] (small): cost: 1e+308 is above the largest cost taken, 1,000,000,000"),
    ({"cost": 1e18}, "shapes[0] (small): cost: 1e+18 is above the largest cost taken, 1,000,000,000"),
])
def test_a_bad_shape_file_exits_2_with_one_line(capsys, tmp_path: Path, bad, line) -> None:
    snap, shapes = files(tmp_path, [dict(SHAPES[0], **bad)])
    code, out, err = run(capsys, "provision", snap, "--shapes", shapes)
    assert code == 2 and out == "" and len(err) == 1
    assert err[0].startswith(f"cpsat-scheduler: error: {shapes}: {line}")


def test_gpu_pods_get_a_shape_with_devices_from_the_file(capsys) -> None:
    examples = Path(__file__).resolve().parents[2] / "examples"
    code, out, _ = run(capsys, "provision", str(examples / "snapshots/dra/contended.yaml"),
                       "--shapes", str(examples / "provision/gpu-shapes.yaml"), "-o", "json")
    doc = json.loads(out)
    assert code == 0 and doc["proven"] and doc["placement"] == {"ml/train-2": "gpu-x4-new-1"}
    assert doc["added"] == [{"name": "gpu-x4-new-1", "shape": "gpu-x4", "cost": 5.67, "devices": 4}]


def test_a_device_without_a_driver_is_refused_in_one_line(capsys, tmp_path: Path) -> None:
    bad = [{"name": "g", "allocatable": {"cpu": "8"}, "cost": 1, "devices": [{"count": 2}]}]
    snap, shapes = files(tmp_path, bad)
    code, out, err = run(capsys, "provision", snap, "--shapes", shapes)
    assert code == 2 and out == ""
    assert err == [f"cpsat-scheduler: error: {shapes}: shapes[0] (g): devices[0].driver: a device needs its driver's name"]


def test_a_pod_whose_affinity_only_a_pending_pod_meets_is_planned_beside_it(capsys, tmp_path: Path) -> None:
    """docs/operator-questions.md's case: both pods on the one node added, in the table and in
    the JSON (``placement``; ``fitsNoShape`` empty)."""
    support = pod("a", "2")
    support["metadata"]["labels"] = {"app": "a"}
    dependent = pod("b", "1")
    dependent["spec"]["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    hog = pod("hog", "1")
    hog["spec"]["nodeName"] = "old"
    snap = tmp_path / "snap.yaml"
    snap.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [NODE, hog, support, dependent]}))
    shape_file = tmp_path / "shapes.yaml"
    shape_file.write_text(yaml.safe_dump([dict(SHAPES[0], cost=1)]))
    code, out, _ = run(capsys, "provision", str(snap), "--shapes", str(shape_file))
    assert code == 0
    assert out.splitlines()[0] == "ADD 1 node(s), cost 1 — optimal (proven)"
    assert "WHERE 2 OF THE 2 LEFT-OUT POD(S) GO\n  a/a  ->  small-new-1\n  a/b  ->  small-new-1\n" in out
    assert "NOT PLACED ON ANY SHAPE" not in out and "STILL LEFT OUT" not in out
    code, out, _ = run(capsys, "provision", str(snap), "--shapes", str(shape_file), "-o", "json")
    doc = json.loads(out)
    assert code == 0 and doc["proven"] and doc["placedBy"] == "model"
    assert doc["placement"] == {"a/a": "small-new-1", "a/b": "small-new-1"}
    assert doc["fitsNoShape"] == {} and doc["leftOut"] == {}


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
KUBELET_LABELS = {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                  "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64"}


def real_node(name: str, **labels: str) -> dict:
    """A full node as a kubelet registers it: os and arch labels, disk, 110 pod slots."""
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **KUBELET_LABELS, **labels}},
            "status": {"allocatable": {"cpu": "1", "memory": "4Gi", "pods": "110", "ephemeral-storage": "70Gi"}}}


def trial(tmp_path: Path, nodes: list[dict], pods: list[dict]) -> str:
    items = list(nodes)
    for i, node in enumerate(nodes):
        hog = pod(f"hog{i}", "1")
        hog["spec"]["nodeName"] = node["metadata"]["name"]
        items.append(hog)
    snap = tmp_path / "snap.yaml"
    snap.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items + pods}))
    return str(snap)


def test_the_example_shapes_take_pods_selecting_linux_and_asking_for_disk(capsys, tmp_path: Path) -> None:
    """The user's trial: examples/provision/shapes.yaml lists cpu, memory and pods only; a pod
    selecting kubernetes.io/os: linux and a 2 CPU/48Gi pod asking for 10Gi of ephemeral-storage
    both go to an r5.2xlarge, which takes the cluster's os and arch labels and its nodes' disk."""
    web = pod("web", "1")
    web["spec"]["nodeSelector"] = {"kubernetes.io/os": "linux"}
    etl = pod("etl", "2")
    etl["spec"]["containers"][0]["resources"]["requests"].update({"memory": "48Gi", "ephemeral-storage": "10Gi"})
    snap = trial(tmp_path, [real_node("old")], [web, etl])
    code, out, err = run(capsys, "provision", snap, "--shapes", str(EXAMPLES / "provision/shapes.yaml"), "-o", "json")
    doc = json.loads(out)
    assert code == 0 and doc["proven"] and err == []
    assert doc["placement"] == {"a/etl": "r5.2xlarge-new-1", "a/web": "r5.2xlarge-new-1"}
    assert doc["fitsNoShape"] == {} and doc["firstFitDecreasing"]["unplaced"] == 0


def test_a_label_the_nodes_disagree_on_is_named_on_stderr_when_it_leaves_a_pod_out(capsys, tmp_path: Path) -> None:
    api = pod("api", "1")
    api["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}]}}}
    nodes = [real_node("old"), real_node("arm", **{"kubernetes.io/arch": "arm64"})]
    snap = trial(tmp_path, nodes, [api, pod("plain", "1")])
    code, out, err = run(capsys, "provision", snap, "--shapes", str(EXAMPLES / "provision/shapes.yaml"))
    assert code == 0 and "  a/plain  ->  m5.xlarge-new-1" in out
    assert "NOT PLACED ON ANY SHAPE: 1\n  a/api: " in out
    note = ("cpsat-scheduler: note: shapes m5.xlarge, r5.2xlarge have no label kubernetes.io/arch in the file "
            "(left unset, as the cluster's nodes disagree: amd64, arm64): 1 pending pod(s) that need it fit no shape")
    assert err == [note]
    code, out, err = run(capsys, "provision", snap, "--shapes", str(EXAMPLES / "provision/shapes.yaml"), "-o", "json")
    assert code == 0 and list(json.loads(out)["fitsNoShape"]) == ["a/api"] and err == [note]  # stdout: JSON only


def test_first_fit_decreasing_counts_a_pod_that_fits_no_shape_as_unplaced(capsys) -> None:
    """quickstart's search indexer asks for more memory than any of its nodes has: neither
    answer places it, and first-fit-decreasing's ``unplaced`` says so as ``fitsNoShape`` does
    (it read 0)."""
    quickstart = str(EXAMPLES / "snapshots/quickstart.yaml")
    code, out, _ = run(capsys, "provision", quickstart, "-o", "json")
    doc = json.loads(out)
    assert code == 0 and list(doc["fitsNoShape"]) == ["shop/search-indexer-0"] and doc["placement"] == {}
    assert doc["firstFitDecreasing"] == {"nodes": 0, "cost": 0.0, "unplaced": 1}
    code, out, _ = run(capsys, "provision", quickstart)
    assert "first-fit-decreasing would add 0 node(s), cost 0, and leave 1 pod(s) out" in out

"""``cpsat-scheduler why`` on the command line: text and JSON, targets that name nothing
pending refused with one line and exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from adapters.cli import main

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "snapshots" / "quickstart.yaml"

SCENE = {"apiVersion": "v1", "kind": "List", "items": [
    {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
     "spec": {"taints": [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]},
     "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}},
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "a"},
     "spec": {"schedulerName": "cpsat-scheduler", "containers": [
         {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}},
]}


def run(capsys, *argv: str) -> tuple[int, str, list[str]]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err.strip().splitlines()


def test_text_names_the_taint_and_its_field(capsys, tmp_path: Path) -> None:
    path = tmp_path / "scene.yaml"
    path.write_text(yaml.safe_dump(SCENE))
    code, out, _ = run(capsys, "why", "a/p", str(path))
    assert code == 0
    assert out.splitlines()[0] == "a/p (pod): left out"
    assert "kube-scheduler: 0/1 nodes are available: 1 node(s) had untolerated taint {gpu: yes}." in out
    assert "1. node n1 has taint gpu=yes:NoSchedule, not tolerated" in out
    assert "fields: spec.taints[0]" in out
    assert "proven: yes" in out


def test_json_for_every_left_out_pod(capsys) -> None:
    code, out, _ = run(capsys, "why", "all", str(QUICKSTART), "-o", "json")
    assert code == 0
    [doc] = json.loads(out)
    assert doc["target"] == "shop/search-indexer-0" and doc["obstacles"] is None
    assert doc["beyondEveryNode"][0].startswith("shop/search-indexer-0 requests memory 48Gi")


def test_a_placed_pod_says_where(capsys) -> None:
    code, out, _ = run(capsys, "why", "ml/train-resnet-0-mcxj7", str(QUICKSTART))
    assert code == 0 and "placed by the best plan: ml/train-resnet-0-mcxj7 -> gpu-a-1" in out


@pytest.mark.parametrize(("target", "line"), [
    ("shop/nope", "cpsat-scheduler: error: pods/shop/nope: TARGET: no such pod in the snapshot"),
    ("kube-system/kube-proxy-kcdqc", "cpsat-scheduler: error: pods/kube-system/kube-proxy-kcdqc: TARGET: not a "
     "pending pod this scheduler places (it runs on node worker-a-1)"),
    ("podgroup/ml/none", "cpsat-scheduler: error: podgroup/ml/none: TARGET: no pending pod of podgroup ml/none in the snapshot"),
])
def test_a_target_naming_nothing_pending_exits_2(capsys, target, line) -> None:
    code, out, err = run(capsys, "why", target, str(QUICKSTART))
    assert (code, out, err) == (2, "", [line])


@pytest.mark.parametrize("target", ["deployment/shop/web", "web-7c5ddbdf54-4rj9t", "podgroup/etl-backfill", "ALL", ""])
def test_a_target_of_no_form_why_reads_says_what_it_takes(capsys, target) -> None:
    # Each was looked up as a pod and reported as "no such pod in the snapshot", as if only the
    # name were wrong.
    code, out, err = run(capsys, "why", target, str(QUICKSTART))
    where = f"{target}: " if target else ""
    assert (code, out, err) == (2, "", [f"cpsat-scheduler: error: {where}TARGET: expected a pod as NS/NAME, "
                                        "podgroup/NS/NAME, workload/NS/NAME or all"])


def test_the_documented_gang_example(capsys) -> None:
    examples = QUICKSTART.parents[1]
    code, out, _ = run(capsys, "why", "podgroup/ml/train", str(examples / "snapshots" / "why-gang-rack.yaml"),
                       "--config", str(examples / "config" / "hard-pdb.yaml"))
    assert code == 0
    assert out.splitlines()[:5] == [
        "podgroup/ml/train (gang, 8 pending pod(s)): left out",
        "  kube-scheduler (8 pods): PodGroup ml/train gets rejected: no single rack domain has room for the 8 "
        "member(s) it still needs (minCount 8), so none is placed (all-or-nothing)",
        "  minimal obstacles (1): relaxing it makes it fit; relaxing nothing does not:",
        "    1. PodDisruptionBudget ml/batch allows 0 disruption(s)",
        "       objects: poddisruptionbudgets/ml/batch; fields: status.disruptionsAllowed",
    ]
    assert "proven: yes" in out

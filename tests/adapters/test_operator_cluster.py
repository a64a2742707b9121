"""`what-if`, `why` and `provision` reading a cluster (`--kubeconfig`, and as `kubectl cpsat`
with no SNAPSHOT) from the in-memory API server: the same answer as from the file, GET list
calls only — nothing is written to the cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from adapters.apiserver import FakeApiServer
from adapters.cli import kubectl_plugin, main

REPO = Path(__file__).resolve().parents[2]
OBJECTS = [o for o in yaml.safe_load((REPO / "examples" / "snapshots" / "quickstart.yaml").read_text())["items"]
           if o["kind"] not in ("PersistentVolume", "PersistentVolumeClaim")]
COMMANDS = [
    ["what-if", "--drain", "worker-b-2", "--add-nodes", "1:worker-a-1"],
    ["why", "all"],
    ["provision"],
]


@pytest.fixture
def server():
    made = FakeApiServer(OBJECTS, kubelet=False, disruption_controller=False).start()
    yield made
    made.stop()


@pytest.fixture
def snapshot(tmp_path: Path) -> str:
    path = tmp_path / "quickstart-without-volumes.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": OBJECTS}))
    return str(path)


def _comparable(doc):
    """The answer less its timings."""
    if isinstance(doc, list):
        return [_comparable(d) for d in doc]
    return {k: v for k, v in doc.items() if k != "seconds"}


@pytest.mark.parametrize("argv", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_from_the_cluster_with_list_calls_only(server, snapshot, tmp_path, capsys, argv) -> None:
    kubeconfig = server.kubeconfig_path(tmp_path)
    server.requests.keep()
    code = main([*argv, "--kubeconfig", kubeconfig, "-o", "json", "--workers", "1"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert {r.method for r in server.requests.records} == {"GET"}
    code = main([*argv, snapshot, "-o", "json", "--workers", "1"])
    expected, err = capsys.readouterr()
    assert code == 0, err
    assert _comparable(json.loads(out)) == _comparable(json.loads(expected))


def test_as_the_kubectl_plugin_without_a_snapshot(server, tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("KUBECONFIG", server.kubeconfig_path(tmp_path))
    code = kubectl_plugin(["why", "shop/search-indexer-0", "-o", "json", "--workers", "1"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)[0]["target"] == "shop/search-indexer-0"


def test_an_unreadable_kubeconfig_exits_2(tmp_path, capsys) -> None:
    code = main(["why", "all", "--kubeconfig", str(tmp_path / "missing")])
    _, err = capsys.readouterr()
    assert code == 2 and len(err.strip().splitlines()) == 1

"""`schedule`, `validate` and `repack` reading a cluster (`--kubeconfig`) instead of a SNAPSHOT,
against the in-memory API server (no Go needed; tests/e2e/test_read_cluster.py does the same
against a real 1.36 server): the same plan as from the file, list calls only, paging, and the
the ClusterRole in docs/configuration.md is exactly what is listed."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import yaml

from adapters.apiserver import FakeApiServer
from adapters.cli import main
from adapters.cluster_read import READ_RULES

REPO = Path(__file__).resolve().parents[2]
# The in-memory server stores no PersistentVolumes: the example without its PV and PVC, here and
# in the file each plan is compared with (the e2e tier reads them from the real server).
OBJECTS = [o for o in yaml.safe_load((REPO / "examples" / "snapshots" / "quickstart.yaml").read_text())["items"]
           if o["kind"] not in ("PersistentVolume", "PersistentVolumeClaim")]


@pytest.fixture
def snapshot(tmp_path: Path) -> str:
    path = tmp_path / "quickstart-without-volumes.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": OBJECTS}))
    return str(path)


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def placements(out: str) -> tuple[list[tuple[str, str]], list[str]]:
    plan = json.loads(out)
    return (sorted((a["pod"], a["node"]) for a in plan["assignments"]), sorted(u["pod"] for u in plan["unschedulable"]))


@pytest.fixture
def server() -> FakeApiServer:
    made = FakeApiServer(OBJECTS, kubelet=False, disruption_controller=False).start()
    yield made
    made.stop()


def test_schedule_from_the_cluster_gives_the_files_plan_with_list_calls_only(
        server: FakeApiServer, snapshot: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig = server.kubeconfig_path(tmp_path)
    server.requests.keep()
    code, out, err = cli(capsys, "schedule", "--kubeconfig", kubeconfig, "-o", "json", "--workers", "1", "--seed", "7")
    assert code == 0, err
    records = server.requests.records
    assert {r.method for r in records} == {"GET"} and not any(r.watch for r in records)
    assert {r.path for r in records} >= {"/api/v1/nodes", "/api/v1/pods", "/apis/policy/v1/poddisruptionbudgets"}
    code, expected, err = cli(capsys, "schedule", snapshot, "-o", "json", "--workers", "1", "--seed", "7")
    assert code == 0, err
    assert placements(out) == placements(expected)
    plan = tmp_path / "plan.json"
    plan.write_text(out)
    code, out, err = cli(capsys, "validate", "--kubeconfig", kubeconfig, str(plan))
    assert (code, out.startswith("OK: plan is valid")) == (0, True), err


def test_repack_from_the_cluster_gives_the_files_plan(server: FakeApiServer, snapshot: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(capsys, "repack", "--kubeconfig", server.kubeconfig_path(tmp_path), "-o", "json",
                         "--workers", "1", "--seed", "7")
    assert code == 0, err
    code, expected, err = cli(capsys, "repack", snapshot, "-o", "json", "--workers", "1", "--seed", "7")
    assert code == 0, err
    keys = ("moves", "freed_nodes", "before", "after")
    assert {k: json.loads(out)[k] for k in keys} == {k: json.loads(expected)[k] for k in keys}


def test_a_snapshot_and_a_cluster_together_are_refused(server: FakeApiServer, snapshot: str, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(capsys, "schedule", snapshot, "--kubeconfig", server.kubeconfig_path(tmp_path))
    assert (code, out) == (2, "")
    assert "give a SNAPSHOT or --kubeconfig/--context/--in-cluster, not both" in err


def test_an_unreachable_cluster_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    server = FakeApiServer([]).start()
    kubeconfig = server.kubeconfig_path(tmp_path)
    server.stop()
    code, out, err = cli(capsys, "schedule", "--kubeconfig", kubeconfig)
    assert (code, out) == (2, "")
    assert len(err.strip().splitlines()) == 1 and "cannot reach the API server" in err


_CONTEXT = "contexts: [{name: c, context: {cluster: k, user: u}}]\ncurrent-context: c\n"


@pytest.mark.parametrize(
    ("text", "field", "problem"),
    [
        ("hello\n", "", "not a kubeconfig: expected a mapping (clusters, contexts, users, current-context), got a string"),
        ("- a\n", "", "not a kubeconfig: expected a mapping (clusters, contexts, users, current-context), got a list"),
        ("contexts: x\n", "contexts", "expected a list, got a string"),
        ("contexts: [{name: c, context: x}]\n", "contexts[0].context", "expected a mapping, got a string"),
        (_CONTEXT + "clusters: [{name: k, cluster: {server: 5}}]\n", "clusters[0].cluster.server",
         "expected a string, got a number"),
        (_CONTEXT + "users: [{name: u, user: {token: 12345}}]\n", "users[0].user.token", "expected a string, got a number"),
    ],
    ids=["a-scalar", "a-list", "contexts-not-a-list", "context-body-a-string", "server-a-number", "token-a-number"],
)
def test_a_kubeconfig_of_the_wrong_shape_is_named_with_its_field(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                 text: str, field: str, problem: str) -> None:
    """The client's loader failed on these with Python's own words ("TypeError: 'str' object does
    not support item assignment"); a value, which may be a credential, is never repeated."""
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(text)
    code, out, err = cli(capsys, "schedule", "--kubeconfig", str(kubeconfig))
    assert (code, out) == (2, "")
    assert err.splitlines() == [f"cpsat-scheduler: error: {kubeconfig}: {field + ': ' if field else ''}{problem}"]
    assert "12345" not in err


def test_the_readme_clusterrole_is_what_is_listed() -> None:
    readme = (REPO / "docs" / "configuration.md").read_text()
    block = re.search(r"```yaml\n(kind: ClusterRole\nmetadata: \{name: cpsat-cluster-reader\}.*?)```", readme, re.DOTALL)
    assert block, "docs/configuration.md: the cpsat-cluster-reader ClusterRole"
    assert yaml.safe_load(block.group(1))["rules"] == READ_RULES


def test_as_the_kubectl_plugin_no_snapshot_means_the_current_cluster(
        server: FakeApiServer, snapshot: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from adapters import cluster_read
    from adapters.cli import kubectl_plugin

    monkeypatch.setenv("KUBECONFIG", server.kubeconfig_path(tmp_path))
    assert not hasattr(cluster_read, "AS_KUBECTL_PLUGIN")  # a parameter of the run, no module flag
    code = kubectl_plugin(["schedule", "-o", "json", "--workers", "1", "--seed", "7"])
    out, err = capsys.readouterr()
    assert code == 0, err
    code, expected, err = cli(capsys, "schedule", snapshot, "-o", "json", "--workers", "1", "--seed", "7")
    assert placements(out) == placements(expected)
    # a SNAPSHOT given is still read from the file
    code = kubectl_plugin(["schedule", snapshot, "-o", "json", "--workers", "1", "--seed", "7"])
    out, err = capsys.readouterr()
    assert (code, placements(out)) == (0, placements(expected))
    # and nothing of the plugin's run stays behind: the plain command given no SNAPSHOT still
    # reads the bundled example, not the kubeconfig's cluster (stopped: reading it would be exit 2)
    server.stop()
    assert kubectl_plugin(["schedule", "-o", "json"]) == 2
    assert "cannot reach the API server" in capsys.readouterr().err
    code, plain, err = cli(capsys, "schedule", "-o", "json", "--workers", "1", "--seed", "7")
    code2, bundled, _ = cli(capsys, "schedule", str(REPO / "examples" / "snapshots" / "quickstart.yaml"),
                            "-o", "json", "--workers", "1", "--seed", "7")
    assert (code, code2) == (0, 0) and placements(plain) == placements(bundled), err


def test_a_kubeconfig_the_loader_refuses_never_shows_its_token(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The loader's message carried the user entry as a Python mapping, token and key included."""
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(_CONTEXT.replace("name: c, context: {cluster: k, user: u}", "name: c, context: {cluster: k, user: u}")
                          + "clusters: [{name: k, cluster: {server: 'https://127.0.0.1:9'}}]\n"
                          + "users: [{name: u, user: {token: SECRET-TOKEN-1, client-certificate-data: null, "
                          + "client-key-data: null}}]\n")
    code, out, err = cli(capsys, "schedule", "--kubeconfig", str(kubeconfig))
    assert (code, out) == (2, "") and len(err.splitlines()) == 1
    assert "cannot load cluster credentials" in err and "SECRET-TOKEN-1" not in err


def test_a_kubeconfig_read_from_a_pipe_or_naming_a_date_reaches_the_server(tmp_path: Path,
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A pipe (`--kubeconfig <(...)`) was read empty by the loader after the shape check had read
    it; a namespace 2024-01-01 (a date to Python's YAML, text to kubectl's) was refused."""
    server = FakeApiServer([]).start()
    server.stop()  # nothing listens there now: reaching it is the loader's success
    text = ("apiVersion: v1\nkind: Config\ncurrent-context: c\n"
            f"clusters: [{{name: k, cluster: {{server: '{server.url}', insecure-skip-tls-verify: true}}}}]\n"
            "contexts: [{name: c, context: {cluster: k, user: u, namespace: 2024-01-01}}]\n"
            "users: [{name: u, user: {token: t}}]\n")
    dated = tmp_path / "dated"
    dated.write_text(text)
    read, write = os.pipe()
    os.write(write, text.encode())
    os.close(write)
    try:
        for given in (f"/dev/fd/{read}", str(dated)):
            code, out, err = cli(capsys, "schedule", "--kubeconfig", given)
            assert (code, out) == (2, "") and "cannot reach the API server" in err, err
    finally:
        os.close(read)

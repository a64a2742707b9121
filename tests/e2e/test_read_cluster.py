"""`schedule`, `validate` and `repack` reading straight from a real API server (1.37 by default)
(`--kubeconfig`), as an identity that may only `list` the kinds the parser reads (READ_RULES, the
ClusterRole in docs/configuration.md): the same plans as from the example file the objects came from."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml
from kubernetes import client, config

from adapters.cluster_read import READ_RULES
from tests.e2e.controlplane import ControlPlane
from tests.e2e.controlplane.cluster import _kubeconfig
from tests.e2e.dumps import Applier, items_of
from tests.e2e.harness import REPO
from tests.e2e.test_dumps import EXAMPLES, plan

READER = "cpsat-cluster-reader"


@pytest.fixture
def quickstart_on_server(control_plane: ControlPlane) -> Iterator[Applier]:
    made = Applier(config.new_client_from_config(str(control_plane.admin_kubeconfig)))
    try:
        made.apply(items_of(yaml.safe_load((EXAMPLES / "quickstart.yaml").read_text())))
        yield made
    finally:
        made.delete()
        made.api.close()


@pytest.fixture(scope="module")
def reader_kubeconfig(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A service account bound to a ClusterRole of exactly READ_RULES."""
    api = config.new_client_from_config(str(control_plane.admin_kubeconfig))
    rbac, core = client.RbacAuthorizationV1Api(api), client.CoreV1Api(api)
    rbac.create_cluster_role({"metadata": {"name": READER}, "rules": READ_RULES})
    rbac.create_cluster_role_binding({"metadata": {"name": READER},
                                      "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                                  "name": READER},
                                      "subjects": [{"kind": "ServiceAccount", "name": READER, "namespace": "default"}]})
    core.create_namespaced_service_account("default", {"metadata": {"name": READER}})
    token = core.create_namespaced_service_account_token(READER, "default", {"spec": {}}).status.token
    api.close()
    assert control_plane.state is not None
    return _kubeconfig(tmp_path_factory.mktemp("reader") / "reader.kubeconfig", control_plane.state.server,
                       control_plane.directory / "pki" / "ca.crt", {"token": token}, READER)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "adapters", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=600)


def _repack(out: str) -> dict[str, Any]:
    found = json.loads(out)
    return {k: found.get(k) for k in ("moves", "freed_nodes", "before", "after", "lower_bound_nodes")}


def test_schedule_validate_and_repack_read_the_cluster_with_list_rights_only(
        quickstart_on_server: Applier, reader_kubeconfig: Path, tmp_path: Path) -> None:
    source = EXAMPLES / "quickstart.yaml"
    done = subprocess.run([sys.executable, "-m", "adapters", "schedule", "--kubeconfig", str(reader_kubeconfig),
                           "--output", "json", "--workers", "1", "--seed", "7"], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    from_cluster = json.loads(done.stdout)
    expected = plan(source)
    assert sorted((a["pod"], a["node"]) for a in from_cluster["assignments"]) == expected["assignments"]
    assert sorted(u["pod"] for u in from_cluster["unschedulable"]) == expected["unschedulable"]

    plan_file = tmp_path / "plan.json"
    plan_file.write_text(done.stdout)
    checked = cli("validate", "--kubeconfig", str(reader_kubeconfig), str(plan_file))
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.startswith("OK: plan is valid")

    repacked = cli("repack", "--kubeconfig", str(reader_kubeconfig), "--output", "json", "--workers", "1",
                   "--seed", "7")
    from_file = cli("repack", str(source), "--output", "json", "--workers", "1", "--seed", "7")
    assert repacked.returncode == from_file.returncode == 0, repacked.stderr + from_file.stderr
    assert _repack(repacked.stdout) == _repack(from_file.stdout)


def test_an_identity_that_may_not_list_a_kind_is_told_which(control_plane: ControlPlane) -> None:
    # the live scheduler's own identity (examples/deploy/rbac.yaml) may list namespaces now, but
    # not the scheduler-plugins PodGroups `schedule` reads (the live scheduler reads them only
    # where granted: an optional resource)
    done = cli("schedule", "--kubeconfig", str(control_plane.scheduler_kubeconfig))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "podgroups" in lines[0] and "403" in lines[0] and "list" in lines[0]
    assert "Traceback" not in done.stderr


def test_gangs_are_read_in_the_servers_version_and_another_asked_for_is_exit_2(
        control_plane: ControlPlane, reader_kubeconfig: Path) -> None:
    """The example's PodGroups, made in this server's version (1.37: v1beta1), read back by an
    identity with READ_RULES only (PodGroups, Workloads and CompositePodGroups of the newest
    version): the file's plan. A version the server does not serve, asked for: one line, exit 2."""
    source = EXAMPLES / "gangs" / "podgroup-v1alpha2.yaml"
    made = Applier(config.new_client_from_config(str(control_plane.admin_kubeconfig)), control_plane.features.gang_api)
    try:
        made.apply(items_of(yaml.safe_load(source.read_text())))
        done = cli("schedule", "--kubeconfig", str(reader_kubeconfig), "--output", "json", "--workers", "1",
                   "--seed", "7")
        assert done.returncode == 0, done.stderr
        from_cluster, expected = json.loads(done.stdout), plan(source)
        assert sorted(a["pod"] for a in from_cluster["assignments"]) == sorted(p for p, _ in expected["assignments"])
        assert sorted(u["pod"] for u in from_cluster["unschedulable"]) == expected["unschedulable"]
        served = control_plane.features.gang_api.rpartition("/")[2]
        other = "v1alpha2" if served == "v1beta1" else "v1beta1"
        refused = cli("schedule", "--kubeconfig", str(reader_kubeconfig), "--gang-api", other)
        assert refused.returncode == 2 and refused.stdout == ""
        lines = refused.stderr.strip().splitlines()
        assert len(lines) == 1 and f"scheduling.k8s.io/{other} is not served" in lines[0], refused.stderr
        assert served in lines[0].split("PodGroup versions it serves:")[1]
    finally:
        made.delete()
        made.api.close()

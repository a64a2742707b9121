"""Kubernetes 1.36 keeps working while the e2e tier runs on 1.37: a 1.36.3 control plane of its own
(built from tests/e2e/controlplane/v1.36.3.mod, cached like 1.37's) serves v1alpha2 PodGroups; a
dump of it gives the example's plan, and reading it live finds its gangs in v1alpha2 (and refuses
v1beta1, which 1.36 does not serve, with one line and exit 2).

One start of a second control plane (~10 s) for the module; when the session's own plane is
1.36 already (CPSAT_E2E_KUBERNETES=v1.36.3) that one is used."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import pytest
import yaml
from kubernetes import client, config

from tests.e2e.controlplane import ControlPlane, ControlPlaneError
from tests.e2e.dumps import Applier, items_of
from tests.e2e.test_dumps import EXAMPLES, applier_on, dump_gives_the_examples_plan, plan
from tests.e2e.test_read_cluster import cli

V136 = "v1.36.3"


@pytest.fixture(scope="module")
def plane_1_36(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    if control_plane.built is not None and control_plane.built.version == V136:
        yield control_plane
        return
    plane = ControlPlane(tmp_path_factory.mktemp("controlplane-1.36"), version=V136)
    try:
        plane.start()
    except ControlPlaneError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture
def applier(plane_1_36: ControlPlane) -> Iterator[Applier]:
    yield from applier_on(plane_1_36)


def test_the_1_36_server_serves_v1alpha2_and_not_v1beta1(plane_1_36: ControlPlane) -> None:
    api = config.new_client_from_config(str(plane_1_36.admin_kubeconfig))
    try:
        assert client.VersionApi(api).get_code().git_version == V136
        served = {v.group_version for g in client.ApisApi(api).get_api_versions().groups for v in g.versions}
        assert "scheduling.k8s.io/v1alpha2" in served
        assert not {"scheduling.k8s.io/v1beta1", "scheduling.k8s.io/v1alpha3"} & served
    finally:
        api.close()


def test_a_1_36_dump_gives_the_examples_plan(applier: Applier, tmp_path: Path) -> None:
    assert applier.gang_api == "scheduling.k8s.io/v1alpha2"
    dump_gives_the_examples_plan(applier, "gangs/podgroup-v1alpha2.yaml", tmp_path)


def test_a_1_36_cluster_is_read_in_v1alpha2_and_v1beta1_is_refused(plane_1_36: ControlPlane, applier: Applier) -> None:
    source = EXAMPLES / "gangs" / "podgroup-v1alpha2.yaml"
    applier.apply(items_of(yaml.safe_load(source.read_text())))
    kubeconfig = str(plane_1_36.admin_kubeconfig)
    done = cli("schedule", "--kubeconfig", kubeconfig, "--output", "json", "--workers", "1", "--seed", "7",
               "--gang-api", "v1alpha2")
    assert done.returncode == 0, done.stderr
    expected = plan(source)
    assert sorted(u["pod"] for u in json.loads(done.stdout)["unschedulable"]) == expected["unschedulable"]
    refused = cli("schedule", "--kubeconfig", kubeconfig, "--gang-api", "v1beta1")
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.strip().endswith(
        "scheduling.k8s.io/v1beta1 is not served by this server (PodGroup versions it serves: v1alpha2);"
        " pick another with --gang-api, or turn it on with the API server's --runtime-config and --feature-gates"
        " (docs/live.md, 'Kubernetes versions')")
    assert len(refused.stderr.strip().splitlines()) == 1

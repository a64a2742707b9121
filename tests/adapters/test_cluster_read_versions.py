"""Reading Kubernetes' own gangs from a cluster in the version it serves (``adapters.gang_api``),
against the in-memory API server made to serve 1.37's shapes (v1beta1 PodGroup and Workload,
v1alpha3 CompositePodGroup) or 1.36's (v1alpha2): the newest served is listed and only it, a gang
declared there holds its pods back as it would from a file, and a version asked for with
``--gang-api`` that the server does not serve is exit 2 with one line naming what it serves."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest

from adapters import gang_api
from adapters.apiserver import FakeApiServer
from adapters.cli import main

V137 = ("scheduling.k8s.io/v1beta1", "scheduling.k8s.io/v1alpha3")
V136 = ("scheduling.k8s.io/v1alpha2",)


def node(name: str) -> dict[str, Any]:
    capacity = {"cpu": "4", "memory": "16Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": capacity, "capacity": capacity}}


def member(name: str, group: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ml"},
            "spec": {"schedulerName": "cpsat-scheduler", "schedulingGroup": {"podGroupName": group},
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": "3"}}}]},
            "status": {"phase": "Pending"}}


def pod_group(api_version: str, name: str, min_count: int) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": "PodGroup", "metadata": {"name": name, "namespace": "ml"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}},
                     "disruptionMode": {"all": {}}, "priority": 1000}}


# 1.37's other kinds: a Workload whose templates sit at two levels, and a CompositePodGroup.
WORKLOAD = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload", "metadata": {"name": "job", "namespace": "ml"},
            "spec": {"podGroupTemplates": [{"name": "driver", "schedulingPolicy": {"basic": {}}}],
                     "compositePodGroupTemplates": [{"name": "workers", "schedulingPolicy": {"gang": {"minGroupCount": 2}},
                                                     "podGroupTemplates": [{"name": "rank",
                                                                            "schedulingPolicy": {"gang": {"minCount": 2}}}]}]}}
COMPOSITE = {"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
             "metadata": {"name": "workers", "namespace": "ml"},
             "spec": {"workloadRef": {"workloadName": "job", "templateName": "workers"},
                      "schedulingPolicy": {"basic": {}}}}


def objects(api_version: str, min_count: int) -> list[dict[str, Any]]:
    base = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}}, node("n1"), node("n2"), node("n3"),
            *(member(f"train-{i}", "train") for i in range(3)), pod_group(api_version, "train", min_count)]
    return base + ([WORKLOAD, COMPOSITE] if api_version.endswith("v1beta1") else [])


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Any]:
    started: list[FakeApiServer] = []

    def start(gang_apis: tuple[str, ...], items: list[dict[str, Any]]) -> tuple[FakeApiServer, str]:
        server = FakeApiServer(items, gang_apis=gang_apis, kubelet=False, disruption_controller=False).start()
        started.append(server)
        return server, server.kubeconfig_path(tmp_path)
    yield start
    for server in started:
        server.stop()


def schedule(capsys: pytest.CaptureFixture[str], kubeconfig: str, *extra: str) -> tuple[int, Any, str]:
    code = main(["schedule", "--kubeconfig", kubeconfig, "-o", "json", "--workers", "1", "--seed", "3", *extra])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 else out), err


@pytest.mark.parametrize("min_count, placed", [("3", 3), ("4", 0)], ids=["gang-fits", "gang-of-4-with-3-members"])
def test_a_v1beta1_gang_is_read_from_a_1_37_server(serve: Any, capsys: pytest.CaptureFixture[str],
                                                    min_count: str, placed: int) -> None:
    server, kubeconfig = serve(V137, objects("scheduling.k8s.io/v1beta1", int(min_count)))
    server.requests.keep()
    code, plan, err = schedule(capsys, kubeconfig)
    assert code == 0, err
    assert len(plan["assignments"]) == placed           # whole gang or none: the PodGroup was read
    paths = {r.path for r in server.requests.records}
    assert {"/apis/scheduling.k8s.io/v1beta1/podgroups", "/apis/scheduling.k8s.io/v1beta1/workloads",
            "/apis/scheduling.k8s.io/v1alpha3/compositepodgroups"} <= paths
    assert not any("v1alpha2" in p or "v1alpha1/workloads" in p for p in paths)   # newest served only


def test_a_1_36_server_is_still_read_in_v1alpha2(serve: Any, capsys: pytest.CaptureFixture[str]) -> None:
    _, kubeconfig = serve(V136, objects("scheduling.k8s.io/v1alpha2", 4))
    code, plan, err = schedule(capsys, kubeconfig)
    assert code == 0, err
    assert plan["assignments"] == [] and len(plan["unschedulable"]) == 3


def test_asking_for_a_version_the_server_does_not_serve_is_one_line_and_exit_2(
        serve: Any, capsys: pytest.CaptureFixture[str]) -> None:
    _, kubeconfig = serve(V137, objects("scheduling.k8s.io/v1beta1", 3))
    code, out, err = schedule(capsys, kubeconfig, "--gang-api", "v1alpha2")
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    assert "--gang-api" in lines[0] and "scheduling.k8s.io/v1alpha2 is not served" in lines[0]
    assert "PodGroup versions it serves: v1alpha3, v1beta1" in lines[0]


def test_asking_for_the_served_version_reads_it(serve: Any, capsys: pytest.CaptureFixture[str]) -> None:
    _, kubeconfig = serve(V136, objects("scheduling.k8s.io/v1alpha2", 4))
    code, plan, err = schedule(capsys, kubeconfig, "--gang-api", "scheduling.k8s.io/v1alpha2")
    assert code == 0, err
    assert plan["assignments"] == []


def test_an_unknown_version_is_exit_2(serve: Any, capsys: pytest.CaptureFixture[str]) -> None:
    _, kubeconfig = serve(V136, objects("scheduling.k8s.io/v1alpha2", 3))
    code, _, err = schedule(capsys, kubeconfig, "--gang-api", "v2")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "auto, v1beta1, v1alpha3, v1alpha2" in err


@pytest.mark.parametrize("kind, asked, expected", [
    ("PodGroup", None, ("v1beta1", "v1alpha3", "v1alpha2")),
    ("PodGroup", "v1alpha2", ("v1alpha2",)),
    ("Workload", "v1alpha2", ("v1alpha1",)),            # 1.35's Workload beside 1.36's PodGroup
    ("Workload", "v1beta1", ("v1beta1",)),
    ("CompositePodGroup", "v1alpha2", ()),
    ("CompositePodGroup", "v1beta1", ("v1alpha3",)),    # only ever v1alpha3, 1.37's line beside v1beta1
    ("CompositePodGroup", "v1alpha3", ("v1alpha3",)),
])
def test_candidates(kind: str, asked: str | None, expected: tuple[str, ...]) -> None:
    assert gang_api.candidates(kind, asked) == expected


def test_objects_listed_go_to_the_parser_as_they_are() -> None:
    """The parser reads 1.37's shapes itself (the templates-only Workload, CompositePodGroup)."""
    assert gang_api.as_parser_input(WORKLOAD) is WORKLOAD
    assert gang_api.as_parser_input(COMPOSITE) is COMPOSITE
    group = pod_group("scheduling.k8s.io/v1beta1", "g", 2)
    assert gang_api.as_parser_input(group) is group


@pytest.mark.parametrize("api_version, condition", [
    ("scheduling.k8s.io/v1alpha2", "PodGroupScheduled"),
    ("scheduling.k8s.io/v1beta1", "PodGroupInitiallyScheduled"),
    ("scheduling.k8s.io/v1alpha3", "PodGroupInitiallyScheduled"),
])
def test_the_scheduled_condition_is_named_as_each_version_names_it(api_version: str, condition: str) -> None:
    assert gang_api.scheduled_condition(api_version) == condition


@pytest.mark.parametrize("mode, code", [("Pod", 0), ("PodGroup", 0), ("Bogus", 2)])
def test_a_1_36_servers_string_disruption_mode_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      mode: str, code: int) -> None:
    """A real 1.36 server defaults a v1alpha2 PodGroup's spec.disruptionMode to the string "Pod"
    (its "PodGroup" is 1.37's `all`): its dumps must read; any other string is one line, exit 2."""
    items = objects("scheduling.k8s.io/v1alpha2", 3)
    items[-1]["spec"]["disruptionMode"] = mode
    path = tmp_path / "dump.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    assert main(["schedule", str(path), "-o", "json", "--workers", "1"]) == code
    err = capsys.readouterr().err.strip()
    if code:
        assert len(err.splitlines()) == 1 and "podgroups/ml/train" in err and "disruptionMode" in err, err

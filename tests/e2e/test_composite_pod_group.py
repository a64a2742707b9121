"""A CompositePodGroup (1.37, ``scheduling.k8s.io/v1alpha3``) on a real server: a Workload whose
composite template ``workers`` (gang of ``minGroupCount: 2`` child groups) holds the template
``rank`` (gang of 2 pods); two child PodGroups ``rank-0``/``rank-1`` (v1beta1, each naming the
composite as its parent) and their pods. The project's plan is read from the server (the
CompositePodGroup is listed with them; test_read_cluster.py checks READ_RULES allow it), then
1.37's kube-scheduler decides for real.

When both child groups fit, both place all four pods. When only one fits (1.5-CPU pods, one per
2-CPU node), kube-scheduler places none: the composite is all-or-nothing, and so is the project's
plan (issue 35's composite_group plugin)."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from tests.e2e.controlplane import ControlPlane
from tests.e2e.controlplane.cluster import ensure_default_service_account
from tests.e2e.harness import REPO, kube_scheduler_profile, settle, stop_process

G = "scheduling.k8s.io"
PODS = [f"rank-{g}-{i}" for g in range(2) for i in range(2)]


def _layout(plane: ControlPlane, cpu: str) -> tuple[Any, str, list[str]]:
    api = config.new_client_from_config(str(plane.admin_kubeconfig))
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    run = uuid.uuid4().hex[:6]
    ns, nodes = f"cpg-{run}", [f"cpg-{run}-n{i}" for i in range(2)]
    core.create_namespace({"metadata": {"name": ns}})
    ensure_default_service_account(core, ns)
    resources = {"cpu": "2", "memory": "16Gi", "pods": "110"}
    for name in nodes:
        core.create_node({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}})
        core.patch_node_status(name, {"status": {"capacity": resources, "allocatable": resources, "conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "e2e"}]}})
        core.patch_node(name, {"spec": {"taints": None}})
    custom.create_namespaced_custom_object(G, "v1beta1", ns, "workloads", {
        "apiVersion": f"{G}/v1beta1", "kind": "Workload", "metadata": {"name": "job"},
        "spec": {"podGroupTemplates": [], "compositePodGroupTemplates": [{
            "name": "workers", "schedulingPolicy": {"gang": {"minGroupCount": 2}},
            "podGroupTemplates": [{"name": "rank", "schedulingPolicy": {"gang": {"minCount": 2}}}]}]}})
    custom.create_namespaced_custom_object(G, "v1alpha3", ns, "compositepodgroups", {
        "apiVersion": f"{G}/v1alpha3", "kind": "CompositePodGroup", "metadata": {"name": "workers"},
        "spec": {"workloadRef": {"workloadName": "job", "templateName": "workers"},
                 "schedulingPolicy": {"gang": {"minGroupCount": 2}}}})
    for g in range(2):
        custom.create_namespaced_custom_object(G, "v1beta1", ns, "podgroups", {
            "apiVersion": f"{G}/v1beta1", "kind": "PodGroup", "metadata": {"name": f"rank-{g}"},
            "spec": {"parentCompositePodGroupName": "workers",
                     "workloadRef": {"workloadName": "job", "templateName": "rank"},
                     "schedulingPolicy": {"gang": {"minCount": 2}}}})
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": nodes}]}]}}}
    for name in PODS:
        core.create_namespaced_pod(ns, {"metadata": {"name": name}, "spec": {
            "schedulerName": ns, "affinity": affinity, "terminationGracePeriodSeconds": 0,
            "schedulingGroup": {"podGroupName": name.rsplit("-", 1)[0]},
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]}})
    return api, ns, nodes


def _placed(plane: ControlPlane, cpu: str, log_dir: Path) -> tuple[set[str], set[str]]:
    """(the project's plan's placed pods, kube-scheduler's bound pods) for pods of `cpu` each."""
    api, ns, nodes = _layout(plane, cpu)
    core = client.CoreV1Api(api)
    proc = None
    try:
        done = subprocess.run([sys.executable, "-m", "adapters", "schedule", f"--kubeconfig={plane.admin_kubeconfig}",
                               f"--scheduler-name={ns}", "-o", "json", "--no-progress", "--workers", "1"],
                              cwd=REPO, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        ours = {a["pod"].split("/", 1)[1] for a in json.loads(done.stdout)["assignments"] if a["pod"].startswith(f"{ns}/")}
        log = open(log_dir / f"{ns}.log", "wb")
        proc = kube_scheduler_profile(plane, ns, log_dir, log, verbosity=2)
        log.close()

        def state() -> tuple[tuple[str, str], ...]:
            pods = {p.metadata.name: p for p in core.list_namespaced_pod(ns).items}
            return tuple((n, pods[n].spec.node_name or ("pending" if any(
                c.type == "PodScheduled" and c.status == "False" for c in (pods[n].status.conditions or [])) else ""))
                for n in PODS)

        last, _ = settle(state, lambda now: all(where for _, where in now), quiet=4.0, limit=90.0)
        return ours, {n for n, where in last if where and where != "pending"}
    finally:
        stop_process(proc)
        for cleanup in [lambda: core.delete_collection_namespaced_pod(ns, grace_period_seconds=0),
                        *[lambda n=n: core.delete_node(n) for n in nodes]]:
            try:
                cleanup()
            except ApiException:
                pass
        api.close()


@pytest.fixture(scope="module")
def one_fits(control_plane: ControlPlane,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[set[str], set[str]]]:
    if control_plane.features.composite_api is None:
        pytest.skip("CompositePodGroup is 1.37's")
    yield _placed(control_plane, "1500m", tmp_path_factory.mktemp("cpg"))


def test_both_child_groups_fit_and_both_place_all_four(control_plane: ControlPlane, tmp_path: Path) -> None:
    if control_plane.features.composite_api is None:
        pytest.skip("CompositePodGroup is 1.37's")
    ours, kube = _placed(control_plane, "1", tmp_path)
    assert kube == set(PODS) and ours == set(PODS), (kube, ours)


def test_kube_scheduler_places_no_child_group_when_only_one_fits(one_fits: tuple[set[str], set[str]]) -> None:
    _, kube = one_fits
    assert kube == set(), kube


def test_the_plan_places_no_child_group_when_only_one_fits(one_fits: tuple[set[str], set[str]]) -> None:
    ours, _ = one_fits
    assert ours == set(), ours

"""Preemption judged by the real kube-scheduler 1.36 (issue 33): the case the issue was filed with,
loaded on a real server, decided by kube-scheduler itself and by `cpsat-scheduler schedule` read
from the same server before kube-scheduler starts. Both must evict the same pods, for the same
preemptor, and leave the same pod pending.

One node of 4 CPUs; running run-a (priority 0, 500m), run-b (100, 100m), run-c (0, 250m), run-d
(10, 100m); pending p4-web and p9-db (1000; 2 CPUs, 500m), p16-api (500, 1 CPU), p7-web (100,
500m). kube-scheduler places p4-web and p9-db as they are, preempts run-a alone for p16-api, and
leaves p7-web pending (it may not preempt run-b, of its own priority). Without a kubelet, the
victims are deleted at once (terminationGracePeriodSeconds 0).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from tests.e2e.controlplane import ControlPlane
from tests.e2e.controlplane.cluster import ensure_default_service_account
from tests.e2e.harness import REPO, kube_scheduler_profile, settle, stop_process

RUNNING = [("run-a", "500m", 0, 1), ("run-b", "100m", 100, 2), ("run-c", "250m", 0, 3), ("run-d", "100m", 10, 4)]
PENDING = [("p4-web", "2", 1000), ("p9-db", "500m", 1000), ("p16-api", "1", 500), ("p7-web", "500m", 100)]


def _pod(name: str, cpu: str, priority_class: str, *, node: str, bound: bool, scheduler: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulerName": scheduler, "priorityClassName": priority_class,
                            "terminationGracePeriodSeconds": 0,
                            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                            "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]}
    if bound:
        spec["nodeName"] = node
    else:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}  # only this test's node
    return {"metadata": {"name": name}, "spec": spec}


def test_the_issue_case_evicts_what_kube_scheduler_evicts(control_plane: ControlPlane, tmp_path: Path) -> None:
    plane = control_plane
    assert plane.built is not None
    api = config.new_client_from_config(str(plane.admin_kubeconfig))
    core, scheduling = client.CoreV1Api(api), client.SchedulingV1Api(api)
    run = uuid.uuid4().hex[:6]
    ns, node, profile = f"preempt-{run}", f"preempt-{run}-n1", f"kube-peer-{run}"
    classes = {p: f"preempt-{run}-p{p}" for p in {p for *_, p in PENDING} | {p for _, _, p, _ in RUNNING}}
    proc = None
    try:
        core.create_namespace({"metadata": {"name": ns}})
        ensure_default_service_account(core, ns)
        for value, name in classes.items():
            scheduling.create_priority_class({"metadata": {"name": name}, "value": value})
        resources = {"cpu": "4", "memory": "16Gi", "pods": "110"}
        core.create_node({"metadata": {"name": node, "labels": {"kubernetes.io/hostname": node}}})
        core.patch_node_status(node, {"status": {"capacity": resources, "allocatable": resources, "conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "e2e"}]}})
        core.patch_node(node, {"spec": {"taints": None}})
        for name, cpu, priority, second in RUNNING:
            core.create_namespaced_pod(ns, _pod(name, cpu, classes[priority], node=node, bound=True, scheduler=profile))
            started = f"2026-01-01T00:00:{second:02d}Z"
            core.patch_namespaced_pod_status(name, ns, {"status": {"phase": "Running", "startTime": started, "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": started}]}})
        for name, cpu, priority in PENDING:
            core.create_namespaced_pod(ns, _pod(name, cpu, classes[priority], node=node, bound=False, scheduler=profile))
            time.sleep(1.1)  # distinct creation times: the queue order is the list's

        # The project's plan, read from the server before kube-scheduler decides anything.
        ours = subprocess.run([sys.executable, "-m", "adapters", "schedule", f"--kubeconfig={plane.admin_kubeconfig}",
                               f"--scheduler-name={profile}", "-o", "json", "--no-progress"],
                              cwd=REPO, capture_output=True, text=True, timeout=300)
        assert ours.returncode == 0, ours.stderr
        plan = json.loads(ours.stdout)
        mine = {a["pod"] for a in plan["assignments"] if a["pod"].startswith(f"{ns}/")}
        our_victims = {(p["pod"], p["preemptor"]) for p in plan["preemptions"] if p["pod"].startswith(f"{ns}/")}

        log = open(tmp_path / "kube-scheduler.log", "wb")
        proc = kube_scheduler_profile(plane, profile, tmp_path, log, verbosity=2)
        log.close()

        pending = {name for name, *_ in PENDING}

        def snapshot() -> tuple[dict[str, str], set[str], set[str]]:
            pods = {p.metadata.name: p for p in core.list_namespaced_pod(ns).items}
            bound = {n: p.spec.node_name for n, p in pods.items() if n in pending and p.spec.node_name}
            marked = {n for n, p in pods.items() if n in pending and not p.spec.node_name and any(
                c.type == "PodScheduled" and c.status == "False" for c in (p.status.conditions or []))}
            gone = {name for name, *_ in RUNNING if name not in pods}
            return bound, marked, gone

        (bound, marked, gone), _ = settle(snapshot, lambda now: set(now[0]) | now[1] == pending, quiet=4.0, limit=120.0)
        text = (tmp_path / "kube-scheduler.log").read_text(errors="replace")
        assert set(bound) | marked == pending, (bound, marked, text[-3000:])

        # kube-scheduler's decision is the issue's: run-a alone, for p16-api; p7-web pending.
        assert set(bound) == {"p4-web", "p9-db", "p16-api"}, (bound, marked, gone)
        assert gone == {"run-a"}, (gone, text[-3000:])
        assert marked == {"p7-web"}
        # ... and the project's plan is the same decision, victims and preemptor included.
        assert mine == {f"{ns}/{n}" for n in bound}, plan
        assert our_victims == {(f"{ns}/run-a", f"{ns}/p16-api")}, plan
        assert {u["pod"] for u in plan["unschedulable"] if u["pod"].startswith(f"{ns}/")} == {f"{ns}/p7-web"}
    finally:
        stop_process(proc)
        try:
            core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
        except ApiException:
            pass
        for cleanup in (lambda: core.delete_node(node), lambda: core.delete_namespace(ns)):
            try:
                cleanup()
            except ApiException:
                pass
        for name in classes.values():
            try:
                scheduling.delete_priority_class(name)
            except ApiException:
                pass
        api.close()

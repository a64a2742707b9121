"""Dumps from a real server: the example snapshots' objects created on a real kube-apiserver
(status written as their controllers would), read back as `kubectl get -o yaml` prints them,
give the same `cpsat-scheduler schedule` plan as the example files themselves. The parser meets
what a real server emits: defaults, admission's tolerations and token volumes, managedFields,
uids and timestamps of its own.

The server's creationTimestamps are the one thing a dump holds that the example does not: they
order the queue (priority, then creation, then name), and a queue in another order may break a
tie between equally good nodes another way. So the dump as read must give a valid plan that
places, evicts and leaves out the same pods; with its timestamps taken out it must give the
example's plan exactly."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from tests.e2e.controlplane import ControlPlane
from tests.e2e.dumps import Applier, items_of
from tests.e2e.harness import REPO

EXAMPLES = REPO / "examples" / "snapshots"
# Every example the server can hold (gangs/workload-v1alpha1.yaml is a 1.35 Workload, an API
# 1.36 no longer serves; Volcano's PodGroup is a CRD of its own project). On 1.37 the examples'
# v1alpha2 PodGroups are made as v1beta1 (Applier's gang_api), so the dump read is a 1.37 one;
# test_k8s_1_36.py reads the same dumps from a 1.36 server.
CASES = ["quickstart.yaml", "gangs/podgroup-v1alpha2.yaml", "gangs/topology-rack.yaml", "gangs/scheduler-plugins.yaml"]


def plan(path: Path, out_path: Path | None = None) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "adapters", "schedule", "--output", "json", "--workers", "1",
                           "--seed", "7", str(path)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    if out_path is not None:
        out_path.write_text(done.stdout)
    out = json.loads(done.stdout)
    return {"assignments": sorted((a["pod"], a["node"]) for a in out["assignments"]),
            "preemptions": sorted(json.dumps(p, sort_keys=True) for p in out["preemptions"]),
            "unschedulable": sorted(u["pod"] for u in out["unschedulable"]),
            "nominations": sorted(json.dumps(n, sort_keys=True) for n in out["nominations"]),
            "gated": sorted(json.dumps(g, sort_keys=True) for g in out["gated"])}


def applier_on(plane: ControlPlane) -> Iterator[Applier]:
    """An Applier for `plane` (its PodGroups in the plane's version) that deletes what it made."""
    from kubernetes import config

    made = Applier(config.new_client_from_config(str(plane.admin_kubeconfig)), plane.features.gang_api)
    try:
        yield made
    finally:
        made.delete()
        made.api.close()


@pytest.fixture
def applier(control_plane: ControlPlane) -> Iterator[Applier]:
    yield from applier_on(control_plane)


@pytest.mark.parametrize("example", CASES)
def test_a_dump_from_the_real_server_gives_the_examples_plan(applier: Applier, example: str, tmp_path: Path) -> None:
    dump_gives_the_examples_plan(applier, example, tmp_path)


def dump_gives_the_examples_plan(applier: Applier, example: str, tmp_path: Path) -> None:
    """`example` applied, dumped back and scheduled: the example's plan (see the module's docstring)."""
    source = EXAMPLES / example
    applier.apply(items_of(yaml.safe_load(source.read_text())))
    dumped = applier.read_back()
    path = tmp_path / "dump.yaml"
    path.write_text(yaml.safe_dump(dumped, sort_keys=False))
    # what a real server adds is really there (else this test would prove nothing)
    groups = [i for i in dumped["items"] if i["kind"] == "PodGroup" and i["apiVersion"].startswith("scheduling.k8s.io/")]
    assert all(g["apiVersion"] == applier.gang_api for g in groups)   # a dump of this server's version
    pods = [i for i in dumped["items"] if i["kind"] == "Pod"]
    assert pods and all(p["metadata"].get("managedFields") and p["metadata"].get("uid") for p in pods)
    assert all(p["spec"].get("enableServiceLinks") is not None for p in pods)
    expected = plan(source)
    assert expected["assignments"]                 # each example places something

    as_read = plan(path, tmp_path / "plan.json")
    assert {**as_read, "assignments": sorted(pod for pod, _ in as_read["assignments"])} == \
        {**expected, "assignments": sorted(pod for pod, _ in expected["assignments"])}
    checked = subprocess.run([sys.executable, "-m", "adapters", "validate", str(path), str(tmp_path / "plan.json")],
                             cwd=REPO, capture_output=True, text=True, timeout=300)
    assert checked.returncode == 0, checked.stdout + checked.stderr

    for item in dumped["items"]:
        item["metadata"].pop("creationTimestamp", None)
    untimed = tmp_path / "untimed.yaml"
    untimed.write_text(yaml.safe_dump(dumped, sort_keys=False))
    assert plan(untimed) == expected

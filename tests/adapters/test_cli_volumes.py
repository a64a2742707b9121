"""Issue 23, item 2: volumes, through the CLI as a user runs it.

Each case is a small cluster whose right answer is known: ``schedule`` (both engines) must
decide as kube-scheduler's VolumeBinding, VolumeRestrictions, VolumeZone and NodeVolumeLimits
do, and ``validate`` must reject the plan the scheduler used to make (the pod placed anyway),
naming the rule.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

import pytest
import yaml

from adapters.cli import main

ZONE = "topology.kubernetes.io/zone"


def node(name: str, zone: str, cpu: str = "4") -> dict:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, ZONE: zone,
                                                  "topology.kubernetes.io/region": "eu-1"}},
            "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"}}}


def pod(name: str, claims: list[str], node_name: Optional[str] = None, cpu: str = "100m") -> dict:
    spec: dict[str, Any] = {
        "schedulerName": "cpsat-scheduler",
        "containers": [{"name": "c", "image": "postgres:16", "resources": {"requests": {"cpu": cpu}}}],
        "volumes": [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)],
    }
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "db"}, "spec": spec,
            "status": {"phase": "Running" if node_name else "Pending"}}


def pvc(name: str, storage_class: str = "ebs", volume: str = "", modes: tuple = ("ReadWriteOnce",)) -> dict:
    spec: dict[str, Any] = {"accessModes": list(modes), "resources": {"requests": {"storage": "20Gi"}},
                            "storageClassName": storage_class}
    if volume:
        spec["volumeName"] = volume
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": "db"},
            "spec": spec, "status": {"phase": "Bound" if volume else "Pending"}}


def pv(name: str, claim: str, zone: Optional[str] = None, modes: tuple = ("ReadWriteOnce",)) -> dict:
    spec: dict[str, Any] = {"capacity": {"storage": "20Gi"}, "accessModes": list(modes), "storageClassName": "ebs",
                            "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": f"vol-{name}"},
                            "claimRef": {"namespace": "db", "name": claim}}
    if zone:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}]}}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name}, "spec": spec,
            "status": {"phase": "Bound"}}


def storage_class(name: str = "ebs", zones: tuple = ()) -> dict:
    body: dict[str, Any] = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
                            "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer"}
    if zones:
        body["allowedTopologies"] = [{"matchLabelExpressions": [{"key": ZONE, "values": list(zones)}]}]
    return body


def csinode(name: str, count: int) -> dict:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": name},
            "spec": {"drivers": [{"name": "ebs.csi.aws.com", "nodeID": name, "allocatable": {"count": count}}]}}


# Each case: the cluster, the pod that matters, where today's code put it (the wrong plan), and
# what the scheduler and the validator must say.
CASES = {
    "bound-volume-in-another-zone": dict(
        items=[node("n-b", "eu-1b"), storage_class(), pvc("data", volume="pv-c"), pv("pv-c", "data", zone="eu-1c"),
               pod("pg", ["data"])],
        pod="db/pg", wrong="n-b", placed=None,
        message="0/1 nodes are available: 1 node(s) didn't match PersistentVolume's node affinity.",
        rule="VolumeBinding: db/pg on node n-b: the node affinity of volume pv-c (claim db/data) does not admit "
             "the node (node(s) didn't match PersistentVolume's node affinity)"),
    "wait-for-first-consumer-class-allows-zone-c-only": dict(
        items=[node("n-a", "eu-1a", cpu="16"), node("n-c", "eu-1c"), storage_class(zones=("eu-1c",)), pvc("data"),
               pod("pg", ["data"])],
        pod="db/pg", wrong="n-a", placed="n-c", message=None,
        rule="VolumeBinding: db/pg on node n-a: claim db/data finds no volume left that matches it and admits the "
             "node, and its class cannot provision there (node(s) didn't find available persistent volumes to bind)"),
    "second-pod-on-a-read-write-once-pod-claim": dict(
        items=[node("n1", "eu-1a"), node("n2", "eu-1a"), storage_class(),
               pvc("solo", volume="pv-solo", modes=("ReadWriteOncePod",)),
               pv("pv-solo", "solo", modes=("ReadWriteOncePod",)), pod("first", ["solo"], node_name="n1"),
               pod("second", ["solo"])],
        pod="db/second", wrong="n2", placed=None,
        message="0/2 nodes are available: 2 node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod "
                "access mode already in-use by another pod.",
        rule="VolumeRestrictions: claim db/solo has access mode ReadWriteOncePod but 2 pods use it: db/first on n1, "
             "db/second on n2"),
    "claim-does-not-exist": dict(
        items=[node("n1", "eu-1a"), pod("orphan", ["nope"])],
        pod="db/orphan", wrong="n1", placed=None,
        message='0/1 nodes are available: persistentvolumeclaim "nope" not found.',
        rule='VolumeBinding: db/orphan on node n1: persistentvolumeclaim "nope" not found'),
    "two-volumes-on-a-node-whose-csinode-allows-one": dict(
        items=[node("n1", "eu-1a"), csinode("n1", 1), storage_class(), pvc("a", volume="pv-a"), pvc("b", volume="pv-b"),
               pv("pv-a", "a"), pv("pv-b", "b"), pod("pa", ["a"]), pod("pb", ["b"])],
        pod="db/pb", wrong="n1", placed=None,
        message="0/1 nodes are available: 1 node(s) exceed max volume count.",
        rule="NodeVolumeLimits: node n1 attaches 2 volumes of driver ebs.csi.aws.com (db/a, db/b), its CSINode allows 1"),
}


def write_snapshot(tmp_path: Path, items: list[dict]) -> str:
    path = tmp_path / "snapshot.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}, sort_keys=False))
    return str(path)


def schedule(capsys: pytest.CaptureFixture[str], path: str, engine: str) -> dict:
    code = main(["schedule", path, "--engine", engine, "-o", "json"])
    out = capsys.readouterr().out
    assert code == 0
    return json.loads(out)


@pytest.mark.parametrize("engine", ["cpsat", "greedy"])
@pytest.mark.parametrize("name", list(CASES))
def test_schedule_decides_as_kube_scheduler(name: str, engine: str, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    case = CASES[name]
    plan = schedule(capsys, write_snapshot(tmp_path, case["items"]), engine)
    where = {a["pod"]: a["node"] for a in plan["assignments"]}
    target = case["pod"]
    if "CSINode" in case["rule"]:
        # Two pods of one priority, room for one volume: either may get it (greedy: the first
        # in queue order), never both.
        assert len(where) == 1 and set(where.values()) == {"n1"}
        target = next(u["pod"] for u in plan["unschedulable"])
    assert where.get(target) == case["placed"]
    if case["placed"] is None:
        message = next(u["message"] for u in plan["unschedulable"] if u["pod"] == target)
        if engine == "greedy":  # greedy also ran PostFilter, whose message follows
            assert message.startswith(case["message"] + " preemption: ")
        elif "CSINode" in case["rule"]:  # the solver's note follows: the pod lost to another
            assert message.startswith(case["message"])
        else:
            assert message == case["message"]


def _dump(tmp_path: Path, plan: dict) -> Path:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    return path


@pytest.mark.parametrize("name", list(CASES))
def test_every_printed_plan_is_valid(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    case = CASES[name]
    snap = write_snapshot(tmp_path, case["items"])
    for engine in ("cpsat", "greedy"):
        plan_path = _dump(tmp_path, schedule(capsys, snap, engine))
        assert main(["validate", snap, str(plan_path)]) == 0, capsys.readouterr()
        capsys.readouterr()


@pytest.mark.parametrize("name", list(CASES))
def test_validate_rejects_the_plan_that_ignored_the_volume(name: str, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    case = CASES[name]
    snap = write_snapshot(tmp_path, case["items"])
    pending = [f"db/{i['metadata']['name']}" for i in case["items"] if i["kind"] == "Pod" and not i["spec"].get("nodeName")]
    plan = {"assignments": [{"pod": p, "node": case["wrong"]} for p in pending],
            "stats": {"engine": "hand", "status": "HAND"}}
    code = main(["validate", snap, str(_dump(tmp_path, plan))])
    out = capsys.readouterr()
    assert code == 1
    assert case["rule"] in out.out + out.err


def test_wait_for_first_consumer_plan_names_the_binding(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The plan says how the delayed claim gets its volume: provisioned for the node chosen, in
    JSON (``volume_bindings``) and in the table."""
    snap = write_snapshot(tmp_path, CASES["wait-for-first-consumer-class-allows-zone-c-only"]["items"])
    plan = schedule(capsys, snap, "cpsat")
    assert plan["volume_bindings"] == [{"claim": "db/data", "pod": "db/pg", "node": "n-c", "volume": None,
                                        "provisioned": True}]
    assert main(["schedule", snap]) == 0
    table = capsys.readouterr().out
    assert "VOLUMES: 1 claim bound for the first time" in table
    assert "db/data  (provisioned)  db/pg" in table


def test_a_volume_given_to_two_claims_is_rejected(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    local = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "local"},
             "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer"}
    disk = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "disk-1"},
            "spec": {"capacity": {"storage": "50Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "local"}}
    items = [node("n1", "eu-1a"), node("n2", "eu-1a"), local, disk, pvc("a", storage_class="local"),
             pvc("b", storage_class="local"), pod("pa", ["a"]), pod("pb", ["b"])]
    snap = write_snapshot(tmp_path, items)
    plan = schedule(capsys, snap, "cpsat")
    assert len(plan["assignments"]) == 1 and plan["volume_bindings"][0]["volume"] == "disk-1"
    wrong = {"assignments": [{"pod": "db/pa", "node": "n1"}, {"pod": "db/pb", "node": "n2"}],
             "volume_bindings": [{"claim": "db/a", "pod": "db/pa", "node": "n1", "volume": "disk-1"},
                                 {"claim": "db/b", "pod": "db/pb", "node": "n2", "volume": "disk-1"}],
             "stats": {"engine": "hand", "status": "HAND"}}
    assert main(["validate", snap, str(_dump(tmp_path, wrong))]) == 1
    assert "VolumeBinding: volume disk-1 is given to two claims, db/a and db/b" in capsys.readouterr().out


def test_the_console_script_prints_the_reason(tmp_path: Path) -> None:
    """What a user runs: the installed command, its exit status and its output."""
    snap = write_snapshot(tmp_path, CASES["claim-does-not-exist"]["items"])
    script = Path(sys.executable).with_name("cpsat-scheduler")
    done = subprocess.run([str(script), "schedule", snap], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert 'persistentvolumeclaim "nope" not found' in done.stdout
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "item, field",
    [
        (pvc("bad") | {"spec": {"accessModes": ["ReadWriteSometimes"]}}, "spec.accessModes"),
        (pvc("bad") | {"spec": {"resources": {"requests": {"storage": "lots"}}}}, "spec.resources.requests.storage"),
        (storage_class() | {"volumeBindingMode": "Lazy"}, "volumeBindingMode"),
        ({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": "n1"},
          "spec": {"drivers": [{"name": "d", "allocatable": {"count": -1}}]}}, "spec.drivers[0].allocatable.count"),
        (pod("p", []) | {"spec": {"containers": [{"name": "c"}], "volumes": [{"name": "v", "persistentVolumeClaim": {}}]}},
         "volumes[0].persistentVolumeClaim.claimName"),
    ],
    ids=["access-mode", "storage-size", "binding-mode", "csi-count", "claim-name"],
)
def test_bad_volume_objects_exit_2_naming_object_and_field(item: dict, field: str, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    snap = write_snapshot(tmp_path, [node("n1", "eu-1a"), item])
    assert main(["schedule", snap]) == 2
    err = capsys.readouterr().err
    assert field in err and item["metadata"]["name"] in err, err


def test_the_example_snapshot(capsys: pytest.CaptureFixture[str]) -> None:
    """examples/snapshots/volumes.yaml, as its header describes it, with either engine."""
    path = str(Path(__file__).parents[2] / "examples" / "snapshots" / "volumes.yaml")
    for engine in ("cpsat", "greedy"):
        plan = schedule(capsys, path, engine)
        assert {a["pod"]: a["node"] for a in plan["assignments"]} == {
            "db/pg-0": "worker-c", "db/cache-0": "worker-b", "etl/ingest-0": "worker-b", "etl/transform-0": "worker-a"}
        assert {(b["claim"], b["volume"]) for b in plan["volume_bindings"]} == {
            ("db/cache-0", None), ("etl/spool", "local-nvme-b"), ("etl/transform-0-scratch", None)}
        reasons = {u["pod"]: u["message"] for u in plan["unschedulable"]}
        assert reasons["web/uploads-0"].startswith('0/3 nodes are available: persistentvolumeclaim "uploads" not found.')
        assert reasons["web/legacy-0"].startswith("0/3 nodes are available: pod has unbound immediate "
                                                  "PersistentVolumeClaims.")
        assert reasons["reports/exporter-1"].startswith(
            "0/3 nodes are available: 3 node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod "
            "access mode already in-use by another pod.")


def test_run_simulate_watches_the_volume_kinds(capsys: pytest.CaptureFixture[str],
                                               caplog: pytest.LogCaptureFixture) -> None:
    """The live scheduler against the in-memory API server: the server stores claims, volumes,
    classes and CSINodes (it used to say "not loading v1/PersistentVolume"), the watch reads
    them, and the pods are decided as ``schedule`` decides them."""
    path = str(Path(__file__).parents[2] / "examples" / "snapshots" / "volumes.yaml")
    status = main(["run", "--simulate", path, "--arrival-rate", "100", "--engine", "cpsat", "--time-limit", "2",
                   "--no-leader-elect"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "not loading" not in caplog.text
    for pod, node in (("db/pg-0", "worker-c"), ("etl/ingest-0", "worker-b"), ("etl/transform-0", "worker-a")):
        assert f"bound         {pod} -> {node}" in out
    assert ('unschedulable web/uploads-0: 0/3 nodes are available: persistentvolumeclaim "uploads" not found.'
            in out)
    assert "left 3 unschedulable" in out
    assert "final state replayed through the validator: no violations" in out

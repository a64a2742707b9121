"""The live scheduler and volumes, against the in-memory API server: it watches claims, volumes,
classes and CSINodes, decides with the volume filters, and writes what kube-scheduler's
VolumeBinding PreBind writes before binding a pod: the chosen volume's claimRef, or the claim's
``volume.kubernetes.io/selected-node`` for its provisioner."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from tests.adapters.live_harness import NS, Cluster, cluster_factory, fast_options, node, pod, wait_for

SELECTED_NODE = "volume.kubernetes.io/selected-node"


def claim(name: str, storage_class: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": NS},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": storage_class,
                     "resources": {"requests": {"storage": "1Gi"}}}}


def storage_class(name: str, provisioner: str, zones: tuple = ()) -> dict[str, Any]:
    body: dict[str, Any] = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
                            "provisioner": provisioner, "volumeBindingMode": "WaitForFirstConsumer"}
    if zones:
        body["allowedTopologies"] = [{"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone",
                                                                  "values": list(zones)}]}]
    return body


def local_disk(name: str, host: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "local",
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                         {"key": "kubernetes.io/hostname", "operator": "In", "values": [host]}]}]}}}}


def mounting(name: str, *claims: str) -> dict[str, Any]:
    obj = pod(name, cpu="100m")
    obj["spec"]["volumes"] = [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims]
    return obj


@pytest.fixture
def cluster() -> Iterator[Any]:
    yield from cluster_factory([
        node("n-a", zone="a"), node("n-b", zone="b"),
        storage_class("zonal", "disk.csi.example.com", zones=("b",)),
        storage_class("local", "kubernetes.io/no-provisioner"),
        local_disk("disk-a", "n-a"),
        claim("scratch", "zonal"), claim("spool", "local"), claim("spool-2", "local"),
    ])


def test_prebind_writes_the_volume_choices_before_binding(cluster) -> None:
    c: Cluster = cluster()
    c.scheduler(options=fast_options())
    c.create(mounting("zonal-user", "scratch"), mounting("local-user", "spool"))
    assert wait_for(lambda: c.node_of("zonal-user") and c.node_of("local-user"), timeout=20)
    # the class provisions in zone b only; the local disk is on n-a
    assert c.node_of("zonal-user") == "n-b" and c.node_of("local-user") == "n-a"
    scratch = c.server.store.get("persistentvolumeclaims", NS, "scratch")
    assert scratch["metadata"]["annotations"][SELECTED_NODE] == "n-b"
    disk = c.server.store.get("persistentvolumes", "", "disk-a")
    ref = disk["spec"]["claimRef"]
    assert (ref["namespace"], ref["name"]) == (NS, "spool")
    assert disk["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"] == "yes"
    assert c.violations() == []


def test_a_volume_taken_in_one_window_is_not_given_again_in_the_next(cluster) -> None:
    """Two claims wait for the one local disk, created one after the other: the first pod's
    claimRef write keeps the disk from the second, which stays pending with kube-scheduler's
    reason (without the write, the next window would see the disk available again)."""
    c: Cluster = cluster()
    c.scheduler(options=fast_options())
    c.create(mounting("first", "spool"))
    assert wait_for(lambda: c.node_of("first"), timeout=20)
    c.create(mounting("second", "spool-2"))
    assert wait_for(lambda: any(e["involvedObject"]["name"] == "second" for e in c.events("FailedScheduling")),
                    timeout=20)
    assert c.node_of("second") is None
    message = next(e["message"] for e in c.events("FailedScheduling") if e["involvedObject"]["name"] == "second")
    assert "node(s) didn't find available persistent volumes to bind" in message

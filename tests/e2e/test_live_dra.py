"""Dynamic Resource Allocation end to end: the live scheduler (`cpsat-scheduler run`, its own
process, with the RBAC of examples/deploy/rbac.yaml) against a real Kubernetes 1.36
kube-apiserver serving resource.k8s.io/v1. The test plays the parts nobody runs here: a DRA
driver publishing its ResourceSlices, and kube-controller-manager's resourceclaim controller
making a claim from its template. The allocation and reservedFor the scheduler writes are
read back from the real server, which validated them."""

from __future__ import annotations

import re
from typing import Any, Iterator

import pytest
from kubernetes.client.exceptions import ApiException

from tests.e2e.harness import Cluster, wait_for

GROUP, VERSION = "resource.k8s.io", "v1"


def _no_denials(text: str) -> None:
    assert not re.search(r"\b403\b|[Ff]orbidden", text), "the scheduler was refused a call:\n" + "\n".join(
        line for line in text.splitlines() if re.search(r"403|[Ff]orbidden", line))[:3000]


class Dra:
    """The test's DRA objects (cluster-scoped ones named with the test's prefix), deleted at the end."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.custom = cluster.custom
        self.driver = f"gpu.{cluster.prefix}.example.com"
        self.device_class = f"{cluster.prefix}-gpu"
        self.slices: list[str] = []

    def publish(self, node: str, gpus: int) -> None:
        """What a DRA driver's kubelet plugin publishes for its node: one pool, one slice."""
        name = f"{node}-gpus"
        self.custom.create_cluster_custom_object(GROUP, VERSION, "resourceslices", {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceSlice", "metadata": {"name": name},
            "spec": {"driver": self.driver, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{i}", "attributes": {"model": {"string": "a100"}},
                                  "capacity": {"memory": {"value": "80Gi"}}} for i in range(gpus)]}})
        self.slices.append(name)

    def make_class(self) -> None:
        self.custom.create_cluster_custom_object(GROUP, VERSION, "deviceclasses", {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "DeviceClass", "metadata": {"name": self.device_class},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{self.driver}"'}}]}})

    def claim_spec(self, count: int = 1) -> dict[str, Any]:
        return {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": self.device_class, "allocationMode": "ExactCount", "count": count}}]}}

    def claim(self, name: str, *, count: int = 1, metadata: Any = None) -> None:
        self.custom.create_namespaced_custom_object(GROUP, VERSION, self.cluster.ns, "resourceclaims", {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceClaim",
            "metadata": {"name": name, **(metadata or {})}, "spec": self.claim_spec(count)})

    def template(self, name: str) -> None:
        self.custom.create_namespaced_custom_object(GROUP, VERSION, self.cluster.ns, "resourceclaimtemplates", {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceClaimTemplate", "metadata": {"name": name},
            "spec": {"spec": self.claim_spec()}})

    def read(self, name: str) -> dict[str, Any]:
        return self.custom.get_namespaced_custom_object(GROUP, VERSION, self.cluster.ns, "resourceclaims", name)

    def pod(self, name: str, entries: list[dict[str, str]]) -> None:
        core = self.cluster.core
        core.create_namespaced_pod(self.cluster.ns, {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"schedulerName": "cpsat-scheduler", "resourceClaims": entries,
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": {"cpu": "100m", "memory": "64Mi"},
                                                   "claims": [{"name": e["name"]} for e in entries]}}]}})

    def close(self) -> None:
        for name in [n for n in self._claims()]:
            try:  # the resourceclaim controller would deallocate and lift the finalizer; nobody runs it here
                self.custom.patch_namespaced_custom_object(GROUP, VERSION, self.cluster.ns, "resourceclaims", name,
                                                           {"metadata": {"finalizers": None}})
                # gone too: a later test's scheduler watches every namespace, and a claim allocated
                # on devices whose slice is deleted would be in its snapshots
                self.custom.delete_namespaced_custom_object(GROUP, VERSION, self.cluster.ns, "resourceclaims", name)
            except ApiException:
                pass
        for name in self.slices:
            try:
                self.custom.delete_cluster_custom_object(GROUP, VERSION, "resourceslices", name)
            except ApiException:
                pass
        try:
            self.custom.delete_cluster_custom_object(GROUP, VERSION, "deviceclasses", self.device_class)
        except ApiException:
            pass

    def _claims(self) -> list[str]:
        found = self.custom.list_namespaced_custom_object(GROUP, VERSION, self.cluster.ns, "resourceclaims")
        return [c["metadata"]["name"] for c in found.get("items") or []]


@pytest.fixture
def dra(cluster: Cluster) -> Iterator[Dra]:
    """The test's DRA objects, deleted at its end once the schedulers it started have stopped
    (they watch the claims being deleted)."""
    made = Dra(cluster)
    yield made
    for sched in cluster.schedulers:
        sched.stop()
    made.close()


def _devices(claim: dict[str, Any]) -> list[tuple[str, str, str]]:
    results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
    return sorted((r["driver"], r["pool"], r["device"]) for r in results)


def test_claims_are_allocated_reserved_and_read_back_from_the_real_server(cluster: Cluster, dra: Dra) -> None:
    plain = cluster.node("cpu-only")
    gpu_node = cluster.node("gpus")
    dra.make_class()
    dra.publish(gpu_node, 2)
    sched = cluster.scheduler()

    # a claim by name: allocated on the only node whose slice has a matching device
    dra.claim("train-gpu")
    dra.pod("train", [{"name": "gpu", "resourceClaimName": "train-gpu"}])
    assert wait_for(lambda: cluster.node_of("train"), timeout=60) == gpu_node, sched.text()[-3000:]
    claim = dra.read("train-gpu")
    [taken] = _devices(claim)
    assert taken[:2] == (dra.driver, gpu_node) and taken[2] in ("gpu-0", "gpu-1")
    allocation = claim["status"]["allocation"]
    assert allocation["devices"]["results"][0]["request"] == "gpu"
    terms = allocation["nodeSelector"]["nodeSelectorTerms"]
    assert terms[0]["matchFields"][0] == {"key": "metadata.name", "operator": "In", "values": [gpu_node]}
    train_uid = cluster.core.read_namespaced_pod("train", cluster.ns).metadata.uid
    assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "train", "uid": train_uid}]
    assert "resource.kubernetes.io/delete-protection" in claim["metadata"]["finalizers"]

    # a claim from a template: the scheduler waits for the controller's claim and makes none
    dra.template("one-gpu")
    dra.pod("tuned", [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}])
    assert wait_for(lambda: any(e.involved_object.name == "tuned" and "ResourceClaim not created yet" in e.message
                                for e in cluster.events("FailedScheduling")), timeout=60), sched.text()[-3000:]
    assert cluster.node_of("tuned") is None and dra._claims() == ["train-gpu"]
    # ... the resourceclaim controller's part: the claim, owned by the pod, and the pod's status
    pod = cluster.core.read_namespaced_pod("tuned", cluster.ns)
    made = "tuned-gpu-x7k2q"
    dra.claim(made, metadata={
        "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "tuned", "uid": pod.metadata.uid,
                             "controller": True, "blockOwnerDeletion": True}]})
    cluster.core.patch_namespaced_pod_status("tuned", cluster.ns, {"status": {
        "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": made}]}})
    assert wait_for(lambda: cluster.node_of("tuned"), timeout=60) == gpu_node, sched.text()[-3000:]
    tuned = dra.read(made)
    assert [r["name"] for r in tuned["status"]["reservedFor"]] == ["tuned"]
    # two claims, two different devices of the node's two
    assert sorted(_devices(tuned) + _devices(dra.read("train-gpu"))) == [
        (dra.driver, gpu_node, "gpu-0"), (dra.driver, gpu_node, "gpu-1")]

    # no device left: a third claim's pod waits, and nothing is written for it
    dra.claim("late-gpu")
    dra.pod("late", [{"name": "gpu", "resourceClaimName": "late-gpu"}])
    assert wait_for(lambda: any(e.involved_object.name == "late" for e in cluster.events("FailedScheduling")),
                    timeout=60), sched.text()[-3000:]
    assert cluster.node_of("late") is None
    assert not (dra.read("late-gpu").get("status") or {}).get("allocation")
    assert plain not in cluster.bound().values()

    # the driver of the other node publishes two GPUs: the waiting pod is placed there, and a
    # claim two pods share is allocated once (the last device) and reserved for both
    dra.publish(plain, 2)
    assert wait_for(lambda: cluster.node_of("late"), timeout=60) == plain, sched.text()[-3000:]
    assert [d[1] for d in _devices(dra.read("late-gpu"))] == [plain]
    dra.claim("shared-gpu")
    dra.pod("reader-0", [{"name": "gpu", "resourceClaimName": "shared-gpu"}])
    dra.pod("reader-1", [{"name": "gpu", "resourceClaimName": "shared-gpu"}])
    assert wait_for(lambda: cluster.node_of("reader-0") and cluster.node_of("reader-1"), timeout=60), \
        sched.text()[-3000:]
    assert cluster.node_of("reader-0") == cluster.node_of("reader-1") == plain
    shared = dra.read("shared-gpu")
    assert len(_devices(shared)) == 1 and _devices(shared) != _devices(dra.read("late-gpu"))
    assert sorted(r["name"] for r in shared["status"]["reservedFor"]) == ["reader-0", "reader-1"]
    _no_denials(sched.text())


def test_a_released_claim_is_deallocated_on_the_real_server(cluster: Cluster, dra: Dra) -> None:
    """What a failed bind undoes, as the scheduler's identity (its RBAC) on the real server:
    the claim written for a pod, then released — reservedFor emptied, the allocation and the
    finalizer gone — every step accepted by kube-apiserver's validation."""
    from adapters.live.dra_writes import FINALIZER, ClaimUse, ClaimWriter
    from adapters.live.api_client import KubeApi, load_api_client

    gpu_node = cluster.node("gpus")
    api = KubeApi(load_api_client(str(cluster.plane.scheduler_kubeconfig)))
    try:
        dra.make_class()
        dra.publish(gpu_node, 1)
        dra.claim("undone")
        writer = ClaimWriter(api, backoffs=(0.2, 0.5), sleep=lambda s: None, should_continue=lambda: True)
        allocation = {"devices": {"results": [{"request": "gpu", "driver": dra.driver, "pool": gpu_node,
                                               "device": "gpu-0"}]},
                      "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                          {"key": "metadata.name", "operator": "In", "values": [gpu_node]}]}]}}
        pod_uid = "0b5c6a4e-2f55-4c55-9d0a-7d1f3e9a1c11"
        writer.reserve(f"{cluster.ns}/consumer", pod_uid, [ClaimUse(f"{cluster.ns}/undone", "", allocation)])
        written = dra.read("undone")
        assert _devices(written) == [(dra.driver, gpu_node, "gpu-0")]
        assert written["status"]["reservedFor"] == [{"resource": "pods", "name": "consumer", "uid": pod_uid}]
        assert FINALIZER in written["metadata"]["finalizers"]
        writer.release(f"{cluster.ns}/consumer")
        released = dra.read("undone")
        assert not (released.get("status") or {}).get("allocation")
        assert not (released.get("status") or {}).get("reservedFor")
        assert FINALIZER not in (released["metadata"].get("finalizers") or [])
    finally:
        api.close()


def test_an_extended_resource_backed_by_dra_gets_the_claim_kube_scheduler_makes(cluster: Cluster, dra: Dra) -> None:
    """A pod asking for an extended resource that a DeviceClass names (no resourceClaims of its
    own): the scheduler creates the claim kube-scheduler 1.36 makes, writes its allocation and
    reservedFor, patches the pod's status.extendedResourceClaimStatus, then binds — each write
    accepted by the real server under the deploy RBAC and read back from it."""
    gpu_node = cluster.node("gpus")
    resource = f"{cluster.prefix}.example.com/gpu"
    dra.make_class()
    cluster.custom.patch_cluster_custom_object(GROUP, VERSION, "deviceclasses", dra.device_class,
                                               {"spec": {"extendedResourceName": resource}})
    dra.publish(gpu_node, 1)
    sched = cluster.scheduler()
    for name in ("ext-0", "ext-1"):
        cluster.core.create_namespaced_pod(cluster.ns, {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"schedulerName": "cpsat-scheduler",
                     "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": {"cpu": "100m", resource: "1"},
                                                   "limits": {resource: "1"}}}]}})
    assert wait_for(lambda: cluster.node_of("ext-0") or cluster.node_of("ext-1"), timeout=60), sched.text()[-3000:]
    placed = "ext-0" if cluster.node_of("ext-0") else "ext-1"
    other = "ext-1" if placed == "ext-0" else "ext-0"
    assert cluster.node_of(placed) == gpu_node
    pod = cluster.core.api_client.sanitize_for_serialization(cluster.core.read_namespaced_pod(placed, cluster.ns))
    status = pod["status"]["extendedResourceClaimStatus"]
    claim = dra.read(status["resourceClaimName"])
    meta = claim["metadata"]
    assert meta["name"].startswith(f"{placed}-extended-resources-")
    assert meta["annotations"]["resource.kubernetes.io/extended-resource-claim"] == "true"
    assert [(r["kind"], r["name"], r["uid"], r["controller"]) for r in meta["ownerReferences"]] == [
        ("Pod", placed, pod["metadata"]["uid"], True)]
    assert claim["spec"]["devices"]["requests"][0]["name"] == "container-0-request-1"  # cpu, then the GPU
    assert _devices(claim) == [(dra.driver, gpu_node, "gpu-0")]
    assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": placed, "uid": pod["metadata"]["uid"]}]
    assert status["requestMappings"] == [{"containerName": "main", "resourceName": resource,
                                          "requestName": "container-0-request-1"}]
    # one device only: the other pod waits, and no claim is made for it
    assert wait_for(lambda: any(e.involved_object.name == other for e in cluster.events("FailedScheduling")),
                    timeout=60), sched.text()[-3000:]
    assert cluster.node_of(other) is None and len(dra._claims()) == 1
    _no_denials(sched.text())


def test_a_made_claim_is_deleted_on_the_real_server_when_the_pod_is_not_bound(cluster: Cluster, dra: Dra) -> None:
    """Unreserve of the claim the scheduler made, as the scheduler's identity: created, written,
    the pod's status patched, then deleted again (finalizer lifted first) — nothing left."""
    from adapters.live.dra_writes import ClaimUse, ClaimWriter, extended_claim
    from adapters.live.api_client import KubeApi, load_api_client

    gpu_node = cluster.node("gpus")
    api = KubeApi(load_api_client(str(cluster.plane.scheduler_kubeconfig)))
    try:
        dra.make_class()
        dra.publish(gpu_node, 1)
        implicit = f"deviceclass.resource.kubernetes.io/{dra.device_class}"
        cluster.core.create_namespaced_pod(cluster.ns, {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "unlucky"},
            "spec": {"schedulerName": "nobody", "containers": [{
                "name": "c", "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {implicit: "1"}, "limits": {implicit: "1"}}}]}})
        uid = cluster.core.read_namespaced_pod("unlucky", cluster.ns).metadata.uid
        spec = {"devices": {"requests": [{"name": "container-0-request-0", "exactly": {
            "deviceClassName": dra.device_class, "allocationMode": "ExactCount", "count": 1}}]}}
        allocation = {"devices": {"results": [{"request": "container-0-request-0", "driver": dra.driver,
                                               "pool": gpu_node, "device": "gpu-0"}]},
                      "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                          {"key": "metadata.name", "operator": "In", "values": [gpu_node]}]}]}}
        use = ClaimUse(f"{cluster.ns}/unlucky-extended-resources-", "", allocation,
                       create=extended_claim(cluster.ns, "unlucky", uid, spec),
                       mappings=({"containerName": "c", "resourceName": implicit,
                                  "requestName": "container-0-request-0"},))
        writer = ClaimWriter(api, backoffs=(0.2, 0.5), sleep=lambda s: None, should_continue=lambda: True)
        writer.reserve(f"{cluster.ns}/unlucky", uid, [use])
        (name,) = dra._claims()
        assert _devices(dra.read(name)) == [(dra.driver, gpu_node, "gpu-0")]
        pod = cluster.core.api_client.sanitize_for_serialization(cluster.core.read_namespaced_pod("unlucky", cluster.ns))
        assert pod["status"]["extendedResourceClaimStatus"]["resourceClaimName"] == name
        writer.release(f"{cluster.ns}/unlucky")
        assert dra._claims() == []
    finally:
        api.close()


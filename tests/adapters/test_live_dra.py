"""The live scheduler and Dynamic Resource Allocation, against the in-memory API server: it
watches DeviceClasses, ResourceSlices and ResourceClaims, allocates a pod's claims with its node,
and writes what kube-scheduler's DynamicResources PreBind writes before the binding (the claim's
finalizer, ``status.allocation`` and the pod in ``status.reservedFor``); a failed bind releases
what it wrote."""

from __future__ import annotations

import json
from typing import Any, Iterator, Optional

import pytest

from adapters.apiserver.api import Request
from adapters.live.dra_writes import FINALIZER
from tests.adapters.live_harness import NS, Cluster, cluster_factory, fast_options, node, pod, wait_for

DRIVER = "gpu.example.com"


def device_class(name: str = "gpu") -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}


def gpu_slice(node_name: str, gpus: int) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node_name}-gpus"},
            "spec": {"driver": DRIVER, "nodeName": node_name,
                     "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{i}", "attributes": {"model": {"string": "a100"}}}
                                 for i in range(gpus)]}}


def gpu_claim(name: str, count: int = 1) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name, "namespace": NS},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu",
                                                                            "allocationMode": "ExactCount",
                                                                            "count": count}}]}}}


def claiming(name: str, *claims: str, template: Optional[str] = None, cpu: str = "100m") -> dict[str, Any]:
    obj = pod(name, cpu=cpu)
    entries: list[dict[str, str]] = [{"name": c, "resourceClaimName": c} for c in claims]
    if template:
        entries.append({"name": "gpu", "resourceClaimTemplateName": template})
    obj["spec"]["resourceClaims"] = entries
    obj["spec"]["containers"][0]["resources"]["claims"] = [{"name": e["name"]} for e in entries]
    return obj


EXTENDED = "example.com/gpu"


def extended_pod(name: str, count: int = 1, resource: str = "deviceclass.resource.kubernetes.io/gpu",
                 cpu: str = "10m") -> dict[str, Any]:
    """A pod asking for an extended resource in its container's resources (no resourceClaims):
    the implicit name of DeviceClass `gpu` unless told otherwise."""
    obj = pod(name, cpu=cpu)
    resources = obj["spec"]["containers"][0]["resources"]
    resources["requests"][resource] = str(count)
    resources["limits"] = {resource: str(count)}
    return obj


def post(cluster: Cluster, path: str, obj: dict[str, Any]) -> Any:
    return cluster.server.api.handle(Request("POST", path, body=json.dumps(obj).encode()))


def add_claim(cluster: Cluster, obj: dict[str, Any]) -> None:
    assert post(cluster, f"/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaims", obj).code == 201


def stored_claim(cluster: Cluster, name: str) -> dict[str, Any]:
    return cluster.server.store.get("resourceclaims", NS, name) or {}


def devices(claim: dict[str, Any]) -> list[tuple[str, str, str]]:
    results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
    return sorted((r["driver"], r["pool"], r["device"]) for r in results)


@pytest.fixture
def make_cluster() -> Iterator[Any]:
    yield from cluster_factory([node("n-a"), node("n-b"), device_class(), gpu_slice("n-b", 2)])


def test_a_pod_with_a_claim_gets_its_device_written_before_it_is_bound(make_cluster: Any) -> None:
    cluster = make_cluster()
    cluster.scheduler(options=fast_options())
    add_claim(cluster, gpu_claim("train-gpu"))
    written: list[tuple[str, bool, bool]] = []  # (what changed, claim allocated, pod bound) in order

    def record(key: str, event: str, obj: dict[str, Any], prev: Optional[dict[str, Any]]) -> None:
        if key == "resourceclaims" and event == "MODIFIED":
            written.append(("claim", bool((obj.get("status") or {}).get("allocation")), bool(cluster.node_of("train"))))
        if key == "pods" and event == "MODIFIED" and (obj.get("spec") or {}).get("nodeName"):
            written.append(("pod", bool((stored_claim(cluster, "train-gpu").get("status") or {}).get("allocation")),
                            True))
    cluster.server.store.add_listener(record)
    cluster.create(claiming("train", "train-gpu"))
    assert wait_for(lambda: cluster.node_of("train"), timeout=10) == "n-b"  # the only node with GPUs
    claim = stored_claim(cluster, "train-gpu")
    assert devices(claim) == [(DRIVER, "n-b", "gpu-0")] or devices(claim) == [(DRIVER, "n-b", "gpu-1")]
    allocation = claim["status"]["allocation"]
    assert allocation["devices"]["results"][0]["request"] == "gpu"
    assert allocation["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["n-b"]
    uid = cluster.pod("train")["metadata"]["uid"]
    assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "train", "uid": uid}]
    assert FINALIZER in claim["metadata"]["finalizers"]
    # the claim was written (finalizer, then allocation) before the binding, never after; the bound
    # pod's own later updates (its status, as its node reports it) may follow the binding
    kinds = [w[0] for w in written]
    bound_at = kinds.index("pod")
    assert kinds[bound_at - 2:bound_at] == ["claim", "claim"] and "claim" not in kinds[bound_at:], written
    assert written[bound_at - 1][1] and not written[bound_at - 1][2] and written[bound_at][1]


def test_two_pods_do_not_share_a_device_and_a_third_waits_for_one(make_cluster: Any) -> None:
    cluster = make_cluster()
    cluster.scheduler(options=fast_options())
    for name in ("a", "b", "c"):
        add_claim(cluster, gpu_claim(f"{name}-gpu"))
    cluster.create(*(claiming(name, f"{name}-gpu") for name in ("a", "b", "c")))
    assert wait_for(lambda: sum(bool(cluster.node_of(n)) for n in ("a", "b", "c")) == 2, timeout=10)
    bound = [n for n in ("a", "b", "c") if cluster.node_of(n)]
    taken = [d for n in bound for d in devices(stored_claim(cluster, f"{n}-gpu"))]
    assert sorted(taken) == [(DRIVER, "n-b", "gpu-0"), (DRIVER, "n-b", "gpu-1")]
    waiting = next(n for n in ("a", "b", "c") if n not in bound)
    assert not (stored_claim(cluster, f"{waiting}-gpu").get("status") or {}).get("allocation")
    assert wait_for(lambda: any(e["involvedObject"]["name"] == waiting for e in cluster.events("FailedScheduling")))
    # a third node's GPUs published by its driver: the waiting pod is placed there
    cluster.create(node("n-c"))
    assert post(cluster, "/apis/resource.k8s.io/v1/resourceslices", gpu_slice("n-c", 1)).code == 201
    assert wait_for(lambda: cluster.node_of(waiting), timeout=10) == "n-c"
    assert devices(stored_claim(cluster, f"{waiting}-gpu")) == [(DRIVER, "n-c", "gpu-0")]


def test_a_shared_claim_is_allocated_once_and_reserved_for_each_pod(make_cluster: Any) -> None:
    cluster = make_cluster()
    cluster.scheduler(options=fast_options())
    add_claim(cluster, gpu_claim("shared", count=2))
    cluster.create(claiming("first", "shared"))
    assert wait_for(lambda: cluster.node_of("first"), timeout=10) == "n-b"
    cluster.create(claiming("second", "shared"))
    assert wait_for(lambda: cluster.node_of("second"), timeout=10) == "n-b"
    claim = stored_claim(cluster, "shared")
    assert devices(claim) == [(DRIVER, "n-b", "gpu-0"), (DRIVER, "n-b", "gpu-1")]
    assert sorted(r["name"] for r in claim["status"]["reservedFor"]) == ["first", "second"]


def test_a_claim_from_a_template_waits_for_the_controller_to_make_it(make_cluster: Any) -> None:
    cluster = make_cluster()
    cluster.scheduler(options=fast_options())
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": "one-gpu", "namespace": NS}, "spec": {"spec": gpu_claim("x")["spec"]}}
    assert post(cluster, f"/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaimtemplates", template).code == 201
    cluster.create(claiming("tpl", template="one-gpu"))
    assert wait_for(lambda: any(e["involvedObject"]["name"] == "tpl" and "ResourceClaim not created yet" in e["message"]
                                for e in cluster.events("FailedScheduling")), timeout=10)
    assert cluster.node_of("tpl") is None
    assert cluster.server.store.list("resourceclaims") == []  # the scheduler makes no claim
    # the resourceclaim controller's part: the claim, owned by the pod, and the pod's status naming it
    pod_obj = cluster.pod("tpl")
    made = gpu_claim("tpl-gpu-x7k2q")
    made["metadata"]["annotations"] = {"resource.kubernetes.io/pod-claim-name": "gpu"}
    made["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "tpl",
                                            "uid": pod_obj["metadata"]["uid"], "controller": True}]
    add_claim(cluster, made)
    status = {"status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "tpl-gpu-x7k2q"}]}}
    cluster.server.api.handle(Request("PATCH", f"/api/v1/namespaces/{NS}/pods/tpl/status",
                                      content_type="application/merge-patch+json", body=json.dumps(status).encode()))
    assert wait_for(lambda: cluster.node_of("tpl"), timeout=10) == "n-b"
    assert devices(stored_claim(cluster, "tpl-gpu-x7k2q"))


def test_a_failed_bind_releases_the_claim_it_allocated(make_cluster: Any) -> None:
    cluster = make_cluster()
    cluster.scheduler(options=fast_options())
    add_claim(cluster, gpu_claim("doomed-gpu"))
    releases: list[dict[str, Any]] = []

    def record(key: str, event: str, obj: dict[str, Any], prev: Optional[dict[str, Any]]) -> None:
        if key == "resourceclaims" and prev and (prev.get("status") or {}).get("allocation") \
                and not (obj.get("status") or {}).get("allocation"):
            releases.append(obj)
    cluster.server.store.add_listener(record)
    cluster.server.faults.fail("POST", r"/pods/doomed/binding$", status=500, count=3)  # every retry refused
    cluster.create(claiming("doomed", "doomed-gpu"))
    assert wait_for(lambda: releases, timeout=10)
    released = releases[0]
    assert not (released["status"] or {}).get("reservedFor")
    # the pod backs off and is tried again: then it binds, its claim written anew
    assert wait_for(lambda: cluster.node_of("doomed"), timeout=10) == "n-b"
    assert devices(stored_claim(cluster, "doomed-gpu"))
    assert [r["name"] for r in stored_claim(cluster, "doomed-gpu")["status"]["reservedFor"]] == ["doomed"]


def test_a_claim_changed_under_the_write_is_read_again(make_cluster: Any) -> None:
    cluster = make_cluster()
    cluster.scheduler(options=fast_options())
    add_claim(cluster, gpu_claim("busy-gpu"))
    cluster.server.faults.fail("PUT", r"/resourceclaims/busy-gpu/status$", status=409, count=1)
    cluster.create(claiming("busy", "busy-gpu"))
    assert wait_for(lambda: cluster.node_of("busy"), timeout=10) == "n-b"
    claim = stored_claim(cluster, "busy-gpu")
    assert len(devices(claim)) == 1 and [r["name"] for r in claim["status"]["reservedFor"]] == ["busy"]


def test_simulate_places_the_gpu_example_with_claims_made_from_templates(capsys: pytest.CaptureFixture[str]) -> None:
    """`run --simulate` on the DRA example: the in-memory server plays the resourceclaim
    controller (claims of templates), the scheduler writes every allocation, and the final
    state — devices included — passes the validator."""
    out = _simulate("gpus.yaml", capsys)
    assert "bound 3 pod(s), evicted 0, left 0 unschedulable" in out


def _simulate(example: str, capsys: pytest.CaptureFixture[str]) -> str:
    """`run --simulate` of a DRA example: its output, once the run passed, its final state
    replayed through the validator without violations, and no live thread left."""
    from pathlib import Path

    from adapters.cli import main
    from tests.adapters.live_harness import live_threads

    path = Path(__file__).resolve().parents[2] / "examples" / "snapshots" / "dra" / example
    status = main(["run", "--simulate", str(path), "--arrival-rate", "100", "--engine", "cpsat", "--time-limit", "2",
                   "--no-leader-elect", "--duration", "20"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "final state replayed through the validator: no violations" in out
    assert wait_for(lambda: not live_threads(), timeout=5.0), live_threads()
    return out


# --- extended resources backed by DRA: the claim kube-scheduler makes itself ---------------------

def backed_class() -> dict[str, Any]:
    obj = device_class("gpu")
    obj["spec"]["extendedResourceName"] = EXTENDED
    return obj


def claims_of(cluster: Cluster, pod_name: str) -> list[dict[str, Any]]:
    uid = cluster.pod(pod_name)["metadata"]["uid"]
    return [c for c in cluster.server.store.list("resourceclaims")
            if any(r.get("uid") == uid for r in c["metadata"].get("ownerReferences") or [])]


@pytest.fixture
def extended_cluster() -> Iterator[Any]:
    yield from cluster_factory([node("n-a"), node("n-b"), backed_class(), gpu_slice("n-b", 2)])


def test_a_pod_asking_for_a_backed_extended_resource_gets_the_claim_kube_scheduler_makes(
        extended_cluster: Any) -> None:
    cluster = extended_cluster()
    cluster.scheduler(options=fast_options())
    order: list[str] = []  # what the scheduler wrote, in order

    def record(key: str, event: str, obj: dict[str, Any], prev: Optional[dict[str, Any]]) -> None:
        if key == "resourceclaims":
            order.append(f"claim {event}" + (" allocated" if (obj.get("status") or {}).get("allocation") else ""))
        elif key == "pods" and event == "MODIFIED" and obj["metadata"]["name"] == "trainer":
            if (obj.get("spec") or {}).get("nodeName") and not (prev or {}).get("spec", {}).get("nodeName"):
                order.append("pod bound")
            elif (obj.get("status") or {}).get("extendedResourceClaimStatus") \
                    and not ((prev or {}).get("status") or {}).get("extendedResourceClaimStatus"):
                order.append("pod status")
    cluster.server.store.add_listener(record)
    trainer = extended_pod("trainer", resource=EXTENDED)
    trainer["spec"]["containers"].insert(0, {"name": "side", "image": "registry.k8s.io/pause:3.9",
                                             "resources": {"requests": {"cpu": "10m"}}})
    cluster.create(trainer)
    assert wait_for(lambda: cluster.node_of("trainer"), timeout=10) == "n-b"  # the only node with GPUs
    (claim,) = claims_of(cluster, "trainer")
    uid = cluster.pod("trainer")["metadata"]["uid"]
    meta = claim["metadata"]
    assert meta["name"].startswith("trainer-extended-resources-") and len(meta["name"]) == len("trainer-extended-resources-") + 5
    assert meta["annotations"] == {"resource.kubernetes.io/extended-resource-claim": "true"}
    assert meta["ownerReferences"] == [{"apiVersion": "v1", "kind": "Pod", "name": "trainer", "uid": uid,
                                        "controller": True, "blockOwnerDeletion": True}]
    # one request for the second container's example.com/gpu (its requests sorted: cpu, example.com/gpu)
    assert claim["spec"]["devices"]["requests"] == [{"name": "container-1-request-1", "exactly": {
        "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}}]
    assert len(devices(claim)) == 1 and claim["status"]["allocation"]["devices"]["results"][0]["request"] \
        == "container-1-request-1"
    assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "trainer", "uid": uid}]
    assert FINALIZER in meta["finalizers"]
    assert cluster.pod("trainer")["status"]["extendedResourceClaimStatus"] == {
        "resourceClaimName": meta["name"],
        "requestMappings": [{"containerName": "c", "resourceName": EXTENDED, "requestName": "container-1-request-1"}]}
    # created, finalizer, allocation, then the pod's status, and only then the binding
    assert order == ["claim ADDED", "claim MODIFIED", "claim MODIFIED allocated", "pod status", "pod bound"]


def test_pods_asking_for_more_devices_than_there_are_do_not_share_one(extended_cluster: Any) -> None:
    cluster = extended_cluster()
    cluster.scheduler(options=fast_options())
    cluster.create(*(extended_pod(f"p{i}", resource=EXTENDED) for i in range(3)))
    assert wait_for(lambda: sum(bool(cluster.node_of(f"p{i}")) for i in range(3)) == 2, timeout=10)
    bound = [f"p{i}" for i in range(3) if cluster.node_of(f"p{i}")]
    taken = sorted(d for n in bound for c in claims_of(cluster, n) for d in devices(c))
    assert taken == [(DRIVER, "n-b", "gpu-0"), (DRIVER, "n-b", "gpu-1")]
    waiting = next(f"p{i}" for i in range(3) if f"p{i}" not in bound)
    assert wait_for(lambda: any(e["involvedObject"]["name"] == waiting for e in cluster.events("FailedScheduling")))
    assert claims_of(cluster, waiting) == []  # a pod not placed gets no claim


def test_a_failed_bind_deletes_the_claim_it_made(extended_cluster: Any) -> None:
    cluster = extended_cluster()
    cluster.scheduler(options=fast_options())
    made: list[str] = []
    deleted: list[str] = []

    def record(key: str, event: str, obj: dict[str, Any], prev: Optional[dict[str, Any]]) -> None:
        if key == "resourceclaims" and event == "ADDED":
            made.append(obj["metadata"]["name"])
        if key == "resourceclaims" and event == "DELETED":
            deleted.append(obj["metadata"]["name"])
    cluster.server.store.add_listener(record)
    cluster.server.faults.fail("POST", r"/pods/doomed/binding$", status=500, count=3)  # every retry refused
    cluster.create(extended_pod("doomed", resource=EXTENDED))
    assert wait_for(lambda: deleted, timeout=10)
    assert deleted[0] == made[0] and cluster.server.store.get("resourceclaims", NS, made[0]) is None
    # the pod backs off and is tried again: a new claim, written, and then it binds
    assert wait_for(lambda: cluster.node_of("doomed"), timeout=10) == "n-b"
    (claim,) = claims_of(cluster, "doomed")
    assert claim["metadata"]["name"] != made[0] and len(devices(claim)) == 1
    assert cluster.pod("doomed")["status"]["extendedResourceClaimStatus"]["resourceClaimName"] \
        == claim["metadata"]["name"]


def test_a_failed_claim_write_deletes_the_claim_it_made(extended_cluster: Any) -> None:
    cluster = extended_cluster()
    cluster.scheduler(options=fast_options())
    cluster.server.faults.fail("PUT", r"/resourceclaims/[^/]+/status$", status=422, count=1, reason="Invalid")
    cluster.create(extended_pod("first", resource=EXTENDED))
    assert wait_for(lambda: cluster.node_of("first"), timeout=10) == "n-b"
    # the claim whose allocation was refused is gone: only the one of the try that bound is left
    (claim,) = cluster.server.store.list("resourceclaims")
    assert cluster.pod("first")["status"]["extendedResourceClaimStatus"]["resourceClaimName"] \
        == claim["metadata"]["name"]


def test_simulate_binds_the_extended_resource_example(capsys: pytest.CaptureFixture[str]) -> None:
    out = _simulate("extended.yaml", capsys)
    assert "bound 2 pod(s), evicted 0, left 1 unschedulable" in out


# --- the pieces, each against the same server ----------------------------------------------------

def _writer(cluster: Cluster) -> Any:
    from adapters.live.dra_writes import ClaimWriter
    from adapters.live.api_client import KubeApi, configured_client

    api = KubeApi(configured_client(cluster.server.client_configuration()))
    cluster._apis.append(api)
    return ClaimWriter(api, backoffs=(0.01,), sleep=lambda s: None, should_continue=lambda: True)


def _allocation(device: str) -> dict[str, Any]:
    return {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "n-b", "device": device}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["n-b"]}]}]}}


def test_a_claim_allocated_other_devices_meanwhile_is_not_overwritten(make_cluster: Any) -> None:
    from adapters.live.dra_writes import ClaimUse, ClaimWriteError

    cluster = make_cluster()
    add_claim(cluster, gpu_claim("raced"))
    writer = _writer(cluster)
    writer.reserve("default/first", "uid-1", [ClaimUse("default/raced", "", _allocation("gpu-1"))])
    with pytest.raises(ClaimWriteError, match="allocated other devices meanwhile"):
        writer.reserve("default/second", "uid-2", [ClaimUse("default/raced", "", _allocation("gpu-0"))])
    claim = stored_claim(cluster, "raced")
    assert devices(claim) == [(DRIVER, "n-b", "gpu-1")]
    assert [r["uid"] for r in claim["status"]["reservedFor"]] == ["uid-1"]
    # the same devices are accepted: the pod joins reservedFor
    writer.reserve("default/third", "uid-3", [ClaimUse("default/raced", "", _allocation("gpu-1"))])
    assert [r["uid"] for r in stored_claim(cluster, "raced")["status"]["reservedFor"]] == ["uid-1", "uid-3"]


def test_release_keeps_an_allocation_another_pod_still_uses(make_cluster: Any) -> None:
    from adapters.live.dra_writes import FINALIZER, ClaimUse

    cluster = make_cluster()
    add_claim(cluster, gpu_claim("kept"))
    writer = _writer(cluster)
    writer.reserve("default/writer", "uid-w", [ClaimUse("default/kept", "", _allocation("gpu-0"))])
    writer.reserve("default/joiner", "uid-j", [ClaimUse("default/kept", "", None)])
    writer.release("default/writer")  # it wrote the allocation, but the joiner uses it
    claim = stored_claim(cluster, "kept")
    assert devices(claim) == [(DRIVER, "n-b", "gpu-0")] and FINALIZER in claim["metadata"]["finalizers"]
    assert [r["uid"] for r in claim["status"]["reservedFor"]] == ["uid-j"]
    writer.release("default/joiner")  # it did not write the allocation: the allocation stays
    claim = stored_claim(cluster, "kept")
    assert devices(claim) and not claim["status"].get("reservedFor")


def test_the_cache_shows_a_window_s_allocation_until_the_watch_does(make_cluster: Any) -> None:
    from adapters.live.cache import ClusterCache
    from adapters.live.api_client import RESOURCE_CLAIMS

    cache = ClusterCache()
    claim = gpu_claim("pending")
    claim["metadata"].update(uid="c1", resourceVersion="1")
    cache.replace(RESOURCE_CLAIMS, [claim])

    def allocated() -> list[str]:
        return [c.metadata.name for c in cache.snapshot().resource_claims if c.status.allocation is not None]
    assert allocated() == []
    cache.assume_claims("default/p", [("default/pending", _allocation("gpu-0"))])
    assert allocated() == ["pending"]  # the next window does not hand gpu-0 out again
    assert cache.claims.held("default/pending")
    written = {**claim, "metadata": {**claim["metadata"], "resourceVersion": "2"},
               "status": {"allocation": _allocation("gpu-0"),
                          "reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}]}}
    cache.apply(RESOURCE_CLAIMS, "MODIFIED", written)
    assert allocated() == ["pending"] and not cache.claims.held("default/pending")  # the watch shows it now
    cache.assume_claims("default/q", [("default/pending", None)])  # allocated already: nothing to hold
    assert not cache.claims.held("default/pending")
    other = gpu_claim("other")
    other["metadata"].update(uid="c2", resourceVersion="3")
    cache.apply(RESOURCE_CLAIMS, "ADDED", other)
    cache.assume_claims("default/r", [("default/other", _allocation("gpu-1"))])
    cache.forget("default/r")  # the bind failed before the write: the devices are free again
    assert sorted(allocated()) == ["pending"]


def test_a_scheduler_not_granted_the_dra_apis_schedules_without_them(make_cluster: Any) -> None:
    """A ClusterRole from before this scheduler read resource.k8s.io (403 on the list): it syncs
    and schedules the other pods, rather than waiting forever for a cache it may not fill."""
    cluster = make_cluster()
    cluster.server.faults.fail("GET", r"/apis/resource\.k8s\.io/v1/(resourceslices|deviceclasses|resourceclaims)",
                               status=403, count=None, reason="Forbidden")
    cluster.scheduler(options=fast_options())
    cluster.create(pod("plain"))
    assert wait_for(lambda: cluster.node_of("plain"), timeout=10)


def test_the_cache_shows_a_claim_it_will_make_until_the_watch_shows_it_made(make_cluster: Any) -> None:
    """The claim made for extended resources does not exist when its window ends: the cache
    shows it under its generateName, allocated, so the next window does not hand its devices
    out again, until the watch shows the real claim allocated (or the bind fails)."""
    from adapters.live.cache import ClusterCache
    from adapters.live.api_client import RESOURCE_CLAIMS

    cache = ClusterCache()

    def allocated() -> list[str]:
        return sorted(c.key for c in cache.snapshot().resource_claims if c.status.allocation is not None)
    cache.assume_claims("default/p", [("default/p-extended-resources-", _allocation("gpu-0"))])
    assert allocated() == ["default/p-extended-resources-"]
    made = gpu_claim("p-extended-resources-x7k2q")
    made["metadata"].update(uid="c1", resourceVersion="1",
                            annotations={"resource.kubernetes.io/extended-resource-claim": "true"},
                            ownerReferences=[{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u",
                                              "controller": True}])
    cache.apply(RESOURCE_CLAIMS, "ADDED", made)  # created, not written yet: still shown under the generateName
    assert allocated() == ["default/p-extended-resources-"]
    written = {**made, "metadata": {**made["metadata"], "resourceVersion": "2"},
               "status": {"allocation": _allocation("gpu-0")}}
    cache.apply(RESOURCE_CLAIMS, "MODIFIED", written)
    assert allocated() == ["default/p-extended-resources-x7k2q"]  # the real one, once
    cache.assume_claims("default/q", [("default/q-extended-resources-", _allocation("gpu-1"))])
    cache.forget("default/q")  # its bind failed: the devices are free again
    assert allocated() == ["default/p-extended-resources-x7k2q"]


def test_a_made_claim_of_an_earlier_pod_of_the_same_name_does_not_end_the_new_pods_hold() -> None:
    """A pod deleted and made again under its name (a StatefulSet's): the claim made for the
    old pod, seen allocated while the garbage collector deletes it, is not the new pod's. Its
    watch event must not end what the cache shows under the new pod's generateName, or the next
    window hands those devices out again before the watch shows the new claim allocated."""
    from adapters.live.cache import ClusterCache
    from adapters.live.api_client import PODS, RESOURCE_CLAIMS

    cache = ClusterCache()
    new = pod("p")
    new["metadata"].update(uid="new-uid", resourceVersion="5")
    cache.apply(PODS, "ADDED", new)

    def allocated() -> list[str]:
        return sorted(c.key for c in cache.snapshot().resource_claims if c.status.allocation is not None)
    cache.assume_claims("default/p", [("default/p-extended-resources-", _allocation("gpu-0"))])
    old_claim = gpu_claim("p-extended-resources-ab12c")
    old_claim["metadata"].update(uid="c0", resourceVersion="6", deletionTimestamp="2026-11-27T00:00:00Z",
                                 annotations={"resource.kubernetes.io/extended-resource-claim": "true"},
                                 ownerReferences=[{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "old-uid",
                                                   "controller": True}])
    old_claim["status"] = {"allocation": _allocation("gpu-1")}
    cache.apply(RESOURCE_CLAIMS, "MODIFIED", old_claim)
    assert "default/p-extended-resources-" in allocated()  # gpu-0 still taken for the new pod

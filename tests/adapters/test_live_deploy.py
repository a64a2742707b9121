"""`examples/deploy/`: least-privilege RBAC that matches the code, and a safe Deployment.

The ClusterRole and Role must grant exactly what the scheduler calls, no more and no less,
checked three ways: (1) the client methods `adapters/live/api_client.py` uses are exactly those in
its `API_CALLS` table; (2) that table agrees with how the API server authorises each method
(a table kept here, independently); (3) a scenario that makes every kind of call runs against
the API server with each request recorded and turned into RBAC terms (group, resource,
verb) as the authorizer does: every request is allowed by the manifests, and every permission
in the manifests is used.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any, Iterable, Optional
from urllib.parse import unquote

import pytest
import yaml

from adapters.apiserver.api import Request
from adapters.apiserver.resources import DEFAULT_GANG_APIS
from adapters.cli import build_parser
from adapters.live import api_client, dra_writes
from adapters.snapshot_io import load_config
from tests.adapters.test_live_dra import claiming, device_class, extended_pod, gpu_claim, gpu_slice
from tests.adapters.live_harness import (
    NS,
    Cluster,
    fast_options,
    first_time_claims,
    live_threads,
    node,
    pdb,
    pod,
    core_pod_group,
    pod_group,
    priority_class,
    wait_for,
)

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "examples" / "deploy"
LIVE = ROOT / "adapters" / "live"

Permission = tuple[str, str, str]  # (API group, resource[/subresource], verb)

# How kube-apiserver authorises each client method (the generated client's REST paths). The
# generic custom-object methods take the group and plural as arguments: each is listed with
# every (group, resource) the scheduler passes it — the four gang APIs it watches, and the
# status of Kubernetes' own PodGroup, the one it writes.
CLIENT_METHODS: dict[str, tuple[Permission, ...]] = {
    "list_node": (("", "nodes", "list"),),
    "list_pod_for_all_namespaces": (("", "pods", "list"),),
    "list_pod_disruption_budget_for_all_namespaces": (("policy", "poddisruptionbudgets", "list"),),
    "list_priority_class": (("scheduling.k8s.io", "priorityclasses", "list"),),
    "list_persistent_volume_claim_for_all_namespaces": (("", "persistentvolumeclaims", "list"),),
    "list_persistent_volume": (("", "persistentvolumes", "list"),),
    "list_storage_class": (("storage.k8s.io", "storageclasses", "list"),),
    "list_csi_node": (("storage.k8s.io", "csinodes", "list"),),
    "list_namespace": (("", "namespaces", "list"),),
    "list_cluster_custom_object": (("scheduling.x-k8s.io", "podgroups", "list"),
                                   ("scheduling.k8s.io", "podgroups", "list"),
                                   ("scheduling.k8s.io", "workloads", "list"),
                                   ("scheduling.k8s.io", "compositepodgroups", "list"),
                                   ("scheduling.volcano.sh", "podgroups", "list"),
                                   ("resource.k8s.io", "deviceclasses", "list"),
                                   ("resource.k8s.io", "resourceslices", "list"),
                                   ("resource.k8s.io", "resourceclaims", "list")),
    "patch_namespaced_custom_object_status": (("scheduling.k8s.io", "podgroups/status", "patch"),),
    "read_namespaced_pod": (("", "pods", "get"),),
    "create_namespaced_pod_binding": (("", "pods/binding", "create"),),
    "create_namespaced_pod_eviction": (("", "pods/eviction", "create"),),
    "patch_namespaced_pod_status": (("", "pods/status", "patch"),),
    "patch_persistent_volume": (("", "persistentvolumes", "patch"),),
    "patch_namespaced_persistent_volume_claim": (("", "persistentvolumeclaims", "patch"),),
    "create_namespaced_event": (("", "events", "create"),),
    "read_namespaced_lease": (("coordination.k8s.io", "leases", "get"),),
    "create_namespaced_lease": (("coordination.k8s.io", "leases", "create"),),
    "replace_namespaced_lease": (("coordination.k8s.io", "leases", "update"),),
    # DynamicResources' PreBind (adapters/live/dra_writes.py): read a claim, its finalizer, its status
    "get_namespaced_custom_object": (("resource.k8s.io", "resourceclaims", "get"),),
    "replace_namespaced_custom_object": (("resource.k8s.io", "resourceclaims", "update"),),
    # the claim kube-scheduler makes for extended resources backed by DRA, deleted by Unreserve
    "create_namespaced_custom_object": (("resource.k8s.io", "resourceclaims", "create"),),
    "delete_namespaced_custom_object": (("resource.k8s.io", "resourceclaims", "delete"),),
    # ... and, when it changes allocation or reservedFor, kube-apiserver's extra check on the
    # synthetic resourceclaims/binding (seen refusing the write on a real 1.36 server)
    "replace_namespaced_custom_object_status": (("resource.k8s.io", "resourceclaims/status", "update"),
                                                ("resource.k8s.io", "resourceclaims/binding", "update")),
}
# Every client call of the live scheduler: api_client.py's, and the claim writes of dra_writes.py.
API_CALLS = {**api_client.API_CALLS, **dra_writes.API_CALLS}
API_OBJECTS = {"core", "policy", "scheduling", "custom", "coordination", "storage"}


def documents(name: str) -> list[dict[str, Any]]:
    with open(DEPLOY / name, encoding="utf-8") as fh:
        return [d for d in yaml.safe_load_all(fh) if d]


def granted() -> set[Permission]:
    """Every (group, resource, verb) the ClusterRole and Role grant."""
    out: set[Permission] = set()
    for doc in documents("rbac.yaml"):
        if doc["kind"] not in ("ClusterRole", "Role"):
            continue
        for rule in doc["rules"]:
            assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"], rule
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        out.add((group, resource, verb))
    return out


def called_methods() -> set[str]:
    """Client methods `api_client.py` and `dra_writes.py` reach through their API objects
    (self.core.list_node, ...)."""
    found = set()
    for n in (n for f in ("api_client.py", "dra_writes.py") for n in ast.walk(ast.parse((LIVE / f).read_text()))):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Attribute) and n.value.attr in API_OBJECTS \
                and isinstance(n.value.value, ast.Name) and n.value.value.id == "self":
            found.add(n.attr)
    return found


def required() -> set[Permission]:
    """What the code needs: each call's permission, and `watch` for every resource it lists."""
    out = {permission for permissions in API_CALLS.values() for permission in permissions}
    out |= {(g, r, "watch") for g, r, v in out if v == "list"}
    return out


def test_the_code_calls_exactly_the_methods_its_table_names() -> None:
    assert called_methods() == set(API_CALLS) | set(api_client.PLUGIN_CALLS)


def test_a_plugins_prebind_writes_are_not_granted_by_default() -> None:
    """Patching a pod is only a plugin's PreBind (``Plugin.prebind``; no built-in rule has one):
    the manifests leave it out, least privilege, and the table says what to add."""
    assert api_client.PLUGIN_CALLS == {"patch_namespaced_pod": (("", "pods", "patch"),)}
    assert ("", "pods", "patch") not in granted()


def test_the_table_says_how_the_api_server_authorises_each_call() -> None:
    assert {m: set(p) for m, p in API_CALLS.items()} == {m: set(p) for m, p in CLIENT_METHODS.items()}


def test_every_gang_api_watched_is_in_the_table() -> None:
    """The custom-object lister serves each watched gang resource: each has its permission, and
    nothing else is listed through it."""
    custom = (*api_client.GANG_RESOURCES, api_client.COMPOSITE_PODGROUPS, *api_client.DRA_RESOURCES)
    watched = {(r.group, r.path_plural, "list") for r in api_client.WATCHED if r in custom}
    assert watched == set(CLIENT_METHODS["list_cluster_custom_object"])
    assert all(r.optional for r in (*api_client.GANG_RESOURCES, api_client.COMPOSITE_PODGROUPS))


def test_rbac_grants_exactly_what_the_code_calls() -> None:
    assert granted() == required()


# --- what a running scheduler actually asks for ------------------------------------------------

def authorization(method: str, path: str, query: dict[str, str]) -> Optional[Permission]:
    """The (group, resource, verb) kube-apiserver's authorizer derives from a request."""
    parts = [unquote(p) for p in path.strip("/").split("/") if p]
    if not parts or parts[0] not in ("api", "apis"):
        return None
    if len(parts) < (2 if parts[0] == "api" else 3) + 1:
        return None  # discovery (/apis, /apis/GROUP[/VERSION]): non-resource URLs every identity may GET
    rest = parts[2:] if parts[0] == "api" else parts[3:]
    group = "" if parts[0] == "api" else parts[1]
    if len(rest) >= 2 and rest[0] == "namespaces" and len(rest) > 2:
        rest = rest[2:]
    resource, name, sub = rest[0], rest[1] if len(rest) > 1 else None, rest[2] if len(rest) > 2 else None
    if sub:
        resource = f"{resource}/{sub}"
    verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method)
    if method == "GET":
        verb = "watch" if query.get("watch") in ("true", "1") else ("get" if name else "list")
    return group, resource, verb  # type: ignore[return-value]


def test_a_running_scheduler_uses_every_permission_and_nothing_else() -> None:
    cluster = Cluster([node("n1", cpu="2"), node("n2", cpu="1"), priority_class("low", 10), priority_class("high", 1000),
                       pod("low-0", cpu="1", priority_class="low", node_name="n1", running=True, labels={"app": "b"}),
                       pod("low-1", cpu="1", priority_class="low", node_name="n1", running=True, labels={"app": "b"}),
                       pod("filler", cpu="900m", priority_class="high", node_name="n2", running=True),
                       pdb("b", min_available=1, app="b"), pod_group("job", 2), core_pod_group("core", 2),
                       *first_time_claims(NS), device_class(), gpu_slice("n2", 2), gpu_claim("gpu")],
                      # 1.37's CompositePodGroups beside 1.36's PodGroups (read as v1alpha2: --gang-api)
                      gang_apis=[*DEFAULT_GANG_APIS, "scheduling.k8s.io/v1alpha3"])
    seen: set[Permission] = set()
    handle = cluster.server.api.handle

    def recording(request: Any) -> Any:
        permission = authorization(request.method, request.path, request.query)
        if permission is not None:
            seen.add(permission)
        if permission == ("resource.k8s.io", "resourceclaims/status", "update"):
            # kube-apiserver authorises a change of allocation or reservedFor a second time, as an
            # update of resourceclaims/binding; every status write of the scheduler changes one
            seen.add(("resource.k8s.io", "resourceclaims/binding", "update"))
        return handle(request)

    try:
        cluster.server.api.handle = recording  # type: ignore[method-assign]
        sched = cluster.scheduler(options=fast_options(leader_elect=True), start=False)
        sched.api.gang_api = "v1alpha2"
        sched.start()
        assert sched.wait_synced(5.0)
        # lease renewals, binds, a conflict read back, events, conditions, an eviction
        cluster.server.faults.fail("POST", r"/pods/conflicted/binding$", status=409)
        # a pod with a ResourceClaim whose first bind is refused: the claim is written, then released
        cluster.server.faults.fail("POST", r"/pods/gpu-user/binding$", status=403, count=1)
        # a pod asking for an extended resource a DeviceClass backs, first bind refused: the claim
        # kube-scheduler makes is created, written, deleted again, and made anew on the next try
        cluster.server.faults.fail("POST", r"/pods/ext-user/binding$", status=403, count=1)
        for obj in (pod("job-0", gang="job", cpu="10m"), pod("job-1", gang="job", cpu="10m"),
                    pod("core-0", scheduling_group="core", cpu="10m"),
                    pod("core-1", scheduling_group="core", cpu="10m"),
                    pod("conflicted", cpu="10m"), pod("too-big", cpu="64"), pod("high", cpu="1", priority_class="high"),
                    _stateful(), claiming("gpu-user", "gpu", cpu="10m"), extended_pod("ext-user")):
            # the test's own writes go around the recorder: only the scheduler's requests count
            handle(Request("POST", f"/api/v1/namespaces/{NS}/pods", body=json.dumps(obj).encode()))
        assert wait_for(lambda: cluster.node_of("high") and cluster.node_of("conflicted") and cluster.node_of("stateful")
                        and cluster.node_of("gpu-user") and cluster.node_of("ext-user"), timeout=20)
        # the v1alpha2 gang's PodGroupScheduled condition, written through podgroups/status
        assert wait_for(lambda: (cluster.server.store.get("podgroups.scheduling.k8s.io", NS, "core") or {})
                        .get("status"), timeout=20)
        # a restart of the watch from scratch (list again): history compacted while it was down
        cluster.server.faults.fail("GET", r"/pods$", watch=True, status=503, count=2)
        cluster.server.faults.drop_watches()
        handle(Request("POST", f"/api/v1/namespaces/{NS}/pods", body=json.dumps(pod("late", cpu="10m")).encode()))
        cluster.server.faults.compact()
        assert wait_for(lambda: sched.metrics.watch_restarts.labels(resource="pods", reason="expired")._value.get())
        sched.stop()  # releases the lease: an update
    finally:
        cluster.close()
    assert wait_for(lambda: not live_threads(), timeout=5.0)
    assert seen - granted() == set(), "requests the manifests do not allow"
    assert granted() - seen == set(), "permissions the scheduler never used"


def _stateful() -> dict[str, Any]:
    obj = pod("stateful", cpu="10m")
    obj["spec"]["volumes"] = [{"name": "scratch", "persistentVolumeClaim": {"claimName": "scratch"}},
                              {"name": "spool", "persistentVolumeClaim": {"claimName": "spool"}}]
    return obj


# --- the Deployment and its companions -------------------------------------------------------

def _one(kind: str, docs: Iterable[dict[str, Any]]) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, kind
    return found[0]


def test_deployment_runs_two_non_root_replicas_with_probes_and_leader_election() -> None:
    deployment = _one("Deployment", documents("deployment.yaml"))
    spec = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["replicas"] == 2
    assert spec["serviceAccountName"] == "cpsat-scheduler"
    assert spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"]["runAsUser"] > 0
    (container,) = spec["containers"]
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True and security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    assert container["resources"]["requests"]["cpu"] and container["resources"]["requests"]["memory"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    port = {p["name"]: p["containerPort"] for p in container["ports"]}[container["livenessProbe"]["httpGet"]["port"]]
    # the arguments are the CLI's own: they parse, elect a leader, serve on the probed port
    argv = [a.replace("$(POD_IP)", "10.0.0.7") for a in container["args"]]
    args = build_parser().parse_args(argv)
    assert args.command == "run" and args.leader_elect and args.in_cluster
    assert args.metrics_addr == ("10.0.0.7", port)
    assert any(env["name"] == "POD_IP" for env in container["env"])
    # the lease lives where the Role lets the scheduler write it
    role = _one("Role", documents("rbac.yaml"))
    assert role["metadata"]["namespace"] == args.lease_namespace == deployment["metadata"]["namespace"]
    assert [r for r in role["rules"] if r.get("resourceNames")][0]["resourceNames"] == [args.lease_name]
    binding = _one("ClusterRoleBinding", documents("rbac.yaml"))
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "cpsat-scheduler",
                                    "namespace": deployment["metadata"]["namespace"]}]


def test_config_map_holds_a_valid_config_for_the_workloads_scheduler_name(tmp_path: Path) -> None:
    config_map = _one("ConfigMap", documents("configmap.yaml"))
    path = tmp_path / "config.yaml"
    path.write_text(config_map["data"]["config.yaml"])
    config = load_config(path)
    names = {doc["spec"]["template"]["spec"]["schedulerName"] for doc in documents("workload.yaml")
             if doc["kind"] in ("Deployment", "Job")}
    assert names == {config.scheduler_name} == {"cpsat-scheduler"}
    deployment = _one("Deployment", documents("deployment.yaml"))
    assert "--config=/etc/cpsat-scheduler/config.yaml" in deployment["spec"]["template"]["spec"]["containers"][0]["args"]


def test_image_runs_as_a_numeric_non_root_user() -> None:
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    users = re.findall(r"^USER\s+(\d+)", dockerfile, re.M)
    assert users and all(int(u) > 0 for u in users)
    assert re.search(r'^ENTRYPOINT \["cpsat-scheduler"\]', dockerfile, re.M)


def test_kustomization_lists_every_manifest_but_the_sample_workload() -> None:
    listed = set(documents("kustomization.yaml")[0]["resources"])
    manifests = {p.name for p in DEPLOY.glob("*.yaml")} - {"kustomization.yaml", "workload.yaml"}
    assert listed == manifests


@pytest.mark.parametrize("name", sorted(p.name for p in DEPLOY.glob("*.yaml")))
def test_manifests_are_kubernetes_objects(name: str) -> None:
    for doc in documents(name):
        assert doc.get("apiVersion") and doc.get("kind"), name

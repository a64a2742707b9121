"""Objects of a snapshot file put on a real API server, and read back as `kubectl get -o yaml`
prints them: a List whose items carry their apiVersion and kind, with everything the server
added (defaults, admission's tolerations and token volumes, managedFields, status)."""

from __future__ import annotations

import copy
import itertools
import os
import tempfile
from typing import Any, Iterable

from kubernetes import client, dynamic
from kubernetes.client.exceptions import ApiException

from tests.e2e.controlplane.cluster import ensure_default_service_account

# Kinds whose status a controller or kubelet writes, through the status subresource.
WITH_STATUS = {"Node", "Pod", "PodDisruptionBudget", "PersistentVolume", "PersistentVolumeClaim", "PodGroup"}
# Created first: what others refer to.
ORDER = {"CustomResourceDefinition": 0, "Namespace": 1, "PriorityClass": 2, "StorageClass": 2, "Node": 3,
         "PersistentVolume": 4, "PersistentVolumeClaim": 5}

# scheduler-plugins' coscheduling PodGroup is a CRD; a minimal definition of it (any fields kept).
COSCHEDULING_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "podgroups.scheduling.x-k8s.io"},
    "spec": {"group": "scheduling.x-k8s.io", "scope": "Namespaced",
             "names": {"plural": "podgroups", "singular": "podgroup", "kind": "PodGroup", "shortNames": ["pg"]},
             "versions": [{"name": "v1alpha1", "served": True, "storage": True,
                           "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {"type": "object",
                                                          "x-kubernetes-preserve-unknown-fields": True}}}]}}


# The dynamic client caches discovery in a file, by default one per server in the system's temp
# directory; each test control plane listens on a new port, so the tests keep theirs here
# (removed when the run ends).
_DISCOVERY = tempfile.TemporaryDirectory(prefix="cpsat-e2e-discovery-")
_CACHES = itertools.count()


def items_of(document: dict[str, Any]) -> list[dict[str, Any]]:
    return list(document["items"]) if document.get("kind", "").endswith("List") else [document]


def _creatable(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    body = {k: copy.deepcopy(v) for k, v in obj.items() if k != "status"}
    body["metadata"] = {k: copy.deepcopy(meta[k]) for k in ("name", "namespace", "labels", "annotations",
                                                             "ownerReferences") if k in meta}
    return body


class Applier:
    """Creates objects as they are in a dump, then writes their status the way their
    controllers would; `read_back` lists them again."""

    def __init__(self, api: client.ApiClient, gang_api: str = "") -> None:
        """`gang_api`: the version Kubernetes' own PodGroups are made in on this server (1.37:
        scheduling.k8s.io/v1beta1), whatever version the snapshot wrote them in: the spec that
        snapshots use (schedulingPolicy, schedulingConstraints) is the same in v1alpha2 and v1beta1."""
        self.api = api
        self.gang_api = gang_api
        self.dyn = dynamic.DynamicClient(
            api, cache_file=os.path.join(_DISCOVERY.name, f"discovery-{next(_CACHES)}.json"))
        self.core = client.CoreV1Api(api)
        self.created: list[tuple[str, str, str, str]] = []   # apiVersion, kind, namespace, name

    def _resource(self, api_version: str, kind: str) -> Any:
        return self.dyn.resources.get(api_version=api_version, kind=kind)

    def install_crds(self, objects: Iterable[dict[str, Any]]) -> None:
        if any(o["apiVersion"].startswith("scheduling.x-k8s.io/") for o in objects):
            crds = self._resource("apiextensions.k8s.io/v1", "CustomResourceDefinition")
            try:
                crds.create(body=COSCHEDULING_CRD)
            except ApiException as exc:
                if exc.status != 409:
                    raise
            for _ in range(100):       # until discovery serves it
                try:
                    self.dyn.resources.invalidate_cache()
                    self._resource("scheduling.x-k8s.io/v1alpha1", "PodGroup")
                    return
                except Exception:
                    import time

                    time.sleep(0.1)

    def apply(self, objects: list[dict[str, Any]]) -> None:
        self.install_crds(objects)
        namespaces = {o["metadata"]["namespace"] for o in objects if o["metadata"].get("namespace")}
        for namespace in sorted(namespaces):
            try:
                self.core.create_namespace({"metadata": {"name": namespace}})
            except ApiException as exc:
                if exc.status != 409:
                    raise
            ensure_default_service_account(self.core, namespace)
        accounts = {(o["metadata"]["namespace"], o["spec"].get("serviceAccountName") or "default")
                    for o in objects if o["kind"] == "Pod"}
        for namespace, name in sorted(accounts):
            try:
                self.core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
            except ApiException as exc:
                if exc.status != 409:
                    raise
        for obj in sorted(objects, key=lambda o: ORDER.get(o["kind"], 9)):
            if self.gang_api and obj["kind"] == "PodGroup" and obj["apiVersion"].startswith("scheduling.k8s.io/"):
                obj = {**obj, "apiVersion": self.gang_api}
            resource = self._resource(obj["apiVersion"], obj["kind"])
            namespace = obj["metadata"].get("namespace")
            name = obj["metadata"]["name"]
            try:
                made = resource.create(body=_creatable(obj), namespace=namespace)
            except ApiException as exc:
                if exc.status == 409 and obj["kind"] == "PriorityClass":
                    continue     # the server's own system classes (same names, same values)
                raise AssertionError(f"creating {obj['kind']} {namespace}/{name}: {exc.status} {exc.body}") from None
            self.created.append((obj["apiVersion"], obj["kind"], namespace or "", name))
            status = copy.deepcopy(obj.get("status"))
            if status and obj["kind"] in WITH_STATUS:
                if obj["kind"] == "PodDisruptionBudget":
                    status["observedGeneration"] = made.metadata.generation
                path = resource.path(name=name, namespace=namespace) + "/status"
                try:
                    self.dyn.request("patch", path, body={"status": status},
                                     content_type="application/merge-patch+json")
                except ApiException as exc:
                    raise AssertionError(f"writing the status of {obj['kind']} {namespace}/{name}: "
                                         f"{exc.status} {exc.body}") from None
            if obj["kind"] == "Node":
                # admission taints every new node node.kubernetes.io/not-ready; the node lifecycle
                # controller lifts it once the kubelet reports Ready: the dump's taints are the rest
                resource.patch(body={"spec": {"taints": (obj.get("spec") or {}).get("taints")}}, name=name,
                               content_type="application/merge-patch+json")

    def read_back(self) -> dict[str, Any]:
        """Every object created, listed per kind from the server (as `kubectl get KIND -A -o
        yaml` would), with each kind's other objects the server holds left out except the
        PriorityClasses (a real dump has the system ones)."""
        kinds: dict[tuple[str, str], set[tuple[str, str]]] = {}
        for api_version, kind, namespace, name in self.created:
            kinds.setdefault((api_version, kind), set()).add((namespace, name))
        items: list[dict[str, Any]] = []
        for (api_version, kind), wanted in kinds.items():
            listed = self.api.sanitize_for_serialization(
                self._resource(api_version, kind).get().to_dict())
            for item in listed["items"]:
                meta = item["metadata"]
                if kind == "PriorityClass" or (meta.get("namespace") or "", meta["name"]) in wanted:
                    items.append({"apiVersion": api_version, "kind": kind, **item})
        return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}

    def delete(self) -> None:
        for api_version, kind, namespace, name in reversed(self.created):
            try:
                if kind in ("PersistentVolume", "PersistentVolumeClaim") or api_version.startswith("scheduling.k8s.io/"):
                    # admission's pv/pvc-protection finalizers, a PodGroup's protection finalizer:
                    # their controllers (not run here) would lift them
                    self._resource(api_version, kind).patch(
                        body={"metadata": {"finalizers": None}}, name=name, namespace=namespace or None,
                        content_type="application/merge-patch+json")
                self._resource(api_version, kind).delete(name=name, namespace=namespace or None,
                                                         body={"gracePeriodSeconds": 0})
            except ApiException:
                pass

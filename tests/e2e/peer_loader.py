"""Puts a peer scenario (``peer_scenario.Scenario``) on a running control plane, reads it back as
the server holds it, and takes it off again. An object the server refuses raises ``Refused``,
naming the object and quoting the server's message."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from kubernetes import client, config as kube_config
from kubernetes.client.exceptions import ApiException

from tests.e2e.controlplane import ControlPlane
from tests.e2e.controlplane.cluster import ensure_default_service_account
from tests.e2e.peer_scenario import RUN_LABEL, Scenario, key


# --------------------------------------------------------------------------- loading


class Refused(Exception):
    """The server refused an object of the snapshot: ``str`` names it with the server's message."""


def _message(exc: ApiException) -> str:
    try:
        return str(json.loads(exc.body).get("message") or exc.reason)
    except (TypeError, ValueError):
        return str(exc.reason)


class Loader:
    """Puts scenarios on a running control plane and takes them off again."""

    def __init__(self, plane: ControlPlane) -> None:
        self.api = kube_config.new_client_from_config(str(plane.admin_kubeconfig))
        self.api.configuration.connection_pool_maxsize = 16
        self.api.rest_client.pool_manager.connection_pool_kw["maxsize"] = 16
        self.core = client.CoreV1Api(self.api)
        self.policy = client.PolicyV1Api(self.api)
        self.scheduling = client.SchedulingV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        self.apps = client.AppsV1Api(self.api)
        self.pool = ThreadPoolExecutor(8)
        # PodGroups are written and read in the plane's version (1.37: v1beta1; a scenario's
        # v1alpha2 PodGroup has the same spec.schedulingPolicy, so it moves over as it is)
        self.gang_api = plane.features.gang_api
        self.gang_group, self.gang_version = self.gang_api.split("/")
        # PriorityClasses this loader made (cluster-scoped): gone again with the scenario, so no
        # later test on the same server finds a class of the same name with another value.
        self.made_classes: set[str] = set()

    def close(self) -> None:
        self.pool.shutdown()
        self.api.close()

    def _each(self, fn: Callable[[dict[str, Any]], None], objs: list[dict[str, Any]]) -> None:
        for _ in self.pool.map(fn, objs):
            pass

    def load(self, scenario: Scenario) -> None:
        """Everything but the pending pods; raises ``Refused`` at the first object refused."""
        objs = scenario.objects
        try:
            self._classes([o for o in objs if o["kind"] == "PriorityClass"])
            for ns in sorted({o["metadata"].get("namespace") or "default" for o in objs if o["kind"] != "Node"
                              and o["kind"] != "PriorityClass"}):
                self._namespace(ns)
            self._each(self._node, [o for o in objs if o["kind"] == "Node"])
            self._each(self._running, [o for o in objs if o["kind"] == "Pod" and o["spec"].get("nodeName")])
            for o in objs:
                if o["kind"] == "PodDisruptionBudget":
                    self._pdb(o)
                elif o["kind"] == "PodGroup":
                    self._pod_group(o)
                elif o["kind"] == "ReplicaSet":
                    self._replica_set(o)
        except _Named as exc:
            raise Refused(str(exc)) from None

    def _pod_group(self, o: dict[str, Any]) -> None:
        ns, name = o["metadata"]["namespace"], o["metadata"]["name"]
        try:
            self.custom.create_namespaced_custom_object(self.gang_group, self.gang_version, ns, "podgroups",
                                                        {**o, "apiVersion": self.gang_api})
        except ApiException as exc:
            raise _Named(f"PodGroup {ns}/{name}: {_message(exc)}") from None

    def _replica_set(self, o: dict[str, Any]) -> None:
        ns, name = o["metadata"].get("namespace") or "default", o["metadata"]["name"]
        try:
            self.apps.create_namespaced_replica_set(ns, o)
        except ApiException as exc:
            raise _Named(f"ReplicaSet {ns}/{name}: {_message(exc)}") from None

    def pending(self, scenario: Scenario) -> None:
        """The pending pods, created in name order (namespace, then name). kube-scheduler starts
        once they all exist, so its queue breaks priority ties by the order its informer hands
        the pods on: the server's, by name, when it lists them (``kube_peer.KUBE_GATES`` turns
        its default watch-list off: that one hands them on in a random order). The project breaks
        them by creation time, then name. Created in name order, both queues agree (creation
        times have a one-second grain, their ties going by name), so neither scheduler is judged
        on an order the other never saw."""
        for o in sorted(scenario.pending(), key=lambda p: (p["metadata"].get("namespace", ""), p["metadata"]["name"])):
            self._create_pod(o)

    def _classes(self, classes: list[dict[str, Any]]) -> None:
        for o in classes:
            try:
                self.scheduling.create_priority_class(o)
                self.made_classes.add(o["metadata"]["name"])
            except ApiException as exc:
                if exc.status != 409:
                    raise _Named(f"PriorityClass {o['metadata']['name']}: {_message(exc)}") from None
                found = self.scheduling.read_priority_class(o["metadata"]["name"])
                if found.value != o.get("value"):
                    raise _Named(f"PriorityClass {o['metadata']['name']}: exists with value {found.value}, "
                                 f"the snapshot has {o.get('value')}") from None

    def _namespace(self, ns: str) -> None:
        try:
            self.core.create_namespace({"metadata": {"name": ns}})
        except ApiException as exc:
            if exc.status != 409:
                raise _Named(f"Namespace {ns}: {_message(exc)}") from None
        ensure_default_service_account(self.core, ns)

    def _node(self, o: dict[str, Any]) -> None:
        name = o["metadata"]["name"]
        try:
            self.core.create_node({k: v for k, v in o.items() if k != "status"})
            status = o.get("status") or {}
            now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            self.core.patch_node_status(name, {"status": {
                **{k: v for k, v in status.items() if k in ("capacity", "allocatable", "images", "nodeInfo")},
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "peer bench",
                                "lastHeartbeatTime": now, "lastTransitionTime": now}]}})
            spec = o.get("spec") or {}
            self.core.patch_node(name, {"spec": {"taints": spec.get("taints") or None,
                                                 "unschedulable": spec.get("unschedulable")}})
        except ApiException as exc:
            raise _Named(f"Node {name}: {_message(exc)}") from None

    def _create_pod(self, o: dict[str, Any]) -> None:
        ns = o["metadata"].get("namespace") or "default"
        try:
            self.core.create_namespaced_pod(ns, {k: v for k, v in o.items() if k != "status"})
        except ApiException as exc:
            raise Refused(f"Pod {ns}/{o['metadata']['name']}: {_message(exc)}") from None

    def _running(self, o: dict[str, Any]) -> None:
        ns, name = o["metadata"].get("namespace") or "default", o["metadata"]["name"]
        try:
            self.core.create_namespaced_pod(ns, {k: v for k, v in o.items() if k != "status"})
            now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            status = o.get("status") or {}
            self.core.patch_namespaced_pod_status(name, ns, {"status": {
                "phase": "Running", "startTime": status.get("startTime") or now,
                "conditions": status.get("conditions") or [{"type": "Ready", "status": "True", "lastTransitionTime": now}]}})
        except ApiException as exc:
            raise _Named(f"Pod {ns}/{name}: {_message(exc)}") from None

    def _pdb(self, o: dict[str, Any]) -> None:
        ns, name = o["metadata"]["namespace"], o["metadata"]["name"]
        try:
            self.policy.create_namespaced_pod_disruption_budget(ns, {k: v for k, v in o.items() if k != "status"})
            status = dict(o.get("status") or {})
            status["observedGeneration"] = 1
            self.policy.patch_namespaced_pod_disruption_budget_status(name, ns, {"status": status})
        except ApiException as exc:
            raise _Named(f"PodDisruptionBudget {ns}/{name}: {_message(exc)}") from None

    def read_back(self, scenario: Scenario) -> list[dict[str, Any]]:
        """The scenario's objects as the server holds them: what the project's plan reads."""
        sel = f"{RUN_LABEL}={scenario.run}"
        out: list[dict[str, Any]] = []
        for pc in self.scheduling.list_priority_class().items:
            out.append(self._plain(pc, "PriorityClass", "scheduling.k8s.io/v1"))
        out += [self._plain(n, "Node", "v1") for n in self.core.list_node(label_selector=sel).items]
        out += [self._plain(p, "Pod", "v1") for p in self.core.list_pod_for_all_namespaces(label_selector=sel).items]
        for ns in self._namespaces(scenario):
            out += [self._plain(b, "PodDisruptionBudget", "policy/v1")
                    for b in self.policy.list_namespaced_pod_disruption_budget(ns).items]
            for g in self.custom.list_namespaced_custom_object(self.gang_group, self.gang_version, ns,
                                                               "podgroups")["items"]:
                out.append({**g, "kind": "PodGroup", "apiVersion": self.gang_api})
        return out

    def _plain(self, obj: Any, kind: str, api_version: str) -> dict[str, Any]:
        out = self.api.sanitize_for_serialization(obj)
        out["kind"], out["apiVersion"] = kind, api_version
        (out.get("metadata") or {}).pop("managedFields", None)   # the server's bookkeeping: half the bytes
        return dict(out)

    @staticmethod
    def _namespaces(scenario: Scenario) -> list[str]:
        return sorted({o["metadata"].get("namespace") or "default" for o in scenario.objects
                       if o["kind"] in ("Pod", "PodDisruptionBudget", "PodGroup")})

    def pods(self, scenario: Scenario) -> dict[str, Any]:
        return {key(self._plain(p, "Pod", "v1")): p
                for p in self.core.list_pod_for_all_namespaces(label_selector=f"{RUN_LABEL}={scenario.run}").items}

    def clear(self, scenario: Scenario) -> None:
        """Every object of the scenario gone, the PriorityClasses this loader made with them
        (namespaces, and classes that were there before, stay)."""
        sel = f"{RUN_LABEL}={scenario.run}"
        for ns in self._namespaces(scenario):
            _quietly(lambda: self.core.delete_collection_namespaced_pod(ns, label_selector=sel, grace_period_seconds=0))
            _quietly(lambda: self.core.delete_collection_namespaced_event(ns))   # the next run reads its own
            _quietly(lambda: self.apps.delete_collection_namespaced_replica_set(ns, label_selector=sel))
            for b in self.policy.list_namespaced_pod_disruption_budget(ns).items:
                _quietly(lambda: self.policy.delete_namespaced_pod_disruption_budget(b.metadata.name, ns))
            self._clear_pod_groups(ns)
        _quietly(lambda: self.core.delete_collection_node(label_selector=sel))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.core.list_pod_for_all_namespaces(label_selector=sel, limit=1).items:
            time.sleep(0.3)
        for name in sorted(self.made_classes):
            _quietly(lambda: self.scheduling.delete_priority_class(name))
        self.made_classes.clear()

    def _clear_pod_groups(self, ns: str) -> None:
        """PodGroups deleted and gone: their finalizer (removed by a controller that does not run
        here) is taken off first, so the next scenario may use the same names."""
        group = (self.gang_group, self.gang_version, ns, "podgroups")
        for g in self.custom.list_namespaced_custom_object(*group)["items"]:
            name = g["metadata"]["name"]
            _quietly(lambda: self.custom.patch_namespaced_custom_object(*group, name, {"metadata": {"finalizers": None}}))
            _quietly(lambda: self.custom.delete_namespaced_custom_object(*group, name))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and self.custom.list_namespaced_custom_object(*group)["items"]:
            time.sleep(0.3)


class _Named(Exception):
    pass


def _quietly(call: Callable[[], Any]) -> None:
    try:
        call()
    except ApiException:
        pass

"""`FakeApiServer`: an in-memory Kubernetes API server on 127.0.0.1, for tests and `--simulate`.

It serves the resources a scheduler uses (see `resources.py`) over real HTTP, so the
code under test talks to it through the official `kubernetes` client exactly as it
would to a cluster. Its lifecycle (start, stop, restart on the same port) and the
wiring of store, API, simulated controllers and fault injection live here.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import threading
import time
from typing import Any, Iterable

from .api import Api
from .controllers import DisruptionController, Kubelet, ReplicaControllers, ResourceClaimController, Timers
from .faults import FaultInjector
from .handler import HttpServer
from .request_log import RequestLog
from .resources import DEFAULT_GANG_APIS, Registry
from .store import Store

log = logging.getLogger(__name__)

LOCALHOST = "127.0.0.1"
# namespaces and priority classes every cluster starts with
BUILTIN_OBJECTS: tuple[dict[str, Any], ...] = tuple(
    [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
     for ns in ("default", "kube-system", "kube-public", "kube-node-lease")]
    + [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
        "value": value, "description": "Used for system critical pods that must not be moved from their "
        "current node." if name == "system-node-critical" else "Used for system critical pods that must run "
        "in the cluster, but can be moved to another node if necessary.", "preemptionPolicy": "PreemptLowerPriority"}
       for name, value in (("system-node-critical", 2000001000), ("system-cluster-critical", 2000000000))]
)


def flatten(objects: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Objects with every `List` (kind `List` or `...List` with `items`) replaced by its items."""
    out: list[dict[str, Any]] = []
    for obj in objects:
        if obj is None:
            continue
        if isinstance(obj.get("items"), list) and str(obj.get("kind", "List")).endswith("List"):
            item_kind = str(obj.get("kind", "List"))[: -len("List")]
            for item in obj["items"]:
                item = dict(item)
                if item_kind and "kind" not in item:  # a typed list's items may omit their type
                    item["kind"] = item_kind
                    item.setdefault("apiVersion", obj.get("apiVersion", "v1"))
                out.extend(flatten([item]))
        else:
            out.append(obj)
    return out


class FakeApiServer:
    """An in-memory Kubernetes API server; see the package docstring for what it reproduces.

    Args:
        objects: Kubernetes objects (dicts, `List`s allowed) to start with; they keep their
            status (a Running pod stays Running) and skip admission.
        podgroups_crd: serve `scheduling.x-k8s.io/v1alpha1` podgroups; without it their
            paths answer 404, as on a cluster without the CRD.
        gang_apis: the other gang APIs served, by group/version (`resources.GANG_APIS`):
            Kubernetes' `scheduling.k8s.io/v1alpha2` PodGroups and `scheduling.k8s.io/v1alpha1`
            Workloads, Volcano's `scheduling.volcano.sh/v1beta1` PodGroups (the default), and
            1.37's `scheduling.k8s.io/v1beta1` (PodGroups and Workloads) and
            `scheduling.k8s.io/v1alpha3` (CompositePodGroups) when named; those left out
            answer 404, as on a cluster without the feature gate or CRD.
        kubelet: simulate kubelets (bound pods start, graceful deletions complete).
        kubelet_start_seconds: delay from bind to Running (0: within the bind request).
        kubelet_grace_seconds: delay from graceful delete to removal (0: at once).
        disruption_controller: keep PodDisruptionBudget status up to date.
        resourceclaim_controller: make the claims of pods' ResourceClaimTemplates, as
            kube-controller-manager's resourceclaim controller does (controllers.py).
        history_limit: watch history kept per resource; older resourceVersions get 410.
        bookmark_interval: seconds between BOOKMARK events for watches that allow them.
        watch_timeout_seconds: how long a watch without timeoutSeconds lasts.
        builtin_objects: create the default namespaces and system PriorityClasses.
        strict_namespaces: creating in a namespace that does not exist is a 404.
        port: 0 for an ephemeral port.
    """

    def __init__(
        self,
        objects: Iterable[dict[str, Any]] = (),
        *,
        podgroups_crd: bool = True,
        gang_apis: Iterable[str] = DEFAULT_GANG_APIS,
        kubelet: bool = True,
        kubelet_start_seconds: float = 0.05,
        kubelet_grace_seconds: float = 0.2,
        disruption_controller: bool = True,
        replica_controllers: bool = False,
        resourceclaim_controller: bool = False,
        history_limit: int = 1000,
        bookmark_interval: float = 1.0,
        watch_timeout_seconds: float = 1800.0,
        builtin_objects: bool = True,
        strict_namespaces: bool = True,
        port: int = 0,
    ) -> None:
        self.registry = Registry(podgroups_crd=podgroups_crd, gang_apis=gang_apis)
        self.store = Store(history_limit=history_limit)
        self.api = Api(self.store, self.registry, strict_namespaces=strict_namespaces)
        self.timers = Timers()
        self.kubelet = (Kubelet(self.store, self.timers, start_seconds=kubelet_start_seconds,
                                grace_seconds=kubelet_grace_seconds) if kubelet else None)
        self.disruption = DisruptionController(self.store) if disruption_controller else None
        # ReplicaSet/StatefulSet pods deleted come back as new pending pods (``repack --apply``).
        self.replicas = ReplicaControllers(self.store, self.timers) if replica_controllers else None
        # Claims made from a pod's ResourceClaimTemplates (``cpsat-scheduler run --simulate``).
        self.claims = ResourceClaimController(self.store, self.timers) if resourceclaim_controller else None
        self.faults = FaultInjector(drop_watches=self.drop_watches, compact=self.store.compact, restart=self._restart)
        # every request served, with its answer (tests count binds and verbs from it)
        self.requests = RequestLog()
        self.bookmark_interval = bookmark_interval
        self.watch_timeout_seconds = watch_timeout_seconds
        self._builtin = builtin_objects
        self.skipped: list[str] = []  # objects given that no served resource stores
        self.port = port
        self._http: HttpServer | None = None
        self._serve_thread: threading.Thread | None = None
        self._stopping = threading.Event()
        # set when the current listener's connections are cut; a fresh one per listener
        self._cut = threading.Event()
        self._lifecycle = threading.Lock()
        self._helpers: list[threading.Thread] = []
        self.load(objects)

    # --- content ------------------------------------------------------------------------------

    def load(self, objects: Iterable[dict[str, Any]]) -> None:
        """Add objects as they are (no admission), creating the namespaces they need."""
        objs = flatten(objects)
        if self._builtin:
            given = {(o.get("kind"), (o.get("metadata") or {}).get("name")) for o in objs}
            objs = [o for o in BUILTIN_OBJECTS if (o["kind"], o["metadata"]["name"]) not in given] + objs
        # namespaces and priority classes first: other objects depend on them
        order = {"Namespace": 0, "PriorityClass": 1, "Node": 2}
        objs.sort(key=lambda o: order.get(str(o.get("kind")), 3))
        with self.store.lock:
            for obj in objs:
                self._load_one(obj)

    def _load_one(self, obj: dict[str, Any]) -> None:
        resource = self.registry.by_kind(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
        name = (obj.get("metadata") or {}).get("name")
        if resource is None or not name:
            what = f"{obj.get('apiVersion')}/{obj.get('kind')} {name!r}"
            log.warning("fake apiserver: not loading %s: no served resource stores it", what)
            self.skipped.append(what)
            return
        stored = resource.stored(json.loads(json.dumps(obj)))
        m = stored.setdefault("metadata", {})
        m.pop("resourceVersion", None)
        m.setdefault("creationTimestamp", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        if resource.generation:
            m.setdefault("generation", 1)
        if resource.namespaced:
            ns = m.setdefault("namespace", "default")
            if self.store.peek("namespaces", "", ns) is None:
                self.store.create("namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {
                    "name": ns, "creationTimestamp": m["creationTimestamp"]}, "status": {"phase": "Active"}})
        else:
            m.pop("namespace", None)
        if self.store.peek(resource.key, m.get("namespace", ""), name) is not None:
            raise ValueError(f"{resource.plural} {m.get('namespace', '')}/{name} is given twice")
        self.store.create(resource.key, stored)

    # --- lifecycle ----------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://{LOCALHOST}:{self.port}"

    def start(self) -> "FakeApiServer":
        with self._lifecycle:
            self._stopping.clear()
            self.timers.resume()
            self._listen(self.port)
        return self

    def _listen(self, port: int) -> None:
        deadline = time.monotonic() + 5.0
        while True:
            try:
                self._http = HttpServer((LOCALHOST, port), self)
                break
            except OSError as exc:  # the old socket of a restart may linger for a moment
                if exc.errno != errno.EADDRINUSE or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        self.port = self._http.server_address[1]
        self._cut = threading.Event()
        self._serve_thread = threading.Thread(target=self._http.serve_forever, kwargs={"poll_interval": 0.05},
                                              name="fake-apiserver", daemon=True)
        self._serve_thread.start()

    def _close_http(self) -> None:
        http, thread = self._http, self._serve_thread
        self._http, self._serve_thread = None, None
        if http is None:
            return
        self._cut.set()
        self.store.close_watchers("dropped")
        http.shutdown()
        http.server_close()
        http.close_connections()
        if thread is not None:
            thread.join(2.0)

    def stop(self) -> None:
        """Close every connection and stop every thread this server started (bounded)."""
        self._stopping.set()
        with self._lifecycle:
            self._close_http()
        self.timers.stop()
        for helper in self._helpers:
            if helper is not threading.current_thread():
                helper.join(2.0)
        self._helpers.clear()

    def restart(self, *, keep_store: bool = True, down_seconds: float = 0.0) -> None:
        """Stop listening and come back on the same port (see `faults.restart` to count it)."""
        self._restart(keep_store=keep_store, down_seconds=down_seconds, wait=True)

    def _restart(self, *, keep_store: bool, down_seconds: float, wait: bool) -> None:
        if not wait:
            self._helpers = [h for h in self._helpers if h.is_alive()]
            helper = threading.Thread(target=self._restart_soon, args=(keep_store, down_seconds),
                                      name="fake-apiserver-restart", daemon=True)
            self._helpers.append(helper)
            helper.start()
            return
        with self._lifecycle:
            if self._http is None or self._stopping.is_set():
                return
            port = self.port
            self._close_http()
            if not keep_store:
                with self.store.lock:
                    self.store.wipe()
                    if self._builtin:
                        self.load(())
            if down_seconds > 0 and self._stopping.wait(down_seconds):
                return
            self._listen(port)

    def _restart_soon(self, keep_store: bool, down_seconds: float) -> None:
        # give the admin request that asked for the restart time to send its answer
        if not self._stopping.wait(0.02):
            self._restart(keep_store=keep_store, down_seconds=down_seconds, wait=True)

    def wait_interrupted(self, seconds: float) -> bool:
        """Sleep (an injected delay); True if the connections were cut (stop, restart) meanwhile."""
        return self._cut.wait(seconds) or self._stopping.is_set()

    def drop_watches(self) -> int:
        """Cut every open watch stream now, mid-response."""
        return self.store.close_watchers("dropped")

    def __enter__(self) -> "FakeApiServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # --- clients ------------------------------------------------------------------------------

    def kubeconfig(self) -> dict[str, Any]:
        """A kubeconfig (as a dict) pointing at this server, without TLS or credentials."""
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake", "namespace": "default"}}],
            "current-context": "fake",
        }

    def kubeconfig_path(self, directory: str | os.PathLike[str]) -> str:
        """Write the kubeconfig (JSON, which is YAML) into `directory`; returns its path."""
        path = os.path.join(os.fspath(directory), "kubeconfig")
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(self.kubeconfig(), fh, indent=2)
        return path

    def client_configuration(self) -> Any:
        """A `kubernetes.client.Configuration` for this server."""
        from kubernetes import client  # imported here: only callers that want a client pay for it

        configuration = client.Configuration()
        configuration.host = self.url
        configuration.verify_ssl = False
        configuration.proxy = None
        return configuration

"""Where the live benchmark runs: the in-memory API server, or any real one (`--kubeconfig`).

Both give the bench the same four things: a kubeconfig for the scheduler process, a way to
create and delete the benchmark's pods, and a `Recorder` that learns when each pod was
created, bound and given its `Scheduled` event.

- `InMemoryTarget` runs `adapters.apiserver.FakeApiServer` (with simulated kubelets) in this
  process and records from its store, so times are the commit times themselves.
- `ClusterTarget` works on a real API server through the official client: it creates a
  namespace and fake Ready nodes (no kubelet behind them: a taint of their own keeps other
  workloads off them, and the bench pods tolerate it and the not-ready/unreachable taints the
  node lifecycle controller adds once their heartbeat is missed), records by watching pods and
  events, and deletes all of it at the end, even after an error or Ctrl-C.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional

from models import InputError

log = logging.getLogger(__name__)

# The synthetic objects (and their shapes) live beside the bench, shared with the live loop's cost
# probe; imported here under the names other modules have always used.
from adapters.synthetic_objects import (  # noqa: F401 - re-exported
    NODE_DOWN_TAINTS, NODE_RESOURCES, RUN_LABEL, SHAPES, ZONES, node_object, node_status, pod_object)


def _body(obj: dict[str, Any]) -> Any:
    """An object as a request body: the client sends a dict as it is, though its annotations
    name only its generated model classes."""
    return obj


class Recorder:
    """Creation, binding and `Scheduled`-event times of pods, by pod name."""

    def __init__(self) -> None:
        self.created: dict[str, float] = {}
        self.bound: dict[str, float] = {}
        self.scheduled_events: dict[str, float] = {}
        self.lock = threading.Lock()

    def pod_seen(self, obj: dict[str, Any], *, added: bool) -> None:
        name = obj["metadata"]["name"]
        now = time.monotonic()
        with self.lock:
            if added:
                self.created.setdefault(name, now)
            if (obj.get("spec") or {}).get("nodeName"):
                self.bound.setdefault(name, now)

    def event_seen(self, obj: dict[str, Any]) -> None:
        if obj.get("reason") == "Scheduled":
            name = (obj.get("involvedObject") or {}).get("name", "")
            with self.lock:
                self.scheduled_events.setdefault(name, time.monotonic())

    def all_bound(self, names: list[str]) -> bool:
        with self.lock:
            return all(n in self.bound for n in names)

    def count_events(self, names: list[str]) -> int:
        with self.lock:
            return sum(1 for n in names if n in self.scheduled_events)


class InMemoryTarget:
    """The in-memory API server with simulated kubelets, in this process."""

    namespace = "bench"

    def __init__(self, nodes: int, scheduler: str) -> None:
        from adapters.apiserver import FakeApiServer
        from adapters.apiserver.api import Request

        self._request = Request
        self.scheduler = scheduler
        self.recorder = Recorder()
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}}
        self.server = FakeApiServer([namespace, *(node_object(f"node-{i:04d}", i) for i in range(nodes))],
                                    kubelet_start_seconds=0.05, kubelet_grace_seconds=0.1, history_limit=50_000,
                                    bookmark_interval=5.0).start()
        self.server.store.add_listener(self._listen)
        self._tmp = tempfile.TemporaryDirectory()
        self.kubeconfig = self.server.kubeconfig_path(self._tmp.name)

    def _listen(self, key: str, event: str, obj: dict[str, Any], prev: Optional[dict[str, Any]]) -> None:
        if key == "pods" and event in ("ADDED", "MODIFIED"):
            self.recorder.pod_seen(obj, added=event == "ADDED")
        elif key == "events" and event == "ADDED":
            self.recorder.event_seen(obj)

    def create_pods(self, names: list[str], first_index: int = 0) -> None:
        for i, name in enumerate(names):
            self.create_pod(name, first_index + i)

    def create_pod(self, name: str, i: int) -> None:
        body = json.dumps(pod_object(name, i, self.namespace, self.scheduler)).encode()
        self.server.api.handle(self._request("POST", f"/api/v1/namespaces/{self.namespace}/pods", body=body))

    def delete_pods(self, names: list[str]) -> None:
        for name in names:
            self.server.api.handle(self._request(
                "DELETE", f"/api/v1/namespaces/{self.namespace}/pods/{name}", query={"gracePeriodSeconds": "0"}))

    def close(self) -> None:
        self.server.stop()
        self._tmp.cleanup()


class ClusterTarget:
    """A real API server: fake Ready nodes and a namespace of its own, all deleted on `close`."""

    CREATE_THREADS = 8  # pod creations in flight for a burst (one client, pooled connections)
    HEARTBEAT_SECONDS = 20.0  # how often the fake nodes' Ready condition is refreshed

    def __init__(self, kubeconfig: str, nodes: int, scheduler: str, *, context: Optional[str] = None) -> None:
        from kubernetes import client, config

        from adapters.live.api_client import credentials_refused
        from adapters.live.kubeconfig import check_kubeconfig

        self.run = uuid.uuid4().hex[:8]
        self.namespace = f"cpsat-bench-{self.run}"
        self.scheduler = scheduler
        self.kubeconfig = kubeconfig
        self.recorder = Recorder()
        configuration = client.Configuration()
        check_kubeconfig(kubeconfig)  # a file of the wrong shape named by its field, as every command does
        try:
            config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=configuration,
                                    persist_config=False)
        except Exception as exc:  # noqa: BLE001 - the loader's errors vary (``credentials_refused`` cuts the file's content)
            raise credentials_refused(kubeconfig, exc) from None
        configuration.connection_pool_maxsize = self.CREATE_THREADS * 2
        self.api_client = client.ApiClient(configuration)
        self.core = client.CoreV1Api(self.api_client)
        self.node_names = [f"cpsat-bench-{self.run}-{i:04d}" for i in range(nodes)]
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._pool = ThreadPoolExecutor(self.CREATE_THREADS, thread_name_prefix="bench-create")
        self._made = False  # the namespace exists: from then on, `close` has something to delete
        self._made_nodes = False  # one node at least was created (a user may make namespaces, not nodes)
        try:
            self.core.create_namespace(_body({"apiVersion": "v1", "kind": "Namespace",
                                              "metadata": {"name": self.namespace, "labels": {RUN_LABEL: self.run}}}))
            self._made = True
            self._default_service_account()
            list(self._pool.map(self._create_node, range(nodes)))
            for target in (self._watch_pods, self._watch_events, self._heartbeat):
                thread = threading.Thread(target=target, name=f"bench-{target.__name__}", daemon=True)
                thread.start()
                self._threads.append(thread)
        except BaseException as exc:
            self.close()
            if isinstance(exc, Exception) and not isinstance(exc, InputError):
                # No namespace or nodes of the run, or no server: the user's setup, said in a line.
                raise InputError(kubeconfig, "", f"cannot set up the bench on {configuration.host}: "
                                 f"{_first_line(exc)}") from None
            raise
        print(f"[bench] created namespace {self.namespace} and {nodes} fake nodes labelled {RUN_LABEL}={self.run}",
              file=sys.stderr)

    def _default_service_account(self) -> None:
        """The namespace's `default` service account, which the ServiceAccount admission plugin
        wants before it admits a pod: a controller-manager makes it soon after the namespace; a
        control plane without one (the e2e tier's) never does."""
        from kubernetes.client.exceptions import ApiException

        try:
            self.core.create_namespaced_service_account(self.namespace, _body({"metadata": {"name": "default"}}))
        except ApiException as exc:
            if exc.status not in (404, 409):   # 404: a server without service accounts needs none
                raise

    def _create_node(self, i: int) -> None:
        name = self.node_names[i]
        self.core.create_node(_body(node_object(name, i, run=self.run)))
        self._made_nodes = True
        # Some API servers drop a node's status on create: set it through the status subresource.
        self.core.patch_node_status(name, {"status": node_status()})

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.HEARTBEAT_SECONDS):
            for name in self.node_names:
                if self._stop.is_set():
                    return
                try:
                    self.core.patch_node_status(name, {"status": {"conditions": node_status()["conditions"]}})
                except Exception:  # noqa: BLE001 - a missed heartbeat only risks a taint the pods tolerate
                    pass

    def _watch_pods(self) -> None:
        self._watch(self.core.list_namespaced_pod, lambda t, o: self.recorder.pod_seen(o, added=t == "ADDED"))

    def _watch_events(self) -> None:
        self._watch(self.core.list_namespaced_event, lambda t, o: self.recorder.event_seen(o) if t == "ADDED" else None)

    def _watch(self, list_call: Any, handle: Any) -> None:
        from kubernetes import watch

        version = ""
        while not self._stop.is_set():
            try:
                if not version:
                    listed = self.api_client.sanitize_for_serialization(list_call(self.namespace))
                    for obj in listed.get("items", []):
                        handle("ADDED", obj)
                    version = listed["metadata"]["resourceVersion"]
                stream = watch.Watch().stream(list_call, self.namespace, resource_version=version,
                                              timeout_seconds=30, _preload_content=False)
                for event in stream:
                    if self._stop.is_set():
                        return
                    obj = event["raw_object"]
                    version = obj.get("metadata", {}).get("resourceVersion", version)
                    if event["type"] in ("ADDED", "MODIFIED"):
                        handle(event["type"], obj)
            except Exception as exc:  # noqa: BLE001 - a dropped watch is listed again
                if self._stop.is_set():
                    return
                log.debug("bench watch restarts: %s", exc)
                version = ""
                time.sleep(0.5)

    def create_pods(self, names: list[str], first_index: int = 0) -> None:
        list(self._pool.map(lambda item: self.create_pod(item[1], first_index + item[0]), enumerate(names)))

    def create_pod(self, name: str, i: int) -> None:
        self.core.create_namespaced_pod(self.namespace, _body(pod_object(name, i, self.namespace, self.scheduler,
                                                                         run=self.run)))

    def delete_pods(self, names: list[str]) -> None:
        # No kubelet confirms a graceful deletion on a fake node: gracePeriodSeconds=0.
        self.core.delete_collection_namespaced_pod(self.namespace, grace_period_seconds=0)

    def close(self) -> None:
        """Delete the pods, the namespace and the nodes this run created (safe to call twice);
        nothing when the namespace was never made (nor, then, any node)."""
        self._stop.set()
        steps = (("pods", lambda: self.core.delete_collection_namespaced_pod(self.namespace, grace_period_seconds=0)),
                 ("namespace", lambda: self.core.delete_namespace(self.namespace)),
                 ("nodes", lambda: self.core.delete_collection_node(label_selector=f"{RUN_LABEL}={self.run}")))
        errors = []
        for what, call in steps if self._made else ():
            if what == "nodes" and not self._made_nodes:
                continue
            try:
                call()
            except Exception as exc:  # noqa: BLE001 - clean up what can be, then say what could not
                status = getattr(exc, "status", None)
                if status != 404:
                    errors.append(f"{what}: {type(exc).__name__} {status or ''}".strip())
        self._pool.shutdown(wait=False)
        for thread in self._threads:
            thread.join(2.0)
        self.api_client.close()
        if not self._made:
            return
        if errors:
            print(f"[bench] cleanup incomplete ({'; '.join(errors)}): delete namespace {self.namespace} and nodes "
                  f"labelled {RUN_LABEL}={self.run} by hand", file=sys.stderr)
        else:
            nodes = f"the {len(self.node_names)} fake nodes" if self._made_nodes else "no node (none was made)"
            print(f"[bench] deleted namespace {self.namespace} and {nodes}", file=sys.stderr)


def _first_line(exc: BaseException) -> str:
    """An API or connection error in one line: the status and reason of an HTTP answer (its body
    may be a whole Status object), else the error's own first line."""
    status, reason = getattr(exc, "status", None), getattr(exc, "reason", None)
    if isinstance(status, int) and status:
        return f"{status} {reason or ''}".strip() + (" (the bench needs rights to create and delete nodes, "
                                                     "namespaces and pods)" if status in (401, 403) else "")
    if isinstance(reason, Exception):  # urllib3's MaxRetryError: what the last attempt met
        exc = reason
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def process_cpu_seconds(pid: int) -> Optional[float]:
    """User + system CPU time of a running process (Linux /proc), or None where unavailable."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None

"""The little bit of cluster behaviour a scheduler observes after it writes.

A real cluster answers a bind with a kubelet that starts the pod, answers a graceful
delete with a kubelet that stops it and removes it, and keeps PodDisruptionBudget
status current through the disruption controller. A scheduler's correctness depends on
those reactions (terminating pods still hold resources; an eviction uses up a budget),
so this module simulates them, small and deterministic:

- `Kubelet`: a bound pod on an existing node becomes Running (startTime, Ready and the
  other conditions, container statuses) after `start_seconds`; a pod with a
  `deletionTimestamp` is removed after `grace_seconds` (it does this for pods on missing
  nodes too, standing in for the pod garbage collector). A delay of 0 acts at once,
  inside the write that triggered it.
- `DisruptionController`: recomputes each PDB's status whenever a pod or the PDB changes.
  Healthy = phase Running, Ready (or no Ready condition at all), not terminating, not in
  `disruptedPods`. Without workload controllers to ask for a scale, `expectedPods` is
  the number of matching pods.

Delayed actions run on `Timers`, one daemon thread started on first use.
"""

from __future__ import annotations

import calendar
import copy
import heapq
import itertools
import logging
import math
import threading
import time
from typing import Any, Callable

from .selectors import match_label_selector
from .store import DELETED, Store

log = logging.getLogger(__name__)

# an entry in a PDB's disruptedPods is forgotten after this long, as the real controller does
DISRUPTED_POD_TTL_SECONDS = 120.0


def now_rfc3339(offset_seconds: float = 0.0) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + offset_seconds))


def _parse_rfc3339(text: str) -> float:
    try:
        return float(calendar.timegm(time.strptime(text[:19], "%Y-%m-%dT%H:%M:%S")))
    except (ValueError, TypeError):
        return 0.0


def set_condition(status: dict[str, Any], ctype: str, value: str, **extra: Any) -> None:
    """Set a condition by type, moving lastTransitionTime only when the status flips."""
    conditions = status.setdefault("conditions", [])
    for cond in conditions:
        if cond.get("type") == ctype:
            if cond.get("status") != value:
                cond["lastTransitionTime"] = now_rfc3339()
            cond["status"] = value
            for k in ("reason", "message"):
                cond.pop(k, None)
            cond.update(extra)
            return
    conditions.append({"type": ctype, "status": value, "lastProbeTime": None,
                       "lastTransitionTime": now_rfc3339(), **extra})


def condition_status(obj: dict[str, Any], ctype: str) -> str | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == ctype:
            return cond.get("status")
    return None


def is_terminating(pod: dict[str, Any]) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def is_healthy(pod: dict[str, Any]) -> bool:
    """Counts towards a PodDisruptionBudget: Running, Ready, not terminating."""
    if is_terminating(pod) or (pod.get("status") or {}).get("phase") != "Running":
        return False
    return condition_status(pod, "Ready") in (None, "True")


class Timers:
    """Run callables after a delay on one daemon thread; `stop()` never hangs."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None
        self._stopped = False

    def call_later(self, delay: float, fn: Callable[[], None]) -> None:
        with self._cond:
            if self._stopped:
                return
            heapq.heappush(self._heap, (time.monotonic() + delay, next(self._seq), fn))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="fake-apiserver-timers", daemon=True)
                self._thread.start()
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopped and (not self._heap or self._heap[0][0] > time.monotonic()):
                    timeout = self._heap[0][0] - time.monotonic() if self._heap else None
                    self._cond.wait(timeout)
                if self._stopped:
                    self._thread = None
                    return
                _, _, fn = heapq.heappop(self._heap)
            try:
                fn()
            except Exception:  # a simulated controller must not take the server down
                log.exception("fake apiserver: delayed action failed")

    def resume(self) -> None:
        """Accept work again after `stop()` (the thread starts on the next call_later)."""
        with self._cond:
            if self._thread is not None and not self._thread.is_alive():
                self._thread = None
            self._stopped = False

    def stop(self, timeout: float = 2.0) -> None:
        with self._cond:
            self._stopped = True
            self._heap.clear()
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)


class Kubelet:
    """Starts bound pods and finishes graceful deletions, after configurable delays."""

    def __init__(self, store: Store, timers: Timers, *, start_seconds: float, grace_seconds: float) -> None:
        self._store = store
        self._timers = timers
        self.start_seconds = start_seconds
        self.grace_seconds = grace_seconds
        # Pods whose containers start but never pass readiness (a crash loop, a failing probe):
        # Running, with Ready and ContainersReady False. None: every pod becomes Ready.
        self.never_ready: Callable[[dict[str, Any]], bool] | None = None
        self._starting: set[str] = set()  # uids with a start already scheduled
        store.add_listener(self.on_change)

    def _needs_start(self, pod: dict[str, Any]) -> bool:
        spec, status = pod.get("spec") or {}, pod.get("status") or {}
        return (
            bool(spec.get("nodeName"))
            and status.get("phase", "Pending") in ("", "Pending")
            and not is_terminating(pod)
            and self._store.peek("nodes", "", spec["nodeName"]) is not None
        )

    def on_change(self, key: str, type_: str, obj: dict[str, Any], prev: dict[str, Any] | None) -> None:
        if type_ == DELETED:
            return
        if key == "nodes":
            for pod in list(self._store.items("pods")):
                if (pod.get("spec") or {}).get("nodeName") == obj["metadata"]["name"]:
                    self._maybe_start(pod)
        elif key == "pods":
            self._maybe_start(obj)
            if is_terminating(obj) and not (prev is not None and is_terminating(prev)):
                self._after(self.grace_seconds, self._finish_deletion, obj)

    def _maybe_start(self, pod: dict[str, Any]) -> None:
        uid = pod["metadata"].get("uid", "")
        if uid not in self._starting and self._needs_start(pod):
            self._starting.add(uid)
            self._after(self.start_seconds, self._start, pod)

    def _after(self, delay: float, action: Callable[[str, str, str], None], pod: dict[str, Any]) -> None:
        m = pod["metadata"]
        args = (m.get("uid", ""), m.get("namespace", ""), m["name"])
        if delay <= 0:
            action(*args)
        else:
            self._timers.call_later(delay, lambda: action(*args))

    def _current(self, uid: str, namespace: str, name: str) -> dict[str, Any] | None:
        pod = self._store.peek("pods", namespace, name)
        return pod if pod is not None and pod["metadata"].get("uid") == uid else None

    def _start(self, uid: str, namespace: str, name: str) -> None:
        with self._store.lock:
            self._starting.discard(uid)
            pod = self._current(uid, namespace, name)
            if pod is None or not self._needs_start(pod):
                return
            pod = copy.deepcopy(pod)
            now = now_rfc3339()
            status = pod.setdefault("status", {})
            status["phase"] = "Running"
            status.setdefault("startTime", now)
            node = self._store.peek("nodes", "", pod["spec"]["nodeName"]) or {}
            for addr in (node.get("status") or {}).get("addresses") or []:
                if addr.get("type") == "InternalIP":
                    status["hostIP"] = addr.get("address")
            ready = not (self.never_ready is not None and self.never_ready(pod))
            for ctype in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"):
                set_condition(status, ctype, "True" if ready or ctype not in ("Ready", "ContainersReady") else "False")
            status["containerStatuses"] = [
                {
                    "name": c.get("name"),
                    "image": c.get("image", ""),
                    "imageID": "",
                    "containerID": f"fake://{uid[:8]}-{c.get('name')}",
                    "ready": ready,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": now}},
                }
                for c in (pod.get("spec") or {}).get("containers") or []
            ]
            self._store.update("pods", pod)

    def _finish_deletion(self, uid: str, namespace: str, name: str) -> None:
        with self._store.lock:
            pod = self._current(uid, namespace, name)
            if pod is not None and is_terminating(pod):
                self._store.delete("pods", namespace, name)


class DisruptionController:
    """Keeps PodDisruptionBudget status in step with the pods it selects."""

    def __init__(self, store: Store) -> None:
        self._store = store
        store.add_listener(self.on_change)

    def on_change(self, key: str, type_: str, obj: dict[str, Any], prev: dict[str, Any] | None) -> None:
        if key == "pods":
            namespace = obj["metadata"].get("namespace", "")
            for pdb in list(self._store.items("poddisruptionbudgets", namespace)):
                self.sync(pdb)
        elif key == "poddisruptionbudgets" and type_ != DELETED:
            self.sync(obj)

    def sync(self, pdb: dict[str, Any]) -> None:
        with self._store.lock:
            m = pdb["metadata"]
            current = self._store.peek("poddisruptionbudgets", m.get("namespace", ""), m["name"])
            if current is None:
                return
            status = compute_status(current, list(self._store.items("pods", m.get("namespace", ""))))
            if status != current.get("status"):
                updated = copy.deepcopy(current)
                updated["status"] = status
                self._store.update("poddisruptionbudgets", updated)


def _scaled(value: Any, total: int) -> int:
    """An int-or-percent of `total`, rounding up as the disruption controller does."""
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(int(value[:-1]) * total / 100)
    return int(value)


def compute_status(pdb: dict[str, Any], namespace_pods: list[dict[str, Any]]) -> dict[str, Any]:
    """The status the disruption controller would write for `pdb`."""
    spec = pdb.get("spec") or {}
    old = copy.deepcopy(pdb.get("status") or {})
    pods = [p for p in namespace_pods
            if match_label_selector(spec.get("selector"), (p.get("metadata") or {}).get("labels") or {})]
    alive = {p["metadata"]["name"] for p in pods if not is_terminating(p)}
    disrupted = {
        name: ts for name, ts in (old.get("disruptedPods") or {}).items()
        if name in alive and time.time() - _parse_rfc3339(ts) < DISRUPTED_POD_TTL_SECONDS
    }
    healthy = sum(1 for p in pods if is_healthy(p) and p["metadata"]["name"] not in disrupted)
    expected = len(pods)
    if spec.get("minAvailable") is not None:
        desired = _scaled(spec["minAvailable"], expected)
    elif spec.get("maxUnavailable") is not None:
        desired = max(0, expected - _scaled(spec["maxUnavailable"], expected))
    else:
        desired = 0
    allowed = healthy - desired if expected > 0 and healthy > desired else 0
    status: dict[str, Any] = {
        "observedGeneration": (pdb.get("metadata") or {}).get("generation", 1),
        "disruptionsAllowed": allowed,
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": expected,
    }
    if disrupted:
        status["disruptedPods"] = disrupted
    status["conditions"] = old.get("conditions") or []
    if allowed > 0:
        set_condition(status, "DisruptionAllowed", "True", reason="SufficientPods", message="")
    else:
        set_condition(status, "DisruptionAllowed", "False", reason="InsufficientPods", message="")
    for cond in status["conditions"]:
        cond.pop("lastProbeTime", None)
        if cond.get("type") == "DisruptionAllowed":
            cond["observedGeneration"] = status["observedGeneration"]
    return status


class ReplicaControllers:
    """ReplicaSet and StatefulSet controllers, reduced to what a re-packing run observes: a pod
    they own that is deleted (an eviction ends in a deletion) is replaced, after `delay`, by a
    new pending pod with the same template — under a new name for a ReplicaSet, under the same
    name for a StatefulSet. Nothing is scaled and no controller object is read: the owner
    reference of the deleted pod is the template. Off unless the server is asked for it."""

    KINDS = ("ReplicaSet", "StatefulSet")
    ALPHABET = "bcdfghjklmnpqrstvwxz2456789"

    def __init__(self, store: Store, timers: Timers, *, delay: float = 0.05) -> None:
        self._store = store
        self._timers = timers
        self.delay = delay
        self._names = itertools.count()
        store.add_listener(self.on_change)

    def on_change(self, key: str, type_: str, obj: dict[str, Any], prev: dict[str, Any] | None) -> None:
        if key != "pods" or type_ != DELETED:
            return
        owner = next((r for r in obj["metadata"].get("ownerReferences") or []
                      if r.get("controller") and r.get("kind") in self.KINDS), None)
        if owner is not None:
            gone = copy.deepcopy(obj)
            self._timers.call_later(self.delay, lambda: self._replace(gone, owner))

    def _replace(self, gone: dict[str, Any], owner: dict[str, Any]) -> None:
        m = gone["metadata"]
        namespace = m.get("namespace", "")
        if owner["kind"] == "StatefulSet":
            name = m["name"]
        else:
            n = next(self._names)
            suffix = "".join(self.ALPHABET[(n * 7 + i * 13) % len(self.ALPHABET)] for i in range(5))
            name = f"{owner['name']}-{suffix}"
        spec = copy.deepcopy(gone.get("spec") or {})
        spec.pop("nodeName", None)
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": dict(m.get("labels") or {}),
                "annotations": dict(m.get("annotations") or {}),
                "ownerReferences": copy.deepcopy(m.get("ownerReferences") or []),
                "creationTimestamp": now_rfc3339(),
            },
            "spec": spec,
            "status": {"phase": "Pending"},
        }
        with self._store.lock:
            if self._store.peek("pods", namespace, name) is None:
                self._store.create("pods", pod)


class ResourceClaimController:
    """kube-controller-manager's resourceclaim controller, reduced to what a scheduler waits for:
    a pod whose ``spec.resourceClaims`` entry names a ResourceClaimTemplate gets, after `delay`,
    a ResourceClaim made from the template — named ``<pod>-<entry>-`` plus five random characters
    (both parts cut in proportion past 57 characters), owned by the pod (``controller: true``),
    annotated ``resource.kubernetes.io/pod-claim-name: <entry>`` — and the entry in its
    ``status.resourceClaimStatuses``. A template created later is looked for again then.

    1.37's group-owned claims (KEP-5729): a v1beta1 PodGroup's ``spec.resourceClaims`` entry
    naming a template gets one claim, named ``<group>-<entry>-`` and the five characters, owned
    by the group, annotated ``resource.kubernetes.io/podgroup-claim-name: <entry>``, and named in
    the group's ``status.resourceClaimStatuses``. A member's entry of the same name and template
    is the group's: no claim of its own is made for it (the scheduler points it at the group's).
    Nothing is deallocated or deleted. Off unless the server is asked for it."""

    POD_CLAIM_NAME = "resource.kubernetes.io/pod-claim-name"
    GROUP_CLAIM_NAME = "resource.kubernetes.io/podgroup-claim-name"
    # Where 1.37's PodGroups are stored (resources.PODGROUPS_V1BETA1): the only ones owning claims.
    GROUPS = "podgroups.v1beta1.scheduling.k8s.io"
    ALPHABET = "bcdfghjklmnpqrstvwxz2456789"

    def __init__(self, store: Store, timers: Timers, *, delay: float = 0.02) -> None:
        self._store = store
        self._timers = timers
        self.delay = delay
        self._names = itertools.count(1)
        store.add_listener(self.on_change)

    def _wanted(self, pod: dict[str, Any]) -> bool:
        if is_terminating(pod):
            return False
        made = {s.get("name") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
        return any(e.get("resourceClaimTemplateName") and e.get("name") not in made and not self._groups(pod, e)
                   for e in (pod.get("spec") or {}).get("resourceClaims") or [])

    def _groups(self, pod: dict[str, Any], entry: dict[str, Any]) -> bool:
        """Whether `entry` of `pod` is its PodGroup's: the group lists one of the same name and template."""
        group_name = ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
        if not group_name:
            return False
        group = self._store.peek(self.GROUPS, pod["metadata"].get("namespace", ""), group_name)
        return group is not None and any(
            e.get("name") == entry.get("name") and e.get("resourceClaimTemplateName") == entry["resourceClaimTemplateName"]
            for e in (group.get("spec") or {}).get("resourceClaims") or [])

    def on_change(self, key: str, type_: str, obj: dict[str, Any], prev: dict[str, Any] | None) -> None:
        if type_ == DELETED:
            return
        if key in ("pods", self.GROUPS) and self._wanted(obj):
            self._later(key, obj)
        elif key == "resourceclaimtemplates":
            namespace = obj["metadata"].get("namespace", "")
            for owners in (self.GROUPS, "pods"):  # a group's claim before its members' own
                for owner in list(self._store.items(owners, namespace)):
                    if self._wanted(owner):
                        self._later(owners, owner)

    def _later(self, key: str, owner: dict[str, Any]) -> None:
        m = owner["metadata"]
        uid, namespace, name = m.get("uid", ""), m.get("namespace", ""), m["name"]
        self._timers.call_later(self.delay, lambda: self._make(key, uid, namespace, name))

    def _claim_name(self, pod: str, entry: str) -> str:
        base, limit = f"{pod}-{entry}-", 57
        if len(base) > limit:
            total = len(base)
            base = f"{pod[: len(pod) * limit // total]}-{entry[: len(entry) * limit // total]}-"
        n = next(self._names)
        return base + "".join(self.ALPHABET[(n * 7 + i * 11) % len(self.ALPHABET)] for i in range(5))

    def _make(self, key: str, uid: str, namespace: str, name: str) -> None:
        """The claims of owner `name` (a pod, or a PodGroup when `key` is GROUPS) not made yet."""
        with self._store.lock:
            pod = self._store.peek(key, namespace, name)
            if pod is None or pod["metadata"].get("uid") != uid or not self._wanted(pod):
                return
            is_group = key == self.GROUPS
            annotation = self.GROUP_CLAIM_NAME if is_group else self.POD_CLAIM_NAME
            owner_ref = {"apiVersion": pod.get("apiVersion", "v1"), "kind": pod.get("kind", "Pod")}
            statuses = list((pod.get("status") or {}).get("resourceClaimStatuses") or [])
            made = {s.get("name") for s in statuses}
            for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
                template_name = entry.get("resourceClaimTemplateName")
                if not template_name or entry.get("name") in made or self._groups(pod, entry):
                    continue
                template = self._store.peek("resourceclaimtemplates", namespace, template_name)
                if template is None:
                    continue  # made when the template appears
                body = (template.get("spec") or {})
                extra = body.get("metadata") or {}
                claim_name = self._claim_name(name, entry["name"])
                self._store.create("resourceclaims", {
                    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                    "metadata": {"name": claim_name, "namespace": namespace,
                                 "labels": dict(extra.get("labels") or {}),
                                 "annotations": {**(extra.get("annotations") or {}), annotation: entry["name"]},
                                 "ownerReferences": [{**owner_ref, "name": name, "uid": uid,
                                                      "controller": True, "blockOwnerDeletion": True}],
                                 "creationTimestamp": now_rfc3339()},
                    "spec": copy.deepcopy(body.get("spec") or {})})
                statuses.append({"name": entry["name"], "resourceClaimName": claim_name})
            if len(statuses) == len(made):
                return
            pod = copy.deepcopy(pod)
            pod.setdefault("status", {})["resourceClaimStatuses"] = statuses
            self._store.update(key, pod)

"""Dynamic Resource Allocation in the live scheduler: the DynamicResources plugin's PreBind.

kube-scheduler allocates a pod's ResourceClaims in memory while it decides (Reserve), and
writes them before the pod's binding (PreBind): each claim it allocated gets its
``resource.kubernetes.io/delete-protection`` finalizer (an update of the claim), then one
update of ``resourceclaims/status`` sets ``status.allocation`` and adds the pod to
``status.reservedFor``; a claim allocated already (shared by several pods, or allocated for
an earlier try) only gets the pod added to ``reservedFor``. The kubelet prepares the devices
of the claims that list the pod there. Only then is the pod bound. This module does the same:

- `ClaimOverlay`: what the cache shows of claims a window allocated whose write the watch does
  not show yet, so no later window hands their devices out again (kube-scheduler's assume
  cache of claims plays this part);
- `ClaimWriter`: the writes, read-modify-write with the claim's resourceVersion: a 409 Conflict
  (someone changed the claim since it was read: the resourceclaim controller, another pod's
  PreBind of the same window) reads it again and decides again on what it holds now — never a
  blind overwrite;
- `ClaimWriter.release`: kube-scheduler's Unreserve for a pod whose binding failed: its
  ``reservedFor`` entry is removed, and so is the allocation when this scheduler wrote it and
  nobody else is in ``reservedFor`` now (then the finalizer goes with it, as the resourceclaim
  controller removes it when it deallocates).

Claims made from a ResourceClaimTemplate are made by kube-controller-manager's resourceclaim
controller, as with kube-scheduler: this scheduler does not make them; a pod whose claim is not
made yet waits (``ClusterSnapshot.claims_from_templates`` is false for the live cache).

The one claim this scheduler makes is kube-scheduler's own (DRAExtendedResource, beta in 1.36):
a pod asking in its containers' resources for an extended resource that a DeviceClass backs
(``models.dra.back_extended_resources``) gets, in PreBind, a claim created with generateName
``<pod>-extended-resources-``, the pod as its controlling owner, the annotation
``resource.kubernetes.io/extended-resource-claim: "true"`` and one ExactCount request per
container and resource (``container-<i>-request-<j>``); it is then written like any other claim
(finalizer, allocation, reservedFor), and the pod's ``status.extendedResourceClaimStatus``
(the claim's name and which request serves which container's resource) is patched through
``pods/status`` before the binding. Unreserve deletes such a claim (its finalizer removed
first), as kube-scheduler does: a failed write or bind leaves nothing behind. Until the watch
shows the made claim allocated, the cache shows it under its generateName (a name no real
claim can have: it ends in ``-``), so its devices are not handed out twice.
"""

from __future__ import annotations

import copy
import logging
import threading
from typing import Any, Callable, Iterable, Optional, Sequence

from models.dra import EXTENDED_CLAIM_ANNOTATION, EXTENDED_CLAIM_ENTRY, AllocationResult, ClaimUse, ResourceClaim, \
    ResourceClaimSpec, ResourceClaimStatus, extended_claim, template_claim_name
from models.objects import ObjectMeta

from .errors import Conflict, KubeError, NotFound
from .api_client import KubeApi, Permission, call_client
from .retry import call_with_retries

log = logging.getLogger(__name__)

GROUP, VERSION, PLURAL = "resource.k8s.io", "v1", "resourceclaims"
# Set on a claim before its allocation is written; the resourceclaim controller removes it
# when it deallocates the claim (a claim being deleted stays until nobody uses its devices).
FINALIZER = "resource.kubernetes.io/delete-protection"
# How many times a claim changed under a write (409) is read again before the pod gives up.
CONFLICT_ATTEMPTS = 5
# The API server's limit on status.reservedFor.
RESERVED_FOR_MAX = 256

# client method -> the (API group, resource, verb) the API server authorises it as (the
# generic custom-object calls reach resource.k8s.io/v1 at the URL the typed client uses).
API_CALLS: dict[str, tuple[Permission, ...]] = {
    "get_namespaced_custom_object": ((GROUP, PLURAL, "get"),),
    "replace_namespaced_custom_object": ((GROUP, PLURAL, "update"),),
    # the claim kube-scheduler makes for extended resources backed by DRA, and its Unreserve
    "create_namespaced_custom_object": ((GROUP, PLURAL, "create"),),
    "delete_namespaced_custom_object": ((GROUP, PLURAL, "delete"),),
    # kube-apiserver (1.36) also checks, when status.allocation or status.reservedFor change,
    # that the writer may `update` the synthetic resource `resourceclaims/binding` (cluster-wide):
    # without it the write is refused as Invalid ("... requires resource=resourceclaims/binding").
    "replace_namespaced_custom_object_status": ((GROUP, f"{PLURAL}/status", "update"),
                                                (GROUP, f"{PLURAL}/binding", "update")),
}


class ClaimWriteError(Exception):
    """A claim cannot be written for the pod as decided (gone, made again, allocated other
    devices meanwhile): the pod goes back to the queue and is decided again."""


def _made_key(key: str) -> bool:
    """A generateName standing for a claim this scheduler makes (no real name ends in ``-``)."""
    return key.endswith("-")


def _devices(allocation: Any) -> frozenset[tuple[str, str, str, str]]:
    results = ((allocation or {}).get("devices") or {}).get("results") or []
    return frozenset((str(r.get("request")), str(r.get("driver")), str(r.get("pool")), str(r.get("device")))
                     for r in results if isinstance(r, dict))


# --- what the cache shows ----------------------------------------------------------------------

class ClaimOverlay:
    """Claims allocated by a window and not yet seen allocated by the watch, with the pods that
    count on them. Used under the cache's lock."""

    def __init__(self) -> None:
        self._held: dict[str, tuple[AllocationResult, set[str]]] = {}

    def assume(self, pod: str, uses: Iterable[tuple[str, Optional[dict[str, Any]]]],
               watched: dict[str, ResourceClaim]) -> None:
        for key, allocation in uses:
            if allocation is None:
                continue
            current = None if _made_key(key) else watched.get(key)
            if current is not None and current.status.allocation is not None:
                continue  # the watch shows it allocated: that is what counts
            held = self._held.get(key)
            if held is None:
                self._held[key] = (AllocationResult.model_validate(allocation), {pod})
            else:
                held[1].add(pod)

    def forget(self, pod: str) -> None:
        """Pod `pod`'s assumption ended without a bind: its claims are not shown allocated."""
        for key in [k for k, (_, pods) in self._held.items() if pod in pods]:
            pods = self._held[key][1]
            pods.discard(pod)
            if not pods:
                del self._held[key]

    def seen(self, key: str, claim: Optional[ResourceClaim],
             pod_uid: Callable[[str], str] = lambda _: "") -> None:
        """The watch showed claim `key` (None: deleted): allocated or gone, the overlay ends. A
        claim this scheduler made, seen allocated, ends what stood for it under its generateName
        when it is the claim of that very pod (``pod_uid``: the uid of the pod the cache holds
        under a key, "" unknown): a claim made for an earlier pod of the same name (deleted and
        made again, as a StatefulSet's) is not the new pod's, and its devices are not."""
        if key in self._held and (claim is None or claim.status.allocation is not None):
            del self._held[key]
        if claim is not None and claim.status.allocation is not None and self._held \
                and claim.metadata.annotations.get(EXTENDED_CLAIM_ANNOTATION) == "true":
            ns = claim.metadata.namespace
            for ref in claim.metadata.owner_references:
                uid = pod_uid(f"{ns}/{ref.name}") if ref.kind == "Pod" else ""
                if ref.kind == "Pod" and ref.controller and (not uid or not ref.uid or ref.uid == uid):
                    self._held.pop(f"{ns}/{template_claim_name(ref.name, EXTENDED_CLAIM_ENTRY)}", None)

    def held(self, key: str) -> bool:
        return key in self._held

    def view(self, watched: dict[str, ResourceClaim]) -> list[ResourceClaim]:
        """The watched claims, those a window allocated shown with their allocation."""
        if not self._held:
            return list(watched.values())
        out = []
        for key, (allocation, _) in self._held.items():
            if _made_key(key):  # made by this scheduler, not seen yet: it holds its devices
                ns, name = key.split("/", 1)
                out.append(ResourceClaim.model_construct(
                    api_version=f"{GROUP}/{VERSION}", kind="ResourceClaim",
                    metadata=ObjectMeta(name=name, namespace=ns, annotations={EXTENDED_CLAIM_ANNOTATION: "true"}),
                    spec=ResourceClaimSpec(), status=ResourceClaimStatus(allocation=allocation)))
        for key, claim in watched.items():
            held = self._held.get(key)
            if held is not None and claim.status.allocation is None:
                status = claim.status.model_copy(update={"allocation": held[0]})
                claim = claim.model_copy(update={"status": status})
            out.append(claim)
        return out


# --- the writes ----------------------------------------------------------------------------------

class ClaimWriter:
    """PreBind and Unreserve of a pod's claims. Every call is bounded-retried for what can heal
    (connections, 5xx, 429); a 409 reads the claim again."""

    def __init__(self, api: KubeApi, *, backoffs: Sequence[float], sleep: Callable[[float], None],
                 should_continue: Callable[[], bool]) -> None:
        self.api = api
        self.custom = api.custom  # the client's generic calls, made through api_client.py's API objects
        self.backoffs = backoffs
        self.sleep = sleep
        self.should_continue = should_continue
        self._lock = threading.Lock()
        # pod key -> (pod uid, [(claim key, whether this scheduler wrote its allocation, made it)])
        self._written: dict[str, tuple[str, list[tuple[str, bool, bool]]]] = {}

    # -- calls --

    def _retried(self, what: str, fn: Callable[[], Any]) -> Any:
        return call_with_retries(fn, what=what, backoffs=self.backoffs, sleep=self.sleep,
                                 should_continue=self.should_continue)

    def _get(self, key: str) -> dict[str, Any]:
        ns, name = key.split("/", 1)
        return self._retried(f"get resourceclaim {key}", lambda: call_client(
            f"get resourceclaim {key}", self.custom.get_namespaced_custom_object, GROUP, VERSION, ns, PLURAL, name))

    def _replace(self, key: str, obj: dict[str, Any]) -> dict[str, Any]:
        ns, name = key.split("/", 1)
        return self._retried(f"update resourceclaim {key}", lambda: call_client(
            f"update resourceclaim {key}", self.custom.replace_namespaced_custom_object, GROUP, VERSION, ns, PLURAL,
            name, obj))

    def _replace_status(self, key: str, obj: dict[str, Any]) -> dict[str, Any]:
        ns, name = key.split("/", 1)
        return self._retried(f"update status of resourceclaim {key}", lambda: call_client(
            f"update status of resourceclaim {key}", self.custom.replace_namespaced_custom_object_status, GROUP,
            VERSION, ns, PLURAL, name, obj))

    def _create(self, namespace: str, obj: dict[str, Any]) -> dict[str, Any]:
        what = f"create resourceclaim {namespace}/{obj['metadata'].get('generateName', '')}"
        # not retried: a create whose answer was lost would leave a second claim behind
        return call_client(what, self.custom.create_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL, obj)

    def _delete(self, key: str, uid: str) -> None:
        ns, name = key.split("/", 1)
        body = {"preconditions": {"uid": uid}} if uid else {}
        self._retried(f"delete resourceclaim {key}", lambda: call_client(
            f"delete resourceclaim {key}", self.custom.delete_namespaced_custom_object, GROUP, VERSION, ns, PLURAL,
            name, body=body))

    # -- PreBind --

    def reserve(self, pod_key: str, pod_uid: str, uses: Sequence[ClaimUse]) -> None:
        """Write each claim for the pod, in order (a claim to make is created first, and the
        pod's ``extendedResourceClaimStatus`` patched once it is written). Raises
        `ClaimWriteError` or `KubeError` at the first that fails; what was written (or made)
        before stays recorded for `release`."""
        ns, name = pod_key.split("/", 1)
        with self._lock:
            self._written[pod_key] = (pod_uid, [])
        for use in uses:
            if use.create is not None:
                made = self._create(ns, use.create)
                meta = made.get("metadata") or {}
                key = f"{ns}/{meta.get('name')}"
                with self._lock:
                    self._written[pod_key][1].append((key, True, True))
                log.info("created resourceclaim %s for the extended resources of %s", key, pod_key)
                self._reserve_one(ClaimUse(key, str(meta.get("uid") or ""), use.allocation), name, pod_uid)
                status = {"extendedResourceClaimStatus": {"resourceClaimName": meta.get("name"),
                                                          "requestMappings": [dict(m) for m in use.mappings]}}
                self._retried(f"patch extendedResourceClaimStatus of {pod_key}",
                              lambda: self.api.patch_pod_status(ns, name, status))
                continue
            wrote = self._reserve_one(use, name, pod_uid)
            with self._lock:
                self._written[pod_key][1].append((use.claim, wrote, False))

    def _reserve_one(self, use: ClaimUse, pod_name: str, pod_uid: str) -> bool:
        """Reserve one claim for the pod; True when this call wrote its allocation."""
        key = use.claim
        ref = {"resource": "pods", "name": pod_name, "uid": pod_uid}
        for _ in range(CONFLICT_ATTEMPTS):
            try:
                obj = self._get(key)
            except NotFound:
                raise ClaimWriteError(f"resourceclaim {key} is gone") from None
            meta = obj.get("metadata") or {}
            if use.uid and meta.get("uid") != use.uid:
                raise ClaimWriteError(f"resourceclaim {key} was deleted and made again since the decision")
            if meta.get("deletionTimestamp"):
                raise ClaimWriteError(f"resourceclaim {key} is being deleted")
            status = obj.setdefault("status", {})
            reserved = list(status.get("reservedFor") or [])
            mine = any(r.get("resource") == "pods" and r.get("uid") == pod_uid for r in reserved)
            allocation = status.get("allocation")
            try:
                if allocation is None:
                    if use.allocation is None:
                        raise ClaimWriteError(f"resourceclaim {key} is not allocated (its allocation is not written "
                                              "yet, or was taken back)")
                    finalizers = list(meta.get("finalizers") or [])
                    if FINALIZER not in finalizers:
                        meta["finalizers"] = [*finalizers, FINALIZER]
                        obj = self._replace(key, obj)
                        status = obj.setdefault("status", {})
                    status["allocation"] = copy.deepcopy(use.allocation)
                    status["reservedFor"] = [r for r in (status.get("reservedFor") or []) if r.get("uid") != pod_uid] \
                        + [ref]
                    self._replace_status(key, obj)
                    return True
                if use.allocation is not None and _devices(allocation) != _devices(use.allocation):
                    raise ClaimWriteError(f"resourceclaim {key} was allocated other devices meanwhile")
                if mine:
                    return False
                if len(reserved) >= RESERVED_FOR_MAX:
                    raise ClaimWriteError(f"resourceclaim {key} is reserved for {RESERVED_FOR_MAX} consumers already")
                status["reservedFor"] = [*reserved, ref]
                self._replace_status(key, obj)
                return False
            except Conflict:
                log.info("resourceclaim %s changed while it was written for %s; reading it again", key, pod_name)
                continue
        raise ClaimWriteError(f"resourceclaim {key} kept changing while it was written ({CONFLICT_ATTEMPTS} conflicts)")

    # -- after the bind --

    def settled(self, pod_key: str) -> None:
        """The pod is bound: its claims stay as written."""
        with self._lock:
            self._written.pop(pod_key, None)

    def has_written(self, pod_key: str) -> bool:
        with self._lock:
            return bool(self._written.get(pod_key, ("", []))[1])

    def release(self, pod_key: str) -> None:
        """Unreserve: the pod will not run where its claims were written for. Best effort: a
        failure is logged (the claim then still names the pod, which the next try reuses)."""
        with self._lock:
            pod_uid, written = self._written.pop(pod_key, ("", []))
        for key, wrote, made in reversed(written):
            try:
                if made:
                    self._remove(key)
                else:
                    self._release_one(key, pod_uid, wrote)
            except (KubeError, ClaimWriteError) as exc:
                log.warning("could not release resourceclaim %s of %s: %s", key, pod_key, exc)

    def _remove(self, key: str) -> None:
        """Unreserve of a claim this scheduler made: its finalizer off, then the claim deleted
        (as kube-scheduler deletes its extended-resource claim), so nothing is left behind."""
        for _ in range(CONFLICT_ATTEMPTS):
            try:
                obj = self._get(key)
            except NotFound:
                return
            if _strip_finalizer(obj):
                try:
                    obj = self._replace(key, obj)
                except Conflict:
                    continue
            try:
                self._delete(key, str((obj.get("metadata") or {}).get("uid") or ""))
            except NotFound:
                pass
            except Conflict:  # made again under the name meanwhile: not ours to delete
                return
            log.info("deleted resourceclaim %s (made for a pod that was not bound)", key)
            return
        raise ClaimWriteError(f"resourceclaim {key} kept changing while it was deleted")

    def _release_one(self, key: str, pod_uid: str, wrote: bool) -> None:
        cleared = False
        for _ in range(CONFLICT_ATTEMPTS):
            try:
                obj = self._get(key)
            except NotFound:
                return
            status = obj.setdefault("status", {})
            before = list(status.get("reservedFor") or [])
            reserved = [r for r in before if not (r.get("resource") == "pods" and r.get("uid") == pod_uid)]
            clear = wrote and not reserved and status.get("allocation") is not None
            if len(reserved) == len(before) and not clear:
                break
            if reserved:
                status["reservedFor"] = reserved
            else:
                status.pop("reservedFor", None)
            if clear:
                status.pop("allocation", None)
            try:
                self._replace_status(key, obj)
            except Conflict:
                continue
            cleared = clear
            log.info("released resourceclaim %s%s", key, " (allocation removed)" if clear else "")
            break
        else:
            raise ClaimWriteError(f"resourceclaim {key} kept changing while it was released")
        if not cleared:
            return
        for _ in range(CONFLICT_ATTEMPTS):  # deallocated: the finalizer has nothing left to protect
            try:
                obj = self._get(key)
            except NotFound:
                return
            if (obj.get("status") or {}).get("allocation") is not None or not _strip_finalizer(obj):
                return
            try:
                self._replace(key, obj)
                return
            except Conflict:
                continue


def _strip_finalizer(obj: dict[str, Any]) -> bool:
    """Take this scheduler's delete-protection finalizer off ``obj`` (a claim as read), in place;
    False when it had none."""
    meta = obj.get("metadata") or {}
    finalizers = list(meta.get("finalizers") or [])
    if FINALIZER not in finalizers:
        return False
    meta["finalizers"] = [f for f in finalizers if f != FINALIZER]
    return True

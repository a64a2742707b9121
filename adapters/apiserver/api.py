"""REST semantics of the fake API server, independent of HTTP.

`Api.handle` takes one parsed request and returns a `Response`, or a `WatchSpec` that the
HTTP layer streams. It owns what the real server's generic registry does for every
resource: routing by group/version/plural, list with selectors and paging, get,
create (201, AlreadyExists), update with optimistic concurrency, the three patch
formats, delete and the `status` subresource. What is special to
pods (admission, binding, eviction, graceful deletion) lives in `pods.py`, discovery
documents in `discovery.py`.
"""

from __future__ import annotations

import base64
import copy
import json
import random
import string
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from . import discovery, patches, pods
from .controllers import now_rfc3339
from .errors import (
    ApiError,
    already_exists,
    bad_request,
    invalid,
    not_found,
    resource_not_found,
    stale,
    status_object,
)
from .resources import NAMESPACES, PODS, Registry, Resource
from .selectors import Predicate, parse_field_selector, parse_label_selector
from .store import Store, meta

@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"
    body: bytes = b""


@dataclass
class Response:
    code: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class WatchSpec:
    """A watch the HTTP layer should stream."""

    resource: Resource
    namespace: str | None
    predicate: Predicate
    since: int | None  # None: start with ADDED for the current state
    bookmarks: bool
    timeout_seconds: float | None
    send_initial_events: bool


@dataclass
class Route:
    resource: Resource
    namespace: str | None
    name: str | None
    subresource: str | None


def _is_true(value: str | None) -> bool:
    return (value or "").lower() in ("true", "1")


def parse_json(body: bytes) -> Any:
    try:
        return json.loads(body or b"null")
    except ValueError as exc:
        raise bad_request(f"the body of the request could not be decoded as JSON: {exc}") from None


def parse_object(body: bytes) -> dict[str, Any]:
    obj = parse_json(body)
    if not isinstance(obj, dict):
        raise bad_request("the request body must be a JSON object")
    return obj


def _int_param(query: dict[str, str], name: str) -> int:
    try:
        return int(query[name])
    except ValueError:
        raise bad_request(f"invalid value for {name}: {query[name]!r}") from None


def check_kind(r: Resource, body: dict[str, Any]) -> None:
    """A body of another kind than the URL names is refused, as the real decoder does."""
    kind, api_version = body.get("kind"), body.get("apiVersion")
    if (kind and kind != r.kind) or (api_version and api_version != r.api_version):
        raise bad_request(f'{kind or r.kind} in version "{api_version or r.api_version}" cannot be handled as a '
                          f"{r.kind}: the object's apiVersion and kind must be {r.api_version} {r.kind}")


def _without_rv(obj: dict[str, Any]) -> dict[str, Any]:
    out = dict(obj)
    out["metadata"] = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "resourceVersion"}
    return out


def _spec_part(obj: dict[str, Any]) -> dict[str, Any]:
    """Everything generation tracks: the object without metadata and status."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "kind", "apiVersion")}


class Api:
    """One request in, one response (or watch) out."""

    def __init__(self, store: Store, registry: Registry, *, strict_namespaces: bool = True) -> None:
        self.store = store
        self.registry = registry
        self.strict_namespaces = strict_namespaces

    # --- routing ------------------------------------------------------------------------------

    def handle(self, req: Request) -> Response | WatchSpec:
        segments = [unquote(s) for s in req.path.strip("/").split("/") if s]
        if req.method == "GET":
            found = discovery.document(self.registry, segments)
            if found is not None:
                return Response(200, found)
        if "dryRun" in req.query:
            raise bad_request("dryRun is not supported by this fake API server")
        if req.method == "POST" and len(segments) == 5 and segments[:3] == ["api", "v1", "namespaces"] \
                and segments[4] == "bindings":  # the older, non-subresource way to bind
            binding = parse_object(req.body)
            name = (binding.get("metadata") or {}).get("name") or ""
            return Response(201, pods.bind(self, segments[3], name, binding))
        route = self._route(segments)
        return self._dispatch(req, route)

    def _route(self, segments: list[str]) -> Route:
        if len(segments) >= 3 and segments[0] == "api":
            group, version, rest = "", segments[1], segments[2:]
        elif len(segments) >= 4 and segments[0] == "apis":
            group, version, rest = segments[1], segments[2], segments[3:]
        else:
            raise resource_not_found()
        namespace = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            scoped = self.registry.by_url(group, version, rest[2])
            if scoped is not None and scoped.namespaced:
                namespace, rest = rest[1], rest[2:]
        resource = self.registry.by_url(group, version, rest[0])
        if resource is None or len(rest) > 3:
            raise resource_not_found()
        name = rest[1] if len(rest) > 1 else None
        subresource = rest[2] if len(rest) > 2 else None
        if resource.namespaced and namespace is None and name is not None:
            raise resource_not_found()
        return Route(resource, namespace, name, subresource)

    def _dispatch(self, req: Request, route: Route) -> Response | WatchSpec:
        r, ns, name, sub = route.resource, route.namespace, route.name, route.subresource
        method = req.method
        if sub is not None:
            if r is PODS and sub == "binding" and method == "POST":
                return Response(201, pods.bind(self, ns or "", name or "", parse_object(req.body)))
            if r is PODS and sub == "eviction" and method == "POST":
                return Response(201, pods.evict(self, ns or "", name or "", parse_object(req.body)))
            if sub != "status" or not r.status_subresource:
                raise resource_not_found()
            if method not in ("GET", "PUT", "PATCH"):
                raise ApiError(405, "the server does not allow this method on the requested resource", "MethodNotAllowed")
        if name is None:
            if method == "GET":
                return self.watch_spec(r, ns, req.query) if _is_true(req.query.get("watch")) else self.list(r, ns, req.query)
            if method == "POST":
                if r.namespaced and ns is None:
                    raise ApiError(405, "the server does not allow this method on the requested resource",
                                   "MethodNotAllowed")
                return self.create(r, ns, parse_object(req.body))
            if method == "DELETE":
                return self.delete_collection(r, ns, req.query)
        else:
            if method == "GET":
                if _is_true(req.query.get("watch")):
                    query = dict(req.query, fieldSelector=f"metadata.name={name}")
                    return self.watch_spec(r, ns, query)
                return self.get(r, ns, name)
            if method == "PUT":
                return self.update(r, ns, name, parse_object(req.body), sub)
            if method == "PATCH":
                return self.patch(r, ns, name, req.content_type, parse_json(req.body), sub)
            if method == "DELETE":
                options = parse_json(req.body) or {}
                if not isinstance(options, dict):
                    raise bad_request("DeleteOptions must be a JSON object")
                if "gracePeriodSeconds" in req.query:
                    options["gracePeriodSeconds"] = _int_param(req.query, "gracePeriodSeconds")
                return self.delete(r, ns, name, options)
        raise ApiError(405, "the server does not allow this method on the requested resource", "MethodNotAllowed")

    # --- reads --------------------------------------------------------------------------------

    def _selector(self, r: Resource, query: dict[str, str]) -> Predicate:
        labels = parse_label_selector(query.get("labelSelector"))
        fields = parse_field_selector(query.get("fieldSelector"), r)
        return lambda obj: labels(obj) and fields(obj)

    def get(self, r: Resource, ns: str | None, name: str) -> Response:
        obj = self.store.get(r.key, ns or "", name)
        if obj is None:
            raise not_found(r.plural, r.group, name)
        return Response(200, r.view(obj))

    def list(self, r: Resource, ns: str | None, query: dict[str, str]) -> Response:
        predicate = self._selector(r, query)
        start_after = self._decode_continue(query.get("continue"))
        limit = int(query.get("limit") or 0)
        with self.store.lock:
            rv = self.store.resource_version
            matching = [o for o in self.store.items(r.key, ns) if predicate(o)]
            if start_after is not None:
                matching = [o for o in matching if self._list_key(o) > start_after]
            page = matching[:limit] if limit > 0 else matching
            items = [r.view(copy.deepcopy(o)) for o in page]
        if not r.custom:  # built-in lists carry kind and apiVersion once, not per item
            for item in items:
                item.pop("kind", None)
                item.pop("apiVersion", None)
        list_meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if limit > 0 and len(matching) > limit:
            last = self._list_key(page[-1])
            token = json.dumps({"rv": rv, "start": list(last)}).encode()
            list_meta["continue"] = base64.urlsafe_b64encode(token).decode()
            list_meta["remainingItemCount"] = len(matching) - limit
        return Response(200, {"kind": f"{r.kind}List", "apiVersion": r.api_version,
                              "metadata": list_meta, "items": items})

    @staticmethod
    def _list_key(obj: dict[str, Any]) -> tuple[str, str]:
        m = obj.get("metadata") or {}
        return (m.get("namespace") or "", m.get("name") or "")

    def _decode_continue(self, token: str | None) -> tuple[str, str] | None:
        if not token:
            return None
        try:
            decoded = json.loads(base64.urlsafe_b64decode(token.encode()))
            rv, start = int(decoded["rv"]), tuple(decoded["start"])
        except (ValueError, KeyError, TypeError):
            raise bad_request("continue key is not valid") from None
        if rv < self.store.compacted_rv:
            raise ApiError(410, "The provided continue parameter is too old to display a consistent list result. "
                           "You can start a new list without the continue parameter.", "Expired")
        return (str(start[0]), str(start[1]))

    def watch_spec(self, r: Resource, ns: str | None, query: dict[str, str]) -> WatchSpec:
        predicate = self._selector(r, query)
        rv_text = query.get("resourceVersion", "")
        send_initial = _is_true(query.get("sendInitialEvents"))
        if rv_text in ("", "0") or send_initial:
            since = None
        else:
            try:
                since = int(rv_text)
            except ValueError:
                raise bad_request(f"invalid resource version: {rv_text!r}") from None
        timeout = query.get("timeoutSeconds")
        return WatchSpec(
            resource=r,
            namespace=ns,
            predicate=predicate,
            since=since,
            bookmarks=_is_true(query.get("allowWatchBookmarks")),
            timeout_seconds=float(timeout) if timeout else None,
            send_initial_events=send_initial,
        )

    # --- writes -------------------------------------------------------------------------------

    def _check_namespace(self, r: Resource, ns: str | None, obj: dict[str, Any]) -> None:
        m = meta(obj)
        if not r.namespaced:
            m.pop("namespace", None)
            return
        if m.get("namespace") and m["namespace"] != ns:
            raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
        m["namespace"] = ns
        if self.strict_namespaces and self.store.peek("namespaces", "", ns or "") is None:
            raise not_found("namespaces", "", ns or "")

    def create(self, r: Resource, ns: str | None, body: dict[str, Any]) -> Response:
        check_kind(r, body)
        obj = r.stored(body)
        obj["apiVersion"], obj["kind"] = self._stored_type(r)
        m = meta(obj)
        with self.store.lock:
            self._check_namespace(r, ns, obj)
            if not m.get("name"):
                if not m.get("generateName"):
                    raise invalid(r.kind, "", "metadata.name: Required value: name or generateName is required")
                m["name"] = m["generateName"] + "".join(random.choices(string.ascii_lowercase + string.digits, k=5))
            if m.get("resourceVersion"):
                raise ApiError(500, "resourceVersion should not be set on objects to be created", "InternalError")
            if self.store.peek(r.key, ns or "", m["name"]) is not None:
                raise already_exists(r.plural, r.group, m["name"])
            m["uid"] = str(uuid.uuid4())
            m["creationTimestamp"] = now_rfc3339()
            for server_set in ("deletionTimestamp", "deletionGracePeriodSeconds", "managedFields"):
                m.pop(server_set, None)
            if r.generation:
                m["generation"] = 1
            self._prepare_create(r, obj)
            stored = self.store.create(r.key, obj)
        return Response(201, r.view(copy.deepcopy(stored)))

    def _stored_type(self, r: Resource) -> tuple[str, str]:
        """apiVersion and kind of the stored form (core v1 for both Event APIs)."""
        return ("v1", "Event") if r.key == "events" else (r.api_version, r.kind)

    def _prepare_create(self, r: Resource, obj: dict[str, Any]) -> None:
        """What each resource's create strategy and admission do before storage."""
        if r is PODS:
            pods.admit(self, obj)
        elif r is NAMESPACES:
            obj["status"] = {"phase": "Active"}
            obj.setdefault("spec", {"finalizers": ["kubernetes"]})
        elif r.status_subresource and r.key != "nodes":
            obj.pop("status", None)

    def update(self, r: Resource, ns: str | None, name: str, body: dict[str, Any], sub: str | None) -> Response:
        check_kind(r, body)
        obj = r.stored(body)
        m = meta(obj)
        if m.get("name") and m["name"] != name:
            raise bad_request(f"the name of the object ({m['name']}) does not match the name on the URL ({name})")
        m["name"] = name
        if r.namespaced and m.get("namespace") and m["namespace"] != ns:
            raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
        with self.store.lock:
            current = self.store.peek(r.key, ns or "", name)
            if current is None:
                raise not_found(r.plural, r.group, name)
            rv = m.get("resourceVersion")
            if rv:
                if rv != current["metadata"]["resourceVersion"]:
                    raise stale(r.plural, r.group, name)
            elif not r.unconditional_update:
                raise invalid(r.kind, name, "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update")
            return self._commit_update(r, current, obj, sub)

    def patch(self, r: Resource, ns: str | None, name: str, content_type: str, body: Any, sub: str | None) -> Response:
        ctype = (content_type or "").split(";")[0].strip().lower()
        known = (patches.JSON_PATCH, patches.MERGE_PATCH, patches.STRATEGIC_MERGE_PATCH)
        if ctype not in known or (r.custom and ctype == patches.STRATEGIC_MERGE_PATCH):
            accepted = [patches.JSON_PATCH, patches.MERGE_PATCH] + ([] if r.custom else [patches.STRATEGIC_MERGE_PATCH])
            raise ApiError(415, "the body of the request was in an unknown format - accepted media types include: "
                           + ", ".join(accepted), "UnsupportedMediaType")
        with self.store.lock:
            current = self.store.peek(r.key, ns or "", name)
            if current is None:
                raise not_found(r.plural, r.group, name)
            view = r.view(copy.deepcopy(current))
            if ctype == patches.JSON_PATCH:
                patched = patches.json_patch(view, body)
            elif not isinstance(body, dict):
                raise bad_request("a merge patch must be a JSON object")
            elif ctype == patches.MERGE_PATCH:
                patched = patches.merge_patch(view, body)
            else:
                patched = patches.strategic_merge_patch(view, body)
            if not isinstance(patched, dict):
                raise bad_request("the patch does not produce an object")
            patched = r.stored(patched)
            m = meta(patched)
            if m.get("resourceVersion") and m["resourceVersion"] != current["metadata"]["resourceVersion"]:
                raise stale(r.plural, r.group, name)
            if m.get("name") != name or (r.namespaced and m.get("namespace") != ns):
                raise bad_request("metadata.name and metadata.namespace cannot be changed by a patch")
            return self._commit_update(r, current, patched, sub)

    def _commit_update(self, r: Resource, current: dict[str, Any], obj: dict[str, Any], sub: str | None) -> Response:
        """Merge what the request may change into `current` and store it when anything changed."""
        if sub == "status":
            new = copy.deepcopy(current)
            new["status"] = copy.deepcopy(obj.get("status") or {})
        else:
            new = copy.deepcopy(obj)
            new["apiVersion"], new["kind"] = self._stored_type(r)
            m, cm = meta(new), current["metadata"]
            for kept in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                         "generation", "namespace"):
                if kept in cm:
                    m[kept] = cm[kept]
                else:
                    m.pop(kept, None)
            if r.status_subresource:
                if "status" in current:
                    new["status"] = copy.deepcopy(current["status"])
                else:
                    new.pop("status", None)
            if r is PODS:
                pods.validate_update(current, new)
            if r.generation and _spec_part(new) != _spec_part(current):
                m["generation"] = int(cm.get("generation", 1)) + 1
        if _without_rv(new) == _without_rv(current):
            return Response(200, r.view(copy.deepcopy(current)))  # a no-op write leaves no trace
        stored = self.store.update(r.key, new)
        return Response(200, r.view(copy.deepcopy(stored)))

    def delete(self, r: Resource, ns: str | None, name: str, options: dict[str, Any]) -> Response:
        with self.store.lock:
            current = self.store.peek(r.key, ns or "", name)
            if current is None:
                raise not_found(r.plural, r.group, name)
            self._check_preconditions(r, current, options.get("preconditions") or {})
            if r is PODS:
                return Response(200, pods.delete(self, current, options.get("gracePeriodSeconds")))
            if r is NAMESPACES:
                return Response(200, self._delete_namespace(current))
            deleted = self.store.delete(r.key, ns or "", name)
        if r.delete_returns_object:
            return Response(200, r.view(deleted))
        details = {"name": name, "kind": r.plural, "uid": deleted["metadata"].get("uid")}
        if r.group:
            details["group"] = r.group
        return Response(200, status_object(200, details=details))

    def _check_preconditions(self, r: Resource, current: dict[str, Any], pre: dict[str, Any]) -> None:
        cm = current["metadata"]
        if pre.get("uid") and pre["uid"] != cm.get("uid"):
            raise ApiError(409, f"Precondition failed: UID in precondition: {pre['uid']}, "
                           f"UID in object meta: {cm.get('uid')}", "Conflict")
        if pre.get("resourceVersion") and pre["resourceVersion"] != cm.get("resourceVersion"):
            raise ApiError(409, f"Precondition failed: ResourceVersion in precondition: {pre['resourceVersion']}, "
                           f"ResourceVersion in object meta: {cm.get('resourceVersion')}", "Conflict")

    def _delete_namespace(self, namespace: dict[str, Any]) -> dict[str, Any]:
        """Terminating, then everything in it removed, then gone (the namespace controller, at once)."""
        name = namespace["metadata"]["name"]
        terminating = copy.deepcopy(namespace)
        terminating["metadata"]["deletionTimestamp"] = now_rfc3339()
        terminating.setdefault("status", {})["phase"] = "Terminating"
        terminating = self.store.update("namespaces", terminating)
        for key in dict.fromkeys(r.key for r in self.registry.resources if r.namespaced):  # shared storage once
            for obj in list(self.store.items(key, name)):
                self.store.delete(key, name, obj["metadata"]["name"])
        self.store.delete("namespaces", "", name)
        return copy.deepcopy(terminating)

    def delete_collection(self, r: Resource, ns: str | None, query: dict[str, str]) -> Response:
        predicate = self._selector(r, query)
        grace = _int_param(query, "gracePeriodSeconds") if "gracePeriodSeconds" in query else None
        deleted = []
        with self.store.lock:
            for obj in [o for o in self.store.items(r.key, ns) if predicate(o)]:
                name = obj["metadata"]["name"]
                if r is PODS:
                    deleted.append(pods.delete(self, obj, grace))
                else:
                    deleted.append(r.view(self.store.delete(r.key, ns or obj["metadata"].get("namespace", ""), name)))
            rv = self.store.resource_version
        return Response(200, {"kind": f"{r.kind}List", "apiVersion": r.api_version,
                              "metadata": {"resourceVersion": str(rv)}, "items": deleted})

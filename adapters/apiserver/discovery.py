"""Discovery documents and health endpoints.

The typed client never asks for them, but `kubectl`, the dynamic client and people with
`curl` do: `/api`, `/apis`, `/api/v1`, `/apis/{group}/{version}`, `/version`, and the
health checks. Built from the same resource table the server routes with.
"""

from __future__ import annotations

from typing import Any

from .errors import resource_not_found
from .resources import PODS, Registry

# the version this fake claims to be, in /version
SERVER_VERSION = {"major": "1", "minor": "33", "gitVersion": "v1.33.0-cpsat-fake", "platform": "linux/amd64"}
# what every resource offers
VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


def document(registry: Registry, segments: list[str]) -> dict[str, Any] | None:
    """The document a GET of this path answers with, or None when it is not a discovery path."""
    if segments in (["healthz"], ["readyz"], ["livez"]):
        return {"status": "ok"}
    if segments == ["version"]:
        return dict(SERVER_VERSION)
    if segments == ["api"]:
        return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
    if segments == ["apis"]:
        return group_list(registry)
    if len(segments) == 2 and segments[0] == "api":
        return resource_list(registry, "", segments[1])
    if len(segments) == 3 and segments[0] == "apis":
        return resource_list(registry, segments[1], segments[2])
    return None


def group_list(registry: Registry) -> dict[str, Any]:
    groups = []
    for group, versions in registry.groups().items():
        if not group:
            continue
        gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        groups.append({"name": group, "versions": gvs, "preferredVersion": gvs[0]})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def resource_list(registry: Registry, group: str, version: str) -> dict[str, Any]:
    served = [r for r in registry.resources if r.group == group and r.version == version]
    if not served:
        raise resource_not_found()
    resources: list[dict[str, Any]] = []
    for r in served:
        resources.append({"name": r.plural, "singularName": r.kind.lower(), "namespaced": r.namespaced,
                          "kind": r.kind, "verbs": VERBS})
        if r.status_subresource:
            resources.append({"name": f"{r.plural}/status", "singularName": "", "namespaced": r.namespaced,
                              "kind": r.kind, "verbs": ["get", "patch", "update"]})
        if r is PODS:
            resources.append({"name": "pods/binding", "singularName": "", "namespaced": True,
                              "kind": "Binding", "verbs": ["create"]})
            resources.append({"name": "pods/eviction", "singularName": "", "namespaced": True,
                              "group": "policy", "version": "v1", "kind": "Eviction", "verbs": ["create"]})
    group_version = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}

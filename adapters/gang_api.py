"""Which version of Kubernetes' own gang API (``scheduling.k8s.io``) a server is read in, and the
one place where an object of a newer version is put in the shape the snapshot parser reads.

A server serves each object in every version it has on (1.37 with ``--runtime-config`` for both:
a PodGroup as ``v1beta1`` and as ``v1alpha3``), so each kind is listed in one version only, the
newest served: ``v1beta1``, then ``v1alpha3`` (1.37), then ``v1alpha2`` (PodGroup, 1.36) or
``v1alpha1`` (Workload, 1.35). A version asked for by name (``--gang-api v1beta1``) that the
server does not serve is an input error naming the server, the kind and what it does serve.

``as_parser_input`` is where a v1beta1/v1alpha3 object becomes what the parser reads today
(``models.workloads``: the v1alpha2 PodGroup, the v1alpha1 Workload): swap its body for the
identity once the parser reads those versions itself. A PodGroup needs nothing (v1beta1 keeps
``schedulingPolicy`` and ``schedulingConstraints`` as v1alpha2 had them; the fields the parser
does not read yet, ``disruptionMode``, ``priority``, ``resourceClaims``, stay in the object); a
v1beta1 Workload's ``podGroupTemplates`` become the ``podGroups`` a v1alpha1 Workload had (pods of
1.36+ join PodGroups, never a Workload, so those only name the templates). CompositePodGroups go
through unchanged (the parser skips kinds it does not read).
"""

from __future__ import annotations

from typing import Any, Optional

GROUP = "scheduling.k8s.io"
# Newest first: the order a kind is looked for in.
VERSIONS: dict[str, tuple[str, ...]] = {
    "PodGroup": ("v1beta1", "v1alpha3", "v1alpha2"),
    "Workload": ("v1beta1", "v1alpha3", "v1alpha1"),
    "CompositePodGroup": ("v1alpha3",),
}
# The condition kube-scheduler sets on a PodGroup when it places (or fails to place) the gang:
# 1.36's v1alpha2 name, renamed in 1.37 (v1alpha3 and v1beta1).
SCHEDULED_CONDITION = {"v1alpha2": "PodGroupScheduled", "v1alpha3": "PodGroupInitiallyScheduled",
                       "v1beta1": "PodGroupInitiallyScheduled"}
NEWER = frozenset({"v1beta1", "v1alpha3"})


def parse_choice(text: Optional[str]) -> Optional[str]:
    """``--gang-api``'s value as a PodGroup version (``scheduling.k8s.io/v1beta1`` -> ``v1beta1``);
    None or ``auto``: the newest served. Anything else is a ValueError naming the choices."""
    if text is None or text == "auto":
        return None
    version = text.rpartition("/")[2] if text.startswith(GROUP + "/") else text
    if version not in VERSIONS["PodGroup"]:
        raise ValueError(f"--gang-api {text}: not a PodGroup version of {GROUP} this scheduler reads"
                         f" (auto, {', '.join(VERSIONS['PodGroup'])})")
    return version


def candidates(kind: str, asked: Optional[str] = None) -> tuple[str, ...]:
    """The versions to try listing `kind` in, newest first; the first the server serves is the
    one. With `asked` (a PodGroup version): PodGroups in exactly that version, the other kinds in
    the same line (1.37's v1beta1/v1alpha3, or the older v1alpha1 Workload beside v1alpha2)."""
    if asked is None:
        return VERSIONS[kind]
    if kind == "PodGroup" or asked in NEWER:
        return (asked,) if asked in VERSIONS[kind] else ()
    return tuple(v for v in VERSIONS[kind] if v not in NEWER)


def not_served(asked: str, served: Optional[set[str]]) -> str:
    """The message for a PodGroup version the server answered 404 for."""
    serves = ", ".join(sorted(served & set(VERSIONS["PodGroup"]))) if served is not None else ""
    return (f"{GROUP}/{asked} is not served by this server (PodGroup versions it serves: {serves or 'none'});"
            " pick another with --gang-api, or turn it on with the API server's --runtime-config"
            " and --feature-gates (docs/live.md, 'Kubernetes versions')")


def scheduled_condition(api_version: str) -> str:
    """PodGroupScheduled (v1alpha2) or PodGroupInitiallyScheduled (v1alpha3, v1beta1)."""
    return SCHEDULED_CONDITION.get(api_version.rpartition("/")[2], "PodGroupScheduled")


def as_parser_input(obj: dict[str, Any]) -> Optional[dict[str, Any]]:
    """`obj` as the snapshot parser reads it today (see the module's docstring); objects of
    other versions and kinds are returned as they are. None: nothing the parser can use (a
    v1beta1 Workload with no pod group template at any level), left out as a dump without it."""
    api_version = str(obj.get("apiVersion") or "")
    group, _, version = api_version.rpartition("/")
    if group != GROUP or version not in NEWER or obj.get("kind") != "Workload":
        return obj
    found = obj.get("spec")
    spec: dict[str, Any] = found if isinstance(found, dict) else {}
    groups: dict[str, dict[str, Any]] = {}
    for template in _templates(spec):
        groups.setdefault(str(template.get("name")), {"name": template.get("name"),
                                                      "policy": template.get("schedulingPolicy")})
    if not groups:
        return None
    return {**obj, "spec": {**spec, "podGroups": list(groups.values())}}


def _templates(level: dict[str, Any]) -> list[dict[str, Any]]:
    """Every PodGroup template of a Workload spec, those inside CompositePodGroup templates too."""
    found = [t for t in level.get("podGroupTemplates") or [] if isinstance(t, dict)]
    for composite in level.get("compositePodGroupTemplates") or []:
        if isinstance(composite, dict):
            found.extend(_templates(composite))
    return found

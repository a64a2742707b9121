"""Which version of Kubernetes' own gang API (``scheduling.k8s.io``) a server is read in, and the
one place where an object of a newer version is put in the shape the snapshot parser reads.

A server serves each object in every version it has on (1.37 with ``--runtime-config`` for both:
a PodGroup as ``v1beta1`` and as ``v1alpha3``), so each kind is listed in one version only, the
newest served: ``v1beta1``, then ``v1alpha3`` (1.37), then ``v1alpha2`` (PodGroup, 1.36) or
``v1alpha1`` (Workload, 1.35). A version asked for by name (``--gang-api v1beta1``) that the
server does not serve is an input error naming the server, the kind and what it does serve.

``as_parser_input`` is the one place an object listed from a server would be put in a shape the
parser reads; since issue 35's parser (v1beta1/v1alpha3 PodGroup, Workload and
CompositePodGroup) landed, every version listed here is read as it is.
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
    the same line (1.37's v1beta1/v1alpha3, or the older v1alpha1 Workload beside v1alpha2); a
    kind the asked version lacks is listed in the versions of its line it has (CompositePodGroup,
    v1alpha3 only, beside v1beta1 PodGroups: left unlisted, a tree would be read as no tree)."""
    if asked is None:
        return VERSIONS[kind]
    if kind == "PodGroup":
        return (asked,) if asked in VERSIONS[kind] else ()
    if asked in NEWER:
        return (asked,) if asked in VERSIONS[kind] else tuple(v for v in VERSIONS[kind] if v in NEWER)
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
    """`obj` as the snapshot parser reads it. The parser reads every version listed here itself
    (``adapters/reading/kinds.py``: v1beta1/v1alpha3 PodGroup, the templates-only Workload,
    CompositePodGroup), so this is the identity; it stays the one place a version the parser
    does not read yet would be converted (None: leave the object out)."""
    return obj

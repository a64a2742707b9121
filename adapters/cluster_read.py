"""Reading a snapshot straight from a cluster, read-only: every kind the snapshot parser reads,
listed from the API server as `kubectl get KIND -A -o json` would, and handed to the parser as
one List, exactly as a dump would be.

`schedule`, `validate` and `repack` take `--kubeconfig PATH` / `--context NAME` / `--in-cluster`
in place of a SNAPSHOT. Only `list` calls are made (in pages of 500); a kind whose API the server
does not serve (a CRD not installed, an alpha API off) is left out, as it would be from a dump.
Kubernetes' own gang kinds (PodGroup, Workload, CompositePodGroup) are listed in the newest
version the server serves, or in the one `--gang-api` names (``adapters.gang_api``).
The ClusterRole a reader needs is `READ_RULES` (docs/configuration.md: "Reading a live cluster").
"""

from __future__ import annotations

import argparse
import io
import json
import os
from dataclasses import dataclass
from typing import Any, Optional

from adapters import gang_api
from models import InputError

__all__ = ["KINDS", "READ_RULES", "ClusterSource", "add_cluster_options", "cluster_requested", "read_cluster"]


@dataclass(frozen=True)
class ListedKind:
    api_version: str
    kind: str
    plural: str
    namespaced: bool
    optional: bool = False      # an API a cluster may not serve

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    def path(self) -> str:
        base = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        return f"{base}/{self.plural}"


# What the snapshot parser reads (its kind table: adapters/reading/kinds.py), in each API version a cluster serves it.
KINDS: tuple[ListedKind, ...] = (
    ListedKind("v1", "Namespace", "namespaces", False),
    ListedKind("v1", "Node", "nodes", False),
    ListedKind("v1", "Pod", "pods", True),
    ListedKind("policy/v1", "PodDisruptionBudget", "poddisruptionbudgets", True),
    ListedKind("scheduling.k8s.io/v1", "PriorityClass", "priorityclasses", False),
    # every real server serves these; a test server may not (then: no volumes, as in a dump without them)
    ListedKind("v1", "PersistentVolume", "persistentvolumes", False, optional=True),
    ListedKind("v1", "PersistentVolumeClaim", "persistentvolumeclaims", True, optional=True),
    # gangs: scheduler-plugins' and Volcano's CRDs (Kubernetes' own: GANG_KINDS)
    ListedKind("scheduling.x-k8s.io/v1alpha1", "PodGroup", "podgroups", True, optional=True),
    ListedKind("scheduling.sigs.k8s.io/v1alpha1", "PodGroup", "podgroups", True, optional=True),
    ListedKind("scheduling.volcano.sh/v1beta1", "PodGroup", "podgroups", True, optional=True),
)

# Kubernetes' own gang kinds, each in every version read (one of them is listed: gang_api.candidates).
GANG_KINDS: dict[str, tuple[ListedKind, ...]] = {
    kind: tuple(ListedKind(f"{gang_api.GROUP}/{v}", kind, plural, True, optional=True)
                for v in gang_api.VERSIONS[kind])
    for kind, plural in (("PodGroup", "podgroups"), ("Workload", "workloads"),
                         ("CompositePodGroup", "compositepodgroups"))}


def _rules() -> list[dict[str, Any]]:
    by_group: dict[str, list[str]] = {}
    for kind in (*KINDS, *(k for kinds in GANG_KINDS.values() for k in kinds)):
        by_group.setdefault(kind.group, [])
        if kind.plural not in by_group[kind.group]:
            by_group[kind.group].append(kind.plural)
    return [{"apiGroups": [group], "resources": plurals, "verbs": ["list"]} for group, plurals in by_group.items()]


# The ClusterRole rules reading a cluster needs: `list` on each kind above, nothing else.
READ_RULES: list[dict[str, Any]] = _rules()


def add_cluster_options(parser: argparse.ArgumentParser, *, kubeconfig: bool = True) -> None:
    """--kubeconfig/--context/--in-cluster: read the cluster instead of a SNAPSHOT. `kubeconfig`
    False: the command already has --kubeconfig and --context (repack's --apply)."""
    if kubeconfig:
        parser.add_argument("--kubeconfig", metavar="PATH",
                            help="read the cluster of this kubeconfig instead of a SNAPSHOT (read-only: list calls)")
        parser.add_argument("--context", metavar="NAME", help="with --kubeconfig: the kubeconfig context")
    parser.add_argument("--in-cluster", action="store_true",
                        help="read the cluster of the pod's service account instead of a SNAPSHOT")
    parser.add_argument("--gang-api", metavar="VERSION", default="auto",
                        help="with a cluster: the scheduling.k8s.io version to read PodGroups in (v1beta1,"
                             " v1alpha3, v1alpha2; default auto: the newest the server serves)")


def cluster_requested(args: argparse.Namespace, *, snapshot_given: bool = True) -> bool:
    """Read the cluster: --kubeconfig, --context or --in-cluster was given, or, as the kubectl
    plugin `kubectl cpsat` (``args.as_kubectl_plugin``, set by ``cli.main(...,
    as_kubectl_plugin=True)``), no snapshot was: then a command reads the current kubeconfig's
    cluster, as every kubectl command does. Options that cannot all hold are refused: a
    kubeconfig with the service account's credentials. ``--gang-api`` where no cluster is read gets
    a note."""
    in_cluster = bool(getattr(args, "in_cluster", False))
    kubeconfig = bool(getattr(args, "kubeconfig", None) or getattr(args, "context", None))
    if in_cluster and kubeconfig:
        raise InputError("--in-cluster", "", "reads the pod's service account: give it or --kubeconfig/--context, "
                         "not both")
    requested = in_cluster or kubeconfig or (bool(getattr(args, "as_kubectl_plugin", False)) and not snapshot_given)
    try:  # a version this scheduler does not read was ignored with a snapshot
        gang_api.parse_choice(getattr(args, "gang_api", None))
    except ValueError as exc:
        raise InputError("--gang-api", "", str(exc).partition(": ")[2]) from None
    if not requested and getattr(args, "gang_api", "auto") not in (None, "auto"):
        # taken and ignored before it was checked: a note, not a refusal, for scripts that pass it
        from adapters.commands import note

        note("--gang-api is the version PodGroups are listed in from a cluster; with a SNAPSHOT it is not read")
    return requested


@dataclass(frozen=True)
class ClusterSource:
    """A List read from a cluster, as text the snapshot parser reads like a file; `label` names
    the cluster in messages."""
    text: str
    label: str

    def open(self) -> io.StringIO:
        return io.StringIO(self.text)


def read_cluster(args: argparse.Namespace) -> ClusterSource:
    """Every kind in KINDS listed from the cluster of args' kubeconfig/context/in-cluster.
    Refusals, unreachable servers and bad credentials are input errors naming the cluster."""
    from adapters.live.api_client import credentials_refused, load_api_client

    in_cluster = bool(getattr(args, "in_cluster", False))
    where = "in-cluster service account" if in_cluster else (args.kubeconfig or os.environ.get("KUBECONFIG")
                                                              or "~/.kube/config")
    # $KUBECONFIG as it is now (the client reads it once, when first imported)
    kubeconfig = args.kubeconfig or os.environ.get("KUBECONFIG") or None
    try:
        api = load_api_client(kubeconfig, in_cluster=in_cluster, context=args.context)
    except Exception as exc:  # noqa: BLE001 - the config loader's errors vary; none carries the file's content
        raise credentials_refused(where, exc) from None
    label = f"cluster {api.configuration.host}"
    try:
        asked = gang_api.parse_choice(getattr(args, "gang_api", None))
    except ValueError as exc:
        raise InputError(label, "--gang-api", str(exc)) from None
    try:
        items: list[dict[str, Any]] = []
        for kind in KINDS:
            items.extend(_list(api, kind, label) or [])
        items.extend(_gang_items(api, label, asked))
    finally:
        api.close()
    document = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}
    return ClusterSource(json.dumps(document), label)


def _gang_items(api: Any, label: str, asked: Optional[str]) -> list[dict[str, Any]]:
    """Each of Kubernetes' gang kinds in the first of its candidate versions the server serves,
    as the parser reads it (gang_api.as_parser_input). A PodGroup version asked for by name that
    the server does not serve is an input error."""
    items: list[dict[str, Any]] = []
    for kind, listed in GANG_KINDS.items():
        by_version = {k.api_version.rpartition("/")[2]: k for k in listed}
        found = None
        for version in gang_api.candidates(kind, asked):
            found = _list(api, by_version[version], label)
            if found is not None:
                break
        if found is None and kind == "PodGroup" and asked is not None:
            raise InputError(label, "--gang-api", gang_api.not_served(asked, _served_versions(api)))
        items.extend(o for o in map(gang_api.as_parser_input, found or []) if o is not None)
    return items


def _served_versions(api: Any) -> Optional[set[str]]:
    """The versions of scheduling.k8s.io the server's discovery lists (None: it could not be read)."""
    from kubernetes import client

    try:
        groups = client.ApisApi(api).get_api_versions(_request_timeout=30).groups or []
    except Exception:  # noqa: BLE001 - only a message's detail depends on it
        return None
    return {v.version for g in groups if g.name == gang_api.GROUP for v in g.versions or []}


_CORE_LISTS = {"namespaces": "list_namespace", "nodes": "list_node", "pods": "list_pod_for_all_namespaces",
               "persistentvolumes": "list_persistent_volume",
               "persistentvolumeclaims": "list_persistent_volume_claim_for_all_namespaces"}


def _list(api: Any, kind: ListedKind, label: str) -> Optional[list[dict[str, Any]]]:
    """Every object of `kind`; None when the server does not serve an optional kind (404)."""
    from urllib3.exceptions import HTTPError

    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    if kind.api_version == "v1":
        call = getattr(client.CoreV1Api(api), _CORE_LISTS[kind.plural])
    else:
        group, version = kind.api_version.split("/")
        custom = client.CustomObjectsApi(api)

        def call(**kwargs: Any) -> Any:
            return custom.list_cluster_custom_object(group, version, kind.plural, **kwargs)
    items: list[dict[str, Any]] = []
    token: Optional[str] = None
    while True:
        paging: dict[str, Any] = {"limit": 500, **({"_continue": token} if token else {})}
        try:
            answer = call(_preload_content=False, _request_timeout=60, **paging)
            try:
                body = json.loads(answer.data)
            finally:
                answer.release_conn()
        except ApiException as exc:
            if exc.status == 404 and kind.optional:
                return None
            if exc.status in (401, 403):
                raise InputError(label, kind.plural, f"{exc.status} {exc.reason}: listing {kind.plural}"
                                 f" ({kind.group or 'core'} API group) needs the `list` verb; see docs/configuration.md, "
                                 "'Reading a live cluster', for the ClusterRole") from None
            raise InputError(label, kind.plural, f"listing {kind.plural} failed: {exc.status} {exc.reason}") from None
        except (HTTPError, OSError) as exc:
            raise InputError(label, "", f"cannot reach the API server: {type(exc).__name__}: {exc}") from None
        for item in body.get("items") or []:
            items.append({"apiVersion": kind.api_version, "kind": kind.kind, **item})
        token = (body.get("metadata") or {}).get("continue")
        if not token:
            return items

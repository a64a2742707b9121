"""Every call the live scheduler makes to the Kubernetes API, through the official client.

This is the one module that talks to `kubernetes.client` (the other is `errors.py`, which
names its exception). Keeping the calls in one place is what lets the deploy manifests'
ClusterRole list exactly the verbs used: `API_CALLS` below maps each client method called
here to every (API group, resource, verb) the API server authorises its calls as, and a test checks
that table against this file's source and against `examples/deploy/rbac.yaml`.

Answers are read raw (`_preload_content=False`) and decoded as JSON: for `pods/binding`
because the real server answers 201 with a `Status` that the client cannot read as the
`Binding` it expects (it raises although the pod is bound — DESIGN.md), and for lists and
watches because the scheduler parses objects with its own models (`convert.py`), once,
instead of through the client's generated classes and then again.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Iterator, Optional
from urllib.parse import quote

import urllib3
from kubernetes import client, config
from kubernetes.client.rest import ApiException
from kubernetes.watch.watch import iter_resp_lines

from adapters import gang_api
from models import InputError

from .errors import KubeError, NotFound, for_status, from_client, status_message
from .kubeconfig import check_kubeconfig

log = logging.getLogger(__name__)

# Page size of an initial list: large clusters are listed in pages, as informers do.
LIST_PAGE_SIZE = 500
# (connect, read) timeout of ordinary requests, in seconds: a stuck call fails and is retried
# rather than holding a bind worker forever.
REQUEST_TIMEOUT = (5.0, 30.0)
# A watch's read timeout is its server-side timeout plus this slack: a server that went quiet
# without closing the stream is detected, while bookmarks keep a healthy one talking.
WATCH_READ_SLACK_SECONDS = 30.0
# How long the direct writes (`_DirectWrites`) reuse the credential headers the configuration
# gave. Asking for them runs the configuration's refresh hook, which the client's loaders make
# re-apply the whole kubeconfig (the host setter scans the environment for proxies): ~50 us of
# CPU per write. Those hooks renew a token well ahead of its expiry — a kubeconfig's exec or
# auth-provider token 5 minutes before, the in-cluster token file is read again every minute
# while the kubelet replaces it at 80% of its life — so a header a second old is never stale.
AUTH_REUSE_SECONDS = 1.0
# HTTP connections kept per host: one per watch (5), one per concurrent bind, a few for the rest.
CONNECTION_POOL_SIZE = 64
# Pods that have finished hold no resources; the API server filters them out of list and watch
# (and a pod that finishes leaves the watch as DELETED), as kube-scheduler's informer asks.
ACTIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"

Permission = tuple[str, str, str]  # (API group, resource[/subresource], verb), as RBAC names it
# What VolumeBinding's PreBind writes: the node a claim's volume is provisioned for; a volume
# reserved for a claim by a controller (the scheduler), which the PV controller then completes.
SELECTED_NODE = "volume.kubernetes.io/selected-node"
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"


@dataclass(frozen=True)
class Resource:
    """A resource the scheduler lists and watches."""

    name: str  # as logs and metrics name it: the plural, qualified by its group where two share it
    kind: str
    api_version: str
    optional: bool = False  # an API the server may not serve (404): the scheduler works without it
    plural: str = ""  # the URL's plural, when `name` is qualified

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]

    @property
    def path_plural(self) -> str:
        return self.plural or self.name


NODES = Resource("nodes", "Node", "v1")
PODS = Resource("pods", "Pod", "v1")
PDBS = Resource("poddisruptionbudgets", "PodDisruptionBudget", "policy/v1")
PRIORITY_CLASSES = Resource("priorityclasses", "PriorityClass", "scheduling.k8s.io/v1")
# Gangs, in each shape `models.workloads` reads (one internal PodGroup model for all): each is
# optional, a CRD not installed or an alpha API not enabled is looked for again now and then.
# scheduler-plugins' coscheduling PodGroup (CRD);
PODGROUPS = Resource("podgroups", "PodGroup", "scheduling.x-k8s.io/v1alpha1", optional=True)
# Kubernetes' own PodGroup (1.36 v1alpha2, 1.37 v1beta1), the one whose status the scheduler
# writes; listed, watched and written in the version the server serves (KubeApi.version_of);
CORE_PODGROUPS = Resource("podgroups.scheduling.k8s.io", "PodGroup", "scheduling.k8s.io/v1alpha2", optional=True,
                          plural="podgroups")
# Kubernetes' Workload (1.35 v1alpha1: pods join its pod groups through spec.workloadRef; 1.37
# v1beta1: templates of PodGroups), in the version the server serves too;
WORKLOADS = Resource("workloads.scheduling.k8s.io", "Workload", "scheduling.k8s.io/v1alpha1", optional=True,
                     plural="workloads")
# Volcano's PodGroup (CRD).
VOLCANO_PODGROUPS = Resource("podgroups.scheduling.volcano.sh", "PodGroup", "scheduling.volcano.sh/v1beta1",
                             optional=True, plural="podgroups")
GANG_RESOURCES: tuple[Resource, ...] = (PODGROUPS, CORE_PODGROUPS, WORKLOADS, VOLCANO_PODGROUPS)
# Kubernetes 1.37's CompositePodGroup (v1alpha3): an inner node of a tree of PodGroups, in the
# version the server serves too. Not a gang of its own (no pod names it): the cache keeps the
# trees beside the gangs (``group_trees.py``).
COMPOSITE_PODGROUPS = Resource("compositepodgroups.scheduling.k8s.io", "CompositePodGroup", "scheduling.k8s.io/v1alpha3",
                               optional=True, plural="compositepodgroups")
# Kubernetes' own kinds whose version is the newest the server serves (``KubeApi.version_of``).
NEWEST_SERVED: tuple[Resource, ...] = (CORE_PODGROUPS, WORKLOADS, COMPOSITE_PODGROUPS)
# What the volume plugins read: each optional, so a server that does not serve one (or RBAC that
# does not grant it) leaves the scheduler working without it.
PVCS = Resource("persistentvolumeclaims", "PersistentVolumeClaim", "v1", optional=True)
PVS = Resource("persistentvolumes", "PersistentVolume", "v1", optional=True)
STORAGE_CLASSES = Resource("storageclasses", "StorageClass", "storage.k8s.io/v1", optional=True)
CSI_NODES = Resource("csinodes", "CSINode", "storage.k8s.io/v1", optional=True)
VOLUME_RESOURCES: tuple[Resource, ...] = (PVCS, PVS, STORAGE_CLASSES, CSI_NODES)
# What the DynamicResources plugin reads (kube-scheduler's DRA objects), GA in 1.34:
# each optional, so a server without resource.k8s.io/v1 leaves the scheduler working without
# it. Listed through the generic custom-object call (the same URL the typed client would use);
# the claims' PreBind writes are in ``dra_writes.py``.
DEVICE_CLASSES = Resource("deviceclasses", "DeviceClass", "resource.k8s.io/v1", optional=True)
RESOURCE_SLICES = Resource("resourceslices", "ResourceSlice", "resource.k8s.io/v1", optional=True)
RESOURCE_CLAIMS = Resource("resourceclaims", "ResourceClaim", "resource.k8s.io/v1", optional=True)
DRA_RESOURCES: tuple[Resource, ...] = (DEVICE_CLASSES, RESOURCE_SLICES, RESOURCE_CLAIMS)
# The labels a pod-affinity term's namespaceSelector is matched against. Optional: a ClusterRole
# from before the scheduler read namespaces leaves it working as it did, each namespace known by
# its `kubernetes.io/metadata.name` label alone (the one the API server sets on every namespace).
NAMESPACES = Resource("namespaces", "Namespace", "v1", optional=True)
WATCHED: tuple[Resource, ...] = (NODES, PODS, PDBS, PRIORITY_CLASSES, *GANG_RESOURCES, COMPOSITE_PODGROUPS,
                                 *VOLUME_RESOURCES, *DRA_RESOURCES, NAMESPACES)
# The PodGroupScheduled condition (status.conditions of a scheduling.k8s.io/v1alpha2 PodGroup;
# PodGroupInitiallyScheduled in 1.37's v1beta1 and v1alpha3: KubeApi.pod_group_condition).
PODGROUP_SCHEDULED = "PodGroupScheduled"
# ... and DisruptionTarget: the scheduler evicted a member of the group (to preempt).
PODGROUP_DISRUPTION_TARGET = "DisruptionTarget"

# client method -> every (API group, resource, verb) it is called for, as RBAC names it.
# `list_*` methods are also called with watch=True, which the API server authorises as the
# verb `watch`. The generic custom-object methods serve every gang API (none is in the typed
# client), so one method stands for several permissions.
API_CALLS: dict[str, tuple[Permission, ...]] = {
    "list_node": (("", "nodes", "list"),),
    "list_pod_for_all_namespaces": (("", "pods", "list"),),
    "list_pod_disruption_budget_for_all_namespaces": (("policy", "poddisruptionbudgets", "list"),),
    "list_priority_class": (("scheduling.k8s.io", "priorityclasses", "list"),),
    "list_persistent_volume_claim_for_all_namespaces": (("", "persistentvolumeclaims", "list"),),
    "list_persistent_volume": (("", "persistentvolumes", "list"),),
    "list_storage_class": (("storage.k8s.io", "storageclasses", "list"),),
    "list_csi_node": (("storage.k8s.io", "csinodes", "list"),),
    "list_namespace": (("", "namespaces", "list"),),
    "list_cluster_custom_object": tuple((r.group, r.path_plural, "list")
                                        for r in (*GANG_RESOURCES, COMPOSITE_PODGROUPS, *DRA_RESOURCES)),
    "patch_namespaced_custom_object_status": ((CORE_PODGROUPS.group, f"{CORE_PODGROUPS.path_plural}/status", "patch"),),
    "read_namespaced_pod": (("", "pods", "get"),),
    "create_namespaced_pod_binding": (("", "pods/binding", "create"),),
    "create_namespaced_pod_eviction": (("", "pods/eviction", "create"),),
    "patch_namespaced_pod_status": (("", "pods/status", "patch"),),
    # VolumeBinding's PreBind: a chosen volume's claimRef, a claim's selected node
    "patch_persistent_volume": (("", "persistentvolumes", "patch"),),
    "patch_namespaced_persistent_volume_claim": (("", "persistentvolumeclaims", "patch"),),
    "create_namespaced_event": (("", "events", "create"),),
    "read_namespaced_lease": (("coordination.k8s.io", "leases", "get"),),
    "create_namespaced_lease": (("coordination.k8s.io", "leases", "create"),),
    "replace_namespaced_lease": (("coordination.k8s.io", "leases", "update"),),
}
# Calls made only for a rule's PreBind writes on the pod itself (``Plugin.prebind``), which no
# built-in rule has: the manifests do not grant them; a deployment adding such a plugin grants
# ``patch`` on ``pods`` to the scheduler's ClusterRole.
PLUGIN_CALLS: dict[str, tuple[Permission, ...]] = {
    "patch_namespaced_pod": (("", "pods", "patch"),),
}


def load_api_client(kubeconfig: Optional[str] = None, *, in_cluster: bool = False,
                    context: Optional[str] = None) -> client.ApiClient:
    """An ApiClient from a kubeconfig file or the in-cluster service account.

    Without a kubeconfig path and outside a pod, the client's default ($KUBECONFIG, then
    ~/.kube/config) is used. Nothing of the configuration is logged: it holds credentials.
    """
    configuration = client.Configuration()
    if in_cluster:
        config.load_incluster_config(client_configuration=configuration)
    else:
        check_kubeconfig(kubeconfig)
        config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=configuration,
                                persist_config=False)
    return configured_client(configuration)


def credentials_refused(where: str, exc: BaseException) -> InputError:
    """The input error for credentials the client's loader refused (``load_api_client``, or a
    caller's own ``config.load_kube_config``): ``where`` names the kubeconfig or in-cluster
    account; only the loader's first line is kept, and no part of the file. A file whose shape
    the loader could not read (``check_kubeconfig``) is named as it was found wrong."""
    if isinstance(exc, InputError):
        return exc
    first = str(exc).splitlines()[0] if str(exc) else ""
    # The loader's message can carry the entry it choked on as a Python mapping, its token and
    # client key included ("Expected key token in FILE/{'name': ..., 'user': {...}}/user"): cut
    # at the first brace, so no part of the file's contents is printed.
    first = first.split("{", 1)[0].rstrip("/ ") + (" (the entry's contents not shown)" if "{" in first else "")
    return InputError(where, "", f"cannot load cluster credentials: {type(exc).__name__}: {first}".rstrip(": "))


def configured_client(configuration: client.Configuration) -> client.ApiClient:
    """An ApiClient for `configuration`, sized for concurrent binds and never in debug mode
    (the client's debug log prints request headers, bearer token included)."""
    configuration.debug = False
    configuration.connection_pool_maxsize = CONNECTION_POOL_SIZE
    # No retries inside urllib3: every caller has its own back-off (``retry.py``, the informers,
    # the elector), which logs one line per attempt. urllib3's three silent-then-logged retries
    # per call made ~180 "Retrying (Retry(...))" lines a minute against an unreachable server.
    configuration.retries = 0
    api = client.ApiClient(configuration)
    api.user_agent = "cpsat-scheduler"
    return api


def now_micro() -> str:
    """The current time as a Kubernetes MicroTime (RFC 3339 with microseconds, UTC)."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _decode(resp: Any) -> Any:
    try:
        data = resp.data
    finally:
        resp.release_conn()
    if not data:
        return None
    return json.loads(data)


def _check(resp: Any, what: str) -> Any:
    """The decoded body of a raw answer; an error status raises our error class."""
    status = int(getattr(resp, "status", 0) or 0)
    body = _decode(resp)
    if not 200 <= status < 300:
        message, reason = status_message(body, f"HTTP {status}")
        raise for_status(status, f"{what}: {message}", reason=reason)
    return body


def call_client(what: str, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``_call`` for other adapters' own API calls (``repack --apply``), with the same errors."""
    return _call(what, method, *args, **kwargs)


def _unchecked(method: Callable[..., Any]) -> Callable[..., Any]:
    """A generated client method without its argument check: the client wraps each method in
    pydantic's `validate_call`, which checks and copies every argument on every call: a fifth of
    the client's time in a bind or an event write, 3.5% of the scheduler's interpreter time at
    100 pods/s (`py-spy record --gil` on the live bench). The scheduler passes plain dicts and strings it built itself, so the two writes
    every scheduled pod makes (its binding, its `Scheduled` event) skip it; the same method,
    serialisation and request follow. A client without the wrapper is called as it is."""
    raw = getattr(method, "raw_function", None)
    owner = getattr(method, "__self__", None)
    if raw is None or owner is None:
        return method
    return lambda *args, **kwargs: raw(owner, *args, **kwargs)


def _call(what: str, method: Callable[..., Any], *args: Any, _answer: bool = True, **kwargs: Any) -> Any:
    """Call a client method for its raw answer; return the decoded body or raise a KubeError.
    ``_answer=False``: a write whose answer nobody reads (a binding, an event): on success its
    body is read, to free the connection, but not decoded (the created Event the API server
    echoes is ~1 kB of JSON per scheduled pod); an error's body is decoded as ever."""
    try:
        resp = method(*args, _preload_content=False, _request_timeout=REQUEST_TIMEOUT, **kwargs)
        if not _answer and 200 <= int(getattr(resp, "status", 0) or 0) < 300:
            try:
                resp.data  # noqa: B018 - read to the end, so the connection goes back to the pool
            finally:
                resp.release_conn()
            return None
        return _check(resp, what)
    except KubeError:
        raise
    except Exception as exc:  # noqa: BLE001 - the client's exceptions end here, translated
        raise from_client(exc, what) from exc


class _DirectWrites:
    """The two writes every scheduled pod makes (its binding, its `Scheduled` event), sent
    straight on the client's own connection pool for the API server.

    Through the generated client each of them walked the client's generic machinery —
    parameter serialisation, the REST wrapper, urllib3's pool manager parsing the URL and
    looking up the pool again — which was ~17% of the scheduler's interpreter time at 100 pods/s
    (`py-spy record --gil` on the live bench), far more than the socket I/O. The request here
    is the one the client sends (same path, JSON body, Accept, User-Agent and the client's
    default headers, the bearer token as the configuration gives it, asked for again after
    AUTH_REUSE_SECONDS), on the same pool (TLS, client certificate and CA as configured), with
    the same timeout and urllib3 retry setting; an error answer is turned into the client's
    `ApiException` and translated as `_call` does, so callers see the same error classes.
    Two deliberate differences: the JSON body is named by a Content-Type (the generated client
    sends none), and a redirect is reported as the answer it is (a ClientError naming its status)
    where the client's pool manager, with urllib3's retries off, calls it a lost connection
    ("too many redirects") — neither path follows it (tests/adapters/test_live_direct_wire.py).
    `direct_writes` returns None when the client is set up in a way this does not reproduce (a
    proxy, a host URL with a query): those writes take the client's path, as does a write after
    the configuration was pointed at another host."""

    def __init__(self, api_client: client.ApiClient, pool_manager: urllib3.PoolManager) -> None:
        self._api_client = api_client
        self._configuration = api_client.configuration
        self._pool_manager = pool_manager
        self._host = self._configuration.host
        self._prefix = urllib3.util.parse_url(self._host).path or ""
        self._safe = self._configuration.safe_chars_for_path_param
        self._timeouts = (REQUEST_TIMEOUT, urllib3.Timeout(connect=REQUEST_TIMEOUT[0], read=REQUEST_TIMEOUT[1]))
        self._pool = pool_manager.connection_from_url(self._host)
        self._lock = threading.Lock()
        # (when they were asked for, the credential headers, whether a credential goes in the query)
        self._auth: tuple[float, dict[str, str], bool] = (float("-inf"), {}, False)

    def path(self, template: str, **params: str) -> str:
        """The request path for `template`, each parameter quoted as the client quotes it."""
        return self._prefix + template.format(**{k: quote(v, safe=self._safe) for k, v in params.items()})

    def _headers(self, path: str) -> Optional[dict[str, str]]:
        headers = {"Accept": "application/json", "Content-Type": "application/json"}
        headers.update(self._api_client.default_headers)
        if self._api_client.cookie:
            headers["Cookie"] = self._api_client.cookie
        asked, auth, in_query = self._auth
        now = time.monotonic()
        if now - asked >= AUTH_REUSE_SECONDS:
            auth = {}
            queries: list[tuple[str, str]] = []
            # The client's own step: the configuration's refresh hook runs, its token is read.
            self._api_client.update_params_for_auth(auth, queries, ["BearerToken"], path, "POST", None)
            in_query = bool(queries)
            self._auth = (now, auth, in_query)
        if in_query:
            return None  # a credential in the query string: the client's path
        headers.update(auth)
        return headers

    def post(self, what: str, path: str, body: dict[str, Any]) -> bool:
        """POST `body` as JSON to `path`; False (nothing sent) when this request must take the
        client's path. The answer is read to the end, so the connection goes back to the pool,
        and not decoded on success."""
        try:
            headers = self._headers(path)
        except Exception as exc:  # noqa: BLE001 - a refresh hook that failed (an exec credential), as `_call` has it
            raise from_client(exc, what) from exc
        if headers is None or self._configuration.host != self._host:
            return False
        data = json.dumps(body).encode()
        try:
            resp = self._urlopen(path, data, headers)
        except urllib3.exceptions.SSLError as exc:  # as the client's REST layer reports it around its request
            raise from_client(ApiException(status=0, reason=f"{type(exc).__name__}\n{exc}"), what) from exc
        except Exception as exc:  # noqa: BLE001 - transport failures, translated as the client's are
            raise from_client(exc, what) from exc
        try:
            answer = resp.read()
        except Exception as exc:  # noqa: BLE001 - reading the answer is outside the client's REST wrapper:
            raise from_client(exc, what) from exc  # its failures (a TLS one too) are translated as they come
        finally:
            resp.release_conn()
        if not 200 <= resp.status < 300:
            try:
                text: Optional[str] = answer.decode("utf-8")
            except UnicodeDecodeError:  # the client keeps no body then: the message is the HTTP reason
                text = None
            error = ApiException(status=resp.status, reason=resp.reason, body=text)
            error.headers = resp.headers
            raise from_client(error, what) from error
        return True

    def _timeout(self) -> urllib3.Timeout:
        """REQUEST_TIMEOUT as urllib3 takes it, made again only if the setting changed."""
        setting, timeout = self._timeouts
        if setting is not REQUEST_TIMEOUT:
            timeout = urllib3.Timeout(connect=REQUEST_TIMEOUT[0], read=REQUEST_TIMEOUT[1])
            self._timeouts = (REQUEST_TIMEOUT, timeout)
        return timeout

    def _urlopen(self, path: str, data: bytes, headers: dict[str, str]) -> Any:
        pool = self._pool
        timeout = self._timeout()
        try:
            return pool.urlopen("POST", path, body=data, headers=headers, timeout=timeout, redirect=False,
                                preload_content=False)
        except urllib3.exceptions.ClosedPoolError:
            # The pool manager let this pool go (its client was closed, or too many hosts):
            # take the one it holds now. Nothing was sent on a closed pool.
            with self._lock:
                if self._pool is pool:
                    self._pool = self._pool_manager.connection_from_url(self._host)
                pool = self._pool
            return pool.urlopen("POST", path, body=data, headers=headers, timeout=timeout, redirect=False,
                                preload_content=False)


def direct_writes(api_client: client.ApiClient) -> Optional[_DirectWrites]:
    """`_DirectWrites` for `api_client`, or None when its writes must take the client's path."""
    pool_manager = getattr(getattr(api_client, "rest_client", None), "pool_manager", None)
    # A proxy (HTTP or SOCKS) is a subclass of PoolManager that rewrites each request: not ours to copy.
    if type(pool_manager) is not urllib3.PoolManager:
        return None
    configuration = api_client.configuration
    try:
        url = urllib3.util.parse_url(configuration.host)
    except Exception:  # noqa: BLE001 - a host the client itself would fail on: its path says so
        return None
    if url.scheme not in ("http", "https") or not url.host or url.query or url.fragment:
        return None
    return _DirectWrites(api_client, pool_manager)


class WatchStream:
    """One open watch: iterate for (type, object) pairs; `close()` from any thread cuts it."""

    def __init__(self, resp: Any, what: str) -> None:
        self._resp = resp
        self._what = what
        self._closed = threading.Event()

    def __iter__(self) -> Iterator[tuple[str, dict[str, Any]]]:
        try:
            for line in iter_resp_lines(self._resp):
                if not line:
                    continue
                try:
                    event = json.loads(line)
                except ValueError:
                    raise KubeError(f"{self._what}: undecodable watch event") from None
                etype, obj = event.get("type"), event.get("object")
                if etype == "ERROR":
                    body = obj if isinstance(obj, dict) else {}
                    code = int(body.get("code") or 500)
                    message, reason = status_message(body, f"watch error {code}")
                    raise for_status(code, f"{self._what}: {message}", reason=reason)
                if not isinstance(obj, dict):
                    continue
                yield str(etype), obj
        except KubeError:
            raise
        except Exception as exc:  # noqa: BLE001 - transport failures mid-stream, translated
            if self._closed.is_set():
                return
            raise from_client(exc, self._what) from exc
        finally:
            self._release()

    def close(self) -> None:
        self._closed.set()
        try:
            self._resp.shutdown()
        except Exception:  # noqa: BLE001 - already released or never connected: nothing to cut
            pass

    def _release(self) -> None:
        try:
            self._resp.release_conn()
        except Exception:  # noqa: BLE001
            pass


class KubeApi:
    """The scheduler's API calls. Each raises an `errors.KubeError` subclass on failure."""

    def __init__(self, api_client: client.ApiClient) -> None:
        self.api_client = api_client
        self.core = client.CoreV1Api(api_client)
        self.policy = client.PolicyV1Api(api_client)
        self.scheduling = client.SchedulingV1Api(api_client)
        self.storage = client.StorageV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.coordination = client.CoordinationV1Api(api_client)
        self._direct = direct_writes(api_client)
        # The scheduling.k8s.io version each of Kubernetes' gang resources is read in: found by
        # discovery when first needed, found again after a 404 (an upgrade, an API turned on).
        self.gang_api: Optional[str] = None      # a PodGroup version asked for (--gang-api), else the newest
        self._gang_versions: dict[Resource, str] = {}
        self._gang_lock = threading.Lock()

    def close(self) -> None:
        self.api_client.close()

    def _posted(self, what: str, template: str, body: dict[str, Any], **params: str) -> bool:
        """`body` POSTed to `template`'s path straight on the pool (`_DirectWrites`); False when
        the write must take the client's path instead (nothing was sent)."""
        direct = self._direct
        return direct is not None and direct.post(what, direct.path(template, **params), body)

    # --- which version of the gang API -------------------------------------------------------

    def served_versions(self, group: str) -> set[str]:
        """The versions of API group `group` the server's discovery lists (KubeError on failure).
        GET /apis is a non-resource URL every authenticated identity may read (the built-in
        system:discovery role), so it needs no rule in examples/deploy/rbac.yaml."""
        body = _call(f"discover {group}", client.ApisApi(self.api_client).get_api_versions)
        return {str(v.get("version")) for g in body.get("groups") or [] if g.get("name") == group
                for v in g.get("versions") or []}

    def version_of(self, resource: Resource) -> str:
        """The version `resource` is listed, watched and written in: its own, except for
        Kubernetes' PodGroup, Workload and CompositePodGroup, whose version is the newest the server
        serves (or the one --gang-api names), found by discovery the first time."""
        if resource not in NEWEST_SERVED:
            return resource.version
        with self._gang_lock:
            found = self._gang_versions.get(resource)
        if found is None:
            candidates = gang_api.candidates(resource.kind, self.gang_api)
            served = self.served_versions(resource.group)
            found = next((v for v in candidates if v in served), candidates[0] if candidates else resource.version)
            with self._gang_lock:
                self._gang_versions[resource] = found
            log.info("reading %s in %s/%s", resource.name, resource.group, found)
        return found

    def api_version_of(self, resource: Resource) -> str:
        version = self.version_of(resource)
        return f"{resource.group}/{version}" if resource.group else version

    def check_gang_api(self) -> None:
        """With a PodGroup version asked for (`gang_api`): an InputError when the server does not
        serve it. Nothing is checked when the server cannot be reached (the informers retry)."""
        if self.gang_api is None:
            return
        try:
            served = self.served_versions(gang_api.GROUP)
        except KubeError as exc:
            log.warning("cannot check --gang-api %s now: %s", self.gang_api, exc)
            return
        if self.gang_api not in served:
            raise InputError(f"cluster {self.api_client.configuration.host}", "--gang-api",
                             gang_api.not_served(self.gang_api, served))

    def pod_group_condition(self) -> str:
        """The condition kube-scheduler of the server's version sets on a placed PodGroup: from
        the version the PodGroups were last listed in (no request here: it is asked on the
        scheduling path; a gang exists only once its PodGroup was listed)."""
        with self._gang_lock:
            version = self._gang_versions.get(CORE_PODGROUPS, CORE_PODGROUPS.version)
        return gang_api.scheduled_condition(version)

    def _forget_version(self, resource: Resource) -> None:
        with self._gang_lock:
            self._gang_versions.pop(resource, None)

    # --- list and watch ------------------------------------------------------------------------

    def _lister(self, resource: Resource) -> Callable[..., Any]:
        if resource is NODES:
            return self.core.list_node
        if resource is PODS:
            def pods(**kw: Any) -> Any:
                return self.core.list_pod_for_all_namespaces(field_selector=ACTIVE_PODS, **kw)
            return pods
        if resource is PDBS:
            return self.policy.list_pod_disruption_budget_for_all_namespaces
        if resource is PRIORITY_CLASSES:
            return self.scheduling.list_priority_class
        if resource is PVCS:
            return self.core.list_persistent_volume_claim_for_all_namespaces
        if resource is PVS:
            return self.core.list_persistent_volume
        if resource is STORAGE_CLASSES:
            return self.storage.list_storage_class
        if resource is CSI_NODES:
            return self.storage.list_csi_node
        if resource is NAMESPACES:
            return self.core.list_namespace
        if resource in GANG_RESOURCES or resource is COMPOSITE_PODGROUPS or resource in DRA_RESOURCES:
            version = self.version_of(resource)

            def gangs(**kw: Any) -> Any:
                return self.custom.list_cluster_custom_object(resource.group, version, resource.path_plural, **kw)
            return gangs
        raise ValueError(f"not a watched resource: {resource.name}")

    def list(self, resource: Resource) -> tuple[list[dict[str, Any]], str]:
        """Every object of `resource` (page by page) and the list's resourceVersion."""
        lister = self._lister(resource)
        api_version = self.api_version_of(resource)
        items: list[dict[str, Any]] = []
        token: Optional[str] = None
        what = f"list {resource.name}"
        while True:
            kwargs: dict[str, Any] = {"limit": LIST_PAGE_SIZE}
            if token:
                kwargs["_continue"] = token
            try:
                body = _call(what, lister, **kwargs)
            except NotFound:
                self._forget_version(resource)     # looked for again by discovery next time
                raise
            for item in body.get("items") or []:
                if isinstance(item, dict):
                    item.setdefault("kind", resource.kind)  # list items carry no kind of their own
                    item.setdefault("apiVersion", api_version)
                    items.append(item)
            meta = body.get("metadata") or {}
            token = meta.get("continue")
            if not token:
                return items, str(meta.get("resourceVersion") or "")

    def watch(self, resource: Resource, resource_version: str, timeout_seconds: int) -> WatchStream:
        """Open a watch from `resource_version`; the server ends it after `timeout_seconds`."""
        what = f"watch {resource.name}"
        try:
            resp = self._lister(resource)(
                watch=True, resource_version=resource_version, timeout_seconds=timeout_seconds,
                allow_watch_bookmarks=True, _preload_content=False,
                _request_timeout=(REQUEST_TIMEOUT[0], timeout_seconds + WATCH_READ_SLACK_SECONDS))
        except Exception as exc:  # noqa: BLE001
            raise from_client(exc, what) from exc
        status = int(getattr(resp, "status", 0) or 0)
        if not 200 <= status < 300:
            _check(resp, what)
        return WatchStream(resp, what)

    # --- pods ----------------------------------------------------------------------------------

    def read_pod(self, namespace: str, name: str) -> dict[str, Any]:
        return _call(f"get pod {namespace}/{name}", self.core.read_namespaced_pod, name, namespace)

    def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        """POST pods/{name}/binding. The pod's UID is a precondition: a pod deleted and created
        again under the same name is not bound by a decision made for the old one."""
        body = {"apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": name, "namespace": namespace, **({"uid": uid} if uid else {})},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
        what = f"bind {namespace}/{name} to {node}"
        if not self._posted(what, "/api/v1/namespaces/{namespace}/pods/{name}/binding", body,
                            namespace=namespace, name=name):
            _call(what, _unchecked(self.core.create_namespaced_pod_binding), name, namespace, body, _answer=False)

    def evict(self, namespace: str, name: str, uid: str) -> None:
        """POST pods/{name}/eviction (policy/v1): the API server enforces PodDisruptionBudgets."""
        body: dict[str, Any] = {"apiVersion": "policy/v1", "kind": "Eviction",
                                "metadata": {"name": name, "namespace": namespace}}
        if uid:
            body["deleteOptions"] = {"preconditions": {"uid": uid}}
        _call(f"evict {namespace}/{name}", self.core.create_namespaced_pod_eviction, name, namespace, body)

    def patch_pod_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        """Strategic-merge PATCH of pods/{name}/status (conditions merge by type)."""
        _call(f"patch status of {namespace}/{name}", self.core.patch_namespaced_pod_status, name, namespace,
              {"status": status})

    def patch_pod_metadata(self, namespace: str, name: str, metadata: dict[str, Any]) -> None:
        """Strategic-merge PATCH of a pod's ``metadata`` (annotations, labels): a rule's PreBind."""
        _call(f"patch metadata of {namespace}/{name}", self.core.patch_namespaced_pod, name, namespace,
              {"metadata": metadata})

    # --- volumes (VolumeBinding's PreBind) -----------------------------------------------------

    def reserve_volume(self, volume: str, namespace: str, claim: str, claim_uid: str) -> None:
        """PATCH a PersistentVolume's ``spec.claimRef`` to the claim the scheduler chose it for,
        marked as bound by a controller: the PV controller then binds the claim to it."""
        ref: dict[str, Any] = {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": namespace,
                               "name": claim, **({"uid": claim_uid} if claim_uid else {})}
        body = {"metadata": {"annotations": {BOUND_BY_CONTROLLER: "yes"}}, "spec": {"claimRef": ref}}
        _call(f"reserve volume {volume} for {namespace}/{claim}", self.core.patch_persistent_volume, volume, body)

    def select_node(self, namespace: str, claim: str, node: str) -> None:
        """PATCH a claim's ``volume.kubernetes.io/selected-node`` annotation: its provisioner
        creates the volume for that node."""
        body = {"metadata": {"annotations": {SELECTED_NODE: node}}}
        _call(f"select node {node} for {namespace}/{claim}", self.core.patch_namespaced_persistent_volume_claim,
              claim, namespace, body)

    # --- pod groups ----------------------------------------------------------------------------

    def patch_pod_group_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        """JSON merge PATCH of a scheduling.k8s.io PodGroup's status subresource, in the version
        it is watched in (the typed client has no such API: the generic custom-object call makes
        the same request)."""
        r = CORE_PODGROUPS
        _call(f"patch status of podgroup {namespace}/{name}", self.custom.patch_namespaced_custom_object_status,
              r.group, self.version_of(r), namespace, r.path_plural, name, {"status": status})

    # --- events --------------------------------------------------------------------------------

    def create_event(self, namespace: str, event: dict[str, Any]) -> None:
        what = f"create event in {namespace}"
        if not self._posted(what, "/api/v1/namespaces/{namespace}/events", event, namespace=namespace):
            _call(what, _unchecked(self.core.create_namespaced_event), namespace, event, _answer=False)

    # --- leases --------------------------------------------------------------------------------

    def read_lease(self, namespace: str, name: str) -> dict[str, Any]:
        return _call(f"get lease {namespace}/{name}", self.coordination.read_namespaced_lease, name, namespace)

    def create_lease(self, namespace: str, lease: dict[str, Any]) -> dict[str, Any]:
        return _call(f"create lease {namespace}/{lease['metadata']['name']}",
                     self.coordination.create_namespaced_lease, namespace, lease)

    def replace_lease(self, namespace: str, lease: dict[str, Any]) -> dict[str, Any]:
        """PUT with the lease's resourceVersion: 409 when someone else wrote it since we read it."""
        name = lease["metadata"]["name"]
        return _call(f"update lease {namespace}/{name}", self.coordination.replace_namespaced_lease,
                     name, namespace, lease)

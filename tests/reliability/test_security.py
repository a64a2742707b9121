"""Security of the live scheduler as it is shipped in `examples/deploy/`.

One `cpsat-scheduler run` process is started the way the Deployment starts it — its own
arguments, the ConfigMap's config, leader election in its own namespace — except that it reads
a kubeconfig (with a bearer token and a client key in it) instead of the in-cluster service
account, serves on 127.0.0.1 instead of the pod's IP, and logs at debug level. It is driven
through everything it can do: binds, a conflict read back, an unschedulable pod, a gang,
preemption with a PodDisruptionBudget, a watch restarted from scratch after `410 Gone`, a
lease created, renewed and released. The in-memory API server records every request. Then:

- **least privilege**: each request, turned into RBAC attributes as kube-apiserver's authorizer
  does, is allowed by the ClusterRole or (in its namespace) the Role of `rbac.yaml`, and every
  permission those roles grant was used — neither more nor less;
- **no credentials in logs**: neither the token, nor the client key or certificate, nor any other
  kubeconfig value, nor a secret from a pod's environment, appears in anything the process
  printed, at debug level, or in what its status server serves;
- **the status server binds the configured address only**: the process's only listening socket
  is 127.0.0.1:PORT (read from /proc), and the same port on another loopback address refuses;
- **the container**: non-root, read-only root filesystem, no privilege escalation, no
  capabilities — the Pod Security Standard "restricted" that its namespace enforces — and an
  image whose user is the same non-root one.
"""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Optional
from urllib.parse import unquote

import pytest
import yaml

from adapters.apiserver import FakeApiServer, RequestRecord
from adapters.apiserver.resources import DEFAULT_GANG_APIS
from adapters.live.serving import parse_addr
from tests.adapters.test_live_dra import claiming, device_class, extended_pod, gpu_claim, gpu_slice
from tests.adapters.live_harness import (
    core_pod_group, first_time_claims, node, pod, pod_group, priority_class, wait_for,
)

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "examples" / "deploy"
SCHEDULER_NS = "cpsat-scheduler"
WORK_NS = "work"

# Credentials that must never be printed: a bearer token, and a client certificate and key (made
# up, PEM-shaped, with markers that cannot occur by chance).
TOKEN = "tok-3f9c1e7a5b2d4c6e8f0a1b3c5d7e9f11-never-log-me"
CLIENT_CERT = ("-----BEGIN CERTIFICATE-----\nQ0VSVElGSUNBVEUtTUFSS0VSLTkxMjc0NjUw\n-----END CERTIFICATE-----\n")
CLIENT_KEY = ("-----BEGIN PRIVATE KEY-----\nUFJJVkFURS1LRVktTUFSS0VSLTU1MzM4ODIx\n-----END PRIVATE KEY-----\n")
POD_SECRET = "db-password-7e1d0c5b9a"  # in a pod's environment, as careless manifests have it


def documents(name: str) -> list[dict[str, Any]]:
    with open(DEPLOY / name, encoding="utf-8") as fh:
        return [d for d in yaml.safe_load_all(fh) if d]


def one(kind: str, docs: list[dict[str, Any]]) -> dict[str, Any]:
    found = [d for d in docs if d.get("kind") == kind]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


# --- RBAC as kube-apiserver evaluates it -------------------------------------------------------

@dataclass(frozen=True)
class Attributes:
    """What the RBAC authorizer decides on (k8s.io/apiserver's authorizer.Attributes)."""

    verb: str
    group: str = ""
    resource: str = ""  # with its subresource: "pods/binding"
    namespace: str = ""  # "" for a cluster-scoped request, or one across all namespaces
    name: str = ""
    path: str = ""  # for a non-resource request
    resource_request: bool = True


def attributes(method: str, path: str, query: dict[str, str]) -> Attributes:
    """The request-info kube-apiserver derives from a request (apiserver/pkg/endpoints/request)."""
    parts = [unquote(p) for p in path.strip("/").split("/") if p]
    if len(parts) < 3 or parts[0] not in ("api", "apis") or (parts[0] == "apis" and len(parts) < 4):
        return Attributes(verb=method.lower(), path=path, resource_request=False)
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    namespace = ""
    if rest[0] == "namespaces" and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    resource, name = rest[0], rest[1] if len(rest) > 1 else ""
    if len(rest) > 2:
        resource = f"{resource}/{rest[2]}"
    if method == "GET":
        verb = "watch" if query.get("watch", "").lower() in ("true", "1") else ("get" if name else "list")
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch",
                "DELETE": "delete" if name else "deletecollection"}[method]
    return Attributes(verb=verb, group=group, resource=resource, namespace=namespace, name=name)


def checks(record: RequestRecord) -> list[Attributes]:
    """Every authorisation kube-apiserver makes for one request: its request-info, and for a
    status write of a ResourceClaim the second check on the synthetic resourceclaims/binding
    (1.36 refuses a change of allocation or reservedFor without it; every status write of the
    scheduler makes one)."""
    a = attributes(record.method, record.path, record.query)
    out = [a]
    if a.resource_request and a.group == "resource.k8s.io" and a.resource == "resourceclaims/status" \
            and a.verb in ("update", "patch"):
        out.append(Attributes(verb="update", group=a.group, resource="resourceclaims/binding",
                              namespace=a.namespace, name=a.name))
    return out


@dataclass(frozen=True)
class Grant:
    """One (group, resource, verb[, name]) a role grants, and where."""

    group: str
    resource: str
    verb: str
    name: str = ""  # "" when not limited to names
    namespace: str = ""  # "" for a ClusterRole bound cluster-wide

    def allows(self, a: Attributes) -> bool:
        return (a.resource_request and self.group == a.group and self.resource == a.resource and self.verb == a.verb
                and (not self.name or self.name == a.name) and (not self.namespace or self.namespace == a.namespace))


def grants() -> list[Grant]:
    """What rbac.yaml grants the scheduler's ServiceAccount, through bindings that name it."""
    docs = documents("rbac.yaml")
    subject = {"kind": "ServiceAccount", "name": "cpsat-scheduler", "namespace": SCHEDULER_NS}
    roles = {(d["kind"], d["metadata"]["name"], d["metadata"].get("namespace", "")): d for d in docs
             if d["kind"] in ("ClusterRole", "Role")}
    out: list[Grant] = []
    for binding in (d for d in docs if d["kind"] in ("ClusterRoleBinding", "RoleBinding")):
        assert subject in binding["subjects"], binding["metadata"]["name"]
        ref = binding["roleRef"]
        where = binding["metadata"].get("namespace", "") if binding["kind"] == "RoleBinding" else ""
        role = roles[(ref["kind"], ref["name"], where if ref["kind"] == "Role" else "")]
        for rule in role["rules"]:
            for value in rule["apiGroups"] + rule["resources"] + rule["verbs"]:
                assert value != "*", f"wildcard in {role['metadata']['name']}: {rule}"
            assert not rule.get("nonResourceURLs"), rule
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        for name in rule.get("resourceNames") or [""]:
                            out.append(Grant(group, resource, verb, name, where))
    return out


# Non-resource paths every authenticated user may GET (the default system:discovery and
# system:public-info-viewer ClusterRoles); the scheduler needs nothing else outside resources.
DEFAULT_NON_RESOURCE = re.compile(r"^/(api|apis|version|healthz|livez|readyz|openapi)(/.*)?$")


# --- the process, run as the Deployment runs it ------------------------------------------------

def deployment_argv(kubeconfig: Path, config: Path) -> list[str]:
    """The Deployment's container arguments, pointed at the local API server and a local config."""
    container = one("Deployment", documents("deployment.yaml"))["spec"]["template"]["spec"]["containers"][0]
    argv = []
    for arg in container["args"]:
        if arg == "--in-cluster":
            argv += ["--kubeconfig", str(kubeconfig)]
        elif arg.startswith("--config="):
            argv.append(f"--config={config}")
        elif arg.startswith("--metrics-addr="):
            argv.append("--metrics-addr=127.0.0.1:0")  # the pod's own address, here: loopback
        else:
            argv.append(arg)
    return argv


def listening_sockets(pid: int) -> list[tuple[str, int]]:
    """(address, port) of every TCP socket process `pid` listens on, from /proc."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        found = re.fullmatch(r"socket:\[(\d+)\]", target)
        if found:
            inodes.add(found[1])
    out = []
    for table, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        path = Path(f"/proc/{pid}/net/{table}")
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state != "0A" or inode not in inodes:  # 0A: LISTEN
                continue
            hex_addr, hex_port = local.split(":")
            raw = bytes.fromhex(hex_addr)
            # /proc prints the address as 32-bit words in host (little-endian) order
            raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
            out.append((socket.inet_ntop(family, raw), int(hex_port, 16)))
    return sorted(out)


@dataclass
class DeployedRun:
    records: list[RequestRecord]
    output: str  # stdout and stderr
    served: str  # what /healthz, /readyz and /metrics answered
    listening: list[tuple[str, int]]
    port: int
    other_loopback_refused: bool
    returncode: int
    secrets: list[str] = field(default_factory=list)


def _kubeconfig(server: FakeApiServer) -> tuple[dict[str, Any], list[str]]:
    config = server.kubeconfig()
    config["users"][0]["user"] = {
        "token": TOKEN,
        "client-certificate-data": base64.b64encode(CLIENT_CERT.encode()).decode(),
        "client-key-data": base64.b64encode(CLIENT_KEY.encode()).decode(),
    }
    secrets = [TOKEN, CLIENT_CERT.splitlines()[1], CLIENT_KEY.splitlines()[1],
               config["users"][0]["user"]["client-certificate-data"], config["users"][0]["user"]["client-key-data"],
               POD_SECRET]
    return config, secrets


def _workload() -> list[dict[str, Any]]:
    def worker(name: str, **kw: Any) -> dict[str, Any]:
        return pod(name, ns=WORK_NS, **kw)

    victim = worker("victim", cpu="1500m", priority_class="low", node_name="n2", running=True, labels={"app": "batch"})
    spared = worker("spared", cpu="100m", priority_class="low", node_name="n2", running=True, labels={"app": "batch"})
    budget = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
              "metadata": {"name": "batch", "namespace": WORK_NS},
              "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "batch"}}}}
    group = pod_group("job", 2)
    group["metadata"]["namespace"] = WORK_NS
    claim = gpu_claim("accelerator")
    core_group = core_pod_group("core", 2)  # Kubernetes' own: its PodGroupScheduled condition is written
    core_group["metadata"]["namespace"] = WORK_NS
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SCHEDULER_NS}},
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": WORK_NS}},
            # n1 is too small for `urgent`; on n2 it needs the victim's room: preemption
            node("n1", cpu="1"), node("n2", cpu="2"), priority_class("low", 10), priority_class("high", 1000),
            victim, spared, budget, group, core_group, *first_time_claims(WORK_NS),
            # a pod with a device claim: the claim's finalizer, allocation and reservedFor are written;
            # a pod asking for the class's extended resource: kube-scheduler's own claim is made
            device_class(), gpu_slice("n1", 2), {**claim, "metadata": {**claim["metadata"], "namespace": WORK_NS}}]


def _new_pods() -> list[dict[str, Any]]:
    def worker(name: str, **kw: Any) -> dict[str, Any]:
        obj = pod(name, ns=WORK_NS, **kw)
        obj["spec"]["containers"][0]["env"] = [{"name": "DB_PASSWORD", "value": POD_SECRET}]
        return obj

    stateful = worker("stateful", cpu="100m")
    stateful["spec"]["volumes"] = [{"name": "scratch", "persistentVolumeClaim": {"claimName": "scratch"}},
                                   {"name": "spool", "persistentVolumeClaim": {"claimName": "spool"}}]
    accelerated = claiming("accelerated", "accelerator")
    accelerated["metadata"]["namespace"] = WORK_NS
    accelerated["spec"]["containers"][0]["env"] = [{"name": "DB_PASSWORD", "value": POD_SECRET}]
    # its first bind refused (below): the claim made for it is deleted, and made anew next try
    extended = extended_pod("ext-user")
    extended["metadata"]["namespace"] = WORK_NS
    return [stateful, accelerated, extended, worker("job-0", cpu="100m", gang="job"), worker("job-1", cpu="100m", gang="job"),
            worker("core-0", cpu="100m", scheduling_group="core"), worker("core-1", cpu="100m", scheduling_group="core"),
            worker("conflicted", cpu="100m"), worker("too-big", cpu="64"),
            worker("urgent", cpu="1500m", priority_class="high")]


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DeployedRun]:
    tmp = tmp_path_factory.mktemp("deployed")
    # 1.37's CompositePodGroups served beside 1.36's PodGroups, so the role's watch on them is
    # exercised (test_live_deploy does the same; CompositePodGroup is v1alpha3 only, so it is
    # watched there whatever --gang-api says)
    server = FakeApiServer(_workload(), kubelet_start_seconds=0.01, kubelet_grace_seconds=0.05,
                           gang_apis=[*DEFAULT_GANG_APIS, "scheduling.k8s.io/v1alpha3"]).start()
    records = server.requests.keep()
    config, secrets = _kubeconfig(server)
    kubeconfig = tmp / "kubeconfig"
    kubeconfig.write_text(json.dumps(config))
    scheduler_config = tmp / "config.yaml"
    scheduler_config.write_text(one("ConfigMap", documents("configmap.yaml"))["data"]["config.yaml"])
    # --gang-api v1alpha2: the workload's Kubernetes PodGroups are 1.36's (the server would
    # otherwise be read in its newest, v1alpha3, where they are not)
    argv = [sys.executable, "-m", "adapters", "--debug", *deployment_argv(kubeconfig, scheduler_config), "--verbose",
            "--gang-api", "v1alpha2"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**env, "CPSAT_DEBUG": "1"})
    lines: list[str] = []
    readers = [threading.Thread(target=lambda s=stream: lines.extend(s), daemon=True)
               for stream in (proc.stdout, proc.stderr)]
    for reader in readers:
        reader.start()
    served, listening, port, refused = "", [], 0, False
    try:
        def lease_holder() -> str:
            lease = server.store.get("leases", SCHEDULER_NS, "cpsat-scheduler") or {}
            return (lease.get("spec") or {}).get("holderIdentity") or ""

        assert wait_for(lease_holder, timeout=60.0), "".join(lines)
        found = wait_for(lambda: next((m for m in (re.search(r"metrics on 127\.0\.0\.1:(\d+)", x) for x in lines)
                                       if m), None), timeout=10.0)
        assert found, "".join(lines)
        port = int(found[1])
        listening = listening_sockets(proc.pid)
        for path in ("/healthz", "/readyz", "/metrics"):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
                served += resp.read().decode()
        with socket.socket() as probe:
            probe.settimeout(2.0)
            refused = probe.connect_ex(("127.0.0.2", port)) != 0

        server.faults.fail("POST", r"/pods/conflicted/binding$", status=409)  # read back with a get
        server.faults.fail("POST", r"/pods/ext-user/binding$", status=403, count=1)
        for obj in _new_pods():
            server.api.handle(_create(obj))
        assert wait_for(lambda: all(_node_of(server, n) for n in ("job-0", "job-1", "core-0", "core-1",
                                                                  "conflicted", "urgent", "stateful", "accelerated",
                                                                  "ext-user")),
                        timeout=60.0), "".join(lines)
        assert wait_for(lambda: (server.store.get("podgroups.scheduling.k8s.io", WORK_NS, "core") or {})
                        .get("status"), timeout=20.0), "".join(lines)
        assert wait_for(lambda: any(e.get("reason") == "FailedScheduling" for e in server.store.list("events")),
                        timeout=20.0)
        # the pods watch restarts from scratch: history compacted while it is down (410, then a list)
        server.faults.fail("GET", r"/pods$", watch=True, status=503, count=2)
        server.faults.drop_watches()
        server.api.handle(_create(pod("meanwhile", ns=WORK_NS, scheduler="someone-else")))  # an event to miss
        server.faults.compact()
        assert wait_for(lambda: sum(1 for r in records.records if r.path == "/api/v1/pods"
                                    and not r.watch) >= 2, timeout=20.0)
        assert wait_for(lambda: sum(1 for r in records.records if r.method == "PUT" and "/leases/" in r.path) >= 1,
                        timeout=20.0)  # a renewal (every 2 s by default)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for reader in readers:
            reader.join(5.0)
        server.stop()
    yield DeployedRun(records=records.records, output="".join(lines), served=served, listening=listening, port=port,
                      other_loopback_refused=refused, returncode=proc.returncode, secrets=secrets)


def _create(obj: dict[str, Any]) -> Any:
    from adapters.apiserver.api import Request

    ns = obj["metadata"]["namespace"]
    return Request("POST", f"/api/v1/namespaces/{ns}/pods", body=json.dumps(obj).encode())


def _node_of(server: FakeApiServer, name: str) -> Optional[str]:
    obj = server.store.get("pods", WORK_NS, name) or {}
    return (obj.get("spec") or {}).get("nodeName")


# --- least privilege ---------------------------------------------------------------------------

def test_the_deployed_process_ran_and_stopped_cleanly(deployed: DeployedRun) -> None:
    assert deployed.returncode == 0, deployed.output[-3000:]
    assert "received SIGTERM; shutting down" in deployed.output
    assert "released lease cpsat-scheduler/cpsat-scheduler" in deployed.output


def test_every_request_is_allowed_by_the_shipped_roles(deployed: DeployedRun) -> None:
    allowed = grants()
    denied = set()
    for r in deployed.records:
        for a in checks(r):
            if not a.resource_request:
                if not (r.method == "GET" and DEFAULT_NON_RESOURCE.match(r.path)):
                    denied.add(f"{r.method} {r.path} (non-resource)")
            elif not any(g.allows(a) for g in allowed):
                denied.add(f"{a.verb} {a.group or 'core'}/{a.resource} {a.namespace}/{a.name}".rstrip("/"))
    assert sorted(denied) == []


def test_every_permission_the_roles_grant_is_used(deployed: DeployedRun) -> None:
    used = [a for r in deployed.records for a in checks(r)]
    unused = [g for g in grants() if not any(g.allows(a) for a in used)]
    assert unused == []


def test_the_lease_is_written_only_in_the_schedulers_namespace_and_by_name(deployed: DeployedRun) -> None:
    leases = [attributes(r.method, r.path, r.query) for r in deployed.records if "/leases" in r.path]
    assert {a.verb for a in leases} == {"get", "create", "update"}
    assert {a.namespace for a in leases} == {SCHEDULER_NS}
    assert {a.name for a in leases if a.verb != "create"} == {"cpsat-scheduler"}


def test_only_the_adapter_talks_to_the_api() -> None:
    """Every client API class of the scheduler is made in `adapters/live/api_client.py`, so the table it
    keeps of its calls (checked against rbac.yaml by tests/adapters/test_live_deploy.py) covers the
    program. `repack --apply` is an operator's command with the operator's credentials: its own
    calls are in its own table (`APPLY_CALLS`, checked by tests/adapters/test_repack_apply.py), and
    `bench --live --kubeconfig` sets up its fake nodes with the user's own (bench/live_target.py);
    `schedule`/`repack`/`validate --kubeconfig` list objects with the user's own, read-only
    (cluster_read.py, whose `READ_RULES` the ClusterRole in docs/configuration.md is checked against by
    tests/adapters/test_cluster_read.py)."""
    api_classes = re.compile(r"\b(\w+V\d\w*Api|CustomObjectsApi|ApiClient)\(")
    users = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "adapters").rglob("*.py")
                   if api_classes.search(p.read_text()) and "apiserver" not in p.parts)
    assert users == ["adapters/bench/live_target.py", "adapters/cluster_read.py", "adapters/live/api_client.py",
                     "adapters/repack_apply.py"]


# --- credentials ---------------------------------------------------------------------------------

def test_no_credential_or_secret_reaches_the_logs(deployed: DeployedRun) -> None:
    text = deployed.output + deployed.served
    assert "binding" in deployed.output or "bound" in deployed.output  # debug logs did say things
    leaked = [s for s in deployed.secrets if s in text]
    assert leaked == []
    assert not re.search(r"authorization|bearer", text, re.I)
    assert "client-key-data" not in text and "BEGIN PRIVATE KEY" not in text


@pytest.mark.parametrize("content", [
    # a broken kubeconfig, a context naming a user that does not exist, a server that is no URL
    'users: [{name: u, user: {token: "%(token)s"}}\ncontexts: [',
    json.dumps({"apiVersion": "v1", "kind": "Config", "current-context": "c",
                "contexts": [{"name": "c", "context": {"cluster": "x", "user": "nobody"}}],
                "clusters": [{"name": "x", "cluster": {"server": "http://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "%(token)s"}}]}),
    json.dumps({"apiVersion": "v1", "kind": "Config", "current-context": "c",
                "contexts": [{"name": "c", "context": {"cluster": "x", "user": "u"}}],
                "clusters": [{"name": "x", "cluster": {"server": "http://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "%(token)s", "client-key-data": "%%%%not base64"}}]}),
], ids=["unparsable", "missing-user", "bad-key-data"])
def test_a_bad_kubeconfig_is_refused_without_echoing_it(content: str, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    from adapters.cli import main

    path = tmp_path / "kubeconfig"
    path.write_text(content % {"token": TOKEN})
    status = main(["run", "--kubeconfig", str(path), "--metrics-addr", "127.0.0.1:0", "--no-leader-elect",
                   "--duration", "0.1"])
    captured = capsys.readouterr()
    assert TOKEN not in captured.out + captured.err
    assert status in (0, 2)


# --- the status server ---------------------------------------------------------------------------

def test_status_server_listens_on_the_configured_address_only(deployed: DeployedRun) -> None:
    assert deployed.listening == [("127.0.0.1", deployed.port)]
    assert deployed.other_loopback_refused  # 127.0.0.2 is this machine too, but not the configured address


def test_status_server_in_process_binds_exactly_what_it_is_given() -> None:
    from adapters.live.serving import StatusServer

    for host in ("127.0.0.1", "::1"):
        try:
            srv = StatusServer((host, 0), health=lambda: None, ready=lambda: (True, "ok"), metrics=lambda: b"")
        except OSError:  # no IPv6 on this machine
            assert host == "::1"
            continue
        try:
            srv.start()
            assert srv.address[0] == host
            assert (host, srv.address[1]) in listening_sockets(os.getpid())
            assert not any(port == srv.address[1] and addr in ("0.0.0.0", "::")
                           for addr, port in listening_sockets(os.getpid()))
        finally:
            srv.stop()


def test_the_default_address_is_loopback_and_a_missing_host_is_refused() -> None:
    from adapters.commands.run import DEFAULT_METRICS_ADDR

    assert parse_addr(DEFAULT_METRICS_ADDR)[0] == "127.0.0.1"
    with pytest.raises(ValueError, match="names no host"):
        parse_addr(":10251")


# --- the container -------------------------------------------------------------------------------

RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                      "projected", "secret"}


def restricted_violations(pod_spec: dict[str, Any]) -> list[str]:
    """What breaks the Pod Security Standard "restricted" (v1.33), one line each."""
    out = []
    pod_sc = pod_spec.get("securityContext") or {}
    for flag in ("hostNetwork", "hostPID", "hostIPC"):
        if pod_spec.get(flag):
            out.append(f"{flag} is set")
    for volume in pod_spec.get("volumes") or []:
        kinds = set(volume) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            out.append(f"volume {volume['name']} is {sorted(kinds)}")
    containers = (pod_spec.get("initContainers") or []) + pod_spec["containers"]
    for c in containers:
        sc = c.get("securityContext") or {}
        name = c["name"]
        if sc.get("privileged"):
            out.append(f"{name}: privileged")
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append(f"{name}: allowPrivilegeEscalation is not false")
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            out.append(f"{name}: capabilities not dropped (ALL)")
        if set(caps.get("add") or []) - {"NET_BIND_SERVICE"}:
            out.append(f"{name}: adds capabilities {caps['add']}")
        if not (sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")) is True):
            out.append(f"{name}: runAsNonRoot is not true")
        if sc.get("runAsUser", pod_sc.get("runAsUser")) == 0:
            out.append(f"{name}: runAsUser is 0")
        seccomp = (sc.get("seccompProfile") or pod_sc.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            out.append(f"{name}: seccompProfile is {seccomp}")
        if any(p.get("hostPort") for p in c.get("ports") or []):
            out.append(f"{name}: hostPort")
    return out


def _deployment_pod() -> dict[str, Any]:
    return one("Deployment", documents("deployment.yaml"))["spec"]["template"]["spec"]


def test_the_pod_meets_the_restricted_standard_its_namespace_enforces() -> None:
    namespace = one("Namespace", documents("namespace.yaml"))
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert restricted_violations(_deployment_pod()) == []


def test_the_container_runs_as_non_root_with_a_read_only_root_filesystem() -> None:
    spec = _deployment_pod()
    pod_sc = spec["securityContext"]
    (container,) = spec["containers"]
    sc = container["securityContext"]
    assert pod_sc["runAsNonRoot"] is True and pod_sc["runAsUser"] > 0 and pod_sc.get("runAsGroup", 1) > 0
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"]["drop"] == ["ALL"]
    assert not sc.get("capabilities", {}).get("add")
    # with the root filesystem read-only, Python must not try to write bytecode, and the one
    # writable place is a size-limited scratch volume
    env = {e["name"]: e.get("value") for e in container.get("env") or []}
    assert env.get("PYTHONDONTWRITEBYTECODE") == "1"
    volumes = {v["name"]: v for v in spec["volumes"]}
    for mount in container["volumeMounts"]:
        volume = volumes[mount["name"]]
        assert mount.get("readOnly") or ("emptyDir" in volume and volume["emptyDir"].get("sizeLimit")), mount


def test_the_image_switches_to_the_same_non_root_user() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    final_stage = re.split(r"^FROM\s", text, flags=re.M)[-1]
    users = re.findall(r"^USER\s+(\S+)", final_stage, re.M)
    assert users, "the final stage sets no USER: the image would run as root"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit() and int(uid) > 0, "USER must be numeric for runAsNonRoot to verify it"
    pod_sc = _deployment_pod()["securityContext"]
    assert int(uid) == pod_sc["runAsUser"]
    assert not gid or int(gid) == pod_sc.get("runAsGroup", int(gid))
    assert "PYTHONDONTWRITEBYTECODE=1" in final_stage

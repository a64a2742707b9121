"""A real Kubernetes control plane on 127.0.0.1: etcd, kube-apiserver and, when asked,
kube-scheduler, started from the binaries `build.ensure_built` made.

- Ports are chosen free. Every process runs in one process group, whose leader is etcd, and
  `stop` ends exactly those processes (by pid, then the group for anything they started).
- Authentication by client certificates (one CA made for this start) and service-account tokens;
  authorization by the Node and RBAC authorizers.
- The gang APIs of its version are turned on (``features.py``: 1.37's ``scheduling.k8s.io/v1beta1``
  and ``v1alpha3``, 1.36's ``v1alpha2``); dynamic resource allocation (``resource.k8s.io/v1``) is
  on by default in both. The version is go.mod's (1.37.2) unless ``CPSAT_E2E_KUBERNETES`` or
  ``version=`` picks another the module pins.
- No kubelet and no controller-manager: tests make their Nodes Ready, finish the deletion of
  terminating pods and write PodDisruptionBudget status themselves (see `tests.e2e.kubelet`).

The folder of a running control plane holds `admin.kubeconfig` (group system:masters),
`kube-scheduler.kubeconfig` (user system:kube-scheduler), `cpsat-scheduler.kubeconfig` (the
service account cpsat-scheduler/cpsat-scheduler of examples/deploy, with exactly the RBAC of
examples/deploy/rbac.yaml), the logs of each process, and `state.json` (ports, pids).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

import yaml

from .build import Built, ControlPlaneError, ensure_built
from .features import VersionFeatures, features
from .certs import Authority, service_account_keys

REPO = Path(__file__).resolve().parents[3]
DEPLOY = REPO / "examples" / "deploy"
SCHEDULER_SA = ("cpsat-scheduler", "cpsat-scheduler")      # namespace, name (examples/deploy)
START_TIMEOUT = float(os.environ.get("CPSAT_E2E_START_TIMEOUT", "180"))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class State:
    directory: str
    version: str
    server: str
    etcd_url: str
    pgid: int = 0
    pids: dict[str, int] = field(default_factory=dict)     # name -> pid, in start order
    scheduler_port: int = 0

    def save(self) -> None:
        Path(self.directory, "state.json").write_text(json.dumps(asdict(self), indent=2))

    @classmethod
    def load(cls, directory: Path) -> "State":
        return cls(**json.loads((directory / "state.json").read_text()))


def _gates(gates: dict[str, bool]) -> str:
    return ",".join(f"{k}={'true' if v else 'false'}" for k, v in gates.items())


def _kubeconfig(path: Path, server: str, ca: Path, user: dict[str, str], name: str) -> Path:
    config = {"apiVersion": "v1", "kind": "Config", "current-context": name,
              "clusters": [{"name": "e2e", "cluster": {"server": server, "certificate-authority": str(ca)}}],
              "users": [{"name": name, "user": user}],
              "contexts": [{"name": name, "context": {"cluster": "e2e", "user": name}}]}
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path


class ControlPlane:
    """A control plane in `directory` (made if missing). Use `start()` then `stop()`, or as a
    context manager."""

    def __init__(self, directory: Path, *, with_scheduler: bool = False, version: Optional[str] = None) -> None:
        self.directory = Path(directory)
        self.with_scheduler = with_scheduler
        self.version = version
        self.built: Optional[Built] = None
        self.state: Optional[State] = None
        self._procs: dict[str, subprocess.Popen[bytes]] = {}

    # --- paths ---------------------------------------------------------------------------
    def log(self, name: str) -> Path:
        return self.directory / f"{name}.log"

    @property
    def admin_kubeconfig(self) -> Path:
        return self.directory / "admin.kubeconfig"

    @property
    def scheduler_kubeconfig(self) -> Path:
        """The cpsat-scheduler service account's kubeconfig (a bearer token)."""
        return self.directory / "cpsat-scheduler.kubeconfig"

    @property
    def kube_scheduler_kubeconfig(self) -> Path:
        return self.directory / "kube-scheduler.kubeconfig"

    @property
    def features(self) -> VersionFeatures:
        """The gates and gang API versions of the running version."""
        assert self.built is not None
        return features(self.built.version)

    @property
    def server(self) -> str:
        assert self.state is not None
        return self.state.server

    # --- lifecycle -----------------------------------------------------------------------
    def __enter__(self) -> "ControlPlane":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> "ControlPlane":
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.built = ensure_built(version=self.version)
        pki = self.directory / "pki"
        ca = Authority(pki)
        serving = ca.issue("apiserver", "kube-apiserver", server=True)
        admin = ca.issue("admin", "e2e-admin", organizations=["system:masters"])
        sched = ca.issue("kube-scheduler", "system:kube-scheduler")
        sa_key, sa_pub = service_account_keys(pki)
        etcd_port, etcd_peer, api_port = free_port(), free_port(), free_port()
        server = f"https://127.0.0.1:{api_port}"
        self.state = State(str(self.directory), self.built.version, server, f"http://127.0.0.1:{etcd_port}")
        _kubeconfig(self.admin_kubeconfig, server, ca.cert_path,
                    {"client-certificate": str(admin[0]), "client-key": str(admin[1])}, "e2e-admin")
        _kubeconfig(self.kube_scheduler_kubeconfig, server, ca.cert_path,
                    {"client-certificate": str(sched[0]), "client-key": str(sched[1])}, "kube-scheduler")

        self._spawn("etcd", [
            str(self.built.path("etcd")), "--name=e2e", f"--data-dir={self.directory / 'etcd-data'}",
            f"--listen-client-urls=http://127.0.0.1:{etcd_port}", f"--advertise-client-urls=http://127.0.0.1:{etcd_port}",
            f"--listen-peer-urls=http://127.0.0.1:{etcd_peer}", f"--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}",
            f"--initial-cluster=e2e=http://127.0.0.1:{etcd_peer}", "--unsafe-no-fsync", "--log-level=warn",
            "--listen-metrics-urls=", "--quota-backend-bytes=2147483648"])
        self._wait("etcd", lambda: self._http_ok(f"http://127.0.0.1:{etcd_port}/health"))

        self._spawn("kube-apiserver", [
            str(self.built.path("kube-apiserver")), f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={api_port}",
            f"--cert-dir={pki}", f"--tls-cert-file={serving[0]}", f"--tls-private-key-file={serving[1]}",
            f"--client-ca-file={ca.cert_path}", "--authorization-mode=Node,RBAC",
            f"--service-account-key-file={sa_pub}", f"--service-account-signing-key-file={sa_key}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            "--service-cluster-ip-range=10.96.0.0/16", "--endpoint-reconciler-type=none",
            f"--feature-gates={_gates(self.features.feature_gates)}",
            f"--runtime-config={_gates(self.features.runtime_config)}",
            "--profiling=false", "--v=1"])
        self._wait("kube-apiserver", lambda: self._https_ok("/readyz", admin))
        self._setup_identity()
        if self.with_scheduler:
            self.start_kube_scheduler()
        self.state.save()

    def start_kube_scheduler(self, *, qps: float = 0.0, extra: tuple[str, ...] = ()) -> None:
        """kube-scheduler as system:kube-scheduler, leader election off; with `qps`, its client
        is allowed that many requests a second (burst twice that) so that it is not the limit."""
        assert self.built is not None and self.state is not None
        port = free_port()
        config = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                  "clientConnection": {"kubeconfig": str(self.kube_scheduler_kubeconfig)},
                  "leaderElection": {"leaderElect": False}}
        if qps:
            config["clientConnection"].update(qps=qps, burst=int(2 * qps))
        path = self.directory / "kube-scheduler.yaml"
        path.write_text(yaml.safe_dump(config))
        self._spawn("kube-scheduler", [
            str(self.built.path("kube-scheduler")), f"--config={path}",
            f"--authentication-kubeconfig={self.kube_scheduler_kubeconfig}",
            f"--authorization-kubeconfig={self.kube_scheduler_kubeconfig}",
            "--bind-address=127.0.0.1", f"--secure-port={port}",
            f"--feature-gates={_gates(self.features.feature_gates)}",
            "--v=1", *extra])
        self.state.scheduler_port = port
        self._wait("kube-scheduler", lambda: self._http_ok(f"https://127.0.0.1:{port}/healthz", insecure=True))
        self.state.save()

    def stop(self) -> None:
        """End the processes this control plane started (latest first), then anything left in
        their process group."""
        if self._procs:
            stop_processes({n: p.pid for n, p in self._procs.items()},
                           self.state.pgid if self.state else 0, popen=self._procs)
            self._procs.clear()

    # --- pieces --------------------------------------------------------------------------
    def _spawn(self, name: str, command: list[str]) -> None:
        assert self.state is not None
        out = open(self.log(name), "ab")
        try:
            proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    cwd=self.directory, **_in_group(self.state.pgid))
        except OSError as exc:
            raise ControlPlaneError(f"starting {name}", self.log(name), str(exc)) from None
        finally:
            out.close()
        if not self.state.pgid:
            self.state.pgid = proc.pid
        self._procs[name] = proc
        self.state.pids[name] = proc.pid
        self.state.save()

    def _wait(self, name: str, ready: Any) -> None:
        proc = self._procs[name]
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise ControlPlaneError(f"starting {name}", self.log(name), f"it exited {proc.returncode}")
            if ready():
                return
            time.sleep(0.2)
        raise ControlPlaneError(f"starting {name}", self.log(name), f"not ready after {START_TIMEOUT:.0f} s")

    @staticmethod
    def _http_ok(url: str, insecure: bool = False) -> bool:
        context = ssl._create_unverified_context() if insecure else None  # kube-scheduler's self-signed cert
        try:
            with urllib.request.urlopen(url, timeout=2, context=context) as answer:
                return bool(answer.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def _https_ok(self, path: str, client: tuple[Path, Path]) -> bool:
        context = ssl.create_default_context(cafile=str(self.directory / "pki" / "ca.crt"))
        context.load_cert_chain(str(client[0]), str(client[1]))
        assert self.state is not None
        try:
            with urllib.request.urlopen(self.state.server + path, timeout=2, context=context) as answer:
                return bool(answer.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def _setup_identity(self) -> None:
        """The scheduler's identity as examples/deploy gives it: its namespace, service account
        and RBAC, applied as they are; then a token for that account in its kubeconfig. Also the
        `default` service account of `default` (which the controller-manager would make), without
        which the ServiceAccount admission plugin refuses pods there. Objects that exist already
        (a directory started before) are left as they are."""
        from kubernetes import client, config, utils   # the test extra's client, imported late

        assert self.state is not None
        try:
            api = config.new_client_from_config(str(self.admin_kubeconfig))
            for manifest in ("namespace.yaml", "serviceaccount.yaml", "rbac.yaml"):
                try:
                    utils.create_from_yaml(api, str(DEPLOY / manifest))
                except utils.FailToCreateError as exc:
                    # `up` again on a directory whose etcd data has them (a stopped plane started
                    # again): what exists already is as it was made; anything else still fails.
                    if any(getattr(e, "status", None) != 409 for e in exc.api_exceptions):
                        raise
            core = client.CoreV1Api(api)
            for namespace in ("default", SCHEDULER_SA[0]):
                ensure_default_service_account(core, namespace)
            token = core.create_namespaced_service_account_token(
                SCHEDULER_SA[1], SCHEDULER_SA[0],
                {"spec": {"expirationSeconds": 48 * 3600}}).status.token
        except Exception as exc:   # any failure here is this step's
            raise ControlPlaneError("setting up the scheduler's identity (examples/deploy)",
                                    self.log("kube-apiserver"), f"{type(exc).__name__}: {exc}") from None
        _kubeconfig(self.scheduler_kubeconfig, self.state.server, self.directory / "pki" / "ca.crt",
                    {"token": token}, "cpsat-scheduler")


def _in_group(pgid: int) -> dict[str, Any]:
    """Popen arguments that put the child in process group `pgid` (0: a new group it leads)."""
    if sys.version_info >= (3, 11):
        return {"process_group": pgid}
    return {"preexec_fn": lambda: os.setpgid(0, pgid)}


def ensure_default_service_account(core: Any, namespace: str) -> None:
    from kubernetes.client.exceptions import ApiException
    try:
        core.create_namespaced_service_account(namespace, {"metadata": {"name": "default"}})
    except ApiException as exc:
        if exc.status != 409:
            raise


def _is_ours(pid: int, names: set[str]) -> bool:
    """pid is alive and runs one of our binaries (so a recycled pid is never signalled)."""
    try:
        exe = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
    except OSError:
        return False
    return Path(exe).name in names


def stop_processes(pids: dict[str, int], pgid: int, *, popen: Optional[dict[str, Any]] = None,
                   grace: float = 10.0) -> None:
    """SIGTERM each of `pids` (latest first), SIGKILL what is left after `grace` seconds, then
    SIGKILL any other member of process group `pgid` that still runs one of our binaries."""
    popen = popen or {}
    names = set(pids) | {"etcd", "kube-apiserver", "kube-scheduler"}
    for name, pid in reversed(list(pids.items())):
        proc = popen.get(name)
        if proc is not None:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(grace)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        elif _is_ours(pid, names):
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + grace
            while _is_ours(pid, names) and time.monotonic() < deadline:
                time.sleep(0.1)
            if _is_ours(pid, names):
                os.kill(pid, signal.SIGKILL)
    if pgid:
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if os.getpgid(int(entry.name)) == pgid and _is_ours(int(entry.name), names):
                        os.kill(int(entry.name), signal.SIGKILL)
                except OSError:
                    pass

"""Latency and throughput of the live scheduler against the local API server.

    python -m adapters.live.bench [--nodes 1000] [--rate 100] [--duration 60] [--engine both]

What is measured, per engine (CP-SAT, then greedy `scheduleOne` for comparison):

1. *sustained arrival*: pods are created at `--rate` per second for `--duration` seconds;
   for each, the time from its creation to its binding, both as the API server commits them
   (p50, p99, max), and whether the scheduler kept up;
2. *maximum throughput*: a burst of `--burst` pods created at once; the binding rate between
   the 10th and the 90th percentile of their binding times (the steady middle of the burst).

The API server (with its simulated kubelets) and the pod generator run in this process; the
scheduler runs as its own process, `cpsat-scheduler run --kubeconfig ...`, exactly as it
would against a cluster, so the two share the machine's cores as an API server and a
scheduler would. The result is printed as a table and, with `--json`, as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parents[2]
ZONES = ("zone-a", "zone-b", "zone-c")
# Pod shapes of the generated workload (cpu, memory): small services, as scheduler_perf's
# default pod (100m, 500Mi) and two larger ones; dealt round-robin.
SHAPES = (("100m", "256Mi"), ("250m", "512Mi"), ("500m", "1Gi"))
# How long to wait for the last pods of a phase to be bound before calling it (seconds).
DRAIN_SECONDS = 120.0


@dataclass
class PhaseResult:
    pods: int
    bound: int
    seconds: float  # from the first creation to the last binding
    p50: Optional[float] = None
    p99: Optional[float] = None
    max: Optional[float] = None
    throughput: Optional[float] = None  # bindings per second


@dataclass
class EngineResult:
    engine: str
    sustained: PhaseResult
    burst: Optional[PhaseResult]
    windows: int = 0
    mean_window: float = 0.0
    solver_status: dict[str, float] = field(default_factory=dict)
    fallbacks: float = 0.0


def _node(i: int) -> dict[str, Any]:
    name = f"node-{i:04d}"
    resources = {"cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                                  "topology.kubernetes.io/zone": ZONES[i % len(ZONES)]}},
            "spec": {}, "status": {"allocatable": resources, "capacity": resources,
                                   "conditions": [{"type": "Ready", "status": "True"}]}}


def _pod(name: str, i: int) -> dict[str, Any]:
    cpu, memory = SHAPES[i % len(SHAPES)]
    app = f"svc-{i % len(SHAPES)}"
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "bench", "labels": {"app": app}},
            "spec": {"schedulerName": "cpsat-scheduler",
                     "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.9",
                                     "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}}


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, int(round(q * (len(ordered) - 1)))))
    return ordered[index]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Recorder:
    """Creation and binding times of pods, as the API server commits them."""

    def __init__(self) -> None:
        self.created: dict[str, float] = {}
        self.bound: dict[str, float] = {}
        self.lock = threading.Lock()

    def __call__(self, key: str, event: str, obj: dict[str, Any], prev: Optional[dict[str, Any]]) -> None:
        if key != "pods":
            return
        name = obj["metadata"]["name"]
        now = time.monotonic()
        if event == "ADDED":
            with self.lock:
                self.created[name] = now
        elif event == "MODIFIED" and prev is not None and obj["spec"].get("nodeName") \
                and not prev["spec"].get("nodeName"):
            with self.lock:
                self.bound.setdefault(name, now)

    def phase(self, names: list[str], *, trim: bool = False) -> PhaseResult:
        with self.lock:
            latencies = [self.bound[n] - self.created[n] for n in names if n in self.bound and n in self.created]
            binds = sorted(self.bound[n] for n in names if n in self.bound)
            first = min((self.created[n] for n in names if n in self.created), default=0.0)
        result = PhaseResult(pods=len(names), bound=len(binds), seconds=(binds[-1] - first) if binds else 0.0)
        if latencies:
            result.p50, result.p99, result.max = (_percentile(latencies, 0.5), _percentile(latencies, 0.99),
                                                  max(latencies))
        if trim and len(binds) >= 10:
            low, high = binds[len(binds) // 10], binds[(len(binds) * 9) // 10]
            middle = (len(binds) * 9) // 10 - len(binds) // 10
            result.throughput = middle / (high - low) if high > low else None
        elif binds and result.seconds > 0:
            result.throughput = len(binds) / result.seconds
        return result


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args

    def run_engine(self, engine: str) -> EngineResult:
        from adapters.apiserver import FakeApiServer
        from adapters.apiserver.api import Request

        args = self.args
        nodes = [_node(i) for i in range(args.nodes)]
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}}
        server = FakeApiServer([namespace, *nodes], kubelet_start_seconds=0.05, kubelet_grace_seconds=0.1,
                               history_limit=50_000, bookmark_interval=5.0).start()
        recorder = Recorder()
        server.store.add_listener(recorder)

        def create(name: str, i: int) -> None:
            server.api.handle(Request("POST", "/api/v1/namespaces/bench/pods", body=json.dumps(_pod(name, i)).encode()))

        with tempfile.TemporaryDirectory() as tmp:
            kubeconfig = server.kubeconfig_path(tmp)
            port = _free_port()
            log_path = Path(tmp) / "scheduler.log"
            debug = ["--debug"] if args.keep_logs else []  # per-window phase timings in the log
            cmd = [sys.executable, "-m", "adapters", *debug, "run", "--kubeconfig", kubeconfig, "--engine", engine,
                   "--no-leader-elect", "--metrics-addr", f"127.0.0.1:{port}", "--window-size", str(args.window_size),
                   "--window-wait", str(args.window_wait), "--time-limit", str(args.time_limit),
                   "--workers", str(args.workers)]
            with open(log_path, "w") as log_file:
                proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log_file, stderr=subprocess.STDOUT)
            try:
                self._wait_ready(port, proc)
                print(f"[{engine}] scheduler ready; {args.rate:g} pods/s for {args.duration:g}s", file=sys.stderr)
                sustained = self._sustained(create, recorder, engine)
                burst = None
                if args.burst:
                    print(f"[{engine}] burst of {args.burst} pods", file=sys.stderr)
                    names = [f"burst-{i:05d}" for i in range(args.burst)]
                    for i, name in enumerate(names):
                        create(name, i)
                    self._drain(recorder, names)
                    burst = recorder.phase(names, trim=True)
                metrics = self._metrics(port)
            finally:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                server.stop()
                if args.keep_logs:
                    target = Path(args.keep_logs) / f"scheduler-{engine}.log"
                    target.write_text(log_path.read_text())
        return EngineResult(engine=engine, sustained=sustained, burst=burst, **metrics)

    def _sustained(self, create: Any, recorder: Recorder, engine: str) -> PhaseResult:
        args = self.args
        total = int(args.rate * args.duration)
        names = [f"steady-{i:05d}" for i in range(total)]
        start = time.monotonic()
        for i, name in enumerate(names):
            due = start + i / args.rate
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            create(name, i)
        behind = time.monotonic() - start - args.duration
        if behind > 1.0:
            print(f"[{engine}] note: the generator fell {behind:.1f}s behind its schedule", file=sys.stderr)
        self._drain(recorder, names)
        return recorder.phase(names)

    @staticmethod
    def _drain(recorder: Recorder, names: list[str]) -> None:
        deadline = time.monotonic() + DRAIN_SECONDS
        while time.monotonic() < deadline:
            with recorder.lock:
                if all(n in recorder.bound for n in names):
                    return
            time.sleep(0.05)

    @staticmethod
    def _wait_ready(port: int, proc: subprocess.Popen) -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"the scheduler exited with status {proc.returncode}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError("the scheduler did not become ready within 120s")

    @staticmethod
    def _metrics(port: int) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            text = resp.read().decode()
        out: dict[str, Any] = {"solver_status": {}}
        windows = total = 0.0
        for line in text.splitlines():
            if line.startswith("cpsat_scheduler_window_size_count "):
                windows = float(line.split()[-1])
            elif line.startswith("cpsat_scheduler_window_size_sum "):
                total = float(line.split()[-1])
            elif line.startswith("cpsat_scheduler_solver_status_total{"):
                status = line.split('status="', 1)[1].split('"', 1)[0]
                out["solver_status"][status] = float(line.split()[-1])
            elif line.startswith("cpsat_scheduler_solver_fallbacks_total "):
                out["fallbacks"] = float(line.split()[-1])
        out["windows"] = int(windows)
        out["mean_window"] = round(total / windows, 1) if windows else 0.0
        return out


def _fmt(value: Optional[float], unit: str = "s") -> str:
    return "-" if value is None else f"{value:.2f}{unit}"


def report(results: list[EngineResult], args: argparse.Namespace) -> str:
    lines = [f"live scheduler benchmark: {args.nodes} nodes, {args.rate:g} pods/s for {args.duration:g}s, "
             f"burst {args.burst}, window {args.window_size} pods / {args.window_wait} ms, "
             f"CP-SAT limit {args.time_limit:g}s x {args.workers} workers, {os.cpu_count()} cores",
             "",
             f"{'engine':<8} {'bound':>11} {'p50':>7} {'p99':>7} {'max':>7} {'sustained':>10} {'burst max':>10} "
             f"{'windows':>8} {'mean win':>8}  solver status"]
    for r in results:
        s, b = r.sustained, r.burst
        statuses = ", ".join(f"{k} {int(v)}" for k, v in sorted(r.solver_status.items()))
        lines.append(f"{r.engine:<8} {s.bound:>5}/{s.pods:<5} {_fmt(s.p50):>7} {_fmt(s.p99):>7} {_fmt(s.max):>7} "
                     f"{_fmt(s.throughput, '/s'):>10} {_fmt(b.throughput if b else None, '/s'):>10} "
                     f"{r.windows:>8} {r.mean_window:>8}  {statuses}")
    return "\n".join(lines)


def run(**settings: Any) -> list[EngineResult]:
    """The benchmark from Python: `run(nodes=200, rate=50, duration=10, engine="greedy")`; any
    option of the command line, by its name."""
    args = _parser().parse_args([])
    for name, value in settings.items():
        if not hasattr(args, name):
            raise TypeError(f"unknown benchmark setting {name!r}")
        setattr(args, name, value)
    engines = ["cpsat", "greedy"] if args.engine == "both" else [args.engine]
    return [Bench(args).run_engine(engine) for engine in engines]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m adapters.live.bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=100.0, help="pods created per second")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of sustained arrival")
    parser.add_argument("--burst", type=int, default=4000, help="pods of the throughput burst (0: skip)")
    parser.add_argument("--engine", choices=("cpsat", "greedy", "both"), default="both")
    parser.add_argument("--time-limit", type=float, default=1.0, help="CP-SAT time limit per window")
    parser.add_argument("--workers", type=int, default=2, help="CP-SAT workers (one per core here)")
    parser.add_argument("--window-size", type=int, default=500)
    parser.add_argument("--window-wait", type=int, default=200, help="milliseconds")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    parser.add_argument("--keep-logs", metavar="DIR", help="keep the scheduler's logs in DIR")
    return parser


def main(argv: Optional[list[str]] = None) -> int:
    args = _parser().parse_args(argv)
    engines = ["cpsat", "greedy"] if args.engine == "both" else [args.engine]
    results = [Bench(args).run_engine(engine) for engine in engines]
    text = report(results, args)
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "results": [asdict(r) for r in results]}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

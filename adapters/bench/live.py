"""Latency, throughput and CPU of the live scheduler, on the in-memory API server or a real one.

    cpsat-scheduler bench --live [--nodes 500] [--burst 3000] [--backlog 3000] [--rate 100]
                                 [--duration 30] [--engine both] [--kubeconfig PATH]

(or `python -m adapters.bench.live ...`, the same options.)

Three rows per engine (CP-SAT, then greedy `scheduleOne` for comparison), the setups of
kube-scheduler's own comparisons:

1. *burst*: `--burst` pods created at once while the scheduler runs: when the last is bound,
   the binding rate over the steady middle (10th to 90th percentile of binding times), and
   each pod's latency from its creation to its binding (p50, p99);
2. *backlog*: `--backlog` pods created first, then the scheduler started: how long from its
   start (process start-up included) until all are bound, and the binding rate;
3. *steady*: pods created at `--rate` per second for `--duration` seconds: latency p50, p99.

Each row also gives the scheduler process's CPU seconds over the phase, and how many of the
phase's pods got their `Scheduled` event by the end of the run (after a prompt SIGTERM: the
events still queued must be flushed on shutdown). Each phase's pods are deleted before the next.

By default the in-memory API server (with simulated kubelets) runs in this process, times are
its commit times, and the scheduler runs as its own process, `cpsat-scheduler run --kubeconfig
...`, exactly as against a cluster. With `--kubeconfig PATH` the same runs against any API
server: the bench creates a namespace and `--nodes` fake Ready nodes (no kubelet; tainted so
nothing else lands there), watches pods and events to time them, and deletes it all at the end.
The result is printed as a table and, with `--json`, written as JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

from models import InputError

from adapters.cli import EXIT_INTERRUPTED, EXIT_USAGE

from .live_target import ClusterTarget, InMemoryTarget, Recorder, process_cpu_seconds

ROOT = Path(__file__).resolve().parents[2]
# How long to wait for the last pods of a phase to be bound before calling it (seconds).
DRAIN_SECONDS = 120.0
# How long the scheduler gets to stop after SIGTERM (a pod's default termination grace).
STOP_GRACE_SECONDS = 30.0
# After the scheduler stopped, how long the events of its last binds may take to be seen (seconds).
EVENTS_SECONDS = 30.0
PHASES = ("burst", "backlog", "steady")
PEER = "kube-scheduler"  # the engine name of the real kube-scheduler run as the peer
PROG = "python -m adapters.bench.live"  # also `cpsat-scheduler bench --live` (adapters/commands/bench.py)


@dataclass
class PhaseResult:
    pods: int
    bound: int
    seconds: float  # from the first creation (backlog: the scheduler's start) to the last binding
    p50: Optional[float] = None
    p99: Optional[float] = None
    p90: Optional[float] = None
    max: Optional[float] = None
    throughput: Optional[float] = None  # bindings per second
    cpu_seconds: Optional[float] = None  # the scheduler process's, over the phase
    events: int = 0  # Scheduled events written for the phase's pods, by the end of the run


@dataclass
class EngineResult:
    engine: str
    sustained: PhaseResult
    burst: Optional[PhaseResult]
    backlog: Optional[PhaseResult] = None
    windows: int = 0
    mean_window: float = 0.0
    solver_status: dict[str, float] = field(default_factory=dict)
    fallbacks: float = 0.0
    events_dropped: float = 0.0


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, int(round(q * (len(ordered) - 1)))))
    return ordered[index]


def phase_result(recorder: Recorder, names: list[str], *, trim: bool = False,
                 since: Optional[float] = None) -> PhaseResult:
    """Latency and throughput of one phase. `trim`: the rate over the 10th-90th percentile of
    binding times; `since`: count the phase's time from then (the backlog's scheduler start)."""
    with recorder.lock:
        latencies = [recorder.bound[n] - recorder.created[n] for n in names
                     if n in recorder.bound and n in recorder.created]
        binds = sorted(recorder.bound[n] for n in names if n in recorder.bound)
        first = since if since is not None else min((recorder.created[n] for n in names if n in recorder.created),
                                                    default=0.0)
    result = PhaseResult(pods=len(names), bound=len(binds), seconds=(binds[-1] - first) if binds else 0.0)
    if latencies and since is None:
        result.p50, result.p99, result.max = (_percentile(latencies, 0.5), _percentile(latencies, 0.99),
                                              max(latencies))
        result.p90 = _percentile(latencies, 0.9)
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

    def target(self) -> Any:
        args = self.args
        if args.kubeconfig:
            return ClusterTarget(args.kubeconfig, args.nodes, args.scheduler_name, context=args.context)
        return InMemoryTarget(args.nodes, args.scheduler_name)

    def run_engine(self, engine: str) -> EngineResult:
        target = self.target()
        try:
            return self._run_engine(engine, target)
        finally:
            target.close()

    def _run_engine(self, engine: str, target: Any) -> EngineResult:
        args = self.args
        recorder = target.recorder
        phases: dict[str, tuple[list[str], PhaseResult]] = {}
        backlog = [f"{engine}-backlog-{i:05d}" for i in range(args.backlog)]
        if backlog:
            print(f"[{engine}] backlog: {len(backlog)} pods waiting, then the scheduler starts", file=sys.stderr)
            target.create_pods(backlog)
        with tempfile.TemporaryDirectory() as tmp:
            log_path = Path(tmp) / "scheduler.log"
            peer_port = 0
            if engine == PEER:
                peer_port = free_port()
                cmd = kube_scheduler_command(args, target.kubeconfig, Path(tmp), peer_port)
            else:
                debug = ["--debug"] if args.keep_logs else []  # per-window phase timings in the log
                cmd = [sys.executable, "-m", "adapters", *debug, "run", "--kubeconfig", target.kubeconfig,
                       "--engine", engine, "--no-leader-elect", "--metrics-addr", "127.0.0.1:0",
                       "--window-size", str(args.window_size), "--window-wait", str(args.window_wait),
                       "--time-limit", str(args.time_limit), "--workers", str(args.workers),
                       "--scheduler-name", args.scheduler_name, *args.scheduler_args]
                if args.context:
                    cmd += ["--context", args.context]
            started = time.monotonic()
            with open(log_path, "w") as log_file:
                proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log_file, stderr=subprocess.STDOUT)
            try:
                if backlog:
                    self._drain(recorder, backlog, proc, log_path)
                    result = phase_result(recorder, backlog, trim=True, since=started)
                    result.cpu_seconds = process_cpu_seconds(proc.pid)
                    phases["backlog"] = (backlog, result)
                    target.delete_pods(backlog)
                self._wait_ready(log_path, proc, peer_port)
                steady = [f"{engine}-steady-{i:05d}" for i in range(int(args.rate * args.duration))]
                phases["steady"] = self._measured(proc, log_path, recorder, steady,
                                                  create=lambda names: self._steady(target, engine, names))
                target.delete_pods(phases["steady"][0])
                if args.burst:
                    print(f"[{engine}] burst of {args.burst} pods", file=sys.stderr)
                    names = [f"{engine}-burst-{i:05d}" for i in range(args.burst)]
                    phases["burst"] = self._measured(proc, log_path, recorder, names, create=target.create_pods,
                                                     trim=True)
                metrics = ({} if engine == PEER else self._metrics(self._wait_ready(log_path, proc)))
                if engine == PEER:
                    # kube-scheduler 1.37 cancels the event writes still in flight when it is told
                    # to stop (cpsat-scheduler flushes them): its events are waited for first.
                    _wait_events(recorder, phases)
            finally:
                proc.send_signal(signal.SIGTERM)  # promptly: events still queued must be flushed now
                try:
                    proc.wait(STOP_GRACE_SECONDS)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                if args.keep_logs:
                    target_log = Path(args.keep_logs) / f"scheduler-{engine}.log"
                    target_log.write_text(log_path.read_text())
        # The last events reach the recorder through a watch, which lags (a real API server's more,
        # a loaded machine's much more): wait until each bound pod's event is in, or EVENTS_SECONDS
        # pass (an event the scheduler never wrote is then counted missing).
        _wait_events(recorder, phases)
        if args.keep_logs:  # each pod's times as the bench saw them (monotonic, comparable with the scheduler's log)
            with recorder.lock, open(Path(args.keep_logs) / f"pods-{engine}.tsv", "w") as out:
                for name, created in sorted(recorder.created.items()):
                    out.write(f"{name}\t{created:.4f}\t{recorder.bound.get(name, float('nan')):.4f}\n")
        for names, result in phases.values():
            result.events = recorder.count_events(names)
        empty = PhaseResult(pods=0, bound=0, seconds=0.0)
        return EngineResult(engine=engine, sustained=phases.get("steady", ([], empty))[1],
                            burst=phases["burst"][1] if "burst" in phases else None,
                            backlog=phases["backlog"][1] if "backlog" in phases else None, **metrics)

    def _measured(self, proc: subprocess.Popen, log_path: Path, recorder: Recorder, names: list[str], *,
                  create: Any = None, trim: bool = False) -> tuple[list[str], PhaseResult]:
        """Create `names` (unless created already), wait until bound: the phase and its CPU."""
        cpu = process_cpu_seconds(proc.pid)
        if create is not None:
            create(names)
        self._drain(recorder, names, proc, log_path)
        result = phase_result(recorder, names, trim=trim)
        after = process_cpu_seconds(proc.pid)
        result.cpu_seconds = None if cpu is None or after is None else after - cpu
        return names, result

    def _steady(self, target: Any, engine: str, names: list[str]) -> None:
        """Create `names` at the steady rate."""
        args = self.args
        print(f"[{engine}] steady: {args.rate:g} pods/s for {args.duration:g}s", file=sys.stderr)
        start = time.monotonic()
        for i, name in enumerate(names):
            delay = start + i / args.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            target.create_pod(name, i)
        behind = time.monotonic() - start - args.duration
        if behind > 1.0:
            print(f"[{engine}] note: the generator fell {behind:.1f}s behind its schedule", file=sys.stderr)

    @staticmethod
    def _drain(recorder: Recorder, names: list[str], proc: subprocess.Popen, log_path: Path) -> None:
        """Wait until `names` are bound, DRAIN_SECONDS at most; a scheduler that exited (a
        setting `run` refused, a kube-scheduler flag) ends the run now, not when they are up."""
        deadline = time.monotonic() + DRAIN_SECONDS
        while time.monotonic() < deadline and not recorder.all_bound(names):
            _exited(proc, log_path)
            time.sleep(0.05)

    @staticmethod
    def _wait_ready(log_path: Path, proc: subprocess.Popen, peer_port: int = 0) -> int:
        """The port of the scheduler's status server (from its log), once /readyz says ready;
        `peer_port`: kube-scheduler's, served over HTTPS with its own certificate."""
        deadline = time.monotonic() + 120
        port = peer_port or None
        context = ssl._create_unverified_context() if peer_port else None  # its self-signed certificate
        while time.monotonic() < deadline:
            _exited(proc, log_path)
            if port is None:
                found = re.search(r"/metrics on 127\.0\.0\.1:(\d+)", log_path.read_text())
                port = int(found.group(1)) if found else None
                if port is None:
                    time.sleep(0.1)
                    continue
            try:
                scheme = "https" if peer_port else "http"
                with urllib.request.urlopen(f"{scheme}://127.0.0.1:{port}/readyz", timeout=2,
                                            context=context) as resp:
                    if resp.status == 200:
                        return port
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
            elif line.startswith("cpsat_scheduler_events_dropped_total "):
                out["events_dropped"] = float(line.split()[-1])
        out["windows"] = int(windows)
        out["mean_window"] = round(total / windows, 1) if windows else 0.0
        return out


def _exited(proc: subprocess.Popen, log_path: Path) -> None:
    """Raise if the scheduler process has exited: status 2 is `cpsat-scheduler run` refusing its
    command line (a `--scheduler-arg`), said in its own last line; any other, the log's end."""
    if proc.poll() is None:
        return
    log = log_path.read_text()
    ours = isinstance(proc.args, list) and proc.args[:3] == [sys.executable, "-m", "adapters"]  # a Go panic exits 2
    if proc.returncode == EXIT_USAGE and ours:
        lines = log.strip().splitlines()
        raise InputError("the scheduler", "", f"exited with status 2: {lines[-1] if lines else 'no output'}")
    raise RuntimeError(f"the scheduler exited with status {proc.returncode}: {log[-2000:]}")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def kube_scheduler_command(args: argparse.Namespace, kubeconfig: str, directory: Path, port: int) -> list[str]:
    """The real kube-scheduler as the peer: one profile taking the bench's schedulerName, no
    leader election, its client allowed --peer-qps requests a second (burst twice that) so that
    client-side throttling is not what limits it."""
    import yaml

    settings = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                "clientConnection": {"kubeconfig": kubeconfig, "qps": float(args.peer_qps),
                                     "burst": int(2 * args.peer_qps)},
                "leaderElection": {"leaderElect": False},
                "profiles": [{"schedulerName": args.scheduler_name}]}
    path = directory / "kube-scheduler.yaml"
    path.write_text(yaml.safe_dump(settings))
    command = [args.kube_scheduler, f"--config={path}", f"--authentication-kubeconfig={kubeconfig}",
               f"--authorization-kubeconfig={kubeconfig}", "--bind-address=127.0.0.1", f"--secure-port={port}",
               "--v=1", *args.peer_args]
    return command


def _fmt(value: Optional[float], unit: str = "s") -> str:
    return "-" if value is None else f"{value:.2f}{unit}"


def _ms(value: Optional[float]) -> str:
    """Milliseconds; a tenth of one below 10 ms, where a lone pod's latency sits on a real server
    and a whole millisecond would round 2.6 and 3.4 alike."""
    if value is None:
        return "-"
    ms = 1000 * value
    return f"{ms:.1f}ms" if ms < 9.95 else f"{ms:.0f}ms"


def _rows(r: EngineResult) -> list[tuple[str, PhaseResult]]:
    found = {"burst": r.burst, "backlog": r.backlog, "steady": r.sustained if r.sustained.pods else None}
    return [(name, found[name]) for name in PHASES if found[name] is not None]  # type: ignore[misc]


def report(results: list[EngineResult], args: argparse.Namespace) -> str:
    where = f"API server of {args.kubeconfig}" if args.kubeconfig else "in-memory API server"
    # throughput is compared with the real kube-scheduler when it ran, else with our greedy
    baseline = PEER if any(r.engine == PEER for r in results) else "greedy"
    versus = "vs kube" if baseline == PEER else "vs greedy"
    width = max(7, *(len(r.engine) for r in results))
    lines = [f"live scheduler benchmark on the {where}: {args.nodes} nodes; burst {args.burst}, backlog "
             f"{args.backlog}, steady {args.rate:g} pods/s for {args.duration:g}s; window {args.window_size} pods / "
             f"{args.window_wait} ms; CP-SAT limit {args.time_limit:g}s x {args.workers} workers; "
             f"{os.cpu_count()} cores",
             "",
             f"{'engine':<{width}} {'phase':<8} {'bound':>11} {'seconds':>8} {'pods/s':>8} {versus:>9} {'p50':>7} "
             f"{'p90':>7} {'p99':>7} {'CPU s':>7} {'CPU ms/pod':>10} {'events':>11}"]
    base = {name: phase for r in results if r.engine == baseline for name, phase in _rows(r)}
    for r in results:
        for name, ph in _rows(r):
            ratio = "-"
            other = base.get(name)
            if r.engine != baseline and other is not None and other.throughput and ph.throughput:
                ratio = f"{ph.throughput / other.throughput:.2f}x"
            per_pod = (f"{1000 * ph.cpu_seconds / ph.bound:.1f}" if ph.cpu_seconds is not None and ph.bound
                       else "-")
            lines.append(f"{r.engine:<{width}} {name:<8} {ph.bound:>5}/{ph.pods:<5} {ph.seconds:>8.2f} "
                         f"{_fmt(ph.throughput, ''):>8} {ratio:>9} {_ms(ph.p50):>7} {_ms(ph.p90):>7} {_ms(ph.p99):>7} "
                         f"{_fmt(ph.cpu_seconds, ''):>7} {per_pod:>10} {ph.events:>5}/{ph.bound:<5}")
    lines.append("")
    for r in results:
        if r.engine == PEER:
            lines.append(f"{PEER}: {args.kube_scheduler} (client QPS {args.peer_qps:g}, burst {int(2 * args.peer_qps)})")
            continue
        statuses = ", ".join(f"{k} {int(v)}" for k, v in sorted(r.solver_status.items()))
        lines.append(f"{r.engine}: {r.windows} windows (mean {r.mean_window} pods): {statuses}; "
                     f"{int(r.fallbacks)} fallbacks, {int(r.events_dropped)} events dropped before shutdown")
    lines.append("backlog seconds and CPU count from the scheduler's start (process start-up included); "
                 "events: Scheduled events written for the phase's bound pods by the end of the run")
    return "\n".join(lines)


def run(**settings: Any) -> list[EngineResult]:
    """The benchmark from Python: `run(nodes=200, rate=50, duration=10, engine="greedy")`; any
    option of the command line, by its name."""
    args = _parser().parse_args([])
    for name, value in settings.items():
        if not hasattr(args, name):
            raise TypeError(f"unknown benchmark setting {name!r}")
        setattr(args, name, value)
    return [Bench(args).run_engine(engine) for engine in engines_of(args)]


def engines_of(args: argparse.Namespace) -> list[str]:
    """Which schedulers run, one after the other: both = CP-SAT and greedy; peer = CP-SAT and the
    real kube-scheduler (--kube-scheduler), on the same server."""
    if args.engine in ("peer", PEER):
        if not args.kube_scheduler or not args.kubeconfig:
            raise InputError("--engine", "", f"{args.engine} needs --kube-scheduler PATH (its binary) and "
                             "--kubeconfig PATH (a real API server)")
    return {"both": ["cpsat", "greedy"], "peer": ["cpsat", PEER]}.get(args.engine, [args.engine])


def _parser(prog: str = PROG) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--rate", type=float, default=100.0, help="pods created per second in the steady phase")
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of steady arrival")
    parser.add_argument("--burst", type=int, default=3000, help="pods created at once while running (0: skip)")
    parser.add_argument("--backlog", type=int, default=3000,
                        help="pods created before the scheduler starts (0: skip)")
    parser.add_argument("--kubeconfig", metavar="PATH",
                        help="run against this API server instead of the in-memory one: fake Ready nodes and a "
                        "namespace are created for the run and deleted at its end")
    parser.add_argument("--context", metavar="NAME", help="with --kubeconfig: the context to use")
    parser.add_argument("--scheduler-name", default="cpsat-scheduler",
                        help="schedulerName of the bench pods and of the scheduler started (default cpsat-scheduler)")
    parser.add_argument("--scheduler-arg", dest="scheduler_args", action="append", default=[], metavar="ARG",
                        help="one more argument for `cpsat-scheduler run` (repeatable), e.g. --scheduler-arg=--quick-window=0")
    parser.add_argument("--engine", choices=("cpsat", "greedy", "both", PEER, "peer"), default="both",
                        help="both: CP-SAT then greedy; peer: CP-SAT then the real kube-scheduler (needs "
                        "--kube-scheduler and --kubeconfig)")
    parser.add_argument("--kube-scheduler", metavar="PATH",
                        help="the kube-scheduler binary run as the peer (e.g. python -m tests.e2e.controlplane build)")
    parser.add_argument("--peer-qps", type=float, default=1000.0,
                        help="kube-scheduler's client QPS (burst twice that), high so that it is not the limit")
    parser.add_argument("--peer-arg", dest="peer_args", action="append", default=[], metavar="ARG",
                        help="one more argument for kube-scheduler (repeatable)")
    parser.add_argument("--time-limit", type=float, default=1.0, help="CP-SAT time limit per window")
    parser.add_argument("--workers", type=int, default=2, help="CP-SAT workers (one per core here)")
    parser.add_argument("--window-size", type=int, default=500)
    parser.add_argument("--window-wait", type=int, default=200, help="milliseconds")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    parser.add_argument("--keep-logs", metavar="DIR", help="keep the scheduler's logs in DIR")
    return parser


def check_args(args: argparse.Namespace) -> None:
    """Bad settings refused before anything is created on a server, and the output places made
    ready, so that a run of minutes never ends in an error about where to write its results."""
    engines_of(args)
    if args.context and not args.kubeconfig:
        raise InputError("--context", args.context, "names a context of a kubeconfig: give --kubeconfig too (without "
                         "it the bench runs on its in-memory API server)")
    # Written as ranges so that NaN and infinity fail too. --peer-qps, --window-size,
    # --time-limit, --window-wait and --workers are passed on to the scheduler: refused here, not
    # by a scheduler that exits once the bench has set up and the backlog waits on it.
    for name in ("nodes", "rate", "peer_qps", "window_size"):
        value = getattr(args, name)
        if not 0 < value < math.inf:
            raise InputError(f"--{name.replace('_', '-')}", "", f"must be above 0, not {value:g}")
    for name in ("duration", "burst", "backlog", "time_limit", "window_wait", "workers"):
        value = getattr(args, name)
        if not 0 <= value < math.inf:
            raise InputError(f"--{name.replace('_', '-')}", "", f"must be 0 or more, not {value:g}")
    if args.engine in ("peer", PEER):
        _check_peer_binary(args.kube_scheduler)
    if args.kubeconfig and not Path(args.kubeconfig).is_file():
        raise InputError("--kubeconfig", args.kubeconfig, "no such file")
    if args.json and not Path(args.json).resolve().parent.is_dir():
        raise InputError("--json", args.json, "its directory does not exist")
    if args.json and Path(args.json).is_dir():
        raise InputError("--json", args.json, "is a directory, not a file")
    if args.keep_logs:
        try:
            Path(args.keep_logs).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError("--keep-logs", args.keep_logs, f"cannot make the directory: {exc.strerror or exc}") from None


def _check_peer_binary(path: str) -> None:
    """The peer must be kube-scheduler, or a run of minutes would end when its turn came: its
    `--help` names it (`--version` cannot tell: every Kubernetes binary answers 'Kubernetes v...',
    kube-apiserver's beside it in the same directory too). No stdin: nothing can wait on a terminal."""
    try:
        answer = subprocess.run([path, "--help"], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        raise InputError("--kube-scheduler", path, f"cannot run it: {getattr(exc, 'strerror', None) or exc}") from None
    if answer.returncode != 0 or "kube-scheduler [flags]" not in answer.stdout:
        raise InputError("--kube-scheduler", path, "not a kube-scheduler binary (its --help does not show "
                         "'kube-scheduler [flags]')")


def main(argv: Optional[list[str]] = None, prog: str = PROG) -> int:
    """The command line; `prog` names it in help and errors. Bad settings or a server the bench
    cannot use end with one line, ``<prog>: error: <what>: <problem>``, and status 2."""
    parser = _parser(prog)
    args = parser.parse_args(argv)
    try:
        check_args(args)
        results = [Bench(args).run_engine(engine) for engine in engines_of(args)]
    except InputError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"{prog}: interrupted: no results printed", file=sys.stderr)
        return EXIT_INTERRUPTED
    text = report(results, args)
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "results": [asdict(r) for r in results]}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())


def _wait_events(recorder: Any, phases: dict[str, Any]) -> None:
    """Until each phase's bound pods have their Scheduled event in, or EVENTS_SECONDS pass."""
    deadline = time.monotonic() + EVENTS_SECONDS
    while time.monotonic() < deadline and any(recorder.count_events(names) < result.bound
                                              for names, result in phases.values()):
        time.sleep(0.1)

"""The peer bench on contended snapshots, with preemption (issue 38): the same snapshot decided by
the real kube-scheduler 1.36 and by the project, on a real server.

    python -m tests.e2e.kube_peer SNAPSHOT.json [--limit 300] [--json OUT]
    python -m tests.e2e.kube_peer --nodes 20 --seed 3 [--no-live]      # a generated contended window

(starts and stops its own control plane; SNAPSHOT is a JSON List, e.g. written by
``python -m adapters.bench.workloads contended --scale quick --compact FILE``).

The snapshot is loaded (``Loader``): its PriorityClasses, Nodes (made Ready with its allocatable),
running pods bound as in the snapshot and Running, PodDisruptionBudgets with their status,
PodGroups (a ``scheduling.x-k8s.io`` PodGroup and its pods' label become the 1.36
``scheduling.k8s.io/v1alpha2`` PodGroup and ``spec.schedulingGroup``), then its pending pods.
Every loaded node carries the run's label and every pending pod a node selector on it, so other
nodes of the server are never candidates; both schedulers see the same objects. An object the
server refuses is reported with the server's message and the scenario is skipped.

Then one scheduler decides:

- ``kube-scheduler``: the real one, started once the scenario is loaded (profile ``kube-peer``,
  ``percentageOfNodesToScore: 100``, its informer listing the pods so that its queue breaks
  priority ties as the project's does: ``KUBE_GATES``);
- ``schedule`` (offline): the project's plan (``solver.schedule``, what ``cpsat-scheduler schedule``
  runs) on the objects as read back from the server before any scheduler ran, at 1 s and 10 s;
- ``run`` (live): ``cpsat-scheduler run`` as its own process, with its service account.

Without a kubelet, evicted pods would stay Terminating: the bench's watch finishes each graceful
deletion (``harness.PodRecorder``) and does nothing else. A scheduler has settled when every
pending pod is bound or marked unschedulable, no pod is terminating, and nothing changed for
``QUIET`` seconds; at ``--limit`` seconds it is stopped and reported as "did not settle".

Per scheduler (``Outcome``): pods running at the end per priority tier and the pending pods placed
per tier, evictions per priority, PDB violations (evictions beyond a budget's
``disruptionsAllowed``), gangs whole (placed at ``minCount`` or more) and broken, time to settle,
CPU seconds, and for kube-scheduler its evictions whose preemptor did not end up on the victim's
node (its asynchronous preemption: the room went to another pod, or to none).
"""

from __future__ import annotations

import argparse
import io
import json
import re
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

from tests.e2e.controlplane import ControlPlane
from tests.e2e.harness import LiveScheduler, PodRecorder, kube_scheduler_profile, settle, stop_process
from tests.e2e.kubelet_admission import plan_refusals
from tests.e2e.peer_loader import Loader, Refused
from tests.e2e.peer_scenario import (  # noqa: F401 (what the table and the tests use, from one place)
    GROUP_LABEL, PROFILE, RUN_LABEL, Outcome, Scenario, compare, contended_window, key, prepare, with_scheduler,
)

LIVE = "cpsat-scheduler"           # the live run's scheduler name
QUIET = 4.0                        # seconds without change: settled
# kube-scheduler's client: its default 50 requests a second would make the bench measure the
# throttle on thousands of bindings, not the scheduler (the live bench's peer runs at 1000 too)
CLIENT = {"qps": 1000.0, "burst": 2000}
LIMIT = 300.0                      # seconds at most per scheduler
# kube-scheduler's informer reads the pods that exist when it starts by a LIST, handed on in the
# server's order (namespace, then name), so that its queue breaks priority ties as the project's
# does. By default (WatchListClient, on since 1.35) it streams them into a Go map first and hands
# them on in that map's random order: equal-priority pods then go in a new random order on every
# run (docs/kube-peer.md, "Queue order").
KUBE_GATES = {"WatchListClient": False}
_PREEMPTED = re.compile(r"Preempted by pod (\S+) on node (\S+)")
# kube-scheduler's line (at --v=3) as it pops a pod from its queue to try it
_ATTEMPT = re.compile(r'"Attempting to schedule pod" pod="([^"]+)"')


# --------------------------------------------------------------------------- the schedulers


def _pod_state(loader: Loader, scenario: Scenario) -> Callable[[], tuple[Any, ...]]:
    """A reading of the scenario's pods: (pending pods bound, pending pods marked unschedulable,
    pods gone, pods terminating). A pending pod gone was bound by the scheduler, then evicted
    for a pod of higher priority (without its controller, nothing creates it again)."""
    pending = {key(p) for p in scenario.pending()}
    running = {key(p) for p in scenario.running()}

    def read() -> tuple[Any, ...]:
        pods = loader.pods(scenario)
        bound = frozenset((k, p.spec.node_name) for k, p in pods.items() if k in pending and p.spec.node_name)
        marked = frozenset(k for k, p in pods.items() if k in pending and not p.spec.node_name and any(
            c.type == "PodScheduled" and c.status == "False" for c in (p.status.conditions or [])))
        gone = frozenset(k for k in running | pending if k not in pods)
        terminating = sum(1 for p in pods.values() if p.metadata.deletion_timestamp)
        return bound, marked, gone, terminating
    return read


def _settled(scenario: Scenario) -> Callable[[tuple[Any, ...]], bool]:
    pending = {key(p) for p in scenario.pending()}
    return lambda now: {k for k, _ in now[0]} | set(now[1]) | (set(now[2]) & pending) == pending and now[3] == 0


def _recorders(loader: Loader, scenario: Scenario) -> list[PodRecorder]:
    """The kubelet's part: each graceful deletion in the scenario's namespaces finished."""
    out = [PodRecorder(loader.api, ns) for ns in loader._namespaces(scenario)]
    for r in out:
        r.start()
    return out


def _watch(loader: Loader, scenario: Scenario, started: float, limit: float,
           cpu: Callable[[], Optional[float]], name: str) -> Outcome:
    """Settle and read what the scheduler did (its evictions: running pods gone)."""
    reading, since = settle(_pod_state(loader, scenario), _settled(scenario), quiet=QUIET, limit=limit)
    bound, marked, gone, terminating = reading
    done = _settled(scenario)(reading)
    outcome = Outcome(name, placed=dict(bound), evicted=sorted(gone), settled=done,
                      seconds=round((since if done else time.monotonic()) - started, 2), cpu_seconds=cpu())
    if not done:
        waiting = {key(p) for p in scenario.pending()} - {k for k, _ in bound} - set(marked) - set(gone)
        outcome.unsettled = sorted(waiting)[:20] + ([f"{terminating} terminating"] if terminating else [])
        outcome.unsettled.append(f"last change {round(time.monotonic() - since, 1)} s before the limit")
    return outcome


def _cpu_of(pid: int) -> Callable[[], Optional[float]]:
    from adapters.bench.live_target import process_cpu_seconds

    return lambda: process_cpu_seconds(pid)


def kube_decides(plane: ControlPlane, loader: Loader, scenario: Scenario, workdir: Path, *, limit: float = LIMIT,
                 loaded: bool = False, verbosity: int = 1) -> Outcome:
    """The real kube-scheduler, started once every pending pod exists, left to settle.
    ``loaded``: the caller loaded the scenario (its pending pods named for ``PROFILE``).
    ``verbosity``: its ``--v`` (3 logs each pod it attempts, in queue order; 10 each plugin's
    score), its log kept in ``workdir`` as ``kube-scheduler-<run>.log``."""
    if not loaded:
        loader.load(scenario)
        loader.pending(scenario)
    recorders = _recorders(loader, scenario)
    uids = {p.metadata.uid: k for k, p in loader.pods(scenario).items()}
    proc = None
    try:
        with open(workdir / f"kube-scheduler-{scenario.run}.log", "wb") as log:
            started = time.monotonic()
            proc = kube_scheduler_profile(plane, PROFILE, workdir, log, verbosity=verbosity, gates=KUBE_GATES,
                                          percentageOfNodesToScore=100,
                                          clientConnection=CLIENT | {"kubeconfig": str(plane.kube_scheduler_kubeconfig)})
        outcome = _watch(loader, scenario, started, limit, _cpu_of(proc.pid), "kube-scheduler")
    finally:
        stop_process(proc)
        for r in recorders:
            r.stop()
    outcome.preemptors = _preemptors(loader, scenario, uids)
    outcome.misdirected = [{"victim": v, "preemptor": p, "node": n, "preemptor_ended": outcome.placed.get(p) or "pending"}
                           for v, (p, n) in sorted(outcome.preemptors.items())
                           if v in outcome.evicted and outcome.placed.get(p) != n]
    outcome.kubelet = [r.line() for r in _final_refusals(loader, scenario)]
    return scenario.summarize(outcome)


def attempt_order(log: str) -> list[str]:
    """The pods in the order kube-scheduler first tried them (its log at ``--v=3`` or more): its
    queue's initial order (a pod tried again is counted at its first attempt only; the pods not
    yet tried keep their order among themselves)."""
    return list(dict.fromkeys(found.group(1) for found in _ATTEMPT.finditer(log)))


def project_queue_order(scenario: Scenario, items: list[dict[str, Any]]) -> list[str]:
    """The pending pods in the order the project's engines take them (``solver.context``'s window:
    priority, then creation time, then name), on the objects read back from the server."""
    from solver.context import build_context

    return [p.key for p in build_context(_snapshot(scenario, items), _config(1.0)).window]


def _preemptors(loader: Loader, scenario: Scenario, uids: dict[str, str]) -> dict[str, list[str]]:
    """Each victim's preemptor and node, from its Preempted event ("Preempted by pod UID on node
    N"). An eviction whose preemptor did not end up bound on N (``Outcome.misdirected``) gave its
    room to another pod, or to none: kube-scheduler's asynchronous preemption."""
    out: dict[str, list[str]] = {}
    for ns in loader._namespaces(scenario):
        for e in loader.core.list_namespaced_event(ns, field_selector="reason=Preempted").items:
            found = _PREEMPTED.match(e.message or "")
            if found and e.involved_object.uid in uids:   # this run's victim, not an earlier run's
                preemptor = uids.get(found.group(1)) or (f"{ns}/{e.related.name}" if e.related else found.group(1))
                out[f"{ns}/{e.involved_object.name}"] = [preemptor, found.group(2)]
    return out


def rule_breaks(scenario: Scenario, items: list[dict[str, Any]], kube: Outcome) -> list[str]:
    """The project's validator on kube-scheduler's outcome as a plan (its placements, its
    evictions with the preemptors their events name): the rules, as the project reads them,
    that kube's end state breaks (e.g. a hard spread skewed by a later pod or an eviction, which
    kube-scheduler checks only when the pod is placed)."""
    from models.plan import Assignment, Plan, PlanStats, Preemption, Unschedulable
    from solver import validate

    pending = {key(p) for p in scenario.pending()}
    running = {key(p) for p in scenario.running()}
    plan = Plan(assignments=tuple(Assignment(pod=k, node=n) for k, n in kube.placed.items()),
                preemptions=tuple(Preemption(pod=v, node=kube.preemptors.get(v, ["", ""])[1],
                                             preemptor=kube.preemptors.get(v, ["", ""])[0])
                                  for v in kube.evicted if v in running),
                unschedulable=tuple(Unschedulable(pod=k, message="left pending by kube-scheduler")
                                    for k in sorted(pending - set(kube.placed))),
                stats=PlanStats(engine="kube-scheduler", status="FEASIBLE"))
    return validate(_snapshot(scenario, items), plan, _config(1.0))


def _snapshot(scenario: Scenario, items: list[dict[str, Any]]) -> Any:
    from adapters.snapshot_io import read_snapshot

    text = json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    return read_snapshot(io.StringIO(text), label=scenario.name).snapshot


def _config(limit: float) -> Any:
    from models.config import SchedulerConfig

    return SchedulerConfig(scheduler_name=PROFILE).with_overrides(time_limit_seconds=limit)


def _final_refusals(loader: Loader, scenario: Scenario) -> list[Any]:
    from tests.e2e.kubelet_admission import refusals

    sel = f"{RUN_LABEL}={scenario.run}"
    nodes = [loader._plain(n, "Node", "v1") for n in loader.core.list_node(label_selector=sel).items]
    pods = [loader._plain(p, "Pod", "v1") for p in loader.pods(scenario).values()]
    return refusals(nodes, pods)


def project_plans(scenario: Scenario, items: list[dict[str, Any]], limits: Iterable[float]) -> list[Outcome]:
    """The project's offline plan (``solver.schedule``, as ``cpsat-scheduler schedule`` runs it)
    on the objects read back from the server, at each time limit."""
    from solver import schedule

    snapshot = _snapshot(scenario, items)
    nodes = [o for o in items if o["kind"] == "Node"]
    pods = [o for o in items if o["kind"] == "Pod"]
    out: list[Outcome] = []
    for limit in sorted(limits):
        proven = next((o for o in out if o.solver_status == "OPTIMAL" and not o.degraded), None)
        if proven is not None:
            # proven optimal at a shorter limit: a longer one cannot place more; not solved again
            out.append(replace(proven, scheduler=f"schedule {limit:g}s"))
            continue
        cfg = _config(limit)
        cpu = time.process_time()
        plan = schedule(snapshot, cfg)
        outcome = Outcome(f"schedule {limit:g}s", placed=plan.assignment_map(),
                          evicted=sorted({v.pod for v in plan.preemptions}), seconds=round(plan.stats.wall_time_s, 2),
                          cpu_seconds=round(time.process_time() - cpu, 2), status=plan.stats.status,
                          solver_status=plan.stats.solver_status or "", degraded=plan.stats.degraded or "")
        outcome.kubelet = [r.line() for r in plan_refusals(nodes, pods, outcome.placed, outcome.evicted)]
        out.append(scenario.summarize(outcome))
    return out


def live_decides(plane: ControlPlane, loader: Loader, scenario: Scenario, workdir: Path, *,
                 limit: float = LIMIT, time_limit: float = 10.0) -> Outcome:
    """``cpsat-scheduler run``, ready before the pending pods (named for it) are created."""
    live = with_scheduler(scenario, LIVE)
    loader.load(live)
    recorders = _recorders(loader, live)
    sched = None
    try:
        sched = LiveScheduler(plane, workdir / f"run-{scenario.run}.log", f"--time-limit={time_limit:g}")
        deadline = time.monotonic() + 180
        while not sched.ready() and time.monotonic() < deadline:
            time.sleep(0.5)
        started = time.monotonic()
        loader.pending(live)
        outcome = _watch(loader, live, started, limit, _cpu_of(sched.proc.pid), "run")
    finally:
        if sched is not None:
            sched.stop()
        for r in recorders:
            r.stop()
    outcome.kubelet = [r.line() for r in _final_refusals(loader, live)]
    return scenario.summarize(outcome)


# --------------------------------------------------------------------------- the bench


@dataclass
class BenchReport:
    scenario: str
    nodes: int
    running: int
    pending: int
    outcomes: list[Outcome] = field(default_factory=list)
    refused: str = ""           # the server's message naming the object it refused

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def bench(plane: ControlPlane, scenario: Scenario, workdir: Path, *, limits: Iterable[float] = (1.0, 10.0),
          live: bool = True, limit: float = LIMIT, snapshot_out: Optional[Path] = None,
          kube_verbosity: int = 1) -> BenchReport:
    """kube-scheduler, the offline plans and (``live``) ``run``, one after the other, each on
    the scenario loaded afresh. ``snapshot_out``: where to write the objects read back from the
    server (what the offline plans decide on: `cpsat-scheduler schedule FILE --scheduler-name
    kube-peer` reproduces them)."""
    report = BenchReport(scenario.name, sum(o["kind"] == "Node" for o in scenario.objects),
                         len(scenario.running()), len(scenario.pending()))
    loader = Loader(plane)
    try:
        try:
            loader.load(scenario)
            loader.pending(scenario)
        except Refused as exc:
            report.refused = str(exc)
            return report
        items = loader.read_back(scenario)
        if snapshot_out is not None:
            snapshot_out.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
        kube = kube_decides(plane, loader, scenario, workdir, limit=limit, loaded=True, verbosity=kube_verbosity)
        kube.rule_breaks = rule_breaks(scenario, items, kube)
        report.outcomes.append(kube)
        loader.clear(scenario)
        report.outcomes += project_plans(scenario, items, limits)
        if live:
            report.outcomes.append(live_decides(plane, loader, scenario, workdir, limit=limit))
    finally:
        loader.clear(scenario)
        loader.close()
    return report


def _tiers(values: dict[int, int], tiers: list[int]) -> str:
    return " / ".join(str(values.get(t, 0)) for t in tiers)


def render(report: BenchReport) -> str:
    if report.refused:
        return f"{report.scenario}: skipped, the server refused {report.refused}"
    tiers = sorted({t for o in report.outcomes for t in (*o.placed_tiers, *o.evicted_tiers)}, reverse=True)
    lines = [f"{report.scenario}: {report.nodes} nodes, {report.running} running pods, {report.pending} pending",
             f"tiers (priority, highest first): {' / '.join(map(str, tiers))}",
             f"{'scheduler':<15} {'placed per tier':<24} {'placed':>6} {'evicted per tier':<22} {'PDB viol.':>9} "
             f"{'gangs whole/broken':>18} {'settle s':>9} {'CPU s':>6} {'status':<10} {'kubelet':>7}"]
    for o in report.outcomes:
        settle_s = f"{o.seconds:.1f}" if o.settled else f"did not settle ({o.seconds:.0f})"
        cpu = "-" if o.cpu_seconds is None else f"{o.cpu_seconds:.1f}"
        lines.append(f"{o.scheduler:<15} {_tiers(o.placed_tiers, tiers):<24} {len(o.placed):>6} "
                     f"{_tiers(o.evicted_tiers, tiers):<22} {o.pdb_violations:>9} "
                     f"{f'{o.gangs_whole}/{o.gangs_broken}':>18} {settle_s:>9} {cpu:>6} {o.status:<10} {len(o.kubelet):>7}")
    kube = next((o for o in report.outcomes if o.scheduler == "kube-scheduler"), None)
    if kube and kube.rule_breaks:
        lines.append(f"kube-scheduler: its end state breaks {len(kube.rule_breaks)} rule(s) as the project reads "
                     f"them, e.g. {kube.rule_breaks[0]}")
    if kube and kube.misdirected:
        lines.append(f"kube-scheduler: {len(kube.misdirected)} eviction(s) whose preemptor did not end on the "
                     f"victim's node, e.g. {kube.misdirected[0]}")
    for o in report.outcomes:
        if o.placed_then_evicted:
            lines.append(f"{o.scheduler}: {o.placed_then_evicted} pending pod(s) placed, then evicted for others "
                         "(counted among the evictions, not among the placed)")
        if not o.settled:
            lines.append(f"{o.scheduler}: did not settle in the limit; waiting: {', '.join(o.unsettled)}")
        for line in o.kubelet[:3]:
            lines.append(f"{o.scheduler}: {line}")
    return "\n".join(lines)


def _read_items(path: str) -> list[dict[str, Any]]:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise SystemExit(_usage(f"{path}: cannot read a JSON snapshot: {exc}"))
    items = data.get("items") if isinstance(data, dict) else data
    if not isinstance(items, list) or not all(isinstance(i, dict) and "kind" in i for i in items):
        raise SystemExit(_usage(f"{path}: items: expected a list of Kubernetes objects (a JSON List)"))
    return items


def _usage(line: str) -> int:
    print(f"kube_peer: {line}", file=sys.stderr)
    return 2


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.e2e.kube_peer", description=__doc__.split("\n\n")[0])
    parser.add_argument("snapshot", nargs="?", help="a JSON List of the cluster's objects")
    parser.add_argument("--nodes", type=int, default=20, help="without a snapshot: a generated contended window")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit", type=float, default=LIMIT, help="seconds a scheduler may take to settle")
    parser.add_argument("--time-limit", dest="limits", type=float, action="append",
                        help="the offline plan's CP-SAT limits (default 1 and 10)")
    parser.add_argument("--no-live", action="store_true", help="leave out cpsat-scheduler run")
    parser.add_argument("--json", help="write the report as JSON here")
    parser.add_argument("--save-snapshot", metavar="FILE",
                        help="write the objects read back from the server (the offline plans' input) here")
    parser.add_argument("--kube-verbosity", type=int, default=1, metavar="V",
                        help="kube-scheduler's --v (3: each pod attempted, in queue order; 10: each plugin's score)")
    parser.add_argument("--workdir", metavar="DIR",
                        help="keep the schedulers' logs here (kube-scheduler-<run>.log), not in a temporary directory")
    args = parser.parse_args(argv)
    if args.nodes < 1 or args.limit <= 0 or any(t <= 0 for t in args.limits or []):
        return _usage("--nodes, --limit and --time-limit must be positive")
    if args.snapshot:
        name, items = Path(args.snapshot).name, _read_items(args.snapshot)
    else:
        name, items = f"contended-{args.nodes}n-s{args.seed}", contended_window(args.nodes, args.seed)
    scenario = prepare(name, items)
    with tempfile.TemporaryDirectory(prefix="kube-peer-") as tmp:
        plane = ControlPlane(Path(tmp) / "plane")
        workdir = Path(args.workdir) if args.workdir else Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        try:
            plane.start()
            report = bench(plane, scenario, workdir, limits=args.limits or (1.0, 10.0), live=not args.no_live,
                           limit=args.limit, snapshot_out=Path(args.save_snapshot) if args.save_snapshot else None,
                           kube_verbosity=args.kube_verbosity)
        finally:
            plane.stop()
    if args.json:
        Path(args.json).write_text(json.dumps(report.to_json(), indent=1))
    if report.refused:          # bad input: one line, status 2
        return _usage(render(report))
    print(render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())

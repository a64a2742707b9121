"""Measuring both engines on one generated snapshot: windows, validation, quality and time.

A workload is parsed once. Each engine then decides its pending pods window by window, in queue
order (higher priority first, then older, then by name — kube-scheduler's PrioritySort):

* by default the whole queue is one window (up to ``limits.maxWindowPods``); with ``window_size``
  the pods are cut into the fewest windows of at most that many pods, of near-equal size, and a
  cut never separates two members of one PodGroup (a split gang could never reach its minMember
  in either half);
* window *k* is decided against the cluster the earlier windows left: their placed pods are bound
  where the plan put them, their victims are gone, and pods they left out stay out (each pod is
  considered in exactly one window, by both engines alike);
* the decision time of a window is the wall clock around one ``solver.decide`` call —
  everything a caller waits for, including the solver's own safety checks and its validation of
  the plan — and nothing else: parsing, applying the plan and this module's own validation are
  not counted; the run's ``SolverMemory`` carries the kept state from window to window;
* every plan is checked by ``solver.validate`` against the snapshot it was decided on; a plan
  that fails is recorded with its violations and fails the run.

Quality is read from the final state after the last window. Times are pooled over ``repeat``
runs; quality comes from the first run (each later run's placed count is kept alongside).

Derived figures, as the JSON report names them:

* ``weighted``: priority-weighted placement, the solver's own lexicographic measure. Every
  priority among the workload's pending pods gets a tier weight (``tier_weights``): the lowest
  priority weighs 1 and each higher tier weighs one more than all lower-tier pods together, so
  one more pod of a higher priority outweighs any number of lower ones. ``weighted`` is the sum
  over placed pods; with a single priority it equals ``placed``. ``placed_by_priority`` gives the
  plain counts behind it.
* ``nodes_used``: nodes running at least one pod in the final state.
* ``max_pods_per_node`` / ``cpu_util_stddev``: the most pods on one node, and the standard
  deviation of CPU utilisation (requested over allocatable, %) over every node, in the final
  state: how evenly the default profile spreads (the packing profile drives both up).
* ``spread_skew``: the largest skew (most minus fewest matching pods over the eligible domains)
  of any DoNotSchedule topology spread constraint carried by the workload's pending pods, in the
  final state; ``spread_above_max`` counts constraints whose skew exceeds their maxSkew (a
  cluster that started skewed can stay so without an invalid plan).
* ``p50_ms`` / ``p99_ms``: percentiles (linear interpolation) of per-window decision times over
  every run; ``window_ms`` lists the first run's, window by window.
* ``pods_per_s``: pods decided (placed or not) per second of decision time.
* ``gap`` (cpsat): the largest relative gap between objective and best bound over the windows.

Bounds, per workload (``bound``): ``max_placeable`` and ``min_nodes`` (bounds.py, arithmetic),
``cpsat_placeable`` and ``tiers`` (tier_bounds.py: a relaxation CP-SAT solves, per priority tier;
``tiers.at_or_above_priority[p]`` is the most pods of priority p and above any plan can place).
Bounds are computed in the set-up, outside every decision's time.
"""

from __future__ import annotations

import gc
import logging
import math
import os
import platform
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Optional

import numpy as np

from models import ClusterSnapshot, Plan, Pod, SchedulerConfig, pod_group_key

from adapters.interrupts import checked

from . import memory
from .bounds import group_caps, max_placeable_bound, min_nodes_bound
from .defaults import DEFAULT_TIME_LIMITS as DEFAULT_TIME_LIMITS, DEFAULT_WINDOW_SIZE as DEFAULT_WINDOW_SIZE
from .gangs import gang_figures
from .objects import paused_gc
from .tier_bounds import tier_bound
from .dra_workload import dra_figures
from .workloads import REAL_SHAPED, SCALE_TARGETS, WORKLOADS, Workload, generate

ENGINES = ("cpsat", "greedy")
# The scale targets (issue 3): scale-3k must be decided within 20 s end to end, so the solver
# gets 15 s and the rest is left for reading the window, greedy and the solver's own checks;
# scale-10k must be decided within 10 s, and gets the solver's default limit of 10 s (with less,
# this model finds no solution on two cores: the decision then falls back to greedy, no sooner).
TARGET_TIME_LIMITS = {"scale-3k": 15.0, "scale-10k": 10.0}
# Violations kept per failing plan in the report; the count is always complete.
VIOLATIONS_KEPT = 5
# Time the CP-SAT bound of a workload may take in all (its tiers share it): set-up, not decision.
TIER_BOUND_SECONDS = 5.0
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

# (snapshot, config, engine, *, memory): ``memory`` is the run's ``solver.SolverMemory``, what the
# solver keeps from one window to the next (a replacement may ignore it).
ScheduleFn = Callable[..., Plan]
ValidateFn = Callable[..., list[str]]
ProgressFn = Callable[[str], None]


def _schedule(snapshot: ClusterSnapshot, config: SchedulerConfig, engine: str, *, memory: Any = None) -> Plan:
    from solver import ScheduleRequest, decide

    return decide(ScheduleRequest(snapshot, config, engine=engine, memory=memory)).plan


def _validate(snapshot: ClusterSnapshot, plan: Plan, config: SchedulerConfig, *, memory: Any = None) -> list[str]:
    from solver import validate

    return validate(snapshot, plan, config, memory=memory)


# --------------------------------------------------------------------------- windows


def queue_order(pods: Iterable[Pod]) -> list[Pod]:
    """Pods as kube-scheduler's PrioritySort queue pops them."""
    return sorted(pods, key=lambda p: (-(p.spec.priority or 0), p.metadata.creation_timestamp or _EPOCH, p.key))


def effective_window_size(window_size: Optional[int], config: SchedulerConfig) -> int:
    """Pods per window: as asked, or the whole queue up to ``limits.maxWindowPods``."""
    return window_size if window_size is not None else config.limits.max_window_pods


def cut_windows(pods: Sequence[Pod], size: int) -> list[list[Pod]]:
    """``pods`` (in queue order) as the fewest near-equal consecutive windows of at most ``size``
    pods; a cut that would separate members of one PodGroup moves past them (that window grows)."""
    if not pods:
        return []
    count = math.ceil(len(pods) / max(size, 1))
    cuts = [round(i * len(pods) / count) for i in range(count + 1)]
    windows: list[list[Pod]] = []
    start = 0
    for cut in cuts[1:]:
        cut = max(cut, start)
        while 0 < cut < len(pods) and (group := pod_group_key(pods[cut])) and group == pod_group_key(pods[cut - 1]):
            cut += 1
        if cut > start:
            windows.append(list(pods[start:cut]))
            start = cut
    return windows


def _on_node(pod: Pod, node: str) -> Pod:
    return pod.model_copy(update={"spec": pod.spec.model_copy(update={"node_name": node})})


class _Cluster:
    """The cluster as windows change it: every pod that is not waiting for us, and the base
    snapshot's other objects. ``snapshot(window)`` adds one window's pending pods."""

    def __init__(self, base: ClusterSnapshot, pending: set[str]) -> None:
        self.base = base
        self.pods: dict[str, Pod] = {p.key: p for p in base.pods if p.key not in pending}
        self.claims: dict[str, Any] = {c.key: c for c in base.resource_claims}  # allocations of earlier windows added

    def snapshot(self, window: Sequence[Pod] = ()) -> ClusterSnapshot:
        # The constructor, not ``build``: priorities are resolved already, names already unique.
        return ClusterSnapshot(
            nodes=self.base.nodes,
            pods=(*self.pods.values(), *window),
            pdbs=self.base.pdbs,
            priority_classes=self.base.priority_classes,
            pod_groups=self.base.pod_groups,
            namespaces=self.base.namespaces,
            pvs=self.base.pvs,
            pvcs=self.base.pvcs,
            storage_classes=self.base.storage_classes,
            csi_nodes=self.base.csi_nodes,
            device_classes=self.base.device_classes,
            resource_slices=self.base.resource_slices,
            resource_claims=tuple(self.claims.values()),
            resource_claim_templates=self.base.resource_claim_templates,
        )

    def apply(self, plan: Plan, window: Sequence[Pod], snapshot: Optional[ClusterSnapshot] = None) -> None:
        """Victims leave, placed window pods run where the plan put them (with the devices the
        plan allocates their claims)."""
        if snapshot is not None and plan.allocations:
            from .dra_workload import allocated_claims

            allocated_claims(self.claims, plan, window, snapshot)
        for victim in plan.preemptions:
            self.pods.pop(victim.pod, None)
        by_key = {p.key: p for p in window}
        for a in plan.assignments:
            pod = by_key.get(a.pod)
            if pod is not None:
                self.pods[a.pod] = _on_node(pod, a.node)


# --------------------------------------------------------------------------- one engine


@dataclass
class WindowRecord:
    pods: int
    seconds: float
    plan: Plan
    violations: list[str]
    # Model size and times read from the solver's debug log, for plans whose stats lack them (a
    # fallback plan carries greedy's stats, yet the model was built and the solver ran).
    logged: dict[str, float] = field(default_factory=dict)
    validate_s: float = 0.0  # the independent validator's time on this plan (not in ``seconds``)


SOLVER_LOGGER = "cpsat_scheduler.solver"


class _SolverLog(logging.Handler):
    """Collects the CP-SAT engine's "built ..." and "component ..." debug records of one decision.

    Best effort: if the solver's log lines change shape, nothing is collected and the report
    shows "-" where the plan's stats are silent.
    """

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.figures: dict[str, float] = {}

    def emit(self, record: logging.LogRecord) -> None:
        args: tuple[Any, ...] = record.args if isinstance(record.args, tuple) else ()
        try:
            if record.msg.startswith("built ") and len(args) >= 4:
                self.figures.update(components=int(args[0]), variables=int(args[1]), constraints=int(args[2]),
                                    build_time_s=float(args[3]))
            elif record.msg.startswith("component ") and len(args) >= 3:
                self.figures["solve_time_s"] = self.figures.get("solve_time_s", 0.0) + float(args[2])
        except (TypeError, ValueError, AttributeError):
            pass


@contextmanager
def _capture_solver_log() -> Iterator[_SolverLog]:
    logger = logging.getLogger(SOLVER_LOGGER)
    handler = _SolverLog()
    level, propagate = logger.level, logger.propagate
    if not logger.isEnabledFor(logging.DEBUG):
        # Debug records only for this handler: the user asked for no debug output.
        logger.setLevel(logging.DEBUG)
        logger.propagate = False
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate


@dataclass
class EngineRun:
    """One engine over every window of a workload, once."""

    engine: str
    windows: list[WindowRecord]
    final: ClusterSnapshot
    placed: list[str]
    victims: int

    @property
    def decision_s(self) -> float:
        return sum(w.seconds for w in self.windows)

    @property
    def invalid(self) -> list[tuple[int, list[str]]]:
        return [(i, w.violations) for i, w in enumerate(self.windows) if w.violations]


def run_engine(
    base: ClusterSnapshot,
    windows: Sequence[Sequence[Pod]],
    engine: str,
    config: SchedulerConfig,
    *,
    schedule_fn: Optional[ScheduleFn] = None,
    validate_fn: Optional[ValidateFn] = None,
) -> EngineRun:
    # Looked up at call time: the module functions are the seam tests replace.
    schedule_fn = schedule_fn or _schedule
    validate_fn = validate_fn or _validate
    from solver import SolverMemory

    memory = SolverMemory()  # the run's: each window's state brought up to date from the last
    # Every pod waiting for us starts outside the cluster; each enters with its window.
    cluster = _Cluster(base, {p.key for p in base.pending_pods(config.scheduler_name)} | {p.key for w in windows for p in w})
    records: list[WindowRecord] = []
    placed: list[str] = []
    victims = 0
    for window in windows:
        snapshot = cluster.snapshot(window)
        gc.collect()  # garbage of the previous window is not this decision's cost
        gc.freeze()  # nor are collections walking the workload and the cluster
        try:
            # and none while deciding, as ``schedule`` decides: the decision's own infos and
            # state are new objects, and collections walking them took about 0.8 s of a
            # 1,000-node decision (1.6 s without the freeze), against its time limit
            with _capture_solver_log() as log, paused_gc():
                start = time.perf_counter()
                plan = schedule_fn(snapshot, config, engine, memory=memory)
                seconds = time.perf_counter() - start
        finally:
            gc.unfreeze()
        checked = time.perf_counter()
        violations = list(validate_fn(snapshot, plan, config, memory=memory))
        validate_s = time.perf_counter() - checked
        records.append(WindowRecord(len(window), seconds, plan, violations, log.figures if engine == "cpsat" else {},
                                    validate_s))
        placed += [a.pod for a in plan.assignments]
        victims += len(plan.preemptions)
        cluster.apply(plan, window, snapshot)
    return EngineRun(engine, records, cluster.snapshot(), placed, victims)


def _warm_up(base: ClusterSnapshot, pending: Sequence[Pod], engines: Sequence[str], config: SchedulerConfig,
             schedule_fn: ScheduleFn) -> None:
    """One untimed decision per engine on a sliver of the workload (two nodes, two pods), so that
    the first timed window does not pay for importing the solver and OR-tools."""
    sliver = ClusterSnapshot(nodes=base.nodes[:2], pods=tuple(pending[:2]), priority_classes=base.priority_classes)
    for engine in engines:
        schedule_fn(sliver, config.with_overrides(time_limit_seconds=1.0), engine)


# --------------------------------------------------------------------------- figures


def tier_weights(priorities: Iterable[int]) -> dict[int, int]:
    """The solver's lexicographic tier weights (``solver.cpsat.solve.tier_weights``)."""
    from solver.cpsat.solve import tier_weights as weights

    return weights(list(priorities))


def load_spread(snapshot: ClusterSnapshot) -> tuple[int, float]:
    """How evenly the final state loads the nodes: the most pods on one node, and the standard
    deviation of CPU utilisation (requested / allocatable, in %) over every node."""
    from models.resources import CPU

    per_node = {n.metadata.name: [0, 0] for n in snapshot.nodes}  # pods, requested millicores
    for pod in checked(snapshot.bound_pods()):
        slot = per_node.get(pod.spec.node_name)
        if slot is not None:
            slot[0] += 1
            slot[1] += sum(c.resources.requests.get(CPU, 0) for c in pod.spec.containers)
    utils = []
    for node in snapshot.nodes:
        alloc = node.status.allocatable.get(CPU, 0)
        if alloc:
            utils.append(100.0 * per_node[node.metadata.name][1] / alloc)
    most = max((v[0] for v in per_node.values()), default=0)
    if not utils:
        return most, 0.0
    mean = sum(utils) / len(utils)
    return most, round((sum((u - mean) ** 2 for u in utils) / len(utils)) ** 0.5, 2)


def nodes_used(snapshot: ClusterSnapshot) -> int:
    names = {n.metadata.name for n in snapshot.nodes}
    return len({p.spec.node_name for p in snapshot.bound_pods() if p.spec.node_name in names})


def spread_skew(final: ClusterSnapshot, carriers: Sequence[Pod], config: SchedulerConfig) -> tuple[Optional[int], int]:
    """(largest skew, constraints above their maxSkew) of the DoNotSchedule constraints that
    ``carriers`` hold, counted in ``final``; (None, 0) when none of them holds one."""
    from solver.context import build_context
    from solver.info import PodInfo
    from solver.filtering import StaticFilters
    from solver.plugins.pod_topology_spread import filter as pod_topology_spread

    # One representative per pod template: pods of one owner share their spec object and labels.
    reps: dict[tuple, Pod] = {}
    for pod in carriers:
        if any(c.when_unsatisfiable == "DoNotSchedule" for c in pod.spec.topology_spread_constraints):
            reps.setdefault((pod.metadata.namespace, id(pod.spec), tuple(sorted(pod.metadata.labels.items()))), pod)
    if not reps:
        return None, 0
    ctx = build_context(final, config, all_pending=True)
    ns_labels = final.namespace_labels
    infos = [PodInfo.of(p, ns_labels.get(p.metadata.namespace, {})) for p in reps.values()]
    static = StaticFilters(ctx.nodes, infos)
    worst, above = 0, 0
    seen: set[tuple] = set()
    for info in infos:
        for cc in pod_topology_spread.prefilter(info, ctx.state, *pod_topology_spread.inclusion_masks(static, info)):
            counts = cc.domain_counts[cc.eligible_domains]
            if not len(counts):
                continue
            key = (repr(cc.constraint), tuple(counts.tolist()))
            if key in seen:
                continue
            seen.add(key)
            skew = int(counts.max() - counts.min())
            worst = max(worst, skew)
            above += skew > cc.constraint.max_skew
    return worst, above


def _percentile(values: Sequence[float], q: float) -> Optional[float]:
    return float(np.percentile(np.asarray(values, dtype=float), q)) if values else None


def _round(value: Optional[float], digits: int = 3) -> Optional[float]:
    return None if value is None else round(float(value), digits)


@dataclass
class EngineResult:
    """What one engine achieved on one workload, in the JSON report's terms."""

    engine: str
    runs: list[EngineRun]
    pending: int
    weights: dict[int, int]
    priority_of: dict[str, int]
    spread: tuple[Optional[int], int] = (None, 0)
    greedy_decision_s: Optional[float] = None  # the greedy engine's own time, for the cpsat split
    gangs: Optional[dict[str, Any]] = None  # ``gangs.gang_figures`` of the first run, when pods are in gangs
    dra: Optional[dict[str, Any]] = None  # ``dra_workload.dra_figures`` of the first run, when there are devices

    @property
    def first(self) -> EngineRun:
        return self.runs[0]

    @property
    def placed(self) -> int:
        return len(self.first.placed)

    @property
    def weighted(self) -> int:
        return sum(self.weights[self.priority_of[k]] for k in self.first.placed)

    @property
    def placed_by_priority(self) -> Counter:
        """Pods the first run placed, by priority."""
        return Counter(self.priority_of[k] for k in self.first.placed)

    def weighted_of(self, run: EngineRun) -> int:
        return sum(self.weights[self.priority_of[k]] for k in run.placed)

    @property
    def latencies(self) -> list[float]:
        return [w.seconds for run in self.runs for w in run.windows]

    @property
    def invalid(self) -> list[tuple[int, int, list[str]]]:
        """(repeat, window, violations) of every plan the validator refused."""
        return [(r, i, v) for r, run in enumerate(self.runs) for i, v in run.invalid]

    def _stats(self, name: str) -> list[Any]:
        """A plan stat per window of the first run; for the model's size and times, what the
        solver logged when the plan does not say (a fallback plan)."""
        values = []
        for w in self.first.windows:
            value = getattr(w.plan.stats, name)
            values.append(w.logged.get(name) if value is None else value)
        return values

    def to_json(self) -> dict[str, Any]:
        from solver.cpsat import guided  # (the bench imports the solver where it runs it)

        decision = sum(run.decision_s for run in self.runs)
        decided = sum(w.pods for run in self.runs for w in run.windows)
        by_priority = self.placed_by_priority
        statuses = Counter(self._stats("status"))
        gaps = [g for g in self._stats("gap") if g is not None]
        solver_ran = self.engine == "cpsat" and any(v is not None for v in self._stats("variables"))
        # The size of a model that produced no plan is known only from the log.
        from_log = solver_ran and any(w.plan.stats.variables is None and w.logged for w in self.first.windows)

        def total(name: str) -> Optional[float]:
            values = [v for v in self._stats(name) if v is not None]
            return _round(sum(values), 4) if values else None

        def largest(name: str) -> Optional[int]:
            values = [v for v in self._stats(name) if v is not None]
            return max(values) if values else None

        out: dict[str, Any] = {
            "placed": self.placed,
            "pending": self.pending,
            "weighted": self.weighted,
            "placed_by_priority": {str(p): by_priority[p] for p in sorted(by_priority, reverse=True)},
            "nodes_used": nodes_used(self.first.final),
            "max_pods_per_node": load_spread(self.first.final)[0],
            "cpu_util_stddev": load_spread(self.first.final)[1],
            "objective": total("objective") if solver_ran else None,
            "bound": total("bound") if solver_ran else None,
            "gap": _round(max(gaps), 6) if gaps else None,
            "status": ", ".join(f"{s}" if n == 1 else f"{s}x{n}" for s, n in statuses.items()),
            "fallbacks": sum(1 for f in self._stats("fallback") if f),
            # windows whose model plan the validator refused, decided by the pass that follows it by
            # kube-scheduler's turns (``guided.rescue``): a valid plan, but a model that drifted
            "rescued": sum(1 for g in self._stats("guided") if g == guided.RESCUED),
            "spread_skew": self.spread[0],
            "spread_above_max": self.spread[1],
            "victims": self.first.victims,
            "windows": len(self.first.windows),
            "window_ms": [_round(1000 * w.seconds, 1) for w in self.first.windows],
            "p50_ms": _round(1000 * (_percentile(self.latencies, 50) or 0), 1),
            "p99_ms": _round(1000 * (_percentile(self.latencies, 99) or 0), 1),
            "decision_s": _round(decision / len(self.runs), 3),
            "pods_per_s": _round(decided / decision, 1) if decision > 0 else None,
            "build_s": total("build_time_s") if solver_ran else None,
            "solve_s": total("solve_time_s") if solver_ran else None,
            "greedy_s": _round(self.greedy_decision_s, 3) if self.engine == "cpsat" else None,
            "validate_s": _round(sum(w.validate_s for w in self.first.windows), 3),
            "variables": largest("variables") if solver_ran else None,
            "constraints": largest("constraints") if solver_ran else None,
            "classes": largest("pod_classes"),
            "components": largest("components") if solver_ran else None,
            "valid": not self.invalid,
            "invalid_plans": len(self.invalid),
            "violations": [f"repeat {r + 1} window {i + 1}: {line}" for r, i, lines in self.invalid for line in lines][:VIOLATIONS_KEPT],
        }
        fallback_reasons = [w.plan.stats.fallback_reason for w in self.first.windows if w.plan.stats.fallback_reason]
        if fallback_reasons:
            out["fallback_reason"] = fallback_reasons[0]
        if from_log:
            out["model_from_log"] = True
        if any(v is not None for v in self._stats("lns_rounds")):
            # The large-neighbourhood search (issue 34): its rounds and what they gained over greedy's plan.
            out.update({name: sum(v for v in self._stats(name) if v is not None)
                        for name in ("lns_rounds", "lns_improved_rounds", "lns_placed_gain", "lns_victims_change")})
            starts = [v for v in self._stats("lns_start") if v is not None]
            if starts:  # what the small-first start came to, in the first window that looked for it
                out["lns_start"] = starts[0]
        if self.gangs is not None:
            out["gangs"] = self.gangs
        if self.dra is not None:
            out["dra"] = self.dra
        if len(self.runs) > 1:
            out["placed_per_repeat"] = [len(run.placed) for run in self.runs]
        return out


@dataclass
class WorkloadResult:
    name: str
    scale: str
    seed: int
    nodes: int
    pods: int
    running: int
    windows: list[int]
    bound: dict[str, Any]
    results: dict[str, EngineResult]
    setup_s: float
    time_limit: float
    queue: Optional[int] = None  # pending pods of the workload, when only the first windows ran
    peak_rss_mib: Optional[float] = None  # resident-memory high-water mark while this workload ran
    peak_rss_scope: str = "workload"  # or "process" where the mark cannot be reset (memory.py)

    def ratios(self) -> dict[str, Optional[float]]:
        """cpsat over greedy: placed, weighted, decision time."""
        if not {"cpsat", "greedy"} <= set(self.results):
            return {}
        c, g = self.results["cpsat"], self.results["greedy"]

        def ratio(a: float, b: float) -> Optional[float]:
            return round(a / b, 3) if b else (None if a else 1.0)

        return {
            "placed": ratio(c.placed, g.placed),
            "weighted": ratio(c.weighted, g.weighted),
            "time": ratio(sum(r.decision_s for r in c.runs) / len(c.runs), sum(r.decision_s for r in g.runs) / len(g.runs)),
        }

    def below_greedy(self) -> Optional[str]:
        """A description of how cpsat fell short of greedy, or None when it did not: any repeat
        whose priority-weighted placement is below greedy's (the quality floor)."""
        if not {"cpsat", "greedy"} <= set(self.results):
            return None
        c, g = self.results["cpsat"], self.results["greedy"]
        best_greedy = max(g.weighted_of(run) for run in g.runs)
        for r, run in enumerate(c.runs):
            if c.weighted_of(run) < best_greedy:
                return (
                    f"{self.name} ({self.scale}, seed {self.seed}): cpsat placed {len(run.placed)} pods "
                    f"(weighted {c.weighted_of(run)}) in repeat {r + 1}, greedy {g.placed} (weighted {best_greedy})"
                )
        return None

    def failures(self) -> list[str]:
        out = []
        for engine, result in self.results.items():
            for r, i, lines in result.invalid:
                out.append(
                    f"{self.name} ({self.scale}, seed {self.seed}): {engine} plan of window {i + 1} "
                    f"(repeat {r + 1}) is INVALID: {len(lines)} violation(s), first: {lines[0]}"
                )
        below = self.below_greedy()
        if below:
            out.append(f"BELOW GREEDY: {below}")
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "scale": self.scale,
            "seed": self.seed,
            "nodes": self.nodes,
            "pods": self.pods,
            "queue": self.queue if self.queue is not None else self.pods,
            "running": self.running,
            "windows": self.windows,
            "time_limit_s": self.time_limit,
            "setup_s": round(self.setup_s, 3),
            "peak_rss_mib": self.peak_rss_mib,
            "peak_rss_scope": self.peak_rss_scope,
            "results": {engine: result.to_json() for engine, result in self.results.items()},
            "bound": self.bound,
            "ratios": self.ratios(),
        }


def measure(
    workload: Workload,
    config: SchedulerConfig,
    *,
    window_size: Optional[int] = DEFAULT_WINDOW_SIZE,
    repeat: int = 1,
    engines: Sequence[str] = ("greedy", "cpsat"),
    schedule_fn: Optional[ScheduleFn] = None,
    validate_fn: Optional[ValidateFn] = None,
    progress: Optional[ProgressFn] = None,
    warm_up: bool = True,
    max_windows: Optional[int] = None,
) -> WorkloadResult:
    """Both engines over ``workload``'s windows, ``repeat`` times each, in alternation.

    ``max_windows`` keeps only the first windows: a throughput measurement on a workload too
    slow to finish. Everything is then about the pods of those windows (the bounds too); the
    rest of the queue never enters the cluster."""
    say = progress or (lambda _msg: None)
    scope = "workload" if memory.reset_peak() else "process"
    start = time.perf_counter()
    base = workload.snapshot()
    queue = queue_order(base.pending_pods(config.scheduler_name))
    windows = cut_windows(queue, effective_window_size(window_size, config))
    truncated = max_windows is not None and len(windows) > max_windows
    if truncated:
        windows = windows[:max_windows]
    pending = [p for w in windows for p in w]
    if warm_up:
        _warm_up(base, pending, engines, config, schedule_fn or _schedule)
    grouped = group_caps(base, pending) if pending and base.nodes else None
    tiers = tier_bound(base, pending, grouped=grouped, seconds=TIER_BOUND_SECONDS)
    bound: dict[str, Any] = {
        "max_placeable": max_placeable_bound(base, pending, grouped),
        "min_nodes": min_nodes_bound(base, [*base.bound_pods(), *pending]),
        "achievable": None if truncated else workload.metadata.get("achievable"),
        "cpsat_placeable": tiers.total,
        "tiers": tiers.to_json(),
    }
    setup = time.perf_counter() - start
    of_queue = f" (the first of {len(queue)})" if truncated else ""
    say(
        f"{workload.name}: {len(base.nodes)} nodes, {len(pending)} pending pods{of_queue} in {len(windows)} "
        f"window(s) (set up in {setup:.1f}s)"
    )
    runs: dict[str, list[EngineRun]] = {e: [] for e in engines}
    for r in range(repeat):
        for engine in engines:
            run = run_engine(base, windows, engine, config, schedule_fn=schedule_fn, validate_fn=validate_fn)
            runs[engine].append(run)
            bad = " INVALID" if run.invalid else ""
            say(f"  {engine:6} run {r + 1}/{repeat}: placed {len(run.placed)}/{len(pending)} in {run.decision_s:.2f}s{bad}")
    priority_of = {p.key: p.spec.priority or 0 for p in pending}
    weights = tier_weights(priority_of.values()) if priority_of else {}
    results = {}
    for engine in engines:
        result = EngineResult(engine, runs[engine], len(pending), weights, priority_of)
        result.spread = spread_skew(result.first.final, pending, config)
        result.gangs = gang_figures(result.first.final, pending)
        result.dra = dra_figures(result.first.final, pending)
        results[engine] = result
    if "cpsat" in results and "greedy" in results:
        results["cpsat"].greedy_decision_s = sum(r.decision_s for r in runs["greedy"]) / repeat
    meta = workload.metadata
    return WorkloadResult(
        name=workload.name,
        scale=meta.get("scale", ""),
        seed=meta.get("seed", 0),
        nodes=len(base.nodes),
        pods=len(pending),
        running=len(base.bound_pods()),
        windows=[len(w) for w in windows],
        bound=bound,
        results={e: results[e] for e in sorted(results, key=ENGINES.index)},
        setup_s=setup,
        time_limit=config.solver.time_limit_seconds,
        queue=len(queue),
        peak_rss_mib=memory.peak_rss_mib(beside=max((w.plan.stats.lns_start_child_mib or 0.0
                                                     for rs in runs.values() for r in rs for w in r.windows), default=0.0)),
        peak_rss_scope=scope,
    )


# --------------------------------------------------------------------------- the suite


def default_time_limit(name: str, scale: str) -> float:
    return TARGET_TIME_LIMITS.get(name, DEFAULT_TIME_LIMITS.get(scale, DEFAULT_TIME_LIMITS["medium"]))


def machine() -> dict[str, Any]:
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    try:
        from importlib.metadata import version

        ortools = version("ortools")
    except Exception:  # noqa: BLE001 - a source tree without metadata
        ortools = "unknown"
    return {
        "cpus": cpus,
        "python": ".".join(map(str, sys.version_info[:3])),
        "platform": platform.platform(terse=True),
        "processor": platform.machine(),
        "ortools": ortools,
    }


@dataclass
class BenchReport:
    workloads: list[WorkloadResult]
    settings: dict[str, Any]
    machine: dict[str, Any] = field(default_factory=machine)
    extra: list[dict[str, Any]] = field(default_factory=list)  # other benchmarks (repack)

    def failures(self) -> list[str]:
        return [line for w in self.workloads for line in w.failures()]

    @property
    def ok(self) -> bool:
        return not self.failures()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "workloads": [w.to_json() for w in self.workloads],
            "machine": self.machine,
            "settings": self.settings,
            "ok": self.ok,
            "failures": self.failures(),
        }
        if self.extra:
            out["other"] = self.extra
        return out


def run_suite(
    names: Sequence[str],
    scale: str,
    *,
    seed: int = 0,
    config: Optional[SchedulerConfig] = None,
    time_limit: Optional[float] = None,
    window_size: Optional[int] = DEFAULT_WINDOW_SIZE,
    repeat: int = 1,
    max_windows: Optional[int] = None,
    schedule_fn: Optional[ScheduleFn] = None,
    validate_fn: Optional[ValidateFn] = None,
    progress: Optional[ProgressFn] = None,
    on_workload: Optional[Callable[[Workload], None]] = None,
) -> BenchReport:
    """Generate each named workload at ``scale`` and measure both engines on it."""
    config = config or SchedulerConfig()
    results = []
    for i, name in enumerate(names):
        if name not in WORKLOADS and name not in SCALE_TARGETS and name not in REAL_SHAPED:
            raise ValueError(f"unknown workload {name!r}")
        limit = time_limit if time_limit is not None else default_time_limit(name, scale)
        workload = generate(name, scale, seed)
        if on_workload is not None:
            on_workload(workload)
        results.append(
            measure(
                workload,
                config.with_overrides(time_limit_seconds=limit),
                window_size=window_size,
                repeat=repeat,
                schedule_fn=schedule_fn,
                validate_fn=validate_fn,
                progress=progress,
                warm_up=i == 0,
                max_windows=max_windows,
            )
        )
    settings = {
        "scale": scale,
        "seed": seed,
        "time_limit_s": time_limit,
        "window_size": effective_window_size(window_size, config),
        "max_windows": max_windows,
        "repeat": repeat,
        "workers": config.solver.workers,
    }
    return BenchReport(results, settings)

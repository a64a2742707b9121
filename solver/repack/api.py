"""``plan_repack``: a running cluster in, a safe ordered plan of moves out.

Reads like the story it tells: split the pods into movable and staying (``problem``) → solve
where the movable ones should run (``model``) → order the moves so each step is safe (``order``)
→ replay the steps independently (``replay``) → report nodes, costs, utilisation and bounds.
Nothing is returned that the replay has not accepted.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Optional

from models.config import SchedulerConfig
from models.errors import InputError
from models.plan import Assignment, Plan, PlanStats
from models.resources import CPU, MEMORY
from models.snapshot import ClusterSnapshot

from .. import progress
from ..memory import SolverMemory
from ..validate import validate
from .bounds import grouped_lp_bound, lp_bound, nodes_bound, per_resource_bound
from .model import OBJECTIVES, RepackInfeasible, RepackOptions
from .rounds import solve_placement
from .order import OrderError, Step, order_moves
from .pending import BacklogCheck
from .prune import idle_moves_undone
from .problem import COST_SCALE, RepackProblem, build_problem, describe_node, with_window
from .replay import PlannedStep, replay
from .runbook import Action, runbook


class RepackUnsafe(RuntimeError):
    """The replay refused the plan (a bug: the plan is not printed)."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(f"the plan fails its replay ({len(problems)} problem(s)): " + " | ".join(problems[:5]))
        self.problems = problems


@dataclass(frozen=True)
class NodeReport:
    """One node before and after: requests against allocatable, and what became of it."""

    name: str
    cost: float
    cpu_allocatable: int  # millicores
    memory_allocatable: int  # bytes
    cpu_before: int
    cpu_after: int
    memory_before: int
    memory_after: int
    busy_before: bool  # runs a workload pod (movable or pinning) now
    busy_after: bool
    freed: bool
    kept: bool
    pinned_by: Optional[str]  # why it cannot be freed, if it cannot
    pins: tuple[tuple[str, str], ...] = ()  # (pod, reason) of every pod that keeps it busy

    def utilisation(self, resource: str, when: str) -> float:
        used = getattr(self, f"{resource}_{when}")
        alloc = getattr(self, f"{resource}_allocatable")
        return used / alloc if alloc else 0.0


@dataclass
class RepackResult:
    steps: list[Step]
    node_names: list[str]
    freed_nodes: list[str]
    before_active: int
    before_cost: float
    after_active: int
    after_cost: float
    moved_pods: int
    lower_bound_nodes: int
    per_resource_bounds: dict[str, int]
    lp_bound: Optional[float]
    solver_bound_nodes: Optional[int]  # from CP-SAT's proven bound (runs without --max-moves/--target-free)
    stats: dict
    nodes: list[NodeReport]
    unmovable: dict[str, int]  # reason -> pods
    notes: list[str] = field(default_factory=list)
    # Pending pods that fit today (all together) and not after this plan, or only by preempting
    # more than today (only with ``allow_blocking_pending``: otherwise such a plan is not returned).
    blocked_pending: list[str] = field(default_factory=list)
    blocked_pending_reasons: dict[str, str] = field(default_factory=dict)  # pod -> why
    # The plan as an operator carries it out: cordon, evict in order, remove (``runbook``).
    runbook: list[Action] = field(default_factory=list)

    @property
    def gap_nodes(self) -> int:
        return self.after_active - self.lower_bound_nodes


def plan_repack(
    snapshot: ClusterSnapshot, config: Optional[SchedulerConfig] = None, options: Optional[RepackOptions] = None,
    *, memory: Optional[SolverMemory] = None,
) -> RepackResult:
    """The best plan after which the pending pods fit as well as today — all of them together,
    with no more evictions than today (``pending``) — or, with ``allow_blocking_pending``, the
    best plan, naming the pending pods it blocks and why. ``memory``: the caller's, what the
    solver keeps between the many contexts one re-packing builds (None: one for this call)."""
    memory = memory if memory is not None else SolverMemory()
    config = config or SchedulerConfig()
    options = options or RepackOptions()
    if options.objective not in OBJECTIVES:
        raise InputError("", "--objective", f'unknown objective "{options.objective}" (choose {" or ".join(OBJECTIVES)})')
    result = _plan(snapshot, config, options, memory=memory)
    if not result.steps:
        return result
    progress.stage("scheduling the pending pods today and after the plan (do they still fit together?)")
    check = BacklogCheck(snapshot, config, memory)
    if not check.matters:
        return result
    blocked = _blocked(check, result)
    if not blocked:
        return result
    if options.allow_blocking_pending:
        result.blocked_pending = sorted(blocked)
        result.blocked_pending_reasons = blocked
        result.notes.append(f"the plan leaves {len(blocked)} pending pod(s) that fit today with no place, or "
                            "preempting where they need not today: " + _names(blocked, 5))
        return result
    best_freed = len(result.freed_nodes)
    limit = options.time_limit if options.time_limit is not None else config.solver.time_limit_seconds
    # First the plan built around the backlog (``_held_plan``): the pending pods that fit today
    # placed with the movable pods, then held where they go, so every move keeps every rule with
    # them in place. It is checked like any plan (the held placement is one answer, the
    # scheduler's may differ).
    progress.stage(f"the plan strands {len(blocked)} pending pod(s): planning again around the backlog")
    held = _held_plan(snapshot, config, options, check, memory)
    if held is not None and _blocked(check, held):
        held = None
    if held is not None and held.freed_nodes:
        held.notes.append(_held_back(best_freed, blocked, held=True))
        return held
    # Freeing fewer nodes leaves more room: the most nodes freed that blocks nobody, by halving
    # the cap from the best plan's count (freeing none moves nothing, which blocks nobody).
    cap, step = best_freed - 1, 1
    while cap > 0:
        tried = _plan(snapshot, config, replace(options, target_free=cap if options.target_free is None else min(cap, options.target_free),
                                                time_limit=max(limit / 4, 1.0)), memory=memory)
        if not _blocked(check, tried):
            tried.notes.append(_held_back(best_freed, blocked))
            return tried
        cap, step = cap - step, step * 2
    empty = _plan(snapshot, config, replace(options, target_free=0, max_moves=0), memory=memory)
    empty.notes.append(_held_back(best_freed, blocked))
    return empty


def _blocked(check: BacklogCheck, result: "RepackResult") -> dict[str, str]:
    names = result.node_names
    final = {s.pod: names[s.target] for s in result.steps}  # the last step of a pod is where it ends
    return check.blocked(final, result.freed_nodes)


def _held_plan(snapshot: ClusterSnapshot, config: SchedulerConfig, options: RepackOptions,
               check: BacklogCheck, memory: SolverMemory) -> Optional["RepackResult"]:
    """The best plan with the backlog's pods held on the nodes a packing scheduler gives them
    today without preempting (None when there is no such placement to hold)."""
    where = check.packed()
    if not where:
        return None
    limit = options.time_limit if options.time_limit is not None else config.solver.time_limit_seconds
    short = replace(options, time_limit=max(limit / 3, 1.0))
    hint: Optional[dict[str, str]] = None
    try:
        # Where the backlog goes is the model's choice too: a first solve places the pending pods
        # with the movable ones (all of them, on nodes that stay: every rule between them holds),
        # starting from the packed placement; the plan then holds them where that solve put them.
        joint = build_problem(snapshot, config, keep_nodes=options.keep_nodes, held=where, held_move=True,
                              memory=memory)
        final = solve_placement(joint, short).final
        if final:
            names = [n.name for n in joint.nodes]
            where = {key: names[final[key]] for key in where}
            hint = {key: names[n] for key, n in final.items() if key not in where}
    except RepackInfeasible:
        pass  # the packed placement, held as it is
    try:
        return _plan(snapshot, config, short, held=where, hint=hint, memory=memory)
    except (RepackInfeasible, OrderError, RepackUnsafe):
        return None


def _names(blocked: dict[str, str], n: int) -> str:
    keys = sorted(blocked)
    return ", ".join(keys[:n]) + (" ..." if len(keys) > n else "")


def _held_back(best_freed: int, blocked: dict[str, str], *, held: bool = False) -> str:
    first = sorted(blocked)[0]
    how = ("this plan keeps the place of every pending pod that fits today and frees fewer"
           if held else "this plan frees fewer")
    return (f"a plan freeing {best_freed} node(s) would leave {len(blocked)} pending pod(s) that fit today with no "
            f"place, or preempting where they need not today ({_names(blocked, 3)}; {first}: {blocked[first]}): "
            f"{how} (--allow-blocking-pending prints the other)")


def _plan(snapshot: ClusterSnapshot, config: SchedulerConfig, options: RepackOptions,
          held: Optional[dict[str, str]] = None, hint: Optional[dict[str, str]] = None,
          memory: Optional[SolverMemory] = None) -> "RepackResult":
    start = time.monotonic()
    problem = build_problem(snapshot, config, keep_nodes=options.keep_nodes, held=held, memory=memory)
    notes = list(problem.notes)
    index = problem.ctx.state.node_index
    try:
        placement = solve_placement(problem, options, first={k: index[n] for k, n in hint.items()} if hint else None)
    except RepackInfeasible as exc:
        raise RepackInfeasible(_diagnose(problem, str(exc))) from None
    final = placement.final
    if not final:
        final = dict(problem.origin)  # no solution within the time limit: move nothing
        if problem.origin:
            notes.append(f"the solver found no plan within the time limit (status {placement.status}): nothing moves")
    final, undone = idle_moves_undone(problem, final, _freed(problem, final))
    if undone:
        notes.append(f"{len(undone)} move(s) between nodes that stay were dropped: they made room for no freed node")
    if placement.phases is not None:
        progress.stage(f"ordering {sum(1 for k, n in final.items() if n != problem.origin[k])} move(s) round by round")
    steps = order_moves(problem, final, max_steps=options.max_moves, phases=placement.phases,
                        checked=placement.checked if not undone else frozenset())
    names = [n.name for n in problem.nodes]
    nodes = _node_reports(problem, final, names)
    freed = [r.name for r in nodes if r.freed]
    problems = replay(
        problem.snapshot,  # with the held pending pods in place
        config,
        [PlannedStep(s.pod, names[s.source], names[s.target]) for s in steps],
        freed=freed,
        max_moves=options.max_moves,
        memory=memory,
    )
    if problems:
        raise RepackUnsafe(problems)

    per_resource, lp, lower, solver_bound = _bounds(problem, placement, options, len(names))
    unmovable = _unmovable(problem)
    freed_index = {names.index(name) for name in freed}
    needed = sum(1 for n in problem.origin.values() if n in freed_index)
    if steps:
        notes.append(_tradeoff(len(freed), len(steps), needed, options.max_moves, len(placement.rounds)))
    stats = _stats(problem, placement, options, start, len(steps), nodes, len(freed), needed)
    if placement.rounds:
        stats["rounds"] = [r.as_dict() for r in placement.rounds]
    return RepackResult(
        steps=steps,
        node_names=names,
        freed_nodes=freed,
        before_active=sum(1 for r in nodes if r.busy_before),
        before_cost=round(sum(r.cost for r in nodes if r.busy_before), 6),
        after_active=sum(1 for r in nodes if r.busy_after),
        after_cost=round(sum(r.cost for r in nodes if r.busy_after), 6),
        moved_pods=sum(1 for key, n in final.items() if n != problem.origin[key]),
        lower_bound_nodes=lower,
        per_resource_bounds=per_resource,
        lp_bound=None if lp is None else round(lp, 3),
        solver_bound_nodes=solver_bound,
        stats=stats,
        nodes=nodes,
        unmovable=unmovable,
        notes=notes,
        runbook=runbook(snapshot, steps, names, freed),
    )


def _bounds(problem, placement, options: RepackOptions, n_nodes: int
            ) -> tuple[Any, Optional[float], int, Optional[int]]:
    """The lower bounds on the nodes in use after any plan: per resource, the LP's, their best
    (``lower``), and CP-SAT's proof when the run had no option narrowing it."""
    per_resource = per_resource_bound(problem)
    lp = (grouped_lp_bound(problem) if placement.rounds or not placement.candidates
          else lp_bound(problem, placement.candidates, placement.upper))
    lower = nodes_bound(per_resource, lp, len(problem.pinned))
    solver_bound = None
    if options.objective == "nodes" and options.max_moves is None and options.target_free is None and placement.bound is not None:
        # CP-SAT's proof that at most ``bound`` nodes can be free, for any plan keeping every rule
        # and budget: a bound on the nodes in use, as good as the others when no option narrows it.
        solver_bound = n_nodes - int(placement.bound) - len(problem.keep)
        lower = max(lower, solver_bound)
    return per_resource, lp, lower, solver_bound


def _unmovable(problem) -> dict[str, int]:
    """The pods that never move (the held pending ones aside), counted per reason."""
    unmovable: dict[str, int] = {}
    for key, verdict in problem.verdicts.items():
        if not verdict.movable and key not in problem.held:
            assert verdict.reason is not None  # an unmovable verdict names its reason (movable._stays)
            unmovable[verdict.reason] = unmovable.get(verdict.reason, 0) + 1
    return unmovable


def _stats(problem, placement, options: RepackOptions, start: float, evictions: int, nodes: list,
           freed: int, needed: int) -> dict[str, Any]:
    """The run's figures for ``stats``: the solve (status, objective and bound, sizes, times) and
    how the plan trades freed nodes against evictions."""
    names = [n.name for n in problem.nodes]
    empty_before = sum(1 for r in nodes if not r.busy_before and problem.freeable(names.index(r.name)))
    stats: dict[str, Any] = {
        "status": placement.status,
        "wall_time_s": round(time.monotonic() - start, 3),
        "objective": options.objective,
        "objective_value": placement.objective,
        "objective_bound": placement.bound,
        # The same two figures in the objective's own unit (nodes, or the configured cost), and
        # how much of it was empty before the plan: the model counts every empty freeable node.
        "objective_value_units": _units(placement.objective, options.objective),
        "objective_bound_units": _units(placement.bound, options.objective),
        "empty_before": empty_before,
        "build_time_s": round(placement.build_time, 3),
        "solve_time_s": round(placement.solve_time, 3),
        "variables": placement.variables,
        "constraints": placement.constraints,
        "movable_pods": len(problem.origin),
        "pod_classes": len(problem.ctx.classes),
        "nodes": len(names),
        # How the plan trades freed nodes against evictions (``--max-moves`` caps the evictions):
        # the evictions, and the fewest that could free these nodes (their movable pods).
        "evictions": evictions,
        "evictions_needed_by_freed": needed,
        "evictions_per_freed_node": round(evictions / freed, 3) if freed else None,
    }
    return stats


def _tradeoff(freed: int, evictions: int, needed: int, cap: Optional[int], rounds: int) -> str:
    how = f"decided in {rounds} round(s) of drain candidates, fewest evictions first; " if rounds else ""
    extra = evictions - needed
    line = (f"{how}{freed} node(s) freed for {evictions} eviction(s)"
            + (f" ({evictions / freed:.1f} per node)" if freed else "")
            + f": {needed} to empty the freed nodes"
            + (f", {extra} more to make room or break cycles" if extra > 0 else "")
            + (f"; --max-moves {cap} capped them" if cap is not None else "; --max-moves N caps them (fewer nodes freed)"))
    return line


def _units(value: Optional[float], objective: str) -> Optional[float]:
    if value is None:
        return None
    return round(value / COST_SCALE, 6) if objective == "cost" else value


def _freed(problem: RepackProblem, final: dict[str, int]) -> set[int]:
    """Nodes busy now and empty of workload pods after ``final`` (as ``_node_reports`` counts)."""
    busy_after = set(problem.pinned) | set(final.values()) | {n for n in problem.keep if n in problem.busy_before}
    return {n for n in problem.busy_before if n not in busy_after}


def _node_reports(problem: RepackProblem, final: dict[str, int], names: list[str]) -> list[NodeReport]:
    """Requests per node now and after the plan (DaemonSet pods included: they run until the node
    is removed), and which nodes end free of workload pods."""
    state = problem.ctx.state  # every pod that stays; the movable pods are added below
    cpu, mem = state.res_index[CPU], state.res_index[MEMORY]
    before = state.used.copy()
    after = state.used.copy()
    for key in problem.held:  # pending pods held for the backlog run only after the plan
        info = problem.ctx.pod(key)
        assert info is not None  # bound in the problem's snapshot
        before[state.node_index[problem.snapshot.pod_by_key[key].spec.node_name]] -= state.vector(info)
    busy_after = set(problem.pinned)
    for pod in problem.ctx.window:
        vec = state.vector(pod)
        before[problem.origin[pod.key]] += vec
        after[final[pod.key]] += vec
        busy_after.add(final[pod.key])
    kept_busy = {n for n in problem.keep if n in problem.busy_before}
    reports = []
    for node in problem.nodes:
        n = node.index
        was, now = n in problem.busy_before, n in busy_after or n in kept_busy
        reports.append(
            NodeReport(
                name=names[n],
                cost=problem.cost[n],
                cpu_allocatable=int(state.alloc[n, cpu]),
                memory_allocatable=int(state.alloc[n, mem]),
                cpu_before=int(before[n, cpu]),
                cpu_after=int(after[n, cpu]),
                memory_before=int(before[n, mem]),
                memory_after=int(after[n, mem]),
                busy_before=was,
                busy_after=now,
                freed=was and not now,
                kept=n in problem.keep,
                pinned_by=describe_node(problem, n),
                pins=tuple(sorted(problem.pinned.get(n, ()))),
            )
        )
    return reports


def _diagnose(problem: RepackProblem, message: str) -> str:
    """Why no plan exists: the rules the current placement itself already breaks, if any."""
    snapshot, config = problem.snapshot, problem.config
    movable = set(problem.origin)
    plan = Plan(
        assignments=tuple(Assignment(pod=key, node=problem.nodes[n].name) for key, n in sorted(problem.origin.items())),
        stats=PlanStats(engine="repack", status="current"),
    )
    lines = validate(with_window(snapshot, movable, config.scheduler_name), plan, config, memory=problem.memory)
    if not lines:
        return message
    return f"{message}: the cluster as it runs already breaks rules a plan must keep: " + " | ".join(lines[:5])


__all__ = ["NodeReport", "OrderError", "RepackInfeasible", "RepackOptions", "RepackResult", "RepackUnsafe", "plan_repack"]

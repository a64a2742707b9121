"""``decide``: a request (a snapshot, a config, an engine, the window) in, a ``Decision`` out —
the one entry point adapters call, once per window.

Engines: ``greedy`` (kube-scheduler's scheduleOne, one pod at a time) and ``cpsat`` (the window
solved as one model per independent component, greedy as hint and fallback). Every plan is
checked by the independent validator before it leaves, whichever engine made it; a solver plan
that fails it is replaced by the greedy plan (a fallback, with the violations as the reason) — a
safety net that should never fire, and tests assert it does not. The decision says in typed
fields which plan it is (``PlanSource``), whether the validator accepted it, and why it fell
back: no caller reads that out of the plan's ``stats`` strings.

``schedule`` is the older form (a snapshot in, the plan out), kept for library users and tests.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable, Optional

from models.config import SchedulerConfig
from models.errors import InputError, Interrupted
from models.plan import Assignment, Gated, Nomination, Plan, PlanStats, Preemption, Unschedulable
from models.snapshot import ClusterSnapshot

from . import interrupt, progress
from .context import SchedulingContext, build_context
from .cpsat import guided
from .cpsat.greedy_run import estimated_greedy_seconds
from .cpsat.solve import CpsatOutcome, ModelInvalidError, deterministic, solve_window, tier_weights
from .greedy import GreedyResult, schedule_greedy
from .limits import check_snapshot
from .filtering import Cycle, StaticFilters
from .memory import SolverMemory
from .plugins import registry
from .plugins.registry import window_parts
from .state import ClusterState

ENGINES = ("cpsat", "greedy")
log = logging.getLogger("cpsat_scheduler.solver")
# What follows the search: the plan's assembly (reasons for the pods left out) and the validator,
# which builds its own context from the snapshot and replays the plan. Measured together at 1.1-1.35
# times the decision's own context build on the 1,000-node contended dumps, and up to 1.95 when
# the validator ran slow (0.9 s where it takes 0.5 s); at 1.5 the decision overran its limit by
# 0.37 s in one of five bench runs. The solver's share of ``--time-limit`` is what is left once
# the context is built and this much of its build time is kept, so the whole decision keeps to
# the user's limit.
VALIDATION_PER_BUILD = 2.0
# ... but never less than this share of the limit (a limit the build alone eats is overrun, and
# the solver still gets a moment to improve greedy's plan).
LEAST_SOLVER_SHARE = 0.25
# Appended to a left-out pod's message when it would have fit on its own.
NOTE_JOINT = (
    " (it fits the cluster on its own: its room went to pods of higher priority or to a better"
    " joint placement of the window)"
)
# ``plan_reason`` of greedy's plan taken first (``ScheduleRequest.greedy_first``).
REASON_GREEDY_WHOLE = "scheduleOne placed every pod of a window that needs no joint decision"


class PlanSource(str, Enum):
    """Whose plan a decision is."""

    SOLVER = "solver"  # the CP-SAT model's
    GREEDY = "greedy"  # greedy scheduleOne's, on its merits: --engine greedy, greedy first, or better than the model's
    FALLBACK = "fallback"  # greedy scheduleOne's because the model's could not be used (``Decision.fallback_reason``)


@dataclass(frozen=True)
class ScheduleRequest:
    """One window to decide.

    ``all_pending``: every pending pod whatever its ``schedulerName`` (not only the config's).
    ``window_keys``: only these pending pods (the live scheduler's queue); None: all of them.
    ``greedy_first``: run greedy scheduleOne first and take its plan when it places every pod of
    the window without preempting (no plan places more; the model would only re-rank nodes).
    ``fall_back_on_error``: an exception inside the CP-SAT engine gives greedy's plan (reason
    named) instead of being raised — what a long-running scheduler wants, not a CLI run.
    ``memory``: what the caller keeps between its decisions (None: kept for this one alone).
    """

    snapshot: ClusterSnapshot
    config: SchedulerConfig = field(default_factory=SchedulerConfig)
    engine: str = "cpsat"
    all_pending: bool = False
    window_keys: Optional[tuple[str, ...]] = None
    greedy_first: bool = False
    fall_back_on_error: bool = False
    memory: Optional[SolverMemory] = None


@dataclass(frozen=True)
class Rejected:
    """A plan the validator refused on the way to a decision."""

    source: PlanSource
    problems: tuple[str, ...]


@dataclass(frozen=True)
class Decision:
    """What ``decide`` made of a request.

    ``plan`` is to be acted on only when ``validated``; otherwise it is the last plan tried and
    ``problems`` are the validator's lines for it (a bug to report). ``solver_ran``: the CP-SAT
    model was asked (not the greedy engine, nor a window greedy settled first). ``rejected``:
    every plan the validator refused, the returned one included when not validated.
    """

    plan: Plan
    source: PlanSource
    validated: bool
    problems: tuple[str, ...] = ()
    fallback_reason: Optional[str] = None
    solver_ran: bool = False
    rejected: tuple[Rejected, ...] = ()
    greedy_runs: int = 0  # greedy scheduleOne runs the decision made (beside the solve included)
    validations: int = 0  # validator replays the decision made

    @property
    def greedy_instead_of_solver(self) -> bool:
        """The model ran but greedy's plan was taken (a fallback, or greedy's was better)."""
        return self.solver_ran and self.source is not PlanSource.SOLVER


def schedule(
    snapshot: ClusterSnapshot,
    config: Optional[SchedulerConfig] = None,
    *,
    engine: str = "cpsat",
    all_pending: bool = False,
    window_keys: Optional[list[str]] = None,
    memory: Optional[SolverMemory] = None,
) -> Plan:
    """``decide``'s plan (validated there; a plan that is not comes back as it is)."""
    request = ScheduleRequest(snapshot, config or SchedulerConfig(), engine=engine, all_pending=all_pending,
                              window_keys=tuple(window_keys) if window_keys is not None else None, memory=memory)
    return decide(request).plan


def decide(request: ScheduleRequest) -> Decision:
    """Decide one window: the plan, validated, with greedy's when the model's cannot be used."""
    if request.engine not in ENGINES:
        raise InputError("", "--engine", f'unknown engine "{request.engine}" (choose {" or ".join(ENGINES)})')
    return _Deciding(request).run()


class _Deciding:
    """One ``decide`` call: the context built once, each plan validated once. A plan that needs
    nothing more of the context lets it go before the validator builds its own (two windows'
    worth of state alive at once survive the collector's young generations, and cost a full
    collection every few hundred windows); one that may still need it (the model's, greedy's
    being the fallback) keeps it."""

    def __init__(self, request: ScheduleRequest) -> None:
        self.request = request
        self.memory = request.memory if request.memory is not None else SolverMemory()
        self.config = request.config
        self.keys = list(request.window_keys) if request.window_keys is not None else None
        self.rejected: list[Rejected] = []
        self.greedy_runs = 0
        self.validations = 0
        self.solver_ran = False
        self._ctx: Optional[SchedulingContext] = None
        self._outcome: Optional[CpsatOutcome] = None
        self.start = time.monotonic()
        self.built = 0.0  # seconds the window's context took to build
        self.kept = 0.0  # seconds of the limit not given to the solver (the build so far, the reserve)
        self.solver_limit = 0.0  # the solver's share of the limit (``_solver_limit``)

    @property
    def ctx(self) -> SchedulingContext:
        """The window's context (built again from the memory if it was let go)."""
        if self._ctx is None:
            request = self.request
            self._ctx = build_context(request.snapshot, self.config, all_pending=request.all_pending,
                                      window_keys=self.keys, memory=self.memory)
        return self._ctx

    def run(self) -> Decision:
        request, config = self.request, self.config
        self.start = time.monotonic()
        # A snapshot or window past config.limits is refused before anything is built for it.
        check_snapshot(request.snapshot, config, all_pending=request.all_pending, window_keys=self.keys)
        ctx = self.ctx
        self.built = time.monotonic() - self.start
        log.debug("context built in %.2fs", self.built)
        progress.stage(f"{len(ctx.window)} pending pod(s) in {len(ctx.classes)} class(es), {len(ctx.nodes)} node(s)")
        del ctx
        if request.engine == "greedy":
            plan, renamed = self._greedy_engine()
            self._ctx = None
            return self._checked(plan, PlanSource.GREEDY, renamed=renamed)
        if request.greedy_first:
            decision = self._greedy_whole()
            if decision is not None:
                return decision
        return self._solve()

    def _solve(self) -> Decision:
        request = self.request
        self.solver_ran = True
        self.solver_limit = self._solver_limit()
        try:
            self._outcome = solve_window(self.ctx, time_limit=self.solver_limit)
        except ModelInvalidError as exc:
            # CP-SAT refused the model (e.g. quantities near 2**62 whose sums could overflow int64):
            # an encoding's limit, not the user's error. The decision is still due: greedy's plan.
            return self._fallback("CP-SAT refused the model: " + str(exc).splitlines()[0][:200], engine="cpsat")
        except (InputError, Interrupted):
            raise
        except Exception as exc:  # noqa: BLE001 - only when asked: a long-running caller decides greedily
            if not request.fall_back_on_error:
                raise
            progress.stage(f"the solver failed ({type(exc).__name__}); greedy scheduleOne decides")
            return self._fallback(f"the solver failed: {type(exc).__name__}: {str(exc)[:200]}", engine="greedy",
                                  error=True)
        return self._from_outcome()

    def _solver_limit(self) -> float:
        """The solver's share of the user's limit: what the context build left, less the
        validator's expected time. With one worker (a reproducible decision) the limit is the
        solver's whole, as the clock must not decide."""
        limit = self.config.solver.time_limit_seconds
        if limit <= 0 or self.config.solver.workers == 1:
            return limit
        self.kept = (time.monotonic() - self.start) + VALIDATION_PER_BUILD * self.built
        return max(LEAST_SOLVER_SHARE * limit, limit - self.kept)

    def _longer_limit(self, lacked: Optional[float]) -> str:
        """What a reason adds when greedy's plan left the search no time: the limit that would
        have left it a few rounds (``lacked``: the seconds the solver's share was short of them;
        the share floored at ``LEAST_SOLVER_SHARE`` counts as given)."""
        if lacked is None or self.solver_limit <= 0:
            return ""
        limit = math.ceil(self.solver_limit + lacked + self.kept)
        return f"; a time limit of about {limit}s would leave the search a few rounds"

    # -- the plans ---------------------------------------------------------------------------

    def _greedy_engine(self) -> tuple[Plan, Callable[[], Plan]]:
        progress.stage("greedy scheduleOne")
        ctx = self.ctx
        static = StaticFilters(ctx.nodes, ctx.window)
        cancel = threading.Event()  # Ctrl-C stops it at the next pod (``interrupt.request``)
        with interrupt.stoppable(cancel=cancel):
            result = self._greedy(static, cancel=cancel)
        interrupt.check()
        stats = dict(engine="greedy", status="GREEDY", plan_from="greedy", plan_reason="--engine greedy")
        return self._greedy_plan(result, static, stats), self._renamed(result, static, stats)

    def _greedy(self, static: StaticFilters, **kw: Any) -> GreedyResult:
        self.greedy_runs += 1
        return schedule_greedy(self.ctx, static=static, **kw)

    def _greedy_plan(self, result: GreedyResult, static: StaticFilters, stats: dict, *, named: bool = True) -> Plan:
        """Greedy's plan; ``named``: its victims keep the preemptors greedy evicted them for.
        Greedy is kube-scheduler's queue-order algorithm, so those are the ones the replay of its
        plan finds (on every generated window and dump checked: 0.3 s of replay saved at 1,000
        nodes, 0.7 s at 5,000); the validator checks each, and ``_checked`` names them by the
        replay (``_renamed``) should it ever refuse one."""
        return _plan_from(self.ctx, result.placements, result.victims, result.nominations, result.unschedulable,
                          static, stats=stats, start=self.start, engine_greedy=True, engine_state=result.state,
                          named=named)

    def _renamed(self, result: GreedyResult, static: StaticFilters, stats: dict) -> Callable[[], Plan]:
        """Greedy's plan with each victim named by the replay, as the other plans are."""
        return lambda: self._greedy_plan(result, static, stats, named=False)

    def _greedy_whole(self) -> Optional[Decision]:
        """Greedy's plan when it places every pod of the window without preempting, else None
        (the model decides; greedy runs again beside it, on a state of its own)."""
        plan = self._greedy_whole_plan()
        if plan is None:
            return None
        self._ctx = None  # built again only if the validator refuses the plan
        problems = self._validate(plan)
        if problems:
            self.rejected.append(Rejected(PlanSource.GREEDY, tuple(problems)))
            return None
        return self._decision(plan, PlanSource.GREEDY, ())

    def _greedy_whole_plan(self) -> Optional[Plan]:
        ctx = self.ctx
        static = StaticFilters(ctx.nodes, ctx.window)
        result = self._greedy(static)
        if result.unschedulable or result.victims or len(result.placements) < len(ctx.window):
            return None
        plan = self._greedy_plan(result, static, dict(engine="greedy", status="GREEDY", plan_from="greedy",
                                                     plan_reason=REASON_GREEDY_WHOLE))
        return None if plan.gated else plan

    def _fallback(self, reason: str, *, engine: str, error: bool = False,
                  result: Optional[GreedyResult] = None, static: Optional[StaticFilters] = None,
                  base: Optional[dict] = None) -> Decision:
        """Greedy's plan because the model's cannot be used (``reason``)."""
        static = static if static is not None else StaticFilters(self.ctx.nodes, self.ctx.window)
        if result is None:
            result = self._greedy(static)
        stats: dict[str, Any]
        if error:  # as the engine greedy decided it: the model never gave an answer
            stats = dict(engine="greedy", status="GREEDY", plan_from="greedy", plan_reason=reason)
        else:
            stats = dict(base) if base is not None else {}
            stats.update(engine=engine, status="FALLBACK", fallback=True, fallback_reason=reason, plan_from="greedy",
                         plan_reason=reason)
        return self._checked(self._greedy_plan(result, static, stats), PlanSource.FALLBACK, reason,
                             renamed=self._renamed(result, static, stats))

    def _from_outcome(self) -> Decision:
        outcome = self._outcome
        assert outcome is not None
        ctx = self.ctx
        greedy, sol = outcome.greedy, outcome.solution
        if greedy is not None:
            self.greedy_runs += 1  # beside the solve
        # Greedy is None when the solver proved optimality before greedy finished (it was stopped).
        base: dict[str, Any] = dict(engine="cpsat", greedy_placed=len(greedy.placements) if greedy is not None else None,
                                    degraded=outcome.degraded)
        if sol is None or not outcome.chose_solver:
            # Greedy's plan is returned: as the fallback (the solver had nothing in time, or failed),
            # or because it beat the solver's (GREEDY_BETTER); either way ``fallback`` says so. Or, with
            # nothing to beat, because no search could improve it (GREEDY, ``lns.settled``).
            reason = outcome.fallback_reason
            if reason is not None:
                reason += self._longer_limit(outcome.search_lacked)
            status = "FALLBACK" if reason is not None else "GREEDY" if outcome.settled else "GREEDY_BETTER"
            source = PlanSource.FALLBACK if reason is not None else PlanSource.GREEDY
            reason = reason or outcome.chosen_because
            stats = dict(base, status=status, fallback=not outcome.settled,
                         fallback_reason=None if outcome.settled else reason, plan_from="greedy", plan_reason=reason)
            if sol is not None:
                stats.update(_solver_stats(sol))
            assert greedy is not None  # only a plan the solver chose comes without greedy's
            plan = self._greedy_plan(greedy, outcome.static, stats)
            renamed = self._renamed(greedy, outcome.static, stats)
            fallback_reason = reason if source is PlanSource.FALLBACK else None
            if sol is None:
                del ctx, greedy, outcome  # nothing more is needed of them (``renamed`` keeps greedy's)
                self._ctx = self._outcome = None
                return self._checked(plan, source, fallback_reason, renamed=renamed)
            decision = self._checked(plan, source, fallback_reason, renamed=renamed)
            if decision.validated:
                return decision
            # Greedy's plan was preferred but the validator refuses it: the solver's, if it passes,
            # is a plan to act on where greedy's is none (a bug in greedy, reported in ``rejected``).
            log.warning("greedy's plan was refused by the validator (%s); the solver's plan is checked instead",
                        decision.problems[0])
            return self._solver_decision(sol, base, "greedy's plan failed validation: "
                                         + "; ".join(decision.problems[:3]), fallback=decision)
        return self._solver_decision(sol, base, outcome.chosen_because)

    def _solver_decision(self, sol, base: dict, because: Optional[str], *, fallback: Optional[Decision] = None) -> Decision:
        """The solver's plan, validated; refused, greedy's (``fallback``, when already checked)."""
        outcome = self._outcome
        assert outcome is not None
        ctx, greedy = self.ctx, outcome.greedy
        stats = dict(base, status=sol.status, objective=sol.objective, bound=sol.bound, plan_from="solver",
                     plan_reason=because, **_solver_stats(sol))
        if sol.objective is not None and sol.bound is not None:
            denom = max(abs(sol.bound), 1.0)
            stats["gap"] = round(abs(sol.bound - sol.objective) / denom, 6)
        plan = _plan_from(ctx, sol.placements, sol.victims, sol.nominations, {}, outcome.static, stats=stats, named=True,
                          start=self.start)
        problems = self._validate(plan)
        if not problems:
            return self._decision(plan, PlanSource.SOLVER, ())
        self.rejected.append(Rejected(PlanSource.SOLVER, tuple(problems)))
        if fallback is not None:
            return self._decision(fallback.plan, fallback.source, fallback.problems, fallback.fallback_reason)
        reason = "solver plan failed validation: " + "; ".join(problems[:3])
        greedy_seconds = outcome.greedy_time
        if greedy is None:  # stopped beside a plan proven optimal: the fallback needs it now
            t0 = time.monotonic()
            greedy = self._greedy(outcome.static)
            greedy_seconds = time.monotonic() - t0
        rescued = self._rescued(sol, base, reason, greedy, greedy_seconds)
        if rescued is not None:
            return rescued
        return self._fallback(reason, engine="cpsat", result=greedy, static=outcome.static, base=base)

    def _rescued(self, sol, base: dict, reason: str, greedy: GreedyResult, greedy_seconds: float) -> Optional[Decision]:
        """A plan made of the refused solver plan by kube-scheduler's own turns (``guided.rescue``),
        when it is strictly better than greedy's and the validator passes it; else None."""
        outcome = self._outcome
        assert outcome is not None
        ctx = self.ctx
        fixed = deterministic(ctx)  # with one worker the decision must not read the clock
        limit = self.config.solver.time_limit_seconds
        cost = estimated_greedy_seconds(ctx) if fixed else max(greedy_seconds, 0.0)
        left = None if fixed else self.start + limit - time.monotonic()
        progress.stage("the solver's plan was refused; following it by kube-scheduler's turns")
        result = guided.rescue(ctx, outcome.static, sol.placements, greedy,
                               tier_weights([p.priority for p in ctx.window]), cost, left)
        if result is None:
            return None
        stats = dict(base, **_solver_stats(sol))
        stats.update(status="FEASIBLE", objective=None, bound=None, plan_from="solver", guided=guided.RESCUED,
                     plan_reason=f"{guided.RESCUED}; it is better than greedy's plan ({reason})")
        plan = _plan_from(ctx, result.placements, result.victims, result.nominations, result.unschedulable,
                          outcome.static, stats=stats, start=self.start, engine_state=result.state, named=True)
        problems = self._validate(plan)
        if problems:
            self.rejected.append(Rejected(PlanSource.SOLVER, tuple(problems)))
            return None
        return self._decision(plan, PlanSource.SOLVER, ())

    # -- validation --------------------------------------------------------------------------

    def _validate(self, plan: Plan) -> list[str]:
        from .validate import validate

        progress.stage("validating the plan")
        self.validations += 1
        t0 = time.monotonic()
        problems = validate(self.request.snapshot, plan, self.config, all_pending=self.request.all_pending,
                            window_keys=self.keys, memory=self.memory)
        log.debug("validated in %.2fs (context built in %.2fs)", time.monotonic() - t0, self.built)
        return problems

    def _checked(self, plan: Plan, source: PlanSource, fallback_reason: Optional[str] = None, *,
                 renamed: Optional[Callable[[], Plan]] = None) -> Decision:
        """The decision on ``plan`` once validated; ``renamed``: for greedy's plan, the same plan
        with its victims named by the replay, taken when the validator refuses the first."""
        problems = tuple(self._validate(plan))
        if problems and renamed is not None and plan.preemptions:
            log.warning("greedy's plan as greedy named its victims was refused (%s); named by the replay instead",
                        problems[0])
            plan = renamed()
            problems = tuple(self._validate(plan))
        if problems:
            self.rejected.append(Rejected(source, problems))
        return self._decision(plan, source, problems, fallback_reason)

    def _decision(self, plan: Plan, source: PlanSource, problems: tuple[str, ...],
                  fallback_reason: Optional[str] = None) -> Decision:
        return Decision(plan=plan, source=source, validated=not problems, problems=problems,
                        fallback_reason=fallback_reason, solver_ran=self.solver_ran, rejected=tuple(self.rejected),
                        greedy_runs=self.greedy_runs, validations=self.validations)


def _solver_stats(sol) -> dict:
    return dict(
        build_time_s=round(sol.build_time, 4),
        solve_time_s=round(sol.solve_time, 4),
        variables=sol.variables,
        constraints=sol.constraints,
        components=sol.components,
        node_groups=sol.node_groups,
        greedy_components=sol.greedy_components,
        node_classes=sol.node_classes,
        decode_lost=sol.decode_lost if sol.node_classes is not None else None,
        greedy_rest_placed=sol.greedy_rest if sol.node_classes is not None else None,
        solve_skipped=sol.solve_skipped,
        victim_cut_rounds=sol.victim_cut_rounds,
        guided=sol.guided,
        solver_status=sol.status,
        **_lns_stats(sol.lns),
    )


def _lns_stats(stats) -> dict:
    """The large-neighbourhood search's figures (``cpsat.lns.LnsStats``), when it ran."""
    if stats is None:
        return {}
    return dict(lns_rounds=stats.rounds, lns_improved_rounds=stats.improved, lns_max_pairs=stats.max_pairs,
                lns_placed_gain=stats.placed_gain, lns_victims_change=stats.victims_change,
                lns_history=tuple(stats.history[-20:]), lns_start=stats.start,
                lns_start_child_mib=None if stats.start_child_mib is None else round(stats.start_child_mib, 1))


def _plan_from(ctx, placements, victims, nominations, unschedulable, static, *, stats, start, engine_greedy=False,
               engine_state=None, named=False) -> Plan:
    """The plan of ``placements`` and ``victims``; ``named``: the victims are named for the pod at
    whose turn kube-scheduler's preemption evicts them already (the CP-SAT engine names them)."""
    nodes = ctx.nodes
    if victims and registry.POSTFILTER is not None and not named:
        # Each victim named for the pod at whose turn kube-scheduler's preemption evicts it.
        victims = registry.POSTFILTER.kube_preemptors(ctx, placements, list(victims), static)
        nominations = _nominated_preemptors(nominations, victims, placements)
    assignments = tuple(Assignment(pod=k, node=nodes[n].name) for k, n in placements.items())
    preemptions = tuple(Preemption(pod=v.pod.key, node=nodes[v.node].name, preemptor=v.preemptor) for v in victims)
    noms = tuple(Nomination(pod=k, node=nodes[n].name) for k, n in _waiting_for_victims(placements, victims, nominations).items())
    messages = dict(unschedulable)
    missing = [p for p in ctx.window if p.key not in placements and p.key not in messages]
    if missing:
        messages.update(explain(ctx, missing, placements, victims, static))
    left = tuple(Unschedulable(pod=p.key, message=messages[p.key]) for p in ctx.window if p.key not in placements)
    stats = dict(stats)
    stats.setdefault("wall_time_s", round(time.monotonic() - start, 4))
    stats["wall_time_s"] = round(time.monotonic() - start, 4)
    stats.update(
        pod_classes=len(ctx.classes),
        window_pods=len(ctx.window),
        nodes=len(ctx.nodes),
        placed=len(assignments),
    )
    # What the rules add beyond where pods go (``registry.PLAN_OUTPUTS``: devices, volumes).
    parts = [output(ctx, placements, list(victims), engine_state) for output in registry.PLAN_OUTPUTS]
    return Plan(assignments=assignments, preemptions=preemptions, unschedulable=left, nominations=noms,
                gated=_gated(ctx), allocations=tuple(a for part in parts for a in part.allocations),
                volume_bindings=tuple(v for part in parts for v in part.volume_bindings), stats=PlanStats(**stats))


def plan_of_placements(snapshot: ClusterSnapshot, config: SchedulerConfig, placements: dict[str, str], *,
                       window_keys: tuple[str, ...], all_pending: bool = False) -> Plan:
    """The plan that places ``placements`` (pod -> node name) and evicts nothing, with what the
    rules give it beyond where pods go (devices per claim, volume bindings) as a decision's plan
    has them; the window's other pods are left out. For a placement made elsewhere (``provision``'s
    model) to be checked by the validator as a plan of this engine's would be."""
    ctx = build_context(snapshot, config, all_pending=all_pending, window_keys=list(window_keys))
    index = ctx.state.node_index
    placed = {k: index[n] for k, n in placements.items()}
    parts = [output(ctx, placed, [], None) for output in registry.PLAN_OUTPUTS]
    left = tuple(Unschedulable(pod=p.key, message="not placed") for p in ctx.window if p.key not in placed)
    return Plan(assignments=tuple(Assignment(pod=k, node=n) for k, n in placements.items()), unschedulable=left,
                allocations=tuple(a for part in parts for a in part.allocations),
                volume_bindings=tuple(v for part in parts for v in part.volume_bindings),
                stats=PlanStats(engine="provision", status="model"))


def _nominated_preemptors(nominations, victims, placements) -> dict[str, int]:
    """The nominations, with each victim's preemptor nominated to its node (a pod the plan placed
    where it needed no victim keeps its nomination only if another rule gave it one)."""
    out = dict(nominations)
    for v in victims:
        if v.preemptor in placements:
            out[v.preemptor] = placements[v.preemptor]
    return out


def _gated(ctx) -> tuple[Gated, ...]:
    """Our pending pods that scheduling gates hold out of the window, so none goes unmentioned
    (of the pods the decision was restricted to, when it was: the live scheduler's queue)."""
    name = ctx.config.scheduler_name
    snapshot = ctx.snapshot
    pods = snapshot.pods if ctx.window_keys is None else snapshot.pods_among(ctx.window_keys)
    return tuple(
        Gated(pod=p.key, gates=tuple(g.name for g in p.spec.scheduling_gates))
        for p in pods
        if p.spec.scheduling_gates and not p.spec.node_name and not p.is_terminal and not p.is_terminating
        and (p.spec.scheduler_name == name or ctx.all_pending)
    )


def _waiting_for_victims(placements, victims, nominations) -> dict[str, int]:
    """Every pod placed on a node the plan evicts from, preemptors first: each must wait for the
    victims to leave before it is bound, or a consumer binding assignments at once overcommits
    the node (a lower-priority pod may use what its preemptor's victims left over)."""
    losing = {v.node for v in victims}
    out = dict(nominations)
    for key, n in placements.items():
        if n in losing:
            out.setdefault(key, n)
    return out


def explain(ctx, pods, placements, victims, static) -> dict[str, str]:
    """kube-scheduler's per-node reason histogram for each left-out pod, against the final state;
    computed once per pod class (its pods see the same state)."""
    final = ctx.state.copy()
    for v in victims:
        final.remove(v.pod)
    for key, n in placements.items():
        final.add(ctx.pod(key), n)
    parts = list(window_parts(ctx).values())  # the rules' views of the window (its gangs)
    by_class: dict[int, str] = {}
    out: dict[str, str] = {}
    before: Optional[ClusterState] = None  # the context's state, copied once to hold claims on
    for pod in pods:
        blocked = next((b for b in (part.why_blocked(pod) for part in parts) if b), None)
        if blocked:
            out[pod.key] = f"0/{len(ctx.nodes)} nodes are available: {blocked}."
            continue
        msg = by_class.get(pod.class_id)
        if msg is None:
            held = ctx.claims.hold(final, pod, placements)  # filtered with nominated pods
            cycle = Cycle(pod, final, static, version=ctx.config.kubernetes_version)
            feasible_now = len(cycle.feasible())
            # A rule's own reason (a gang's minResources or minMember), read with the claims held.
            why = next((w for w in (part.left_out(pod, placements, final, bool(feasible_now)) for part in parts)
                        if w is not None), None)
            if why is not None:
                msg = why
            else:
                postfilter = (f"preemption: {registry.POSTFILTER.REASON_TERMINATING}"
                              if pod.waiting_on and registry.POSTFILTER is not None else None)
                msg = cycle.fit_error(postfilter=postfilter) if not feasible_now else (
                    "the window's joint placement left this pod out (it fits the final state only by "
                    "breaking a window-level rule such as topology spread or a gang)"
                )
                if not feasible_now:
                    ctx.claims.release(final, held)
                    held = []
                    if ctx.claims and before is None:
                        before = ctx.state.copy()
                    start = before if before is not None else ctx.state
                    held_before = ctx.claims.hold(start, pod, ())
                    alone = Cycle(pod, start, static, version=ctx.config.kubernetes_version).feasible()
                    ctx.claims.release(start, held_before)
                    if len(alone):
                        msg += NOTE_JOINT
            ctx.claims.release(final, held)
            by_class[pod.class_id] = msg
        out[pod.key] = msg
    return out

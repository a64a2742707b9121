"""``schedule``: a snapshot in, a ``Plan`` out — the one entry point adapters call.

Engines: ``greedy`` (kube-scheduler's scheduleOne, one pod at a time) and ``cpsat`` (the window
solved as one model per independent component, greedy as hint and fallback). Every plan is
checked by the independent validator before it leaves; a solver plan that fails it is replaced
by the greedy plan (marked as a fallback, with the violations as the reason) — a safety net that
should never fire, and tests assert it does not.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Optional

from models.config import SchedulerConfig
from models.errors import InputError
from models.plan import Assignment, DeviceAllocation, Gated, Nomination, Plan, PlanStats, Preemption, Unschedulable
from models.snapshot import ClusterSnapshot

from . import interrupt, progress
from .context import SchedulingContext, build_context
from .cpsat.solve import CpsatOutcome, ModelInvalidError, solve_window
from .greedy import schedule_greedy
from .limits import check_snapshot
from .filtering import Cycle, StaticFilters
from .plugins.preemption import nominated
from .state import ClusterState
from .plugins.volume_binding.filter import bindings_of

ENGINES = ("cpsat", "greedy")
# Appended to a left-out pod's message when it would have fit on its own.
NOTE_JOINT = (
    " (it fits the cluster on its own: its room went to pods of higher priority or to a better"
    " joint placement of the window)"
)


def schedule(
    snapshot: ClusterSnapshot,
    config: Optional[SchedulerConfig] = None,
    *,
    engine: str = "cpsat",
    all_pending: bool = False,
    window_keys: Optional[list[str]] = None,
) -> Plan:
    if engine not in ENGINES:
        raise InputError("", "--engine", f'unknown engine "{engine}" (choose {" or ".join(ENGINES)})')
    config = config or SchedulerConfig()
    start = time.monotonic()
    # A snapshot or window past config.limits is refused before anything is built for it.
    check_snapshot(snapshot, config, all_pending=all_pending, window_keys=window_keys)
    ctx = build_context(snapshot, config, all_pending=all_pending, window_keys=window_keys)
    progress.stage(f"{len(ctx.window)} pending pod(s) in {len(ctx.classes)} class(es), {len(ctx.nodes)} node(s)")
    if engine == "greedy":
        progress.stage("greedy scheduleOne")
        static = StaticFilters(ctx.nodes, ctx.window)
        cancel = threading.Event()  # Ctrl-C stops it at the next pod (``interrupt.request``)
        with interrupt.stoppable(cancel=cancel):
            result = schedule_greedy(ctx, static=static, cancel=cancel)
        interrupt.check()
        return _plan_from(ctx, result.placements, result.victims, result.nominations, result.unschedulable,
                          static, stats=dict(engine="greedy", status="GREEDY", plan_from="greedy",
                                             plan_reason="--engine greedy"), start=start, engine_greedy=True,
                          volumes_taken=_taken(result))
    try:
        outcome = solve_window(ctx)
    except ModelInvalidError as exc:
        # CP-SAT refused the model (e.g. quantities near 2**62 whose sums could overflow int64):
        # an encoding's limit, not the user's error. The decision is still due: greedy's plan.
        static = StaticFilters(ctx.nodes, ctx.window)
        greedy = schedule_greedy(ctx, static=static)
        reason = "CP-SAT refused the model: " + str(exc).splitlines()[0][:200]
        return _plan_from(ctx, greedy.placements, greedy.victims, greedy.nominations, greedy.unschedulable, static,
                          stats=dict(engine="cpsat", status="FALLBACK", fallback=True, fallback_reason=reason,
                                     plan_from="greedy", plan_reason=reason),
                          start=start, engine_greedy=True,
                          volumes_taken=_taken(greedy))
    return _plan_from_outcome(ctx, outcome, start)


def _plan_from_outcome(ctx: SchedulingContext, outcome: CpsatOutcome, start: float) -> Plan:
    greedy, sol = outcome.greedy, outcome.solution
    # Greedy is None when the solver proved optimality before greedy finished (it was stopped).
    base: dict[str, Any] = dict(engine="cpsat", greedy_placed=len(greedy.placements) if greedy is not None else None,
                                degraded=outcome.degraded)
    if sol is None or not outcome.chose_solver:
        # Greedy's plan is returned: as the fallback (the solver had nothing in time, or failed),
        # or because it beat the solver's (GREEDY_BETTER). Either way ``fallback`` says so.
        reason = outcome.fallback_reason
        status = "FALLBACK" if reason is not None else "GREEDY_BETTER"
        reason = reason or outcome.chosen_because
        stats = dict(base, status=status, fallback=True, fallback_reason=reason, plan_from="greedy",
                     plan_reason=reason)
        if sol is not None:
            stats.update(_solver_stats(sol))
        assert greedy is not None  # only a plan the solver chose comes without greedy's
        return _plan_from(ctx, greedy.placements, greedy.victims, greedy.nominations, greedy.unschedulable,
                          outcome.static, stats=stats, start=start, engine_greedy=True,
                          volumes_taken=_taken(greedy))
    stats = dict(base, status=sol.status, objective=sol.objective, bound=sol.bound, plan_from="solver",
                 plan_reason=outcome.chosen_because, **_solver_stats(sol))
    if sol.objective is not None and sol.bound is not None:
        denom = max(abs(sol.bound), 1.0)
        stats["gap"] = round(abs(sol.bound - sol.objective) / denom, 6)
    plan = _plan_from(ctx, sol.placements, sol.victims, sol.nominations, {}, outcome.static, stats=stats, start=start)
    problems = _validate(ctx, plan)
    if problems:
        if greedy is None:
            greedy = schedule_greedy(ctx, static=outcome.static)
        reason = "solver plan failed validation: " + "; ".join(problems[:3])
        stats = dict(base, status="FALLBACK", fallback=True, fallback_reason=reason, plan_from="greedy",
                     plan_reason=reason)
        return _plan_from(ctx, greedy.placements, greedy.victims, greedy.nominations, greedy.unschedulable,
                          outcome.static, stats=stats, start=start, engine_greedy=True,
                          volumes_taken=_taken(greedy))
    return plan


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
    )


def _validate(ctx: SchedulingContext, plan: Plan) -> list[str]:
    from .validate import validate

    keys = sorted(ctx.window_keys) if ctx.window_keys is not None else None
    return validate(ctx.snapshot, plan, ctx.config, all_pending=_all_pending(ctx), window_keys=keys)


def _all_pending(ctx: SchedulingContext) -> bool:
    names = {p.pod.spec.scheduler_name for p in ctx.window}
    return bool(names - {ctx.config.scheduler_name})


def _plan_from(ctx, placements, victims, nominations, unschedulable, static, *, stats, start, engine_greedy=False,
               volumes_taken=None) -> Plan:
    nodes = ctx.nodes
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
    volumes = bindings_of(((ctx.pod(k), nodes[n]) for k, n in placements.items()), ctx.state.volumes, volumes_taken)
    return Plan(assignments=assignments, preemptions=preemptions, unschedulable=left, nominations=noms,
                gated=_gated(ctx), allocations=_allocations(ctx, placements, victims), volume_bindings=volumes,
                stats=PlanStats(**stats))


def _allocations(ctx, placements, victims) -> tuple[DeviceAllocation, ...]:
    """The devices the placed pods' claims get: the plan replayed on the snapshot's state in
    its placement order, each pod given what the DynamicResources filter finds on its node."""
    if ctx.state.dra is None or not any(ctx.pod(k).pod.spec.resource_claims for k in placements):
        return ()
    base = ctx.state.copy()
    for v in victims:
        base.remove(v.pod)
    final = base.copy()
    for key, n in placements.items():
        final.add(ctx.pod(key), n)
    dra = final.dra
    pods = [ctx.pod(key) for key in placements]
    if not dra.complete(pods):
        # In placement order some pod found its node's devices taken in a way that strands it;
        # the node's claims chosen together may all fit (the solver counted them that way).
        dra = base.dra.copy()
        dra.place_jointly([(ctx.pod(key), n) for key, n in placements.items()])
        if not dra.complete(pods):
            dra = final.dra  # the validator names what is missing
    return tuple(DeviceAllocation(claim=key, pods=tuple(sorted(dra.users[key])), allocation=a.to_json())
                 for key, a in dra.added_allocations().items())


def _taken(result) -> Optional[dict[str, str]]:
    """The volumes greedy's Reserve gave the window's claims (volume -> claim)."""
    return result.state.pv_taken if result.state is not None else None


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
        and (p.spec.scheduler_name == name or _all_pending(ctx))
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
    from .plugins.gang import min_resources
    from .plugins.gang import permit as gang_mod
    from .plugins.gang import topology as gang_topology

    final = ctx.state.copy()
    for v in victims:
        final.remove(v.pod)
    for key, n in placements.items():
        final.add(ctx.pod(key), n)
    gangs = gang_mod.collect(ctx)
    by_class: dict[int, str] = {}
    out: dict[str, str] = {}
    before: Optional[ClusterState] = None  # the context's state, copied once to hold claims on
    for pod in pods:
        gang = gangs.get(pod.group) if pod.group else None
        blocked = gang.blocked(pod) if gang else None
        if blocked:
            out[pod.key] = f"0/{len(ctx.nodes)} nodes are available: {blocked}."
            continue
        msg = by_class.get(pod.class_id)
        if msg is None:
            held = nominated.hold(ctx.claims, final, pod, placements)  # filtered with nominated pods
            cycle = Cycle(pod, final, static, version=ctx.config.kubernetes_version)
            feasible_now = len(cycle.feasible())
            placed = sum(1 for m in gang.members if m.key in placements) if gang is not None else 0
            refused = None
            if gang is not None and gang.group is not None and not placed:
                # minResources: the room the plan leaves the group (its running members' own
                # requests counted as room, as PreFilter counts them) does not cover it.
                refused = min_resources.refusal(gang.group, gang.key, final, [p for p in ctx.bound if p.group == gang.key])
            if refused is not None:
                msg = f"0/{len(ctx.nodes)} nodes are available: {refused}."
            elif feasible_now and gang is not None and not gang.reaches(placed):
                key = gang_topology.key_of(gang.group)
                msg = (gang_mod.rejected(gang.key, placed, gang.need) if key is None
                       else gang_topology.rejected(gang.key, key, gang.need, gang.min_member))
            else:
                postfilter = f"preemption: {nominated.REASON_TERMINATING}" if pod.waiting_on else None
                msg = cycle.fit_error(postfilter=postfilter) if not feasible_now else (
                    "the window's joint placement left this pod out (it fits the final state only by "
                    "breaking a window-level rule such as topology spread or a gang)"
                )
                if not feasible_now:
                    nominated.release(final, held)
                    held = []
                    if ctx.claims and before is None:
                        before = ctx.state.copy()
                    start = before if before is not None else ctx.state
                    held_before = nominated.hold(ctx.claims, start, pod, ())
                    alone = Cycle(pod, start, static, version=ctx.config.kubernetes_version).feasible()
                    nominated.release(start, held_before)
                    if len(alone):
                        msg += NOTE_JOINT
            nominated.release(final, held)
            by_class[pod.class_id] = msg
        out[pod.key] = msg
    return out

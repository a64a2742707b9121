"""``why``: for a pending pod or gang the best plan leaves out, kube-scheduler's reason
histogram (the plan's own message) and a minimal set of obstacles the solver proves: relaxing
them all lets it fit, relaxing any fewer does not (``search``, over ``obstacles``).

The question is asked of the cluster as the best plan leaves it: the plan's placements bound,
its victims gone, the other left-out pods away; the targets alone are decided again, by the
same ``decide``, with the obstacles relaxed.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Callable, Optional

from models.config import SchedulerConfig
from models.errors import InputError
from models.objects import Pod, copy_with
from models.plan import Plan
from models.resources import pod_requests
from models.snapshot import ClusterSnapshot, pod_group_key

from ..api import Decision, ScheduleRequest, decide
from ..memory import SolverMemory
from ..whatif.changes import rebuilt
from .carried import carried_claims
from .obstacles import Obstacle, candidates, frozen_budgets, relaxed
from .search import Verdict, minimal_subset

__all__ = ["Explanation", "Obstacle", "Stopped", "Unit", "explain", "units_of", "OBSTACLES_PREFIX"]

# How the short form of an answer begins, after kube-scheduler's message in a condition.
OBSTACLES_PREFIX = "obstacles: "


class Stopped(Exception):
    """The caller's ``gate`` refused the next feasibility check (out of time, target gone)."""


@dataclass(frozen=True)
class Unit:
    """What is asked about: one pod, or a gang's pending pods."""

    name: str  # the pod's key, or podgroup/<gang key>
    kind: str  # "pod" or "gang"
    pods: tuple[str, ...]


@dataclass(frozen=True)
class Explanation:
    unit: Unit
    placed: dict[str, str]  # the unit's pods the plan places
    reasons: dict[str, str]  # left-out pod -> kube-scheduler's message
    obstacles: Optional[tuple[Obstacle, ...]]  # None: nothing relaxable makes it fit
    fits_as_is: bool  # it fits the cluster as the plan leaves it (left out for the joint plan)
    checks: int
    proven: bool
    seconds: float
    beyond: tuple[str, ...] = ()  # with no obstacles: "memory: 48Gi asked, 15Gi on the roomiest node"
    # The plan binds volumes for the pods it places: the checks see those pods bound but their
    # volume claims as the snapshot has them (volumes not yet taken; devices are carried).
    claims_not_carried: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.unit.name, "kind": self.unit.kind, "pods": list(self.unit.pods),
            "placed": dict(sorted(self.placed.items())), "reasons": dict(sorted(self.reasons.items())),
            "fitsAsIs": self.fits_as_is,
            "obstacles": [o.to_json() for o in self.obstacles] if self.obstacles is not None else None,
            "beyondEveryNode": list(self.beyond), "claimsNotCarried": self.claims_not_carried,
            "short": self.short_form(),
            "proven": self.proven, "checks": self.checks, "seconds": round(self.seconds, 3),
        }

    def short_form(self) -> str:
        """The answer in one line, for a condition message after kube-scheduler's own:
        "obstacles: PodDisruptionBudget ml/batch allows 0 disruption(s); node n3's room". Empty
        when the unit is not left out."""
        if not self.reasons:
            return ""
        if self.fits_as_is:
            return OBSTACLES_PREFIX + "none, it fits alone (the best plan gave its room to other pods)"
        if self.obstacles is None:
            return OBSTACLES_PREFIX + "none that can be relaxed (it fits no node with every obstacle relaxed)"
        return OBSTACLES_PREFIX + "; ".join(o.brief for o in self.obstacles)


def units_of(snapshot: ClusterSnapshot, plan: Plan, target: Optional[str], scheduler_name: str) -> list[Unit]:
    """The units ``target`` names (every left-out pod or gang when None); ``InputError`` when it
    names nothing, or a pod that is not pending."""
    pending = {a.pod for a in plan.assignments} | {u.pod for u in plan.unschedulable}
    if target is None:
        left = [snapshot.pod(u.pod) for u in plan.unschedulable]
        return _grouped(snapshot, [p for p in left if p is not None], pending)
    _check_target(target)
    if target.startswith(("podgroup/", "workload/")):
        kind, _, rest = target.partition("/")
        ns, _, name = rest.partition("/")
        if kind == "podgroup":
            pods = [p for p in snapshot.pods if pod_group_key(p) == rest and p.key in pending]
        else:
            pods = [p for p in snapshot.pods if p.metadata.namespace == ns and p.spec.workload_ref is not None
                    and p.spec.workload_ref.name == name and p.key in pending]
        if not pods:
            raise InputError(target, "TARGET", f"no pending pod of {kind} {rest} in the snapshot")
        return _grouped(snapshot, pods, pending)
    pod = snapshot.pod(target)
    if pod is None:
        raise InputError(f"pods/{target}", "TARGET", "no such pod in the snapshot")
    if target not in pending:
        raise InputError(f"pods/{target}", "TARGET", f"not a pending pod this scheduler places ({_why_not_ours(pod, scheduler_name)})")
    return _grouped(snapshot, [pod], pending)


def _check_target(target: str) -> None:
    """``InputError`` for a target that is none of the forms ``units_of`` reads (a kind it does
    not take, ``deployment/shop/web``; a pod without its namespace), which would otherwise be
    looked up as a pod and reported as "no such pod", as if only the name were wrong."""
    kind, _, rest = target.partition("/")
    group = kind in _GROUP_KINDS
    namespace, slash, name = (rest if group else target).partition("/")
    if not (namespace and slash and name) or ("/" in name and not group):  # (a group's key may hold one)
        raise InputError(target, "TARGET", "expected a pod as NS/NAME, podgroup/NS/NAME, workload/NS/NAME or all")


# The kinds a target names a group of pods by: ``podgroup/NS/NAME``, ``workload/NS/NAME``.
_GROUP_KINDS = ("podgroup", "workload")


def _why_not_ours(pod: Pod, scheduler_name: str) -> str:
    """Why a pod of the snapshot is no target: bound, finished, being deleted, gated, or another
    scheduler's (the first that holds)."""
    if pod.spec.node_name:
        return f"it runs on node {pod.spec.node_name}"
    if pod.is_terminal:
        return f"it has finished, in phase {pod.status.phase}"
    if pod.is_terminating:
        return "it is being deleted"
    gates = tuple(g.name for g in pod.spec.scheduling_gates)
    if gates:
        return (f"it is held by spec.schedulingGates ({', '.join(gates)}): it waits for them to be removed, "
                "not for room")
    if pod.spec.scheduler_name != scheduler_name:
        return (f'its spec.schedulerName is "{pod.spec.scheduler_name}", another scheduler\'s; '
                "--all-pending takes it")
    return "it is not ours to schedule"


def _grouped(snapshot: ClusterSnapshot, pods: Sequence[Pod], pending: set[str]) -> list[Unit]:
    out: list[Unit] = []
    seen: set[str] = set()
    for pod in pods:
        gang = pod_group_key(pod)
        if gang is None:
            out.append(Unit(pod.key, "pod", (pod.key,)))
        elif gang not in seen:
            seen.add(gang)
            members = tuple(p.key for p in snapshot.pods if pod_group_key(p) == gang and p.key in pending)
            out.append(Unit(f"podgroup/{gang}", "gang", members))
    return out


def explain(snapshot: ClusterSnapshot, config: SchedulerConfig, target: Optional[str] = None, *,
            all_pending: bool = False, today: Optional[Decision] = None,
            gate: Optional[Callable[[], bool]] = None) -> list[Explanation]:
    """Why the best plan leaves ``target`` (or every left-out pod and gang) out. ``gate`` is asked
    before every feasibility check; when it says no, ``Stopped`` is raised (no partial answer)."""
    if target is not None:
        _check_target(target)  # before the decision, which may take the whole time limit
    if today is None:
        today = decide(ScheduleRequest(snapshot, config, all_pending=all_pending))
    plan = today.plan
    carried = not plan.volume_bindings  # (device allocations are carried: ``plan_applied``)
    return [dataclasses.replace(e, claims_not_carried=not carried) if e.reasons else e
            for e in (_explain_unit(snapshot, config, plan, unit, all_pending, gate)
                      for unit in units_of(snapshot, plan, target, config.scheduler_name))]


def _explain_unit(snapshot: ClusterSnapshot, config: SchedulerConfig, plan: Plan, unit: Unit,
                  all_pending: bool, gate: Optional[Callable[[], bool]] = None) -> Explanation:
    start = time.monotonic()
    placed = {k: n for k, n in plan.assignment_map().items() if k in unit.pods}
    reasons = {u.pod: u.message for u in plan.unschedulable if u.pod in unit.pods}
    if not reasons:
        return Explanation(unit, placed, reasons, (), False, 0, True, time.monotonic() - start)
    base = plan_applied(snapshot, plan, keep=set(reasons))
    targets = [p for p in (base.pod(k) for k in reasons) if p is not None]
    keys = tuple(reasons)
    checks = 0
    # One memory for every check: the bound pods a relaxation leaves as they were (the same
    # objects) are not made into infos again, only the few it changed.
    memory = SolverMemory()

    def fits(relaxing: tuple[Obstacle, ...]) -> Verdict:
        nonlocal checks
        if gate is not None and not gate():
            raise Stopped(f"{unit.name}: stopped after {checks} feasibility check(s)")
        checks += 1
        request = ScheduleRequest(relaxed(base, keys, relaxing), config, all_pending=all_pending, window_keys=keys,
                                  memory=memory)
        result = decide(request).plan
        done = set(keys) <= set(result.assignment_map())
        return Verdict(done, done or result.stats.status == "OPTIMAL")

    alone = fits(())
    if alone.fits:
        return Explanation(unit, placed, reasons, (), True, checks, True, time.monotonic() - start)
    every = sorted(candidates(base, targets, config), key=lambda o: -o.weight)
    whole = fits(tuple(every))
    if not whole.fits:
        return Explanation(unit, placed, reasons, None, False, checks, whole.proven, time.monotonic() - start,
                           beyond=beyond_every_node(base, targets))
    kinds: dict[str, list[Obstacle]] = {}
    for o in every:
        kinds.setdefault(o.kind, []).append(o)
    found = minimal_subset(every, fits, none_fails=alone.proven, chunks=list(kinds.values()))
    return Explanation(unit, placed, reasons, found.kept, False, checks, found.proven and alone.proven,
                       time.monotonic() - start)


def beyond_every_node(snapshot: ClusterSnapshot, targets: Sequence[Pod]) -> tuple[str, ...]:
    """The requests of a target no node could hold even empty (its allocatable), and a gang with
    fewer pods than its minMember (no room makes up for members that do not exist)."""
    out = list(_short_gangs(snapshot, targets))
    for pod in targets:
        for name, value in sorted(pod_requests(pod).items()):
            most = max((n.allocatable.get(name, 0) for n in snapshot.nodes), default=0)
            if value > most:
                out.append(f"{pod.key} requests {name} {_quantity(name, value)}, the roomiest node has "
                           f"{_quantity(name, most)}")
    return tuple(out)


def _short_gangs(snapshot: ClusterSnapshot, targets: Sequence[Pod]) -> list[str]:
    """Per PodGroup of the targets whose pods, bound or pending, are fewer than its minMember."""
    groups = snapshot.pod_group_by_key
    out = []
    for key in dict.fromkeys(k for k in map(pod_group_key, targets) if k is not None):
        group = groups.get(key)
        if group is None:
            continue
        members = sum(1 for p in snapshot.pods if pod_group_key(p) == key and not p.is_terminal)
        if members < group.spec.min_member:
            out.append(f"podgroup/{key} has {members} pod(s) and minMember {group.spec.min_member}: "
                       "create its other members, or lower spec.minMember")
    return out


def _quantity(name: str, value: int) -> str:
    if name == "cpu":
        return f"{value // 1000}" if value % 1000 == 0 else f"{value}m"
    for unit, size in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if value >= size and value % size == 0:
            return f"{value // size}{unit}"
        if value >= size and unit != "Ki" and (name in ("memory", "ephemeral-storage") or name.startswith("hugepages-")):
            # Not a whole unit (a node's allocatable after the kubelet's reservations): one decimal.
            return f"{value / size:.1f}{unit}"
    return str(value)


def plan_applied(snapshot: ClusterSnapshot, plan: Plan, *, keep: set[str]) -> ClusterSnapshot:
    """The cluster as ``plan`` leaves it: its placements bound with the devices it allocates them
    (``carried``), its victims gone, the pending pods it leaves out gone but for ``keep``; every
    budget's allowance frozen (``frozen_budgets``)."""
    placed = plan.assignment_map()
    victims = {p.pod for p in plan.preemptions}
    left = {u.pod for u in plan.unschedulable} - keep
    pods = []
    for pod in snapshot.pods:
        if pod.key in victims or pod.key in left:
            continue
        node = placed.get(pod.key)
        if node is not None:
            status = copy_with(pod.status, {"phase": "Running", "nominated_node_name": ""})
            pod = copy_with(pod, {"spec": copy_with(pod.spec, {"node_name": node}), "status": status})
        pods.append(pod)
    pods, claims = carried_claims(snapshot, plan, pods)
    return frozen_budgets(rebuilt(snapshot, pods=pods, resource_claims=claims))

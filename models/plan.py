"""``Plan``: what a scheduling decision outputs. Its JSON form is a contract for users' scripts.

``{"assignments": [...], "preemptions": [...], "unschedulable": [...], "stats": {...}}`` — keys are
only ever added, never renamed.
"""

from __future__ import annotations

from typing import Any, Optional

from pydantic import BaseModel, ConfigDict


class _PlanModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Assignment(_PlanModel):
    pod: str
    node: str


class Preemption(_PlanModel):
    pod: str
    node: str
    preemptor: str


class Unschedulable(_PlanModel):
    pod: str
    message: str


class Nomination(_PlanModel):
    """A preemptor and the node its victims free (``status.nominatedNodeName``)."""

    pod: str
    node: str


class Gated(_PlanModel):
    """A pending pod of ours held back by ``spec.schedulingGates``: not decided, and not lost."""

    pod: str
    gates: tuple[str, ...] = ()


class DeviceAllocation(_PlanModel):
    """A ResourceClaim the plan allocates (Dynamic Resource Allocation): ``allocation`` in the
    shape of ``ResourceClaim.status.allocation`` (``devices.results[]`` of request, driver,
    pool, device; ``nodeSelector`` when the devices are not reachable from every node), and the
    plan's pods that use it. A claim still to be made from a template is named as its
    ``metadata.generateName`` (``<pod>-<claim>-``)."""

    claim: str
    pods: tuple[str, ...] = ()
    allocation: dict[str, Any]
class VolumeBinding(_PlanModel):
    """How a WaitForFirstConsumer claim of a placed pod gets its volume: bound to an existing
    PersistentVolume (``volume``), or provisioned (``volume`` null, ``provisioned`` true) for
    ``node`` (kube-scheduler's ``volume.kubernetes.io/selected-node``). ``pod``: its first
    consumer in the plan."""

    claim: str
    pod: str
    node: str
    volume: Optional[str] = None
    provisioned: bool = False


class PlanStats(_PlanModel):
    engine: str
    status: str
    objective: Optional[float] = None
    bound: Optional[float] = None
    gap: Optional[float] = None
    wall_time_s: float = 0.0
    fallback: bool = False
    fallback_reason: Optional[str] = None
    # Extensions beyond the contract's first fields; absent values stay null.
    build_time_s: Optional[float] = None
    solve_time_s: Optional[float] = None
    variables: Optional[int] = None
    constraints: Optional[int] = None
    pod_classes: Optional[int] = None
    node_groups: Optional[int] = None
    components: Optional[int] = None
    window_pods: Optional[int] = None
    nodes: Optional[int] = None
    greedy_placed: Optional[int] = None
    # Independent components where the solver found nothing in time and greedy's part stood in.
    greedy_components: Optional[int] = None
    placed: Optional[int] = None
    # Which engine's plan this is ("solver" or "greedy") and why it was returned.
    plan_from: Optional[str] = None
    plan_reason: Optional[str] = None
    # When the per-node model would overrun the time limit, the step the decision degraded to
    # ("node classes", "node classes + greedy for the rest" or "greedy"; null: none), the node classes the model was built over, the
    # pods decoding to real nodes could not fit, and whether the CP-SAT solve was skipped because
    # the build had used the whole limit.
    degraded: Optional[str] = None
    node_classes: Optional[int] = None
    decode_lost: Optional[int] = None
    greedy_rest_placed: Optional[int] = None  # pods greedy placed on top of the node-class plan
    solve_skipped: Optional[bool] = None
    # Times the model was solved again because its plan evicted a pod kube-scheduler's own
    # preemption, replayed on the plan, would keep (each adds that node's verdict as a cut).
    victim_cut_rounds: Optional[int] = None
    # When the plan is the solver's followed by kube-scheduler's own turns (a pass in queue order
    # on the solver's nodes where kube's rules allow them, ``solver/cpsat/guided.py``): what was
    # done (null: the solver's plan as solved).
    guided: Optional[str] = None
    # CP-SAT's own status, also when greedy's plan is returned (status GREEDY_BETTER or
    # FALLBACK): OPTIMAL there still proves the model's levels cannot be bettered.
    solver_status: Optional[str] = None
    # The large-neighbourhood search, when the whole-window model would overrun the limit: rounds
    # run, rounds whose plan replaced the incumbent, the largest round model (class x node pairs),
    # pods placed beyond greedy's plan and victims against it, and what the last improving
    # rounds gained.
    lns_rounds: Optional[int] = None
    lns_improved_rounds: Optional[int] = None
    lns_max_pairs: Optional[int] = None
    lns_placed_gain: Optional[int] = None
    lns_victims_change: Optional[int] = None
    lns_history: Optional[tuple[str, ...]] = None
    # The search's second start (``solver/cpsat/small_first.py``): what the small-first pass came
    # to and whether the search started from it (null: not looked for).
    lns_start: Optional[str] = None
    # The private memory (MiB) the forked child that made it held at its end, beside this process.
    lns_start_child_mib: Optional[float] = None
    # ``schedule --bound`` only, proven after the decision (outside its time limit): per priority
    # p of the decided pods, the most pods of priority p and above any plan could place (CP-SAT's
    # bound on a relaxation, adapters/bench/tier_bounds.py), and how many fewer this plan places.
    tier_bound: Optional[dict[str, int]] = None
    tier_gap: Optional[dict[str, int]] = None


class Plan(_PlanModel):
    assignments: tuple[Assignment, ...] = ()
    preemptions: tuple[Preemption, ...] = ()
    unschedulable: tuple[Unschedulable, ...] = ()
    nominations: tuple[Nomination, ...] = ()
    # Pods waiting on scheduling gates, which kube-scheduler (and we) leave out of the window.
    gated: tuple[Gated, ...] = ()
    # Devices the plan gives to pending pods' ResourceClaims.
    allocations: tuple[DeviceAllocation, ...] = ()
    # The volumes the plan's WaitForFirstConsumer claims take (``plugins/volumes/volume_binding``).
    volume_bindings: tuple[VolumeBinding, ...] = ()
    stats: PlanStats

    def assignment_map(self) -> dict[str, str]:
        return {a.pod: a.node for a in self.assignments}

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

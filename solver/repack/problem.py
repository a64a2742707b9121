"""A re-packing problem: the running cluster split into what stays and what may move.

The movable pods become a scheduling *window*: they are taken off their nodes (their copies have
no ``nodeName``) and handed to ``build_context`` as if pending, while every other running pod
stays bound in the state. So the scheduler's own machinery — pod classes, candidate pruning by
the static filters, the per-rule CP-SAT encodings — applies to re-packing unchanged, and the
final state obeys exactly the rules a scheduled window obeys.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import SimpleNamespace
from typing import Optional

from models.config import SchedulerConfig
from models.errors import InputError
from models.objects import Node, Pod
from models.snapshot import ClusterSnapshot

from .. import interrupt, limits
from ..context import SchedulingContext, build_context
from ..memory import SolverMemory
from ..disruption import PdbBudgets
from ..filtering import StaticFilters
from .movable import MOVABLE, Movability, classify_all, held_for_backlog
from .volumes import confined

# Node costs enter the model as integers: thousandths of the configured unit.
COST_SCALE = 1000


def running_pods(snapshot: ClusterSnapshot) -> list[Pod]:
    """Pods holding capacity on a node of the snapshot (bound, not Succeeded/Failed)."""
    names = snapshot.node_by_name
    return [p for p in snapshot.bound_pods() if p.spec.node_name in names]


def unbind(pod: Pod, scheduler_name: str, verdict: Optional[Movability] = None) -> Pod:
    """The pod as its replacement would look before scheduling: no node, our scheduler, and
    confined to the nodes its persistent volumes admit (``verdict.nodes``)."""
    spec = pod.spec.model_copy(update={"node_name": "", "scheduler_name": scheduler_name})
    pod = pod.model_copy(update={"spec": spec})
    if verdict is not None and verdict.nodes is not None:
        pod = confined(pod, verdict.nodes)
    return pod


def with_window(snapshot: ClusterSnapshot, window: set[str], scheduler_name: str,
                verdicts: Optional[dict[str, Movability]] = None) -> ClusterSnapshot:
    """The running cluster with the pods in ``window`` unbound (pending for our scheduler);
    pending and finished pods of the original are left out."""
    verdicts = verdicts or {}
    pods = tuple(unbind(p, scheduler_name, verdicts.get(p.key)) if p.key in window else p
                 for p in interrupt.checked(running_pods(snapshot)))
    # Priorities were resolved when the original was built; the plain constructor keeps them.
    return ClusterSnapshot(
        nodes=snapshot.nodes,
        pods=pods,
        pdbs=snapshot.pdbs,
        priority_classes=snapshot.priority_classes,
        pod_groups=snapshot.pod_groups,
        namespaces=snapshot.namespaces,
        # Devices stay where they are: a moved pod's allocated claims still pin it.
        device_classes=snapshot.device_classes,
        resource_slices=snapshot.resource_slices,
        resource_claims=snapshot.resource_claims,
        resource_claim_templates=snapshot.resource_claim_templates,
        # what the volume filters read of a moved pod's claims
        pvs=snapshot.pvs,
        pvcs=snapshot.pvcs,
        storage_classes=snapshot.storage_classes,
        csi_nodes=snapshot.csi_nodes,
    )


def node_cost(node: Node, config: SchedulerConfig) -> float:
    """Price of a node: ``repack.instanceCost`` by its instance-type label, else the default."""
    rc = config.repack
    kind = node.metadata.labels.get(rc.node_cost_label)
    if kind is not None and kind in rc.instance_cost:
        return float(rc.instance_cost[kind])
    return float(rc.default_node_cost)


@dataclass(eq=False)
class RepackProblem:
    """Everything the model, the ordering and the report read about one re-packing."""

    snapshot: ClusterSnapshot  # as given
    config: SchedulerConfig
    verdicts: dict[str, Movability]  # running pod key -> may it move, and if not why
    ctx: SchedulingContext  # window: the movable pods; state: every other running pod
    static: StaticFilters
    origin: dict[str, int]  # movable pod key -> index of the node it runs on
    pinned: dict[int, list[tuple[str, str]]]  # node -> (pod, reason) of pods that keep it busy
    busy_before: frozenset[int]  # nodes running a movable or pinning pod
    keep: frozenset[int]  # --keep-node: never counted as freed
    cost: list[float]  # per node
    budgets: PdbBudgets
    notes: list[str] = field(default_factory=list)
    # Pending pods held where the backlog will run (``pending``): bound in ``snapshot`` here,
    # pinning their node, and counted in no "before" figure (they do not run yet).
    held: frozenset[str] = frozenset()
    # What the solver keeps between the contexts of one re-packing (``solver.memory``): the
    # caller's, shared by every context built for it.
    memory: Optional[SolverMemory] = None
    _running: Optional[SchedulingContext] = None

    @property
    def nodes(self):
        return self.ctx.nodes

    def freeable(self, n: int) -> bool:
        """May node ``n`` be counted as freed (nothing pins it and it is not kept)?"""
        return n not in self.pinned and n not in self.keep

    def cost_units(self, n: int) -> int:
        return int(round(self.cost[n] * COST_SCALE))

    def window_pod(self, key: str):
        return self.ctx.pod(key)

    def running(self) -> SchedulingContext:
        """The cluster as it runs now, every running pod bound (built once; callers that change
        the state work on ``running().state.copy()``)."""
        if self._running is None:
            # The problem's own state (every pod that stays) with each movable pod added where
            # it runs: the same cluster as a context built afresh from the snapshot, without
            # reading 40,000 pods again (the replay still builds its own from the snapshot).
            state = self.ctx.state.copy()
            for pod in interrupt.checked(self.ctx.window):
                state.add(pod, self.origin[pod.key])
            self._running = replace(self.ctx, state=state, window=[], classes=[], bound=[*self.ctx.bound, *self.ctx.window],
                                    bound_by_key={})
        return self._running


def build_problem(
    snapshot: ClusterSnapshot, config: SchedulerConfig, *, keep_nodes: tuple[str, ...] = (),
    held: Optional[dict[str, str]] = None, held_move: bool = False, memory: Optional[SolverMemory] = None,
) -> RepackProblem:
    """``held``: pending pod -> node, pods that are to run there after the plan (they stay put
    and keep their node busy, like a pod that may not move); with ``held_move`` they are placed
    by the model like the movable pods instead, starting from there."""
    names = snapshot.node_by_name
    for name in keep_nodes:
        if name not in names:
            raise InputError("--keep-node", name, "no node of that name in the snapshot")
    limits.check_nodes(snapshot, config.limits)
    interrupt.check()
    original = snapshot
    if held:
        from .pending import with_pods_bound

        snapshot = with_pods_bound(snapshot, held)
    running = running_pods(snapshot)
    interrupt.check()
    verdicts = classify_all([p for p in running if p.key not in (held or {})], original, config.repack)
    verdicts.update({key: MOVABLE if held_move else held_for_backlog() for key in held or {}})
    window = {key for key, v in verdicts.items() if v.movable}
    # The movable pods are placed again as one window: refused before they are copied unbound.
    limits.check_window(len(window), config.limits, what="movable running pods",
                        why="repack places them all in one model")
    # Scores play no part in re-packing: zero weights keep the builder from computing them.
    quiet = config.model_copy(
        update={
            "profile": "default",
            "scoring": config.scoring.model_copy(update={"weights": {k: 0 for k in config.scoring.weights}}),
        }
    )
    ctx = build_context(with_window(snapshot, window, config.scheduler_name, verdicts), quiet, window_keys=sorted(window),
                        memory=memory)
    index = ctx.state.node_index
    origin = {key: index[snapshot.pod_by_key[key].spec.node_name] for key in window}
    pinned: dict[int, list[tuple[str, str]]] = {}
    busy: set[int] = set(origin.values())
    for pod in interrupt.checked(running):
        verdict = verdicts[pod.key]
        if verdict.pins:
            n = index[pod.spec.node_name]
            pinned.setdefault(n, []).append((pod.key, verdict.describe()))
            if pod.key not in (held or {}) or held_move:  # a held pod does not run yet
                busy.add(n)
    keep = frozenset(index[name] for name in keep_nodes)
    # PodDisruptionBudgets read the cluster as it is (the window copies have no node: unhealthy;
    # held pending pods do not run: the original snapshot has them pending). The plan is carried
    # out through the Eviction API, so a budget is read as it reads it (an empty selector covers
    # its whole namespace), as the replay does.
    budgets = PdbBudgets.of(SimpleNamespace(snapshot=original), evictions=True)
    return RepackProblem(
        snapshot=snapshot,
        config=config,
        verdicts=verdicts,
        ctx=ctx,
        static=StaticFilters(ctx.nodes, ctx.window),
        origin=origin,
        pinned=pinned,
        busy_before=frozenset(busy),
        keep=keep,
        cost=[node_cost(n.node, config) for n in ctx.nodes],
        budgets=budgets,
        notes=list(ctx.notes) + _lost_pods(snapshot),
        held=frozenset() if held_move else frozenset(held or ()),
        memory=memory,
    )


def _lost_pods(snapshot: ClusterSnapshot) -> list[str]:
    lost = snapshot.missing_nodes()
    if not lost:
        return []
    more = f" and {len(lost) - 5} more" if len(lost) > 5 else ""
    return [f"{len(lost)} node(s) named by running pods are not in the snapshot; their pods are left out: "
            + ", ".join(lost[:5]) + more]


def describe_node(problem: RepackProblem, n: int) -> Optional[str]:
    """Why node ``n`` cannot be freed, if it cannot."""
    if n in problem.keep:
        return "kept (--keep-node)"
    pins = problem.pinned.get(n)
    if not pins:
        return None
    pod, reason = sorted(pins)[0]
    more = f" and {len(pins) - 1} more" if len(pins) > 1 else ""
    return f"{pod}: {reason}{more}"

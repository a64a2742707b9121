"""Obstacles: named groups of constraints standing between a left-out pod (or gang) and a
node, each one a thing an operator could change, with the relaxation that changes it.

Every relaxation only ever removes a constraint, so placing the targets can only get easier as
more obstacles are relaxed (the deletion search in ``search`` relies on that):

* ``room``: what the pods on one node hold (their requests, host ports and the devices of claims
  only they use; they stay, with their labels, so affinity and spread counts do not move) —
  "node n3's room";
* ``cordon``: a node's ``spec.unschedulable``; ``taint``: one NoSchedule/NoExecute taint of a
  node that a target does not tolerate;
* ``node-selector``, ``node-affinity``, ``pod-affinity[i]``, ``pod-anti-affinity[i]``,
  ``spread[i]``: the targets' own required rules;
* ``their-anti-affinity``: a running pod's required anti-affinity terms (they keep the targets
  out of its domain);
* ``group-topology``: a gang's required topology (every member in one domain of a label);
* ``pdb``: a PodDisruptionBudget, when budgets are hard (``preemption.pdb: hard``).

* what a node holds beyond requests and what the targets carry with them (``held``): a node's
  pod count, the targets' volumes, a node's volume attach limit, the targets' device claims and
  host ports.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Optional

from models.config import SchedulerConfig
from models.objects import Container, Pod, copy_with
from models.resources import pod_requests
from models.snapshot import ClusterSnapshot, holds_node

from ..disruption import allowances, eviction_budgets, unready_running
from ..framework import names
from ..whatif.changes import rebuilt
from .obstacle import Obstacle
from .held import held_obstacles, relaxed_csi_nodes, relaxed_node, relaxed_target, released_claims

HARD_EFFECTS = ("NoSchedule", "NoExecute")


# -- finding them ----------------------------------------------------------------------------


def candidates(base: ClusterSnapshot, targets: Sequence[Pod], config: SchedulerConfig) -> list[Obstacle]:
    """Every obstacle that could stand between ``targets`` and the cluster ``base``."""
    out: list[Obstacle] = []
    out += _room(base, targets)
    out += _node_rules(base, targets)
    out += _target_rules(targets)
    out += _their_anti_affinity(base)
    out += _group_topology(base, targets)
    out += held_obstacles(base, targets)
    if config.preemption.enabled and config.preemption.pdb == "hard":
        shared: dict[str, list[str]] = {}  # budget -> the running pods it and another select
        unready: dict[str, list[str]] = {}  # budget -> its running pods that are not Ready, charged
        for pod in base.pods:
            mine = eviction_budgets(pod, base.pdbs) if pod.spec.node_name else []
            if len(mine) > 1:
                for b in mine:
                    shared.setdefault(b.key, []).append(pod.key)
            if mine and unready_running(pod):
                for b in mine:
                    unready.setdefault(b.key, []).append(pod.key)
        out += [_budget(b, sorted(shared.get(b.key, ())), sorted(unready.get(b.key, ()))) for b in base.pdbs]
    return out


def _budget(pdb: Any, shared: list[str], unready: Sequence[str] = ()) -> Obstacle:
    """A budget under hard budgets: what it allows, or, where it selects running pods another
    budget selects too (``shared``), that overlap (the Eviction API evicts none of them, whatever
    either allows: deleting either budget, not raising its allowance, is what frees them).
    ``unready``: its running pods that are not Ready and still spend it (the budget is not
    healthy enough and not AlwaysAllow): named, with what would let them go unspent."""
    ref = f"poddisruptionbudgets/{pdb.key}"
    if shared:
        return Obstacle("pdb", pdb.key, f"PodDisruptionBudget {pdb.key} selects {names(shared)}, which another budget "
                        "selects too (the Eviction API evicts no pod two budgets select)", (ref,), ("spec.selector",), 50)
    text = f"PodDisruptionBudget {pdb.key} allows {pdb.status.disruptions_allowed} disruption(s)"
    fields: tuple[str, ...] = ("status.disruptionsAllowed",)
    if unready:
        text += (f"; its pods that are not Ready ({names(unready)}) would go unspent under "
                 f"unhealthyPodEvictionPolicy: AlwaysAllow, or once currentHealthy ({pdb.status.current_healthy or 0}) "
                 f"reaches desiredHealthy ({pdb.status.desired_healthy or 0})")
        fields += ("spec.unhealthyPodEvictionPolicy",)
    return Obstacle("pdb", pdb.key, text, (ref,), fields, 50)


def _room(base: ClusterSnapshot, targets: Sequence[Pod]) -> list[Obstacle]:
    by_node: dict[str, list[Pod]] = {}
    for pod in base.pods:
        if holds_node(pod) and (pod_requests(pod) or _host_ports(pod) or pod.spec.resource_claims):
            by_node.setdefault(pod.spec.node_name, []).append(pod)
    wanted: dict[str, int] = {}
    for t in targets:
        for name, value in pod_requests(t).items():
            wanted[name] = wanted.get(name, 0) + value
    out = []
    for node in base.nodes:
        pods = by_node.get(node.metadata.name)
        if not pods:
            continue
        short = _short_of(node.allocatable, pods, wanted)
        # The pods that hold what the target is short of come first (a GPU node's daemons hold
        # none of its GPUs); the obstacle is still the node's whole room.
        shown = sorted(pods, key=lambda p: not any(pod_requests(p).get(name) for name in short))
        names = ", ".join(p.key for p in shown[:5]) + (f" and {len(pods) - 5} more" if len(pods) > 5 else "")
        what = f" ({', '.join(short)} short)" if short else ""
        text = f"node {node.metadata.name}: room{what} held by {len(pods)} pod(s): {names}"
        out.append(Obstacle("room", node.metadata.name, text, (f"nodes/{node.metadata.name}",)
                            + tuple(f"pods/{p.key}" for p in pods),
                            ("status.allocatable", "spec.containers[*].resources.requests"), 100 + len(pods),
                            f"node {node.metadata.name}'s room"))
    return out


def _short_of(allocatable: dict[str, int], pods: list[Pod], wanted: dict[str, int]) -> list[str]:
    used: dict[str, int] = {}
    for p in pods:
        for name, value in pod_requests(p).items():
            used[name] = used.get(name, 0) + value
    return sorted(n for n, v in wanted.items() if allocatable.get(n, 0) - used.get(n, 0) < v)


def _host_ports(pod: Pod) -> bool:
    return any(p.host_port for c in (*pod.spec.containers, *pod.spec.init_containers) for p in c.ports)


def _tolerated(pod: Pod, taint) -> bool:
    return any(t.tolerates(taint) for t in pod.spec.tolerations)


def _node_rules(base: ClusterSnapshot, targets: Sequence[Pod]) -> list[Obstacle]:
    out = []
    for node in base.nodes:
        name = node.metadata.name
        if node.spec.unschedulable:
            out.append(Obstacle("cordon", name, f"node {name} is cordoned", (f"nodes/{name}",),
                                ("spec.unschedulable",), 20,
                                f"node {name} cordoned"))
        for i, taint in enumerate(node.spec.taints):
            if taint.effect in HARD_EFFECTS and not all(_tolerated(t, taint) for t in targets):
                shown = f"{taint.key}={taint.value}:{taint.effect}" if taint.value else f"{taint.key}:{taint.effect}"
                out.append(Obstacle("taint", (name, i), f"node {name} has taint {shown}, not tolerated",
                                    (f"nodes/{name}",), (f"spec.taints[{i}]",), 10,
                                    f"node {name}'s taint {shown}"))
    return out


def _required(terms: Optional[Any]) -> list:
    return list(terms.required_during_scheduling_ignored_during_execution) if terms is not None else []


def _target_rules(targets: Sequence[Pod]) -> list[Obstacle]:
    owners = tuple(f"pods/{t.key}" for t in targets)
    who = targets[0].key if len(targets) == 1 else f"{len(targets)} pods of the gang"
    out = []
    if any(t.spec.node_selector for t in targets):
        out.append(Obstacle("node-selector", None, f"{who}: nodeSelector {_labels(targets[0].spec.node_selector)}",
                            owners, ("spec.nodeSelector",), 5, "its nodeSelector"))
    affinities = [t.spec.affinity for t in targets if t.spec.affinity is not None]
    if any(a.node_affinity and a.node_affinity.required_during_scheduling_ignored_during_execution for a in affinities):
        out.append(Obstacle("node-affinity", None, f"{who}: required node affinity", owners,
                            ("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",), 5,
                            "its required node affinity"))
    for kind, attr, field in (("pod-affinity", "pod_affinity", "podAffinity"),
                              ("pod-anti-affinity", "pod_anti_affinity", "podAntiAffinity")):
        count = max((len(_required(getattr(a, attr))) for a in affinities), default=0)
        for i in range(count):
            term = next(_required(getattr(a, attr))[i] for a in affinities if len(_required(getattr(a, attr))) > i)
            out.append(Obstacle(kind, i, f"{who}: required {field} term {i} (topologyKey {term.topology_key})",
                                owners, (f"spec.affinity.{field}.requiredDuringSchedulingIgnoredDuringExecution[{i}]",), 5,
                                f"its {field} term {i}"))
    count = max((len(t.spec.topology_spread_constraints) for t in targets), default=0)
    for i in range(count):
        c = next(t.spec.topology_spread_constraints[i] for t in targets if len(t.spec.topology_spread_constraints) > i)
        if c.when_unsatisfiable == "DoNotSchedule":
            out.append(Obstacle("spread", i, f"{who}: topology spread {i} (topologyKey {c.topology_key}, maxSkew "
                                f"{c.max_skew})", owners, (f"spec.topologySpreadConstraints[{i}]",), 5,
                                f"its topology spread {i} ({c.topology_key})"))
    return out


def _labels(labels: dict[str, str]) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in sorted(labels.items())) + "}"


def _their_anti_affinity(base: ClusterSnapshot) -> list[Obstacle]:
    out = []
    for pod in base.pods:
        aff = pod.spec.affinity
        if holds_node(pod) and aff is not None and _required(aff.pod_anti_affinity):
            out.append(Obstacle("their-anti-affinity", pod.key, f"pod {pod.key} on node {pod.spec.node_name}: its "
                                "required podAntiAffinity", (f"pods/{pod.key}",),
                                ("spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution",), 30,
                                f"pod {pod.key}'s podAntiAffinity"))
    return out


def _group_topology(base: ClusterSnapshot, targets: Sequence[Pod]) -> list[Obstacle]:
    from models.snapshot import pod_group_key

    keys = {k for t in targets if (k := pod_group_key(t)) is not None}
    return [Obstacle("group-topology", g.key, f"gang {g.key}: every member in one {g.spec.topology_key} domain",
                     (f"podgroups/{g.key}",), ("spec.schedulingConstraints.topology[0].key",), 5,
                     f"gang {g.key} in one {g.spec.topology_key}")
            for g in base.pod_groups if g.key in keys and g.spec.topology_key]


# -- relaxing them ---------------------------------------------------------------------------


def frozen_budgets(snapshot: ClusterSnapshot) -> ClusterSnapshot:
    """``snapshot`` with every budget's allowance written into its status, so that relaxing a
    node's room (which leaves its pods in place) or anything else cannot change what it allows."""
    pdbs = [copy_with(b, {"status": copy_with(b.status, {"disruptions_allowed": allowed})})
            for b, allowed in zip(snapshot.pdbs, allowances(snapshot.pdbs, snapshot.pods))]
    return rebuilt(snapshot, pdbs=pdbs)


def relaxed(base: ClusterSnapshot, targets: Iterable[str], obstacles: Iterable[Obstacle]) -> ClusterSnapshot:
    """``base`` with every obstacle of ``obstacles`` relaxed."""
    by_kind: dict[str, set] = {}
    for o in obstacles:
        by_kind.setdefault(o.kind, set()).add(o.ref)
    if not by_kind:
        return base
    target_keys = set(targets)
    nodes = [relaxed_node(_relaxed_node(n, by_kind), by_kind, len(target_keys)) for n in base.nodes]
    room = by_kind.get("room", set())
    theirs = by_kind.get("their-anti-affinity", set())
    pods = []
    freed: set[str] = set()  # pods whose room is relaxed: their claims' devices are given back
    for pod in base.pods:
        if pod.key in target_keys:
            pod = relaxed_target(_relaxed_target(pod, by_kind), by_kind)
        if pod.spec.node_name in room and holds_node(pod):
            pod = _without_room(pod)
            freed.add(pod.key)
        if pod.key in theirs:
            pod = _without_anti_affinity(pod)
        pods.append(pod)
    pdbs = [b for b in base.pdbs if b.key not in by_kind.get("pdb", set())]
    groups = [copy_with(g, {"spec": copy_with(g.spec, {"topology_key": None})})
              if g.key in by_kind.get("group-topology", set()) else g for g in base.pod_groups]
    extra: dict = {"csi_nodes": relaxed_csi_nodes(base, by_kind)} if "volume-limit" in by_kind else {}
    if freed and base.resource_claims:
        extra["resource_claims"] = released_claims(base, freed)
    return rebuilt(base, nodes=nodes, pods=pods, pdbs=pdbs, pod_groups=groups, **extra)


def _relaxed_node(node, by_kind: dict[str, set]):
    name = node.metadata.name
    dropped = {i for (n, i) in by_kind.get("taint", set()) if n == name}
    spec = node.spec
    if name in by_kind.get("cordon", set()):
        spec = copy_with(spec, {"unschedulable": False})
    if dropped:
        spec = copy_with(spec, {"taints": [t for i, t in enumerate(spec.taints) if i not in dropped]})
    return node if spec is node.spec else copy_with(node, {"spec": spec})


def _without_room(pod: Pod) -> Pod:
    def bare(c: Container) -> Container:
        resources = copy_with(c.resources, {"requests": {}, "limits": {}})
        return copy_with(c, {"resources": resources, "ports": [p for p in c.ports if not p.host_port]})

    spec = copy_with(pod.spec, {"containers": [bare(c) for c in pod.spec.containers],
                                "init_containers": [bare(c) for c in pod.spec.init_containers],
                                "overhead": {}, "resources": None})
    return relaxed_target(copy_with(pod, {"spec": spec}), {"device-claim": {rc.name for rc in pod.spec.resource_claims}})


def _without_anti_affinity(pod: Pod) -> Pod:
    aff = pod.spec.affinity
    assert aff is not None and aff.pod_anti_affinity is not None
    anti = copy_with(aff.pod_anti_affinity, {"required_during_scheduling_ignored_during_execution": []})
    return copy_with(pod, {"spec": copy_with(pod.spec, {"affinity": copy_with(aff, {"pod_anti_affinity": anti})})})


def _relaxed_target(pod: Pod, by_kind: dict[str, set]) -> Pod:
    spec = pod.spec
    if "node-selector" in by_kind:
        spec = copy_with(spec, {"node_selector": {}})
    aff = spec.affinity
    if aff is not None:
        if "node-affinity" in by_kind and aff.node_affinity is not None:
            aff = copy_with(aff, {"node_affinity": copy_with(
                aff.node_affinity, {"required_during_scheduling_ignored_during_execution": None})})
        for kind, attr in (("pod-affinity", "pod_affinity"), ("pod-anti-affinity", "pod_anti_affinity")):
            drop = by_kind.get(kind)
            terms = getattr(aff, attr)
            if drop and terms is not None:
                kept = [t for i, t in enumerate(_required(terms)) if i not in drop]
                aff = copy_with(aff, {attr: copy_with(terms, {"required_during_scheduling_ignored_during_execution": kept})})
        spec = copy_with(spec, {"affinity": aff})
    drop = by_kind.get("spread")
    if drop:
        spec = copy_with(spec, {"topology_spread_constraints": [
            c for i, c in enumerate(spec.topology_spread_constraints) if i not in drop]})
    return pod if spec is pod.spec else copy_with(pod, {"spec": spec})



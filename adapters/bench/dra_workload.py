"""The ``dra`` benchmark workload (issue 27, point 7): GPUs as Dynamic Resource Allocation devices.

The cluster: nodes of 8 GPUs, one ResourceSlice per node (driver ``gpu.example.com``, the
node's own pool), grouped four nodes to an NVLink domain — a multi-node NVLink fabric, as a
rack of GB200-class machines is: every GPU carries the attribute
``gpu.example.com/nvlinkDomain`` and every node the label of the same name and value. Every
fourth node is partitioned: two of its GPUs are published as two MIG-like partitions each
(separate devices of ``type: mig``, half the memory), so it offers 6 whole GPUs and 4
partitions. Two DeviceClasses select them by CEL: ``gpu.example.com`` (whole GPUs) and
``mig.gpu.example.com`` (partitions).

The queue, in random order, asks for about 1.3 times the devices there are (pods ask for their
devices through ResourceClaimTemplates, one claim per pod, as a Job's pods do):

* single pods with a claim of 1, 2, 4 or 8 whole GPUs (the 2, 4 and 8 ones with
  ``matchAttribute: gpu.example.com/nvlinkDomain``), or of one partition;
* gangs — ``scheduling.k8s.io/v1alpha2`` PodGroups — of 2 or 4 members, each member with a claim
  of 4 or 8 GPUs constrained by ``matchAttribute`` on the domain attribute, the PodGroup
  requiring the whole gang in one domain (``schedulingConstraints.topology`` on the domain's
  node label). DRA's ``matchAttribute`` holds inside one claim; across the gang's claims it is
  the domain label the topology constraint reads, which names the same domain as the devices'
  attribute.

Where one pod at a time loses: kube-scheduler's DRA plugin does not score devices, and its
default scoring spreads pods over nodes by CPU and memory, so 1- and 2-GPU pods land on many
nodes, each taking a few GPUs of a node an 8-GPU pod or a gang member needed whole; what is left
is free GPUs on nodes where no waiting claim fits (stranded). A joint allocation packs the small
claims onto fewer nodes.

``dra_figures`` reads, from an engine's final cluster, the devices used and left free, and the
stranded ones: free devices on nodes where no claim of a pod still waiting can be allocated
(the allocator's own test, on the final state, one pod at a time; a gang member counts as a
claim that fits if its own claim would fit there).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any, Optional

from models import ClusterSnapshot, Pod

from .objects import ZONES, Factory, PodTemplate
from .workload_kit import Part, Workload, finish

DRIVER = "gpu.example.com"
MIG_CLASS = f"mig.{DRIVER}"
DOMAIN_ATTRIBUTE = f"{DRIVER}/nvlinkDomain"
DOMAIN_LABEL = f"{DRIVER}/nvlink-domain"
GPUS_PER_NODE = 8
NODES_PER_DOMAIN = 4
# Nodes at each scale: quick 4 domains, medium 32 (1,024 GPUs), large 128.
DRA_NODES = {"quick": 16, "medium": 128, "large": 512}
OVERCOMMIT = 1.3  # devices asked for / devices there are (a partition counts as half a GPU)
NAMESPACE = "dra"
# Gangs run at a higher priority than single pods (a training job is worth more than the
# inference pods it displaces): both engines then place gangs first, and the count of gangs
# placed compares what each achieves on the same goal.
TRAINING, TRAINING_PRIORITY = "training", 1000
# (what the pod asks for, relative share of the queue's pods)
_SINGLES = ((("gpu", 1), 4), (("gpu", 2), 3), (("gpu", 4), 2), (("gpu", 8), 1), (("mig", 1), 2))
_GANG_SHARE = 0.08  # of the pods drawn, how many start a gang
_GANGS = ((2, 8), (4, 4), (2, 4))  # (members, GPUs a member)


def _claim_template(f: Factory, name: str, device_class: str, count: int, match: bool) -> dict[str, Any]:
    request = {"name": "devices", "exactly": {"deviceClassName": device_class, "count": count}}
    spec: dict[str, Any] = {"devices": {"requests": [request]}}
    if match:
        spec["devices"]["constraints"] = [{"matchAttribute": DOMAIN_ATTRIBUTE}]
    obj = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
           "metadata": {"name": name, "namespace": NAMESPACE, "uid": f.uid(), "creationTimestamp": f.now()},
           "spec": {"spec": spec}}
    f.objects.append(obj)
    return obj


def _slice(node: str, domain: str, partitioned: bool, gpus: int) -> dict[str, Any]:
    def gpu(name: str) -> dict[str, Any]:
        return {"name": name,
                "attributes": {"type": {"string": "gpu"}, "model": {"string": "h200"}, "nvlinkDomain": {"string": domain}},
                "capacity": {"memory": {"value": "141Gi"}}}

    def mig(name: str) -> dict[str, Any]:
        return {"name": name,
                "attributes": {"type": {"string": "mig"}, "profile": {"string": "4g.71gb"},
                               "nvlinkDomain": {"string": domain}},
                "capacity": {"memory": {"value": "71Gi"}}}

    split = gpus // 4 if partitioned else 0  # GPUs published as partitions
    devices = [gpu(f"gpu-{i}") for i in range(gpus - split)]
    devices += [mig(f"gpu-{i}-mig-{p}") for i in range(gpus - split, gpus) for p in range(2)]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-{DRIVER}"},
            "spec": {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": devices}}


def _with_claim(pod: dict[str, Any], template: str) -> None:
    pod["spec"]["resourceClaims"] = [{"name": "devices", "resourceClaimTemplateName": template}]
    pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": "devices"}]


def build(f: Factory, nodes: int, pool_scale: int = 1) -> Optional[Part]:
    """The objects of the workload (see the module's text) into ``f``. ``pool_scale`` multiplies
    the devices of every node (identical devices, the same kinds) and nothing else: the same
    pods over a pool that many times larger, to show what the model's size follows."""
    gpus = GPUS_PER_NODE * pool_scale
    for name, selector in ((DRIVER, "gpu"), (MIG_CLASS, "mig")):
        f.objects.append({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                          "metadata": {"name": name, "uid": f.uid(), "creationTimestamp": f.now()},
                          "spec": {"selectors": [{"cel": {"expression":
                              f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].type == "{selector}"'}}]}})
    f.priority_class(TRAINING, TRAINING_PRIORITY, preemption_policy="Never",
                     description="multi-node training gangs: placed before single pods")
    width = max(4, len(str(nodes - 1)))
    for i in range(nodes):
        node = f"gpu-{i:0{width}d}"
        domain = f"nvl-{i // NODES_PER_DOMAIN:03d}"
        f.node(node, cpu="96", memory="1024Gi", zone=ZONES[(i // NODES_PER_DOMAIN) % len(ZONES)],
               instance_type="gpu.8xh200", labels={DOMAIN_LABEL: domain})
        f.objects.append(_slice(node, domain, i % 4 == 3, gpus))
    templates = {}
    for (kind, count), _ in _SINGLES:
        name = f"{kind}-{count}"
        templates[(kind, count)] = name
        _claim_template(f, name, DRIVER if kind == "gpu" else MIG_CLASS, count, kind == "gpu" and count > 1)
    for _, count in _GANGS:
        if ("gpu", count) not in templates:
            templates[("gpu", count)] = f"gpu-{count}"
            _claim_template(f, f"gpu-{count}", DRIVER, count, True)
    # Demand in half-GPU units: 1.3x the cluster's (pool_scale stays 1 in demand: same pods).
    supply = nodes * GPUS_PER_NODE * 2
    demand = 0
    owner_of: dict[str, Any] = {}
    weights = [w for _, w in _SINGLES]
    g = 0
    while demand < OVERCOMMIT * supply:
        if f.rng.random() < _GANG_SHARE:
            members, count = f.rng.choice(_GANGS)
            group = f"gang-{g:04d}"
            g += 1
            f.objects.append({"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
                              "metadata": {"name": group, "namespace": NAMESPACE, "uid": f.uid(),
                                           "creationTimestamp": f.now(), "generation": 1},
                              "spec": {"schedulingPolicy": {"gang": {"minCount": members}},
                                       "schedulingConstraints": {"topology": [{"key": DOMAIN_LABEL}]}}})
            template = PodTemplate("trainer", {"cpu": "8", "memory": "64Gi"}, labels={"team": "train"},
                                   restart_policy="Never", priority=TRAINING_PRIORITY, priority_class=TRAINING,
                                   preemption_policy="Never")
            for pod in f.pods(f.job(group, NAMESPACE), template, [None] * members):
                pod["spec"]["schedulingGroup"] = {"podGroupName": group}
                _with_claim(pod, templates[("gpu", count)])
            demand += members * count * 2
            continue
        (kind, count), = f.rng.choices([s for s, _ in _SINGLES], weights=weights)
        app = f"{kind}{count}"
        if app not in owner_of:
            owner_of[app] = f.replicaset(app, NAMESPACE)
        cpu = "2" if kind == "mig" else str(2 * count)
        template = PodTemplate(app, {"cpu": cpu, "memory": f"{8 * count}Gi"})
        _with_claim(f.pod(owner_of[app], template, None), templates[(kind, count)])
        demand += count * (1 if kind == "mig" else 2)
    return None  # no witness placement: the workload's optimum is not known


def dra(scale: str = "quick", seed: int = 0, pool_scale: int = 1) -> Workload:
    """GPU nodes of 8 devices in NVLink domains of 4 nodes, every fourth node with two GPUs
    partitioned; pods with claims of 1, 2, 4 or 8 GPUs or of one partition, and gangs whose
    members' claims must all sit in one NVLink domain (see ``adapters.bench.dra_workload``).
    Nodes: quick 16, medium 128, large 512."""
    if scale not in DRA_NODES:
        raise ValueError(f"unknown scale {scale!r}; expected one of {', '.join(DRA_NODES)}")
    f = Factory(seed)
    part = build(f, DRA_NODES[scale], pool_scale)
    name = "dra" if pool_scale == 1 else f"dra-pool-x{pool_scale}"
    return finish(name, scale, seed, f, part, dra.__doc__ or "")


# --------------------------------------------------------------------------- figures


def dra_figures(final: ClusterSnapshot, decided: Sequence[Pod]) -> Optional[dict[str, Any]]:
    """Devices in use and free in ``final``, and stranded: free devices on nodes where no claim
    of a waiting pod (a decided pod not bound in ``final``) can be allocated. None when the
    workload has no devices."""
    if not final.resource_slices:
        return None
    from solver.plugins.dynamic_resources import for_snapshot

    rules = for_snapshot(final)
    state = rules.initial_state()
    bound = {p.key for p in final.bound_pods()}
    waiting = [p for p in decided if p.key not in bound and p.spec.resource_claims]
    # One pod per claim shape: pods of one template ask for the same devices.
    shapes: dict[tuple, Pod] = {}
    for pod in waiting:
        shape = tuple((e.resource_claim_template_name or e.resource_claim_name or "") for e in pod.spec.resource_claims)
        shapes.setdefault(shape, pod)
    free_on: dict[str, int] = defaultdict(int)
    devices = 0
    for record in rules.inventory.devices.values():
        devices += 1
        if record.id not in state.used and record.scope.node_name is not None:
            free_on[record.scope.node_name] += 1
    stranded = stranded_nodes = 0
    for node in final.nodes:
        free = free_on.get(node.metadata.name, 0)
        if not free:
            continue
        fits = False
        for pod in shapes.values():
            try:
                found, _ = rules.allocate(final.pod_claims(pod), node, state)
            except Exception:  # noqa: BLE001 - a selector error: the claim does not fit
                found = None
            if found is not None:
                fits = True
                break
        if not fits:
            stranded += free
            stranded_nodes += 1
    return {
        "devices": devices,
        "used": len(state.used),
        "free": sum(free_on.values()),
        "stranded": stranded,
        "stranded_nodes": stranded_nodes,
        "waiting_pods": len(waiting),
    }


def allocated_claims(claims: dict[str, Any], plan: Any, window: Sequence[Pod], snapshot: ClusterSnapshot) -> None:
    """Carry a plan's device allocations into the bench's cluster (``runner._Cluster``): each
    allocated claim becomes a ResourceClaim with ``status.allocation`` and ``reservedFor`` (a
    claim from a template named as the plan names it, owned by its pod), and the pods placed
    keep their claims, so that the next window and the final figures see the devices taken."""
    from models.dra import ResourceClaim

    if not plan.allocations:
        return
    by_key = {p.key: p for p in window}
    for allocation in plan.allocations:
        users = [by_key[k] for k in allocation.pods if k in by_key]
        if not users:
            continue
        found = [pc for pc in snapshot.pod_claims(users[0]) if pc.key == allocation.claim and pc.claim is not None]
        if not found:
            continue
        pc = found[0]
        made = pc.claim
        assert made is not None
        ns, _, name = allocation.claim.partition("/")
        data = made.model_dump(mode="json", by_alias=True, exclude_none=True)
        data["metadata"] = {**data.get("metadata", {}), "name": name, "namespace": ns}
        if pc.from_template:
            owner = users[0]
            data["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": owner.metadata.name,
                                                    "uid": owner.metadata.uid or "", "controller": True}]
        data["status"] = {"allocation": allocation.allocation,
                          "reservedFor": [{"resource": "pods", "name": p.metadata.name, "uid": p.metadata.uid or ""}
                                          for p in users]}
        claims[allocation.claim] = ResourceClaim.model_validate(data)


def model_sizes(scale: str = "medium", seed: int = 0, pool_scale: int = 10,
                time_limit: Optional[float] = None) -> dict[str, Any]:
    """What the CP-SAT model's size follows: the ``dra`` workload's window decided by the cpsat
    engine as it is and with every node's pool ``pool_scale`` times larger (identical devices,
    the same pods), with the model's variables, constraints and device kinds of each."""
    from models import SchedulerConfig
    from solver import schedule
    from solver.plugins.dynamic_resources import for_snapshot

    config = SchedulerConfig()
    if time_limit is not None:
        config = config.with_overrides(time_limit_seconds=time_limit)
    out: dict[str, Any] = {}
    for factor in (1, pool_scale):
        snapshot = dra(scale, seed, factor).snapshot()
        plan = schedule(snapshot, config, engine="cpsat")
        inventory = for_snapshot(snapshot).inventory
        out[f"x{factor}"] = {"devices": len(inventory.devices), "device_kinds": len(inventory.kinds),
                             "variables": plan.stats.variables, "constraints": plan.stats.constraints,
                             "placed": len(plan.assignments), "pods": len(snapshot.pods), "status": plan.stats.status}
    small, large = out["x1"]["variables"], out[f"x{pool_scale}"]["variables"]
    out["variables_ratio"] = round(large / small, 3) if small and large else None
    return out


def _main(argv: Optional[list[str]] = None) -> None:
    """``python -m adapters.bench.dra_workload [--scale S] [--pool-scale K]``: the model's size on
    the dra workload and on the same pods over a pool K times larger (JSON)."""
    import argparse
    import json

    parser = argparse.ArgumentParser(prog="python -m adapters.bench.dra_workload", description=_main.__doc__)
    parser.add_argument("--scale", choices=tuple(DRA_NODES), default="medium")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pool-scale", type=int, default=10)
    parser.add_argument("--time-limit", type=float, default=None)
    args = parser.parse_args(argv)
    print(json.dumps(model_sizes(args.scale, args.seed, args.pool_scale, args.time_limit), indent=1))


if __name__ == "__main__":
    _main()

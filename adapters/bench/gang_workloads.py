"""Gang workloads: ``gang`` (PodGroups of three kinds competing for more CPU than the cluster
has) and ``topology-gang`` (gangs that must, or would rather, sit in one rack or block)."""

from __future__ import annotations

from typing import Any

from .objects import ZONES, Factory, PodTemplate
from .workload_kit import Part, Workload, make_nodes, pod_key, single


# --------------------------------------------------------------------------- gangs

# (name, member CPU in millicores, memory, members range, share of gang CPU demand)
_GANG_KINDS = (
    ("train", 3500, "12Gi", (2, 4), 0.5),
    ("sim", 2000, "6Gi", (4, 8), 0.25),
    ("etl", 1000, "3Gi", (8, 16), 0.25),
)
_GANG_OVERCOMMIT = 1.4  # total gang CPU demand / cluster CPU


class _BestFit:
    """Free CPU per node kept in buckets, to place pods best-fit without scanning every node."""

    def __init__(self, nodes: list[str], free: int) -> None:
        self.buckets: dict[int, list[str]] = {free: list(reversed(nodes))}

    def slots(self, size: int) -> int:
        return sum(len(v) * (k // size) for k, v in self.buckets.items())

    def take(self, size: int) -> str:
        fit = min(k for k, v in self.buckets.items() if v and k >= size)
        node = self.buckets[fit].pop()
        self.buckets.setdefault(fit - size, []).append(node)
        return node


def _gang(f: Factory, n: int, ns: str, prefix: str) -> Part:
    nodes = make_nodes(f, prefix, n, cpu="4", memory="16Gi")
    capacity = 4000 * n
    weights = [share / (cpu * (lo + hi) / 2) for _, cpu, _, (lo, hi), share in _GANG_KINDS]
    # Draw gangs until they ask for 1.4x the cluster: (kind, members, minMember, arrival key).
    drawn: list[tuple[tuple, int, int, float]] = []
    demand = 0
    while demand < _GANG_OVERCOMMIT * capacity:
        kind = f.rng.choices(_GANG_KINDS, weights=weights)[0]
        lo, hi = kind[3]
        members = f.rng.randint(lo, hi)
        # A quarter of the gangs are elastic: one member more than the minimum they need.
        min_member = members - 1 if members > 2 and f.rng.random() < 0.25 else members
        # Training jobs were mostly submitted first, the simulations and ETL after them.
        arrival = f.rng.uniform(0.0, 0.6) if kind[0] == "train" else f.rng.uniform(0.4, 1.0)
        drawn.append((kind, members, min_member, arrival))
        demand += kind[1] * members
    drawn.sort(key=lambda g: g[3])

    gangs: list[tuple[int, list[dict[str, Any]], int]] = []  # member CPU, pods, minMember
    for i, (kind, members, min_member, _) in enumerate(drawn):
        name, cpu, memory = kind[0], kind[1], kind[2]
        group = f"{name}-{i:05d}"
        min_resources = None
        if name == "train":
            min_resources = {"cpu": f"{cpu * min_member}m", "memory": f"{12 * min_member}Gi"}
        f.pod_group(group, ns, min_member, timeout_seconds=60, min_resources=min_resources)
        template = PodTemplate(
            name,
            {"cpu": f"{cpu}m", "memory": memory},
            labels={"team": name},
            restart_policy="Never" if name != "train" else "OnFailure",
        )
        gangs.append((cpu, f.pods(f.job(group, ns), template, [None] * members, group=group), min_member))
    # Witness: whole gangs best-fit, smallest pods first — a good count, not necessarily the best.
    part = Part()
    fit = _BestFit(nodes, 4000)
    for size, pods, min_member in sorted(gangs, key=lambda g: g[0]):
        k = min(len(pods), fit.slots(size))
        if k >= min_member:
            for pod in pods[:k]:
                part.witness[pod_key(pod)] = fit.take(size)
    return part


def gang(scale: str = "quick", seed: int = 0) -> Workload:
    """Coscheduling PodGroups (``scheduling.x-k8s.io/v1alpha1``, minMember 2–16) of Job pods
    labelled ``scheduling.x-k8s.io/pod-group``, demanding 1.4× the cluster's CPU, so some gangs
    cannot run. Kinds: ``train`` (2–4 members of 3.5 CPU, with minResources), ``sim`` (4–8 of
    2 CPU), ``etl`` (8–16 of 1 CPU); a quarter of the gangs have one member above minMember.

    Training gangs were mostly submitted first. kube-scheduler without coscheduling half-places
    gangs; with it (and in our greedy) gangs are taken first come, first served: the early
    ``train`` gangs take a node per pod, wasting half a CPU on each, and LeastAllocated spreads
    the members of later gangs so that fewer still fit. A joint placement chooses which gangs
    to run — more pods, and whole gangs only. The witness packs gangs smallest pods first: a
    lower bound on the optimum, not the optimum.
    """
    return single("gang", scale, seed, _gang, gang)


# --------------------------------------------------------------------------- topology-aware gangs

BLOCK = "topology.example.com/block"
RACK = "topology.example.com/rack"
PREFERRED_TOPOLOGY = "cpsat-scheduler.io/preferred-topology"
# Blocks x racks per block x nodes per rack, by node count. Quick is 24 nodes: small enough for
# CP-SAT to prove its placement optimal within the quick limit (40 nodes, 2 x 4 x 5, it found
# the better placement in some runs only, on two cores).
_TOPOLOGY_SHAPES = {24: (2, 3, 4), 1000: (10, 10, 10), 5000: (25, 20, 10)}
# (kind, member CPU in millicores, memory, members range, share of gang CPU demand). Racks are
# five or ten 4-CPU nodes: a ``wide`` member fits only a node with 3 CPUs free, so ``fill``
# members spread across a rack's nodes block it, and rack-sized ``wide`` gangs leave one CPU per
# node that only ``fill`` members use.
_TOPOLOGY_KINDS = (
    ("wide", 3000, "8Gi", (4, 4), 0.45),
    ("pair", 2000, "6Gi", (4, 4), 0.30),
    ("fill", 1000, "2Gi", (4, 4), 0.25),
)
_TOPOLOGY_OVERCOMMIT = 1.3  # total gang CPU demand / cluster CPU
_PREFERRED_SHARE = 0.2  # gangs with no required rack that prefer one block, then one rack


def _topology_shape(n: int) -> tuple[int, int, int]:
    if n in _TOPOLOGY_SHAPES:
        return _TOPOLOGY_SHAPES[n]
    per_rack = 10 if n >= 200 else 5
    racks = max(1, n // per_rack)
    blocks = max(1, racks // 10)
    return blocks, max(1, racks // blocks), per_rack


def _core_pod_group(f: Factory, name: str, ns: str, min_count: int, *, rack: bool, preferred: bool) -> dict[str, Any]:
    """A ``scheduling.k8s.io/v1alpha2`` PodGroup (Kubernetes 1.36): a gang of ``min_count``,
    required in one rack or (``preferred``) annotated to prefer one block, then one rack."""
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_count}}}
    if rack:
        spec["schedulingConstraints"] = {"topology": [{"key": RACK}]}
    metadata: dict[str, Any] = {"name": name, "namespace": ns, "uid": f.uid(), "creationTimestamp": f.now(), "generation": 1}
    if preferred:
        metadata["annotations"] = {PREFERRED_TOPOLOGY: f"{BLOCK},{RACK}"}
    obj = {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup", "metadata": metadata, "spec": spec}
    f.objects.append(obj)
    return obj


def _topology_gang(f: Factory, n: int, ns: str, prefix: str) -> Part:
    blocks, racks, per_rack = _topology_shape(n)
    width = max(4, len(str(n - 1)))
    i = 0
    rack_nodes: list[list[str]] = []
    for b in range(blocks):
        for r in range(racks):
            rack_nodes.append([])
            for _ in range(per_rack):
                labels = {BLOCK: f"block-{b:02d}", RACK: f"rack-{b:02d}-{r:02d}"}
                name = f"{prefix}-{i:0{width}d}"
                f.node(name, cpu="4", memory="16Gi", zone=ZONES[b % len(ZONES)], labels=labels)
                rack_nodes[-1].append(name)
                i += 1
    capacity = 4000 * i
    weights = [share / (cpu * (lo + hi) / 2) for _, cpu, _, (lo, hi), share in _TOPOLOGY_KINDS]
    drawn: list[tuple[tuple, int, bool]] = []
    demand = 0
    while demand < _TOPOLOGY_OVERCOMMIT * capacity:
        kind = f.rng.choices(_TOPOLOGY_KINDS, weights=weights)[0]
        lo, hi = kind[3]
        members = min(f.rng.randint(lo, hi), per_rack * (4000 // kind[1]))
        preferred = f.rng.random() < _PREFERRED_SHARE
        drawn.append((kind, members, preferred))
        demand += kind[1] * members
    gangs: list[tuple[int, list[dict[str, Any]], bool]] = []  # member CPU, pods, rack required
    for k, (kind, members, preferred) in enumerate(drawn):
        name, cpu, memory = kind[0], kind[1], kind[2]
        group = f"{name}-{k:05d}"
        _core_pod_group(f, group, ns, members, rack=not preferred, preferred=preferred)
        template = PodTemplate(name, {"cpu": f"{cpu}m", "memory": memory}, labels={"team": name}, restart_policy="Never")
        pods = f.pods(f.job(group, ns), template, [None] * members)
        for pod in pods:
            pod["spec"]["schedulingGroup"] = {"podGroupName": group}
        gangs.append((cpu, pods, not preferred))
    return Part(witness=_topology_witness(rack_nodes, gangs))


def _topology_witness(racks: list[list[str]], gangs: list[tuple[int, list[dict[str, Any]], bool]]) -> dict[str, str]:
    """Whole gangs, widest members first, each into the first rack whose nodes take every member
    first-fit (a gang without a required rack, failing that, anywhere): a good count, not the best."""
    free = {node: 4000 for rack in racks for node in rack}
    everywhere = [node for rack in racks for node in rack]
    witness: dict[str, str] = {}
    for cpu, pods, rack_only in sorted(gangs, key=lambda g: -g[0]):
        for nodes in [*racks, *([] if rack_only else [everywhere])]:
            slots = [node for node in nodes for _ in range(free[node] // cpu)]
            if len(slots) >= len(pods):
                for pod, node in zip(pods, slots):
                    witness[pod_key(pod)] = node
                    free[node] -= cpu
                break
    return witness


def topology_gang(scale: str = "quick", seed: int = 0) -> Workload:
    """Gangs as Kubernetes 1.36 declares them (``scheduling.k8s.io/v1alpha2`` PodGroups, pods
    joining by ``spec.schedulingGroup``) on racks inside blocks (node labels
    ``topology.example.com/block`` and ``.../rack``; quick: 2 blocks x 3 racks x 4 nodes of
    4 CPU; medium 10 x 10 x 10). Most gangs require one rack (``schedulingConstraints.topology``); a fifth instead
    carry the ``cpsat-scheduler.io/preferred-topology`` annotation (block, then rack). Kinds:
    ``wide`` (3 CPU a member), ``pair`` (2 CPU), ``fill`` (1 CPU), four members each (so more
    pods placed is more gangs placed); demand is 1.3x the cluster's CPU, kinds mixed in arrival
    order.

    One gang at a time (upstream TAS, our greedy), each gang takes the fullest rack that holds
    it and spreads inside it: ``fill`` members scattered over a rack's nodes leave no node with
    3 CPUs for a later ``wide`` gang, and racks end partly used with room no waiting gang fits.
    Choosing every gang's rack jointly packs ``wide`` and ``fill`` members into the same nodes.
    No witness: the best count is not known.
    """
    return single("topology-gang", scale, seed, _topology_gang, topology_gang)


# The builder, for ``mixed``.
BUILDERS = {"gang": _gang}

"""Bin-packing workloads: ``fragmentation`` (pods whose sizes strand capacity when placed one at
a time) and ``gpu-pools`` (GPU nodes behind a taint beside a CPU pool)."""

from __future__ import annotations

from typing import Any

from .objects import Factory, PodTemplate, tolerate
from .workload_kit import Part, Workload, assign, make_nodes, pod_key, single


GPU = "nvidia.com/gpu"
GPU_TAINT = {"key": GPU, "value": "present", "effect": "NoSchedule"}


# --------------------------------------------------------------------------- fragmentation


def _fragmentation(f: Factory, n: int, ns: str, prefix: str) -> Part:
    nodes = make_nodes(f, prefix, n, cpu="4", memory="16Gi")
    large_nodes, medium_nodes = max(1, round(0.4 * n)), max(1, round(0.3 * n))
    small_nodes = n - large_nodes - medium_nodes
    patterns = ["L"] * large_nodes + ["M"] * medium_nodes + ["S"] * small_nodes
    f.rng.shuffle(patterns)
    # Node patterns, each exactly 4 CPU: L = 3 + 1, M = 1.5 + 1.5 + 1, S = 1 + 1 + 1 + 1.
    small = PodTemplate("web", {"cpu": "1", "memory": "3Gi"})
    medium = PodTemplate("api", {"cpu": "1500m", "memory": "4608Mi"})
    large = PodTemplate("search", {"cpu": "3", "memory": "9Gi"})
    counts = {
        "web": large_nodes + medium_nodes + 4 * small_nodes,
        "api": 2 * medium_nodes,
        "search": large_nodes,
    }
    owners = {t.app: (f.replicaset(t.app, ns), t) for t in (small, medium, large)}
    # Arrival: most small pods first, then the rest of everything interleaved.
    head = round(0.8 * counts["web"])
    arrivals = ["web"] * (counts["web"] - head) + ["api"] * counts["api"] + ["search"] * counts["search"]
    f.rng.shuffle(arrivals)
    made: dict[str, list[dict[str, Any]]] = {app: [] for app in counts}
    for app in ["web"] * head + arrivals:
        owner, template = owners[app]
        made[app].append(f.pod(owner, template, None))
    part = Part()
    slots = {
        "search": [x for x, p in zip(nodes, patterns) if p == "L"],
        "api": [x for x, p in zip(nodes, patterns) if p == "M" for _ in range(2)],
        "web": [x for x, p in zip(nodes, patterns) if p in "LM"] + [x for x, p in zip(nodes, patterns) if p == "S" for _ in range(4)],
    }
    for app, pods in made.items():
        if assign(pods, slots[app], part.witness):
            raise AssertionError("fragmentation construction should fill every node exactly")
    return part


def fragmentation(scale: str = "quick", seed: int = 0) -> Workload:
    """Mixed pod sizes on identical 4-CPU nodes that fit exactly by construction: 40% of the
    nodes take one 3-CPU ``search`` pod and one 1-CPU ``web`` pod, 30% two 1.5-CPU ``api`` pods
    and a web pod, the rest four web pods. Memory is never the limit.

    80% of the web pods arrive first, the rest interleaved. LeastAllocated spreads the early
    web pods over every node, so by the time the search pods arrive few nodes still have three
    free CPUs and most large pods are stranded. A joint placement packs every pod (placed ==
    pending is reachable; the witness shows it).
    """
    return single("fragmentation", scale, seed, _fragmentation, fragmentation)


# --------------------------------------------------------------------------- GPU pools

# How the GPUs of one node are shared out in the witness, with the weight of each pattern.
_GPU8_PATTERNS = (((8,), 35), ((4, 4), 25), ((4, 2, 1, 1), 15), ((2, 2, 2, 2), 10), ((2, 2, 1, 1, 1, 1), 15))
_GPU4_PATTERNS = (((4,), 40), ((2, 2), 20), ((2, 1, 1), 20), ((1, 1, 1, 1), 20))
_CPU_PATTERNS = (((4, 2, 2), 1), ((4, 2), 1), ((2, 2, 2), 1), ((2, 2), 1), ((4,), 1))


def _deal(f: Factory, patterns: tuple, count: int) -> list[tuple[int, ...]]:
    """``count`` patterns in proportion to their weights (largest remainders), shuffled."""
    total = sum(w for _, w in patterns)
    shares = [(count * w // total, -(count * w % total), i) for i, (_, w) in enumerate(patterns)]
    left = count - sum(s for s, _, _ in shares)
    dealt: list[tuple[int, ...]] = []
    for share, _, i in sorted(shares, key=lambda s: (s[1], s[2])):
        extra = 1 if left > 0 else 0
        left -= extra
        dealt += [patterns[i][0]] * (share + extra)
    f.rng.shuffle(dealt)
    return dealt


def _gpu_pools(f: Factory, n: int, ns: str, prefix: str) -> Part:
    gpu8 = max(1, round(0.2 * n))
    gpu4 = max(1, round(0.2 * n))
    cpu_count = max(1, n - gpu8 - gpu4)
    cpu_nodes = make_nodes(f, f"{prefix}-cpu", cpu_count, cpu="8", memory="32Gi", instance_type="bench.2xlarge")
    gpu_labels = {"nvidia.com/gpu.present": "true"}
    big = make_nodes(
        f, f"{prefix}-a100", gpu8, cpu="64", memory="512Gi", instance_type="p4d.24xlarge",
        labels={**gpu_labels, "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/gpu.count": "8"},
        taints=[GPU_TAINT], extended={GPU: "8"},
    )
    small = make_nodes(
        f, f"{prefix}-l4", gpu4, cpu="32", memory="256Gi", instance_type="g6.12xlarge",
        labels={**gpu_labels, "nvidia.com/gpu.product": "NVIDIA-L4", "nvidia.com/gpu.count": "4"},
        taints=[GPU_TAINT], extended={GPU: "4"},
    )
    # Witness slots: a pattern of pod sizes per GPU node (exactly its GPUs), and per CPU node.
    gpu_slots: dict[int, list[str]] = {1: [], 2: [], 4: [], 8: []}
    for nodes, patterns in ((big, _GPU8_PATTERNS), (small, _GPU4_PATTERNS)):
        for node, pattern in zip(nodes, _deal(f, patterns, len(nodes))):
            for size in pattern:
                gpu_slots[size].append(node)
    cpu_slots: dict[int, list[str]] = {2: [], 4: []}
    for node, pattern in zip(cpu_nodes, _deal(f, _CPU_PATTERNS, len(cpu_nodes))):
        for size in pattern:
            cpu_slots[size].append(node)

    def gpu_template(app: str, gpus: int, **kw: Any) -> PodTemplate:
        return PodTemplate(
            app,
            {"cpu": str(6 * gpus), "memory": f"{48 * gpus}Gi", GPU: str(gpus)},
            limits={GPU: str(gpus)},
            tolerations=(tolerate(GPU),),
            image="nvcr.io/nvidia/pytorch:24.08-py3",
            **kw,
        )

    gpu_templates = {
        1: (f.replicaset("inference", ns), gpu_template("inference", 1)),
        2: (f.job("finetune", ns), gpu_template("finetune", 2, restart_policy="Never")),
        4: (f.job("train-4", ns), gpu_template("train-4", 4, restart_policy="Never")),
        8: (f.job("train-8", ns), gpu_template("train-8", 8, restart_policy="Never", node_selector={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"})),
    }
    cpu_templates = {
        2: (f.replicaset("etl", ns), PodTemplate("etl", {"cpu": "2", "memory": "8Gi"})),
        4: (f.replicaset("api", ns), PodTemplate("api", {"cpu": "4", "memory": "16Gi"})),
    }
    # Arrival: every 1-GPU inference pod first, then CPU and other GPU pods interleaved.
    later = [("gpu", s) for s in (2, 4, 8) for _ in gpu_slots[s]] + [("cpu", s) for s in (2, 4) for _ in cpu_slots[s]]
    f.rng.shuffle(later)
    part = Part()
    taken = {("gpu", s): 0 for s in gpu_slots} | {("cpu", s): 0 for s in cpu_slots}
    for pool, size in [("gpu", 1)] * len(gpu_slots[1]) + later:
        owner, template = (gpu_templates if pool == "gpu" else cpu_templates)[size]
        pod = f.pod(owner, template, None)
        slots = (gpu_slots if pool == "gpu" else cpu_slots)[size]
        part.witness[pod_key(pod)] = slots[taken[(pool, size)]]
        taken[(pool, size)] += 1
    return part


def gpu_pools(scale: str = "quick", seed: int = 0) -> Workload:
    """A CPU pool (60% of the nodes, 8 CPU) and GPU nodes tainted
    ``nvidia.com/gpu=present:NoSchedule``: A100 nodes with 8 ``nvidia.com/gpu`` and L4 nodes with
    4. GPU pods tolerate the taint and ask for 1, 2, 4 or 8 GPUs (6 CPU and 48Gi per GPU;
    8-GPU pods select A100 nodes); CPU pods (2 or 4 CPU) do not tolerate it and stay in the CPU
    pool. Pod counts come from a per-node pattern that fills each GPU node's GPUs exactly.

    The 1-GPU inference pods arrive first. LeastAllocated scores CPU and memory, not GPUs, so
    greedy spreads them one or two per GPU node and the 4- and 8-GPU training pods find no node
    with enough free GPUs. A joint placement packs GPUs like the patterns and places every pod.
    """
    return single("gpu-pools", scale, seed, _gpu_pools, gpu_pools)


# The builders, for ``mixed``.
BUILDERS = {"fragmentation": _fragmentation, "gpu-pools": _gpu_pools}

"""Deterministic benchmark workloads: clusters and pending pods as Kubernetes API dicts.

Each workload is a function ``(scale, seed) -> Workload`` modelled on a kube-scheduler
``scheduler_perf`` test case or on what batch users run. The objects are plain dicts exactly as
``kubectl get -o json`` prints them, so the same workload can be parsed into a
``ClusterSnapshot`` (``to_snapshot``), written out as a file (``dump``) or preloaded into an API
server. A seed fixes every object; the same seed gives identical objects.

Scales: ``quick`` is a smoke run (every workload through two engines in about a minute on two
cores), ``medium`` is about 1,000 nodes, ``large`` about 5,000 nodes and 10,000+ pods.

Every benchmark workload carries a known placement (a *witness*, ``metadata["witness"]``, with
the evictions it needs). For all but ``gang`` it places every pending pod: "placed == pending"
is reachable, and a one-at-a-time scheduler falling short of it is measurably worse, not merely
different. For ``gang`` it is a good, not necessarily optimal, choice of gangs.
Each generator's docstring says where kube-scheduler's greedy ``scheduleOne`` loses and why a
joint placement does not.

This module names them; they live one family a module: ``rule_workloads`` (one rule each),
``gang_workloads``, ``packing_workloads`` (fragmentation, GPU pools), ``mixed_workload``,
``scale_workloads`` (the scale targets and the real-shaped cluster), ``contended_workload`` (a
busy real-shaped cluster with more demand than room) and ``repack_workload``, on
what ``workload_kit`` shares (``Workload``, node counts per scale, witness helpers) and the
object factory of ``objects``. A new workload is a module beside them and a line below.
"""

from __future__ import annotations

from typing import Callable, Optional

from .defaults import REAL_SHAPED_NAMES, SCALE_TARGET_NAMES, WORKLOAD_NAMES
from .contended_workload import contended
from .gang_workloads import gang, topology_gang
from .mixed_workload import mixed
from .packing_workloads import fragmentation, gpu_pools
from .repack_workload import repack as repack
from .rule_workloads import anti_affinity, basic, node_affinity, preemption, spread
from .scale_workloads import realistic, scale_3k as scale_3k, scale_10k as scale_10k
from .workload_kit import SCALES as SCALES, Workload as Workload

WORKLOADS: dict[str, Callable[..., Workload]] = {
    "basic": basic,
    "node-affinity": node_affinity,
    "anti-affinity": anti_affinity,
    "spread": spread,
    "preemption": preemption,
    "gang": gang,
    "topology-gang": topology_gang,
    "fragmentation": fragmentation,
    "gpu-pools": gpu_pools,
    "mixed": mixed,
}
SCALE_TARGETS: dict[str, Callable[..., Workload]] = {"scale-3k": scale_3k, "scale-10k": scale_10k}
# Real-shaped clusters, sized by --scale, outside the default suite (a medium one is 50,000 pods).
def _dra(scale: str = "quick", seed: int = 0) -> Workload:
    """GPUs as DRA devices in NVLink domains (``dra_workload.dra``)."""
    from .dra_workload import dra

    return dra(scale, seed)


REAL_SHAPED: dict[str, Callable[..., Workload]] = {"realistic": realistic, "dra": _dra, "contended": contended}
# The command line lists the names from defaults.py without loading this module.
assert tuple(WORKLOADS) == WORKLOAD_NAMES and tuple(SCALE_TARGETS) == SCALE_TARGET_NAMES, "update defaults.py"
assert tuple(REAL_SHAPED) == REAL_SHAPED_NAMES, "update defaults.py"


def generate(name: str, scale: str = "quick", seed: int = 0) -> Workload:
    """The named workload (one of ``WORKLOADS`` or ``SCALE_TARGETS``; targets ignore ``scale``)."""
    if name in WORKLOADS:
        return WORKLOADS[name](scale, seed)
    if name in SCALE_TARGETS:
        return SCALE_TARGETS[name](seed)
    if name in REAL_SHAPED:
        return REAL_SHAPED[name](scale, seed)
    known = ", ".join([*WORKLOADS, *SCALE_TARGETS, *REAL_SHAPED])
    raise ValueError(f"unknown workload {name!r}; expected one of {known}")


def suite(scale: str = "quick", seed: int = 0, names: Optional[list[str]] = None) -> list[Workload]:
    """Every benchmark workload (or ``names``) at ``scale``."""
    return [generate(name, scale, seed) for name in (names or list(WORKLOADS))]


def _main(argv: Optional[list[str]] = None) -> None:
    """``python -m adapters.bench.workloads NAME [--scale S] [--seed N] FILE``: write a workload as
    a kubectl-style List (JSON, or YAML for .yaml), e.g. a real-shaped dump for ``schedule``."""
    import argparse

    from .parse import as_list, dump

    parser = argparse.ArgumentParser(prog="python -m adapters.bench.workloads", description=_main.__doc__)
    parser.add_argument("name", choices=[*WORKLOADS, *SCALE_TARGETS, *REAL_SHAPED])
    parser.add_argument("file")
    parser.add_argument("--scale", choices=SCALES, default="quick")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--compact", action="store_true", help="JSON without indentation (as the API server sends it)")
    args = parser.parse_args(argv)
    workload = generate(args.name, args.scale, args.seed)
    if args.compact:
        import json

        with open(args.file, "w", encoding="utf-8") as fh:
            json.dump(as_list(workload.objects), fh, separators=(",", ":"))
    else:
        dump(workload, args.file)
    meta = workload.metadata
    print(f"{args.file}: {meta['nodes']} nodes, {meta['running']} running pods, {meta['pods']} pending pods")


if __name__ == "__main__":
    _main()

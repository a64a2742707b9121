"""Benchmark inputs: deterministic workload generators (Kubernetes API dicts), their parsing into
a ``ClusterSnapshot``, and bounds that show how far from the limit a placement is."""

from .bounds import PlaceableBound, max_placeable_bound, min_nodes_bound, placeable_bound
from .parse import as_list, dump, parse_objects, to_snapshot
from .workloads import (
    SCALE_TARGETS,
    SCALES,
    WORKLOADS,
    Workload,
    generate,
    repack,
    scale_3k,
    scale_10k,
    suite,
)

__all__ = [
    "PlaceableBound", "SCALES", "SCALE_TARGETS", "WORKLOADS", "Workload", "as_list", "dump",
    "generate", "max_placeable_bound", "min_nodes_bound", "parse_objects", "placeable_bound",
    "repack", "scale_10k", "scale_3k", "suite", "to_snapshot",
]

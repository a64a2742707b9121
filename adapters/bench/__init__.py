"""Benchmark inputs: deterministic workload generators (Kubernetes API dicts), their parsing into
a ``ClusterSnapshot``, and bounds that show how far from the limit a placement is.

The names below load on first use, so that ``cpsat-scheduler --help`` reads the workload names
(``defaults.py``) without loading the models, numpy and the generators."""

from __future__ import annotations

from typing import TYPE_CHECKING

from models.lazy import lazy_names

if TYPE_CHECKING:
    from .bounds import PlaceableBound, max_placeable_bound, min_nodes_bound, placeable_bound
    from .parse import as_list, dump, parse_objects, to_snapshot
    from .tier_bounds import TierBound, tier_bound
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

_WHERE = {
    **dict.fromkeys(("PlaceableBound", "max_placeable_bound", "min_nodes_bound", "placeable_bound"), "bounds"),
    **dict.fromkeys(("as_list", "dump", "parse_objects", "to_snapshot"), "parse"),
    **dict.fromkeys(("TierBound", "tier_bound"), "tier_bounds"),
    **dict.fromkeys(
        ("SCALE_TARGETS", "SCALES", "WORKLOADS", "Workload", "generate", "repack", "scale_3k", "scale_10k", "suite"),
        "workloads",
    ),
}

__all__ = [
    "PlaceableBound", "SCALES", "SCALE_TARGETS", "TierBound", "WORKLOADS", "Workload", "as_list", "dump",
    "generate", "max_placeable_bound", "min_nodes_bound", "parse_objects", "placeable_bound",
    "repack", "scale_10k", "scale_3k", "suite", "tier_bound", "to_snapshot",
]


__getattr__ = lazy_names(__name__, _WHERE)

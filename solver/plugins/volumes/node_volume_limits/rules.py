"""NodeVolumeLimits (CSI), pure: per driver, the unique volumes of the pods on a node plus the
pod's new ones may not exceed the node's CSINode ``spec.drivers[].allocatable.count``. A volume
is its claim (one claim, one volume); its driver is the bound volume's ``spec.csi.driver``, or an
unbound claim's class provisioner. A volume already on the node for another pod does not count
again; a driver without a count, or a node without a CSINode, has no limit. Failure is
Unschedulable (evicting pods that hold volumes may help).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from ....volume_catalog import VolumeCatalog

if TYPE_CHECKING:
    from ....state import ClusterState

NAME = "NodeVolumeLimits"
REASON = "node(s) exceed max volume count"


def by_driver(claim_keys: Iterable[str], catalog: VolumeCatalog) -> dict[str, set[str]]:
    """The claims whose volumes count against a driver's limit, per driver."""
    out: dict[str, set[str]] = {}
    for key in claim_keys:
        driver = catalog.driver(key)
        if driver is not None:
            out.setdefault(driver, set()).add(key)
    return out


def over(new: Mapping[str, set[str]], present: Mapping[str, set[str]], limits: Mapping[str, int]) -> list[str]:
    """The drivers whose limit ``present`` plus the ``new`` claims not yet present exceeds."""
    out = []
    for driver, claims in sorted(new.items()):
        limit = limits.get(driver)
        if limit is None:
            continue
        have = present.get(driver, set())
        if len(have | claims) > limit and claims - have:
            out.append(driver)
    return out


def counts(present: Mapping[str, set[str]]) -> Counter[str]:
    return Counter({d: len(c) for d, c in present.items()})


def node_claims(state: ClusterState, node: int) -> set[str]:
    """The claims the pods on ``node`` use."""
    return {c for p in state.pods_on[node].values() for c in p.claims}

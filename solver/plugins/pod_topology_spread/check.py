"""PodTopologySpread (DoNotSchedule) on a plan's final state (the validator's reading).

kube-scheduler checks a DoNotSchedule constraint only for the pod that carries it, at its
arrival; pods placed later, without the constraint, may pile onto its domain. So the rule is
read per group of placed pods sharing one constraint (namespace, selector with matchLabelKeys
merged, key, maxSkew, minDomains, eligible nodes) and per domain d they land in: the last of
them to arrive finds at least the matching pods running there (less victims) plus the k
matching pods of the group, and at most, as the minimum, the emptiest other eligible domain
with everything the plan could have put there first (0 below minDomains domains). If even that
skew exceeds maxSkew, no order of the plan passes the filter. A cluster already skewed is not
the plan's fault: pods that do not match their own selector (k = 0) are blamed only if the plan
also raised d's skew; pods that do add to d are blamed, as kube-scheduler would refuse the last
of them. Repairs — filling the low domains — always pass.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ...framework import names
from ...info import PodInfo
from ...state import ClusterState, PodMatcher
from .filter import domain_counts, eligible_nodes, floor_is_zero, inclusion_masks, skew_floor

if TYPE_CHECKING:
    from ...terms import SpreadConstraint
    from ...plugin_api import ReplayView as Replay


def check(replay: Replay) -> None:
    """DoNotSchedule constraints, per group of placed pods sharing one and per domain they land
    in (see the module docstring): the last of them to arrive must be able to find the
    domain within maxSkew of the emptiest other eligible domain."""
    groups: dict[tuple, _SpreadGroup] = {}
    for pod, index in replay.placed():
        hard = pod.hard_spread
        if not hard:
            continue
        node = replay.nodes[index]
        affinity_mask, tolerated_mask = inclusion_masks(replay.static, pod)
        # The same constraint written twice is one rule: the pod counts once in its group.
        for c in dict.fromkeys(hard):
            d = int(replay.final.domains(c.topology_key)[0][index])
            if d < 0:
                replay.report(
                    f"spread: {pod.key} on node {node.name}: the node has no {c.topology_key} label "
                    "(DoNotSchedule topology spread constraint)"
                )
                continue
            eligible = eligible_nodes(
                pod, hard, replay.final, affinity_mask, tolerated_mask, policy=c
            )
            key = (pod.namespace, c.selector, c.topology_key, c.max_skew, c.min_domains, eligible.tobytes())
            group = groups.get(key)
            if group is None:
                group = groups[key] = _SpreadGroup(c, pod.namespace, eligible)
            # Counted as the filter counts: an empty selector counts nobody, itself included.
            group.by_domain[d].append((pod, not c.selector.is_empty and c.selector.matches(pod.labels)))
    for group in groups.values():
        _check_group(replay, group)


def _check_group(replay: Replay, group: _SpreadGroup) -> None:
    c = group.constraint
    values = replay.final.domains(c.topology_key)[1]
    matcher = PodMatcher.of_spread(c.selector, group.namespace)

    def per_domain(state: ClusterState) -> tuple[np.ndarray, np.ndarray]:
        return domain_counts(state, matcher, c.topology_key, group.eligible)

    (before, present), (base, _), (final, _) = (per_domain(s) for s in (replay.before, replay.base, replay.final))
    most = final + (before - base)  # the final state with the victims still there
    few = floor_is_zero(int(present.sum()), c.min_domains)

    def skew(counts: np.ndarray, d: int) -> int:
        return int(counts[d]) - skew_floor(counts, present, c.min_domains)

    for d, members in sorted(group.by_domain.items()):
        matching = sum(1 for _, m in members if m)
        if few:
            least, least_text = 0, f"a minimum of 0 (fewer than minDomains={c.min_domains} eligible domains)"
        else:
            others = present.copy()
            others[d] = False
            if not others.any():
                continue  # the only domain is the minimum itself
            least = int(most[others].min())
            least_text = f"{least} matching pod(s) in the emptiest other eligible domain"
        seen = int(base[d]) + matching
        if seen - least <= c.max_skew:
            continue
        if not matching and skew(final, d) <= skew(before, d):
            continue  # already this skewed before the plan, and these pods add nothing to it
        placed = names(p.key for p, _ in members)
        replay.report(
            f"spread: {c.topology_key}={values[d]} exceeds maxSkew {c.max_skew} after placing {placed}: "
            f"{int(base[d])} matching pod(s) were there and {matching} of these match, so the last to arrive "
            f"makes skew {seen - least} against {least_text}"
        )


@dataclass
class _SpreadGroup:
    """Placed pods sharing one DoNotSchedule constraint (same namespace, selector, key, maxSkew,
    minDomains and eligible nodes), by the domain id each landed in, with its self-match."""

    constraint: SpreadConstraint
    namespace: str
    eligible: np.ndarray
    by_domain: dict[int, list[tuple[PodInfo, bool]]] = field(default_factory=lambda: defaultdict(list))

"""Which pod of a class takes which of the model's places, for DoNotSchedule spread.

The model counts a class's pods per node and reads the constraint on the final state; the plan
names pods, and kube-scheduler's preemption (the replay that judges every plan with evictions)
takes them in queue order, each filtered on the counts placed before it. Handed node by node,
a class spread over three zones fills the first zone before the others, and its second pod there
already breaks ``maxSkew: 1`` at its turn: kube-scheduler leaves it pending, preempts nothing for
it, and the plan's evictions there are refused (the contended 1,000-node cluster, seed 5: every
pod of a 344-pod zone-spread deployment that a round moved failed its turn this way).

Here each pod, in queue order, takes the place whose domains keep the lowest skew at its turn,
counting the cluster's matching pods and the decision's pods placed outside the model (an LNS
round's remainder) that come before it in the queue.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from ...info import PodInfo, queue_order_key
from ...state import PodMatcher
from .filter import inclusion_masks, prefilter, skew_floor


def applies(rep: PodInfo) -> bool:
    """Whether the class's places are handed out here: it has DoNotSchedule constraints."""
    return bool(rep.hard_spread)


def order(ctx, static, pods: Sequence[PodInfo], slots: Sequence[tuple[int, int]]) -> list[int]:
    """The node of each of the first pods of ``pods`` (queue order), one per place of ``slots``
    ((node, pods there)): each takes a place whose domains keep its turn furthest within every
    constraint's ``maxSkew`` (the least of skew minus ``maxSkew`` over the constraints: raw skews
    would let one constraint's allowed 2 hide another's forbidden 2), the lowest node on ties."""
    total = sum(k for _, k in slots)
    rep = pods[0]
    pre = prefilter(rep, ctx.state, *inclusion_masks(static, rep))
    if total < 2 or not pre or all(len({cc.domain_ids[n] for n, _ in slots}) < 2 for cc in pre):
        return [n for n, k in slots for _ in range(k)]  # one domain: the order changes nothing
    counts = [cc.domain_counts.copy() for cc in pre]
    # The decision's pods outside the model are in the state from the start; at a pod's turn
    # only those before it in the queue are placed.
    later: list[tuple[tuple, int, int]] = []
    for i, cc in enumerate(pre):
        matcher = PodMatcher.of_spread(cc.constraint.selector, rep.namespace)
        for q, node in _settled_matching(ctx, matcher):
            if cc.counted[node]:
                dom = int(cc.domain_ids[node])
                counts[i][dom] -= 1
                later.append((queue_order_key(q), i, dom))
    later.sort()
    # Places alike in every constraint's domain are one choice: a pod's turn weighs the kinds of
    # place, not every node (a zone-spread class over hundreds of nodes has three).
    kinds: dict[tuple[int, ...], list[list[int]]] = defaultdict(list)
    for n, k in sorted(slots):
        kinds[tuple(int(cc.domain_ids[n]) for cc in pre)].append([n, k])
    out: list[int] = []
    upto = 0
    for pod in pods[:total]:
        key = queue_order_key(pod)
        while upto < len(later) and later[upto][0] < key:
            _, i, dom = later[upto]
            counts[i][dom] += 1
            upto += 1
        floors = [skew_floor(c, cc.eligible_domains, cc.constraint.min_domains) for c, cc in zip(counts, pre)]
        kind = min((d for d, places in kinds.items() if places),
                   key=lambda d: (_over(counts, pre, floors, d), kinds[d][0][0]))
        place = kinds[kind][0]
        out.append(place[0])
        place[1] -= 1
        if not place[1]:
            kinds[kind].pop(0)
        for c, cc, dom in zip(counts, pre, kind):
            if dom >= 0 and cc.counted[place[0]]:
                c[dom] += cc.self_match
    return out


def _over(counts: list[np.ndarray], pre, floors: list[int], domains: tuple[int, ...]) -> int:
    """How far past its ``maxSkew`` the worst constraint would be with one more pod in
    ``domains`` (one per constraint; -1: the node lacks the key, never chosen first)."""
    worst = -(1 << 30)
    for c, cc, floor, dom in zip(counts, pre, floors, domains):
        if dom < 0:
            return 1 << 30
        worst = max(worst, int(c[dom]) + cc.self_match - floor - cc.constraint.max_skew)
    return worst


def _settled_matching(ctx, matcher: PodMatcher) -> list[tuple[PodInfo, int]]:
    """The decision's pods placed outside the model that ``matcher`` counts, with their nodes;
    the pods grouped by namespace, labels and whether terminating (all a spread matcher reads)
    once per context (a round's remainder is most of a
    10,000-pod window, asked about by every spread class the round frees)."""
    if not ctx.settled:
        return []
    groups = ctx.__dict__.get("_spread_settled_groups")
    if groups is None:
        by: dict[tuple, list[tuple[PodInfo, int]]] = defaultdict(list)
        for q, node in ctx.settled:
            by[(q.namespace, q.terminating, tuple(sorted(q.labels.items())))].append((q, node))
        groups = ctx.__dict__["_spread_settled_groups"] = list(by.values())
    return [entry for group in groups if matcher.matches(group[0][0]) for entry in group]

"""PodDisruptionBudgets: how many more pods each budget lets go, and who it covers.

Allowed disruptions come from ``status.disruptionsAllowed`` when the disruption controller has
written it; otherwise they are computed as it would: healthy matching pods minus the desired
healthy count from ``minAvailable`` / ``maxUnavailable`` (percentages of the matching pods,
rounded up). Preemption, the model's eviction costs, the choice between plans, re-packing and
the validator all read budgets through this module: a basic under the plugins (it was
DefaultPreemption's), since every engine that evicts counts them — no rule of its own.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Optional

from models.objects import Pod, PodDisruptionBudget

from .info import PodInfo
from .terms import Selector


def _scaled(value: int | str, total: int) -> int:
    if isinstance(value, int):
        return value
    return math.ceil(int(value[:-1]) * total / 100)


def covers(pdb: PodDisruptionBudget, pod: Pod) -> bool:
    """Same namespace and the selector matches (an empty selector covers every pod there)."""
    if pdb.metadata.namespace != pod.metadata.namespace or pdb.spec.selector is None:
        return False
    return pdb.spec.selector.matches(pod.metadata.labels)


def pdbs_covering(pod: Pod, pdbs: Iterable[PodDisruptionBudget]) -> list[PodDisruptionBudget]:
    return [b for b in pdbs if covers(b, pod)]


def eviction_budgets(pod: Pod, pdbs: Iterable[PodDisruptionBudget]) -> list[PodDisruptionBudget]:
    """The budgets the Eviction API weighs for ``pod``: those covering it; none for a pod already
    terminating (deleted without a look), nor for a running pod that is not Ready whose one
    budget lets such a pod go (``spares_unready``). Two or more: the API refuses to evict it,
    Ready or not."""
    if pod.is_terminating:
        return []
    mine = pdbs_covering(pod, pdbs)
    if len(mine) == 1 and unready_running(pod) and spares_unready(mine[0]):
        return []
    return mine


def unready_running(pod: Pod) -> bool:
    """Running and not Ready (``Pod.is_ready``): the pods whose eviction a budget may let go
    unspent. A bound pod still Pending skips every budget at the API, but the planner charges
    it on purpose: it may be Running by the time it is evicted."""
    return pod.status.phase == "Running" and not pod.is_ready


def spares_unready(pdb: PodDisruptionBudget) -> bool:
    """The Eviction API evicts a running pod that is not Ready, covered by ``pdb`` alone, without
    checking or spending ``pdb``: under ``unhealthyPodEvictionPolicy: AlwaysAllow``, or under
    IfHealthyBudget (the default) while its status counts at least as many healthy pods as it
    desires, and desires some. ``observedGeneration`` plays no part (the API checks it only
    when it spends the budget); a status not written yet reads as zeros, as the API reads it.

    The status is the snapshot's for the whole plan: the plan spends at most
    ``disruptionsAllowed`` (``currentHealthy - desiredHealthy`` as the controller writes it) of
    the budget's Ready pods, so a budget healthy enough stays so once the controller counts
    them gone, whatever order the evictions come in; a not-Ready pod never counts as healthy."""
    if pdb.spec.unhealthy_pod_eviction_policy == "AlwaysAllow":
        return True
    desired = pdb.status.desired_healthy or 0
    return desired > 0 and (pdb.status.current_healthy or 0) >= desired


def _healthy(pod: Pod) -> bool:
    return bool(pod.spec.node_name) and not pod.is_terminal and not pod.is_terminating and pod.status.phase in ("Running", "")


def disruptions_allowed(pdb: PodDisruptionBudget, pods: Iterable[Pod]) -> int:
    """How many covered pods may be disrupted now."""
    return allowances([pdb], pods)[0]


def allowances(pdbs: Sequence[PodDisruptionBudget], pods: Iterable[Pod]) -> list[int]:
    """``disruptions_allowed`` of each of ``pdbs``. A budget's status says it when the
    controller wrote it (as in any dump of a live cluster); otherwise it is worked out from the
    pods it covers, counted per namespace and labels: the replicas of a workload share both, so
    each budget matches its selector once per group instead of once per pod (300 budgets
    without a status over the 40,000 pods of the contended 1,000-node dump took 37 s pod by
    pod)."""
    written = [b.status.disruptions_allowed for b in pdbs]
    groups = _pod_groups(pods) if None in written else {}
    out = []
    for pdb, allowed in zip(pdbs, written):
        if allowed is not None:
            out.append(max(0, allowed))
            continue
        namespace, selector = pdb.metadata.namespace, pdb.spec.selector
        expected = healthy = 0
        if selector is not None:
            for (ns, _), (labels, count, well) in groups.items():
                if ns == namespace and selector.matches(labels):
                    expected += count
                    healthy += well
        out.append(_allowed(pdb, expected, healthy))
    return out


def _pod_groups(pods: Iterable[Pod]) -> dict[tuple, list]:
    """The pods that are not terminal, per (namespace, labels): [labels, how many, how many healthy]."""
    groups: dict[tuple, list] = {}
    for p in pods:
        if p.is_terminal:
            continue
        meta = p.metadata
        key = (meta.namespace, tuple(meta.labels.items()))
        group = groups.get(key)
        if group is None:
            group = groups[key] = [meta.labels, 0, 0]
        group[1] += 1
        group[2] += _healthy(p)
    return groups


def _allowed(pdb: PodDisruptionBudget, expected: int, healthy: int) -> int:
    """The allowance of ``pdb`` covering ``expected`` pods (not terminal), ``healthy`` of them running."""
    if pdb.spec.max_unavailable is not None:
        desired = expected - _scaled(pdb.spec.max_unavailable, expected)
    elif pdb.spec.min_available is not None:
        desired = _scaled(pdb.spec.min_available, expected)
    else:
        desired = 0
    return max(0, healthy - max(0, desired))


# The key of the budget a reading for evictions adds (``PdbBudgets.of``): the pods two budgets
# or more cover, which the Eviction API never evicts ("This pod has more than one
# PodDisruptionBudget, which the eviction subresource does not support"): it allows none.
MANY_BUDGETS = "(pods more than one PodDisruptionBudget covers: the Eviction API refuses to evict them)"


@dataclass
class Budget:
    key: str
    namespace: str
    selector: Selector
    allowed: int
    disrupted: frozenset[str]  # pod names already counted by the controller (none for evictions)
    # An empty selector (``{}``) covers every pod of the namespace, as the Eviction API reads a
    # policy/v1 budget; off, it covers none, as kube-scheduler's preemption reads it.
    empty_covers_all: bool = False
    # Set on the ``MANY_BUDGETS`` budget only: the budgets of which it covers the pods two or
    # more select.
    siblings: tuple["Budget", ...] = ()
    # Read for evictions: a running pod that is not Ready and that this budget alone selects
    # goes without spending it (``spares_unready``).
    spares_unready: bool = False

    def selects(self, pod: PodInfo) -> bool:
        """Its namespace and selector take ``pod`` in (whatever ``disrupted`` says)."""
        if self.siblings:
            return sum(1 for b in self.siblings if b.selects(pod)) > 1
        return (
            pod.namespace == self.namespace
            and (self.empty_covers_all or not self.selector.is_empty)
            and self.selector.matches(pod.labels)
        )

    def covers(self, pod: PodInfo) -> bool:
        return self.selects(pod) and pod.pod.metadata.name not in self.disrupted


class PdbBudgets:
    """Every budget of a snapshot with its allowance, for splitting and costing victims."""

    def __init__(self, budgets: list[Budget], *, evictions: bool = False) -> None:
        self.budgets = budgets
        # Read as the Eviction API reads them (``of``); ``MANY_BUDGETS`` is then the last budget.
        self.evictions = evictions
        # ``covering``'s memo: the budgets whose namespace and selector take in a pod of these
        # (namespace, labels). Preemption and its replay ask of every victim so far at every turn
        # (``spent``): a 500-node window of hundreds of budgets and victims asked 77 million
        # selector matches of them, most of its greedy time.
        self._by_labels: dict[tuple, tuple[int, ...]] = {}
        self._names_counted = any(b.disrupted for b in budgets)
        self._unready_spared = evictions and any(b.spares_unready for b in budgets)
        self._spent_below: dict[Optional[int], list[int]] = {}

    @staticmethod
    def of(ctx, *, evictions: Optional[bool] = None) -> "PdbBudgets":
        """The budgets of ``ctx``'s snapshot, kept on ``ctx``. ``evictions``: read them as the
        Eviction API does, for plans carried out by evicting: an empty selector covers the whole
        namespace, a pod two budgets or more cover is never evicted (``MANY_BUDGETS``, which
        allows none), and a running pod that is not Ready goes unspent where its one budget lets
        it (``spares_unready``). By default they are so read under ``preemption.pdb: hard`` (the live
        scheduler's: it evicts through that API), and as kube-scheduler's preemption reads them
        otherwise (an empty selector covers nothing; kube-scheduler deletes its victims)."""
        if evictions is None:
            config = getattr(ctx, "config", None)
            evictions = config is not None and config.preemption.pdb == "hard"
        cached = getattr(ctx, "_pdb_budgets", None)
        if cached is not None and cached.evictions == evictions:
            return cached
        pdbs = ctx.snapshot.pdbs
        # ``status.disruptedPods`` spares a pod only in kube-scheduler's reading (it deletes its
        # victims). The Eviction API never reads that map: a running pod named there (a
        # StatefulSet pod recreated under its name within the controller's two minutes, or one
        # whose deletion failed after its eviction was counted) still takes one disruption, and
        # is refused (429) while the budget, which already counts it as gone, allows none.
        budgets = [
            Budget(pdb.key, pdb.metadata.namespace, Selector.of(pdb.spec.selector), allowed,
                   frozenset() if evictions else frozenset(pdb.status.disrupted_pods),
                   empty_covers_all=evictions, spares_unready=evictions and spares_unready(pdb))
            for pdb, allowed in zip(pdbs, allowances(pdbs, ctx.snapshot.pods))
        ]
        if evictions and len(budgets) > 1:
            budgets.append(Budget(MANY_BUDGETS, "", Selector.of(None), 0, frozenset(), siblings=tuple(budgets)))
        out = PdbBudgets(budgets, evictions=evictions)
        ctx._pdb_budgets = out
        return out

    @staticmethod
    def share(ctx, other) -> None:
        """Give ``other``, a context over ``ctx``'s snapshot and other pods (a neighbourhood
        round's), ``ctx``'s budgets and allowances with memos of its own, instead of working the
        allowances out again for it."""
        mine = PdbBudgets.of(ctx)
        other._pdb_budgets = PdbBudgets(mine.budgets, evictions=mine.evictions)

    def covering(self, pod: PodInfo) -> tuple[int, ...]:
        """The budgets covering ``pod`` (``Budget.covers``), by position: what its eviction
        spends. Read for evictions, as ``eviction_budgets`` reads them: a terminating pod has
        none (the Eviction API deletes it without looking at budgets), nor has a running pod
        that is not Ready whose one budget spares it."""
        if not self.budgets or (self.evictions and pod.terminating):
            return ()
        key = pod.match_key or (pod.namespace, tuple(sorted(pod.labels.items())))
        hit = self._by_labels.get(key)
        if hit is None:
            hit = self._by_labels[key] = tuple(i for i, b in enumerate(self.budgets) if b.selects(pod))
        # One budget only: a pod two select has ``MANY_BUDGETS`` too and stays refused.
        if self._unready_spared and len(hit) == 1 and self.budgets[hit[0]].spares_unready \
                and unready_running(pod.pod):
            return ()
        if self._names_counted:
            name = pod.pod.metadata.name
            return tuple(i for i in hit if name not in self.budgets[i].disrupted)
        return hit

    def spent(self, evicted: Iterable[PodInfo]) -> list[int]:
        """Per budget, how many of ``evicted`` (the window's victims so far) it covers."""
        out = [0] * len(self.budgets)
        if not out:
            return out
        for pod in evicted:
            for i in self.covering(pod):
                out[i] += 1
        return out

    def spent_below(self, top: Optional[int], pods: Iterable[PodInfo]) -> list[int]:
        """``spent`` of the ``pods`` of priority below ``top`` (none when ``top`` is None), kept
        per ``top``: the most a window whose highest preemptor has priority ``top`` can spend."""
        memo = self._spent_below
        if top not in memo:
            memo[top] = [0] * len(self.budgets) if top is None else self.spent(p for p in pods if p.priority < top)
        return memo[top]

    def violations(self, evicted: Iterable[PodInfo]) -> int:
        """Disruptions past the budgets' allowances, summed over budgets: what the model's
        ``pdb_violations`` level counts."""
        return sum(max(0, n - b.allowed) for n, b in zip(self.spent(evicted), self.budgets))

    def split(self, victims: list[PodInfo], spent: Optional[list[int]] = None) -> tuple[list[PodInfo], list[PodInfo]]:
        """(violating, non-violating) walking ``victims`` in order and spending allowances;
        ``spent`` (from ``spent``) is what earlier preemptions of the window already used."""
        left = [b.allowed - (spent[i] if spent else 0) for i, b in enumerate(self.budgets)]
        violating: list[PodInfo] = []
        safe: list[PodInfo] = []
        refused = len(self.budgets) - 1 if self.evictions and self.budgets and self.budgets[-1].siblings else None
        for pod in victims:
            hit = False
            covering = self.covering(pod)
            if refused is not None and refused in covering:
                # The Eviction API never evicts it: violating, and it spends no allowance of the
                # budgets that select it (a review found a later pod one of them covers refused).
                violating.append(pod)
                continue
            for i in covering:
                left[i] -= 1
                if left[i] < 0:
                    hit = True
            (violating if hit else safe).append(pod)
        return violating, safe

"""PodTopologySpread (DoNotSchedule) as CP-SAT: the window semantics of DESIGN.md lifted to
the final state, with the filter's own counting and skew floor (``filter.skew_floor``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from ortools.sat.python import cp_model

from ...info import PodInfo
from ...state import ClusterState, PodMatcher
from .filter import eligible_nodes, floor_is_zero, inclusion_masks

if TYPE_CHECKING:
    from ...plugin_api import EncodeModel as WindowModel


# Window semantics: a window pod may be in domain d only if, in the final state,
# count(d) − min over eligible domains ≤ maxSkew (min is 0 while fewer than minDomains domains
# are eligible). Counts include running pods and window pods on eligible nodes; the pod's own
# domain is counted less the evicted pods, the minimum with them (``_domain_counts``).


def prune(pod: PodInfo, state: ClusterState) -> np.ndarray:
    """Nodes lacking a hard constraint's topology key never pass (UnschedulableAndUnresolvable)."""
    ok = np.ones(len(state.nodes), dtype=bool)
    for c in pod.hard_spread:
        ok &= state.domains(c.topology_key)[0] >= 0
    return ok


def encode(wm: WindowModel) -> None:
    state, m = wm.state, wm.model
    counters: dict[tuple, tuple] = {}
    classes = [c for c in wm.classes if wm.by_class.get(c.id)]
    # The eviction candidates node by node (as the state lists its pods): what a count may lose.
    victims = sorted(wm.evict_pod.items(), key=lambda item: item[1][1])
    settled = _settled_domains(wm)
    for cls in classes:
        rep = cls.rep
        hard = rep.hard_spread
        if not hard:
            continue
        for k, c in enumerate(hard):
            eligible = eligible_nodes(
                rep, hard, state, *inclusion_masks(wm.static, rep), policy=c
            )
            key = (c.selector, rep.namespace, c.topology_key, c.min_domains, eligible.tobytes())
            if key not in counters:
                counters[key] = _domain_counts(wm, c, rep.namespace, eligible, classes, f"{cls.id}_{k}", victims)
            counts, low = counters[key]
            # Where pods of the plan with this constraint sit outside the model, the domain holds
            # the group already: its skew is bounded whatever the model places.
            for d in sorted(settled.pop((c, rep.namespace, eligible.tobytes()), ())):
                if d in counts:
                    m.add(counts[d] - low <= c.max_skew)
            for d, own in wm.class_vars_by_domain(cls.id, c.topology_key).items():
                if d not in counts:
                    continue  # not an eligible domain: pruned by the static filters already
                present = wm.new_presence(f"spread[{cls.id},{k},{d}]", own, cls.size)
                m.add(counts[d] - low <= c.max_skew).only_enforce_if(present)
    # Groups only pods outside the model carry (no model class shares their constraint): the
    # model's pods and victims still move the counts they read. A window pod the model has no
    # place for is left out, and the domain it held loses it: the plan's pod of the group in a
    # fuller domain could then end over maxSkew (a neighbourhood round did, on a contended
    # cluster searched from the small-first plan). Read as the validator reads it (``check``).
    # The window's pods once per (labels, terminating): most groups count none of them, asked
    # pod by pod of every group that took a tenth of a 1,000-node search.
    window_pods = list({(p.match_key, p.terminating): p for p in wm.ctx.window}.values()) if settled else []
    for key, domains in sorted(settled.items(), key=lambda kv: repr(kv[0])):
        _bound_settled(wm, key, domains, classes, victims, window_pods)


def _bound_settled(wm: WindowModel, key: tuple, domains: set[int], classes, victims, window_pods: list[PodInfo]) -> None:
    """For a group of the plan's pods outside the model (constraint, namespace, eligible nodes)
    and each domain d they sit in: the last of them to arrive finds the running matching pods
    there (less the model's victims) and the group's own pods, and every other eligible domain
    must hold, in the final state with the victims still running, at least that less maxSkew
    (``check``: the validator's reading; none at all while fewer than minDomains domains are
    eligible). Where nothing the model decides is counted, the incumbent's counts stand.
    ``window_pods``: a pod of each (labels, terminating) of the window."""
    state, m = wm.state, wm.model
    c, namespace, eligible_bytes = key
    matcher = PodMatcher.of_spread(c.selector, namespace)
    counted = [o for o in classes if matcher.matches(o.rep)]
    gone = [(k, pod, node) for k, (pod, node) in victims if state.matches(matcher, pod)]
    if not counted and not gone and not any(state.matches(matcher, p) for p in window_pods):
        return
    eligible = np.frombuffer(eligible_bytes, dtype=bool)
    ids, _ = state.domains(c.topology_key)
    running = state.match_counts(matcher)
    all_domains = sorted({int(d) for d in ids[eligible] if d >= 0})
    members = {id(o) for o in counted if c in o.rep.hard_spread and o.rep.namespace == namespace}
    # The state holds the plan's pods outside the model as if running: those of the plan that
    # match but are not of the group are not "running" in the validator's reading.
    not_members: dict[int, int] = {}
    for pod, node in wm.ctx.settled:
        d = int(ids[node])
        if d >= 0 and eligible[node] and matcher.matches(pod) and not (c in pod.hard_spread and pod.namespace == namespace):
            not_members[d] = not_members.get(d, 0) + 1
    kept: dict[int, cp_model.LinearExpr | int] = {}
    seen: dict[int, cp_model.LinearExpr | int] = {}
    for d in all_domains:
        in_d = eligible & (ids == d)
        base = int(running[in_d].sum())
        window = [(o, v) for o in counted for n, v in wm.by_class.get(o.id, []) if in_d[n]]
        kept[d] = base + cp_model.LinearExpr.sum([v for _, v in window]) if window else base
        evicted = [wm.evict[k] for k, _, node in gone if in_d[node]]
        own = [v for o, v in window if id(o) in members]
        seen[d] = (base - not_members.get(d, 0) + cp_model.LinearExpr.sum(own) - cp_model.LinearExpr.sum(evicted)
                   if own or evicted else base - not_members.get(d, 0))
    few = floor_is_zero(len(all_domains), c.min_domains)
    for d in sorted(domains):
        if d not in seen:
            continue
        if few:
            m.add(seen[d] <= c.max_skew)
            continue
        for other in all_domains:
            if other != d:
                m.add(kept[other] >= seen[d] - c.max_skew)


def _settled_domains(wm: WindowModel) -> dict[tuple, set[int]]:
    """Per hard constraint (itself, namespace, eligible nodes), the domains where the plan's pods
    placed outside this model (``ctx.settled``) carry it: the validator judges each domain a
    group of the plan's pods lands in, those included (``check``)."""
    state = wm.state
    out: dict[tuple, set[int]] = {}
    eligible_of: dict[tuple, np.ndarray] = {}
    for pod, node in wm.ctx.settled:
        hard = pod.hard_spread
        for c in hard:
            ids = state.domains(c.topology_key)[0]
            if ids[node] < 0:
                continue
            ekey = (pod.class_id, c)
            eligible = eligible_of.get(ekey)
            if eligible is None:
                eligible = eligible_of[ekey] = eligible_nodes(pod, hard, state, *inclusion_masks(wm.static, pod), policy=c)
            out.setdefault((c, pod.namespace, eligible.tobytes()), set()).add(int(ids[node]))
    return out


def _domain_counts(wm: WindowModel, c, namespace, eligible, classes, tag, victims):
    """count[d] (expression) for every eligible domain, and the min variable over them."""
    state, m = wm.state, wm.model
    matcher = PodMatcher.of_spread(c.selector, namespace)
    ids, _ = state.domains(c.topology_key)
    running = state.match_counts(matcher)
    counted = [o for o in classes if matcher.matches(o.rep)]
    evictable: dict[int, list] = {}
    # Only pods the model may evict change a count: the eviction candidates, not every match.
    for key, (pod, node) in victims:
        if eligible[node] and ids[node] >= 0 and state.matches(matcher, pod):
            evictable.setdefault(int(ids[node]), []).append(wm.evict[key])
    domains = sorted({int(d) for d in ids[eligible] if d >= 0})
    counts: dict[int, cp_model.IntVar | int] = {}
    kept: dict[int, cp_model.IntVar | int] = {}  # the same with the victims still running
    bound_hi = 0
    for d in domains:
        in_d = eligible & (ids == d)
        base = int(running[in_d].sum())
        window = [v for o in counted for n, v in wm.by_class.get(o.id, []) if in_d[n]]
        gone = evictable.get(d, [])
        hi = base + sum(wm.ub_of(o.id, n) for o in counted for n, _ in wm.by_class.get(o.id, []) if in_d[n])
        bound_hi = max(bound_hi, hi)
        if window:
            kept[d] = m.new_int_var(base, hi, f"kept[{tag},{d}]")
            m.add(kept[d] == base + cp_model.LinearExpr.sum(window))
        else:
            kept[d] = base
        if not gone:
            counts[d] = kept[d]
            continue
        var = m.new_int_var(base - len(gone), hi, f"count[{tag},{d}]")
        m.add(var == kept[d] - cp_model.LinearExpr.sum(gone))
        counts[d] = var
    if floor_is_zero(len(domains), c.min_domains):
        return counts, 0
    # The global minimum with the victims still running: a pod with the constraint may arrive
    # before the preemptions that remove them, and kube-scheduler never checks it again (the
    # validator's reading, check.py). The pod's own domain is counted without its victims.
    low = m.new_int_var(0, bound_hi, f"min[{tag}]")
    m.add_min_equality(low, [kept[d] for d in domains])
    return counts, low

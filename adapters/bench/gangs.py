"""Gang figures for the benchmark report: whole gangs placed, the topology domains each spans,
and racks left fragmented.

Read from an engine's final cluster (``EngineRun.final``), so both engines are measured the same
way, however they decided:

* ``placed`` / ``gangs``: gangs of the decided pods with a member bound at the end (a valid plan
  places a gang whole or not at all);
* ``spans``: per topology key any gang names (its required key, the keys of its
  ``cpsat-scheduler.io/preferred-topology`` annotation), the mean number of that key's domains a
  placed gang's members occupy;
* ``fragmented``: per required key, domains partly used (some pod runs there, some CPU is free)
  where no gang still waiting for that key fits: its members cannot all take a node there, one
  node's free room per member, as kube-scheduler's NodeResourcesFit would count them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any, Optional

from models import ClusterSnapshot, Pod, pod_group_key, pod_requests
from models.objects import preferred_topology_keys


def _short(key: str) -> str:
    """``topology.example.com/rack`` → ``rack``: the column heading a key gets."""
    return key.rsplit("/", 1)[-1]


def gang_figures(final: ClusterSnapshot, decided: Sequence[Pod]) -> Optional[dict[str, Any]]:
    """The figures above, or None when no decided pod belongs to a gang."""
    members: dict[str, list[str]] = defaultdict(list)
    for pod in decided:
        member_of = pod_group_key(pod)
        if member_of is not None:
            members[member_of].append(pod.key)
    if not members:
        return None
    groups = final.pod_group_by_key
    node_of = {p.key: p.spec.node_name for p in final.bound_pods()}
    labels = {n.metadata.name: n.metadata.labels for n in final.nodes}
    required: dict[str, Optional[str]] = {}
    keys: dict[str, list[str]] = {}
    for g in members:
        group = groups.get(g)
        req = group.spec.topology_key if group is not None else None
        preferred = list(preferred_topology_keys(group.metadata.annotations)) if group is not None else []
        required[g] = req
        keys[g] = ([req] if req else []) + [k for k in preferred if k != req]
    placed = {g for g, pods in members.items() if any(node_of.get(k) for k in pods)}
    spans: dict[str, list[int]] = defaultdict(list)
    for g in placed:
        nodes = {node_of[k] for k in members[g] if node_of.get(k)}
        for key in keys[g]:
            spans[key].append(len({labels[n].get(key) for n in nodes}))
    out: dict[str, Any] = {
        "gangs": len(members),
        "placed": len(placed),
        "placed_pods_in_gangs": sum(1 for g in placed for k in members[g] if node_of.get(k)),
        "spans": {_short(k): round(sum(v) / len(v), 3) for k, v in sorted(spans.items())},
        "fragmented": {},
    }
    pods = {p.key: p for p in decided}
    for key in sorted({k for k in required.values() if k}):
        waiting = [(pod_requests(pods[members[g][0]]), groups[g].spec.min_member)
                   for g in members if required[g] == key and g not in placed]
        out["fragmented"][_short(key)] = _fragmented(final, key, waiting)
    return out


def _fragmented(final: ClusterSnapshot, key: str, waiting: list[tuple[dict[str, int], int]]) -> dict[str, int]:
    """Domains of ``key`` partly used where no waiting gang (member requests, members needed) fits."""
    used: dict[str, dict[str, int]] = {n.metadata.name: defaultdict(int) for n in final.nodes}
    for pod in final.bound_pods():
        if pod.spec.node_name in used:
            for resource, amount in pod_requests(pod).items():
                used[pod.spec.node_name][resource] += amount
    domains: dict[str, list[str]] = defaultdict(list)
    for node in final.nodes:
        value = node.metadata.labels.get(key)
        if value is not None:
            domains[value].append(node.metadata.name)
    alloc = {n.metadata.name: n.allocatable for n in final.nodes}

    def slots(node: str, request: dict[str, int]) -> int:
        room = [(alloc[node].get(r, 0) - used[node][r]) // amount for r, amount in request.items() if amount > 0]
        return max(0, min(room)) if room else 0

    partly = fragmented = 0
    for nodes in domains.values():
        cpu_used = sum(used[n]["cpu"] for n in nodes)
        cpu_free = sum(alloc[n].get("cpu", 0) for n in nodes) - cpu_used
        if cpu_used == 0 or cpu_free <= 0:
            continue
        partly += 1
        if not any(sum(slots(n, request) for n in nodes) >= need for request, need in waiting):
            fragmented += 1
    return {"domains": len(domains), "partly_used": partly, "fragmented": fragmented}

"""A pod's effective resource request, computed exactly as kube-scheduler computes it.

``pod_requests`` is the one source of a pod's request: greedy's fit check, the CP-SAT capacity
coefficients, preemption and the validator all read it (SEMANTICS.md §1.2). ``pod_nonzero_requests``
is the scoring-only variant with 100m / 200Mi defaults for containers that state nothing (§1.3).
"""

from __future__ import annotations

from collections.abc import Iterable

from .objects import Container, Pod

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"

# Scoring-only defaults for containers that do not request cpu or memory (util/pod_resources.go).
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

_NATIVE = (CPU, MEMORY, EPHEMERAL_STORAGE)


def is_scalar_resource(name: str) -> bool:
    """Extended resources, hugepages, ``kubernetes.io/``-prefixed and attachable volumes."""
    if name.startswith("hugepages-") or name.startswith("attachable-volumes-"):
        return True
    if name.startswith("kubernetes.io/"):
        return True
    return "/" in name


def is_tracked_resource(name: str) -> bool:
    """Resources kube-scheduler accounts for; other un-prefixed names are ignored."""
    return name in _NATIVE or name == PODS or is_scalar_resource(name)


def _aggregate(
    containers: Iterable[Container],
    init_containers: Iterable[Container],
    request_of,
) -> dict[str, int]:
    """max(sum of regular + sidecars, each init container on top of the sidecars before it)."""
    total: dict[str, int] = {}
    for c in containers:
        for name, value in request_of(c).items():
            total[name] = total.get(name, 0) + value
    sidecars: dict[str, int] = {}
    peak: dict[str, int] = {}
    for c in init_containers:
        req = request_of(c)
        if c.restart_policy == "Always":
            for name, value in req.items():
                total[name] = total.get(name, 0) + value
                sidecars[name] = sidecars.get(name, 0) + value
            use = dict(sidecars)
        else:
            use = dict(sidecars)
            for name, value in req.items():
                use[name] = use.get(name, 0) + value
        for name, value in use.items():
            peak[name] = max(peak.get(name, 0), value)
    for name, value in peak.items():
        total[name] = max(total.get(name, 0), value)
    return total


def _tracked(requests: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in requests.items() if is_tracked_resource(k) and k != PODS}


def _apply_pod_level_and_overhead(pod: Pod, total: dict[str, int]) -> dict[str, int]:
    if pod.spec.resources is not None:
        for name, value in pod.spec.resources.requests.items():
            if name in (CPU, MEMORY) or name.startswith("hugepages-"):
                total[name] = value
    for name, value in pod.spec.overhead.items():
        if is_tracked_resource(name) and name != PODS:
            total[name] = total.get(name, 0) + value
    return {k: v for k, v in total.items() if v}


def pod_requests(pod: Pod) -> dict[str, int]:
    """Effective request per resource (zero entries dropped); ``pods`` is not included."""
    total = _aggregate(
        pod.spec.containers,
        pod.spec.init_containers,
        lambda c: _tracked(c.resources.requests),
    )
    return _apply_pod_level_and_overhead(pod, total)


def pod_nonzero_requests(pod: Pod, *, pod_level: bool = True) -> tuple[int, int]:
    """(milli-CPU, memory bytes) for scoring, with defaults for containers that omit a key.

    ``pod_level=False`` leaves pod-level resources out: what kube-scheduler's NodeResourcesFit
    score adds for the incoming pod (its scorer is built without the PodLevelResources feature,
    1.34–1.36), while a node's non-zero sum counts its pods' pod-level requests."""

    def nonzero(c: Container) -> dict[str, int]:
        req = c.resources.requests
        return {
            CPU: req[CPU] if CPU in req else DEFAULT_MILLI_CPU_REQUEST,
            MEMORY: req[MEMORY] if MEMORY in req else DEFAULT_MEMORY_REQUEST,
        }

    total = _aggregate(pod.spec.containers, pod.spec.init_containers, nonzero)
    levels = pod.spec.resources.requests if pod.spec.resources is not None and pod_level else {}
    for name in (CPU, MEMORY):
        if name in levels:
            total[name] = levels[name]
    for name in (CPU, MEMORY):
        total[name] = total.get(name, 0) + pod.spec.overhead.get(name, 0)
    return total[CPU], total[MEMORY]


def pod_host_ports(pod: Pod, *, include_sidecars: bool = True) -> tuple[tuple[str, str, int], ...]:
    """Wanted host ports as normalised ``(hostIP, protocol, port)``; hostPort 0 is not a host port.

    Restartable init containers count from v1.34 on (``include_sidecars``).
    """
    containers = list(pod.spec.containers)
    if include_sidecars:
        containers += [c for c in pod.spec.init_containers if c.restart_policy == "Always"]
    ports = []
    for c in containers:
        for p in c.ports:
            if p.host_port > 0:
                ports.append((p.host_ip or "0.0.0.0", p.protocol or "TCP", p.host_port))
    return tuple(ports)

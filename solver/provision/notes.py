"""Notes for people when a pod fits no shape because of what a shape file's entry left out.

kube-scheduler's reason for such a pod ("Insufficient ephemeral-storage", "didn't match Pod's
node affinity/selector", "missing required label") names the rule, not that the file never gave
the field. So one line per field (and what the shapes got instead: ``defaults.Filled``; for a
resource omitted without a default, nothing) naming the entries and how many of the pods that
fit no shape fail on it there: a resource they request beyond what the shape got; a well-known
label, or the zone of an entry without ``zones:``, that their nodeSelector or required node
affinity asks another value of, or that their hard spread or required pod affinity takes as its
topology key. Entries whose own values refuse a pod get no note: the file said so.
"""

from __future__ import annotations

from typing import Iterable

from models.objects import Pod
from models.resources import pod_requests

from .defaults import Filled
from .shapes import Shape


def omission_notes(shapes: Iterable[Shape], pods: Iterable[Pod]) -> list[str]:
    """One line per field a file's ``shapes`` left out and some of ``pods`` (those that fit no
    shape) fail on, naming the entries where the same pods do."""
    failing: dict[tuple[str, Filled], set[str]] = {}  # (entry, field) -> pods
    pods = list(pods)
    for shape in shapes:
        if not shape.entry:
            continue  # a shape of the cluster's nodes: what it lacks, they lack
        for pod in pods:
            for field in _missing(shape, pod):
                failing.setdefault((shape.entry, field), set()).add(pod.key)
    entries: dict[tuple[Filled, frozenset[str]], list[str]] = {}
    for (entry, field), keys in failing.items():
        entries.setdefault((field, frozenset(keys)), []).append(entry)
    return sorted(_line(sorted(set(names)), field, len(keys)) for (field, keys), names in entries.items())


def _missing(shape: Shape, pod: Pod) -> list[Filled]:
    """The fields ``shape``'s entry left out that ``pod`` fails on there."""
    filled = {(f.kind, f.name): f for f in shape.filled}
    out = []
    for resource, wanted in sorted(pod_requests(pod).items()):
        if wanted > shape.allocatable.get(resource, 0):
            if ("resource", resource) in filled:
                out.append(filled["resource", resource])
            elif resource not in shape.allocatable:
                out.append(Filled("resource", resource, None, ""))
    for (kind, key), f in sorted(filled.items()):
        if kind == "label" and (_refused_on(pod, key, shape) or (f.value is None and key in _topology_keys(pod))):
            out.append(f)
    return out


def _refused_on(pod: Pod, key: str, shape: Shape) -> bool:
    """A node of ``shape`` fails the pod's nodeSelector on ``key``, or its required node
    affinity, whose terms (ORed) all fail there, one of them on a requirement on ``key``."""
    labels = shape.node.metadata.labels
    if key in pod.spec.node_selector and pod.spec.node_selector[key] != labels.get(key):
        return True
    affinity = pod.spec.affinity.node_affinity if pod.spec.affinity else None
    required = affinity.required_during_scheduling_ignored_during_execution if affinity else None
    if required is None or required.matches(shape.name, labels):
        return False
    return any(not r.matches(labels) for t in required.node_selector_terms
               for r in t.match_expressions if r.key == key)


def _topology_keys(pod: Pod) -> set[str]:
    """Labels a node must carry for the pod: its hard spread's and its required pod affinity's
    topology keys (a node without one fails them)."""
    keys = {c.topology_key for c in pod.spec.topology_spread_constraints if c.when_unsatisfiable == "DoNotSchedule"}
    affinity = pod.spec.affinity.pod_affinity if pod.spec.affinity else None
    if affinity is not None:
        keys |= {t.topology_key for t in affinity.required_during_scheduling_ignored_during_execution}
    return keys


def _line(entries: list[str], field: Filled, count: int) -> str:
    shapes = f"shape {entries[0]}" if len(entries) == 1 else "shapes " + ", ".join(entries)
    if field.kind == "label":
        return (f"{shapes} {'has' if len(entries) == 1 else 'have'} no label {field.name} in the file "
                f"({field.how}): {count} pending pod(s) that need it fit no shape")
    how = f" ({field.how})" if field.how else ""
    wanting = "more than that" if field.value is not None else "it"
    return (f"{shapes} {'lists' if len(entries) == 1 else 'list'} no {field.name} in allocatable{how}: "
            f"{count} pending pod(s) that request {wanting} fit no shape")

"""What a shape file's entry leaves out that every real node has, filled in from the kubelet's
defaults and the cluster's own nodes.

A file names what sets a kind of node apart (cpu, memory, instance type); a kubelet adds the rest
to every node it runs: the ``kubernetes.io/os`` and ``kubernetes.io/arch`` labels (and their
``beta.`` forms on older clusters), ``pods`` (its maxPods, 110 unless configured) and
``ephemeral-storage`` (its root disk). Without them a pod selecting ``linux``, or asking for
disk, fits no shape although a node of it would hold the pod. So, unless the entry gives them:

* each of those labels takes the value every node of the cluster has (left unset when they
  disagree, when one lacks it, or when there are no nodes: a guess would place pods a new node
  may refuse);
* ``pods`` is 110;
* ``ephemeral-storage`` is the least any node of the cluster has (the conservative guess: new
  nodes boot from the cluster's images; left out when no node reports it).

Each filled field is kept on the shape (``Filled``), with the zone label of an entry without
``zones:``, so that ``notes`` can name it when it is why a pod fits no shape. Shapes taken from the cluster's nodes carry their nodes' own and get none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional

from models.objects import Node
from models.quantity import format_quantity
from models.resources import EPHEMERAL_STORAGE, PODS

WELL_KNOWN_LABELS = ("kubernetes.io/os", "kubernetes.io/arch", "beta.kubernetes.io/os", "beta.kubernetes.io/arch")
TWIN_LABELS = (("kubernetes.io/os", "beta.kubernetes.io/os"), ("kubernetes.io/arch", "beta.kubernetes.io/arch"))
DEFAULT_PODS = 110  # the kubelet's default maxPods
ZONE = "topology.kubernetes.io/zone"


@dataclass(frozen=True)
class Filled:
    """A field a file's entry left out, and what the shape got instead (``value`` None: nothing)."""

    kind: str  # "label" or "resource"
    name: str  # the label's key or the resource's name
    value: Optional[str]  # the label's value or the quantity, as a file would write it
    how: str  # for people: "taken as linux, the value every node of the cluster has"


# An entry without ``zones:`` (nor the label) has no zone: kept for the notes, as pods spreading
# over zones fit none of its nodes.
NO_ZONE = Filled("label", ZONE, None, "left unset, as the entry has no zones:")


def cluster_defaults(nodes: Iterable[Node]) -> list[Filled]:
    """What a file's entry gets for each field it leaves out, read once off the cluster's nodes."""
    nodes = list(nodes)
    out = [_label(key, nodes) for key in WELL_KNOWN_LABELS]
    out.append(Filled("resource", PODS, str(DEFAULT_PODS), f"taken as {DEFAULT_PODS}, the kubelet's default maxPods"))
    out.append(_least(EPHEMERAL_STORAGE, nodes))
    return out


def _label(key: str, nodes: list[Node]) -> Filled:
    values = {n.metadata.labels.get(key) for n in nodes}
    if len(values) == 1 and None not in values:
        [value] = values
        return Filled("label", key, value, f"taken as {value}, the value every node of the cluster has")
    if not nodes:
        why = "the cluster has no nodes"
    elif values == {None}:
        why = "no node of the cluster has it"
    else:
        why = "the cluster's nodes disagree: " + ", ".join(sorted(v or "none" for v in values))
    return Filled("label", key, None, f"left unset, as {why}")


def _least(resource: str, nodes: list[Node]) -> Filled:
    reported = [n.allocatable[resource] for n in nodes if n.allocatable.get(resource)]
    if not reported:
        return Filled("resource", resource, None, "left out, as no node of the cluster reports it")
    least = min(reported)
    return Filled("resource", resource, str(least),
                  f"taken as {format_quantity(resource, least)}, the least any node of the cluster has")


def filled_in(labels: dict, allocatable: dict, defaults: list[Filled]) -> tuple[dict, dict, tuple[Filled, ...]]:
    """An entry's labels and allocatable with the defaults for what it leaves out (its own values
    win), and the defaults it took (those left unset included, for the notes)."""
    labels, allocatable = dict(labels), dict(allocatable)
    taken = []
    # A kubelet sets both forms of os and arch from one value: an entry giving one gives the other
    # (an arm64 entry in an amd64 cluster is no amd64 node by the beta label).
    for stable, beta in TWIN_LABELS:
        for key, twin in ((stable, beta), (beta, stable)):
            if key in labels and twin not in labels:
                labels[twin] = labels[key]
                taken.append(Filled("label", twin, str(labels[key]), f"taken as {labels[key]}, the entry's {key}"))
    for d in defaults:
        given = labels if d.kind == "label" else allocatable
        if d.name in given:
            continue
        taken.append(d)
        if d.value is not None:
            given[d.name] = d.value
    return labels, allocatable, tuple(taken)

"""The plan as an operator carries it out: what to do, in order, and what each step waits for.

A move is an eviction; the pod's controller makes a replacement and *kube-scheduler* places it,
not this plan. Two things make the replacement land where the plan says:

1. the nodes to free are cordoned first, so no replacement (and no new pod) lands on them;
2. each eviction waits until the previous replacement runs, so the room each step counts on is
   there when the next replacement is placed.

A replacement can still land on another node that has room (kube-scheduler scores, it does not
read plans): the step names the node it should run on, and the runbook says to stop and plan
again if it does not. A pod whose controller re-creates it under the same name (a StatefulSet)
is waited for by name; other replacements by their controller.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from models.snapshot import ClusterSnapshot

from .movable import controller_kind
from .order import Step


@dataclass(frozen=True)
class Action:
    """One thing to do. ``kind``: ``cordon`` (``node``), ``evict`` (``pod`` from ``source``,
    replacement expected on ``target``), or ``remove`` (``node``, empty of workload pods)."""

    kind: str
    node: str = ""
    pod: str = ""
    source: str = ""
    target: str = ""
    step: Optional[int] = None
    waits_for: str = ""
    buffer: bool = False


def runbook(snapshot: ClusterSnapshot, steps: list[Step], names: list[str], freed: list[str]) -> list[Action]:
    actions = [Action("cordon", node=name, waits_for="nothing: new pods stop landing on it at once") for name in freed]
    for s in steps:
        actions.append(Action(
            "evict", pod=s.pod, source=names[s.source], target=names[s.target], step=s.number, buffer=s.buffer,
            waits_for=_replacement(snapshot, s.pod, names[s.target]),
        ))
    actions += [Action("remove", node=name, waits_for="every step above done: the node runs no workload pod")
                for name in freed]
    return actions


def _replacement(snapshot: ClusterSnapshot, key: str, target: str) -> str:
    pod = snapshot.pod_by_key.get(key)
    kind = controller_kind(pod) if pod is not None else None
    if kind == "StatefulSet":
        what = f"{key} (re-created under its name)"
    elif kind is not None and pod is not None:
        owner = next(r.name for r in pod.metadata.owner_references if r.controller)
        what = f"a new pod of {kind} {pod.metadata.namespace}/{owner}"
    else:  # no controller re-creates it (moved only with repack.moveBarePods)
        return (f"{key} re-created by you (it has no controller: save its manifest before evicting, then "
                f"apply it with spec.nodeName: {target}) and Running on {target}")
    if pod is not None and pod.status.phase == "Running" and not pod.is_ready:
        # It was not Ready (it may go without spending its budget): its replacement may well not
        # be either, and waiting for it would stop the plan at this step.
        return (f"{what} Running on {target} (Ready not awaited: {key} was not Ready); "
                "if it lands elsewhere, stop and run repack again")
    return f"{what} Running and Ready on {target}; if it lands elsewhere, stop and run repack again"

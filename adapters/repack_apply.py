"""``repack --apply``: carry a re-packing runbook out against a cluster, one step at a time.

Each action of the runbook (``solver.repack.runbook``) is done and then waited for: a cordon;
an eviction through the Eviction API, then the replacement pod its controller makes, until it
runs and is Ready — on the node the plan names. The first surprise stops the run, with what was
done and why it stopped: a pod no longer where the plan found it, an eviction a
PodDisruptionBudget refuses, a replacement that lands on another node, or one that does not
come in time. Nothing is undone (an eviction cannot be): the message says where things stand,
and ``repack`` can be run again on a fresh dump. Freed nodes are left cordoned and empty for
the operator or cluster-autoscaler to remove: deleting nodes is not this command's to do.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Optional

from kubernetes import client

from adapters.live.errors import KubeError, NotFound, TooManyRequests
from adapters.live.api_client import KubeApi, call_client
from solver.repack.runbook import Action

# How long one replacement may take to be scheduled, started and Ready.
DEFAULT_WAIT_SECONDS = 300.0
POLL_SECONDS = 0.25


@dataclass
class Applied:
    done: list[str] = field(default_factory=list)  # one line per action carried out
    stopped: Optional[str] = None  # why the run stopped early; None when every action was done


# The client methods ``ApplyApi`` calls itself -> (API group, resource, verb), as RBAC names them;
# besides these it reads, evicts and binds pods through the live scheduler's ``KubeApi``.
APPLY_CALLS: dict[str, tuple[str, str, str]] = {
    "list_namespaced_pod": ("", "pods", "list"),
    "patch_node": ("", "nodes", "patch"),
}


class ApplyApi:
    """The calls ``--apply`` makes. Beyond the live scheduler's (pods get, pods/binding and
    pods/eviction create), it needs pods list and nodes patch: the RBAC of whoever runs it, not
    the scheduler's own (``examples/deploy/rbac.yaml`` grants neither)."""

    def __init__(self, kube: KubeApi) -> None:
        self.kube = kube
        self._core = client.CoreV1Api(kube.api_client)

    def read_pod(self, namespace: str, name: str) -> dict[str, Any]:
        return self.kube.read_pod(namespace, name)

    def evict(self, namespace: str, name: str, uid: str) -> None:
        self.kube.evict(namespace, name, uid)

    def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        self.kube.bind(namespace, name, uid, node)

    def list_pods(self, namespace: str) -> list[dict[str, Any]]:
        body = call_client(f"list pods in {namespace}", self._core.list_namespaced_pod, namespace)
        return [item for item in body.get("items") or [] if isinstance(item, dict)]

    def cordon(self, node: str) -> None:
        """Mark a node unschedulable, as ``kubectl cordon`` does."""
        call_client(f"cordon {node}", self._core.patch_node, node, {"spec": {"unschedulable": True}})


class Stop(Exception):
    """A surprise: the run stops here."""


def _check_interrupt() -> None:
    from solver import interrupt

    if interrupt.requested():
        raise Stop("interrupted (Ctrl-C)")


def apply_runbook(api: ApplyApi, runbook: list[Action], *, wait_seconds: float = DEFAULT_WAIT_SECONDS,
                  say: Callable[[str], None] = lambda line: None, scheduler_name: str = "") -> Applied:
    """Carry ``runbook`` out. A replacement whose ``schedulerName`` is ``scheduler_name`` (ours)
    is bound to its planned node here, as the live scheduler would bind it: those moves land
    where planned by construction; the others are kube-scheduler's to place."""
    applied = Applied()
    for number, action in enumerate(runbook, 1):
        try:
            _check_interrupt()
            line = _do(api, action, wait_seconds, scheduler_name)
        except Stop as why:
            applied.stopped = f"stopped at action {number} of {len(runbook)}: {why}"
            say(applied.stopped)
            return applied
        except KubeError as exc:
            applied.stopped = f"stopped at action {number} of {len(runbook)}: {exc}"
            say(applied.stopped)
            return applied
        applied.done.append(line)
        say(line)
    return applied


def _do(api: ApplyApi, action: Action, wait_seconds: float, scheduler_name: str) -> str:
    if action.kind == "cordon":
        api.cordon(action.node)
        return f"cordoned {action.node}"
    if action.kind == "remove":
        return f"{action.node} runs no workload pod now: remove it (kubectl delete node {action.node}) or let cluster-autoscaler"
    return _evict(api, action, wait_seconds, scheduler_name)


def _evict(api: ApplyApi, action: Action, wait_seconds: float, scheduler_name: str) -> str:
    namespace, _, name = action.pod.partition("/")
    try:
        pod = api.read_pod(namespace, name)
    except NotFound:
        raise Stop(f"{action.pod} is gone: the cluster changed since the dump") from None
    node = (pod.get("spec") or {}).get("nodeName")
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        raise Stop(f"{action.pod} is being deleted already: the cluster changed since the dump")
    if node != action.source:
        raise Stop(f"{action.pod} runs on {node or 'no node'}, not {action.source}: the cluster changed since the dump")
    meta = pod["metadata"]
    owner = next((r for r in meta.get("ownerReferences") or [] if r.get("controller")), None)
    if owner is None:
        raise Stop(f"{action.pod} has no controller to re-create it: move it yourself (save its manifest, "
                   f"delete it, apply it with spec.nodeName: {action.target})")
    before = {p["metadata"].get("uid") for p in api.list_pods(namespace)}
    try:
        api.evict(namespace, name, meta.get("uid", ""))
    except TooManyRequests as exc:
        raise Stop(f"eviction of {action.pod} refused: {exc}") from None
    ours = bool(scheduler_name) and (pod.get("spec") or {}).get("schedulerName") == scheduler_name
    bind_to = action.target if ours else None
    replacement = _wait(lambda: _replacement(api, namespace, name, meta.get("uid"), owner, before, bind_to), wait_seconds,
                        f"no replacement of {action.pod} was scheduled within {wait_seconds:g}s")
    landed = replacement["spec"]["nodeName"]
    new_name = replacement["metadata"]["name"]
    if landed != action.target:
        raise Stop(f"the replacement of {action.pod}, {namespace}/{new_name}, landed on {landed}, not {action.target} "
                   "as planned: run repack again on a fresh dump")
    # A pod that was not Ready counted for no budget: its replacement is waited for Running only
    # (a crash-looping pod's replacement may never be Ready, and the plan would stop here).
    was_ready = (pod.get("status") or {}).get("phase") != "Running" or _is_ready(pod, missing=True)
    state = "Running and Ready" if was_ready else "Running"
    _wait(lambda: _ready(api, namespace, new_name, need_ready=was_ready), wait_seconds,
          f"{namespace}/{new_name} on {landed} was not {state} within {wait_seconds:g}s")
    return f"step {action.step}: evicted {action.pod} from {action.source}; {namespace}/{new_name} is {state} on {landed}"


def _replacement(api: ApplyApi, namespace: str, name: str, uid: Optional[str], owner: Optional[dict[str, Any]],
                 before: set, bind_to: Optional[str] = None) -> Optional[dict[str, Any]]:
    """The scheduled pod that replaces the evicted one: the same name with a new uid (a
    StatefulSet), or a new pod of the same controller; None until one is bound to a node.
    ``bind_to``: bind a pending replacement there ourselves (it names our scheduler)."""
    for pod in api.list_pods(namespace):
        m = pod["metadata"]
        if m.get("uid") == uid or m.get("deletionTimestamp"):
            continue
        if m["name"] == name:
            same = True
        elif owner is None or m.get("uid") in before:
            same = False
        else:
            refs = m.get("ownerReferences") or []
            same = any(r.get("controller") and r.get("kind") == owner.get("kind") and r.get("name") == owner.get("name")
                       for r in refs)
        if not same:
            continue
        if (pod.get("spec") or {}).get("nodeName"):
            return pod
        if bind_to is not None:
            try:
                api.bind(namespace, m["name"], m.get("uid", ""), bind_to)
            except KubeError:
                pass  # bound meanwhile (by a running cpsat-scheduler): where it landed is checked next
    return None


def _is_ready(pod: dict[str, Any], missing: bool = False) -> bool:
    """The pod's Ready condition is True; ``missing``: what a pod without one reads as (the
    planner reads it as Ready: ``Pod.is_ready``)."""
    conditions = [c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"]
    return conditions[0].get("status") == "True" if conditions else missing


def _ready(api: ApplyApi, namespace: str, name: str, need_ready: bool = True) -> Optional[bool]:
    pod = api.read_pod(namespace, name)
    running = (pod.get("status") or {}).get("phase") == "Running"
    return True if running and (_is_ready(pod) or not need_ready) else None


def _wait(check: Callable[[], Any], seconds: float, timeout_message: str) -> Any:
    ends = time.monotonic() + seconds
    while True:
        _check_interrupt()
        found = check()
        if found:
            return found
        if time.monotonic() >= ends:
            raise Stop(timeout_message)
        time.sleep(POLL_SECONDS)

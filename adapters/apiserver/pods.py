"""What the API server does specially for pods.

- admission on create: status reset to Pending, `schedulerName` defaulted, priority
  resolved from the PriorityClass (403 for an unknown class, or for a `spec.priority`
  that disagrees with it), and the DefaultTolerationSeconds tolerations added;
- `pods/binding`: sets `spec.nodeName` and `PodScheduled=True`, answers 201 with a
  Status; 409 when the pod already has a node, is terminating or is gated;
- `pods/eviction`: deletes unless a PodDisruptionBudget forbids it (429), using up
  one disruption of the budget;
- graceful deletion: a bound pod gets a `deletionTimestamp` and stays until its
  kubelet removes it; an unbound or finished pod, or gracePeriodSeconds=0, goes at once;
- updates may not change the spec beyond what the real validation allows (in
  particular `spec.nodeName` only changes through a binding).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from .controllers import is_healthy, is_terminating, now_rfc3339, set_condition
from .errors import ApiError, bad_request, conflict, invalid, not_found, status_object
from .selectors import match_label_selector

if TYPE_CHECKING:
    from .api import Api

DEFAULT_SCHEDULER = "default-scheduler"
DEFAULT_TERMINATION_GRACE_SECONDS = 30
# added to every pod by the DefaultTolerationSeconds admission plugin
DEFAULT_TOLERATIONS = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
)
PDB_VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."
# the spec fields a pod update may change
MUTABLE_SPEC_FIELDS = ("activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds", "schedulingGates")


def admit(api: "Api", pod: dict[str, Any]) -> None:
    """Defaulting and admission of a pod being created through the API."""
    spec = pod.setdefault("spec", {})
    spec.setdefault("schedulerName", DEFAULT_SCHEDULER)
    _admit_priority(api, spec)
    tolerations = spec.setdefault("tolerations", [])
    for default in DEFAULT_TOLERATIONS:
        if not any(t.get("key") == default["key"] and t.get("effect") in (None, "", "NoExecute")
                   for t in tolerations):
            tolerations.append(dict(default))
    pod["status"] = {"phase": "Pending"}


def _admit_priority(api: "Api", spec: dict[str, Any]) -> None:
    """The Priority admission plugin: spec.priority follows from the PriorityClass."""
    name = spec.get("priorityClassName")
    if name:
        pc = api.store.peek("priorityclasses", "", name)
        if pc is None:
            raise ApiError(403, f'pods "{name}" is forbidden: no PriorityClass with name {name} was found',
                           "Forbidden")
    else:
        pc = next((c for c in api.store.items("priorityclasses") if c.get("globalDefault")), None)
        if pc is not None:
            spec["priorityClassName"] = pc["metadata"]["name"]
    value = int(pc.get("value", 0)) if pc is not None else 0
    if spec.get("priority") is not None and spec["priority"] != value:
        raise ApiError(403, f"the integer value of priority ({spec['priority']}) must not be provided in pod spec; "
                       f"priority admission controller computed {value} from the given PriorityClass name",
                       "Forbidden")
    spec["priority"] = value
    if spec.get("preemptionPolicy") is None:
        spec["preemptionPolicy"] = (pc or {}).get("preemptionPolicy") or "PreemptLowerPriority"


def validate_update(current: dict[str, Any], new: dict[str, Any]) -> None:
    """Reject spec changes the real pod validation forbids."""
    def frozen(spec: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in spec.items() if k not in MUTABLE_SPEC_FIELDS}
        for key in ("containers", "initContainers"):
            out[key] = [{k: v for k, v in c.items() if k != "image"} for c in spec.get(key) or []]
        return out

    old_spec, new_spec = current.get("spec") or {}, new.get("spec") or {}
    if frozen(old_spec) != frozen(new_spec):
        name = current["metadata"]["name"]
        raise invalid("Pod", name, "spec: Forbidden: pod updates may not change fields other than "
                      "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
                      "`spec.tolerations` (only additions to existing tolerations),"
                      "`spec.terminationGracePeriodSeconds`")
    gates_old = [g.get("name") for g in old_spec.get("schedulingGates") or []]
    gates_new = [g.get("name") for g in new_spec.get("schedulingGates") or []]
    if any(g not in gates_old for g in gates_new):
        raise invalid("Pod", current["metadata"]["name"], "spec.schedulingGates: Forbidden: only deletion is allowed")


def bind(api: "Api", namespace: str, name: str, binding: dict[str, Any]) -> dict[str, Any]:
    """POST pods/{name}/binding; returns the Status the server answers with 201."""
    bmeta = binding.get("metadata") or {}
    if bmeta.get("name") and bmeta["name"] != name:
        raise bad_request("name in URL does not match name in Binding object")
    target = binding.get("target") or {}
    node = target.get("name")
    if not node:
        raise invalid("Binding", name, "target.name: Required value")
    if target.get("kind") not in (None, "", "Node"):
        raise invalid("Binding", name, "target.kind: Invalid value: must be empty or 'Node'")
    with api.store.lock:
        pod = api.store.peek("pods", namespace, name)
        if pod is None:
            raise not_found("pods", "", name)
        uid = bmeta.get("uid")
        if uid and uid != pod["metadata"].get("uid"):
            raise ApiError(409, f"Precondition failed: UID in precondition: {uid}, "
                           f"UID in object meta: {pod['metadata'].get('uid')}", "Conflict")
        spec = pod.get("spec") or {}
        if is_terminating(pod):
            raise conflict("pods/binding", "", name, f"pod {name} is being deleted, cannot be assigned to a host")
        if spec.get("nodeName"):
            raise conflict("pods/binding", "", name, f'pod {name} is already assigned to node "{spec["nodeName"]}"')
        if spec.get("schedulingGates"):
            raise conflict("pods/binding", "", name, f"pod {name} has non-empty .spec.schedulingGates")
        bound = copy.deepcopy(pod)
        bound["spec"]["nodeName"] = node
        if bmeta.get("annotations"):
            bound["metadata"].setdefault("annotations", {}).update(bmeta["annotations"])
        set_condition(bound.setdefault("status", {}), "PodScheduled", "True")
        api.store.update("pods", bound)
    return status_object(201)


def delete(api: "Api", pod: dict[str, Any], grace_seconds: int | None) -> dict[str, Any]:
    """Delete a pod the way the pod registry does; returns what DELETE answers (the pod)."""
    m, spec = pod["metadata"], pod.get("spec") or {}
    if grace_seconds is None:
        grace_seconds = int(spec.get("terminationGracePeriodSeconds", DEFAULT_TERMINATION_GRACE_SECONDS))
    phase = (pod.get("status") or {}).get("phase")
    immediate = not spec.get("nodeName") or phase in ("Succeeded", "Failed") or grace_seconds <= 0
    if immediate:
        return copy.deepcopy(api.store.delete("pods", m.get("namespace", ""), m["name"]))
    if is_terminating(pod):
        return copy.deepcopy(pod)
    terminating = copy.deepcopy(pod)
    terminating["metadata"]["deletionTimestamp"] = now_rfc3339(grace_seconds)
    terminating["metadata"]["deletionGracePeriodSeconds"] = grace_seconds
    stored = api.store.update("pods", terminating)
    # the kubelet may have removed it already (no grace delay)
    current = api.store.peek("pods", m.get("namespace", ""), m["name"])
    return copy.deepcopy(current if current is not None else stored)


def _can_ignore_pdb(pod: dict[str, Any]) -> bool:
    phase = (pod.get("status") or {}).get("phase", "Pending")
    return phase in ("Succeeded", "Failed", "Pending", "") or is_terminating(pod)


def evict(api: "Api", namespace: str, name: str, eviction: dict[str, Any]) -> dict[str, Any]:
    """POST pods/{name}/eviction (policy/v1 Eviction); returns the Status answered with 201."""
    emeta = eviction.get("metadata") or {}
    if emeta.get("name") and emeta["name"] != name:
        raise bad_request("name in URL does not match name in Eviction object")
    options = eviction.get("deleteOptions") or {}
    with api.store.lock:
        pod = api.store.peek("pods", namespace, name)
        if pod is None:
            raise not_found("pods", "", name)
        if not _can_ignore_pdb(pod):
            _check_budget(api, pod)
        current = api.store.peek("pods", namespace, name) or pod
        if not is_terminating(current):
            # As the pod registry does (PodDisruptionConditions, GA in 1.31): the pod is marked
            # DisruptionTarget=True, reason EvictionByEvictionAPI, before it is deleted.
            marked = copy.deepcopy(current)
            set_condition(marked.setdefault("status", {}), "DisruptionTarget", "True",
                          reason="EvictionByEvictionAPI", message="Eviction API: evicting")
            current = api.store.update("pods", marked)
        delete(api, current, options.get("gracePeriodSeconds"))
    return status_object(201)


def _check_budget(api: "Api", pod: dict[str, Any]) -> None:
    """Refuse (429) or use up one disruption of the pod's PodDisruptionBudget."""
    labels = pod["metadata"].get("labels") or {}
    namespace = pod["metadata"].get("namespace", "")
    # Every budget of the namespace whose selector takes the pod in, unlabeled pods included: a
    # policy/v1 `selector: {}` selects them (a nil selector selects nothing).
    budgets = [
        b for b in api.store.items("poddisruptionbudgets", namespace)
        if match_label_selector((b.get("spec") or {}).get("selector"), labels)
    ]
    if not budgets:
        return
    if len(budgets) > 1:
        raise ApiError(500, "This pod has more than one PodDisruptionBudget, which the eviction subresource "
                       "does not support.", "InternalError")
    pdb = budgets[0]
    status, pdb_name = pdb.get("status") or {}, pdb["metadata"]["name"]
    # A pod that is not Ready goes without the budget being checked or spent under AlwaysAllow,
    # or while the budget is healthy enough. Unlike the real server, a Running pod with no Ready
    # condition counts as Ready here (`is_healthy`), as the disruption controller here and the
    # planner (`Pod.is_ready`) count it: only hand-written pods lack the condition.
    if not is_healthy(pod):
        policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") or "IfHealthyBudget"
        desired = int(status.get("desiredHealthy", 0))
        if policy == "AlwaysAllow" or (int(status.get("currentHealthy", 0)) >= desired and desired > 0):
            return
    if int(status.get("observedGeneration", 0)) < int(pdb["metadata"].get("generation", 1)):
        raise _too_many_requests(f"The disruption budget {pdb_name} is still being processed by the server.", 10)
    allowed = int(status.get("disruptionsAllowed", 0))
    if allowed < 0:
        raise ApiError(403, f'poddisruptionbudgets.policy "{pdb_name}" is forbidden: '
                       "pdb disruptions allowed is negative", "Forbidden")
    if allowed == 0:
        raise _too_many_requests(f"The disruption budget {pdb_name} needs {status.get('desiredHealthy', 0)} "
                                 f"healthy pods and has {status.get('currentHealthy', 0)} currently", 0)
    updated = copy.deepcopy(pdb)
    ustatus = updated.setdefault("status", {})
    ustatus["disruptionsAllowed"] = allowed - 1
    ustatus.setdefault("disruptedPods", {})[pod["metadata"]["name"]] = now_rfc3339()
    if allowed - 1 == 0:
        set_condition(ustatus, "DisruptionAllowed", "False", reason="InsufficientPods", message="")
        for cond in ustatus["conditions"]:
            cond.pop("lastProbeTime", None)
    api.store.update("poddisruptionbudgets", updated)


def _too_many_requests(cause: str, retry_after: int) -> ApiError:
    details: dict[str, Any] = {"causes": [{"reason": "DisruptionBudget", "message": cause}]}
    headers = {}
    if retry_after:
        details["retryAfterSeconds"] = retry_after
        headers["Retry-After"] = str(retry_after)
    return ApiError(429, PDB_VIOLATION, "TooManyRequests", details, headers)

"""Kubernetes object models: parsing the API's JSON, priority resolution, pending-pod selection."""

from __future__ import annotations

from typing import Any, Optional

import pytest
from pydantic import ValidationError

from models import (
    ClusterSnapshot,
    InputError,
    LabelSelector,
    Node,
    Pod,
    PodDisruptionBudget,
    PriorityClass,
    Taint,
    Toleration,
)


def pod_dict(name: str = "web-1", namespace: Optional[str] = "default", **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    body = {"containers": [{"name": "app", "image": "nginx"}], **spec}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body}


def make_pod(name: str = "web-1", *, status: Optional[dict] = None, meta: Optional[dict] = None, **spec: Any) -> Pod:
    data = pod_dict(name, **spec)
    if status is not None:
        data["status"] = status
    if meta:
        data["metadata"].update(meta)
    return Pod.model_validate(data)


def priority_class(name: str, value: int, *, default: bool = False, policy: Optional[str] = None) -> PriorityClass:
    data: dict[str, Any] = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                            "value": value, "globalDefault": default}
    if policy:
        data["preemptionPolicy"] = policy
    return PriorityClass.model_validate(data)


# --------------------------------------------------------------------------- priority


PRIORITIES = [
    pytest.param({"priority": 7, "priorityClassName": "high"}, [priority_class("high", 1000)], 7, id="spec-priority-wins"),
    pytest.param({"priorityClassName": "high"}, [priority_class("high", 1000)], 1000, id="from-class"),
    pytest.param({}, [priority_class("high", 1000), priority_class("base", 10, default=True)], 10, id="global-default"),
    pytest.param({}, [priority_class("a", 30, default=True), priority_class("b", 20, default=True)], 20,
                 id="lowest-of-several-defaults"),
    pytest.param({}, [priority_class("high", 1000)], 0, id="no-default-is-zero"),
    pytest.param({"priorityClassName": "system-node-critical"}, [priority_class("system-node-critical", 2000001000)],
                 2000001000, id="system-class"),
    pytest.param({"priority": -5}, [], -5, id="negative"),
]


@pytest.mark.parametrize(("spec", "classes", "expected"), PRIORITIES)
def test_priority_resolution(spec: dict, classes: list[PriorityClass], expected: int) -> None:
    snap = ClusterSnapshot.build(pods=[make_pod(**spec)], priority_classes=classes)
    assert snap.pods[0].spec.priority == expected


@pytest.mark.parametrize(
    ("spec", "classes", "expected"),
    [
        pytest.param({}, [], "PreemptLowerPriority", id="default"),
        pytest.param({"priorityClassName": "batch"}, [priority_class("batch", 1, policy="Never")], "Never", id="from-class"),
        pytest.param({"preemptionPolicy": "PreemptLowerPriority", "priorityClassName": "batch"},
                     [priority_class("batch", 1, policy="Never")], "PreemptLowerPriority", id="spec-wins"),
        pytest.param({}, [priority_class("base", 1, default=True, policy="Never")], "Never", id="global-default-class"),
    ],
)
def test_preemption_policy_resolution(spec: dict, classes: list[PriorityClass], expected: str) -> None:
    snap = ClusterSnapshot.build(pods=[make_pod(**spec)], priority_classes=classes)
    assert snap.pods[0].spec.preemption_policy == expected


def test_missing_priority_class_names_pod_and_field() -> None:
    with pytest.raises(InputError) as info:
        ClusterSnapshot.build(pods=[make_pod(priorityClassName="gold")])
    assert str(info.value) == 'pods/default/web-1: spec.priorityClassName: priority class "gold" not found'


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        pytest.param(1_000_000_000, True, id="highest-user-value"),
        pytest.param(2_000_001_000, True, id="system-node-critical"),
        pytest.param(2_000_001_001, False, id="above-system"),
        pytest.param("100", False, id="string"),
        pytest.param(1.5, False, id="float"),
    ],
)
def test_priority_class_value_range(value: Any, ok: bool) -> None:
    data = {"kind": "PriorityClass", "metadata": {"name": "x"}, "value": value}
    if ok:
        assert PriorityClass.model_validate(data).value == value
    else:
        with pytest.raises(ValidationError):
            PriorityClass.model_validate(data)


# --------------------------------------------------------------------------- pods


def test_realistic_pod_fields() -> None:
    p = make_pod(
        "api-6b8f9c7d4-5fz8c",
        meta={"namespace": "shop", "labels": {"app": "api"}, "creationTimestamp": "2025-06-12T09:57:04Z",
              "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "api-6b8f9c7d4",
                                   "uid": "u", "controller": True, "blockOwnerDeletion": True}]},
        schedulerName="cpsat-scheduler",
        nodeSelector={"kubernetes.io/os": "linux"},
        tolerations=[{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
        topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                    "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "api"}}}],
        status={"phase": "Pending", "qosClass": "Burstable"},
    )
    assert p.key == "shop/api-6b8f9c7d4-5fz8c"
    assert p.spec.scheduler_name == "cpsat-scheduler"
    assert p.metadata.owner_references[0].kind == "ReplicaSet"
    assert p.spec.topology_spread_constraints[0].node_affinity_policy == "Honor"
    assert p.spec.topology_spread_constraints[0].node_taints_policy == "Ignore"
    assert p.spec.tolerations[0].toleration_seconds == 300


@pytest.mark.parametrize(
    ("data", "check"),
    [
        pytest.param(pod_dict(namespace=None), lambda p: p.key == "default/web-1", id="namespace-defaults"),
        pytest.param(pod_dict(tolerations=None, nodeName=None), lambda p: p.spec.tolerations == [] and p.spec.node_name == "",
                     id="api-nulls-are-empty"),
        pytest.param(pod_dict(), lambda p: p.spec.scheduler_name == "default-scheduler", id="scheduler-name-default"),
        pytest.param({**pod_dict(), "status": None}, lambda p: p.status.phase == "", id="null-status"),
        pytest.param(pod_dict(unknownField={"x": 1}), lambda p: p.metadata.name == "web-1", id="unknown-fields-ignored"),
    ],
)
def test_pod_parsing_defaults(data: dict, check: Any) -> None:
    assert check(Pod.model_validate(data))


@pytest.mark.parametrize(
    ("spec", "loc", "error_type"),
    [
        pytest.param({"containers": []}, ("spec", "containers"), "too_short", id="no-containers"),
        pytest.param({"priority": "high"}, ("spec", "priority"), "int_type", id="non-integer-priority"),
        pytest.param({"priority": 1.5}, ("spec", "priority"), "int_type", id="float-priority"),
        pytest.param({"tolerations": [{"key": "a", "effect": "Sometimes"}]}, ("spec", "tolerations", 0, "effect"),
                     "literal_error", id="unknown-toleration-effect"),
        pytest.param({"topologySpreadConstraints": [{"maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}]},
                     ("spec", "topologySpreadConstraints", 0, "topologyKey"), "missing", id="spread-without-topology-key"),
        pytest.param({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchExpressions": [{"key": "app", "operator": "Like"}]}}]}}},
            ("spec", "affinity", "podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution", 0, "labelSelector",
             "matchExpressions", 0, "operator"), "literal_error", id="unknown-selector-operator"),
        pytest.param({"containers": [{"name": "a", "resources": {"requests": {"cpu": "12x"}}}]},
                     ("spec", "containers", 0, "resources", "requests", "cpu"), "value_error", id="malformed-quantity"),
        pytest.param({"containers": [{"name": "a", "resources": {"requests": {"memory": "-1Gi"}}}]},
                     ("spec", "containers", 0, "resources", "requests", "memory"), "value_error", id="negative-quantity"),
    ],
)
def test_pod_errors_report_alias_locations(spec: dict, loc: tuple, error_type: str) -> None:
    """Locations use the API's camelCase names, which the adapters turn into JSON paths."""
    with pytest.raises(ValidationError) as info:
        Pod.model_validate(pod_dict(**spec))
    first = info.value.errors()[0]
    assert (first["loc"], first["type"]) == (loc, error_type)


@pytest.mark.parametrize(
    ("phase", "node", "deleting", "scheduler", "all_pending", "pending", "bound"),
    [
        pytest.param("Pending", "", False, "cpsat-scheduler", False, True, False, id="ours-pending"),
        pytest.param("Pending", "", False, "default-scheduler", False, False, False, id="not-ours"),
        pytest.param("Pending", "", False, "default-scheduler", True, True, False, id="not-ours-all-pending"),
        pytest.param("Running", "n1", False, "cpsat-scheduler", False, False, True, id="bound"),
        pytest.param("Pending", "n1", False, "cpsat-scheduler", False, False, True, id="bound-not-started"),
        pytest.param("Pending", "", True, "cpsat-scheduler", False, False, False, id="terminating-unbound"),
        pytest.param("Running", "n1", True, "cpsat-scheduler", False, False, True, id="terminating-holds-node"),
        pytest.param("Succeeded", "n1", False, "cpsat-scheduler", False, False, False, id="succeeded"),
        pytest.param("Failed", "", False, "cpsat-scheduler", True, False, False, id="failed"),
    ],
)
def test_pending_and_bound_pods(phase: str, node: str, deleting: bool, scheduler: str, all_pending: bool,
                                pending: bool, bound: bool) -> None:
    meta = {"deletionTimestamp": "2025-06-12T10:00:00Z"} if deleting else None
    p = make_pod(meta=meta, nodeName=node, schedulerName=scheduler, status={"phase": phase})
    snap = ClusterSnapshot.build(pods=[p])
    assert (snap.pending_pods(all_pending=all_pending) == [snap.pods[0]]) is pending
    assert (snap.bound_pods() == [snap.pods[0]]) is bound


def test_duplicate_pods_are_refused() -> None:
    with pytest.raises(InputError) as info:
        ClusterSnapshot.build(pods=[make_pod(), make_pod()])
    assert str(info.value) == "pods/default/web-1: metadata.name: duplicate object in snapshot"


# --------------------------------------------------------------------------- nodes, taints, selectors


def test_node_allocatable_and_taints() -> None:
    node = Node.model_validate({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "gpu-a-1", "labels": {"topology.kubernetes.io/zone": "eu-west-1a"}},
        "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}], "unschedulable": None},
        "status": {"allocatable": {"cpu": "3920m", "memory": "15095340Ki", "pods": "110", "nvidia.com/gpu": "1", "hugepages-1Gi": "0"},
                   "capacity": {"cpu": "4", "memory": "16112172Ki", "pods": "110"},
                   "images": [{"names": ["nvcr.io/nvidia/k8s-device-plugin:v0.17.1"], "sizeBytes": 121532064}]},
    })
    assert node.allocatable == {"cpu": 3920, "memory": 15095340 * 1024, "pods": 110, "nvidia.com/gpu": 1, "hugepages-1Gi": 0}
    assert node.spec.unschedulable is False
    assert node.spec.taints[0] == Taint(key="nvidia.com/gpu", value="present", effect="NoSchedule")


def test_node_without_allocatable_uses_capacity() -> None:
    node = Node.model_validate({"metadata": {"name": "n"}, "status": {"capacity": {"cpu": "2"}}})
    assert node.allocatable == {"cpu": 2000}


TOLERATIONS = [
    pytest.param({"key": "a", "operator": "Equal", "value": "b", "effect": "NoSchedule"}, "a=b:NoSchedule", True, id="exact"),
    pytest.param({"key": "a", "value": "b"}, "a=b:NoExecute", True, id="empty-operator-means-equal-any-effect"),
    pytest.param({"key": "a", "operator": "Exists"}, "a=x:NoSchedule", True, id="exists-any-value"),
    pytest.param({"operator": "Exists"}, "anything=x:NoExecute", True, id="tolerate-everything"),
    pytest.param({"key": "a", "operator": "Equal", "value": "b", "effect": "NoSchedule"}, "a=b:NoExecute", False, id="effect-mismatch"),
    pytest.param({"key": "a", "value": "c"}, "a=b:NoSchedule", False, id="value-mismatch"),
    pytest.param({"key": "a", "value": ""}, "a=:NoSchedule", True, id="empty-value"),
]


@pytest.mark.parametrize(("toleration", "taint_text", "tolerated"), TOLERATIONS)
def test_toleration_matching(toleration: dict, taint_text: str, tolerated: bool) -> None:
    head, _, effect = taint_text.rpartition(":")
    key, _, value = head.partition("=")
    assert Toleration.model_validate(toleration).tolerates(Taint(key=key, value=value, effect=effect)) is tolerated


SELECTORS = [
    pytest.param({}, {"app": "web"}, True, id="empty-selects-all"),
    pytest.param({"matchLabels": {"app": "web"}}, {"app": "web", "tier": "1"}, True, id="match-labels"),
    pytest.param({"matchLabels": {"app": "web"}}, {"app": "api"}, False, id="match-labels-differ"),
    pytest.param({"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "api"]}]}, {"app": "api"}, True, id="in"),
    pytest.param({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]}, {}, True, id="notin-absent-key"),
    pytest.param({"matchExpressions": [{"key": "app", "operator": "Exists"}]}, {}, False, id="exists-absent"),
    pytest.param({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, {"app": "x"}, False, id="doesnotexist-present"),
]


@pytest.mark.parametrize(("selector", "labels", "matches"), SELECTORS)
def test_label_selector(selector: dict, labels: dict, matches: bool) -> None:
    assert LabelSelector.model_validate(selector).matches(labels) is matches


@pytest.mark.parametrize(
    ("spec", "ok"),
    [
        pytest.param({"minAvailable": 2}, True, id="min-available-int"),
        pytest.param({"maxUnavailable": "25%"}, True, id="max-unavailable-percent"),
        pytest.param({"minAvailable": "two"}, False, id="not-int-or-percent"),
        pytest.param({"minAvailable": 1, "maxUnavailable": 1}, False, id="both-set"),
        pytest.param({"minAvailable": -1}, False, id="negative"),
    ],
)
def test_pdb_spec(spec: dict, ok: bool) -> None:
    data = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec}}
    if ok:
        assert PodDisruptionBudget.model_validate(data).key == "shop/web"
    else:
        with pytest.raises(ValidationError):
            PodDisruptionBudget.model_validate(data)


def test_pods_held_by_scheduling_gates_are_not_pending():
    # kube-scheduler's PreEnqueue keeps gated pods out of the queue until every gate is removed.
    from models.objects import Pod
    from models.snapshot import ClusterSnapshot

    def pod(name, gates):
        spec = {"schedulerName": "cpsat-scheduler", "containers": [{"name": "c"}]}
        if gates:
            spec["schedulingGates"] = [{"name": g} for g in gates]
        return Pod.model_validate({"metadata": {"name": name}, "spec": spec})

    snap = ClusterSnapshot.build(pods=[pod("gated", ["example.com/quota"]), pod("free", [])])
    assert [p.metadata.name for p in snap.pending_pods()] == ["free"]


def test_volumes_no_rule_reads_are_left_out_once_checked() -> None:
    """The token, config and secret volumes every real pod mounts carry nothing a rule reads:
    the spec keeps the others (claims, ephemeral, CSI, emptyDir, hostPath) in their order; a
    volume without a name is still refused, whatever its source."""
    from models.objects import PodSpec

    volumes = [{"name": "kube-api-access-x1y2z", "projected": {"sources": []}},
               {"name": "data", "persistentVolumeClaim": {"claimName": "data-0"}},
               {"name": "settings", "configMap": {"name": "s"}}, {"name": "key", "secret": {"secretName": "k"}},
               {"name": "info", "downwardAPI": {"items": []}}, {"name": "scratch", "emptyDir": {}},
               {"name": "logs", "hostPath": {"path": "/var/log"}},
               {"name": "odd", "configMap": {"name": "s"}, "secret": {"secretName": "k"}}]  # two sources: kept
    spec = PodSpec.model_validate({"containers": [{"name": "c"}], "volumes": volumes})
    assert [v["name"] for v in spec.volumes] == ["data", "scratch", "logs", "odd"]
    with pytest.raises(ValueError, match=r"volumes\[1\]\.name is missing"):
        PodSpec.model_validate({"containers": [{"name": "c"}], "volumes": [volumes[0], {"projected": {}}]})

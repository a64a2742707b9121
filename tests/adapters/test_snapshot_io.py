"""Reading snapshots, configs and plans: kubectl's own output parses; bad input names object and field."""

from __future__ import annotations

import io
import json
import random
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Optional

import pytest
import yaml

from adapters import snapshot_io
from adapters.live.convert import parse_object
from adapters.snapshot_io import (
    MAX_ALIAS_EXPANSION,
    MAX_DEPTH,
    load_config,
    load_plan,
    load_snapshot,
    read_documents,
    read_snapshot,
)
from models import InputError, SchedulerConfig

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

# What `kubectl get nodes,pods,pdb,priorityclasses,podgroups,svc,rs -A -o yaml` prints for a tiny
# cluster (managedFields trimmed): a List, keys sorted, every object complete with its status.
KUBECTL_YAML = """\
apiVersion: v1
items:
- apiVersion: v1
  kind: Node
  metadata:
    annotations:
      node.alpha.kubernetes.io/ttl: "0"
    creationTimestamp: "2025-05-20T08:01:12Z"
    labels:
      kubernetes.io/hostname: kind-worker
      kubernetes.io/os: linux
      topology.kubernetes.io/zone: zone-a
    name: kind-worker
    resourceVersion: "1187"
    uid: 0d6c8a3e-4b1f-4e58-9a53-3a0b5f0e6c21
  spec:
    podCIDR: 10.244.1.0/24
    podCIDRs:
    - 10.244.1.0/24
    providerID: kind://docker/kind/kind-worker
  status:
    addresses:
    - address: 172.18.0.3
      type: InternalIP
    allocatable:
      cpu: "8"
      ephemeral-storage: 102626232Ki
      hugepages-2Mi: "0"
      memory: 32795612Ki
      pods: "110"
    capacity:
      cpu: "8"
      ephemeral-storage: 102626232Ki
      hugepages-2Mi: "0"
      memory: 32795612Ki
      pods: "110"
    conditions:
    - lastHeartbeatTime: "2025-05-20T09:00:41Z"
      lastTransitionTime: "2025-05-20T08:01:35Z"
      message: kubelet is posting ready status
      reason: KubeletReady
      status: "True"
      type: Ready
    daemonEndpoints:
      kubeletEndpoint:
        Port: 10250
    images:
    - names:
      - docker.io/library/nginx@sha256:0c86dddac19f2ce4fd716ac58c0fd87bf69bfd4edabfd6971fb885bafd12a00b
      - docker.io/library/nginx:1.27
      sizeBytes: 72950530
    nodeInfo:
      architecture: amd64
      containerRuntimeVersion: containerd://2.0.3
      kernelVersion: 6.8.0-57-generic
      kubeProxyVersion: v1.33.1
      kubeletVersion: v1.33.1
      operatingSystem: linux
      osImage: Debian GNU/Linux 12 (bookworm)
- apiVersion: v1
  kind: Pod
  metadata:
    creationTimestamp: "2025-05-20T08:30:02Z"
    generateName: web-5d9c6b8f7-
    labels:
      app: web
      pod-template-hash: 5d9c6b8f7
    name: web-5d9c6b8f7-kx2lp
    namespace: default
    ownerReferences:
    - apiVersion: apps/v1
      blockOwnerDeletion: true
      controller: true
      kind: ReplicaSet
      name: web-5d9c6b8f7
      uid: 5a1f2c0e-7d7b-4b53-8e0c-8a0d1c9f3b11
    resourceVersion: "2411"
    uid: 9e3b8f54-1c9a-4d0e-b7a2-0f6d5c4b3a21
  spec:
    containers:
    - image: nginx:1.27
      imagePullPolicy: IfNotPresent
      name: nginx
      ports:
      - containerPort: 80
        protocol: TCP
      resources:
        limits:
          memory: 256Mi
        requests:
          cpu: 250m
          memory: 128Mi
    dnsPolicy: ClusterFirst
    enableServiceLinks: true
    nodeName: kind-worker
    preemptionPolicy: PreemptLowerPriority
    priority: 0
    restartPolicy: Always
    schedulerName: default-scheduler
    securityContext: {}
    serviceAccountName: default
    terminationGracePeriodSeconds: 30
    tolerations:
    - effect: NoExecute
      key: node.kubernetes.io/not-ready
      operator: Exists
      tolerationSeconds: 300
  status:
    conditions:
    - lastProbeTime: null
      lastTransitionTime: "2025-05-20T08:30:02Z"
      status: "True"
      type: PodScheduled
    hostIP: 172.18.0.3
    phase: Running
    podIP: 10.244.1.7
    qosClass: Burstable
    startTime: "2025-05-20T08:30:02Z"
- apiVersion: v1
  kind: Pod
  metadata:
    creationTimestamp: "2025-05-20T09:01:00Z"
    labels:
      batch.kubernetes.io/job-name: train
      scheduling.x-k8s.io/pod-group: train
    name: train-0
    namespace: ml
    resourceVersion: "3020"
    uid: 3c2b1a09-8f7e-4d6c-9b5a-4e3d2c1b0a99
  spec:
    containers:
    - image: python:3.12
      name: trainer
      resources:
        requests:
          cpu: "2"
          memory: 4Gi
    initContainers:
    - image: busybox:1.36
      name: fetch
      resources:
        requests:
          cpu: "4"
    priorityClassName: batch
    restartPolicy: Never
    schedulerName: cpsat-scheduler
  status:
    phase: Pending
    qosClass: Burstable
- apiVersion: v1
  kind: Service
  metadata:
    name: web
    namespace: default
  spec:
    clusterIP: 10.96.14.2
    ports:
    - port: 80
      protocol: TCP
      targetPort: 80
    selector:
      app: web
    type: ClusterIP
- apiVersion: apps/v1
  kind: ReplicaSet
  metadata:
    name: web-5d9c6b8f7
    namespace: default
  spec:
    replicas: 1
    selector:
      matchLabels:
        app: web
- apiVersion: policy/v1
  kind: PodDisruptionBudget
  metadata:
    name: web
    namespace: default
  spec:
    maxUnavailable: 25%
    selector:
      matchLabels:
        app: web
  status:
    currentHealthy: 1
    desiredHealthy: 0
    disruptionsAllowed: 1
    expectedPods: 1
    observedGeneration: 1
- apiVersion: scheduling.k8s.io/v1
  description: Batch jobs.
  kind: PriorityClass
  metadata:
    name: batch
  preemptionPolicy: Never
  value: 1000
- apiVersion: scheduling.k8s.io/v1
  description: Used for system critical pods that must not be moved from their current node.
  kind: PriorityClass
  metadata:
    name: system-node-critical
  preemptionPolicy: PreemptLowerPriority
  value: 2000001000
- apiVersion: scheduling.x-k8s.io/v1alpha1
  kind: PodGroup
  metadata:
    name: train
    namespace: ml
  spec:
    minMember: 1
    scheduleTimeoutSeconds: 60
  status:
    phase: Pending
kind: List
metadata:
  resourceVersion: ""
"""

# `kubectl get pods -n shop -o json` for one pending pod, as the API server returns it (a List
# with one item: typed PodLists come from the API itself, see test_typed_list_items_without_kind).
KUBECTL_JSON = """\
{
    "apiVersion": "v1",
    "items": [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "creationTimestamp": "2025-06-12T09:57:04Z",
                "generateName": "api-6b8f9c7d4-",
                "labels": {
                    "app.kubernetes.io/name": "api",
                    "pod-template-hash": "6b8f9c7d4"
                },
                "name": "api-6b8f9c7d4-5fz8c",
                "namespace": "shop",
                "resourceVersion": "482010",
                "uid": "1f0e2d3c-4b5a-4968-8776-a5b4c3d2e1f0"
            },
            "spec": {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {
                                            "key": "kubernetes.io/arch",
                                            "operator": "In",
                                            "values": ["amd64", "arm64"]
                                        }
                                    ]
                                }
                            ]
                        }
                    }
                },
                "containers": [
                    {
                        "image": "ghcr.io/acme/api:5.2.1",
                        "name": "api",
                        "ports": [{"containerPort": 9090, "hostPort": 9090, "name": "grpc", "protocol": "TCP"}],
                        "resources": {"limits": {"memory": "512Mi"}, "requests": {"cpu": "250m", "memory": "256Mi"}}
                    }
                ],
                "priority": 100000,
                "priorityClassName": "production",
                "schedulerName": "cpsat-scheduler",
                "topologySpreadConstraints": [
                    {
                        "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "api"}},
                        "matchLabelKeys": ["pod-template-hash"],
                        "maxSkew": 1,
                        "topologyKey": "topology.kubernetes.io/zone",
                        "whenUnsatisfiable": "DoNotSchedule"
                    }
                ]
            },
            "status": {
                "conditions": [
                    {
                        "lastProbeTime": null,
                        "lastTransitionTime": "2025-06-12T09:57:05Z",
                        "message": "0/3 nodes are available: 3 Insufficient cpu.",
                        "reason": "Unschedulable",
                        "status": "False",
                        "type": "PodScheduled"
                    }
                ],
                "phase": "Pending",
                "qosClass": "Burstable"
            }
        }
    ],
    "kind": "List",
    "metadata": {
        "resourceVersion": ""
    }
}
"""


def read(text: str):
    return read_snapshot(io.StringIO(text), label="snap.yaml")


def error_of(text: str) -> str:
    with pytest.raises(InputError) as info:
        read(text)
    return str(info.value)


# --------------------------------------------------------------------------- good input


def test_kubectl_yaml_list() -> None:
    loaded = read(KUBECTL_YAML)
    snap = loaded.snapshot
    assert [n.name for n in snap.nodes] == ["kind-worker"]
    assert snap.nodes[0].allocatable["memory"] == 32795612 * 1024
    assert [p.key for p in snap.pods] == ["default/web-5d9c6b8f7-kx2lp", "ml/train-0"]
    assert [p.key for p in snap.bound_pods()] == ["default/web-5d9c6b8f7-kx2lp"]
    assert [p.key for p in snap.pending_pods()] == ["ml/train-0"]
    train = snap.pod_by_key["ml/train-0"]
    assert (train.spec.priority, train.spec.preemption_policy) == (1000, "Never")
    assert [g.key for g in snap.pod_groups] == ["ml/train"]
    assert snap.pdbs[0].spec.max_unavailable == "25%"
    assert sorted(c.metadata.name for c in snap.priority_classes) == ["batch", "system-node-critical"]
    assert loaded.skipped == {"ReplicaSet": 1, "Service": 1}
    assert loaded.note() == (
        "snap.yaml: skipped 2 objects of kinds the scheduler does not read: ReplicaSet (1), Service (1)"
    )


def test_readiness_and_the_unhealthy_pod_eviction_policy_are_read_on_every_path() -> None:
    # The Eviction API lets a pod that is not Ready go unspent where its budget says so: the
    # pod's Ready condition (its status alone; the other conditions are dropped) and the budget's
    # policy survive the file reader, the replicas' shared-spec path and the watch's parser.
    data = yaml.safe_load(KUBECTL_YAML)
    web = next(o for o in data["items"] if o["kind"] == "Pod" and o["metadata"]["name"].startswith("web-"))
    web["status"]["conditions"] += [{"type": "Ready", "status": "False", "reason": "ContainersNotReady",
                                     "lastProbeTime": None, "lastTransitionTime": "2025-05-20T08:30:02Z"},
                                    {"type": "ContainersReady", "status": "False"}]
    twin = json.loads(json.dumps(web))
    twin["metadata"]["name"] = "web-5d9c6b8f7-zz9qq"
    twin["status"]["conditions"][1]["status"] = "True"
    data["items"].append(twin)
    budget = next(o for o in data["items"] if o["kind"] == "PodDisruptionBudget")
    budget["spec"]["unhealthyPodEvictionPolicy"] = "AlwaysAllow"
    snap = read(json.dumps(data)).snapshot
    sick, well = snap.pod_by_key["default/web-5d9c6b8f7-kx2lp"], snap.pod_by_key["default/web-5d9c6b8f7-zz9qq"]
    assert [(c.type, c.status, c.reason) for c in sick.status.conditions] == [("Ready", "False", "")]
    assert (sick.is_ready, well.is_ready, snap.pod_by_key["ml/train-0"].is_ready) == (False, True, True)
    assert snap.pdbs[0].spec.unhealthy_pod_eviction_policy == "AlwaysAllow"
    assert parse_object(web, "Pod") == sick and parse_object(twin, "Pod") == well
    assert parse_object(budget, "PodDisruptionBudget") == snap.pdbs[0]


def test_kubectl_json_list() -> None:
    loaded = read_snapshot(io.StringIO(KUBECTL_JSON))
    (pod,) = loaded.snapshot.pods
    assert pod.key == "shop/api-6b8f9c7d4-5fz8c"
    assert pod.spec.containers[0].resources.requests == {"cpu": 250, "memory": 256 * 2**20}
    assert pod.spec.containers[0].ports[0].host_port == 9090
    assert pod.spec.topology_spread_constraints[0].match_label_keys == ["pod-template-hash"]
    assert loaded.skipped == {} and loaded.note() is None


def test_json_and_yaml_of_the_same_dump_agree() -> None:
    as_json = json.dumps(yaml.safe_load(KUBECTL_YAML), indent=4)
    assert read(as_json).snapshot == read(KUBECTL_YAML).snapshot


def test_bundled_examples_parse_and_agree() -> None:
    from_yaml = read_snapshot(EXAMPLES / "snapshots" / "quickstart.yaml")
    from_json = read_snapshot(EXAMPLES / "snapshots" / "quickstart.json")
    assert from_yaml.snapshot == from_json.snapshot
    snap = from_yaml.snapshot
    assert len(snap.nodes) == 6
    assert len(snap.pending_pods()) == 11
    assert len(snap.pending_pods(all_pending=True)) == 12
    assert from_yaml.skipped == {}


def test_bundled_config_is_the_defaults() -> None:
    assert load_config(EXAMPLES / "config" / "scheduler-config.yaml") == SchedulerConfig()


NODE = "kind: Node\napiVersion: v1\nmetadata: {name: %s}\n"


@pytest.mark.parametrize(
    ("text", "nodes"),
    [
        pytest.param(NODE % "a", ["a"], id="single-object"),
        pytest.param("---\n" + NODE % "a" + "---\n" + NODE % "b" + "...\n", ["a", "b"], id="multi-document-stream"),
        pytest.param(NODE % "a" + "---\n---\n" + "kind: List\nitems:\n- " + (NODE % "b").replace("\n", "\n  "),
                     ["a", "b"], id="stream-with-empty-document-and-list"),
        pytest.param('{"kind": "Node", "metadata": {"name": "a"}}\n{"kind": "Node", "metadata": {"name": "b"}}\n',
                     ["a", "b"], id="json-stream-from-jq"),
        pytest.param("{kind: Node, metadata: {name: a}}", ["a"], id="flow-yaml-that-is-not-json"),
        pytest.param("kind: List\nitems: []\n", [], id="empty-list"),
        pytest.param("kind: List\nitems: null\n", [], id="null-items"),
        pytest.param("\ufeff" + NODE % "a", ["a"], id="byte-order-mark"),
        pytest.param("kind: NodeList\napiVersion: v1\nitems:\n- metadata: {name: a}\n", ["a"], id="typed-list-items-without-kind"),
    ],
)
def test_input_shapes(text: str, nodes: list[str]) -> None:
    assert [n.name for n in read(text).snapshot.nodes] == nodes


def test_unknown_groups_are_skipped_not_misread() -> None:
    text = (
        "kind: List\nitems:\n"
        "- {apiVersion: batch.example.com/v1, kind: PodGroup, metadata: {name: g}, spec: {minMember: 2}}\n"
        "- {apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: PodGroup, metadata: {name: h}, spec: {minMember: 2}}\n"
        "- {apiVersion: scheduling.volcano.sh/v1beta1, kind: PodGroup, metadata: {name: v}, spec: {minMember: 3}}\n"
    )
    loaded = read(text)
    assert [g.key for g in loaded.snapshot.pod_groups] == ["default/h", "default/v"]  # Volcano's is read too
    assert loaded.skipped == {"PodGroup (batch.example.com/v1)": 1}


def test_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "snap.json"
    path.write_text(KUBECTL_JSON)
    expected = read_snapshot(io.StringIO(KUBECTL_JSON)).snapshot
    assert load_snapshot(path) == expected
    assert load_snapshot(str(path)) == expected
    with path.open("rb") as handle:
        assert load_snapshot(handle) == expected
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(KUBECTL_JSON.encode())))
    from_stdin = read_snapshot("-")
    assert (from_stdin.snapshot, from_stdin.source) == (expected, "<stdin>")


YAML_SEMANTICS = [
    pytest.param("a: 1\nb: 1.5\nc: true\nd: null\ne: ~\nf: '1'\ng: \"x\"\nh: 0x1f\ni: 1e3\nj: yes\n", id="scalar-types"),
    pytest.param("t: 2025-06-12T09:57:04Z\nd: 2025-06-12\n", id="timestamps"),
    pytest.param("a: &x {k: v}\nb: *x\nc: [*x, *x]\n", id="anchors"),
    pytest.param("base: &b {x: 1, y: 2}\nm:\n  <<: *b\n  y: 3\n", id="merge-key"),
    pytest.param("base: &b {x: 1}\nmore: &c {z: 2}\nm:\n  <<: [*b, *c]\n  y: 3\n", id="merge-list"),
    pytest.param("s: |\n  line one\n  line two\nf: >\n  folded\n  text\n", id="block-scalars"),
    pytest.param("a: !!str 5\nb: !!int '7'\nc: !!float 1\n", id="explicit-tags"),
    pytest.param("- [1, [2, [3]]]\n- {a: {b: {c: []}}}\n", id="nesting"),
    pytest.param("? complex\n: value\n'quoted key': 1\n2: two\n", id="keys"),
]


@pytest.mark.parametrize("text", YAML_SEMANTICS)
def test_yaml_reader_agrees_with_pyyaml(text: str) -> None:
    assert read_documents(io.StringIO(text)) == [yaml.safe_load(text)]


def test_merge_token_outside_a_key_is_a_string() -> None:
    """PyYAML refuses a bare ``<<`` value; kubectl never writes one, so read it as the string."""
    assert read_documents(io.StringIO("a: <<\n")) == [{"a": "<<"}]


# --------------------------------------------------------------------------- bad input

POD = """\
kind: List
apiVersion: v1
items:
- apiVersion: v1
  kind: Pod
  metadata:
    name: web-1
    namespace: default
  spec:
    containers:
    - name: web
      image: nginx
%s
"""


def pod_with(spec_lines: str, *, containers: str = "") -> str:
    body = textwrap.indent(textwrap.dedent(spec_lines), "    ")
    text = POD % body.rstrip("\n")
    if containers:
        text = text.replace("      image: nginx\n", "      image: nginx\n" + textwrap.indent(textwrap.dedent(containers), "      "))
    return text


BAD_INPUT = [
    pytest.param("", "snap.yaml: empty input: expected a List or Kubernetes objects", id="empty"),
    pytest.param("  \n\n# only a comment\n", "snap.yaml: empty input: expected a List or Kubernetes objects", id="only-comments"),
    pytest.param("---\n---\n", "snap.yaml: empty input: expected a List or Kubernetes objects", id="empty-documents"),
    pytest.param('{"kind": "List", "items": [}', "snap.yaml: invalid JSON: line 1, column 28: Expecting value", id="malformed-json"),
    pytest.param('\n\n{"kind": "List",\n "items": [}', "snap.yaml: invalid JSON: line 4, column 12: Expecting value",
                 id="malformed-json-line-counted"),
    pytest.param("kind: List\nitems:\n- a: b: c\n", "snap.yaml: invalid YAML: line 3, column 7: mapping values are not allowed in this context",
                 id="malformed-yaml"),
    pytest.param("kind: List\nitems: [\n", "snap.yaml: invalid YAML: line 3, column 1: did not find expected node content",
                 id="unterminated-yaml"),
    # the last of two keys silently won: a Node's second name dropped it and the pods running on it
    pytest.param("kind: List\nitems:\n- kind: Node\n  metadata:\n    name: a\n    name: b\n",
                 "snap.yaml: invalid YAML: line 6, column 11: the key 'name' is given twice in one mapping",
                 id="yaml-duplicate-key"),
    pytest.param("kind: List\nitems: {a: 1}\n", "snap.yaml: items: expected a list, got a mapping", id="items-not-a-list"),
    pytest.param("kind: List\nitems: nodes\n", 'snap.yaml: items: expected a list, got "nodes"', id="items-a-string"),
    pytest.param("kind: List\n", "snap.yaml: items: required field is missing", id="list-without-items"),
    pytest.param("kind: List\nitems: [node-1]\n", 'items[0]: expected a Kubernetes object (a mapping), got "node-1"',
                 id="item-not-a-mapping"),
    pytest.param("- kind: Node\n", "snap.yaml: expected a Kubernetes object (a mapping), got a list", id="top-level-list"),
    pytest.param("just text\n", 'snap.yaml: expected a Kubernetes object (a mapping), got "just text"', id="top-level-scalar"),
    pytest.param("kind: List\nitems:\n- metadata: {name: a}\n", "items[0]: kind: required field is missing", id="item-without-kind"),
    pytest.param("kind: List\nitems:\n- kind: Pod\n  spec: {containers: [{name: a}]}\n", "items[0] (Pod): metadata: required field is missing",
                 id="missing-metadata"),
    pytest.param("kind: List\nitems:\n- kind: Pod\n  metadata: {namespace: x}\n  spec: {containers: [{name: a}]}\n",
                 "items[0] (Pod in namespace x): metadata.name: required field is missing", id="missing-name"),
    pytest.param("kind: List\nitems:\n- kind: Pod\n  metadata: {name: web-1, namespace: 5}\n  spec: {containers: [{name: a}]}\n",
                 "pods/web-1: metadata.namespace: 5 is not a string", id="namespace-not-a-string-is-not-taken-for-default"),
    pytest.param("kind: List\nitems:\n- kind: Node\n- kind: Node\n  metadata: {name: ''}\n", "items[0] (Node): metadata: required field is missing",
                 id="first-error-wins"),
    pytest.param("---\nkind: Node\nmetadata: {name: a}\n---\nkind: Node\nmetadata: {name: ''}\n",
                 "documents[1] (Node): metadata.name: must not be empty", id="unnamed-in-stream"),
    pytest.param("kind: List\nitems:\n- kind: Pod\n  metadata: {name: web-1}\n  spec: {}\n",
                 "pods/default/web-1: spec.containers: required field is missing", id="missing-containers"),
    pytest.param("kind: List\nitems:\n- kind: Pod\n  metadata: {name: web-1}\n  spec: {containers: []}\n",
                 "pods/default/web-1: spec.containers: must not be empty", id="empty-containers"),
    pytest.param(pod_with("", containers="resources: {requests: {cpu: 12x}}\n"),
                 'pods/default/web-1: spec.containers[0].resources.requests.cpu: "12x" is not a quantity', id="malformed-quantity"),
    pytest.param(pod_with("", containers="resources: {limits: {memory: -1Gi}}\n"),
                 'pods/default/web-1: spec.containers[0].resources.limits.memory: "-1Gi" must be non-negative', id="negative-quantity"),
    pytest.param(pod_with("", containers="resources: {requests: {nvidia.com/gpu: lots}}\n"),
                 'pods/default/web-1: spec.containers[0].resources.requests["nvidia.com/gpu"]: "lots" is not a quantity',
                 id="quantity-of-dotted-resource"),
    pytest.param(pod_with("overhead: {cpu: 1K}\n"), 'pods/default/web-1: spec.overhead.cpu: "1K" is not a quantity', id="overhead-quantity"),
    pytest.param(pod_with("priority: high\n"), 'pods/default/web-1: spec.priority: "high" is not an integer', id="non-integer-priority"),
    pytest.param(pod_with("priority: 1.5\n"), "pods/default/web-1: spec.priority: 1.5 is not an integer", id="fractional-priority"),
    pytest.param(pod_with("priorityClassName: gold\n"), 'pods/default/web-1: spec.priorityClassName: priority class "gold" not found',
                 id="missing-priority-class"),
    pytest.param(pod_with("tolerations: [{key: a, operator: Equal, value: b, effect: Sometimes}]\n"),
                 "pods/default/web-1: spec.tolerations[0].effect: unknown value \"Sometimes\", expected 'NoSchedule', "
                 "'PreferNoSchedule', 'NoExecute' or ''", id="unknown-toleration-effect"),
    pytest.param(pod_with("topologySpreadConstraints: [{maxSkew: 1, whenUnsatisfiable: DoNotSchedule}]\n"),
                 "pods/default/web-1: spec.topologySpreadConstraints[0].topologyKey: required field is missing",
                 id="spread-without-topology-key"),
    pytest.param(pod_with("""\
        affinity:
          podAntiAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
            - topologyKey: kubernetes.io/hostname
              labelSelector:
                matchExpressions: [{key: app, operator: Like, values: [web]}]
        """),
        "pods/default/web-1: spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector"
        ".matchExpressions[0].operator: unknown value \"Like\", expected 'In', 'NotIn', 'Exists' or 'DoesNotExist'",
        id="unknown-selector-operator"),
    pytest.param(pod_with("""\
        affinity:
          nodeAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
              nodeSelectorTerms: [{matchExpressions: [{key: cores, operator: Gt, values: [many]}]}]
        """),
        "pods/default/web-1: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
        ".matchExpressions[0]: operator Gt needs exactly one integer value", id="node-selector-gt-not-integer"),
    pytest.param(pod_with("nodeSelector: {ssd: true}\n"), "pods/default/web-1: spec.nodeSelector.ssd: true is not a string",
                 id="unquoted-boolean-label"),
    pytest.param(pod_with("", containers="ports: [{containerPort: 80, hostPort: 70000}]\n"),
                 "pods/default/web-1: spec.containers[0].ports[0].hostPort: 70000 is above the maximum 65535", id="port-range"),
    pytest.param("kind: Node\nmetadata: {name: n1}\nspec: {taints: [{key: gpu, value: 'yes', effect: NoScheduling}]}\n",
                 "nodes/n1: spec.taints[0].effect: unknown value \"NoScheduling\", expected 'NoSchedule', 'PreferNoSchedule' or 'NoExecute'",
                 id="unknown-taint-effect"),
    pytest.param("kind: Node\nmetadata: {name: n1}\nspec: {unschedulable: 'yes'}\n",  # once read as a cordon
                 'nodes/n1: spec.unschedulable: "yes" is not a boolean', id="node-unschedulable-string"),
    pytest.param("kind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: four}}\n",
                 'nodes/n1: status.allocatable.cpu: "four" is not a quantity', id="node-quantity"),
    pytest.param("kind: PriorityClass\nmetadata: {name: high}\nvalue: '1000'\n", 'priorityclasses/high: value: "1000" is not an integer',
                 id="priority-class-value-string"),
    pytest.param("kind: PodDisruptionBudget\napiVersion: policy/v1\nmetadata: {name: web, namespace: shop}\nspec: {minAvailable: half}\n",
                 'poddisruptionbudgets/shop/web: spec.minAvailable: "half" is neither an integer nor a percentage', id="pdb-min-available"),
    pytest.param("kind: PodDisruptionBudget\napiVersion: policy/v1\nmetadata: {name: web, namespace: shop}\nspec: {maxUnavailable: 150%}\n",
                 'poddisruptionbudgets/shop/web: spec.maxUnavailable: "150%" is above 100%', id="pdb-above-100-percent"),
    pytest.param("kind: PodDisruptionBudget\napiVersion: policy/v1\nmetadata: {name: web, namespace: shop}\nspec: {maxUnavailable: ١٠%}\n",
                 'poddisruptionbudgets/shop/web: spec.maxUnavailable: "١٠%" is neither an integer nor a percentage',
                 id="pdb-percent-of-other-digits"),
    pytest.param("kind: PodDisruptionBudget\napiVersion: policy/v1\nmetadata: {name: web, namespace: shop}\n"
                 f"spec: {{maxUnavailable: '{'9' * 4000}%'}}\n",
                 'poddisruptionbudgets/shop/web: spec.maxUnavailable: "' + "9" * 77 + '..." is above 100%',
                 id="pdb-percent-of-4000-digits"),
    pytest.param("kind: PodDisruptionBudget\napiVersion: policy/v1\nmetadata: {name: web, namespace: shop}\n"
                 "spec: {unhealthyPodEvictionPolicy: Always}\n",
                 "poddisruptionbudgets/shop/web: spec.unhealthyPodEvictionPolicy: unknown value \"Always\", expected "
                 "'IfHealthyBudget' or 'AlwaysAllow'", id="pdb-unhealthy-pod-eviction-policy"),
    pytest.param("kind: PodGroup\napiVersion: scheduling.x-k8s.io/v1alpha1\nmetadata: {name: g}\nspec: {minMember: 0}\n",
                 "podgroups/default/g: spec.minMember: 0 is below the minimum 1", id="pod-group-min-member"),
    pytest.param("---\nkind: Node\nmetadata: {name: n1}\n---\nkind: Node\nmetadata: {name: n1}\n",
                 "nodes/n1: metadata.name: duplicate object in snapshot", id="duplicate-node"),
    pytest.param(pod_with("") + "- {kind: Pod, metadata: {name: web-1}, spec: {containers: [{name: b}]}}\n",
                 "pods/default/web-1: metadata.name: duplicate object in snapshot", id="duplicate-pod"),
    pytest.param("kind: 7\n", "snap.yaml: kind: 7 is not a kind", id="kind-not-a-string"),
    pytest.param("kind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: '" + "x" * 5000 + "'}}\n",
                 'nodes/n1: status.allocatable.cpu: "' + "x" * 77 + '..." is not a quantity', id="long-value-quoted-short"),
    pytest.param("kind: Node\nmetadata: {name: n1}\nx: !!int " + "z" * 5000 + "\n",
                 "snap.yaml: invalid YAML: line 3, column 4: '" + "z" * 76 + "... is not a valid int: invalid literal for "
                 "int() with base 10: '" + "z" * 36 + "...", id="long-scalar-quoted-short"),
    pytest.param('{"kind": "Node", "metadata": {"name": "n", "annotations": {"a": "' + "1" * 5000 + '"}},\n "f": 1.' + "3" * 5000
                 + ',\n "x": -' + "2" * 4400 + "}",
                 "snap.yaml: invalid JSON: line 3, column 7: an integer of 4400 digits is too long (at most 4300 are read)",
                 id="json-integer-too-long-not-digits-in-a-string-or-a-fraction"),
]


@pytest.mark.parametrize(("text", "message"), BAD_INPUT)
def test_bad_input_names_object_and_field(text: str, message: str) -> None:
    assert error_of(text) == message


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(InputError) as info:
        read_snapshot(missing)
    assert str(info.value) == f"{missing}: cannot read: no such file"


def test_directory_and_binary(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read: is a directory"):
        read_snapshot(tmp_path)
    binary = tmp_path / "snap.bin"
    binary.write_bytes(b"kind: Node\n\xff\xfe")
    with pytest.raises(InputError) as info:
        read_snapshot(binary)
    assert str(info.value) == f"{binary}: not UTF-8 text (invalid byte at offset 11)"
    binary.write_bytes(b"kind: Node\n\xff\xfe\x00")
    with pytest.raises(InputError) as info:
        read_snapshot(binary)
    assert str(info.value) == f"{binary}: not a YAML or JSON text: a NUL byte at offset 13"


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero here")
def test_an_endless_binary_device_is_refused_at_its_first_chunk() -> None:
    """``/dev/zero`` used to be read to the 2 GiB size bound before anything was said."""
    with pytest.raises(InputError) as info:
        read_snapshot("/dev/zero")
    assert str(info.value) == "/dev/zero: not a YAML or JSON text: a NUL byte at offset 0"


# --------------------------------------------------------------------------- hostile input


def billion_laughs(levels: int = 9) -> str:
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, levels):
        refs = ", ".join([f"*a{i - 1}"] * 9)
        lines.append(f"a{i}: &a{i} [{refs}]")
    return "\n".join(lines) + "\nkind: Node\nmetadata: {name: n}\n"


HOSTILE = [
    pytest.param(billion_laughs(), f"aliases expand to more than {MAX_ALIAS_EXPANSION} nodes", id="billion-laughs"),
    pytest.param("a: &a [*a]\n", "alias *a does not name a finished anchor", id="recursive-alias"),
    pytest.param("[" * 100_000 + "]" * 100_000, "invalid JSON: nested too deeply", id="deep-json"),
    # Deeper than our guard but within libyaml's own nesting limit (about 1,000), so the guard is what
    # refuses it; a far deeper flow document is refused by whichever layer comes first (see below).
    pytest.param("x: " + "[" * (MAX_DEPTH + 50) + "]" * (MAX_DEPTH + 50), f"nested deeper than {MAX_DEPTH} levels",
                 id="deep-flow-yaml"),
    pytest.param("- " * 100_000 + "x", f"nested deeper than {MAX_DEPTH} levels", id="deep-block-yaml"),
    pytest.param("".join("  " * i + f"k{i}:\n" for i in range(MAX_DEPTH + 5)), f"nested deeper than {MAX_DEPTH} levels",
                 id="deep-indented-yaml"),
    pytest.param("x: !!python/object:os.system {}\n", "unsupported tag tag:yaml.org,2002:python/object:os.system",
                 id="python-object-tag"),
    pytest.param("x: !!python/name:os.system ''\n", "unsupported tag tag:yaml.org,2002:python/name:os.system", id="python-name-tag"),
]


@pytest.mark.parametrize(("text", "problem"), HOSTILE)
def test_hostile_input_fails_cleanly(text: str, problem: str) -> None:
    assert problem in error_of(text)


@pytest.mark.parametrize("depth", [MAX_DEPTH + 50, 100_000], ids=["past-our-guard", "past-libyaml-limit"])
def test_deep_flow_yaml_is_one_clean_error_for_the_user(tmp_path: Path, depth: int) -> None:
    """What a user sees for a hostile, deeply nested flow document: exit 2 and one line naming the
    file, no traceback — whichever layer refuses it (libyaml has its own depth limit, which differs
    between PyYAML releases; our guard sits below it)."""
    path = tmp_path / "deep.yaml"
    path.write_text("x: " + "[" * depth + "]" * depth)
    done = subprocess.run([sys.executable, "-m", "adapters", "schedule", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert str(path) in lines[0] and "Traceback" not in done.stderr
    assert "nest" in lines[0]


def test_deep_but_allowed_nesting_in_ignored_fields() -> None:
    deep = "[" * (MAX_DEPTH - 10) + "]" * (MAX_DEPTH - 10)
    text = f"kind: Node\nmetadata: {{name: n, annotations: {{}}}}\nspec: {{configSource: {deep}}}\n"
    assert read(text).snapshot.nodes[0].name == "n"


def test_garbled_objects_never_raise_anything_but_input_error() -> None:
    """Replace random values of a realistic dump with values of the wrong type: InputError or a snapshot."""
    base = yaml.safe_load(KUBECTL_YAML)
    junk: list[Any] = [None, "", "x", -1, 1.5, True, [], {}, [1], {"a": 1}, "12x", 10**30, "-5"]
    rng = random.Random(20250612)

    def paths(node: Any, prefix: tuple = ()) -> list[tuple]:
        out = [prefix]
        if isinstance(node, dict):
            for key, value in node.items():
                out += paths(value, prefix + (key,))
        elif isinstance(node, list):
            for i, value in enumerate(node):
                out += paths(value, prefix + (i,))
        return out

    all_paths = [p for p in paths(base) if p]
    for _ in range(300):
        doc = json.loads(json.dumps(base))
        path = rng.choice(all_paths)
        target = doc
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = rng.choice(junk)
        try:
            read(json.dumps(doc))
        except InputError as exc:
            assert str(exc)


# --------------------------------------------------------------------------- config and plan


CONFIG_ERRORS = [
    pytest.param("solver: {timeLimitSeconds: -1}\n", "config: solver.timeLimitSeconds: -1 is below the minimum 0", id="negative-time-limit"),
    pytest.param("solver: {timeLimitSeconds: soon}\n", 'config: solver.timeLimitSeconds: "soon" is not a number', id="time-limit-not-a-number"),
    pytest.param("solver: {timeLimit: 3}\n", "config: solver.timeLimit: unknown key", id="misspelt-key"),
    pytest.param("profile: fastest\n", "config: profile: unknown value \"fastest\", expected 'default' or 'packing'", id="unknown-profile"),
    pytest.param("scoring: {weights: {Magic: 1}}\n", "config: scoring: unknown score plugin(s) in weights: ['Magic']",
                 id="unknown-plugin-weight"),
    pytest.param("- a\n", "config: expected a mapping, got a list", id="not-a-mapping"),
    pytest.param("a: [\n", "cfg.yaml: invalid YAML: line 2, column 1: did not find expected node content",
                 id="malformed"),
]


@pytest.mark.parametrize(("text", "message"), CONFIG_ERRORS)
def test_config_errors(text: str, message: str, tmp_path: Path) -> None:
    path = tmp_path / "cfg.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        load_config(path)
    assert str(info.value).replace(str(tmp_path) + "/", "") == message


@pytest.mark.parametrize(
    ("text", "check"),
    [
        pytest.param("", lambda c: c == SchedulerConfig(), id="empty-is-defaults"),
        pytest.param("solver: {timeLimitSeconds: 2.5, workers: 2}\n", lambda c: (c.solver.time_limit_seconds, c.solver.workers) == (2.5, 2),
                     id="camel-case"),
        pytest.param('{"scheduler_name": "batch"}', lambda c: c.scheduler_name == "batch", id="snake-case-json"),
    ],
)
def test_config_ok(text: str, check: Any) -> None:
    assert check(load_config(io.StringIO(text)))


PLAN = {
    "assignments": [{"pod": "ml/train-0", "node": "kind-worker"}],
    "preemptions": [],
    "unschedulable": [{"pod": "ml/other", "message": "0/1 nodes are available: 1 Insufficient cpu."}],
    "stats": {"engine": "greedy", "status": "GREEDY", "objective": None, "bound": None, "gap": None,
              "wall_time_s": 0.01, "fallback": False, "fallback_reason": None},
}


def test_plan_round_trip() -> None:
    plan = load_plan(io.StringIO(json.dumps(PLAN)))
    again = load_plan(io.StringIO(yaml.safe_dump(plan.to_json_dict())))
    assert again == plan
    assert plan.assignment_map() == {"ml/train-0": "kind-worker"}


def test_plan_from_another_tool() -> None:
    plan = load_plan(io.StringIO('{"assignments": [{"pod": "a/b", "node": "n", "score": 3}], "futureKey": 1}'))
    assert plan.stats.engine == "external"
    assert plan.assignment_map() == {"a/b": "n"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param('{"assignments": [{"pod": "a/b"}]}', "plan: assignments[0].node: required field is missing", id="assignment-without-node"),
        pytest.param('{"assignments": {"a/b": "n"}}', "plan: assignments: expected a list, got a mapping", id="assignments-not-a-list"),
        pytest.param("[]", "plan: expected a mapping, got a list", id="not-a-mapping"),
        pytest.param('{"assignments": ["a/b"]}', 'plan: assignments[0]: expected a mapping, got "a/b"', id="assignment-not-a-mapping"),
        pytest.param('{"assignments": [], "stats": 3}', "plan: stats: expected a mapping, got 3", id="stats-not-a-mapping"),
        pytest.param("", "<input>: empty input: expected a plan", id="empty"),
    ],
)
def test_plan_errors(text: str, message: str) -> None:
    with pytest.raises(InputError) as info:
        load_plan(io.StringIO(text))
    assert str(info.value) == message


# --------------------------------------------------------------------------- replicas share a spec


def _replica(name: str, node: Any, cpu: Any = "250m") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "web", "image": "nginx:1.27", "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}],
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "web", "effect": "NoSchedule"}],
    }
    if node is not ...:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "shop", "labels": {"app": "web"}},
            "spec": spec}


def _list(*items: dict[str, Any]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": list(items)})


def test_replicas_with_one_spec_share_it_but_keep_their_node() -> None:
    """Pods whose specs differ only in nodeName are read once: the containers and tolerations are
    one object, while each pod keeps its own node (none for the pending one)."""
    snapshot = read(_list(_replica("web-1", "node-a"), _replica("web-2", "node-b"), _replica("web-3", ...),
                          _replica("web-4", None), _replica("web-5", "node-a", cpu="500m"))).snapshot
    pods = {p.metadata.name: p for p in snapshot.pods}
    assert [pods[f"web-{i}"].spec.node_name for i in range(1, 6)] == ["node-a", "node-b", "", "", "node-a"]
    assert pods["web-1"].spec.containers is pods["web-2"].spec.containers is pods["web-3"].spec.containers
    assert pods["web-4"].spec.tolerations is pods["web-1"].spec.tolerations
    assert pods["web-5"].spec.containers is not pods["web-1"].spec.containers
    assert pods["web-5"].spec.containers[0].resources.requests["cpu"] == 500
    assert pods["web-2"].spec == pods["web-1"].spec.model_copy(update={"node_name": "node-b"})
    # what the input set, as pydantic's own copy says (the reader copies the spec without it)
    assert (pods["web-2"].spec.model_fields_set
            == pods["web-1"].spec.model_copy(update={"node_name": "node-b"}).model_fields_set)
    assert pods["web-4"].spec.model_dump(exclude_unset=True) == pods["web-3"].spec.model_dump(exclude_unset=True)
    # the key leaves the decoded spec as it was (nodeName and affinity taken out, then put back)
    raw = _daemon_pod("web-6", "node-c")["spec"]
    before = json.dumps(raw, sort_keys=True)
    key = snapshot_io._spec_key(raw)
    assert json.dumps(raw, sort_keys=True) == before
    assert key == snapshot_io._spec_key({**_daemon_pod("web-7", "node-d")["spec"], "affinity": raw["affinity"]})


@pytest.mark.parametrize("bad, field, problem", [
    (_replica("web-2", "node-a", cpu="12x"), "spec.containers[0].resources.requests.cpu", '"12x" is not a quantity'),
    (_replica("web-2", 7), "spec.nodeName", "7 is not a string"),
])
def test_a_replica_that_differs_is_still_checked(bad: dict[str, Any], field: str, problem: str) -> None:
    """After a spec is shared, a pod whose spec differs (a bad quantity, a nodeName that is not a
    string) is validated in full and its problem named as for the first pod."""
    with pytest.raises(InputError) as err:
        read(_list(_replica("web-1", "node-a"), bad))
    assert str(err.value).startswith(f"pods/shop/web-2: {field}: {problem}")


def _as_served(pod: dict[str, Any], token: str, *, claim: Optional[str] = None) -> dict[str, Any]:
    """``pod`` as a real API server gives it back: the service account's token mounted from a
    projected volume whose name ends in a random suffix, the defaults the server fills in, and
    per-pod fields the scheduler never reads (an environment variable, a hostname)."""
    spec = pod["spec"]
    volume = f"kube-api-access-{token}"
    spec["volumes"] = [{"name": volume, "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                                    "path": "namespace"}]}}]}},
                       {"name": "settings", "configMap": {"name": "web-settings"}},
                       {"name": "scratch", "emptyDir": {}}]
    if claim:
        spec["volumes"].append({"name": "data", "persistentVolumeClaim": {"claimName": claim}})
    for container in spec["containers"]:
        container.update({"imagePullPolicy": "IfNotPresent", "terminationMessagePath": "/dev/termination-log",
                          "env": [{"name": "POD_TOKEN", "value": token}],
                          "volumeMounts": [{"name": volume, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                                            "readOnly": True}]})
    spec.update({"dnsPolicy": "ClusterFirst", "restartPolicy": "Always", "serviceAccountName": "default",
                 "terminationGracePeriodSeconds": 30, "hostname": f"web-{token}", "securityContext": {}})
    return pod


def test_replicas_as_a_real_server_gives_them_share_one_spec() -> None:
    """Every pod of a real cluster mounts its token from a volume with a random name (and may
    differ in fields no rule reads): replicas still share one parsed spec, and each reads as its
    own full parse does — the token and config volumes left out, an emptyDir and a claim kept."""
    items = [_as_served(_replica("web-1", "node-a"), "x7k2p"), _as_served(_replica("web-2", "node-b"), "q9zzm"),
             _as_served(_replica("web-3", None), "a0b1c"), _as_served(_replica("web-4", "node-a"), "r2d2c", claim="d")]
    pods = {p.metadata.name: p for p in read(_list(*items)).snapshot.pods}
    assert pods["web-1"].spec.containers is pods["web-2"].spec.containers is pods["web-3"].spec.containers
    assert pods["web-1"].spec.volumes is pods["web-2"].spec.volumes
    assert [v["name"] for v in pods["web-1"].spec.volumes] == ["scratch"]
    assert [v["name"] for v in pods["web-4"].spec.volumes] == ["scratch", "data"]  # a claim is read: its own spec
    assert [pods[f"web-{i}"].spec.node_name for i in range(1, 5)] == ["node-a", "node-b", "", "node-a"]
    for item in items:
        alone = read(_list(item)).snapshot.pods[0]
        assert pods[item["metadata"]["name"]].model_dump() == alone.model_dump()


def _with(pod: dict[str, Any], part: str, **fields: Any) -> dict[str, Any]:
    pod[part] = {**pod.get(part, {}), **fields}
    return pod


@pytest.mark.parametrize("bad, field, problem", [
    (_with(_replica("web-2", "node-b"), "metadata", creationTimestamp="yesterday"), "metadata.creationTimestamp",
     '"yesterday" is not a timestamp'),
    (_with(_replica("web-2", "node-b"), "status", startTime=[]), "status.startTime", "a list is not a timestamp"),
])
def test_a_replica_whose_spec_is_shared_still_has_its_metadata_and_status_checked(
        bad: dict[str, Any], field: str, problem: str) -> None:
    """A pod whose spec is one read already (its spec is not validated again) is still checked in
    its own metadata and status, and named in the error."""
    with pytest.raises(InputError) as err:
        read(_list(_replica("web-1", "node-a"), bad))
    assert str(err.value).startswith(f"pods/shop/web-2: {field}: {problem}"), str(err.value)


def _daemon_pod(name: str, node: str, operator: str = "In") -> dict[str, Any]:
    """A DaemonSet's pod: its spec names its node twice, in nodeName and in a matchFields term."""
    pod = _replica(name, node)
    pod["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": operator, "values": [node]}]}]}}}
    return pod


def test_daemonset_pods_share_their_spec_but_keep_their_own_node_affinity() -> None:
    """A DaemonSet's pods differ in nodeName and in the node their affinity names: the rest of
    the spec is one object, each pod's affinity its own (validated on its own)."""
    pods = {p.metadata.name: p for p in read(_list(_daemon_pod("ds-1", "node-a"), _daemon_pod("ds-2", "node-b"),
                                                   _replica("web-1", "node-c"))).snapshot.pods}
    a, b = pods["ds-1"].spec, pods["ds-2"].spec
    assert (a.node_name, b.node_name) == ("node-a", "node-b")
    assert a.containers is b.containers and a.tolerations is b.tolerations
    def named(spec) -> list[list[str]]:
        terms = spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution.node_selector_terms
        return [t.match_fields[0].values for t in terms]

    assert (named(a), named(b)) == ([["node-a"]], [["node-b"]])
    assert pods["web-1"].spec.affinity is None  # the same containers and tolerations, no affinity
    assert pods["web-1"].spec.containers is a.containers


def test_a_daemonset_pod_with_a_bad_affinity_is_named_like_any_other() -> None:
    with pytest.raises(InputError) as err:
        read(_list(_daemon_pod("ds-1", "node-a"), _daemon_pod("ds-2", "node-b", operator="Near")))
    message = str(err.value)
    field = ("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
             ".nodeSelectorTerms[0].matchFields[0].operator")
    assert message.startswith(f"pods/shop/ds-2: {field}"), message


def test_replicas_with_yaml_dates_in_their_spec_are_read() -> None:
    """An unquoted date in YAML is a date, not a string: a spec holding one is read in full for
    each pod (not shared), and the dump reads as before."""
    pod = """\
- apiVersion: v1
  kind: Pod
  metadata: {{name: {name}, namespace: default}}
  spec:
    nodeName: {node}
    containers:
    - name: c
      resources: {{requests: {{cpu: 100m}}}}
      env:
      - {{name: SINCE, value: 2001-12-14}}
"""
    text = "apiVersion: v1\nkind: List\nitems:\n" + pod.format(name="a", node="n1") + pod.format(name="b", node="n2")
    pods = {p.metadata.name: p for p in read(text).snapshot.pods}
    assert (pods["a"].spec.node_name, pods["b"].spec.node_name) == ("n1", "n2")
    assert pods["b"].spec.containers[0].resources.requests["cpu"] == 100

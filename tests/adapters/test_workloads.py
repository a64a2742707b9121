"""Benchmark workload generators and bounds: deterministic, parseable, realistic, and built so
that the placements they promise exist."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from functools import lru_cache

import pytest
import yaml

from adapters.bench import (
    SCALE_TARGETS,
    WORKLOADS,
    dump,
    generate,
    max_placeable_bound,
    min_nodes_bound,
    placeable_bound,
    repack,
    scale_3k,
    scale_10k,
    to_snapshot,
)
from adapters.bench.bounds import statically_feasible
from models import DEFAULT_SCHEDULER_NAME, POD_GROUP_LABEL, ClusterSnapshot, Node, Pod, PodGroup, pod_requests
from models.objects import LabelSelector

NAMES = list(WORKLOADS)


@lru_cache(maxsize=None)
def quick(name: str, seed: int = 0):
    workload = generate(name, "quick", seed)
    return workload, workload.snapshot()


def pods_of(objects):
    return [o for o in objects if o["kind"] == "Pod"]


# --------------------------------------------------------------------------- a placement checker


def _term_matches(term, owner: Pod, other: Pod) -> bool:
    scope = set(term.namespaces) or {owner.metadata.namespace}
    if other.metadata.namespace not in scope or term.label_selector is None:
        return False
    return term.label_selector.matches(other.metadata.labels)


def _anti_terms(pod: Pod):
    a = pod.spec.affinity
    if a is None or a.pod_anti_affinity is None:
        return []
    return a.pod_anti_affinity.required_during_scheduling_ignored_during_execution


def check_placement(snapshot: ClusterSnapshot, witness: dict[str, str], evicted: set[str]) -> None:
    """The final state (bound pods minus evictions, plus ``witness``) obeys every hard rule the
    workloads use: capacity, static filters, hostname anti-affinity, zone spread, gangs, and
    evictions only of lower-priority pods."""
    nodes = snapshot.node_by_name
    pods = snapshot.pod_by_key
    on_node: dict[str, list[Pod]] = defaultdict(list)
    for pod in snapshot.bound_pods():
        if pod.key not in evicted:
            on_node[pod.spec.node_name].append(pod)
    for key, node in witness.items():
        pod = pods[key]
        assert not pod.spec.node_name, f"{key} is not pending"
        assert statically_feasible(pod, nodes[node]), f"{key} may not run on {node}"
        on_node[node].append(pod)

    for node, hosted in on_node.items():
        alloc = nodes[node].allocatable
        assert len(hosted) <= alloc["pods"], node
        used: Counter = Counter()
        for pod in hosted:
            used.update(pod_requests(pod))
        for resource, amount in used.items():
            assert amount <= alloc.get(resource, 0), f"{node}: {resource} {amount} > {alloc.get(resource, 0)}"

    for victim in evicted:
        node = pods[victim].spec.node_name
        preemptors = [p for p in on_node[node] if p.key in witness]
        assert any((p.spec.priority or 0) > (pods[victim].spec.priority or 0) for p in preemptors), victim

    for node, hosted in on_node.items():
        for pod in hosted:
            for term in _anti_terms(pod):
                assert term.topology_key == "kubernetes.io/hostname"
                clash = [o.key for o in hosted if o is not pod and _term_matches(term, pod, o)]
                assert not clash, f"{pod.key} shares {node} with {clash}"

    zone_of = {name: n.metadata.labels.get("topology.kubernetes.io/zone") for name, n in nodes.items()}
    final = [p for hosted in on_node.values() for p in hosted]
    where = {p.key: witness.get(p.key, p.spec.node_name) for p in final}
    for key, node in witness.items():
        pod = pods[key]
        for c in pod.spec.topology_spread_constraints:
            if c.when_unsatisfiable != "DoNotSchedule":
                continue
            selector = c.label_selector or LabelSelector()

            def counted(other: Pod) -> bool:
                if other.metadata.namespace != pod.metadata.namespace or not selector.matches(other.metadata.labels):
                    return False
                return all(other.metadata.labels.get(k) == pod.metadata.labels.get(k) for k in c.match_label_keys)

            counts = Counter({zone_of[n]: 0 for n in nodes})
            counts.update(zone_of[where[o.key]] for o in final if counted(o))
            assert counts[zone_of[node]] - min(counts.values()) <= c.max_skew, f"{key}: {dict(counts)}"

    placed_members: Counter = Counter()
    running_members: Counter = Counter()
    for pod in final:
        group = pod.metadata.labels.get(POD_GROUP_LABEL)
        if group:
            (placed_members if pod.key in witness else running_members)[f"{pod.metadata.namespace}/{group}"] += 1
    for group, placed in placed_members.items():
        need = snapshot.pod_group_by_key[group].spec.min_member - running_members[group]
        assert placed >= need, f"gang {group}: {placed} placed, {need} needed"


# --------------------------------------------------------------------------- every workload


@pytest.mark.parametrize("name", NAMES)
def test_same_seed_same_objects_other_seed_other_objects(name):
    workload, _ = quick(name)
    assert generate(name, "quick", 0).objects == workload.objects
    other = generate(name, "quick", 1).objects
    assert other != workload.objects
    assert {o["metadata"]["uid"] for o in other}.isdisjoint({o["metadata"]["uid"] for o in workload.objects})


@pytest.mark.parametrize("name", NAMES)
def test_parses_into_snapshot_with_the_announced_counts(name):
    workload, snapshot = quick(name)
    meta = workload.metadata
    assert len(snapshot.nodes) == meta["nodes"]
    assert 20 <= meta["nodes"] <= 120
    assert 30 <= meta["pods"] <= 400
    assert len(snapshot.bound_pods()) == meta["running"]
    assert [p.key for p in snapshot.pending_pods()] == sorted(meta["pending"], key=[p.key for p in snapshot.pods].index)
    assert len(meta["pending"]) == meta["pods"] == len(set(meta["pending"]))


@pytest.mark.parametrize("name", NAMES)
def test_pending_pods_are_ours_and_running_pods_run(name):
    workload, _ = quick(name)
    pending = set(workload.pending)
    for pod in pods_of(workload.objects):
        key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
        if key in pending:
            assert pod["spec"]["schedulerName"] == DEFAULT_SCHEDULER_NAME
            assert "nodeName" not in pod["spec"]
            assert pod["status"]["phase"] == "Pending"
        else:
            assert pod["spec"]["nodeName"]
            assert pod["status"]["phase"] == "Running"
            assert pod["status"]["conditions"][-1] == {"type": "PodScheduled", "status": "True", "lastTransitionTime": pod["metadata"]["creationTimestamp"]}


@pytest.mark.parametrize("name", NAMES)
def test_objects_look_like_kubectl_output(name):
    workload, _ = quick(name)
    for obj in workload.objects:
        assert obj["apiVersion"] and obj["kind"]
        meta = obj["metadata"]
        assert meta["name"] and meta["uid"] and meta["creationTimestamp"].endswith("Z")
    for pod in pods_of(workload.objects):
        for container in pod["spec"]["containers"]:
            for value in container["resources"]["requests"].values():
                assert isinstance(value, str)
    for node in (o for o in workload.objects if o["kind"] == "Node"):
        assert all(isinstance(v, str) for v in node["status"]["allocatable"].values())
        assert node["metadata"]["labels"]["kubernetes.io/hostname"] == node["metadata"]["name"]


@pytest.mark.parametrize("name", NAMES)
def test_creation_timestamps_are_distinct_and_follow_the_queue(name):
    workload, _ = quick(name)
    stamps = [o["metadata"]["creationTimestamp"] for o in workload.objects]
    assert len(set(stamps)) == len(stamps)
    by_key = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p["metadata"]["creationTimestamp"] for p in pods_of(workload.objects)}
    pending_stamps = [by_key[k] for k in workload.pending]
    assert pending_stamps == sorted(pending_stamps)


@pytest.mark.parametrize("name", NAMES)
def test_pods_of_one_controller_are_interchangeable(name):
    """Pods of a ReplicaSet or Job (running or pending) differ only in name, uid, node, status
    and timestamps. (StatefulSet pods carry their ordinal; none of them is pending.)"""
    workload, _ = quick(name)
    by_owner: dict[str, list[dict]] = defaultdict(list)
    for pod in pods_of(workload.objects):
        refs = pod["metadata"].get("ownerReferences", [])
        if refs and refs[0]["kind"] in ("ReplicaSet", "Job"):
            by_owner[refs[0]["uid"]].append(pod)
        elif "nodeName" not in pod["spec"]:
            raise AssertionError("every pending pod belongs to a ReplicaSet or a Job")
    assert by_owner
    for pods in by_owner.values():
        first = pods[0]
        ref = first["metadata"]["ownerReferences"][0]
        names = [p["metadata"]["name"] for p in pods]
        assert len(set(names)) == len(names)
        assert len({p["metadata"]["uid"] for p in pods}) == len(pods)
        for pod in pods:
            assert pod["metadata"]["labels"] == first["metadata"]["labels"]
            assert {k: v for k, v in pod["spec"].items() if k != "nodeName"} == {k: v for k, v in first["spec"].items() if k != "nodeName"}
            assert pod["metadata"]["name"].startswith(ref["name"] + "-")
        if ref["kind"] == "ReplicaSet":
            assert ref["name"].endswith("-" + first["metadata"]["labels"]["pod-template-hash"])


@pytest.mark.parametrize("name", NAMES)
def test_witness_is_a_valid_placement(name):
    workload, snapshot = quick(name)
    witness = workload.metadata["witness"]
    assert witness, "every benchmark workload carries a known placement"
    assert set(witness) <= set(workload.pending)
    check_placement(snapshot, witness, set(workload.metadata["witness_evictions"]))
    assert workload.metadata["achievable"] == len(witness)


@pytest.mark.parametrize("name", NAMES)
def test_bounds_are_sane(name):
    workload, snapshot = quick(name)
    bound = placeable_bound(snapshot)
    assert workload.metadata["achievable"] <= bound.total <= workload.metadata["pods"]
    assert bound.total == max_placeable_bound(snapshot)
    assert bound.total <= bound.sum_of_groups
    assert sum(g.size for g in bound.groups) == workload.metadata["pods"]
    nodes = min_nodes_bound(snapshot)
    assert 1 <= nodes <= workload.metadata["nodes"]


@pytest.mark.parametrize("name", NAMES)
def test_fast_parse_equals_plain_model_validation(name):
    workload, snapshot = quick(name)
    by_key = snapshot.pod_by_key
    for obj in pods_of(workload.objects)[::7]:
        plain = Pod.model_validate(obj)
        assert by_key[plain.key] == plain
    nodes = snapshot.node_by_name
    for obj in [o for o in workload.objects if o["kind"] == "Node"][::5]:
        assert nodes[obj["metadata"]["name"]] == Node.model_validate(obj)


# --------------------------------------------------------------------------- workload by workload


@pytest.mark.parametrize("name", ["fragmentation", "anti-affinity", "spread", "preemption", "gpu-pools", "node-affinity", "basic"])
def test_everything_pending_can_be_placed(name):
    workload, _ = quick(name)
    assert workload.metadata["achievable"] == workload.metadata["pods"]


def test_fragmentation_packs_every_node_exactly():
    workload, snapshot = quick("fragmentation")
    used: Counter = Counter()
    for key, node in workload.metadata["witness"].items():
        used[node] += pod_requests(snapshot.pod_by_key[key])["cpu"]
    assert set(used) == set(snapshot.node_by_name)
    assert all(used[n.name] == n.allocatable["cpu"] == 4000 for n in snapshot.nodes)
    sizes = Counter(pod_requests(p)["cpu"] for p in snapshot.pending_pods())
    assert set(sizes) == {1000, 1500, 3000}
    # Small pods mostly arrive first.
    first = [snapshot.pod_by_key[k] for k in workload.pending[: len(workload.pending) // 2]]
    assert all(pod_requests(p)["cpu"] == 1000 for p in first)


def test_gang_groups_have_their_members_and_overcommit_the_cluster():
    workload, snapshot = quick("gang")
    members = Counter(p.metadata.labels[POD_GROUP_LABEL] for p in snapshot.pending_pods())
    assert snapshot.pod_groups and len(members) == len(snapshot.pod_groups)
    for group in snapshot.pod_groups:
        assert isinstance(group, PodGroup) and group.api_version == "scheduling.x-k8s.io/v1alpha1"
        assert 2 <= group.spec.min_member <= 16
        assert group.spec.min_member <= members[group.metadata.name] <= group.spec.min_member + 1
    assert any(members[g.metadata.name] > g.spec.min_member for g in snapshot.pod_groups)
    demand = sum(pod_requests(p)["cpu"] for p in snapshot.pending_pods())
    capacity = sum(n.allocatable["cpu"] for n in snapshot.nodes)
    assert demand > 1.3 * capacity
    assert max_placeable_bound(snapshot) < workload.metadata["pods"]


def test_gpu_pools_taint_gpu_nodes_and_only_gpu_pods_tolerate_them():
    _, snapshot = quick("gpu-pools")
    gpu_nodes = [n for n in snapshot.nodes if "nvidia.com/gpu" in n.allocatable]
    assert gpu_nodes and {n.allocatable["nvidia.com/gpu"] for n in gpu_nodes} == {4, 8}
    assert all(any(t.key == "nvidia.com/gpu" and t.effect == "NoSchedule" for t in n.spec.taints) for n in gpu_nodes)
    for pod in snapshot.pending_pods():
        gpus = pod_requests(pod).get("nvidia.com/gpu", 0)
        tolerates = any(statically_feasible(pod, n) for n in gpu_nodes)
        assert tolerates == (gpus > 0)
    assert {pod_requests(p).get("nvidia.com/gpu", 0) for p in snapshot.pending_pods()} == {0, 1, 2, 4, 8}


def test_preemption_wave_outranks_a_full_cluster_with_a_pdb():
    workload, snapshot = quick("preemption")
    assert {c.metadata.name: c.value for c in snapshot.priority_classes} == {"low-batch": 100, "low-service": 1000, "high-priority": 100000}
    wave = {p.spec.priority for p in snapshot.pending_pods()}
    assert wave == {100000}
    for node in snapshot.nodes:
        hosted = [p for p in snapshot.bound_pods() if p.spec.node_name == node.name]
        assert sum(pod_requests(p)["cpu"] for p in hosted) == node.allocatable["cpu"]
    assert max_placeable_bound(snapshot, []) == 0
    checkpoint = next(p for p in snapshot.pdbs if p.metadata.name == "checkpoint")
    assert checkpoint.status.disruptions_allowed == 0
    covered = [p for p in snapshot.bound_pods() if checkpoint.spec.selector.matches(p.metadata.labels)]
    assert covered and all(p.spec.priority == 100 for p in covered)
    assert not set(workload.metadata["witness_evictions"]) & {p.key for p in covered}


def test_spread_starts_skewed():
    _, snapshot = quick("spread")
    zone = {n.name: n.metadata.labels["topology.kubernetes.io/zone"] for n in snapshot.nodes}
    for app in ("checkout", "catalog"):
        counts = Counter(zone[p.spec.node_name] for p in snapshot.bound_pods() if p.metadata.labels["app"] == app)
        assert max(counts.values()) - min([counts.get(z, 0) for z in set(zone.values())]) > 1


def test_anti_affinity_search_is_pinned_to_ssd_nodes():
    _, snapshot = quick("anti-affinity")
    search = [p for p in snapshot.pending_pods() if p.metadata.labels["app"] == "search"]
    ssd = [n for n in snapshot.nodes if n.metadata.labels["disktype"] == "ssd"]
    assert len(search) == len(ssd)
    assert all(statically_feasible(search[0], n) == (n in ssd) for n in snapshot.nodes)


def test_mixed_blends_every_component():
    workload, snapshot = quick("mixed")
    namespaces = {p.metadata.namespace for p in snapshot.pending_pods()}
    # topology-gang is not blended in: its racks and blocks would need labels on mixed's nodes.
    assert namespaces == set(NAMES) - {"mixed", "topology-gang"}
    # Arrivals are interleaved: the first twenty pending pods come from several components.
    assert len({k.split("/")[0] for k in workload.pending[:20]}) >= 3


# --------------------------------------------------------------------------- targets and repack


def test_scale_3k_target_shape():
    workload = scale_3k(0)
    meta = workload.metadata
    assert (meta["nodes"], meta["pods"], meta["running"]) == (1000, 3000, 2000)
    pending = set(workload.pending)
    owners = {p["metadata"]["ownerReferences"][0]["uid"] for p in pods_of(workload.objects) if f"{p['metadata']['namespace']}/{p['metadata']['name']}" in pending}
    assert len(owners) == 10
    per_node = Counter(p["spec"]["nodeName"] for p in pods_of(workload.objects) if "nodeName" in p["spec"])
    assert set(per_node.values()) == {2}
    assert "scale-3k" in SCALE_TARGETS


def test_scale_10k_target_shape():
    workload = scale_10k(0)
    meta = workload.metadata
    assert (meta["nodes"], meta["pods"], meta["running"]) == (5000, 10000, 0)
    owners = Counter(p["metadata"]["ownerReferences"][0]["uid"] for p in pods_of(workload.objects))
    assert sorted(owners.values()) == [1000] * 10


@pytest.fixture(scope="module")
def repack_100():
    workload = repack(100, 0)
    return workload, workload.snapshot()


def test_repack_cluster_is_running_and_half_empty(repack_100):
    workload, snapshot = repack_100
    assert workload.metadata["pods"] == 0 and not snapshot.pending_pods()
    assert len(snapshot.nodes) == 100
    check_placement(snapshot, {}, set())
    utilisation = []
    for node in snapshot.nodes:
        used = sum(pod_requests(p).get("cpu", 0) for p in snapshot.bound_pods() if p.spec.node_name == node.name)
        utilisation.append(used / node.allocatable["cpu"])
    assert max(utilisation) <= 0.7 and sum(utilisation) / len(utilisation) < 0.5
    assert min_nodes_bound(snapshot) < len(snapshot.nodes) // 2


def test_repack_has_every_kind_of_pod_the_rules_care_about(repack_100):
    workload, snapshot = repack_100
    kinds = Counter((p.metadata.owner_references[0].kind if p.metadata.owner_references else "") for p in snapshot.pods)
    assert {"ReplicaSet", "StatefulSet", "Job", "DaemonSet", ""} <= set(kinds)
    daemon_nodes = Counter(p.spec.node_name for p in snapshot.pods if kinds and p.metadata.owner_references and p.metadata.owner_references[0].kind == "DaemonSet")
    assert set(daemon_nodes) == set(snapshot.node_by_name) and set(daemon_nodes.values()) == {3}
    assert any(p.metadata.annotations.get("cluster-autoscaler.kubernetes.io/safe-to-evict") == "false" for p in snapshot.pods)
    assert any(any("emptyDir" in v for v in p.spec.volumes) for p in snapshot.pods)
    assert {b.metadata.name for b in snapshot.pdbs} >= {"redis", "kafka", "ha-api"}
    for pdb in snapshot.pdbs:
        matched = [p for p in snapshot.pods if p.metadata.namespace == pdb.metadata.namespace and pdb.spec.selector.matches(p.metadata.labels)]
        assert pdb.status.expected_pods == len(matched) > 0
    assert {n.metadata.labels["node.kubernetes.io/instance-type"] for n in snapshot.nodes} == {"m5.xlarge", "m5.2xlarge"}
    assert repack(100, 0).objects == workload.objects


# --------------------------------------------------------------------------- files and errors


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_dump_writes_a_list_that_parses_back(tmp_path, suffix):
    workload, snapshot = quick("preemption")
    path = dump(workload, tmp_path / f"w{suffix}")
    text = path.read_text()
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    document = json.loads(text) if suffix == ".json" else yaml.load(text, Loader=loader)
    assert document["kind"] == "List"
    if suffix == ".json":
        assert document["items"] == workload.objects
    again = to_snapshot(document)
    assert [p.key for p in again.pods] == [p.key for p in snapshot.pods]
    assert again.pods == snapshot.pods


def test_unknown_names_are_refused():
    with pytest.raises(ValueError, match="unknown workload"):
        generate("nope")
    with pytest.raises(ValueError, match="unknown scale"):
        generate("basic", "huge")


# --------------------------------------------------------------------------- bounds, by hand


def _node(name, cpu="4", memory="16Gi", pods="110", labels=None, taints=None, gpus=None):
    alloc = {"cpu": cpu, "memory": memory, "pods": pods}
    if gpus:
        alloc["nvidia.com/gpu"] = gpus
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {"taints": taints or []},
        "status": {"allocatable": alloc},
    }


def _pod(name, cpu="1", memory="1Gi", node=None, labels=None, priority=0, owner=None, **spec):
    pod = {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "labels": labels or {"app": "x"}},
        "spec": {
            "schedulerName": DEFAULT_SCHEDULER_NAME,
            "priority": priority,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
            **spec,
        },
    }
    if node:
        pod["spec"]["nodeName"] = node
        pod["status"] = {"phase": "Running"}
    if owner:
        pod["metadata"]["ownerReferences"] = [{"kind": owner, "name": "o", "uid": "u"}]
    return pod


def _snap(*objects):
    return to_snapshot(list(objects))


@pytest.mark.parametrize(
    "case, objects, bound",
    [
        ("alone on empty nodes, capped by pod count", [_node("a"), _node("b")] + [_pod(f"p{i}") for i in range(3)], 3),
        ("cpu limits each node", [_node("a"), _node("b")] + [_pod(f"p{i}", cpu="3") for i in range(5)], 2),
        ("pods allocatable counts", [_node("a", pods="2")] + [_pod(f"p{i}", cpu="100m") for i in range(5)], 2),
        ("running pods take room", [_node("a"), _pod("r", cpu="3", node="a")] + [_pod(f"p{i}") for i in range(3)], 1),
        (
            "higher priority can preempt lower",
            [_node("a"), _pod("r", cpu="3", node="a", priority=0)] + [_pod(f"p{i}", priority=10) for i in range(3)],
            3,
        ),
        (
            # Both engines place h on a node it empties and three of the l pods beside it.
            "room a higher pod's victim leaves is anyone's",
            [_node("a"), _node("b"), _pod("ra", cpu="4", node="a"), _pod("rb", cpu="4", node="b"),
             _pod("h", cpu="1", priority=10)] + [_pod(f"l{i}", cpu="1") for i in range(4)],
            5,
        ),
        (
            "preemptionPolicy Never cannot",
            [_node("a"), _pod("r", cpu="3", node="a")] + [_pod(f"p{i}", priority=10, preemptionPolicy="Never") for i in range(3)],
            1,
        ),
        (
            "untolerated taint",
            [_node("a", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]), _node("b")] + [_pod(f"p{i}", cpu="2") for i in range(4)],
            2,
        ),
        (
            "PreferNoSchedule does not filter",
            [_node("a", taints=[{"key": "k", "effect": "PreferNoSchedule"}])] + [_pod(f"p{i}", cpu="2") for i in range(4)],
            2,
        ),
        (
            "nodeSelector",
            [_node("a", labels={"pool": "x"}), _node("b")] + [_pod(f"p{i}", cpu="2", nodeSelector={"pool": "x"}) for i in range(4)],
            2,
        ),
        (
            "hostname anti-affinity against itself: one per node",
            [_node("a"), _node("b"), _node("c")]
            + [
                _pod(
                    f"p{i}", cpu="100m",
                    affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}]}},
                )
                for i in range(5)
            ]
            + [_pod("r", cpu="100m", node="c", labels={"app": "x"})],
            2,
        ),
        (
            "the window as a whole runs out of cpu, smallest first",
            [_node("a"), _node("b")] + [_pod(f"s{i}", cpu="1") for i in range(6)] + [_pod(f"l{i}", cpu="3500m") for i in range(2)],
            6,
        ),
        ("a resource no node has", [_node("a")] + [_pod("g", cpu="1", **{})], 1),
    ],
)
def test_max_placeable_bound_by_hand(case, objects, bound):
    assert max_placeable_bound(_snap(*objects)) == bound, case


def test_gang_that_cannot_reach_min_member_counts_for_nothing():
    group = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": {"name": "g", "namespace": "ns"}, "spec": {"minMember": 3}}
    members = [_pod(f"m{i}", cpu="3", labels={"app": "x", POD_GROUP_LABEL: "g"}) for i in range(4)]
    assert max_placeable_bound(_snap(_node("a"), _node("b"), group, *members)) == 0
    assert max_placeable_bound(_snap(_node("a"), _node("b"), _node("c"), group, *members)) == 3


def test_gpu_requests_need_gpu_nodes():
    gpu_pod = _pod("g", cpu="1")
    gpu_pod["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "2"
    assert max_placeable_bound(_snap(_node("a"), gpu_pod)) == 0
    assert max_placeable_bound(_snap(_node("a", gpus="1"), gpu_pod)) == 0
    assert max_placeable_bound(_snap(_node("a", gpus="4"), gpu_pod)) == 1


def test_min_nodes_bound_by_hand():
    three_cpu = [_pod(f"p{i}", cpu="3") for i in range(3)]
    # 9 CPU over 4-CPU nodes: at least 3.
    assert min_nodes_bound(_snap(*[_node(n) for n in "abcd"], *three_cpu)) == 3
    # Large nodes first: one 8-CPU node and one 4-CPU node hold 9 CPU worth of requests at best.
    assert min_nodes_bound(_snap(_node("big", cpu="8"), _node("a"), _node("b"), *three_cpu)) == 2
    # Pod count binds.
    assert min_nodes_bound(_snap(_node("a", pods="2"), _node("b", pods="2"), *[_pod(f"p{i}", cpu="10m") for i in range(3)])) == 2
    # DaemonSet pods are overhead on their node, not load: 3.5 CPU left per node, 7 CPU of load.
    daemons = [_pod(f"d{n}", cpu="500m", node=n, owner="DaemonSet") for n in "abc"]
    load = [_pod(f"p{i}", cpu="3500m") for i in range(2)]
    assert min_nodes_bound(_snap(*[_node(n) for n in "abc"], *daemons, *load)) == 2
    assert min_nodes_bound(_snap(_node("a"))) == 0


# --------------------------------------------------------------------------- real-shaped


def test_realistic_is_shaped_like_a_production_dump() -> None:
    """Issue 24's cluster at quick scale: 100 nodes in 3 zones running 40 pods each, 1,000
    pending pods of 20 apps in a few hundred distinct specs, a tenth of them spread over zones;
    the same seed gives the same dump."""
    workload = generate("realistic", "quick", 0)
    meta = workload.metadata
    assert (meta["nodes"], meta["running"], meta["pods"]) == (100, 4000, 1000)
    snapshot = workload.snapshot()
    assert len({n.metadata.labels["topology.kubernetes.io/zone"] for n in snapshot.nodes}) == 3
    per_node = Counter(p.spec.node_name for p in snapshot.pods if p.spec.node_name)
    assert set(per_node.values()) == {40}
    pending = snapshot.pending_pods(DEFAULT_SCHEDULER_NAME)
    assert len(pending) == 1000
    assert len({p.metadata.labels["app"] for p in snapshot.pods if p.metadata.namespace == "prod"}) == 20
    shapes = {(p.metadata.labels["app"], tuple(sorted(pod_requests(p).items()))) for p in pending}
    assert 250 <= len(shapes) <= 320
    spread = [p for p in pending if p.spec.topology_spread_constraints]
    assert 80 <= len(spread) <= 120
    assert generate("realistic", "quick", 0).objects == workload.objects

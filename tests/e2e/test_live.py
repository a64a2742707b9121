"""The live scheduler (`cpsat-scheduler run`, a process of its own) against a real Kubernetes
1.36 kube-apiserver + etcd, as the service account examples/deploy makes, with exactly the RBAC
of examples/deploy/rbac.yaml: every call it makes meets the real RBAC authorizer."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from tests.e2e.harness import SCHEDULER, Cluster, wait_for


def _no_denials(text: str) -> None:
    assert not re.search(r"\b403\b|[Ff]orbidden", text), "the scheduler was refused a call:\n" + "\n".join(
        line for line in text.splitlines() if re.search(r"403|[Ff]orbidden", line))[:3000]


def test_pods_are_bound_with_least_privilege_and_their_events_written(cluster: Cluster) -> None:
    nodes = [cluster.node(f"n{i}", cpu="2", memory="4Gi") for i in range(3)]
    sched = cluster.scheduler()
    names = [f"web-{i}" for i in range(15)]
    for name in names:
        cluster.pod(name, cpu="350m", memory="256Mi")
    assert wait_for(lambda: len(cluster.bound()) == len(names), timeout=60), sched.text()[-3000:]
    assert set(cluster.bound().values()) <= set(nodes)
    assert cluster.overcommitted() == []
    assert wait_for(lambda: {e.involved_object.name for e in cluster.events("Scheduled")} == set(names))
    _no_denials(sched.text())
    # the authorizer is real: what rbac.yaml does not grant is refused to the same identity
    as_scheduler = client.CoreV1Api(config.new_client_from_config(str(cluster.plane.scheduler_kubeconfig)))
    with pytest.raises(ApiException) as refused:
        as_scheduler.list_namespaced_secret(cluster.ns)
    assert refused.value.status == 403
    with pytest.raises(ApiException) as refused:
        as_scheduler.delete_node(nodes[0])
    assert refused.value.status == 403


def test_preemption_evicts_through_the_eviction_api_within_the_budget(cluster: Cluster) -> None:
    node = cluster.node("n1", cpu="2", memory="4Gi")
    cluster.priority_class("low", 10)
    cluster.priority_class("high", 1000)
    for name in ("low-0", "low-1"):
        cluster.pod(name, cpu="1", priority_class="low", node=node, labels={"app": "batch"})
        cluster.running(name)
    cluster.policy.create_namespaced_pod_disruption_budget(cluster.ns, {
        "metadata": {"name": "batch"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "batch"}}}})
    cluster.budget_status("batch", allowed=1, healthy=2, desired=1, expected=2)
    sched = cluster.scheduler()

    cluster.pod("high-0", cpu="1", priority_class="high")
    assert wait_for(lambda: cluster.node_of("high-0") == node, timeout=60), sched.text()[-3000:]
    gone = [n for n in ("low-0", "low-1") if not cluster.exists(n)]
    assert len(gone) == 1        # one victim is enough, and the budget allows only one
    victim = gone[0]
    # the preemptor was nominated before it was bound, and bound only after its victim left
    nominated = cluster.pods.index("high-0", lambda e: e["nominated"] == node and not e["node"])
    bound = cluster.pods.index("high-0", lambda e: e["node"] == node)
    deleted = cluster.pods.index(victim, lambda e: e["type"] == "DELETED")
    assert 0 <= nominated < bound and 0 <= deleted < bound
    # the API server's Eviction API marked the victim before deleting it
    assert cluster.pods.index(victim, lambda e: e["conditions"].get("DisruptionTarget", ("",))[0] == "True") >= 0
    # events are sent by a background writer, never ahead of a bind: the event may trail it
    preempted = wait_for(lambda: [e for e in cluster.events("Preempted") if e.involved_object.name == victim])
    assert preempted and f"{cluster.ns}/high-0" in preempted[0].message
    # the Eviction API took the disruption from the budget; the next preemptor must not evict
    budget = cluster.policy.read_namespaced_pod_disruption_budget("batch", cluster.ns)
    assert budget.status.disruptions_allowed == 0
    cluster.budget_status("batch", allowed=0, healthy=1, desired=1, expected=1)   # the controller's view
    cluster.pod("high-1", cpu="1", priority_class="high")
    assert wait_for(lambda: any(e.involved_object.name == "high-1" for e in cluster.events("FailedScheduling")),
                    timeout=60), sched.text()[-3000:]
    time.sleep(2)
    assert cluster.node_of("high-1") is None
    assert [n for n in ("low-0", "low-1") if cluster.exists(n)] == [n for n in ("low-0", "low-1") if n != victim]
    assert cluster.overcommitted() == []
    _no_denials(sched.text())


def test_a_podgroup_gang_is_placed_all_or_nothing_and_its_condition_written(cluster: Cluster) -> None:
    cluster.node("n1", cpu="2", memory="4Gi")
    cluster.node("n2", cpu="2", memory="4Gi")
    cluster.pod_group("train", 3)
    cluster.pod_group("big", 5)
    sched = cluster.scheduler()
    names = [f"train-{i}" for i in range(3)]
    for name in names[:2]:
        cluster.pod(name, cpu="1", group="train")
    # two of three members: minCount is not reached, nothing of the gang is bound
    time.sleep(3)
    assert cluster.bound() == {}
    cluster.pod(names[2], cpu="1", group="train")
    assert wait_for(lambda: set(cluster.bound()) == set(names), timeout=60), sched.text()[-3000:]
    scheduled = cluster.scheduled_condition    # PodGroupInitiallyScheduled on 1.37, PodGroupScheduled on 1.36
    assert wait_for(lambda: cluster.group_conditions("train").get(scheduled, {}).get("status") == "True")
    # a gang that cannot fit (5 x 1 CPU, 1 CPU left): none bound, and the group says why
    for i in range(5):
        cluster.pod(f"big-{i}", cpu="1", group="big")
    assert wait_for(lambda: cluster.group_conditions("big").get(scheduled, {}).get("status") == "False",
                    timeout=60), sched.text()[-3000:]
    assert cluster.group_conditions("big")[scheduled]["reason"] == "Unschedulable"
    assert set(cluster.bound()) == set(names)
    assert cluster.overcommitted() == []
    _no_denials(sched.text())


def test_a_gang_with_a_required_topology_lands_in_one_rack(cluster: Cluster) -> None:
    for i in range(2):
        cluster.node(f"a{i}", cpu="1", memory="4Gi", labels={"example.com/rack": "a"})
    for i in range(2):
        cluster.node(f"b{i}", cpu="2", memory="4Gi", labels={"example.com/rack": "b"})
    cluster.pod_group("ring", 4, topology_key="example.com/rack")
    sched = cluster.scheduler()
    names = [f"ring-{i}" for i in range(4)]
    for name in names:
        cluster.pod(name, cpu="1", group="ring")
    assert wait_for(lambda: set(cluster.bound()) == set(names), timeout=60), sched.text()[-3000:]
    racks = {cluster.core.read_node(n).metadata.labels["example.com/rack"] for n in cluster.bound().values()}
    assert racks == {"b"}
    assert cluster.overcommitted() == []


def _identity(text: str) -> str:
    found = re.search(r"leader election: candidate (\S+) for lease", text)
    assert found, text[-2000:]
    return found.group(1)


def test_two_replicas_one_leader_and_failover(cluster: Cluster) -> None:
    cluster.node("n1", cpu="8", memory="16Gi")
    first = cluster.scheduler(name="replica-1")
    second = cluster.scheduler(name="replica-2")

    def holder() -> str:
        lease = cluster.coordination.read_namespaced_lease("cpsat-scheduler", "cpsat-scheduler")
        return lease.spec.holder_identity or ""

    ids = {_identity(first.text()): first, _identity(second.text()): second}
    assert wait_for(lambda: holder() in ids, timeout=30)
    leader = ids[holder()]
    standby = second if leader is first else first
    for i in range(5):
        cluster.pod(f"before-{i}")
    assert wait_for(lambda: len(cluster.bound()) == 5, timeout=60), leader.text()[-3000:]
    assert "became the leader" not in standby.text()
    # (events are written after the binds; a crash before they are sent loses them, so wait)
    assert wait_for(lambda: len(cluster.events("Scheduled")) == 5)
    leader.kill()                                           # a crash: the Lease is not handed over
    assert wait_for(lambda: holder() == _identity(standby.text()), timeout=30), standby.text()[-3000:]
    for i in range(5):
        cluster.pod(f"after-{i}")
    assert wait_for(lambda: len(cluster.bound()) == 10, timeout=60), standby.text()[-3000:]
    assert wait_for(lambda: len(cluster.events("Scheduled")) == 10)   # each pod bound once, each event written
    _no_denials(standby.text())


def test_a_restart_mid_burst_loses_nothing(cluster: Cluster) -> None:
    nodes = [cluster.node(f"n{i}", cpu="4", memory="8Gi") for i in range(3)]
    first = cluster.scheduler(name="before")
    names = [f"burst-{i:03d}" for i in range(90)]
    for name in names[:45]:
        cluster.pod(name, cpu="100m", memory="64Mi")
    assert wait_for(lambda: len(cluster.bound()) >= 10, timeout=60), first.text()[-3000:]
    first.stop()                                   # SIGTERM mid-burst, as a rolling update does
    for name in names[45:]:                        # the burst goes on while no scheduler runs
        cluster.pod(name, cpu="100m", memory="64Mi")
    second = cluster.scheduler(name="after")
    assert wait_for(lambda: len(cluster.bound()) == len(names), timeout=90), second.text()[-3000:]
    assert set(cluster.bound().values()) <= set(nodes)
    # each pod bound once: its node never changed once set
    for name in names:
        seen = {e["node"] for e in cluster.pods.history(name) if e["node"]}
        assert len(seen) == 1, (name, seen)
    assert cluster.overcommitted() == []
    assert wait_for(lambda: sorted(e.involved_object.name for e in cluster.events("Scheduled")) == names)
    _no_denials(first.text() + second.text())


def test_a_workload_gang_runs_through_its_podgroup(cluster: Cluster) -> None:
    """A Workload (1.37 v1beta1; 1.36 v1alpha2) holds pod group templates; a PodGroup made from
    one carries the gang policy, and pods join the PodGroup (spec.schedulingGroup)."""
    cluster.node("n1", cpu="2", memory="4Gi")
    cluster.node("n2", cpu="2", memory="4Gi")
    cluster.workload("job", "workers", 4)
    cluster.pod_group("job-workers-0", 4, template=("job", "workers"))
    sched = cluster.scheduler()
    names = [f"worker-{i}" for i in range(4)]
    for name in names[:3]:
        cluster.pod(name, cpu="1", group="job-workers-0")
    time.sleep(3)
    assert cluster.bound() == {}                   # three of four: the gang waits whole
    cluster.pod(names[3], cpu="1", group="job-workers-0")
    assert wait_for(lambda: set(cluster.bound()) == set(names), timeout=60), sched.text()[-3000:]
    assert wait_for(lambda: cluster.group_conditions("job-workers-0").get(cluster.scheduled_condition, {})
                    .get("status") == "True")
    _no_denials(sched.text())


def test_preemption_goes_to_the_node_whose_victims_the_budget_allows(cluster: Cluster) -> None:
    n1 = cluster.node("n1", cpu="2", memory="4Gi")
    n2 = cluster.node("n2", cpu="2", memory="4Gi")
    cluster.priority_class("low", 10)
    cluster.priority_class("high", 1000)
    for node, app in ((n1, "guarded"), (n2, "free")):
        for i in range(2):
            name = f"{app}-{i}"
            cluster.pod(name, cpu="1", priority_class="low", node=node, labels={"app": app})
            cluster.running(name)
    cluster.policy.create_namespaced_pod_disruption_budget(cluster.ns, {
        "metadata": {"name": "guarded"}, "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "guarded"}}}})
    cluster.budget_status("guarded", allowed=0, healthy=2, desired=2, expected=2)
    sched = cluster.scheduler()
    cluster.pod("urgent", cpu="2", priority_class="high")
    assert wait_for(lambda: cluster.node_of("urgent") == n2, timeout=60), sched.text()[-3000:]
    assert cluster.exists("guarded-0") and cluster.exists("guarded-1")
    assert not cluster.exists("free-0") and not cluster.exists("free-1")
    assert cluster.pods.index("urgent", lambda e: e["nominated"] == n2 and not e["node"]) >= 0
    assert cluster.overcommitted() == []
    _no_denials(sched.text())


def test_anti_affinity_reads_the_real_labels_of_the_namespaces_it_selects(cluster: Cluster) -> None:
    """A namespaceSelector matches the labels of the namespaces the scheduler watches (with the
    RBAC of rbac.yaml): the pod prefers the node where a pod of the selected namespace runs, and
    its required anti-affinity keeps it away from there."""
    near = cluster.node("n1", cpu="2", memory="4Gi")
    far = cluster.node("n2", cpu="2", memory="4Gi")
    team = {"cpsat-e2e-team": cluster.ns}  # a value no other test's namespace carries
    cluster.core.patch_namespace(cluster.ns, {"metadata": {"labels": team}})
    cluster.pod("db", node=near, labels={"app": "db"})
    cluster.running("db")
    sched = cluster.scheduler()
    keep_away = {"labelSelector": {"matchLabels": {"app": "db"}}, "namespaceSelector": {"matchLabels": team},
                 "topologyKey": "kubernetes.io/hostname"}
    prefer_near = {"weight": 100, "preference": {"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": [near]}]}}
    web = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": cluster.ns},
           "spec": {"schedulerName": SCHEDULER, "terminationGracePeriodSeconds": 30,
                    "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}],
                    "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [keep_away]},
                                 "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [prefer_near]}}}}
    cluster.core.create_namespaced_pod(cluster.ns, web)
    assert wait_for(lambda: cluster.node_of("web") == far, timeout=60), sched.text()[-3000:]
    _no_denials(sched.text())


def test_repack_apply_stops_when_the_real_eviction_api_refuses(cluster: Cluster, tmp_path: Path) -> None:
    """The dump had no PodDisruptionBudget; the cluster has one now that allows no disruption:
    `repack --apply` cordons, the real Eviction API answers 429, and the run stops there."""
    import argparse
    import subprocess
    import sys

    from adapters.cluster_read import read_cluster
    from tests.e2e.harness import REPO

    nodes = [cluster.node(f"n{i}", cpu="4", memory="8Gi") for i in range(2)]
    for name, node in (("web-a", nodes[0]), ("web-b", nodes[1])):
        cluster.core.create_namespaced_pod(cluster.ns, {"metadata": {
            "name": name, "labels": {"app": "web"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f",
                                 "uid": "0b6e4c3e-0000-4000-8000-000000000001", "controller": True}]},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                                       "resources": {"requests": {"cpu": "1", "memory": "64Mi"}}}]}})
        cluster.running(name)
    admin = str(cluster.plane.admin_kubeconfig)
    dump = tmp_path / "cluster.json"
    dump.write_text(read_cluster(argparse.Namespace(kubeconfig=admin, context=None, in_cluster=False)).text)
    cluster.policy.create_namespaced_pod_disruption_budget(cluster.ns, {
        "metadata": {"name": "web"}, "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}})
    cluster.budget_status("web", allowed=0, healthy=2, desired=2, expected=2)
    done = subprocess.run([sys.executable, "-m", "adapters", "repack", str(dump), "-o", "json", "--apply",
                           "--kubeconfig", admin, "--wait-seconds", "20"], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 1, done.stderr
    assert f"stopped at action 2 of 3: eviction of {cluster.ns}/web-" in done.stderr
    [freed] = json.loads(done.stdout)["freed_nodes"]
    assert cluster.core.read_node(freed).spec.unschedulable is True          # cordoned first
    assert cluster.exists("web-a") and cluster.exists("web-b")               # nothing evicted

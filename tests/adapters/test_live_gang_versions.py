"""The live scheduler against a server of Kubernetes 1.37's gang API (the in-memory API server
serving ``scheduling.k8s.io/v1beta1`` and ``v1alpha3``, not ``v1alpha2``): PodGroups are watched
in v1beta1, a gang is bound whole, and its PodGroup gets ``PodGroupInitiallyScheduled`` as
1.37's kube-scheduler writes it (never turned back to False); a v1beta1 Workload is read; and
``run --gang-api`` naming a version the server does not serve is one line and exit 2."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import pytest

from adapters.apiserver.resources import PODGROUPS_V1BETA1
from adapters.cli import main
from adapters.live.api_client import CORE_PODGROUPS, WORKLOADS
from tests.adapters.live_harness import NS, Cluster, cluster_factory, fast_config, fast_options, node, pod, wait_for

V137 = ["scheduling.k8s.io/v1beta1", "scheduling.k8s.io/v1alpha3"]


@pytest.fixture
def make_cluster() -> Iterator[Callable[..., Cluster]]:
    yield from cluster_factory()


def v1beta1_group(name: str, min_count: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": name, "namespace": NS},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}, "disruptionMode": {"all": {}}}}


def condition(cluster: Cluster, name: str, ctype: str) -> Optional[dict[str, Any]]:
    group = cluster.server.store.get(PODGROUPS_V1BETA1.key, NS, name) or {}
    return next((c for c in (group.get("status") or {}).get("conditions") or [] if c.get("type") == ctype), None)


def test_a_v1beta1_gang_is_bound_whole_and_marked_initially_scheduled(make_cluster: Callable[..., Cluster]) -> None:
    workload = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload", "metadata": {"name": "job", "namespace": NS},
                "spec": {"podGroupTemplates": [{"name": "train", "schedulingPolicy": {"gang": {"minCount": 3}}}]}}
    cluster = make_cluster([node("n1", cpu="2"), node("n2", cpu="2"), v1beta1_group("train", 3), workload],
                           gang_apis=V137)
    sched = cluster.scheduler(fast_config(), fast_options(engine="cpsat", window_wait=0.2))
    names = [f"train-{i}" for i in range(3)]
    cluster.create(*[pod(n, cpu="1", scheduling_group="train") for n in names[:2]])
    assert wait_for(lambda: sched.queue.where(f"{NS}/train-1") == "unschedulable")
    assert cluster.bound() == {}                          # two of three: the v1beta1 gang was read
    cluster.create(pod(names[2], cpu="1", scheduling_group="train"))
    assert wait_for(lambda: all(cluster.node_of(n) for n in names))
    assert wait_for(lambda: (condition(cluster, "train", "PodGroupInitiallyScheduled") or {}).get("status") == "True")
    assert condition(cluster, "train", "PodGroupScheduled") is None     # 1.36's name is not written
    assert sched.api.version_of(CORE_PODGROUPS) == "v1beta1" and sched.api.version_of(WORKLOADS) == "v1beta1"
    assert not any(i.absent for i in sched.informers if i.resource in (CORE_PODGROUPS, WORKLOADS))
    assert cluster.violations() == [] and cluster.double_binds() == []


def test_initially_scheduled_is_not_turned_back_to_false(make_cluster: Callable[..., Cluster]) -> None:
    group = v1beta1_group("big", 2)
    group["status"] = {"conditions": [{"type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled",
                                       "message": "placed before", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    cluster = make_cluster([node("n1", cpu="1"), group], gang_apis=V137)
    sched = cluster.scheduler(fast_config(), fast_options(engine="cpsat", window_wait=0.2))
    cluster.create(*[pod(f"big-{i}", cpu="1", scheduling_group="big") for i in range(2)])   # only one fits
    assert wait_for(lambda: sched.queue.where(f"{NS}/big-1") == "unschedulable")
    assert wait_for(lambda: sched.queue.where(f"{NS}/big-0") == "unschedulable")
    # the verdict is written asynchronously: give it time to (wrongly) turn False
    assert not wait_for(lambda: (condition(cluster, "big", "PodGroupInitiallyScheduled") or {}).get("status") == "False",
                        timeout=3.0)
    kept = condition(cluster, "big", "PodGroupInitiallyScheduled")
    assert kept is not None and (kept["status"], kept["message"]) == ("True", "placed before")


def test_run_with_a_gang_api_the_server_does_not_serve_is_exit_2(make_cluster: Callable[..., Cluster], tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    cluster = make_cluster([node("n1")], gang_apis=V137)
    code = main(["run", "--kubeconfig", cluster.server.kubeconfig_path(tmp_path), "--gang-api", "v1alpha2",
                 "--no-leader-elect", "--duration", "1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and "--gang-api" in err[0] and "scheduling.k8s.io/v1alpha2 is not served" in err[0]
    assert "PodGroup versions it serves: v1alpha3, v1beta1" in err[0]
    assert err[0].startswith("cpsat-scheduler: error: cluster http") and err[0].count("--gang-api:") == 1
    code = main(["run", "--kubeconfig", cluster.server.kubeconfig_path(tmp_path), "--gang-api", "v2",
                 "--no-leader-elect", "--duration", "1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "not a PodGroup version" in err[0] and err[0].count("--gang-api") == 2

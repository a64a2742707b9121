"""``repack --apply``: the runbook carried out against an API server, stopping at the first surprise.

The in-memory API server plays the cluster: kubelets start bound pods, evictions honour
PodDisruptionBudgets, and ReplicaSet/StatefulSet pods that are deleted come back as new pending
pods. Our own live scheduler, named ``default-scheduler``, stands in for kube-scheduler and
places the replacements by its scores: the plan does not place them, which is why the run
checks where each one lands.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest

from adapters.cli import main
from tests.adapters.live_harness import Cluster, fast_config, node, pod, wait_for

KUBE_SCHEDULER = "default-scheduler"


def owned(name: str, node_name: str, *, cpu: str, kind: str = "ReplicaSet", owner: str = "web-7d9f") -> dict[str, Any]:
    obj = pod(name, cpu=cpu, scheduler=KUBE_SCHEDULER, node_name=node_name, running=True, labels={"app": owner})
    obj["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": kind, "name": owner,
                                           "uid": f"uid-{owner}", "controller": True}]
    return obj


def two_nodes() -> list[dict[str, Any]]:
    """n0 and n1 of 4 CPU, a 1-CPU web pod on each: the plan moves one and frees its node."""
    return [node("n0"), node("n1"), owned("web-a", "n0", cpu="1"), owned("web-b", "n1", cpu="1")]


@pytest.fixture
def cluster(request) -> Iterator[Cluster]:
    objects = getattr(request, "param", None) or two_nodes()
    c = Cluster(objects, replica_controllers=True)
    c.scheduler(fast_config(scheduler_name=KUBE_SCHEDULER))  # kube-scheduler's stand-in
    yield c
    c.close()


def dump(tmp_path: Path, objects: list[dict[str, Any]]) -> str:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    return str(path)


def repack_apply(cluster: Cluster, tmp_path: Path, objects: list[dict[str, Any]], capsys) -> tuple[int, dict, str]:
    kubeconfig = cluster.server.kubeconfig_path(tmp_path)
    code = main(["repack", dump(tmp_path, objects), "-o", "json", "--apply", "--kubeconfig", kubeconfig,
                 "--wait-seconds", "20"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


def test_the_runbook_is_carried_out_and_the_freed_node_left_cordoned(cluster: Cluster, tmp_path: Path, capsys) -> None:
    code, plan, err = repack_apply(cluster, tmp_path, two_nodes(), capsys)
    assert code == 0, err
    [move] = plan["moves"]
    [freed] = plan["freed_nodes"]
    assert cluster.core.read_node(freed).spec.unschedulable is True
    moved = move["pod"].split("/")[1]
    assert cluster.pod(moved) is None  # evicted
    running = {p.metadata.name: p for p in cluster.core.list_namespaced_pod("default").items}
    replacements = [p for name, p in running.items() if name.startswith("web-7d9f-")]
    assert len(replacements) == 1
    assert replacements[0].spec.node_name == move["to"] and replacements[0].status.phase == "Running"
    assert f"apply: step 1: evicted {move['pod']} from {move['from']}" in err
    assert "apply: done" in err


def _crash_looping_web_b() -> list[dict[str, Any]]:
    """``two_nodes`` with web-b not Ready, and a budget that lets only such a pod go
    (``unhealthyPodEvictionPolicy: AlwaysAllow``, no disruption allowed)."""
    objects = two_nodes()
    objects[3]["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    budget = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web", "namespace": "default"},
              "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web-7d9f"}},
                       "unhealthyPodEvictionPolicy": "AlwaysAllow"}}
    return [*objects, budget]


@pytest.mark.parametrize("cluster", [_crash_looping_web_b()], indirect=True)
def test_a_pod_that_was_not_ready_is_moved_without_waiting_for_its_replacement_to_be_ready(
        cluster: Cluster, tmp_path: Path, capsys) -> None:
    """Found by a review: a pod that is not Ready moves without spending its budget, and its
    replacement (the same crash loop) never becomes Ready: the run stopped at that step after
    --wait-seconds. It waits for Running only there, and says so in the runbook."""
    assert cluster.server.kubelet is not None
    cluster.server.kubelet.never_ready = lambda p: p["metadata"]["name"].startswith("web-7d9f-")
    objects = [dict(o, status=(cluster.server.store.peek("poddisruptionbudgets", "default", "web") or {}).get("status"))
               if o["kind"] == "PodDisruptionBudget" else o for o in _crash_looping_web_b()]
    code, plan, err = repack_apply(cluster, tmp_path, objects, capsys)
    assert code == 0, err
    assert [(m["pod"], m["from"]) for m in plan["moves"]] == [("default/web-b", "n1")]
    assert plan["freed_nodes"] == ["n1"]
    assert "(Ready not awaited: default/web-b was not Ready)" in json.dumps(plan)
    assert "is Running on n0" in err and "apply: done" in err


def test_a_budget_refusing_the_eviction_stops_the_run(cluster: Cluster, tmp_path: Path, capsys) -> None:
    """The dump had no PodDisruptionBudget; the cluster has one now that allows no disruption."""
    cluster.server.store.create("poddisruptionbudgets", {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web-7d9f"}}}})
    wait_for(lambda: (cluster.server.store.peek("poddisruptionbudgets", "default", "web") or {}).get("status"))
    code, plan, err = repack_apply(cluster, tmp_path, two_nodes(), capsys)
    assert code == 1
    assert "apply: stopped at action 2 of 3: eviction of default/web-" in err
    assert {p.metadata.name for p in cluster.core.list_namespaced_pod("default").items} == {"web-a", "web-b"}


def test_a_replacement_landing_elsewhere_stops_the_run(cluster: Cluster, tmp_path: Path, capsys) -> None:
    """A node the dump did not have, empty and large: kube-scheduler's scores prefer it."""
    cluster.create(node("n9", cpu="32", memory="64Gi"))
    code, plan, err = repack_apply(cluster, tmp_path, two_nodes(), capsys)
    assert code == 1
    assert "landed on n9, not" in err and "run repack again" in err


def test_a_pod_gone_since_the_dump_stops_the_run_before_any_eviction(cluster: Cluster, tmp_path: Path, capsys) -> None:
    objects = two_nodes()
    cluster.core.delete_namespaced_pod("web-a", "default")
    cluster.core.delete_namespaced_pod("web-b", "default")
    assert wait_for(lambda: cluster.pod("web-a") is None and cluster.pod("web-b") is None)
    code, plan, err = repack_apply(cluster, tmp_path, objects, capsys)
    assert code == 1
    assert "is gone: the cluster changed since the dump" in err


def test_dry_run_and_apply_together_is_a_usage_error(tmp_path: Path, capsys) -> None:
    assert main(["repack", dump(tmp_path, two_nodes()), "--apply", "--dry-run"]) == 2
    assert "--dry-run: cannot be given with --apply" in capsys.readouterr().err


@pytest.mark.parametrize("cluster", [[node("n0"), node("n1"), node("n9", cpu="32", memory="64Gi")]], indirect=True)
def test_our_own_pods_are_bound_where_planned(cluster: Cluster, tmp_path: Path, capsys) -> None:
    """Replacements that name cpsat-scheduler are bound by the run itself to the planned node,
    though kube-scheduler's scores would prefer the empty n9 the dump does not have."""
    objects = [node("n0"), node("n1")]
    for name, at in (("web-a", "n0"), ("web-b", "n1")):
        obj = owned(name, at, cpu="1")
        obj["spec"]["schedulerName"] = "cpsat-scheduler"
        objects.append(obj)
    for obj in objects[2:]:
        cluster.create(obj)
    code, plan, err = repack_apply(cluster, tmp_path, objects, capsys)
    assert code == 0, err
    [move] = plan["moves"]
    replacements = [p for p in cluster.core.list_namespaced_pod("default").items if p.metadata.name.startswith("web-7d9f-")]
    assert [p.spec.node_name for p in replacements] == [move["to"]]


def test_the_apply_table_names_every_call_it_makes() -> None:
    """The permissions README lists for --apply come from this table; the code calls nothing else."""
    import ast

    import adapters.repack_apply as apply

    tree = ast.parse(Path(apply.__file__).read_text())
    called = {n.attr for n in ast.walk(tree)
              if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Attribute) and n.value.attr == "_core"}
    assert called == set(apply.APPLY_CALLS)

"""Re-packing plans an operator can carry out: nothing moved that cannot start where it goes,
no system pod shuffled without a budget (issue 17, items 2 and 4).

The clusters are the shapes a realistic dump has: a StatefulSet with a zonal disk, coredns in
kube-system without a PodDisruptionBudget. Each test replays the plan like the others in
``test_repack.py`` and checks the rule it is about on the plan a user would be shown.
"""

from __future__ import annotations

from models.config import RepackConfig, SchedulerConfig
from models.storage import PersistentVolume, PersistentVolumeClaim
from solver.repack import RepackOptions, plan_repack
from solver.repack.movable import REASON_MANY_PDBS, REASON_SYSTEM_NO_PDB, classify
from solver.repack.volumes import REASON_VOLUME_UNKNOWN
from tests.builders import make_node, make_pdb, make_pod, make_snapshot
from tests.solver.test_repack import FAST, final_nodes, replay_ok, workload

ZONE = "topology.kubernetes.io/zone"


def zonal_nodes() -> list:
    """Two zones of two nodes: a0 (8 CPU) has room for every pod of the cluster; the others 4."""
    return [make_node(f"{zone}{i}", cpu="8" if (zone, i) == ("a", 0) else "4", memory="16Gi",
                      labels={ZONE: f"eu-central-1{zone}"})
            for zone in "ab" for i in range(2)]


def redis(claim: str = "data-redis-0"):
    return workload("default/redis-0", "b0", cpu="1", kind="StatefulSet", owner="redis",
                    volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": claim}}])


def filler():
    """2 CPU on a0 and a1, 500m on b1: with redis-0's 1 CPU, 5.5 CPU in all, which a0 holds."""
    return [workload("default/web-a0", "a0", cpu="2"), workload("default/web-a1", "a1", cpu="2"),
            workload("default/web-b1", "b1", cpu="500m")]


def zonal_volume(zone: str = "eu-central-1b") -> tuple[PersistentVolume, PersistentVolumeClaim]:
    pv = PersistentVolume.model_validate({
        "metadata": {"name": "pv-redis"},
        "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}]}}},
    })
    pvc = PersistentVolumeClaim.model_validate({
        "metadata": {"name": "data-redis-0", "namespace": "default"}, "spec": {"volumeName": "pv-redis"},
    })
    return pv, pvc


def test_a_pod_whose_volume_is_not_in_the_snapshot_stays_and_says_why() -> None:
    snapshot = make_snapshot(zonal_nodes(), [redis(), *filler()])
    result = plan_repack(snapshot, options=FAST)
    assert "default/redis-0" not in final_nodes(result)
    b0 = next(n for n in result.nodes if n.name == "b0")
    assert b0.pinned_by.startswith("default/redis-0: " + REASON_VOLUME_UNKNOWN)
    assert "claim data-redis-0 not in the snapshot" in b0.pinned_by
    replay_ok(snapshot, result)


def test_a_zonal_volume_keeps_its_pod_in_its_zone() -> None:
    """redis-0's disk is in eu-central-1b: it may move to b1 (same zone), never to a0, though a0
    could hold every pod and free three nodes; one b node keeps redis-0, so two are freed."""
    pv, pvc = zonal_volume()
    snapshot = make_snapshot(zonal_nodes(), [redis(), *filler()], pvs=[pv], pvcs=[pvc])
    result = plan_repack(snapshot, options=FAST)
    assert final_nodes(result).get("default/redis-0", "b0") in ("b0", "b1")
    assert len(result.freed_nodes) == 2
    replay_ok(snapshot, result)


def test_a_volume_any_node_can_reach_lets_its_pod_move_anywhere() -> None:
    pv, pvc = zonal_volume()
    pv = pv.model_copy(update={"spec": pv.spec.model_copy(update={"node_affinity": None})})  # network storage
    snapshot = make_snapshot(zonal_nodes(), [redis(), *filler()], pvs=[pv], pvcs=[pvc])
    result = plan_repack(snapshot, options=FAST)
    assert sorted(result.freed_nodes) == ["a1", "b0", "b1"]  # everything on a0, redis-0 included
    assert final_nodes(result)["default/redis-0"] == "a0"
    replay_ok(snapshot, result)


def test_kube_system_pods_without_a_budget_stay_by_default() -> None:
    """coredns in kube-system with no PodDisruptionBudget: cluster-autoscaler's
    --skip-nodes-with-system-pods keeps such nodes, and so does the plan."""
    coredns = workload("kube-system/coredns-1", "b0", cpu="100m", owner="coredns")
    snapshot = make_snapshot(zonal_nodes(), [coredns, *filler()])
    assert classify(coredns, RepackConfig(), covered_by_pdb=False).reason == REASON_SYSTEM_NO_PDB
    result = plan_repack(snapshot, options=FAST)
    assert "kube-system/coredns-1" not in final_nodes(result)
    assert "b0" not in result.freed_nodes
    # With a budget, or with repack.moveSystemPods, it is an ordinary Deployment pod.
    budget = make_pdb("kube-system/coredns", {"app": "dns"}, max_unavailable=1)
    labelled = workload("kube-system/coredns-1", "b0", cpu="100m", owner="coredns", labels={"app": "dns"})
    result = plan_repack(make_snapshot(zonal_nodes(), [labelled, *filler()], pdbs=[budget]), options=FAST)
    assert "b0" in result.freed_nodes
    config = SchedulerConfig(repack=RepackConfig(move_system_pods=True))
    result = plan_repack(snapshot, config, options=FAST)
    assert "b0" in result.freed_nodes


def crowded_pending():
    """Three 4-CPU nodes each running a 1-CPU pod; pending: a 3-CPU pod of kube-scheduler's.
    Packing the three running pods on one node frees two, and leaves the pending pod nowhere."""
    running = [workload(f"default/web-{i}", f"n{i}", cpu="1") for i in range(3)]
    waiting = make_pod("default/batch", cpu="3", scheduler="default-scheduler")
    return make_snapshot([make_node(f"n{i}", cpu="4", memory="16Gi") for i in range(3)], [*running, waiting])


def test_pending_pods_that_fit_today_still_fit_after_the_plan() -> None:
    snapshot = crowded_pending()
    result = plan_repack(snapshot, options=FAST)
    assert len(result.freed_nodes) == 1  # two 1-CPU pods together leave 2 CPU; the third node keeps 3 free
    assert result.blocked_pending == []
    assert any("would leave 1 pending pod(s)" in note and "default/batch" in note for note in result.notes)
    replay_ok(snapshot, result)


def test_allow_blocking_pending_prints_the_best_plan_and_names_the_pod() -> None:
    snapshot = crowded_pending()
    result = plan_repack(snapshot, options=RepackOptions(time_limit=10, allow_blocking_pending=True))
    assert len(result.freed_nodes) == 2
    assert result.blocked_pending == ["default/batch"]
    replay_ok(snapshot, result)


def test_a_move_between_nodes_that_stay_is_dropped_unless_it_makes_room() -> None:
    """A plan found in time may carry a move that frees nothing; it is undone. A move that makes
    room for a freed node's pod is kept."""
    from solver.repack.problem import build_problem
    from solver.repack.prune import idle_moves_undone

    pods = [workload("default/a", "n0", cpu="1"), workload("default/b", "n1", cpu="1"),
            workload("default/c", "n2", cpu="1")]
    problem = build_problem(make_snapshot([make_node(f"n{i}", cpu="4", memory="16Gi") for i in range(3)], pods),
                            SchedulerConfig())
    n = {node.name: node.index for node in problem.nodes}
    # c leaves n2 for n0: n2 is freed, the move stays.
    frees = {"default/a": n["n0"], "default/b": n["n1"], "default/c": n["n0"]}
    assert idle_moves_undone(problem, frees, {n["n2"]}) == (frees, [])
    # ... and a and b trading places on the way frees nothing: both are undone.
    traded = {"default/a": n["n1"], "default/b": n["n0"], "default/c": n["n0"]}
    assert idle_moves_undone(problem, traded, {n["n2"]}) == (frees, ["default/a", "default/b"])


def test_replicas_kept_apart_by_a_preference_stay_apart() -> None:
    """Two dns replicas kept on different nodes only by a *preferred* anti-affinity, one per
    node with a little else: packing both on one node would free more, and lose both at once."""
    from tests.builders import term

    apart = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "podAffinityTerm": term({"app": "dns"}, "kubernetes.io/hostname")}]}}
    dns = [workload(f"default/dns-{i}", f"n{i}", cpu="500m", owner="dns", labels={"app": "dns"}, affinity=apart)
           for i in range(2)]
    others = [workload("default/web-0", "n2", cpu="1")]
    snapshot = make_snapshot([make_node(f"n{i}", cpu="4", memory="16Gi") for i in range(3)], [*dns, *others])
    result = plan_repack(snapshot, options=FAST)
    ends = {key: node for key, node in final_nodes(result).items()}
    where = {f"default/dns-{i}": ends.get(f"default/dns-{i}", f"n{i}") for i in range(2)}
    assert where["default/dns-0"] != where["default/dns-1"]
    assert len(result.freed_nodes) == 1  # web-0 joins a dns replica; the replicas stay apart
    replay_ok(snapshot, result)


def test_a_pod_two_budgets_cover_stays_put() -> None:
    """The Eviction API answers 500 ("more than one PodDisruptionBudget") for a pod two budgets
    select, whatever their allowances: a plan evicting it stops at that step. It stays, and
    pins its node; the other pods still move."""
    pods = [workload("default/api-0", "n0", labels={"app": "api", "tier": "front"}, annotations={
                "cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}),
            workload("default/api-1", "n1", labels={"app": "api", "tier": "front"}),
            workload("default/web-0", "n2", labels={"app": "web"}, owner="web")]
    nodes = [make_node(f"n{i}", cpu="8", memory="16Gi") for i in range(3)]
    pdbs = [make_pdb("default/api", {"app": "api"}, allowed=5), make_pdb("default/front", {"tier": "front"}, allowed=5)]
    snapshot = make_snapshot(nodes, pods, pdbs=pdbs)
    result = plan_repack(snapshot, options=FAST)
    moved = final_nodes(result)
    assert "default/api-0" not in moved and "default/api-1" not in moved
    assert moved.get("default/web-0") in ("n0", "n1") and result.freed_nodes == ["n2"]
    n0 = next(n for n in result.nodes if n.name == "n0")
    assert n0.pinned_by == "default/api-0: " + REASON_MANY_PDBS
    replay_ok(snapshot, result)

"""Re-packing: which pods move, the model's optimum on hand-built clusters, the safe order, and the
independent replay. Every plan ``plan_repack`` returns has passed the replay; the tests replay it
again themselves and check the rule they are about in the final placement.
"""

from __future__ import annotations

from typing import Optional

import pytest

from models.config import RepackConfig, SchedulerConfig
from models.objects import OwnerReference, Pod
from solver.repack import OrderError, RepackOptions, plan_repack
from solver.repack.movable import (
    REASON_BARE,
    REASON_DAEMONSET,
    REASON_LOCAL_STORAGE,
    REASON_MIRROR,
    REASON_NOT_SAFE_TO_EVICT,
    REASON_TERMINATING,
    classify,
)
from solver.repack.order import order_moves
from solver.repack.problem import build_problem
from solver.repack.replay import PlannedStep, replay
from tests.builders import make_node, make_pdb, make_pod, make_snapshot, spread, term

FAST = RepackOptions(time_limit=10)


# --------------------------------------------------------------------------- builders


def workload(
    key: str,
    node: Optional[str] = None,
    *,
    cpu: str = "1",
    memory: str = "1Gi",
    kind: Optional[str] = "ReplicaSet",
    owner: str = "web-abc",
    annotations: Optional[dict[str, str]] = None,
    volumes: Optional[list[dict]] = None,
    **kwargs,
) -> Pod:
    """A running pod with a controller (``kind=None``: a bare pod)."""
    pod = make_pod(key, cpu=cpu, memory=memory, node=node, scheduler="default-scheduler", **kwargs)
    refs = [OwnerReference(kind=kind, name=owner, controller=True)] if kind else []
    meta = pod.metadata.model_copy(update={"owner_references": refs, "annotations": dict(annotations or {})})
    spec = pod.spec.model_copy(update={"volumes": list(volumes or [])})
    return pod.model_copy(update={"metadata": meta, "spec": spec})


def daemon(node: str, name: str = "proxy") -> Pod:
    return workload(f"kube-system/{name}-{node}", node, cpu="100m", memory="64Mi", kind="DaemonSet", owner=name)


def nodes(count: int, *, cpu: str = "10", memory: str = "40Gi", **kwargs) -> list:
    return [make_node(f"n{i}", cpu=cpu, memory=memory, **kwargs) for i in range(count)]


def final_nodes(result) -> dict[str, str]:
    """Pod -> node after the plan, for the pods that moved."""
    names = result.node_names
    out = {}
    for s in result.steps:
        out[s.pod] = names[s.target]
    return out


def replay_ok(snapshot, result, config: Optional[SchedulerConfig] = None, max_moves=None) -> None:
    names = result.node_names
    steps = [PlannedStep(s.pod, names[s.source], names[s.target]) for s in result.steps]
    assert replay(snapshot, config or SchedulerConfig(), steps, freed=result.freed_nodes, max_moves=max_moves) == []


def half_empty(count: int = 6) -> list[Pod]:
    """``count`` nodes of 10 CPU, each 40% full with two 2-CPU pods of one Deployment."""
    return [workload(f"default/web-{i}-{j}", f"n{i}", cpu="2", labels={"app": "web"}) for i in range(count) for j in range(2)]


# --------------------------------------------------------------------------- movable pods


MOVABILITY = [
    pytest.param(dict(), RepackConfig(), None, id="replicaset"),
    pytest.param(dict(kind="StatefulSet"), RepackConfig(), None, id="statefulset"),
    pytest.param(dict(kind="Job"), RepackConfig(), None, id="job"),
    pytest.param(dict(kind="DaemonSet"), RepackConfig(), REASON_DAEMONSET, id="daemonset"),
    pytest.param(dict(annotations={"kubernetes.io/config.mirror": "abc"}), RepackConfig(), REASON_MIRROR, id="mirror-annotation"),
    pytest.param(dict(kind="Node", owner="n0"), RepackConfig(), REASON_MIRROR, id="static-owned-by-node"),
    pytest.param(dict(terminating=True), RepackConfig(), REASON_TERMINATING, id="terminating"),
    pytest.param(
        dict(annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}),
        RepackConfig(move_bare_pods=True, move_local_storage=True),
        REASON_NOT_SAFE_TO_EVICT,
        id="safe-to-evict-false",
    ),
    pytest.param(dict(kind=None), RepackConfig(), REASON_BARE, id="bare"),
    pytest.param(dict(kind=None), RepackConfig(move_bare_pods=True), None, id="bare-allowed"),
    pytest.param(
        dict(kind=None, annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}),
        RepackConfig(),
        None,
        id="bare-safe-to-evict-true",
    ),
    pytest.param(dict(volumes=[{"name": "tmp", "emptyDir": {}}]), RepackConfig(), REASON_LOCAL_STORAGE, id="emptydir"),
    pytest.param(dict(volumes=[{"name": "h", "hostPath": {"path": "/x"}}]), RepackConfig(), REASON_LOCAL_STORAGE, id="hostpath"),
    pytest.param(dict(volumes=[{"name": "tmp", "emptyDir": {"medium": "Memory"}}]), RepackConfig(), None, id="emptydir-in-memory"),
    pytest.param(dict(volumes=[{"name": "c", "configMap": {"name": "c"}}]), RepackConfig(), None, id="configmap-volume"),
    pytest.param(
        dict(
            volumes=[{"name": "tmp", "emptyDir": {}}],
            annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes": "tmp"},
        ),
        RepackConfig(),
        None,
        id="local-volume-listed-safe",
    ),
    pytest.param(dict(volumes=[{"name": "tmp", "emptyDir": {}}]), RepackConfig(move_local_storage=True), None, id="emptydir-allowed"),
    pytest.param(
        dict(volumes=[{"name": "tmp", "emptyDir": {}}], annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}),
        RepackConfig(),
        None,
        id="emptydir-safe-to-evict-true",
    ),
]


@pytest.mark.parametrize("kwargs, config, reason", MOVABILITY)
def test_movable_pods_follow_cluster_autoscaler(kwargs, config, reason):
    verdict = classify(workload("default/p", "n0", **kwargs), config)
    assert verdict.movable is (reason is None)
    assert verdict.reason == reason


@pytest.mark.parametrize(
    "kwargs, pins",
    [
        pytest.param(dict(kind="DaemonSet"), False, id="daemonset-does-not-pin"),
        pytest.param(dict(annotations={"kubernetes.io/config.mirror": "x"}), False, id="mirror-does-not-pin"),
        pytest.param(dict(terminating=True), False, id="terminating-does-not-pin"),
        pytest.param(dict(annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}), True, id="not-safe-pins"),
        pytest.param(dict(kind=None), True, id="bare-pins"),
        pytest.param(dict(volumes=[{"name": "tmp", "emptyDir": {}}]), True, id="local-storage-pins"),
    ],
)
def test_which_unmovable_pods_keep_their_node_busy(kwargs, pins):
    assert classify(workload("default/p", "n0", **kwargs), RepackConfig()).pins is pins


# --------------------------------------------------------------------------- known optima


def test_half_empty_nodes_free_half_with_fewest_moves():
    snapshot = make_snapshot(nodes(6), half_empty(6))
    result = plan_repack(snapshot, options=FAST)
    assert len(result.freed_nodes) == 3
    assert result.moved_pods == 6 and len(result.steps) == 6  # two pods per freed node, nothing else
    assert (result.before_active, result.after_active) == (6, 3)
    assert result.lower_bound_nodes == 3 and result.gap_nodes == 0
    assert result.per_resource_bounds["cpu"] == 3
    assert result.lp_bound == pytest.approx(2.4)
    assert result.stats["status"] == "OPTIMAL"
    assert [s.number for s in result.steps] == list(range(1, 7))
    replay_ok(snapshot, result)


def test_nothing_to_gain_moves_nothing():
    pods = [workload(f"default/big-{i}", f"n{i}", cpu="8") for i in range(3)]
    result = plan_repack(make_snapshot(nodes(3), pods), options=FAST)
    assert result.steps == [] and result.freed_nodes == []
    assert result.after_active == 3


def test_pdb_limits_moves_in_total():
    """A budget allowing one disruption lets one pod of the Deployment move, in the whole plan."""
    snapshot = make_snapshot(nodes(6), half_empty(6), pdbs=[make_pdb("default/web", {"app": "web"}, allowed=1)])
    result = plan_repack(snapshot, options=FAST)
    assert result.moved_pods <= 1
    assert result.freed_nodes == []  # every node holds two covered pods: freeing one needs two moves
    replay_ok(snapshot, result)


def test_pdb_allowing_two_frees_one_node():
    snapshot = make_snapshot(nodes(6), half_empty(6), pdbs=[make_pdb("default/web", {"app": "web"}, allowed=2)])
    result = plan_repack(snapshot, options=FAST)
    assert len(result.freed_nodes) == 1 and result.moved_pods == 2
    replay_ok(snapshot, result)


def test_pdb_with_an_empty_selector_covers_its_whole_namespace():
    """policy/v1: a budget selecting ``{}`` covers every pod of its namespace, and the Eviction
    API refuses evictions past its allowance; the plan counts it as the replay does (it used to
    ignore it, and the replay refused the plan it made)."""
    pods = half_empty(6)
    for allowed, moved, freed in ((0, 0, 0), (2, 2, 1)):
        snapshot = make_snapshot(nodes(6), pods, pdbs=[make_pdb("default/all", allowed=allowed, label_selector={})])
        result = plan_repack(snapshot, options=FAST)
        assert result.moved_pods == moved and len(result.freed_nodes) == freed
        replay_ok(snapshot, result)


def test_a_replica_that_is_not_ready_moves_free_beside_ready_siblings():
    """Found by a review: replicas of one workload were one class, charged whole when any of its
    pods spends the budget, so the crash-looping replica an AlwaysAllow budget lets go never
    moved. Now it is a class of its own, and it frees its node."""
    web = {"app": "web"}
    pods = [workload("default/a", "n1", labels=web), workload("default/b", "n2", labels=web),
            workload("default/d", "n0", labels=web, ready=False)]
    budget = make_pdb("default/web", web, min_available=3, allowed=0, healthy=(2, 3), unhealthy_policy="AlwaysAllow")
    snapshot = make_snapshot(nodes(3), pods, pdbs=[budget])
    result = plan_repack(snapshot, options=FAST)
    assert [s.pod for s in result.steps] == ["default/d"]
    assert result.freed_nodes == ["n0"]
    replay_ok(snapshot, result)


def test_pdb_computed_from_min_available():
    """No status: 12 healthy pods, minAvailable 10 → 2 disruptions allowed."""
    snapshot = make_snapshot(nodes(6), half_empty(6), pdbs=[make_pdb("default/web", {"app": "web"}, min_available=10)])
    result = plan_repack(snapshot, options=FAST)
    assert result.moved_pods == 2 and len(result.freed_nodes) == 1


def test_unmovable_pod_pins_its_node():
    pods = half_empty(4) + [
        workload("default/ledger", "n0", cpu="500m", annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}),
        workload("default/debug", "n1", cpu="100m", kind=None),
    ]
    result = plan_repack(make_snapshot(nodes(4), pods), options=FAST)
    assert sorted(result.freed_nodes) == ["n2", "n3"]
    pinned = {n.name: n.pinned_by for n in result.nodes}
    assert "safe-to-evict" in pinned["n0"] and "no controller" in pinned["n1"]
    assert pinned["n2"] is None


def test_daemonset_pods_do_not_pin():
    """cluster-autoscaler ignores DaemonSet pods when it decides a node is empty; so do we. A node
    running only DaemonSet pods is not busy, and a freed node keeps its DaemonSet pods."""
    pods = half_empty(6) + [daemon(f"n{i}") for i in range(7)]
    result = plan_repack(make_snapshot(nodes(7), pods), options=FAST)
    assert len(result.freed_nodes) == 3
    assert result.before_active == 6  # n6 runs DaemonSet pods only
    assert all(not s.pod.startswith("kube-system/") for s in result.steps)
    by_name = {n.name: n for n in result.nodes}
    assert by_name["n6"].busy_before is False and by_name["n6"].busy_after is False
    assert all(by_name[n].cpu_after == 100 for n in result.freed_nodes)  # the DaemonSet pod is still there


def test_anti_affinity_holds_in_the_final_state():
    """Three replicas that repel each other per host spread over three nodes stay one per node."""
    anti = dict(labels={"app": "ha"}, pod_anti_affinity=[term({"app": "ha"}, "kubernetes.io/hostname")])
    pods = [workload(f"default/ha-{i}", f"n{i}", cpu="1", owner="ha", **anti) for i in range(3)]
    pods += [workload(f"default/web-{i}", f"n{i}", cpu="1", labels={"app": "web"}) for i in range(4)]
    snapshot = make_snapshot(nodes(4), pods)
    result = plan_repack(snapshot, options=FAST)
    final = {p.key: p.spec.node_name for p in pods}
    final.update(final_nodes(result))
    ha_nodes = [final[f"default/ha-{i}"] for i in range(3)]
    assert len(set(ha_nodes)) == 3
    assert len(result.freed_nodes) == 1  # n3's web pod moves; every ha node stays
    replay_ok(snapshot, result)


def test_topology_spread_holds_in_the_final_state():
    """Six replicas spread over two zones (maxSkew 1) on four nodes: consolidating keeps 3 + 3,
    and every move stays inside its zone so that no step skews the zones either."""
    zone = {"a": {"zone": "a"}, "b": {"zone": "b"}}
    ns = [make_node(f"n{i}", cpu="10", memory="40Gi", labels=zone["a" if i < 2 else "b"]) for i in range(4)]
    constraint = dict(labels={"app": "web"}, spread=[spread("zone", {"app": "web"})])
    layout = {"n0": 2, "n1": 1, "n2": 2, "n3": 1}
    pods = [workload(f"default/web-{n}-{j}", n, cpu="2", **constraint) for n, k in layout.items() for j in range(k)]
    snapshot = make_snapshot(ns, pods)
    result = plan_repack(snapshot, options=FAST)
    assert sorted(result.freed_nodes) == ["n1", "n3"]
    for s in result.steps:
        assert ns[s.source].metadata.labels["zone"] == ns[s.target].metadata.labels["zone"]
    replay_ok(snapshot, result)


def test_max_moves_is_honoured():
    snapshot = make_snapshot(nodes(6), half_empty(6))
    for limit, freed in ((0, 0), (1, 0), (2, 1), (5, 2)):
        result = plan_repack(snapshot, options=RepackOptions(max_moves=limit, time_limit=10))
        assert len(result.steps) <= limit
        assert len(result.freed_nodes) == freed
        replay_ok(snapshot, result, max_moves=limit)


def test_target_free_caps_the_freed_nodes():
    snapshot = make_snapshot(nodes(6), half_empty(6))
    result = plan_repack(snapshot, options=RepackOptions(target_free=1, time_limit=10))
    assert len(result.freed_nodes) == 1 and len(result.steps) == 2


def test_keep_node_is_never_freed_but_may_receive():
    """n1 is the only node that could be freed; kept, nothing is freed."""
    pods = [workload("default/a", "n0", cpu="4"), workload("default/b", "n1", cpu="2")]
    snapshot = make_snapshot(nodes(2, cpu="8"), pods)
    assert plan_repack(snapshot, options=FAST).freed_nodes == ["n1"]
    kept = plan_repack(snapshot, options=RepackOptions(keep_nodes=("n1",), time_limit=10))
    assert kept.freed_nodes == ["n0"]  # n0's pod goes to the kept node instead
    assert kept.steps[0].target == 1
    both = plan_repack(snapshot, options=RepackOptions(keep_nodes=("n0", "n1"), time_limit=10))
    assert both.freed_nodes == [] and both.steps == []


def test_objective_cost_keeps_the_cheap_node():
    """Three pods on an expensive 8-CPU node, one on a cheap 4-CPU node. Freeing either node frees
    one: by count the cheap node goes (one move); by cost the expensive one (three moves)."""
    label = "node.kubernetes.io/instance-type"
    ns = [
        make_node("big", cpu="8", memory="32Gi", labels={label: "m5.2xlarge"}),
        make_node("small", cpu="4", memory="16Gi", labels={label: "m5.xlarge"}),
    ]
    pods = [workload(f"default/w-{i}", "big", cpu="1") for i in range(3)] + [workload("default/w-3", "small", cpu="1")]
    snapshot = make_snapshot(ns, pods)
    config = SchedulerConfig(repack=RepackConfig(instance_cost={"m5.2xlarge": 10.0, "m5.xlarge": 1.0}))
    by_nodes = plan_repack(snapshot, config, RepackOptions(time_limit=10))
    assert by_nodes.freed_nodes == ["small"] and len(by_nodes.steps) == 1
    by_cost = plan_repack(snapshot, config, RepackOptions(objective="cost", time_limit=10))
    assert by_cost.freed_nodes == ["big"] and len(by_cost.steps) == 3
    assert (by_cost.before_cost, by_cost.after_cost) == (11.0, 1.0)
    replay_ok(snapshot, by_cost, config)


def test_cordoned_node_keeps_its_pods_and_can_be_freed():
    """Static rules are checked when a pod is scheduled, not while it runs: pods may stay on a
    cordoned node, but none moves onto it."""
    ns = nodes(3)
    ns[0] = make_node("n0", cpu="10", memory="40Gi", unschedulable=True)
    snapshot = make_snapshot(ns, half_empty(3))
    result = plan_repack(snapshot, options=FAST)
    assert all(s.target != 0 for s in result.steps)
    assert len(result.freed_nodes) == 1
    replay_ok(snapshot, result)


# --------------------------------------------------------------------------- order


def swap_cluster(with_buffer: bool):
    """n0 and n1 (4 CPU) each run a 3-CPU pod; the plan swaps them (a cycle: each target is full
    until the other pod has left). n2, when there, has room to hold one of them meanwhile."""
    ns = nodes(3 if with_buffer else 2, cpu="4")
    pods = [workload("default/a", "n0", cpu="3", owner="a"), workload("default/b", "n1", cpu="3", owner="b")]
    if with_buffer:
        pods.append(workload("default/c", "n2", cpu="500m", owner="c"))
    return make_snapshot(ns, pods)


def test_cycle_is_broken_through_a_buffer_node():
    snapshot = swap_cluster(with_buffer=True)
    problem = build_problem(snapshot, SchedulerConfig())
    steps = order_moves(problem, {"default/a": 1, "default/b": 0, "default/c": 2})
    assert [(s.pod, s.source, s.target, s.buffer) for s in steps] == [
        ("default/a", 0, 2, True),
        ("default/b", 1, 0, False),
        ("default/a", 2, 1, False),
    ]
    names = ["n0", "n1", "n2"]
    planned = [PlannedStep(s.pod, names[s.source], names[s.target]) for s in steps]
    assert replay(snapshot, SchedulerConfig(), planned) == []


def test_cycle_without_room_fails_clearly():
    snapshot = swap_cluster(with_buffer=False)
    problem = build_problem(snapshot, SchedulerConfig())
    with pytest.raises(OrderError) as err:
        order_moves(problem, {"default/a": 1, "default/b": 0})
    message = str(err.value)
    assert "wait for each other in a cycle" in message
    assert "default/a (n0 -> n1): Insufficient cpu" in message and "default/b (n1 -> n0): Insufficient cpu" in message


def test_buffer_step_counts_against_max_moves():
    snapshot = swap_cluster(with_buffer=True)
    problem = build_problem(snapshot, SchedulerConfig())
    with pytest.raises(OrderError):
        order_moves(problem, {"default/a": 1, "default/b": 0, "default/c": 2}, max_steps=2)


def test_order_waits_for_room():
    """n0 is full; its pod leaves for n1 before n2's pod can come in."""
    snapshot = make_snapshot(
        nodes(3, cpu="4"),
        [workload("default/x", "n0", cpu="3", owner="x"), workload("default/y", "n2", cpu="3", owner="y")],
    )
    problem = build_problem(snapshot, SchedulerConfig())
    steps = order_moves(problem, {"default/y": 0, "default/x": 1})
    assert [s.pod for s in steps] == ["default/x", "default/y"]


# --------------------------------------------------------------------------- replay


def test_replay_refuses_an_unsafe_step():
    snapshot = make_snapshot(
        nodes(3, cpu="4"),
        [workload("default/x", "n0", cpu="3", owner="x"), workload("default/y", "n2", cpu="3", owner="y")],
    )
    wrong_order = [PlannedStep("default/y", "n2", "n0"), PlannedStep("default/x", "n0", "n1")]
    problems = replay(snapshot, SchedulerConfig(), wrong_order)
    assert problems == ["step 1: default/y n2 -> n0: NodeResourcesFit: Insufficient cpu"]


def test_replay_refuses_unmovable_pods_pdb_and_claims():
    pods = [
        workload("default/ledger", "n0", cpu="1", annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}),
    ]
    snapshot = make_snapshot(nodes(2), pods)
    problems = replay(snapshot, SchedulerConfig(), [PlannedStep("default/ledger", "n0", "n1")])
    assert problems == [f"plan: default/ledger may not move: {REASON_NOT_SAFE_TO_EVICT}"]
    problems = replay(snapshot, SchedulerConfig(), [], freed=["n0"])
    assert problems == ["freed: node n0 still runs default/ledger"]
    snapshot = make_snapshot(nodes(6), half_empty(6), pdbs=[make_pdb("default/web", {"app": "web"}, allowed=1)])
    steps = [PlannedStep("default/web-0-0", "n0", "n1"), PlannedStep("default/web-0-1", "n0", "n1")]
    problems = replay(snapshot, SchedulerConfig(), steps, max_moves=1)
    assert problems == [
        "moves: 2 evictions exceed --max-moves 1",
        "pdb: PodDisruptionBudget default/web allows 1 disruption(s) but the plan evicts its pods 2 time(s)",
    ]


def test_replay_checks_the_final_state_rules():
    """Each step alone passes the filters, but both replicas end up on one host that their
    anti-affinity forbids: the second step's filter sees the first."""
    anti = dict(labels={"app": "ha"}, pod_anti_affinity=[term({"app": "ha"}, "kubernetes.io/hostname")])
    pods = [workload(f"default/ha-{i}", f"n{i}", cpu="1", owner="ha", **anti) for i in range(2)]
    snapshot = make_snapshot(nodes(3), pods)
    steps = [PlannedStep("default/ha-0", "n0", "n2"), PlannedStep("default/ha-1", "n1", "n2")]
    problems = replay(snapshot, SchedulerConfig(), steps)
    assert problems and problems[0].startswith("step 2: default/ha-1 n1 -> n2: InterPodAffinity")


# --------------------------------------------------------------------------- generated cluster


def test_generated_cluster_plan_is_safe_and_beats_nothing():
    from adapters.bench import repack

    snapshot = repack(40, 3).snapshot()
    result = plan_repack(snapshot, options=RepackOptions(time_limit=10))
    assert result.freed_nodes
    assert result.after_active >= result.lower_bound_nodes
    replay_ok(snapshot, result)
    moved = {s.pod for s in result.steps}
    for key in moved:  # only pods the rules allow to move
        assert classify(snapshot.pod_by_key[key], RepackConfig()).movable

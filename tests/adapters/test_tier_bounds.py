"""The bench's CP-SAT bound by priority tier (adapters/bench/tier_bounds.py): by hand where the
answer is plain, and never below what greedy places on a generated contended cluster.
(That it is never below the exhaustive optimum is checked in tests/reliability/test_preemption_optimum.py.)"""

from __future__ import annotations

from adapters.bench import generate, tier_bound
from models import POD_GROUP_LABEL, SchedulerConfig
from solver import schedule

from .test_workloads import _node, _pod, _snap


def bound_of(*objects) -> dict[int, int]:
    snapshot = _snap(*objects)
    return tier_bound(snapshot, snapshot.pending_pods()).at_or_above


def test_every_resource_at_once_and_a_pod_never_split_beyond_one_node():
    # cpu alone would allow 8 of 1 cpu; memory alone 8 of 2Gi; both together on two 4-cpu 16Gi nodes: 8.
    # Pods of 3 cpu: each node takes one (alone), so 2 however the cpu adds up.
    assert bound_of(_node("a"), _node("b"), *[_pod(f"p{i}", cpu="3") for i in range(5)]) == {0: 2}
    assert bound_of(_node("a"), _node("b"), *[_pod(f"p{i}", cpu="1", memory="6Gi") for i in range(8)]) == {0: 4}


def test_an_overcommitted_node_takes_no_room_from_the_others():
    # n0's running pod uses twice its cpu; n1 is empty and takes the pending pod (the exhaustive
    # optimum's property run found the pool's summed room reading 0 here).
    objects = [_node("n0", cpu="1"), _node("n1", cpu="1"), _pod("run", cpu="2", node="n0"),
               _pod("t", cpu="500m", preemptionPolicy="Never")]
    assert bound_of(*objects) == {0: 1}


def test_tiers_count_their_priority_and_above():
    objects = [_node("a"), *[_pod(f"h{i}", cpu="1", priority=10) for i in range(2)],
               *[_pod(f"l{i}", cpu="1", priority=1) for i in range(5)]]
    assert bound_of(*objects) == {10: 2, 1: 4}


def test_an_eviction_frees_one_node_per_preemptor():
    # Two full nodes of priority-0 pods; one pending preemptor of priority 10 and four pending pods
    # of priority 0 (they cannot preempt their equals). The preemptor frees one node at most:
    # itself and three of the others fit there, not all four (the whole-window room would say 5).
    objects = [_node("a"), _node("b"), _pod("ra", cpu="4", node="a"), _pod("rb", cpu="4", node="b"),
               _pod("h", cpu="1", priority=10), *[_pod(f"l{i}", cpu="1") for i in range(4)]]
    assert bound_of(*objects) == {10: 1, 0: 4}


def test_never_preempting_and_equal_priorities_keep_the_running_pods():
    objects = [_node("a"), _pod("r", cpu="4", node="a", priority=5),
               _pod("n", cpu="1", priority=10, preemptionPolicy="Never"), _pod("e", cpu="1", priority=5)]
    assert bound_of(*objects) == {10: 0, 5: 0}


def test_a_gang_places_its_min_member_or_nothing():
    group = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
             "metadata": {"name": "g", "namespace": "ns"}, "spec": {"minMember": 3}}
    members = [_pod(f"m{i}", cpu="2", labels={"app": "x", POD_GROUP_LABEL: "g"}) for i in range(3)]
    # Room for two members of 2 cpu on one 4-cpu node (plus 1 cpu left): the gang cannot be whole.
    assert bound_of(_node("a", cpu="5"), group, *members) == {0: 0}
    assert bound_of(_node("a", cpu="6"), group, *members) == {0: 3}


def test_never_below_greedy_on_a_contended_cluster_by_tier():
    snapshot = generate("contended", "quick", 1).snapshot()
    pending = snapshot.pending_pods()
    bound = tier_bound(snapshot, pending, seconds=5.0)
    priority = {p.key: p.spec.priority or 0 for p in pending}
    assert bound.pools >= 2 and len(bound.at_or_above) == len(set(priority.values()))
    plan = schedule(snapshot, SchedulerConfig(), engine="greedy")
    for tier, most in bound.at_or_above.items():
        placed = sum(1 for a in plan.assignments if priority[a.pod] >= tier)
        assert placed <= most, (tier, placed, most)
    # Tighter than counting the pending pods: the cluster has less room than its demand.
    assert bound.total < len(pending)


def test_a_group_evicted_whole_frees_every_node_it_runs_on():
    # disruptionMode all: h evicts job-0 and job-1 together, and the seven l pods use both nodes'
    # room (both engines place 1 + 7; the one-node's-worth rule alone would say 1 + 3).
    from tests.reliability.test_group_optimum import node, pod, podgroup, snapshot_of

    for mode, most in (("all", {10: 1, 0: 8}), ("single", {10: 1, 0: 4})):
        snapshot = snapshot_of([node("n0", 4), node("n1", 4), podgroup("job", 1, disruptionMode={mode: {}}, priority=0),
                                pod("job-0", 4, node_name="n0", group="job"), pod("job-1", 4, node_name="n1", group="job"),
                                pod("h", 1, priority=10), *[pod(f"l{i}", 1, priority=0, t=i + 1) for i in range(7)]])
        assert tier_bound(snapshot, snapshot.pending_pods()).at_or_above == most, mode

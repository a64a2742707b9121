"""``what-if``: each change applied to a small snapshot, decided again, compared with today."""

from __future__ import annotations

import pytest

from models.config import SchedulerConfig
from models.errors import InputError
from models.objects import OwnerReference, Pod, copy_with
from solver import whatif as w
from solver.whatif import what_if
from tests.builders import make_node, make_pdb, make_pod, make_pod_group, make_snapshot

CONFIG = SchedulerConfig.model_validate({"solver": {"timeLimitSeconds": 10}})
HARD_PDB = SchedulerConfig.model_validate({"solver": {"timeLimitSeconds": 10}, "preemption": {"pdb": "hard"}})


def owned(pod: Pod, kind: str = "ReplicaSet") -> Pod:
    ref = OwnerReference(kind=kind, name="owner", uid="u1", controller=True)
    return copy_with(pod, {"metadata": copy_with(pod.metadata, {"owner_references": [ref]})})


def test_adding_a_node_like_another_places_what_did_not_fit() -> None:
    snap = make_snapshot([make_node("n1", cpu="2")], [make_pod("a/p1", cpu="2"), make_pod("a/p2", cpu="2")])
    result = what_if(snap, [w.AddNodes(1, "n1")], CONFIG)
    assert len(result.today.placed) == 1 and len(result.today.left_out) == 1
    assert len(result.changed.placed) == 2
    assert list(result.difference.newly_placed.values()) in (["n1"], ["n1-whatif-1"])
    assert result.changed.nodes == 2 and result.changed.nodes_used == 2


def test_a_node_added_like_a_gpu_node_carries_its_devices() -> None:
    from models.snapshot import ClusterSnapshot
    from tests.solver.dra_objects import gpu_class, gpu_slice, gpu_template, with_claim

    pods = [with_claim(make_pod(f"ml/t{i}", cpu="1"), template="two") for i in range(2)]
    snap = ClusterSnapshot.build(nodes=[make_node("g1", cpu="8")], pods=pods, device_classes=[gpu_class()],
                                 resource_slices=[gpu_slice("g1", 2)], resource_claim_templates=[gpu_template("ml/two", 2)])
    result = what_if(snap, [w.AddNodes(1, "g1")], CONFIG)
    assert len(result.today.placed) == 1 and len(result.changed.placed) == 2
    assert sorted(result.changed.placed.values()) == ["g1", "g1-whatif-1"]


def test_a_node_added_like_a_not_ready_node_keeps_only_the_taints_of_its_kind() -> None:
    """The lifecycle controller's taints (not-ready, cordon, ...) are the old node's state; a
    taint the operator put on the node pool is its kind, and the copy keeps it."""
    sick = make_node("n1", cpu="2", unschedulable=True,
                     taints=["node.kubernetes.io/not-ready:NoExecute", "node.kubernetes.io/unschedulable:NoSchedule",
                             "node.cloudprovider.kubernetes.io/shutdown:NoSchedule", "ToBeDeletedByClusterAutoscaler:NoSchedule",
                             "karpenter.sh/disrupted:NoSchedule", "dedicated=batch:NoSchedule"])
    batch = make_pod("a/batch", cpu="1", tolerations=[{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}])
    snap = make_snapshot([sick], [batch, make_pod("a/plain", cpu="1")])
    result = what_if(snap, [w.AddNodes(1, "n1")], CONFIG)
    assert result.changed.placed == {"a/batch": "n1-whatif-1"}
    assert "taint {dedicated: batch}" in result.changed.left_out["a/plain"]
    added = w.changes.apply_all(snap, [w.AddNodes(1, "n1")], CONFIG.scheduler_name).node_by_name["n1-whatif-1"]
    assert [t.key for t in added.spec.taints] == ["dedicated"] and not added.spec.unschedulable


def test_draining_sends_owned_pods_elsewhere_keeps_daemons_and_drops_bare_pods() -> None:
    pods = [owned(make_pod("a/web", cpu="1", node="n1")), owned(make_pod("a/agent", cpu="100m", node="n1"), "DaemonSet"),
            make_pod("a/bare", cpu="1", node="n1")]
    snap = make_snapshot([make_node("n1"), make_node("n2")], pods)
    result = what_if(snap, [w.Drain("n1")], CONFIG)
    assert result.difference.moved == {"a/web": ("n1", "n2")}
    assert result.difference.removed == ["a/bare"]
    drained = w.changes.apply_all(snap, [w.Drain("n1")], CONFIG.scheduler_name)
    assert drained.node_by_name["n1"].spec.unschedulable
    assert drained.pod("a/agent").spec.node_name == "n1"


def test_removing_the_only_roomy_node_leaves_its_pod_out() -> None:
    snap = make_snapshot([make_node("big", cpu="8"), make_node("small", cpu="1")],
                         [owned(make_pod("a/wide", cpu="4", node="big"))])
    result = what_if(snap, [w.RemoveNode("big")], CONFIG)
    assert result.difference.newly_left_out == ["a/wide"]
    assert "Insufficient cpu" in result.changed.left_out["a/wide"]
    assert result.changed.nodes == 1


def _pdb_scene():
    nodes = [make_node("n1", cpu="2")]
    pods = [make_pod("b/low", cpu="2", node="n1", priority=0, labels={"app": "low"}),
            make_pod("a/high", cpu="2", priority=1000)]
    return make_snapshot(nodes, pods, pdbs=[make_pdb("b/low", {"app": "low"}, min_available=1)])


@pytest.mark.parametrize("change", [w.DeletePdb("b/low"), w.RelaxPdb("b/low", 1), w.RelaxPdb("b/low", "100%")],
                         ids=["delete", "relax-int", "relax-percent"])
def test_a_budget_deleted_or_relaxed_lets_the_preemptor_in(change) -> None:
    result = what_if(_pdb_scene(), [change], HARD_PDB)
    assert "a/high" in result.today.left_out and not result.today.evicted
    assert result.changed.placed == {"a/high": "n1"}
    assert result.difference.evictions_added == {"b/low": "n1"}


def test_relaxing_a_budget_keeps_its_unhealthy_pod_eviction_policy() -> None:
    """Found by a review: the relaxed spec was rebuilt from the selector alone, so AlwaysAllow
    went, and the two pods that are not Ready, evicted for free today, were charged after the
    "relaxing": the preemptor placed today was left out."""
    web = {"app": "web"}
    pods = [make_pod(f"b/{n}", cpu="1", node="n1", priority=0, labels=web, ready=n in "ab") for n in "abde"]
    pdb = make_pdb("b/web", web, min_available=4, allowed=0, healthy=(2, 4), unhealthy_policy="AlwaysAllow")
    snap = make_snapshot([make_node("n1", cpu="4")], [*pods, make_pod("a/high", cpu="2", priority=1000)], pdbs=[pdb])
    result = what_if(snap, [w.RelaxPdb("b/web", 1)], HARD_PDB)
    assert result.today.placed == {"a/high": "n1"}
    assert result.changed.placed == {"a/high": "n1"}
    assert set(result.changed.evicted) == {"b/d", "b/e"}


def test_raising_a_priority_changes_who_gets_the_room() -> None:
    snap = make_snapshot([make_node("n1", cpu="2")],
                         [make_pod("a/first", cpu="2", priority=10), make_pod("a/second", cpu="2", priority=5)])
    result = what_if(snap, [w.SetPriority("a/second", 100)], CONFIG)
    assert set(result.today.placed) == {"a/first"}
    assert set(result.changed.placed) == {"a/second"}
    assert result.changed.placed_by_priority == {100: (1, 1), 10: (0, 1)}


def test_a_gangs_priority_is_set_on_every_member() -> None:
    pods = [make_pod(f"ml/t{i}", cpu="1", group="train") for i in range(2)] + [make_pod("a/x", cpu="1")]
    snap = make_snapshot([make_node("n1", cpu="4")], pods, pod_groups=[make_pod_group("ml/train", 2)])
    changed = w.changes.apply_all(snap, [w.SetPriority("podgroup/ml/train", 7)], CONFIG.scheduler_name)
    assert [changed.pod(f"ml/t{i}").spec.priority for i in range(2)] == [7, 7]
    assert changed.pod("a/x").spec.priority in (None, 0)


def test_removing_a_running_pod_or_a_namespace_frees_its_room() -> None:
    snap = make_snapshot([make_node("n1", cpu="2")],
                         [make_pod("old/hog", cpu="2", node="n1"), make_pod("a/new", cpu="2")])
    for change in (w.RemovePod("old/hog"), w.RemoveNamespace("old")):
        result = what_if(snap, [change], CONFIG)
        assert result.difference.newly_placed == {"a/new": "n1"}
        assert result.difference.removed == ["old/hog"]


@pytest.mark.parametrize("changes", [[w.RemoveNode("n1"), w.AddNodes(2, "n1")], [w.AddNodes(2, "n1"), w.RemoveNode("n1")]],
                         ids=["remove-first", "add-first"])
def test_a_node_removed_and_added_like_itself_is_replaced_in_either_order(changes) -> None:
    snap = make_snapshot([make_node("n1", cpu="4")], [owned(make_pod("a/web", cpu="3", node="n1")), make_pod("a/new", cpu="3")])
    result = what_if(snap, changes, CONFIG)
    assert result.changed.nodes == 2
    assert {result.changed.placed["a/web"], result.changed.placed["a/new"]} == {"n1-whatif-1", "n1-whatif-2"}
    assert set(result.difference.newly_placed) == {"a/new"} and set(result.difference.moved) == {"a/web"}


@pytest.mark.parametrize(("changes", "refused"), [
    ([w.RelaxPdb("a/b", 1), w.DeletePdb("a/b")], "poddisruptionbudgets/a/b: --relax-pdb a/b=1: --delete-pdb a/b deletes it"),
    ([w.RemoveNamespace("a"), w.RelaxPdb("a/b", "50%")], "poddisruptionbudgets/a/b: --relax-pdb a/b=50%: --remove-namespace a"),
    ([w.SetPriority("a/run", 5), w.RemovePod("a/run")], "pods/a/run: --priority a/run=5: --remove-pod a/run deletes it"),
    ([w.Drain("n1"), w.SetPriority("a/bare", 5)], "pods/a/bare: --priority a/bare=5: --drain n1 deletes it"),
    ([w.SetPriority("podgroup/a/g", 5), w.RemoveNamespace("a")], "podgroups/a/g: --priority podgroup/a/g=5: --remove-namespace a"),
    ([w.SetPriority("podgroup/a/g", 5), w.SetPriority("a/g0", 6)], "pods/a/g0: --priority podgroup/a/g=5: --priority a/g0=6 sets"),
    ([w.RelaxPdb("a/b", 1), w.RelaxPdb("a/b", 2)], "poddisruptionbudgets/a/b: --relax-pdb a/b=1: --relax-pdb a/b=2 sets"),
])
def test_two_changes_that_cannot_both_hold_are_refused_naming_both(changes, refused) -> None:
    with pytest.raises(InputError) as caught:
        what_if(_conflict_scene(), changes, CONFIG)
    assert str(caught.value).startswith(refused), caught.value
    with pytest.raises(InputError) as caught:  # the other order names the same pair
        what_if(_conflict_scene(), changes[::-1], CONFIG)
    assert changes[0].given() in str(caught.value) and changes[1].given() in str(caught.value)


@pytest.mark.parametrize("changes", [
    [w.RemovePod("a/run"), w.RemoveNamespace("a"), w.RemovePod("a/run")],  # deleted twice: both hold
    [w.DeletePdb("a/b"), w.RemoveNamespace("a")],
    [w.RelaxPdb("a/b", 1), w.RelaxPdb("a/b", 1)],
    [w.RemovePod("a/g0"), w.SetPriority("podgroup/a/g", 5)],  # the gang's other pod gets it
    [w.Drain("n1"), w.Drain("n1"), w.SetPriority("a/run", 5)],  # a/run comes back pending, at 5
    [w.Drain("n1"), w.RemoveNode("n1")],  # the removal drains it too (accepted before conflicts were checked)
])
def test_changes_that_agree_are_taken_in_any_order(changes) -> None:
    def pods(order: list) -> list[tuple]:
        changed = w.changes.apply_all(_conflict_scene(), order, CONFIG.scheduler_name)
        return sorted((p.key, p.spec.priority, p.spec.node_name) for p in changed.pods)

    assert pods(changes) == pods(changes[::-1])


def _conflict_scene():
    pods = [owned(make_pod("a/run", cpu="1", node="n1", labels={"app": "x"})), make_pod("a/bare", cpu="1", node="n1"),
            make_pod("a/g0", cpu="1", group="g"), make_pod("a/g1", cpu="1", group="g")]
    return make_snapshot([make_node("n1"), make_node("n2")], pods, pdbs=[make_pdb("a/b", {"app": "x"}, min_available=1)],
                         pod_groups=[make_pod_group("a/g", 2)])


@pytest.mark.parametrize(("change", "named"), [
    (w.Drain("ghost"), "nodes/ghost: --drain"),
    (w.RemoveNode("ghost"), "nodes/ghost: --remove-node"),
    (w.AddNodes(2, "ghost"), "nodes/ghost: --add-nodes"),
    (w.DeletePdb("a/ghost"), "poddisruptionbudgets/a/ghost: --delete-pdb"),
    (w.RelaxPdb("a/ghost", 1), "poddisruptionbudgets/a/ghost: --relax-pdb"),
    (w.SetPriority("a/ghost", 1), "a/ghost: --priority"),
    (w.RemovePod("a/ghost"), "pods/a/ghost: --remove-pod"),
    (w.RemoveNamespace("ghost"), "namespaces/ghost: --remove-namespace"),
])
def test_a_change_naming_nothing_is_refused_naming_it(change, named) -> None:
    snap = make_snapshot([make_node("n1")], [make_pod("a/p", cpu="1")])
    with pytest.raises(InputError) as caught:
        what_if(snap, [change], CONFIG)
    assert str(caught.value).startswith(named)


def test_gangs_are_counted_per_priority() -> None:
    pods = [make_pod(f"ml/a{i}", cpu="2", group="a", priority=10) for i in range(2)]
    pods += [make_pod(f"ml/b{i}", cpu="2", group="b", priority=5) for i in range(2)]
    snap = make_snapshot([make_node("n1", cpu="4")], pods,
                         pod_groups=[make_pod_group("ml/a", 2), make_pod_group("ml/b", 2)])
    result = what_if(snap, [w.SetPriority("podgroup/ml/b", 50)], CONFIG)
    assert result.today.gangs_by_priority() == {10: (1, 1), 5: (0, 1)}
    assert result.changed.gangs_by_priority() == {50: (1, 1), 10: (0, 1)}

"""``provision``: the cheapest nodes to add, exactly, against first-fit-decreasing."""

from __future__ import annotations

import random
from typing import Optional

import pytest

from models.config import SchedulerConfig
from models.errors import InputError
from solver.provision import parse_shapes, provision
from models.snapshot import ClusterSnapshot
from tests.builders import make_node, make_pod, make_pod_group, make_pvc, make_snapshot, make_storage_class, term
from tests.builders import spread as spread_rule
from tests.solver.dra_objects import allocated_claim, gpu_class, gpu_slice, gpu_template, with_claim

CONFIG = SchedulerConfig.model_validate({"solver": {"timeLimitSeconds": 20, "workers": 2}})


def shapes(*entries: tuple) -> list:
    """(name, cpu, cost[, extra fields]) -> parsed shapes."""
    out = []
    for name, cpu, cost, *extra in entries:
        entry = {"name": name, "allocatable": {"cpu": cpu, "memory": "64Gi", "pods": "110"}, "cost": cost}
        entry.update(extra[0] if extra else {})
        out.append(entry)
    return parse_shapes(out, default_max=50)


def full_node():
    return make_node("old", cpu="1"), make_pod("sys/hog", cpu="1", node="old")


def test_one_bigger_node_beats_first_fit_decreasing_cheapest_per_pod() -> None:
    node, hog = full_node()
    pods = [hog] + [make_pod(f"a/p{i}", cpu="3") for i in range(3)]
    r = provision(make_snapshot([node], pods), CONFIG, shapes(("small", "4", 4), ("big", "8", 5)))
    assert (r.ffd_nodes, r.ffd_cost) == (3, 12000)
    assert sorted(a.shape for a in r.added) == ["big", "small"] and r.cost == 9000
    assert r.proven and r.gap == 0.0
    assert set(r.placement) == {"a/p0", "a/p1", "a/p2"} and not r.left_out
    assert set(r.placement.values()) == {"big-new-1", "small-new-1"}


def test_free_room_on_existing_nodes_is_used_first() -> None:
    pods = [make_pod("a/p", cpu="1")]
    r = provision(make_snapshot([make_node("roomy", cpu="4")], [make_pod("a/big", cpu="8")] + pods), CONFIG,
                  shapes(("big", "8", 3)))
    assert r.pending == 1 and [a.shape for a in r.added] == ["big"]
    assert r.placement == {"a/big": "big-new-1"}


def test_replicas_that_repel_each_other_per_node_get_a_node_each() -> None:
    node, hog = full_node()
    anti = [term({"app": "db"}, "kubernetes.io/hostname")]
    pods = [hog] + [make_pod(f"a/db{i}", cpu="1", labels={"app": "db"}, pod_anti_affinity=anti) for i in range(3)]
    r = provision(make_snapshot([node], pods), CONFIG, shapes(("small", "2", 1), ("big", "16", 2)))
    assert len(r.added) == 3 and r.cost == 3000 and r.proven
    assert len(set(r.placement.values())) == 3


def test_a_gang_that_must_share_a_zone_is_provisioned_in_one() -> None:
    node, hog = full_node()
    pods = [hog] + [make_pod(f"ml/t{i}", cpu="3", group="train") for i in range(3)]
    snap = make_snapshot([node], pods, pod_groups=[make_pod_group("ml/train", 3, topology_key="topology.kubernetes.io/zone")])
    r = provision(snap, CONFIG, shapes(("small", "4", 1, {"zones": {"a": 2, "b": 3}})))
    assert len(r.added) == 3 and {a.shape for a in r.added} == {"small@b"}
    assert r.proven and len(r.placement) == 3


def test_a_pod_no_shape_can_take_is_named() -> None:
    node, hog = full_node()
    r = provision(make_snapshot([node], [hog, make_pod("a/huge", cpu="64")]), CONFIG, shapes(("big", "8", 1)))
    assert not r.added and "a/huge" in r.nowhere and "Insufficient cpu" in r.nowhere["a/huge"]


def test_shapes_default_to_the_clusters_nodes() -> None:
    nodes = [make_node("w1", cpu="2", labels={"node.kubernetes.io/instance-type": "m5"}),
             make_node("w2", cpu="2", labels={"node.kubernetes.io/instance-type": "m5"}, unschedulable=True)]
    pods = [make_pod("a/x", cpu="2", node="w1"), make_pod("a/y", cpu="2"), make_pod("a/z", cpu="2")]
    r = provision(make_snapshot(nodes, pods), CONFIG)
    assert [s.name for s in r.shapes] == ["like-w1"]  # the cordoned w2 is the same shape
    assert len(r.added) == 2 and not r.left_out


@pytest.mark.parametrize("seed", range(8))
def test_never_worse_than_first_fit_decreasing(seed: int) -> None:
    rng = random.Random(seed)
    node, hog = full_node()
    pods = [hog] + [make_pod(f"a/p{i}", cpu=rng.choice(["1", "2", "3", "5"]), memory=rng.choice(["1Gi", "20Gi"]))
                    for i in range(rng.randint(5, 14))]
    r = provision(make_snapshot([node], pods), CONFIG,
                  shapes(("s", "4", 3), ("m", "8", 5), ("l", "16", 9, {"allocatable": {"cpu": "16", "memory": "32Gi"}})))
    assert r.cost <= r.ffd_cost and not r.left_out
    assert r.proven, r.status


@pytest.mark.parametrize(("entry", "message"), [
    ({"name": "x", "allocatable": {"cpu": "4"}, "cost": -1}, "shapes[0] (x): cost: -1 must be a number >= 0"),
    ({"name": "x", "allocatable": {"cpus": "4"}, "cost": 1}, "shapes[0] (x): allocatable.cpus: unknown resource"),
    ({"name": "x", "allocatable": {"cpu": "4"}, "cost": "cheap"}, 'shapes[0] (x): cost: "cheap" is not a number'),
    ({"name": "x", "allocatable": {"cpu": "4"}, "maxCount": -2}, 'shapes[0] (x): maxCount: "-2" must be an integer'),
    ({"allocatable": {"cpu": "4"}}, "shapes[0]: name: a shape needs a name"),
    ({"name": "x", "allocatable": {"cpu": "4"}, "price": 1}, "shapes[0]: price: unknown field"),
])
def test_a_bad_shape_is_refused_naming_it(entry, message) -> None:
    with pytest.raises(InputError) as caught:
        parse_shapes([entry], default_max=5)
    assert str(caught.value).startswith(message)


def test_zones_make_one_shape_per_zone_with_its_own_limit() -> None:
    [a, b] = parse_shapes([{"name": "s", "allocatable": {"cpu": "2"}, "cost": 0.5, "maxCount": 3,
                            "zones": {"a": 1, "b": 7}}], default_max=9)
    assert (a.name, a.max_count, a.cost) == ("s@a", 1, 500) and (b.name, b.max_count) == ("s@b", 3)
    assert b.node.metadata.labels["topology.kubernetes.io/zone"] == "b"


def test_pods_that_repel_each_other_or_share_a_host_port_get_nodes_apart() -> None:
    """Anti-affinity on hostname between two different pods, and two pods of different classes
    asking for one host port, are in the cost model: one node each, proven."""
    node, hog = full_node()
    pods = [hog, make_pod("a/x", cpu="1", labels={"app": "x"}, pod_anti_affinity=[term({"app": "y"}, "kubernetes.io/hostname")]),
            make_pod("a/y", cpu="1", labels={"app": "y"}),
            make_pod("a/p", cpu="1", host_ports=[8080]), make_pod("a/q", cpu="2", host_ports=[8080])]
    r = provision(make_snapshot([node], pods), CONFIG, shapes(("big", "8", 1)))
    assert len(r.added) == 2 and r.proven and not r.left_out
    assert r.placement["a/x"] != r.placement["a/y"] and r.placement["a/p"] != r.placement["a/q"]


def test_pods_that_repel_each_other_across_zones_get_nodes_in_two_zones() -> None:
    """Anti-affinity on the zone between two different pods, and a pod repelling its own
    replicas per zone, are in the cost model: the cheap zone's shape for one of each, the dear
    zone's for the other."""
    node, hog = full_node()
    zone = "topology.kubernetes.io/zone"
    pods = [hog, make_pod("a/x", cpu="1", labels={"app": "x"}, pod_anti_affinity=[term({"app": "y"}, zone)]),
            make_pod("a/y", cpu="1", labels={"app": "y"})]
    pods += [make_pod(f"a/db{i}", cpu="1", labels={"app": "db"}, pod_anti_affinity=[term({"app": "db"}, zone)])
             for i in range(2)]
    r = provision(make_snapshot([node], pods), CONFIG, shapes(("big", "8", 1, {"zones": {"a": 3}}),
                                                              ("dear", "8", 2, {"zones": {"b": 3}})))
    assert sorted(a.shape for a in r.added) == ["big@a", "dear@b"] and r.proven and not r.left_out
    assert r.placement["a/x"] != r.placement["a/y"] and r.placement["a/db0"] != r.placement["a/db1"]


def test_a_rule_the_cost_model_does_not_count_is_caught_and_named() -> None:
    """Spread across several pending pods is not in the cost model: its one zone-a node for both
    replicas is refused by the validator (zone b, full, counts 0 of them), the engine decides
    instead, and the replica left out is named."""
    zone = "topology.kubernetes.io/zone"
    node = make_node("old", cpu="1", labels={zone: "b"})
    hog = make_pod("sys/hog", cpu="1", node="old")
    pods = [hog] + [make_pod(f"a/w{i}", cpu="1", labels={"app": "w"}, spread=[spread_rule(zone, {"app": "w"})])
                    for i in range(2)]
    r = provision(make_snapshot([node], pods), CONFIG, shapes(("big", "8", 1, {"zones": {"a": 3}})))
    assert len(r.added) == 1 and r.status == "OPTIMAL"
    assert len(r.placement) == 1 and len(r.left_out) == 1
    assert not r.proven and r.placed_by == "engine"
    [why] = r.left_out.values()
    assert "topology spread" in why


def test_nothing_to_provision_when_everything_fits() -> None:
    r = provision(make_snapshot([make_node("n1", cpu="4")], [make_pod("a/p", cpu="1")]), CONFIG, shapes(("big", "8", 1)))
    assert (r.pending, r.added, r.cost, r.placement) == (0, [], 0, {})


def test_a_pod_whose_claim_does_not_exist_is_named_with_kube_schedulers_reason() -> None:
    node, hog = full_node()
    pods = [hog, make_pod("a/db", cpu="2", claims=["data"]), make_pod("a/web", cpu="2")]
    r = provision(make_snapshot([node], pods), CONFIG, shapes(("big", "8", 1)))
    assert r.nowhere == {"a/db": '0/2 nodes are available: persistentvolumeclaim "data" not found.'}
    assert r.placement == {"a/web": "big-new-1"}


def test_a_wait_for_first_consumer_claim_goes_to_a_new_node_its_storage_class_allows() -> None:
    """The StorageClass provisions only in zone b: the pod goes to a new node there, and the
    plan that is validated binds the claim to that node."""
    node, hog = full_node()
    snap = make_snapshot([node], [hog, make_pod("a/db", cpu="2", claims=["data"])], pvcs=[make_pvc("a/data")],
                         storage_classes=[make_storage_class(zones=["b"])])
    r = provision(snap, CONFIG, shapes(("cheap", "4", 1, {"zones": {"a": 5}}), ("dear", "4", 3, {"zones": {"b": 5}})))
    assert [a.shape for a in r.added] == ["dear@b"] and r.placement == {"a/db": "dear@b-new-1"}
    assert r.placed_by == "model"
    assert r.proven and not r.nowhere


def gpu_pods(n: int, count: int) -> list:
    return [with_claim(make_pod(f"ml/t{i}", cpu="1"), template="gpus") for i in range(n)], gpu_template("ml/gpus", count)


def test_gpu_pods_get_nodes_of_a_shape_whose_devices_hold_them() -> None:
    """Three pods of 2 GPUs each: the 4-GPU shape holds two (cost 3 each), the 8-GPU one all
    three (cost 5): one 8-GPU node, where first-fit-decreasing opens two of 4."""
    node, hog = full_node()
    pods, template = gpu_pods(3, 2)
    snap = ClusterSnapshot.build(nodes=[node], pods=[hog, *pods], device_classes=[gpu_class()],
                                 resource_claim_templates=[template])
    gpus = {"devices": [{"driver": "gpu.example.com", "count": 4, "attributes": {"model": "a100"}}]}
    eight = {"devices": [{"driver": "gpu.example.com", "count": 8, "name": "gpu"}]}
    r = provision(snap, CONFIG, shapes(("plain", "16", 1), ("gpu4", "16", 3, gpus), ("gpu8", "16", 5, eight)))
    assert (r.ffd_nodes, r.ffd_cost) == (2, 6000)
    assert [a.shape for a in r.added] == ["gpu8"] and r.cost == 5000 and r.proven
    assert set(r.placement.values()) == {"gpu8-new-1"} and not r.left_out and not r.nowhere
    assert r.placed_by == "model"  # the validator accepted it, with the allocator's devices per claim


def test_a_shape_taken_from_a_node_carries_its_devices() -> None:
    pods, template = gpu_pods(3, 2)
    held = with_claim(make_pod("ml/old", cpu="1", node="g1"), claim="old")
    snap = ClusterSnapshot.build(nodes=[make_node("g1", cpu="16")], pods=[held, *pods], device_classes=[gpu_class()],
                                 resource_slices=[gpu_slice("g1", 4)], resource_claim_templates=[template],
                                 resource_claims=[allocated_claim("ml/old", "g1", ["gpu-0", "gpu-1"], "old")])
    r = provision(snap, CONFIG)
    assert r.pending == 2  # one of the three fits the two GPUs left on g1
    assert [a.shape for a in r.added] == ["like-g1"] and r.proven
    assert set(r.placement.values()) == {"like-g1-new-1"}


def test_a_shape_file_with_a_bad_device_is_refused_naming_it() -> None:
    with pytest.raises(InputError) as caught:
        parse_shapes([{"name": "x", "allocatable": {"cpu": "4"}, "devices": [{"driver": "d", "count": 0}]}], default_max=5)
    assert str(caught.value).startswith('shapes[0] (x): devices[0].count: "0" must be an integer >= 1')
    # a count of 10**8 ran for minutes, then out of memory, with no answer; past one ResourceSlice's
    # 128 is still a node (a driver spreads its pool over several slices)
    [shape] = parse_shapes([{"name": "x", "allocatable": {"cpu": "4"}, "devices": [{"driver": "d", "count": 200}]}],
                           default_max=5)
    assert shape.device_count == 200
    with pytest.raises(InputError) as caught:
        parse_shapes([{"name": "x", "allocatable": {"cpu": "4"}, "devices": [{"driver": "d", "count": 1000},
                                                                           {"driver": "d", "count": 25}]}], default_max=5)
    assert str(caught.value) == ("shapes[0] (x): devices[1].count: the devices of d come to 1025 on one node: a "
                                 "shape takes at most 1024 of one driver")


def test_devices_the_model_cannot_count_are_left_to_the_validator_and_the_engine() -> None:
    """A firstAvailable claim (2 GPUs, else 1) is not counted by the model: its one 2-GPU node
    for three pods is refused by the validator, and the engine's decision there names the pod
    left out (two pods get one GPU each)."""
    from models.dra import ResourceClaimTemplate

    template = ResourceClaimTemplate.model_validate({"metadata": {"name": "some", "namespace": "ml"}, "spec": {"spec": {
        "devices": {"requests": [{"name": "gpus", "firstAvailable": [
            {"name": "two", "deviceClassName": "gpu.example.com", "count": 2},
            {"name": "one", "deviceClassName": "gpu.example.com", "count": 1}]}]}}}})
    node, hog = full_node()
    pods = [with_claim(make_pod(f"ml/t{i}", cpu="1"), template="some") for i in range(3)]
    snap = ClusterSnapshot.build(nodes=[node], pods=[hog, *pods], device_classes=[gpu_class()],
                                 resource_claim_templates=[template])
    gpus = {"devices": [{"driver": "gpu.example.com", "count": 2}]}
    r = provision(snap, CONFIG, shapes(("gpu2", "16", 1, gpus)))
    assert r.placed_by == "engine" and not r.proven
    assert len(r.placement) + len(r.left_out) == 3 and r.left_out
    assert all("cannot allocate all claims" in why for why in r.left_out.values())


HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def test_a_pod_whose_affinity_only_a_pending_pod_meets_goes_beside_it() -> None:
    """docs/operator-questions.md's case: a 2-CPU pod app=a and a pod with hostname affinity to
    app=a, both pending, a full 1-CPU node: one 4-CPU node holds both, none is left unplanned."""
    node, hog = full_node()
    pods = [hog, make_pod("a/a", cpu="2", labels={"app": "a"}),
            make_pod("a/b", cpu="1", pod_affinity=[term({"app": "a"}, HOSTNAME)])]
    r = provision(make_snapshot([node], pods), CONFIG, shapes(("big", "4", 1)))
    assert [a.name for a in r.added] == ["big-new-1"] and r.proven and r.placed_by == "model"
    assert r.placement == {"a/a": "big-new-1", "a/b": "big-new-1"}
    assert not r.nowhere and not r.left_out


def test_the_support_is_on_the_dependent_pods_node_not_merely_somewhere() -> None:
    """A 3-CPU support and a 3-CPU pod with hostname affinity to it: two 4-CPU nodes (cost 2)
    would hold them apart, but the dependent needs its support on its own node, so one 8-CPU
    node (cost 3)."""
    node, hog = full_node()
    pods = [hog, make_pod("a/a", cpu="3", labels={"app": "a"}),
            make_pod("a/b", cpu="3", pod_affinity=[term({"app": "a"}, HOSTNAME)])]
    r = provision(make_snapshot([node], pods), CONFIG, shapes(("s", "4", 1), ("big", "8", 3)))
    assert [a.shape for a in r.added] == ["big"] and r.cost == 3000 and r.proven and r.placed_by == "model"
    assert r.placement == {"a/a": "big-new-1", "a/b": "big-new-1"}


def test_zone_affinity_is_met_by_a_pending_pod_on_another_node_of_the_zone() -> None:
    """The support (3 CPU) may run in zone y only; the dependent (3 CPU, zone affinity to it) does
    not fit beside it on a 4-CPU node, so it goes to a second node of zone y, dearer than zone x
    (support in the domain, not on the node)."""
    node, hog = full_node()
    pods = [hog, make_pod("a/a", cpu="3", labels={"app": "a"}, node_selector={ZONE: "y"}),
            make_pod("a/b", cpu="3", pod_affinity=[term({"app": "a"}, ZONE)])]
    r = provision(make_snapshot([node], pods), CONFIG, shapes(("s", "4", 1, {"zones": {"x": 3}}),
                                                              ("t", "4", 2, {"zones": {"y": 3}})))
    assert [a.shape for a in r.added] == ["t@y", "t@y"] and r.proven and r.placed_by == "model"
    assert r.placement["a/a"] != r.placement["a/b"] and not r.nowhere


def test_a_pod_that_needs_its_support_in_its_zone_but_not_on_its_node_goes_to_another_node_of_the_zone() -> None:
    """A cache (app=c) and two web pods with zone affinity to it and hostname anti-affinity to it,
    all pending: the web pods may not share the cache's node, so the zone needs a second node;
    before, the support was tried on the web pod's own node only, and they were called
    unplaceable."""
    node, hog = full_node()
    web = {"pod_affinity": [term({"app": "c"}, ZONE)], "pod_anti_affinity": [term({"app": "c"}, HOSTNAME)]}
    pods = [hog, make_pod("a/cache", cpu="2", labels={"app": "c"})]
    pods += [make_pod(f"a/web{i}", cpu="1", labels={"app": "w"}, **web) for i in range(2)]
    r = provision(make_snapshot([node], pods), CONFIG, shapes(("s", "4", 1, {"zones": {"x": 3, "y": 3}})))
    assert not r.nowhere and not r.left_out and r.placed_by == "model" and r.proven
    assert len(r.added) == 2 and len({a.shape for a in r.added}) == 1  # two nodes of one zone
    cache = r.placement["a/cache"]
    assert {r.placement["a/web0"], r.placement["a/web1"]} == {a.name for a in r.added} - {cache}


def test_hostname_affinity_and_hostname_anti_affinity_to_the_same_pods_stay_unplaceable() -> None:
    """The counterpart: the support must be on the pod's node and may not be: no node holds it."""
    node, hog = full_node()
    web = {"pod_affinity": [term({"app": "c"}, HOSTNAME)], "pod_anti_affinity": [term({"app": "c"}, HOSTNAME)]}
    pods = [hog, make_pod("a/cache", cpu="2", labels={"app": "c"}), make_pod("a/web", cpu="1", **web)]
    r = provision(make_snapshot([node], pods), CONFIG, shapes(("s", "4", 1, {"zones": {"x": 3}})))
    assert list(r.nowhere) == ["a/web"] and r.placement == {"a/cache": "s@x-new-1"}


def test_a_dependent_whose_support_fits_no_shape_is_still_named_with_kube_schedulers_reason() -> None:
    """Of two dependents, the one whose support (64 CPU) fits no shape stays under NOT PLACED
    ON ANY SHAPE with kube-scheduler's reason; the other is planned beside its support."""
    node, hog = full_node()
    pods = [hog, make_pod("a/a", cpu="64", labels={"app": "a"}),
            make_pod("a/b", cpu="1", pod_affinity=[term({"app": "a"}, HOSTNAME)]),
            make_pod("a/c", cpu="2", labels={"app": "c"}),
            make_pod("a/d", cpu="1", pod_affinity=[term({"app": "c"}, HOSTNAME)])]
    r = provision(make_snapshot([node], pods), CONFIG, shapes(("big", "8", 1)))
    assert r.nowhere == {
        "a/a": "0/2 nodes are available: 2 Insufficient cpu.",
        "a/b": "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match pod affinity rules."}
    assert r.placement == {"a/c": "big-new-1", "a/d": "big-new-1"} and r.proven


def test_self_affine_replicas_start_from_their_first_pod_and_stay_on_its_node() -> None:
    """Three 2-CPU replicas with hostname affinity to their own label, nothing running matching:
    kube-scheduler lets the first in anywhere and the others only beside it, so one 8-CPU node
    (3), not two 4-CPU ones (2) where the third would have no support."""
    node, hog = full_node()
    pods = [hog] + [make_pod(f"a/s{i}", cpu="2", labels={"app": "s"}, pod_affinity=[term({"app": "s"}, HOSTNAME)])
                    for i in range(3)]
    r = provision(make_snapshot([node], pods), CONFIG, shapes(("small", "4", 1), ("big", "8", 3)))
    assert [a.shape for a in r.added] == ["big"] and r.proven and r.placed_by == "model"
    assert set(r.placement.values()) == {"big-new-1"} and len(r.placement) == 3


def test_self_affine_replicas_on_a_zone_stay_in_their_first_pods_zone() -> None:
    """Replicas with zone affinity to their own label and hostname anti-affinity: a node each,
    all in one zone (zone x has room for two only), so all three in zone y."""
    node, hog = full_node()
    rules = {"pod_affinity": [term({"app": "s"}, ZONE)], "pod_anti_affinity": [term({"app": "s"}, HOSTNAME)]}
    pods = [hog] + [make_pod(f"a/s{i}", cpu="2", labels={"app": "s"}, **rules) for i in range(3)]
    r = provision(make_snapshot([node], pods), CONFIG, shapes(("s", "4", 1, {"zones": {"x": 2}}),
                                                              ("t", "4", 2, {"zones": {"y": 5}})))
    assert [a.shape for a in r.added] == ["t@y"] * 3 and r.proven and r.placed_by == "model"
    assert len(set(r.placement.values())) == 3


def test_the_engine_placing_a_dependent_before_its_support_leaves_it_out_and_says_so() -> None:
    """When the validator refuses the placement (spread across two pending pods, not in the cost
    model) the engine decides on the provisioned cluster; with no time for CP-SAT it is greedy,
    whose queue puts the dependent (priority 10) before its support: it is listed as left out
    with kube-scheduler's reason, not hidden."""
    config = SchedulerConfig.model_validate({"solver": {"timeLimitSeconds": 0, "workers": 2}})
    node = make_node("old", cpu="1", labels={ZONE: "b"})
    pods = [make_pod("sys/hog", cpu="1", node="old"), make_pod("a/a", cpu="2", labels={"app": "a"}),
            make_pod("a/b", cpu="1", priority=10, pod_affinity=[term({"app": "a"}, HOSTNAME)])]
    pods += [make_pod(f"a/w{i}", cpu="1", labels={"app": "w"}, spread=[spread_rule(ZONE, {"app": "w"})]) for i in range(2)]
    r = provision(make_snapshot([node], pods), config, shapes(("big", "8", 1, {"zones": {"a": 3}})))
    assert r.placed_by == "engine" and not r.nowhere
    assert r.placement["a/a"] == "big@a-new-1" and "a/b" not in r.placement
    assert "didn't match pod affinity rules" in r.left_out["a/b"]


def test_a_class_that_passes_somewhere_dear_still_gets_the_cheap_bins_beside_a_later_support() -> None:
    """d2 (zone affinity to role=x) passes alone only in zone z0 (a running role=x pod), on the
    dear shape; d1 (role=x, hostname affinity to pending x) gets its bins only beside x. d2 must
    still be offered zone z1 beside d1: one cheap node, not a dear one claimed optimal."""
    node = make_node("old", cpu="1", labels={ZONE: "z0"})
    pods = [make_pod("a/r", cpu="1", labels={"role": "x"}, node="old"),
            make_pod("a/x", cpu="1", labels={"app": "x"}),
            make_pod("a/d1", cpu="1", labels={"role": "x"}, pod_affinity=[term({"app": "x"}, HOSTNAME)]),
            make_pod("a/d2", cpu="1", labels={"app": "d2"}, pod_affinity=[term({"role": "x"}, ZONE)])]
    r = provision(make_snapshot([node], pods), CONFIG, shapes(("m", "4", 1, {"zones": {"z1": 5}}),
                                                              ("dear", "4", 10, {"zones": {"z0": 5}})))
    assert [a.shape for a in r.added] == ["m@z1"] and r.cost == 1000 and r.proven
    assert len(r.placement) == 3 and not r.nowhere


def test_a_support_that_may_not_go_to_the_dependents_node_does_not_make_it_placeable() -> None:
    """s runs on pool=gpu only, d (hostname affinity to s) on pool=cpu only: d can never run,
    so it is named under NOT PLACED ON ANY SHAPE with kube-scheduler's reason, and the plan for
    s is proven."""
    node, hog = full_node()
    pods = [hog, make_pod("a/s", cpu="2", labels={"app": "s"}, node_selector={"pool": "gpu"}),
            make_pod("a/d", cpu="1", labels={"app": "d"}, node_selector={"pool": "cpu"},
                     pod_affinity=[term({"app": "s"}, HOSTNAME)])]
    r = provision(make_snapshot([node], pods), CONFIG, shapes(("cpu", "4", 1, {"labels": {"pool": "cpu"}}),
                                                              ("gpu", "4", 2, {"labels": {"pool": "gpu"}})))
    assert list(r.nowhere) == ["a/d"] and "didn't match pod affinity rules" in r.nowhere["a/d"]
    assert r.placement == {"a/s": "gpu-new-1"} and not r.left_out and r.proven


def test_a_key_running_pods_already_meet_needs_no_pending_support() -> None:
    """d has affinity to app=s on zone and on rack; a running s is in zone z1, the pending s2
    may go to zone z2 only. On a new node of zone z1 the zone term is met by the running pod and
    the rack term by s2 on a node of the same rack in z2: two nodes, every pod placed."""
    node = make_node("old", cpu="1", labels={ZONE: "z1", "rack": "r1"})
    pods = [make_pod("a/r", cpu="1", labels={"app": "s"}, node="old"),
            make_pod("a/s2", cpu="1", labels={"app": "s"}, node_selector={ZONE: "z2"}),
            make_pod("a/d", cpu="1", labels={"app": "d"}, node_selector={ZONE: "z1"},
                     pod_affinity=[term({"app": "s"}, ZONE), term({"app": "s"}, "rack")])]
    r = provision(make_snapshot([node], pods), CONFIG,
                  shapes(("m", "4", 1, {"labels": {"rack": "r2"}, "zones": {"z1": 3, "z2": 3}})))
    assert sorted(a.shape for a in r.added) == ["m@z1", "m@z2"] and r.proven
    assert set(r.placement) == {"a/s2", "a/d"} and not r.nowhere and not r.left_out


def test_a_pod_the_queue_takes_first_that_matches_self_affine_replicas_closes_their_escape() -> None:
    """t (priority 100) carries app=s too: kube-scheduler places it before the replicas, so
    their first pod no longer starts anywhere; both go to t's node: one 8-CPU node (3), not two
    4-CPU ones claimed optimal."""
    node, hog = full_node()
    pods = [hog, make_pod("a/t", cpu="3", labels={"app": "s", "role": "t"}, priority=100)]
    pods += [make_pod(f"a/s{i}", cpu="2", labels={"app": "s", "role": "s"}, pod_affinity=[term({"app": "s"}, HOSTNAME)])
             for i in range(2)]
    r = provision(make_snapshot([node], pods), CONFIG, shapes(("small", "4", 1), ("big", "8", 3)))
    assert [a.shape for a in r.added] == ["big"] and r.cost == 3000 and r.proven
    assert set(r.placement.values()) == {"big-new-1"} and len(r.placement) == 3


@pytest.mark.parametrize("t_rule", [
    pytest.param({"node_selector": {"pool": "gpu"}}, id="it runs nowhere"),
    pytest.param({"pod_affinity": [term({"role": "s"}, HOSTNAME)]}, id="it waits for the replicas"),
])
def test_a_pod_the_queue_takes_first_but_cannot_place_leaves_the_escape_open(t_rule: dict) -> None:
    """Found by a review: t matches the replicas' terms and comes first in the queue, but no shape
    takes it, or it needs a replica beside it: kube-scheduler fails it, lets s0 in with nothing
    matching and s1 beside it (and retries t, which then joins them). The escape was closed all
    the same, and neither replica was placed."""
    node, hog = full_node()
    pods = [hog, make_pod("a/t", cpu="1", labels={"app": "s", "role": "t"}, priority=100, **t_rule)]
    pods += [make_pod(f"a/s{i}", cpu="1", labels={"app": "s", "role": "s"}, pod_affinity=[term({"app": "s"}, HOSTNAME)])
             for i in range(2)]
    r = provision(make_snapshot([node], pods), CONFIG, shapes(("small", "4", 1)))
    assert r.cost == 1000 and {"a/s0", "a/s1"} <= set(r.placement)
    assert len(set(r.placement.values())) == 1


def test_self_affine_replicas_may_go_beside_a_later_pod_matching_their_terms() -> None:
    """Found by a review: the replicas' later pods could go only beside their first pod, though
    kube-scheduler counts any pod matching their terms (u, later in the queue: s2 is retried
    once u is bound). Two small nodes (2), not a big and a small one (2.5) claimed optimal."""
    node, hog = full_node()
    pods = [hog, make_pod("a/u", cpu="2", labels={"app": "s"}, priority=0)]
    pods += [make_pod(f"a/s{i}", cpu="2", labels={"app": "s", "role": "s"}, priority=10,
                      pod_affinity=[term({"app": "s"}, HOSTNAME)]) for i in range(3)]
    r = provision(make_snapshot([node], pods), CONFIG, shapes(("small", "4", 1), ("big", "6", 1.5)))
    assert r.cost == 2000 and [a.shape for a in r.added] == ["small", "small"] and len(r.placement) == 4


def test_support_met_by_running_pods_or_on_the_pods_own_node_adds_no_model_variables(monkeypatch) -> None:
    """Six classes with zone affinity met by a running pod (zone a) and six with hostname
    affinity to a pending class: the support constraints are linear in the placement, with no
    variable per class and bin (a cluster's worth of them made the model ten times larger)."""
    from solver.provision import model as model_module
    from solver.provision import support

    added: list[int] = []
    constrain = support.constrain

    def counting(model, *args) -> None:
        before = len(model.Proto().variables)
        constrain(model, *args)
        added.append(len(model.Proto().variables) - before)

    monkeypatch.setattr(model_module.support, "constrain", counting)
    node = make_node("old", cpu="1", labels={ZONE: "a"})
    pods = [make_pod("a/r", cpu="1", labels={"app": "r"}, node="old")]
    pods += [make_pod(f"a/s{i}", cpu="1", labels={"app": "s"}) for i in range(3)]
    pods += [make_pod(f"a/z{i}", cpu="1", labels={"app": f"z{i}"}, pod_affinity=[term({"app": "r"}, ZONE)])
             for i in range(6)]
    pods += [make_pod(f"a/h{i}", cpu="1", labels={"app": f"h{i}"}, pod_affinity=[term({"app": "s"}, HOSTNAME)])
             for i in range(6)]
    r = provision(make_snapshot([node], pods), CONFIG, shapes(("m", "4", 1, {"zones": {"a": 9, "b": 9}})))
    assert added == [0]
    assert len(r.placement) == 15 and not r.nowhere and not r.left_out


def test_first_fit_decreasing_places_pods_needing_support_on_their_node_beside_it() -> None:
    """Two 2-CPU supports and two 2-CPU pods with hostname affinity to them, 4-CPU nodes:
    placing both supports first would fill one node and leave the dependents nowhere to go;
    each dependent goes beside a support as it is placed, so first-fit-decreasing places all."""
    node, hog = full_node()
    pods = [hog] + [make_pod(f"a/s{i}", cpu="2", labels={"app": "s"}) for i in range(2)]
    pods += [make_pod(f"a/d{i}", cpu="2", labels={"app": "d"}, pod_affinity=[term({"app": "s"}, HOSTNAME)])
             for i in range(2)]
    r = provision(make_snapshot([node], pods), CONFIG, shapes(("m", "4", 1)))
    assert (r.ffd_nodes, r.ffd_unplaced) == (2, 0)
    assert r.cost == 2000 and r.proven and len(r.placement) == 4


# A shape file's entry lists what sets its nodes apart (cpu, memory, instance type); what every
# real node has besides — the os and arch labels, pod slots, disk — comes from defaults.
OS, ARCH = "kubernetes.io/os", "kubernetes.io/arch"
LINUX_AMD64 = {OS: "linux", ARCH: "amd64", f"beta.{OS}": "linux", f"beta.{ARCH}": "amd64"}
R5 = {"name": "r5", "labels": {"node.kubernetes.io/instance-type": "r5.2xlarge"},
      "allocatable": {"cpu": "8", "memory": "64Gi"}, "cost": 0.504}


def on_arch(arch: str) -> dict:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": ARCH, "operator": "In", "values": [arch]}]}]}}}


def trial_pods() -> list:
    """What the user's trial had pending: a pod selecting linux, one requiring amd64 by node
    affinity, one on the beta label, and a 2 CPU/48Gi pod asking for 10Gi of disk."""
    return [make_pod("a/web", cpu="1", node_selector={OS: "linux"}),
            make_pod("a/api", cpu="1", affinity=on_arch("amd64")),
            make_pod("a/old", cpu="1", node_selector={f"beta.{ARCH}": "amd64"}),
            make_pod("a/etl", cpu="2", memory="48Gi", requests={"ephemeral-storage": "10Gi"})]


def full_nodes(*labels: dict, disk: Optional[str] = "100Gi") -> tuple[list, list]:
    nodes = [make_node(f"old{i}", cpu="1", labels=extra, ephemeral_storage=disk) for i, extra in enumerate(labels)]
    return nodes, [make_pod(f"sys/hog{i}", cpu="1", node=n.metadata.name) for i, n in enumerate(nodes)]


def test_a_shape_listing_cpu_and_memory_only_takes_the_clusters_os_arch_disk_and_110_pod_slots() -> None:
    nodes, hogs = full_nodes(LINUX_AMD64, dict(LINUX_AMD64), disk="100Gi")
    nodes[1] = make_node("old1", cpu="1", labels=LINUX_AMD64, ephemeral_storage="80Gi")
    [shape] = parse_shapes([R5], default_max=5, nodes=nodes)
    assert {k: shape.node.metadata.labels[k] for k in LINUX_AMD64} == LINUX_AMD64
    assert shape.allocatable["pods"] == 110 and shape.allocatable["ephemeral-storage"] == 80 * 2**30
    r = provision(make_snapshot(nodes, hogs + trial_pods()), CONFIG, [shape])
    assert r.nowhere == {} and r.notes == []
    assert r.placement == {"a/web": "r5-new-1", "a/api": "r5-new-1", "a/old": "r5-new-1", "a/etl": "r5-new-1"}


def test_a_shapes_own_labels_and_resources_win_over_the_defaults() -> None:
    nodes, hogs = full_nodes(LINUX_AMD64)
    own = dict(R5, labels={ARCH: "arm64"}, allocatable={"cpu": "8", "memory": "64Gi", "pods": "3",
                                                      "ephemeral-storage": "5Gi"})
    [shape] = parse_shapes([own], default_max=5, nodes=nodes)
    labels = shape.node.metadata.labels
    # the beta arch label follows the entry's arch, as a kubelet sets both from one value
    assert (labels[ARCH], labels[OS], labels[f"beta.{ARCH}"]) == ("arm64", "linux", "arm64")
    assert shape.allocatable["pods"] == 3 and shape.allocatable["ephemeral-storage"] == 5 * 2**30
    r = provision(make_snapshot(nodes, hogs + trial_pods()), CONFIG, [shape])
    assert sorted(r.nowhere) == ["a/api", "a/etl", "a/old"]  # a/old selects amd64 by the beta label
    # what the file says is no note, but the beta label it implies is named as the reason for a/old
    assert r.notes == ["shape r5 has no label beta.kubernetes.io/arch in the file (taken as arm64, the entry's "
                       "kubernetes.io/arch): 1 pending pod(s) that need it fit no shape"]


def test_labels_the_clusters_nodes_disagree_on_are_left_unset_and_a_note_says_so() -> None:
    nodes, hogs = full_nodes(LINUX_AMD64, dict(LINUX_AMD64, **{ARCH: "arm64", f"beta.{ARCH}": "arm64"}))
    [shape] = parse_shapes([R5], default_max=5, nodes=nodes)
    assert ARCH not in shape.node.metadata.labels and shape.node.metadata.labels[OS] == "linux"
    r = provision(make_snapshot(nodes, hogs + trial_pods()), CONFIG, [shape])
    assert sorted(r.nowhere) == ["a/api", "a/old"]
    assert r.notes == [
        "shape r5 has no label beta.kubernetes.io/arch in the file (left unset, as the cluster's nodes disagree: "
        "amd64, arm64): 1 pending pod(s) that need it fit no shape",
        "shape r5 has no label kubernetes.io/arch in the file (left unset, as the cluster's nodes disagree: "
        "amd64, arm64): 1 pending pod(s) that need it fit no shape"]


def test_a_resource_a_shape_omits_and_no_node_reports_is_named_in_a_note() -> None:
    """No node of the cluster reports ephemeral-storage, and none has nvidia.com/gpu: a shape
    that omits them holds neither, and the pods asking for them are counted in a note per
    shape and resource (once per entry, not per zone)."""
    nodes, hogs = full_nodes(LINUX_AMD64, disk=None)
    gpu = make_pod("ml/train", cpu="1", requests={"nvidia.com/gpu": "1"})
    shapes = parse_shapes([dict(R5, zones={"a": 2, "b": 2})], default_max=5, nodes=nodes)
    r = provision(make_snapshot(nodes, hogs + trial_pods() + [gpu]), CONFIG, shapes)
    assert sorted(r.nowhere) == ["a/etl", "ml/train"]
    assert r.notes == [
        "shape r5 lists no ephemeral-storage in allocatable (left out, as no node of the cluster reports it): "
        "1 pending pod(s) that request it fit no shape",
        "shape r5 lists no nvidia.com/gpu in allocatable: 1 pending pod(s) that request it fit no shape"]


def test_no_nodes_no_label_defaults_and_a_note_when_it_matters() -> None:
    [shape] = parse_shapes([R5], default_max=5, nodes=[])
    assert OS not in shape.node.metadata.labels and shape.allocatable["pods"] == 110
    r = provision(make_snapshot([], [make_pod("a/web", cpu="1", node_selector={OS: "linux"})]), CONFIG, [shape])
    assert list(r.nowhere) == ["a/web"]
    assert r.notes == ["shape r5 has no label kubernetes.io/os in the file (left unset, as the cluster has no "
                       "nodes): 1 pending pod(s) that need it fit no shape"]


def test_a_default_that_refuses_a_pod_is_named_in_a_note() -> None:
    """The cluster's nodes are linux with 20Gi of disk: a shape leaving both out gets them, and a
    pod selecting windows, or asking for 30Gi, fits no shape; the note says what was taken."""
    nodes, hogs = full_nodes(LINUX_AMD64, disk="20Gi")
    pods = [make_pod("a/win", cpu="1", node_selector={OS: "windows"}),
            make_pod("a/big", cpu="1", requests={"ephemeral-storage": "30Gi"}),
            make_pod("a/fits", cpu="1", requests={"ephemeral-storage": "20Gi"})]
    r = provision(make_snapshot(nodes, hogs + pods), CONFIG, parse_shapes([R5], default_max=5, nodes=nodes))
    assert sorted(r.nowhere) == ["a/big", "a/win"] and r.placement == {"a/fits": "r5-new-1"}
    assert r.notes == [
        "shape r5 has no label kubernetes.io/os in the file (taken as linux, the value every node of the cluster "
        "has): 1 pending pod(s) that need it fit no shape",
        "shape r5 lists no ephemeral-storage in allocatable (taken as 20Gi, the least any node of the cluster "
        "has): 1 pending pod(s) that request more than that fit no shape"]


def test_a_pod_spreading_over_zones_fits_no_shape_without_zones_and_a_note_says_why() -> None:
    nodes, hogs = full_nodes(dict(LINUX_AMD64, **{"topology.kubernetes.io/zone": "a"}))
    spread = [spread_rule("topology.kubernetes.io/zone", {"app": "w"})]
    pods = hogs + [make_pod("a/w", cpu="1", labels={"app": "w"}, spread=spread)]
    r = provision(make_snapshot(nodes, pods), CONFIG, parse_shapes([R5], default_max=5, nodes=nodes))
    assert list(r.nowhere) == ["a/w"] and "missing required label" in r.nowhere["a/w"]
    assert r.notes == ["shape r5 has no label topology.kubernetes.io/zone in the file (left unset, as the entry "
                       "has no zones:): 1 pending pod(s) that need it fit no shape"]
    zoned = parse_shapes([dict(R5, zones={"a": 2})], default_max=5, nodes=nodes)
    r = provision(make_snapshot(nodes, pods), CONFIG, zoned)
    assert r.placement == {"a/w": "r5@a-new-1"} and r.notes == []


def test_max_count_bounds_a_shapes_nodes_over_all_its_zones() -> None:
    """maxCount 2 with zones {za: 2, zb: 2}: two nodes of the shape in all (the third pod goes to
    the dearer shape), in the model's answer and in first-fit-decreasing's."""
    node, hog = full_node()
    pods = [hog] + [make_pod(f"a/p{i}", cpu="3") for i in range(3)]
    r = provision(make_snapshot([node], pods), CONFIG,
                  shapes(("small", "4", 1, {"maxCount": 2, "zones": {"za": 2, "zb": 2}}), ("dear", "4", 3)))
    assert sorted(a.shape for a in r.added if a.shape.startswith("small")) in (
        ["small@za", "small@za"], ["small@za", "small@zb"], ["small@zb", "small@zb"])
    assert len(r.added) == 3 and r.cost == 5000 and r.proven
    assert (r.ffd_nodes, r.ffd_cost, r.ffd_unplaced) == (3, 5000, 0)


def test_two_entries_of_one_name_keep_their_own_max_count() -> None:
    """One instance type in two node groups (zones a and b), maxCount 2 each: four nodes, not two
    (the entries were once grouped by name and shared one maxCount)."""
    node, hog = full_node()
    pods = [hog] + [make_pod(f"a/p{i}", cpu="3") for i in range(4)]
    r = provision(make_snapshot([node], pods), CONFIG, shapes(("big", "4", 1, {"maxCount": 2, "zones": {"a": 2}}),
                                                              ("big", "4", 1, {"maxCount": 2, "zones": {"b": 2}})))
    assert sorted(a.shape for a in r.added) == ["big@a", "big@a", "big@b", "big@b"] and not r.nowhere and r.proven


def test_a_zones_own_count_still_bounds_it_within_max_count() -> None:
    node, hog = full_node()
    pods = [hog] + [make_pod(f"a/p{i}", cpu="3") for i in range(3)]
    r = provision(make_snapshot([node], pods), CONFIG,
                  shapes(("small", "4", 1, {"maxCount": 5, "zones": {"za": 1, "zb": 1}}), ("dear", "4", 3)))
    assert sorted(a.shape for a in r.added) == ["dear", "small@za", "small@zb"] and r.proven


def test_cost_and_pod_slots_default_as_the_shapes_file_format_says() -> None:
    """docs/operator-questions.md's table of what an entry left out gets: cost 1, 110 pod slots."""
    import re
    from pathlib import Path

    docs = (Path(__file__).resolve().parents[2] / "docs/operator-questions.md").read_text()
    rows = dict(re.findall(r"^\| `([^`|]+)` \| ([^,|]+?)[,|]", docs, flags=re.MULTILINE))
    [shape] = parse_shapes([{"name": "x", "allocatable": {"cpu": "4"}}], default_max=5)
    assert (rows["cost"].strip(), shape.cost) == ("1", 1000)
    assert (rows["allocatable.pods"].strip(), shape.allocatable["pods"]) == ("110", 110)

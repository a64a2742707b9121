"""``provision``: the cheapest nodes to add, exactly, against first-fit-decreasing."""

from __future__ import annotations

import random

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

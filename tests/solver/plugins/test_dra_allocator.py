"""The DRA allocation rule (``dynamic_resources.allocator`` and ``check``): which devices a
pod's claims take on a node, one pod at a time, and the final-state check of the validator.

Each case builds real API objects (slices, classes, claims, pods) as a dump would have them."""

from __future__ import annotations

from typing import Any, Optional

import pytest

from models import ClusterSnapshot, Node, Pod
from models.dra import DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice
from solver.plugins.dynamic_resources import AllocationError, ClaimAllocation, DeviceResult, for_snapshot
from solver.plugins.dynamic_resources.check import problems

DRIVER = "gpu.example.com"


def node(name: str, **labels: str) -> Node:
    return Node.model_validate({"metadata": {"name": name, "labels": labels},
                                "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}}})


def gpu(name: str, model: str = "a100", domain: int = 0, memory: str = "80Gi", **extra: Any) -> dict:
    return {"name": name, "attributes": {"model": {"string": model}, "nvlinkDomain": {"int": domain}},
            "capacity": {"memory": {"value": memory}}, **extra}


def slice_(name: str, devices: list[dict], *, node_name: Optional[str] = None, pool: Optional[str] = None,
           **where: Any) -> ResourceSlice:
    spec: dict[str, Any] = {"driver": DRIVER, "pool": {"name": pool or node_name or name, "generation": 1,
                                                        "resourceSliceCount": 1}, "devices": devices, **where}
    if node_name:
        spec["nodeName"] = node_name
    return ResourceSlice.model_validate({"metadata": {"name": name}, "spec": spec})


CLASSES = [
    DeviceClass.model_validate({"metadata": {"name": "gpu"},
                                "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}),
    DeviceClass.model_validate({"metadata": {"name": "a100"}, "spec": {"selectors": [{"cel": {
        "expression": f'device.attributes["{DRIVER}"].model == "a100"'}}]}}),
]


def claim(name: str, requests: list[dict], constraints: Optional[list[dict]] = None,
          allocation: Optional[dict] = None) -> ResourceClaim:
    data: dict[str, Any] = {"metadata": {"name": name, "namespace": "ml"},
                            "spec": {"devices": {"requests": requests, "constraints": constraints or []}}}
    if allocation is not None:
        data["status"] = {"allocation": allocation}
    return ResourceClaim.model_validate(data)


def exactly(name: str = "gpu", cls: str = "gpu", count: int = 1, mode: str = "ExactCount", **more: Any) -> dict:
    return {"name": name, "exactly": {"deviceClassName": cls, "count": count, "allocationMode": mode, **more}}


def pod(name: str, *claims: str, template: Optional[str] = None) -> Pod:
    entries = [{"name": f"c{i}", "resourceClaimName": c} for i, c in enumerate(claims)]
    if template:
        entries.append({"name": "t", "resourceClaimTemplateName": template})
    return Pod.model_validate({"metadata": {"name": name, "namespace": "ml"},
                               "spec": {"schedulerName": "cpsat-scheduler", "resourceClaims": entries,
                                        "containers": [{"name": "c"}]}})


def snapshot(nodes: list[Node], slices: list[ResourceSlice], claims: list[ResourceClaim],
             pods: list[Pod], templates: list[ResourceClaimTemplate] = ()) -> ClusterSnapshot:
    return ClusterSnapshot.build(nodes=nodes, pods=pods, device_classes=CLASSES, resource_slices=slices,
                                 resource_claims=claims, resource_claim_templates=templates)


def devices_of(found: Optional[list[ClaimAllocation]]) -> list[list[str]]:
    assert found is not None
    return [[f"{r.request}={r.device}" for r in a.results] for a in found]


def allocate_in_turn(snap: ClusterSnapshot, node_name: str) -> list[Any]:
    """Each pending pod in order on ``node_name``: its devices, or its reason."""
    rules = for_snapshot(snap)
    state = rules.initial_state()
    target = snap.node_by_name[node_name]
    out: list[Any] = []
    for p in snap.pending_pods():
        found, why = rules.allocate(snap.pod_claims(p), target, state)
        if found is None:
            out.append(why)
            continue
        rules.commit(state, found, rules.inventory)
        out.append(devices_of(found))
    return out


N0 = node("n0")
FOUR = slice_("s0", [gpu("g0", domain=0), gpu("g1", domain=0), gpu("g2", domain=1), gpu("g3", domain=1)], node_name="n0")

CASES = {
    "exact count, then the pool runs out": (
        [FOUR], [claim("a", [exactly(count=3)]), claim("b", [exactly(count=2)]), claim("c", [exactly()])],
        [["gpu=g0", "gpu=g1", "gpu=g2"]], "cannot allocate all claims", [["gpu=g3"]]),
    "all takes every matching device": (
        [FOUR], [claim("a", [exactly(mode="All")]), claim("b", [exactly()])],
        [["gpu=g0", "gpu=g1", "gpu=g2", "gpu=g3"]], "cannot allocate all claims"),
    "matchAttribute keeps a pair in one NVLink domain": (
        [FOUR], [claim("a", [exactly()]), claim("b", [exactly(count=2)], [{"matchAttribute": f"{DRIVER}/nvlinkDomain"}]),
                 claim("c", [exactly(count=2)], [{"matchAttribute": f"{DRIVER}/nvlinkDomain"}])],
        [["gpu=g0"]], [["gpu=g2", "gpu=g3"]], "cannot allocate all claims"),
    "distinctAttribute spreads over domains": (
        [FOUR], [claim("a", [exactly(count=2)], [{"distinctAttribute": f"{DRIVER}/nvlinkDomain"}]),
                 claim("b", [exactly(count=3)], [{"distinctAttribute": f"{DRIVER}/nvlinkDomain"}])],
        [["gpu=g0", "gpu=g2"]], "cannot allocate all claims"),
    "firstAvailable falls to the second choice only when the first cannot be had": (
        [slice_("s0", [gpu("g0", model="l4"), gpu("g1"), gpu("g2", model="l4")], node_name="n0")],
        [claim(n, [{"name": "gpu", "firstAvailable": [{"name": "big", "deviceClassName": "a100"},
                                                       {"name": "any", "deviceClassName": "gpu", "count": 2}]}])
         for n in ("a", "b", "c")],
        [["gpu/big=g1"]], [["gpu/any=g0", "gpu/any=g2"]], "cannot allocate all claims"),
    "backtracking: the first request gives up the only a100 the second needs": (
        [slice_("s0", [gpu("g0"), gpu("g1", model="l4")], node_name="n0")],
        [claim("a", [exactly("any"), exactly("big", cls="a100")])],
        [["any=g1", "big=g0"]]),
    "a device taint needs a toleration": (
        [slice_("s0", [gpu("g0", taints=[{"key": "broken", "effect": "NoSchedule"}])], node_name="n0")],
        [claim("a", [exactly()]),
         claim("b", [exactly(tolerations=[{"key": "broken", "operator": "Exists"}])])],
        "cannot allocate all claims", [["gpu=g0"]]),
    "partitions draw on their GPU's shared counters": (
        [ResourceSlice.model_validate({"metadata": {"name": "s0"}, "spec": {
            "driver": DRIVER, "nodeName": "n0", "pool": {"name": "n0", "generation": 1, "resourceSliceCount": 1},
            "sharedCounters": [{"name": "gpu-0", "counters": {"memory": {"value": "80Gi"}}}],
            "devices": [gpu("whole", consumesCounters=[{"counterSet": "gpu-0", "counters": {"memory": {"value": "80Gi"}}}]),
                        *[gpu(f"half-{i}", memory="40Gi", consumesCounters=[
                            {"counterSet": "gpu-0", "counters": {"memory": {"value": "40Gi"}}}]) for i in range(2)]]}})],
        [claim("a", [exactly(selectors=[{"cel": {"expression":
                                                 f'device.capacity["{DRIVER}"].memory.isLessThan(quantity("80Gi"))'}}])]),
         claim("b", [exactly(selectors=[{"cel": {"expression":
                                                 f'device.capacity["{DRIVER}"].memory == quantity("80Gi")'}}])]),
         claim("c", [exactly()]), claim("d", [exactly()])],
        [["gpu=half-0"]], "cannot allocate all claims", [["gpu=half-1"]], "cannot allocate all claims"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_allocation_one_pod_at_a_time(name: str) -> None:
    slices, claims, *expected = CASES[name]
    pods = [pod(f"p{i}", c.metadata.name) for i, c in enumerate(claims)]
    assert allocate_in_turn(snapshot([N0], slices, claims, pods), "n0") == expected


def test_where_a_slice_is_usable() -> None:
    nodes = [node("n0", zone="a"), node("n1", zone="b")]
    slices = [
        slice_("local", [gpu("g0")], node_name="n1"),
        slice_("zonal", [gpu("z0", model="l4")], pool="zonal",
               nodeSelector={"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}),
        slice_("fabric", [gpu("f0", model="h100")], pool="fabric", allNodes=True),
        slice_("per-device", [gpu("d0", model="b200", nodeName="n0"), gpu("d1", model="b200", allNodes=True)],
               pool="mixed", perDeviceNodeSelection=True),
    ]
    snap = snapshot(nodes, slices, [], [])
    rules = for_snapshot(snap)
    usable = {n.name: sorted(m.device.name for k in rules.inventory.kinds_on(n) for m in k.members) for n in nodes}
    assert usable == {"n0": ["d0", "d1", "f0", "z0"], "n1": ["d1", "f0", "g0"]}


def test_allocation_pins_the_pod_and_the_node_selector_says_where() -> None:
    nodes = [node("n0", zone="a"), node("n1", zone="b")]
    zonal = slice_("zonal", [gpu("z0")], pool="zonal",
                   nodeSelector={"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}]})
    held = claim("held", [exactly()], allocation={
        "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "n0", "device": "g0"}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n0"]}]}]}})
    snap = snapshot(nodes, [zonal, slice_("s0", [gpu("g0")], node_name="n0")], [held, claim("new", [exactly(cls="gpu")])],
                    [pod("a", "held"), pod("b", "new")])
    rules = for_snapshot(snap)
    state = rules.initial_state()
    a, b = snap.pending_pods()
    assert rules.allocate(snap.pod_claims(a), nodes[0], state) == ([], "")
    assert rules.allocate(snap.pod_claims(a), nodes[1], state) == (
        None, "resourceclaim ml/held is allocated to devices node n1 cannot use")
    found, _ = rules.allocate(snap.pod_claims(b), nodes[1], state)
    assert found is not None and found[0].to_json() == {
        "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "zonal", "device": "z0"}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}]}}
    # g0 is held by the allocated claim: on n0 nothing is left for b
    assert rules.allocate(snap.pod_claims(b), nodes[0], state)[0] is None


def test_shared_claim_is_allocated_once() -> None:
    snap = snapshot([N0], [FOUR], [claim("shared", [exactly(count=2)])], [pod("a", "shared"), pod("b", "shared")])
    rules = for_snapshot(snap)
    state = rules.initial_state()
    a, b = snap.pending_pods()
    found, _ = rules.allocate(snap.pod_claims(a), N0, state)
    assert found is not None
    rules.commit(state, found, rules.inventory)
    assert rules.allocate(snap.pod_claims(b), N0, state) == ([], "")
    assert len(state.used) == 2


def test_template_claim_allocated_and_missing_class_named() -> None:
    template = ResourceClaimTemplate.model_validate({"metadata": {"name": "one", "namespace": "ml"},
                                                     "spec": {"spec": {"devices": {"requests": [exactly(cls="tpu")]}}}})
    snap = snapshot([N0], [FOUR], [], [pod("a", template="one")], [template])
    rules = for_snapshot(snap)
    found, why = rules.allocate(snap.pod_claims(snap.pods[0]), N0, rules.initial_state())
    assert found is None and why == "resourceclaim ml/a-t-: deviceclass tpu does not exist"


def test_selector_that_fails_names_claim_and_expression() -> None:
    bad = claim("bad", [exactly(selectors=[{"cel": {"expression": f'device.attributes["{DRIVER}"].nope == 1'}}])])
    snap = snapshot([N0], [FOUR], [bad], [pod("a", "bad")])
    rules = for_snapshot(snap)
    with pytest.raises(AllocationError, match=r"resourceclaims/ml/bad: request gpu: selectors\[0\] .*nope"):
        rules.allocate(snap.pod_claims(snap.pods[0]), N0, rules.initial_state())


def test_identical_devices_are_one_kind() -> None:
    many = slice_("s0", [gpu(f"g{i}", domain=i // 8) for i in range(64)], node_name="n0")
    rules = for_snapshot(snapshot([N0], [many], [], []))
    assert len(rules.inventory.devices) == 64 and len(rules.inventory.kinds) == 8


def test_search_over_kinds_takes_a_pair_from_a_large_pool() -> None:
    many = slice_("s0", [gpu(f"g{i}", domain=i // 8) for i in range(512)], node_name="n0")
    c = claim("a", [exactly(count=8)], [{"matchAttribute": f"{DRIVER}/nvlinkDomain"}])
    assert allocate_in_turn(snapshot([N0], [many], [c], [pod("p", "a")]), "n0") == [[[f"gpu=g{i}" for i in range(8)]]]


def test_final_check_names_both_claims_of_a_shared_device() -> None:
    claims = [claim("a", [exactly()]), claim("b", [exactly()])]
    snap = snapshot([N0], [FOUR], claims, [pod("pa", "a"), pod("pb", "b")])
    rules = for_snapshot(snap)
    same = (DeviceResult("gpu", DRIVER, "n0", "g1"),)
    allocations = {"ml/a": ClaimAllocation("ml/a", same, None), "ml/b": ClaimAllocation("ml/b", same, None)}
    placed = [(p, N0, snap.pod_claims(p)) for p in snap.pods]
    assert problems(rules, snap.resource_claim_by_key, allocations, placed) == [
        "device gpu.example.com/n0/g1 is given to 2 claims: ml/a, ml/b"]


def test_final_check_reads_counts_constraints_and_nodes() -> None:
    claims = [claim("pair", [exactly(count=2)], [{"matchAttribute": f"{DRIVER}/nvlinkDomain"}]), claim("none", [exactly()])]
    n1 = node("n1")
    snap = snapshot([N0, n1], [FOUR], claims, [pod("pa", "pair"), pod("pb", "none")])
    rules = for_snapshot(snap)
    allocations = {"ml/pair": ClaimAllocation("ml/pair", (DeviceResult("gpu", DRIVER, "n0", "g1"),
                                                          DeviceResult("gpu", DRIVER, "n0", "g2")), None)}
    placed = [(p, n1, snap.pod_claims(p)) for p in snap.pods]
    found = problems(rules, snap.resource_claim_by_key, allocations, placed)
    assert found == [
        "resourceclaim ml/pair: constraints[0]: devices differ in gpu.example.com/nvlinkDomain (matchAttribute)",
        "pod ml/pa on n1: device gpu.example.com/n0/g1 of resourceclaim ml/pair cannot be used from that node",
        "pod ml/pa on n1: device gpu.example.com/n0/g2 of resourceclaim ml/pair cannot be used from that node",
        "pod ml/pb on n1: resourceclaim ml/none is not allocated",
    ]
    # an allocation the allocator makes passes the check
    state = rules.initial_state()
    good: dict[str, ClaimAllocation] = {}
    for p in snap.pods:
        made, _ = rules.allocate(snap.pod_claims(p), N0, state)
        assert made is not None
        rules.commit(state, made, rules.inventory)
        good.update({a.claim: a for a in made})
    assert problems(rules, snap.resource_claim_by_key, good, [(p, N0, snap.pod_claims(p)) for p in snap.pods]) == []

"""``why``: the minimal obstacle sets on named scenes, and, on generated windows, that every set
is sufficient (relaxing it makes the pod or gang fit) and minimal (relaxing any fewer does not)."""

from __future__ import annotations

import collections
import random

import pytest

from models.config import SchedulerConfig
from models.errors import InputError
from models.objects import PodSchedulingGate, copy_with
from models.snapshot import POD_GROUP_LABEL
from solver import ScheduleRequest, decide
from solver.explain import Stopped, explain, plan_applied
from solver.explain.obstacles import candidates, relaxed
from tests.builders import (make_csi_node, make_node, make_pdb, make_pod, make_pod_group, make_pv, make_pvc, make_snapshot,
                            make_storage_class, term)
from tests.builders import spread as spread_rule

CONFIG = SchedulerConfig.model_validate({"solver": {"timeLimitSeconds": 10, "workers": 1},
                                         "preemption": {"pdb": "hard"}})


def kinds(explanation) -> list[str]:
    return sorted(o.kind for o in explanation.obstacles)


def test_a_gang_one_budget_away_from_its_rack() -> None:
    """The issue's example: train (8 pods x 4 CPU, one rack); rack-a is full of pods of higher
    priority, rack-b holds 6 because of batch-3 and batch-4, whose budget allows 0 disruptions."""
    nodes = [make_node(f"{r}-{i}", cpu="8", memory="64Gi", labels={"rack": r}) for r in ("rack-a", "rack-b") for i in (1, 2, 3, 4)]
    pods = [make_pod(f"infra/db-{i}", cpu="8", node=f"rack-a-{i}", priority=5000) for i in (1, 2, 3, 4)]
    pods += [make_pod(f"ml/batch-{i}", cpu="4", node=f"rack-b-{i - 2}", priority=0, labels={"app": "batch"}) for i in (3, 4)]
    pods += [make_pod(f"ml/train-{i}", cpu="4", priority=1000, group="train") for i in range(8)]
    snap = make_snapshot(nodes, pods, pod_groups=[make_pod_group("ml/train", 8, topology_key="rack")],
                         pdbs=[make_pdb("ml/batch", {"app": "batch"}, allowed=0)])
    [why] = explain(snap, CONFIG, "podgroup/ml/train")
    assert why.unit.kind == "gang" and len(why.reasons) == 8
    assert why.proven
    assert [o.text for o in why.obstacles] == ["PodDisruptionBudget ml/batch allows 0 disruption(s)"]
    assert why.obstacles[0].fields == ("status.disruptionsAllowed",)


def test_a_pod_two_budgets_select_names_their_overlap() -> None:
    """Under hard budgets a pod two budgets select is never evicted, whatever they allow: the
    obstacle is the overlap (delete either budget), not an allowance to raise."""
    snap = make_snapshot([make_node("n1", cpu="2")],
                         [make_pod("default/twice", cpu="2", priority=0, labels={"app": "a", "tier": "x"}, node="n1"),
                          make_pod("default/high", cpu="2", priority=100)],
                         pdbs=[make_pdb("default/by-app", {"app": "a"}, allowed=5),
                               make_pdb("default/by-tier", {"tier": "x"}, allowed=5)])
    [why] = explain(snap, CONFIG, "default/high")
    assert why.proven and kinds(why) == ["pdb"]
    [obstacle] = why.obstacles
    assert "selects default/twice, which another budget selects too" in obstacle.text
    assert obstacle.fields == ("spec.selector",)


def test_a_budget_holding_a_pod_that_is_not_ready_says_what_would_let_it_go() -> None:
    """Found by a review: the obstacle pointed at the allowance alone, where the pod that is not
    Ready would go unspent under AlwaysAllow or once the budget is healthy enough."""
    web = {"app": "web"}
    snap = make_snapshot([make_node("n1", cpu="2")],
                         [make_pod("default/a", cpu="1", node="n1", priority=0, labels=web, ready=True),
                          make_pod("default/d", cpu="1", node="n1", priority=0, labels=web, ready=False),
                          make_pod("default/high", cpu="1", priority=1000)],
                         pdbs=[make_pdb("default/web", web, min_available=2, allowed=0, healthy=(1, 2))])
    [why] = explain(snap, CONFIG, "default/high")
    assert why.proven and kinds(why) == ["pdb"]
    [obstacle] = why.obstacles
    assert "its pods that are not Ready (default/d) would go unspent under unhealthyPodEvictionPolicy: " \
           "AlwaysAllow, or once currentHealthy (1) reaches desiredHealthy (2)" in obstacle.text
    assert obstacle.fields == ("status.disruptionsAllowed", "spec.unhealthyPodEvictionPolicy")


def test_a_taint_and_a_full_node() -> None:
    nodes = [make_node("tainted", cpu="4", taints=["gpu=yes:NoSchedule"]), make_node("full", cpu="4")]
    pods = [make_pod("a/hog", cpu="4", node="full", priority=100), make_pod("a/p", cpu="2", priority=0)]
    [why] = explain(make_snapshot(nodes, pods), CONFIG, "a/p")
    assert why.reasons["a/p"].startswith("0/2 nodes are available:")
    assert len(why.obstacles) == 1 and why.obstacles[0].kind in ("taint", "room")
    if why.obstacles[0].kind == "taint":
        assert why.obstacles[0].objects == ("nodes/tainted",) and why.obstacles[0].fields == ("spec.taints[0]",)
    else:
        assert "pods/a/hog" in why.obstacles[0].objects


def test_two_obstacles_on_the_only_node() -> None:
    nodes = [make_node("n1", cpu="4", taints=["dedicated=db:NoSchedule"], unschedulable=True)]
    [why] = explain(make_snapshot(nodes, [make_pod("a/p", cpu="1")]), CONFIG, "a/p")
    assert kinds(why) == ["cordon", "taint"]  # the cordon's own taint is not in spec.taints here


def test_the_pods_own_selector_and_anti_affinity() -> None:
    nodes = [make_node("a1", cpu="4", labels={"zone": "a"}), make_node("b1", cpu="4", labels={"zone": "b"})]
    pods = [make_pod("x/web-1", cpu="1", node="a1", labels={"app": "web"}),
            make_pod("x/web-2", cpu="1", node="b1", labels={"app": "web"}),
            make_pod("x/web-3", cpu="1", labels={"app": "web"}, pod_anti_affinity=[term({"app": "web"}, "zone")])]
    [why] = explain(make_snapshot(nodes, pods), CONFIG, "x/web-3")
    assert kinds(why) == ["pod-anti-affinity"]
    assert "topologyKey zone" in why.obstacles[0].text


def test_nothing_relaxable_names_the_request_beyond_every_node() -> None:
    [why] = explain(make_snapshot([make_node("n1", cpu="4")], [make_pod("a/big", cpu="16")]), CONFIG, "a/big")
    assert why.obstacles is None
    assert why.beyond == ("a/big requests cpu 16, the roomiest node has 4",)


@pytest.mark.parametrize(("target", "message"), [
    ("a/ghost", "pods/a/ghost: TARGET: no such pod"),
    ("a/run", "pods/a/run: TARGET: not a pending pod this scheduler places (it runs on node n1)"),
    ("podgroup/a/none", "podgroup/a/none: TARGET: no pending pod of podgroup a/none"),
    ("deployment/a/web", "deployment/a/web: TARGET: expected a pod as NS/NAME, podgroup/NS/NAME, workload/NS/NAME or all"),
    ("a/gated", "pods/a/gated: TARGET: not a pending pod this scheduler places (it is held by "
                "spec.schedulingGates (example.com/quota): it waits for them to be removed, not for room)"),
    ("a/theirs", 'pods/a/theirs: TARGET: not a pending pod this scheduler places (its spec.schedulerName is '
                 '"default-scheduler", another scheduler\'s; --all-pending takes it)'),
    ("a/deleting", "pods/a/deleting: TARGET: not a pending pod this scheduler places (it is being deleted)"),
    ("a/failed", "pods/a/failed: TARGET: not a pending pod this scheduler places (it has finished, in phase Failed)"),
])
def test_a_target_that_is_not_pending_is_refused(target, message) -> None:
    gated = make_pod("a/gated", cpu="1")
    gated = gated.model_copy(update={"spec": gated.spec.model_copy(
        update={"scheduling_gates": [PodSchedulingGate(name="example.com/quota")]})})
    snap = make_snapshot([make_node("n1")], [make_pod("a/run", cpu="1", node="n1"), gated,
                                             make_pod("a/theirs", cpu="1", scheduler="default-scheduler"),
                                             make_pod("a/deleting", cpu="1", terminating=True),
                                             make_pod("a/failed", cpu="1", phase="Failed")])
    with pytest.raises(InputError) as caught:
        explain(snap, CONFIG, target)
    assert str(caught.value).startswith(message)


# -- generated windows --------------------------------------------------------------------------


def window(seed: int):
    rng = random.Random(seed)
    nodes = []
    for i in range(rng.randint(2, 4)):
        taints = ["team=ml:NoSchedule"] if rng.random() < 0.3 else []
        nodes.append(make_node(f"n{i}", cpu=str(rng.choice([2, 4, 8])), memory="16Gi", taints=taints,
                               unschedulable=rng.random() < 0.15, labels={"zone": rng.choice("ab"), "rack": f"r{i % 2}"}))
    pods = []
    for i in range(rng.randint(1, 6)):
        node = rng.choice(nodes).metadata.name
        app = rng.choice(["db", "batch", "web"])
        anti = [term({"app": "web"}, "zone")] if app == "web" and rng.random() < 0.5 else []
        pods.append(make_pod(f"run/{app}-{i}", cpu=str(rng.choice([1, 2, 3])), node=node, labels={"app": app},
                             priority=rng.choice([0, 500, 2000]), pod_anti_affinity=anti))
    tolerate = [{"key": "team", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}]
    for i in range(rng.randint(1, 3)):
        app = rng.choice(["web", "api"])
        pods.append(make_pod(
            f"new/{app}-{i}", cpu=str(rng.choice([1, 2, 4])), priority=rng.choice([0, 1000]), labels={"app": app},
            node_selector={"zone": rng.choice("ab")} if rng.random() < 0.3 else None,
            pod_anti_affinity=[term({"app": "web"}, "zone")] if app == "web" and rng.random() < 0.4 else (),
            pod_affinity=[term({"app": "db"}, "zone")] if app == "api" and rng.random() < 0.3 else (),
            spread=[spread_rule("zone", {"app": app})] if rng.random() < 0.3 else (),
            tolerations=tolerate if rng.random() < 0.3 else ()))
    groups = []
    if rng.random() < 0.4:
        size = rng.randint(2, 3)
        pods += [make_pod(f"ml/g-{i}", cpu=str(rng.choice([1, 2])), priority=1000, group="g") for i in range(size)]
        groups.append(make_pod_group("ml/g", size, topology_key="rack" if rng.random() < 0.5 else None))
    pdbs = [make_pdb("run/batch", {"app": "batch"}, allowed=0)] if rng.random() < 0.5 else []
    return held(seed, nodes, pods, groups, pdbs)


def held(seed: int, nodes, pods, groups, pdbs):
    """The window with what nodes hold beyond requests and what pods carry (their own random
    stream, so the rest of the window is as it was): a node's few pod slots, a pending pod's
    volume bound in one zone, GPUs as DRA devices (some held by a running pod's claim, a pending
    pod asking for some), the gang's members sharing a host port."""
    from models.snapshot import ClusterSnapshot
    from tests.solver.dra_objects import allocated_claim, gpu_class, gpu_slice, gpu_template, with_claim

    rng = random.Random(seed * 7919 + 1)
    extra: dict = {}
    if rng.random() < 0.25:
        i = rng.randrange(len(nodes))
        held_there = sum(1 for p in pods if p.spec.node_name == nodes[i].metadata.name)
        nodes[i] = make_node(nodes[i].metadata.name, cpu=str(nodes[i].allocatable["cpu"] // 1000), memory="16Gi",
                             pods=held_there, labels=dict(nodes[i].metadata.labels),
                             taints=[f"{t.key}={t.value}:{t.effect}" for t in nodes[i].spec.taints],
                             unschedulable=nodes[i].spec.unschedulable)
    pending = [i for i, p in enumerate(pods) if not p.spec.node_name and not p.metadata.labels.get(POD_GROUP_LABEL)]
    if pending and rng.random() < 0.25:
        i = rng.choice(pending)
        zone = rng.choice("ab")
        pods[i] = make_pod(pods[i].key, cpu=str(pods[i].spec.containers[0].resources.requests["cpu"] // 1000),
                           priority=pods[i].spec.priority, labels=dict(pods[i].metadata.labels), claims=["data"])
        extra.update(pvcs=[make_pvc(f"{pods[i].metadata.namespace}/data", volume="pv-data")],
                     pvs=[make_pv("pv-data", zone=zone, claim=f"{pods[i].metadata.namespace}/data")],
                     storage_classes=[make_storage_class()])
        nodes[:] = [_zoned(n) for n in nodes]
    if rng.random() < 0.3:
        gpus = {n.metadata.name: rng.choice([0, 1, 2]) for n in nodes}
        extra.update(device_classes=[gpu_class()], resource_slices=[gpu_slice(n, g) for n, g in gpus.items() if g],
                     resource_claim_templates=[gpu_template("new/gpu", rng.choice([1, 2]))])
        holder = next((i for i, p in enumerate(pods) if p.spec.node_name and gpus[p.spec.node_name]), None)
        if holder is not None and rng.random() < 0.7:
            pod = pods[holder]
            pods[holder] = with_claim(pod, claim="held")
            extra["resource_claims"] = [allocated_claim(f"{pod.metadata.namespace}/held", pod.spec.node_name,
                                                         ["gpu-0"], pod.metadata.name)]
        asking = [i for i in pending if pods[i].metadata.namespace == "new" and not pods[i].spec.volumes]
        if asking:
            i = rng.choice(asking)
            pods[i] = with_claim(pods[i], template="gpu")
    if groups and rng.random() < 0.5:
        pods[:] = [make_pod(p.key, cpu=str(p.spec.containers[0].resources.requests["cpu"] // 1000), priority=1000,
                            group=p.metadata.labels[POD_GROUP_LABEL], host_ports=[9000])
                   if p.metadata.labels.get(POD_GROUP_LABEL) else p for p in pods]
    return ClusterSnapshot.build(nodes=nodes, pods=pods, pod_groups=groups, pdbs=pdbs, **extra)


def _zoned(node):
    """``node`` with the well-known zone label beside its own ``zone`` one (a volume's node affinity reads it)."""
    labels = dict(node.metadata.labels)
    labels["topology.kubernetes.io/zone"] = labels["zone"]
    return copy_with(node, {"metadata": copy_with(node.metadata, {"labels": labels})})


def _fits(snapshot, plan, unit_pods, reasons, obstacles) -> bool:
    keys = tuple(reasons)
    base = plan_applied(snapshot, plan, keep=set(keys))
    decision = decide(ScheduleRequest(relaxed(base, keys, obstacles), CONFIG, window_keys=keys))
    return set(keys) <= set(decision.plan.assignment_map())


SEEN: collections.Counter = collections.Counter()  # obstacle kinds the checked sets named (printed with -s)


def check_windows(seeds) -> int:
    """Every obstacle set sufficient and minimal; returns how many sets were checked."""
    checked = 0
    for seed in seeds:
        snap = window(seed)
        today = decide(ScheduleRequest(snap, CONFIG))
        for why in explain(snap, CONFIG, today=today):
            if why.reasons and (why.fits_as_is or why.obstacles is None):
                SEEN["fits as is" if why.fits_as_is else "fits nowhere"] += 1
            if why.fits_as_is or why.obstacles is None or not why.reasons:
                continue
            assert why.proven, seed
            kept = why.obstacles
            assert _fits(snap, today.plan, why.unit.pods, why.reasons, kept), (seed, [o.text for o in kept])
            for o in kept:
                fewer = tuple(x for x in kept if x is not o)
                assert not _fits(snap, today.plan, why.unit.pods, why.reasons, fewer), (seed, o.text)
            checked += 1
            SEEN.update(o.kind for o in kept)
            SEEN[f"size {len(kept)}"] += 1
    print(f"{checked} sets checked; kinds and sizes: {dict(sorted(SEEN.items()))}")
    return checked


def test_obstacle_sets_are_sufficient_and_minimal_on_20_windows() -> None:
    assert check_windows(range(20)) >= 8


@pytest.mark.long
def test_obstacle_sets_are_sufficient_and_minimal_on_200_windows() -> None:
    assert check_windows(range(1000, 1200)) >= 80


@pytest.mark.parametrize(("name", "nodes", "pods", "target", "short"), [
    ("cordon and taint of the only node", [make_node("n1", cpu="4", taints=["dedicated=db:NoSchedule"], unschedulable=True)],
     [make_pod("a/p", cpu="1")], "a/p", "obstacles: node n1 cordoned; node n1's taint dedicated=db:NoSchedule"),
    ("a full node", [make_node("n1", cpu="4")], [make_pod("a/hog", cpu="4", node="n1", priority=100),
                                                  make_pod("a/p", cpu="2", priority=0)],
     "a/p", "obstacles: node n1's room"),
    ("nothing relaxable", [make_node("n1", cpu="4")], [make_pod("a/big", cpu="16")], "a/big",
     "obstacles: none that can be relaxed (it fits no node with every obstacle relaxed)"),
])
def test_the_short_form_the_live_scheduler_appends(name, nodes, pods, target, short) -> None:
    [why] = explain(make_snapshot(nodes, pods), CONFIG, target)
    assert why.short_form() == short
    assert why.to_json()["short"] == short


def test_a_gate_that_says_no_stops_the_search_with_no_partial_answer() -> None:
    nodes = [make_node("n1", cpu="4", taints=["dedicated=db:NoSchedule"], unschedulable=True)]
    asked = []

    def gate() -> bool:
        asked.append(1)
        return len(asked) < 3  # two checks, then out of time

    with pytest.raises(Stopped, match="a/p: stopped after 2 feasibility check"):
        explain(make_snapshot(nodes, [make_pod("a/p", cpu="1")]), CONFIG, "a/p", gate=gate)


# -- what a node holds beyond requests, what the targets carry ------------------------------------


def test_a_node_out_of_pod_slots_is_named_by_its_pod_count() -> None:
    nodes = [make_node("n1", cpu="8", pods=2)]
    pods = [make_pod(f"a/run-{i}", node="n1", priority=100) for i in range(2)] + [make_pod("a/p", cpu="1")]
    [why] = explain(make_snapshot(nodes, pods), CONFIG, "a/p")
    assert [(o.kind, o.objects, o.fields) for o in why.obstacles] == [
        ("pod-count", ("nodes/n1",), ("status.allocatable.pods",))]
    assert why.obstacles[0].text == "node n1 holds 2 pod(s), its pod slots: 2"
    assert why.short_form() == "obstacles: node n1's pod count"


def test_a_volume_bound_in_another_zone_is_named_with_its_node_affinity() -> None:
    nodes = [make_node("b1", cpu="4", labels={"topology.kubernetes.io/zone": "b"})]
    snap = make_snapshot(nodes, [make_pod("a/db", cpu="1", claims=["data"])],
                         pvcs=[make_pvc("a/data", volume="pv-a")], pvs=[make_pv("pv-a", zone="a", claim="a/data")],
                         storage_classes=[make_storage_class()])
    [why] = explain(snap, CONFIG, "a/db")
    [o] = why.obstacles
    assert o.kind == "volume" and "persistentvolumes/pv-a" in o.objects and "spec.nodeAffinity" in o.fields
    assert o.text == "a/db: PersistentVolumeClaim a/data bound to volume pv-a, whose spec.nodeAffinity limits the nodes that reach it"


def test_a_node_at_its_volume_attach_limit_or_the_volume_itself() -> None:
    nodes = [make_node("n1", cpu="4")]
    pods = [make_pod("a/old", node="n1", claims=["old"]), make_pod("a/new", cpu="1", claims=["new"])]
    snap = make_snapshot(nodes, pods, pvcs=[make_pvc("a/old", volume="pv-old"), make_pvc("a/new", volume="pv-new")],
                         pvs=[make_pv("pv-old", claim="a/old"), make_pv("pv-new", claim="a/new")],
                         storage_classes=[make_storage_class()], csi_nodes=[make_csi_node("n1", {"disk.csi": 1})])
    [why] = explain(snap, CONFIG, "a/new")
    assert why.proven and len(why.obstacles) == 1 and kinds(why)[0] in ("volume", "volume-limit")
    if kinds(why) == ["volume-limit"]:
        assert why.obstacles[0].fields == ("spec.drivers[0].allocatable.count",)


def test_devices_held_by_a_running_pods_claim_name_the_targets_claim() -> None:
    from tests.solver.dra_objects import allocated_claim, gpu_class, gpu_slice, gpu_template, with_claim
    from models.snapshot import ClusterSnapshot

    pods = [with_claim(make_pod("ml/old", cpu="1", node="n1"), claim="old-gpus"),
            with_claim(make_pod("ml/new", cpu="1"), template="one-gpu")]
    snap = ClusterSnapshot.build(nodes=[make_node("n1", cpu="8")], pods=pods, device_classes=[gpu_class()],
                                 resource_slices=[gpu_slice("n1", 1)], resource_claim_templates=[gpu_template("ml/one-gpu", 1)],
                                 resource_claims=[allocated_claim("ml/old-gpus", "n1", ["gpu-0"], "old")])
    [why] = explain(snap, CONFIG, "ml/new")
    [o] = why.obstacles
    assert o.kind == "device-claim" and o.objects[0] == "resourceclaimtemplates/ml/one-gpu"
    assert o.fields == ("spec.resourceClaims[0]", "spec.devices.requests")
    assert why.proven
    # The other way: node n1's room relaxed gives back the GPU ml/old's claim holds.
    today = decide(ScheduleRequest(snap, CONFIG))
    room = [c for c in candidates(plan_applied(snap, today.plan, keep={"ml/new"}), [snap.pod("ml/new")], CONFIG)
            if c.kind == "room"]
    assert room and _fits(snap, today.plan, ("ml/new",), {"ml/new": ""}, tuple(room))
    assert not _fits(snap, today.plan, ("ml/new",), {"ml/new": ""}, ())


def test_a_gang_whose_members_share_a_host_port_on_the_one_node() -> None:
    pods = [make_pod(f"ml/w-{i}", cpu="1", group="w", host_ports=[8080]) for i in range(2)]
    snap = make_snapshot([make_node("n1", cpu="8")], pods, pod_groups=[make_pod_group("ml/w", 2)])
    [why] = explain(snap, CONFIG, "podgroup/ml/w")
    assert [(o.kind, o.text) for o in why.obstacles] == [
        ("host-port", "2 pods of the gang: hostPort 8080/TCP (no two of them on one node)")]


def test_a_gang_short_of_pod_slots_by_one_is_named_by_the_pod_count() -> None:
    """One slot left on the only node, two members to place: the node's pod count, though a
    single pod would fit."""
    pods = [make_pod(f"a/run-{i}", node="n1", priority=100) for i in range(2)]
    pods += [make_pod(f"ml/w-{i}", cpu="1", group="w") for i in range(2)]
    snap = make_snapshot([make_node("n1", cpu="8", pods=3)], pods, pod_groups=[make_pod_group("ml/w", 2)])
    [why] = explain(snap, CONFIG, "podgroup/ml/w")
    assert [(o.kind, o.text) for o in why.obstacles] == [("pod-count", "node n1 holds 2 pod(s), its pod slots: 3")]


def test_a_room_obstacle_names_first_the_pods_holding_what_the_target_lacks() -> None:
    """A GPU node's room is held by its daemons too, which hold none of its GPUs: the pods that
    hold what the target is short of come first in the text (the obstacle is the whole room)."""
    nodes = [make_node("gpu-1", cpu="16", extra={"nvidia.com/gpu": "1"})]
    pods = [make_pod(f"kube-system/daemon-{i}", cpu="100m", node="gpu-1", priority=100) for i in range(5)]
    pods += [make_pod("ml/train", cpu="1", node="gpu-1", requests={"nvidia.com/gpu": "1"}, priority=100),
             make_pod("ml/new", cpu="1", requests={"nvidia.com/gpu": "1"}, priority=0)]
    [why] = explain(make_snapshot(nodes, pods), CONFIG, "ml/new")
    [room] = [o for o in why.obstacles if o.kind == "room"]
    assert room.text.startswith("node gpu-1: room (nvidia.com/gpu short) held by 6 pod(s): ml/train, kube-system/daemon-0")
    assert "pods/kube-system/daemon-4" in room.objects  # relaxing it is still the whole room


def test_a_gang_short_of_its_min_member_is_named_beyond_every_relaxation() -> None:
    """Two pods of a PodGroup asking for three: no room helps, and the answer says what would."""
    pods = [make_pod(f"a/g-{i}", cpu="1", group="g") for i in range(2)]
    snap = make_snapshot([make_node("n1", cpu="8")], pods, pod_groups=[make_pod_group("a/g", 3)])
    [why] = explain(snap, CONFIG, "podgroup/a/g")
    assert why.obstacles is None
    assert why.beyond == ("podgroup/a/g has 2 pod(s) and minMember 3: create its other members, or lower spec.minMember",)

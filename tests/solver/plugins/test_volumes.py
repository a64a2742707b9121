"""The four volume filters (SEMANTICS.md §3.9–3.10): VolumeRestrictions, NodeVolumeLimits,
VolumeBinding and VolumeZone, one table each, with the exact reason and status code a node gets.

The reason strings are written out (they are API): they are the ones SEMANTICS.md lists for
kube-scheduler v1.34 (``plugins/volumebinding``, ``volumerestrictions``, ``volumezone``,
``nodevolumelimits``)."""

from __future__ import annotations

import pytest

from solver.greedy import schedule_greedy
from solver.cpsat.solve import solve_window
from solver.context import build_context
from models.config import SchedulerConfig

from tests.builders import (make_csi_node, make_node, make_pod, make_pv, make_pvc, make_snapshot, make_storage_class,
                            scene)
from tests.solver.plugins.filter_helpers import OK, U, UU, case, verdict

NOT_FOUND = 'persistentvolumeclaim "{}" not found'
BEING_DELETED = 'persistentvolumeclaim "{}" is being deleted'
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
RWOP = "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod"
ZONE = "node(s) had no available volume zone"
LIMIT = "node(s) exceed max volume count"

ZONE_KEY = "topology.kubernetes.io/zone"
REGION_KEY = "topology.kubernetes.io/region"


def zone_node(name: str, zone: str, region: str = "eu-1") -> object:
    return make_node(name, labels={ZONE_KEY: zone, REGION_KEY: region})


# --------------------------------------------------------------------------- VolumeBinding


@pytest.mark.parametrize(
    "claims, pvs, classes, expected",
    [
        case("bound-pv-affinity-matches", [make_pvc("default/d", volume="pv1")], [make_pv("pv1", zone="eu-1b", claim="default/d")],
             [make_storage_class()], (OK, ())),
        case("bound-pv-affinity-conflict", [make_pvc("default/d", volume="pv1")], [make_pv("pv1", zone="eu-1c", claim="default/d")],
             [make_storage_class()], (UU, (NODE_CONFLICT,))),
        case("bound-to-missing-pv", [make_pvc("default/d", volume="gone")], [], [make_storage_class()], (UU, (PV_NOT_EXIST,))),
        case("wffc-provisioned-anywhere", [make_pvc("default/d")], [], [make_storage_class()], (OK, ())),
        case("wffc-topology-excludes-node", [make_pvc("default/d")], [], [make_storage_class(zones=["eu-1c"])],
             (UU, (BIND_CONFLICT,))),
        case("wffc-topology-admits-node", [make_pvc("default/d")], [], [make_storage_class(zones=["eu-1b", "eu-1c"])],
             (OK, ())),
        case("wffc-no-provisioner-matching-pv-here", [make_pvc("default/d", storage_class="local")],
             [make_pv("pv1", storage_class="local", zone="eu-1b")],
             [make_storage_class("local", provisioner="kubernetes.io/no-provisioner")], (OK, ())),
        case("wffc-no-provisioner-pv-elsewhere", [make_pvc("default/d", storage_class="local")],
             [make_pv("pv1", storage_class="local", zone="eu-1c")],
             [make_storage_class("local", provisioner="kubernetes.io/no-provisioner")], (UU, (BIND_CONFLICT,))),
        case("wffc-no-provisioner-pv-too-small", [make_pvc("default/d", storage_class="local", size="20Gi")],
             [make_pv("pv1", storage_class="local", size="10Gi")],
             [make_storage_class("local", provisioner="kubernetes.io/no-provisioner")], (UU, (BIND_CONFLICT,))),
        case("wffc-no-provisioner-pv-claimed-by-other", [make_pvc("default/d", storage_class="local")],
             [make_pv("pv1", storage_class="local", claim="default/other")],
             [make_storage_class("local", provisioner="kubernetes.io/no-provisioner")], (UU, (BIND_CONFLICT,))),
        case("wffc-no-provisioner-access-mode-missing", [make_pvc("default/d", storage_class="local", modes=["ReadWriteMany"])],
             [make_pv("pv1", storage_class="local")],
             [make_storage_class("local", provisioner="kubernetes.io/no-provisioner")], (UU, (BIND_CONFLICT,))),
    ],
)
def test_volume_binding_filter(claims, pvs, classes, expected):
    nodes = [zone_node("n-b", "eu-1b")]
    pods = [make_pod("default/p", claims=["d"])]
    status = scene(nodes, pods, pvcs=claims, pvs=pvs, storage_classes=classes).status("n-b", "default/p")
    assert verdict(status) == expected


@pytest.mark.parametrize(
    "claims, classes, message",
    [
        case("claim-missing", [], [make_storage_class()], NOT_FOUND.format("d")),
        case("claim-being-deleted", [make_pvc("default/d", deleting=True)], [make_storage_class()], BEING_DELETED.format("d")),
        case("unbound-immediate", [make_pvc("default/d")], [make_storage_class(mode="Immediate")], UNBOUND_IMMEDIATE),
        case("unbound-no-class", [make_pvc("default/d", storage_class="")], [], UNBOUND_IMMEDIATE),
    ],
)
def test_volume_binding_prefilter_fails_every_node_with_one_message(claims, classes, message):
    nodes = [zone_node("n1", "eu-1a"), zone_node("n2", "eu-1b")]
    sc = scene(nodes, [make_pod("default/p", claims=["d"])], pvcs=claims, storage_classes=classes)
    assert {n: verdict(s) for n, s in sc.statuses("default/p").items()} == {"n1": (UU, (message,)), "n2": (UU, (message,))}
    assert sc.cycle("default/p").fit_error() == f"0/2 nodes are available: {message}."


def test_generic_ephemeral_volume_uses_the_claim_named_after_pod_and_volume():
    nodes = [zone_node("n1", "eu-1a")]
    pod = make_pod("default/p", ephemeral=["scratch"])
    missing = scene(nodes, [pod], storage_classes=[make_storage_class()])
    assert verdict(missing.status("n1", "default/p")) == (UU, (NOT_FOUND.format("p-scratch"),))
    present = scene(nodes, [pod], pvcs=[make_pvc("default/p-scratch")], storage_classes=[make_storage_class()])
    assert present.status("n1", "default/p").ok


def test_one_volume_serves_one_claim_in_greedy_and_cpsat():
    """Two pods whose claims can only use one local volume: one of them waits, in both engines,
    and the plan binds the volume to the one placed."""
    local = make_storage_class("local", provisioner="kubernetes.io/no-provisioner")
    snap = make_snapshot(
        [zone_node("n1", "eu-1a")],
        [make_pod("default/a", claims=["ca"]), make_pod("default/b", claims=["cb"])],
        pvcs=[make_pvc("default/ca", storage_class="local"), make_pvc("default/cb", storage_class="local")],
        pvs=[make_pv("pv1", storage_class="local")], storage_classes=[local],
    )
    ctx = build_context(snap, SchedulerConfig())
    greedy = schedule_greedy(ctx)
    assert sorted(greedy.placements) == ["default/a"]
    assert greedy.unschedulable["default/b"].startswith(f"0/1 nodes are available: 1 {BIND_CONFLICT}.")
    outcome = solve_window(build_context(snap, SchedulerConfig()))
    assert len(outcome.solution.placements) == 1


# --------------------------------------------------------------------------- VolumeZone


@pytest.mark.parametrize(
    "pv_labels, node_labels, ok",
    [
        case("zone-matches", {ZONE_KEY: "eu-1b"}, {ZONE_KEY: "eu-1b"}, True),
        case("zone-differs", {ZONE_KEY: "eu-1c"}, {ZONE_KEY: "eu-1b"}, False),
        case("zone-list-with-double-underscore", {ZONE_KEY: "eu-1a__eu-1b"}, {ZONE_KEY: "eu-1b"}, True),
        case("region-differs", {REGION_KEY: "eu-2"}, {ZONE_KEY: "eu-1b", REGION_KEY: "eu-1"}, False),
        case("node-without-topology-labels-passes", {ZONE_KEY: "eu-1c"}, {"other": "x"}, True),
        case("node-missing-the-volumes-key", {REGION_KEY: "eu-1"}, {ZONE_KEY: "eu-1b"}, False),
        case("legacy-pv-label-vs-ga-node-label", {"failure-domain.beta.kubernetes.io/zone": "eu-1b"}, {ZONE_KEY: "eu-1b"}, True),
        case("unlabelled-volume", {}, {ZONE_KEY: "eu-1b"}, True),
    ],
)
def test_volume_zone(pv_labels, node_labels, ok):
    nodes = [make_node("n1", labels=node_labels)]
    sc = scene(nodes, [make_pod("default/p", claims=["d"])], pvcs=[make_pvc("default/d", volume="pv1")],
               pvs=[make_pv("pv1", claim="default/d", labels=pv_labels)], storage_classes=[make_storage_class()])
    assert verdict(sc.status("n1", "default/p")) == ((OK, ()) if ok else (UU, (ZONE,)))


# --------------------------------------------------------------------------- VolumeRestrictions


@pytest.mark.parametrize(
    "modes, holder_node, expected",
    [
        case("rwop-in-use-on-this-node", ["ReadWriteOncePod"], "n1", (U, (RWOP,))),
        case("rwop-in-use-on-another-node", ["ReadWriteOncePod"], "n2", (U, (RWOP,))),
        case("rwo-shared-is-fine", ["ReadWriteOnce"], "n1", (OK, ())),
        case("rwop-unused", ["ReadWriteOncePod"], None, (OK, ())),
    ],
)
def test_volume_restrictions_read_write_once_pod(modes, holder_node, expected):
    nodes = [make_node("n1"), make_node("n2")]
    pods = [make_pod("default/p", claims=["solo"])]
    if holder_node is not None:
        pods.append(make_pod("default/holder", claims=["solo"], node=holder_node))
    sc = scene(nodes, pods, pvcs=[make_pvc("default/solo", volume="pv1", modes=modes)],
               pvs=[make_pv("pv1", claim="default/solo", modes=modes)], storage_classes=[make_storage_class()])
    assert verdict(sc.status("n1", "default/p")) == expected


# --------------------------------------------------------------------------- NodeVolumeLimits


@pytest.mark.parametrize(
    "limit, running_claims, wanted, ok",
    [
        case("one-allowed-one-attached", 1, ["a"], ["b"], False),
        case("two-allowed-one-attached", 2, ["a"], ["b"], True),
        case("same-volume-counts-once", 1, ["a"], ["a"], True),
        case("no-count-no-limit", None, ["a"], ["b"], True),
        case("zero-allowed", 0, [], ["b"], False),
        case("other-driver-not-counted", 1, ["x"], ["b"], True),
        case("unbound-claim-counts-for-its-provisioner", 1, ["a"], ["w"], False),
    ],
)
def test_node_volume_limits(limit, running_claims, wanted, ok):
    claims = [make_pvc(f"default/{c}", volume=f"pv-{c}") for c in "abx"] + [make_pvc("default/w")]
    pvs = [make_pv(f"pv-{c}", claim=f"default/{c}", driver="other.csi" if c == "x" else "disk.csi") for c in "abx"]
    pods = [make_pod("default/p", claims=wanted)]
    if running_claims:
        pods.append(make_pod("default/running", claims=running_claims, node="n1"))
    sc = scene([make_node("n1")], pods, pvcs=claims, pvs=pvs, storage_classes=[make_storage_class()],
               csi_nodes=[make_csi_node("n1", {"disk.csi": limit})])
    assert verdict(sc.status("n1", "default/p")) == ((OK, ()) if ok else (U, (LIMIT,)))


# --------------------------------------------------------------------------- order


def test_filters_run_in_kube_schedulers_order_and_stop_at_the_first_failure():
    """RWOP (VolumeRestrictions) before the volume count (NodeVolumeLimits) before the node
    affinity of the volume (VolumeBinding) before its zone (VolumeZone)."""
    nodes = [zone_node("n1", "eu-1a")]
    claims = [make_pvc("default/solo", volume="pv1", modes=["ReadWriteOncePod"])]
    pvs = [make_pv("pv1", claim="default/solo", zone="eu-1c", labels={ZONE_KEY: "eu-1c"}, modes=["ReadWriteOncePod"])]
    pods = [make_pod("default/p", claims=["solo"]), make_pod("default/holder", claims=["solo"], node="n1")]
    base = dict(pvcs=claims, pvs=pvs, storage_classes=[make_storage_class()])
    assert verdict(scene(nodes, pods, **base).status("n1", "default/p")) == (U, (RWOP,))
    assert verdict(scene(nodes, pods[:1], **base, csi_nodes=[make_csi_node("n1", {"disk.csi": 0})])
                   .status("n1", "default/p")) == (U, (LIMIT,))
    assert verdict(scene(nodes, pods[:1], **base).status("n1", "default/p")) == (UU, (NODE_CONFLICT,))


def test_the_model_matches_claims_to_volumes_where_greedy_takes_the_smallest():
    """kube-scheduler's Reserve gives each claim the smallest volume that fits it: default/a takes
    the fast disk that only default/b's selector accepts, and b waits. The model matches both."""
    from solver import schedule, validate

    local = make_storage_class("local", provisioner="kubernetes.io/no-provisioner")
    snap = make_snapshot(
        [make_node("n1")],
        [make_pod("default/a", claims=["ca"]), make_pod("default/b", claims=["cb"])],
        pvcs=[make_pvc("default/ca", storage_class="local", size="5Gi"),
              make_pvc("default/cb", storage_class="local", size="5Gi", selector={"matchLabels": {"disk": "fast"}})],
        pvs=[make_pv("fast", storage_class="local", size="10Gi", labels={"disk": "fast"}),
             make_pv("slow", storage_class="local", size="20Gi")],
        storage_classes=[local],
    )
    config = SchedulerConfig()
    greedy = schedule(snap, config, engine="greedy")
    assert [a.pod for a in greedy.assignments] == ["default/a"]
    assert [(b.claim, b.volume) for b in greedy.volume_bindings] == [("default/ca", "fast")]
    best = schedule(snap, config, engine="cpsat")
    assert sorted(a.pod for a in best.assignments) == ["default/a", "default/b"]
    assert {(b.claim, b.volume) for b in best.volume_bindings} == {("default/ca", "slow"), ("default/cb", "fast")}
    assert validate(snap, best, config) == [] and validate(snap, greedy, config) == []


def test_a_node_already_over_its_volume_limit_takes_only_volumes_it_has():
    """A running pod holds two volumes where the CSINode now allows one: a pod sharing one of
    them may still come, a pod with a new volume may not — in greedy, in the model (which must
    not turn infeasible over what runs already) and in the validator."""
    from solver import schedule, validate

    snap = make_snapshot(
        [make_node("n1")],
        [make_pod("default/r", node="n1", claims=["a", "b"]), make_pod("default/p", claims=["a"]),
         make_pod("default/q", claims=["c"])],
        pvcs=[make_pvc(f"default/{c}", volume=f"pv-{c}") for c in "abc"],
        pvs=[make_pv(f"pv-{c}", claim=f"default/{c}") for c in "abc"], storage_classes=[make_storage_class()],
        csi_nodes=[make_csi_node("n1", {"disk.csi": 1})],
    )
    config = SchedulerConfig()
    for engine in ("greedy", "cpsat"):
        plan = schedule(snap, config, engine=engine)
        assert [a.pod for a in plan.assignments] == ["default/p"], engine
        assert plan.unschedulable[0].message.startswith(f"0/1 nodes are available: 1 {LIMIT}.")
        assert validate(snap, plan, config) == []


def test_a_volume_whose_holder_is_evicted_is_attached_anew_and_counts_against_the_limit():
    """A running pod holds a ReadWriteOncePod claim on a node whose CSINode allows no volume of
    its driver; a higher-priority pod mounts the same claim. Evicting the holder would free the
    claim, but mounting it again attaches a volume the node may not take: the pod stays pending,
    in greedy, in the model (which placed it and evicted the holder; found by the long property
    run) and in the validator."""
    from solver import schedule, validate

    snap = make_snapshot(
        [make_node("n1")],
        [make_pod("default/holder", node="n1", priority=0, claims=["a"]),
         make_pod("default/p", priority=10, claims=["a"])],
        pvcs=[make_pvc("default/a", volume="pv-a", modes=("ReadWriteOncePod",))],
        pvs=[make_pv("pv-a", claim="default/a", modes=("ReadWriteOncePod",))], storage_classes=[make_storage_class()],
        csi_nodes=[make_csi_node("n1", {"disk.csi": 0})],
    )
    config = SchedulerConfig()
    for engine in ("greedy", "cpsat"):
        plan = schedule(snap, config, engine=engine)
        assert (plan.assignments, plan.preemptions) == ((), ()), engine
        assert plan.stats.fallback_reason is None or "validation" not in plan.stats.fallback_reason, engine
        assert validate(snap, plan, config) == []


def test_a_claim_whose_provisioning_is_under_way_is_used_on_its_selected_node_only():
    """PreBind set ``volume.kubernetes.io/selected-node: n-c`` (kube-scheduler's or ours): the
    volume is being made there, so every other node fails VolumeBinding, whatever volumes or
    topologies would have done."""
    claim = make_pvc("default/d")
    claim = claim.model_copy(update={"metadata": claim.metadata.model_copy(
        update={"annotations": {"volume.kubernetes.io/selected-node": "n-c"}})})
    nodes = [zone_node("n-b", "eu-1b"), zone_node("n-c", "eu-1c")]
    sc = scene(nodes, [make_pod("default/p", claims=["d"])], pvcs=[claim], pvs=[make_pv("spare")],
               storage_classes=[make_storage_class()])
    assert verdict(sc.status("n-b", "default/p")) == (UU, (BIND_CONFLICT,))
    assert sc.status("n-c", "default/p").ok
    from solver import schedule, validate

    snap = make_snapshot(nodes, [make_pod("default/p", claims=["d"])], pvcs=[claim], pvs=[make_pv("spare")],
                         storage_classes=[make_storage_class()])
    for engine in ("greedy", "cpsat"):
        plan = schedule(snap, SchedulerConfig(), engine=engine)
        assert [(a.pod, a.node) for a in plan.assignments] == [("default/p", "n-c")]
        assert [(b.claim, b.volume, b.provisioned) for b in plan.volume_bindings] == [("default/d", None, True)]
        assert validate(snap, plan, SchedulerConfig()) == []

"""Windows where interchangeable gangs merge into one gang kind (the model decodes them itself),
found by fuzzing 3,000 small windows of gang families, deployments, anti-affinity and host ports
(1 worker, seed 1). In such models the replay's checks of the model's plan (``kube_victims``:
the naming of a victim's preemptor, pods that cannot fit at their turn) stood aside, and so did
the hand-out by turns, the earlier solutions and the whole-plan cuts: four windows gave a plan
the validator refused (the decision then returned greedy's), and the model read a victim's
support more coarsely there. The plan of such a model is still read off its counts (the gang
decoder deals whole gangs from them), so the checks and their cuts hold there too; each window
checks the decision's plan passes the validator, is the model's own (proven optimal, no
validation refused on the way) and places what its optimum does, against greedy's.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest

from models.config import SchedulerConfig
from solver import schedule, validate
from tests.builders import T0, make_node, make_pod, make_pod_group, make_snapshot, term

CONFIG = SchedulerConfig().with_overrides(time_limit_seconds=5.0, workers=1, seed=1)
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def at(minutes: int):
    return T0 + timedelta(minutes=minutes)


def by_priority(snapshot, plan) -> dict[int, int]:
    priority = {f"{p.metadata.namespace}/{p.metadata.name}": p.spec.priority for p in snapshot.pods}
    return dict(Counter(priority[a.pod] for a in plan.assignments))


def window_263():
    """The family (three gangs of one pod, affine to app=b on their host) merged into one kind; the
    model named its own member as the preemptor of run-1 (app=b), the replay names t1-0, which
    matches the terms too, so the family's first pod cannot start on an empty host. The plan was
    refused (greedy's five returned); the naming check now runs in such models."""
    nodes = [
        make_node("n0", cpu="4", memory="4Gi", pods=110, labels={ZONE: "z0"}),
        make_node("n1", cpu="2", memory="4Gi", pods=2, labels={ZONE: "z0"}),
        make_node("n2", cpu="4", memory="8Gi", pods=110, labels={ZONE: "z1"}),
        make_node("n3", cpu="4", memory="2Gi", pods=110, labels={ZONE: "z1"}),
    ]
    pods = [
        make_pod("default/run-0", node="n2", labels={"app": "a"}, priority=0, cpu="500m", memory="2Gi", pod_anti_affinity=[term({'app': 'b'}, ZONE)], host_ports=[80]),
        make_pod("default/run-1", node="n1", labels={"app": "b"}, priority=0, cpu="100m", memory="256Mi", pod_anti_affinity=[term({'app': 'a'}, HOST)]),
        make_pod("default/t0-0", labels={"app": "c"}, priority=100, cpu="500m", memory="0", created=at(0), host_ports=[80]),
        make_pod("default/t0-1", labels={"app": "c"}, priority=100, cpu="500m", memory="0", created=at(1), host_ports=[80]),
        make_pod("default/t0-2", labels={"app": "c"}, priority=100, cpu="500m", memory="0", created=at(2), host_ports=[80]),
        make_pod("default/t1-0", labels={"app": "b"}, priority=100, cpu="1", memory="256Mi", created=at(3), pod_anti_affinity=[term({'app': 'b'}, ZONE)]),
        make_pod("default/t1-1", labels={"app": "b"}, priority=100, cpu="1", memory="256Mi", created=at(4), pod_anti_affinity=[term({'app': 'b'}, ZONE)]),
        make_pod("default/fam0-0", labels={"app": "b"}, priority=100, cpu="500m", memory="256Mi", created=at(5), pod_affinity=[term({'app': 'b'}, HOST)], group="fam0"),
        make_pod("default/fam1-0", labels={"app": "b"}, priority=100, cpu="500m", memory="256Mi", created=at(6), pod_affinity=[term({'app': 'b'}, HOST)], group="fam1"),
        make_pod("default/fam2-0", labels={"app": "b"}, priority=100, cpu="500m", memory="256Mi", created=at(7), pod_affinity=[term({'app': 'b'}, HOST)], group="fam2"),
    ]
    groups = [make_pod_group("default/fam0", 1), make_pod_group("default/fam1", 1), make_pod_group("default/fam2", 1)]
    return make_snapshot(nodes, pods, pod_groups=groups)

def window_911():
    """As above, with a deployment of app=b between: the model's own plan was refused, and only
    the pass that follows it by kube's turns kept its gain."""
    nodes = [
        make_node("n0", cpu="4", memory="4Gi", pods=3, labels={ZONE: "z0"}),
        make_node("n1", cpu="4", memory="2Gi", pods=110, labels={ZONE: "z0"}),
        make_node("n2", cpu="1", memory="8Gi", pods=110, labels={ZONE: "z0"}),
        make_node("n3", cpu="4", memory="2Gi", pods=2, labels={ZONE: "z1"}),
        make_node("n4", cpu="1", memory="2Gi", pods=110, labels={ZONE: "z1"}),
    ]
    pods = [
        make_pod("default/run-0", node="n1", labels={"app": "b"}, priority=10, cpu="100m", memory="1Gi", pod_anti_affinity=[term({'app': 'b'}, ZONE)]),
        make_pod("default/run-1", node="n2", labels={"app": "c"}, priority=0, cpu="2", memory="2Gi", pod_anti_affinity=[term({'app': 'b'}, ZONE)]),
        make_pod("default/run-2", node="n1", labels={"app": "a"}, priority=0, cpu="1", memory="256Mi", pod_anti_affinity=[term({'app': 'a'}, ZONE)]),
        make_pod("default/t0-0", labels={"app": "c"}, priority=1000, cpu="0", memory="256Mi", created=at(0), pod_anti_affinity=[term({'app': 'c'}, HOST)], host_ports=[80]),
        make_pod("default/t0-1", labels={"app": "c"}, priority=1000, cpu="0", memory="256Mi", created=at(1), pod_anti_affinity=[term({'app': 'c'}, HOST)], host_ports=[80]),
        make_pod("default/t1-0", labels={"app": "b"}, priority=100, cpu="0", memory="1Gi", created=at(2), pod_affinity=[term({'app': 'b'}, HOST)]),
        make_pod("default/t2-0", labels={"app": "b"}, priority=1000, cpu="1", memory="0", created=at(3)),
        make_pod("default/fam0-0", labels={"app": "c"}, priority=1000, cpu="1", memory="1Gi", created=at(4), pod_affinity=[term({'app': 'b'}, HOST)], host_ports=[80], group="fam0"),
        make_pod("default/fam1-0", labels={"app": "c"}, priority=1000, cpu="1", memory="1Gi", created=at(5), pod_affinity=[term({'app': 'b'}, HOST)], host_ports=[80], group="fam1"),
    ]
    groups = [make_pod_group("default/fam0", 1), make_pod_group("default/fam1", 1)]
    return make_snapshot(nodes, pods, pod_groups=groups)

def window_2063():
    """t0's pods lean on run-0 (app=c) in the zone, and fit only once later evictions are done:
    the stranded check, which stood aside in models with gang kinds, now cuts such plans."""
    nodes = [
        make_node("n0", cpu="4", memory="4Gi", pods=2, labels={ZONE: "z0"}),
        make_node("n1", cpu="1", memory="2Gi", pods=110, labels={ZONE: "z0"}),
        make_node("n2", cpu="4", memory="2Gi", pods=3, labels={ZONE: "z0"}),
    ]
    pods = [
        make_pod("default/run-0", node="n1", labels={"app": "c"}, priority=0, cpu="1", memory="1Gi", pod_anti_affinity=[term({'app': 'c'}, ZONE)]),
        make_pod("default/run-1", node="n2", labels={"app": "b"}, priority=0, cpu="500m", memory="2Gi", pod_anti_affinity=[term({'app': 'c'}, ZONE)]),
        make_pod("default/run-2", node="n1", labels={"app": "b"}, priority=0, cpu="500m", memory="256Mi"),
        make_pod("default/run-3", node="n2", labels={"app": "a"}, priority=10, cpu="2", memory="256Mi"),
        make_pod("default/run-4", node="n2", labels={"app": "a"}, priority=0, cpu="100m", memory="256Mi"),
        make_pod("default/run-5", node="n1", labels={"app": "a"}, priority=10, cpu="100m", memory="1Gi", pod_anti_affinity=[term({'app': 'c'}, ZONE)]),
        make_pod("default/t0-0", labels={"app": "a"}, priority=1000, cpu="100m", memory="0", created=at(0), pod_affinity=[term({'app': 'c'}, ZONE)]),
        make_pod("default/t0-1", labels={"app": "a"}, priority=1000, cpu="100m", memory="0", created=at(1), pod_affinity=[term({'app': 'c'}, ZONE)]),
        make_pod("default/t0-2", labels={"app": "a"}, priority=1000, cpu="100m", memory="0", created=at(2), pod_affinity=[term({'app': 'c'}, ZONE)]),
        make_pod("default/t1-0", labels={"app": "a"}, priority=100, cpu="1", memory="256Mi", created=at(3), pod_affinity=[term({'app': 'b'}, ZONE)], pod_anti_affinity=[term({'app': 'a'}, HOST)], host_ports=[80]),
        make_pod("default/t1-1", labels={"app": "a"}, priority=100, cpu="1", memory="256Mi", created=at(4), pod_affinity=[term({'app': 'b'}, ZONE)], pod_anti_affinity=[term({'app': 'a'}, HOST)], host_ports=[80]),
        make_pod("default/t2-0", labels={"app": "b"}, priority=100, cpu="500m", memory="256Mi", created=at(5)),
        make_pod("default/t2-1", labels={"app": "b"}, priority=100, cpu="500m", memory="256Mi", created=at(6)),
        make_pod("default/t2-2", labels={"app": "b"}, priority=100, cpu="500m", memory="256Mi", created=at(7)),
        make_pod("default/fam0-0", labels={"app": "b"}, priority=1000, cpu="1", memory="256Mi", created=at(8), host_ports=[80], group="fam0"),
        make_pod("default/fam0-1", labels={"app": "b"}, priority=1000, cpu="1", memory="256Mi", created=at(9), host_ports=[80], group="fam0"),
        make_pod("default/fam1-0", labels={"app": "b"}, priority=1000, cpu="1", memory="256Mi", created=at(10), host_ports=[80], group="fam1"),
        make_pod("default/fam1-1", labels={"app": "b"}, priority=1000, cpu="1", memory="256Mi", created=at(11), host_ports=[80], group="fam1"),
    ]
    groups = [make_pod_group("default/fam0", 1), make_pod_group("default/fam1", 1)]
    return make_snapshot(nodes, pods, pod_groups=groups)

def window_2278():
    """t0-0 cannot go on n0 at its turn (run-0 and run-3 on n1 keep app=b out of the zone until
    t0-0 itself evicts them there): the class's pods swap nodes, as in models without gang
    kinds. A cut keyed on n0's counts alone (t1-0's support is run-0 on n1) lost the plan of
    three."""
    nodes = [
        make_node("n0", cpu="1", memory="2Gi", pods=3, labels={ZONE: "z0"}),
        make_node("n1", cpu="1", memory="4Gi", pods=110, labels={ZONE: "z0"}),
    ]
    pods = [
        make_pod("default/run-0", node="n1", labels={"app": "c"}, priority=0, cpu="500m", memory="256Mi", pod_anti_affinity=[term({'app': 'b'}, ZONE)]),
        make_pod("default/run-1", node="n1", labels={"app": "a"}, priority=0, cpu="1", memory="1Gi"),
        make_pod("default/run-2", node="n1", labels={"app": "b"}, priority=0, cpu="1", memory="256Mi"),
        make_pod("default/run-3", node="n1", labels={"app": "a"}, priority=0, cpu="2", memory="256Mi", pod_anti_affinity=[term({'app': 'b'}, ZONE)]),
        make_pod("default/run-4", node="n0", labels={"app": "a"}, priority=0, cpu="1", memory="2Gi"),
        make_pod("default/t0-0", labels={"app": "b"}, priority=100, cpu="500m", memory="256Mi", created=at(0), pod_anti_affinity=[term({'app': 'b'}, HOST)]),
        make_pod("default/t0-1", labels={"app": "b"}, priority=100, cpu="500m", memory="256Mi", created=at(1), pod_anti_affinity=[term({'app': 'b'}, HOST)]),
        make_pod("default/t0-2", labels={"app": "b"}, priority=100, cpu="500m", memory="256Mi", created=at(2), pod_anti_affinity=[term({'app': 'b'}, HOST)]),
        make_pod("default/t1-0", labels={"app": "a"}, priority=100, cpu="500m", memory="0", created=at(3), pod_affinity=[term({'app': 'c'}, ZONE)], pod_anti_affinity=[term({'app': 'a'}, HOST)]),
        make_pod("default/t1-1", labels={"app": "a"}, priority=100, cpu="500m", memory="0", created=at(4), pod_affinity=[term({'app': 'c'}, ZONE)], pod_anti_affinity=[term({'app': 'a'}, HOST)]),
        make_pod("default/t1-2", labels={"app": "a"}, priority=100, cpu="500m", memory="0", created=at(5), pod_affinity=[term({'app': 'c'}, ZONE)], pod_anti_affinity=[term({'app': 'a'}, HOST)]),
        make_pod("default/fam0-0", labels={"app": "c"}, priority=100, cpu="100m", memory="1Gi", created=at(6), pod_affinity=[term({'app': 'a'}, ZONE)], host_ports=[80], group="fam0"),
        make_pod("default/fam0-1", labels={"app": "c"}, priority=100, cpu="100m", memory="1Gi", created=at(7), pod_affinity=[term({'app': 'a'}, ZONE)], host_ports=[80], group="fam0"),
        make_pod("default/fam1-0", labels={"app": "c"}, priority=100, cpu="100m", memory="1Gi", created=at(8), pod_affinity=[term({'app': 'a'}, ZONE)], host_ports=[80], group="fam1"),
        make_pod("default/fam1-1", labels={"app": "c"}, priority=100, cpu="100m", memory="1Gi", created=at(9), pod_affinity=[term({'app': 'a'}, ZONE)], host_ports=[80], group="fam1"),
    ]
    groups = [make_pod_group("default/fam0", 2), make_pod_group("default/fam1", 2)]
    return make_snapshot(nodes, pods, pod_groups=groups)

def window_937():
    """The model names fam0-0 (level 1000) for run-3, the replay t0-1 (fam0-0 cannot fit at its
    turn, t0-1 evicts first); renamed, the plan passes the validator's checks, so the
    naming alone is no reason to cut it in a model that decodes gangs itself."""
    nodes = [
        make_node("n0", cpu="4", memory="4Gi", pods=3, labels={ZONE: "z0"}),
        make_node("n1", cpu="4", memory="2Gi", pods=3, labels={ZONE: "z0"}),
    ]
    pods = [
        make_pod("default/run-0", node="n0", labels={"app": "c"}, priority=0, cpu="100m", memory="2Gi", pod_anti_affinity=[term({'app': 'a'}, ZONE)]),
        make_pod("default/run-1", node="n0", labels={"app": "c"}, priority=0, cpu="1", memory="2Gi"),
        make_pod("default/run-2", node="n0", labels={"app": "c"}, priority=0, cpu="1", memory="256Mi", pod_anti_affinity=[term({'app': 'c'}, ZONE)], host_ports=[80]),
        make_pod("default/run-3", node="n1", labels={"app": "c"}, priority=0, cpu="2", memory="2Gi"),
        make_pod("default/t0-0", labels={"app": "a"}, priority=100, cpu="0", memory="1Gi", created=at(0), pod_affinity=[term({'app': 'c'}, ZONE)], pod_anti_affinity=[term({'app': 'a'}, HOST)]),
        make_pod("default/t0-1", labels={"app": "a"}, priority=100, cpu="0", memory="1Gi", created=at(1), pod_affinity=[term({'app': 'c'}, ZONE)], pod_anti_affinity=[term({'app': 'a'}, HOST)]),
        make_pod("default/t0-2", labels={"app": "a"}, priority=100, cpu="0", memory="1Gi", created=at(2), pod_affinity=[term({'app': 'c'}, ZONE)], pod_anti_affinity=[term({'app': 'a'}, HOST)]),
        make_pod("default/t1-0", labels={"app": "b"}, priority=1000, cpu="0", memory="1Gi", created=at(3)),
        make_pod("default/t2-0", labels={"app": "b"}, priority=100, cpu="2", memory="0", created=at(4), pod_affinity=[term({'app': 'c'}, ZONE)], pod_anti_affinity=[term({'app': 'b'}, HOST)]),
        make_pod("default/t2-1", labels={"app": "b"}, priority=100, cpu="2", memory="0", created=at(5), pod_affinity=[term({'app': 'c'}, ZONE)], pod_anti_affinity=[term({'app': 'b'}, HOST)]),
        make_pod("default/fam0-0", labels={"app": "b"}, priority=1000, cpu="500m", memory="1Gi", created=at(6), pod_affinity=[term({'app': 'a'}, HOST)], group="fam0"),
        make_pod("default/fam1-0", labels={"app": "b"}, priority=1000, cpu="500m", memory="1Gi", created=at(7), pod_affinity=[term({'app': 'a'}, HOST)], group="fam1"),
        make_pod("default/fam2-0", labels={"app": "b"}, priority=1000, cpu="500m", memory="1Gi", created=at(8), pod_affinity=[term({'app': 'a'}, HOST)], group="fam2"),
    ]
    groups = [make_pod_group("default/fam0", 1), make_pod_group("default/fam1", 1), make_pod_group("default/fam2", 1)]
    return make_snapshot(nodes, pods, pod_groups=groups)


CASES = {
    "a_gang_family_whose_first_pod_is_named_for_a_victim_another_class_evicts": (window_263, {100: 6}, {100: 5}),
    "a_refused_naming_in_a_gang_kind_model_is_cut_not_returned": (window_911, {1000: 4, 100: 1}, {1000: 3}),
    "an_affinity_pod_that_cannot_fit_at_its_turn_in_a_gang_kind_model_is_cut": (window_2063, {1000: 6}, {1000: 5, 100: 1}),
    "a_gang_kind_model_hands_a_class_out_by_turns_and_cuts_by_domain": (window_2278, {100: 3}, {100: 2}),
    "a_naming_the_replay_reads_otherwise_is_kept_when_the_plan_passes": (window_937, {1000: 2, 100: 2}, {1000: 1, 100: 3}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_gang_kind_window(case: str) -> None:
    window, own, greedy = CASES[case]
    snapshot = window()
    plan = schedule(snapshot, CONFIG)
    stats = plan.stats
    assert validate(snapshot, plan, CONFIG) == []
    assert "failed validation" not in (stats.fallback_reason or "") + (stats.plan_reason or ""), stats
    assert (stats.status, stats.plan_from) == ("OPTIMAL", "solver"), stats
    assert by_priority(snapshot, plan) == own
    assert by_priority(snapshot, schedule(snapshot, CONFIG, engine="greedy")) == greedy

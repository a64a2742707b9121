"""Minimal windows the property runs reduced, where the CP-SAT model's own proven optimum placed
less than greedy ``scheduleOne``.

The API returns the better of the two plans, so no user-visible plan was worse; but a model that
cannot express a valid plan greedy finds is a model that drifted from the rule it encodes. Each
case is the smallest window shown to the lead:

* fixed: the self-affinity escape counted matching pods on nodes without the topology key;
* fixed: a node that running pods overcommit on one resource refused every window pod, also
  those that do not request that resource;
* fixed: only window pods without required affinity could anchor another's affinity, though
  one anchored by other means (a seed, a running pod) comes first just as well;
* fixed: a window class with required affinity that matched a self-affine group's term ruled
  out the group's seed even when that class could never be placed;
* fixed: the model never took a terminating pod as a victim; kube-scheduler's DefaultPreemption
  (and greedy) do — it still holds its room until it is gone;
* fixed: a self-affine group's seed was ruled out by any other placed class matching its terms,
  though only a rival seed must come first; pods of the support cycle anchored from outside it
  (by the seed, or by a pod without affinity) could not anchor the rest of the cycle; and the
  group's pods never anchored a class with the group's terms that does not match them;
* fixed: a window pod kept out of a zone by a running pod's anti-affinity, which it outranks,
  did not see that pod evicted by another window pod's preemption on another node: the two
  classes share no node and no rule, so they were solved as separate models;
* fixed: a pod that cannot preempt never used the room another window pod's preemption frees
  (capacity, host ports and anti-affinity alike), though the final state is valid — also on
  another node, when the victim's anti-affinity kept the pod out of their shared zone: its
  candidate nodes counted only what its own class could evict;
* fixed: a pod placed beside the running pod that supports its affinity, which a later pod then
  evicts, was supported on the final state only by window pods that need it in turn: a victim
  now supports every pod but its own preemptor in the model too, as in the validator (the plan
  names a preemptor that does not lean on it).
* fixed (the three model gaps the twenty-sixth round's long run kept, ``tests/reliability/gaps``,
  reduced): a victim evicted for a gang's member supported no pod placed before the gang, though
  the gang's members take their turns at their first member's place in the queue; the model
  handed a class's places to its pods node by node, so two pods of one class whose turns needed
  the other order (the first evicts what keeps the second out) made a plan the replay refused,
  and the cut then kept the model from the same counts for good; and a victim whose
  anti-affinity (or host port, or room) keeps a class out of its own node supported none of the
  class's pods anywhere in the domain, though the pods on other nodes come before its eviction;
* fixed (the same round's long run): a spread class's places, handed out skew first, put its first
  pod where no eviction was needed, so the victim kube-scheduler evicts for the pod whose turn
  needs it stayed; the hand-out by turns now also swaps for a victim the replay keeps.
* fixed (fuzzed windows of the twenty-eighth round): a cut keyed on one node's counts, where a
  victim on another node of the zone kept the node's class out by anti-affinity until it was
  evicted there; and a class's place the decode gave to a pod that cannot take it at its turn,
  where a later pod of the class the plan left out could.
* fixed (the twenty-ninth round's long run, ``gaps/2026-12-06-a``, and fuzzed windows of the
  twenty-eighth and twenty-ninth): interchangeable gangs merged into a kind were dealt the kind's
  places in queue order, node by node, though kube-scheduler's turns needed another deal (the
  first gang on the node whose victim opens the zone to the rest); the replay refused the deal
  and the cut on its counts removed the deal that passes too. The refused deal's gangs now
  trade places, or their pods swap nodes (within a gang too), before anything is cut.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from models.config import SchedulerConfig
from solver import schedule, validate
from solver.context import build_context
from solver.cpsat.solve import solve_window, tier_weights
from tests.builders import T0, make_node, make_pod, make_pod_group, make_snapshot, term

CONFIG = SchedulerConfig().with_overrides(time_limit_seconds=5.0, workers=2, seed=1)
ZONE = "topology.kubernetes.io/zone"
GPU = "example.com/gpu"
ANTI_A = term({"app": "a"}, "kubernetes.io/hostname")


def at(minutes: int):
    return T0 + timedelta(minutes=minutes)


def own_and_greedy(snapshot) -> tuple[int, int]:
    """The solver's own proven placement value and greedy's, tier-weighted."""
    ctx = build_context(snapshot, CONFIG)
    solution = solve_window(ctx).solution
    assert solution is not None and solution.status == "OPTIMAL"
    greedy = schedule(snapshot, CONFIG, engine="greedy").assignment_map()
    weights = tier_weights([p.priority for p in ctx.window])
    return (sum(weights[ctx.pod(k).priority] for k in solution.placements),
            sum(weights[ctx.pod(k).priority] for k in greedy))


def check(snapshot) -> None:
    for engine in ("greedy", "cpsat"):
        assert validate(snapshot, schedule(snapshot, CONFIG, engine=engine), CONFIG) == []
    own, greedy = own_and_greedy(snapshot)
    assert own >= greedy


# --------------------------------------------------------------------------- fixed


def test_self_affinity_escape_ignores_a_match_on_a_node_without_the_key():
    # kube-scheduler counts affinity matches only on nodes that carry the topology key, so the
    # first pod of a self-affine group may start in z0: r on n0 (no zone) does not count.
    nodes = [make_node("n0"), make_node("n1", labels={ZONE: "z0"})]
    pods = [
        make_pod("default/r", cpu="100m", node="n0", labels={"app": "a"}),
        make_pod("default/p", cpu="0", labels={"app": "a"}, pod_affinity=[term({"app": "a"}, ZONE)]),
    ]
    check(make_snapshot(nodes, pods))


def test_self_affinity_seed_is_allowed_while_a_rival_stays_unplaced():
    # p is affine and anti-affine to app=a on hostname, and nothing matches yet: it may start
    # alone (kube-scheduler's escape). r also matches app=a and has required affinity of its
    # own (to app=b, which nothing has), so it can never be placed: it must not rule the seed out.
    host = "kubernetes.io/hostname"
    nodes = [make_node("n0", unschedulable=True), make_node("n1")]
    pods = [
        make_pod("default/p", cpu="0", labels={"app": "a"}, created=at(0),
                 pod_affinity=[term({"app": "a"}, host)], pod_anti_affinity=[term({"app": "a"}, host)]),
        make_pod("default/r", cpu="0", labels={"app": "a"}, created=at(1), pod_affinity=[term({"app": "b"}, host)]),
    ]
    check(make_snapshot(nodes, pods))
    assert schedule(make_snapshot(nodes, pods), CONFIG).assignment_map() == {"default/p": "n1"}


def test_overcommitted_resource_binds_only_pods_that_request_it():
    # n1 is over its GPU allocatable (a running pod asks 2 of 1). A pod without a GPU request
    # fits it for kube-scheduler; a GPU pod that cannot evict the GPU user must not block it.
    node = make_node("n1", cpu="2", extra={GPU: "1"})
    pods = [
        make_pod("default/old", cpu="100m", requests={GPU: "2"}, node="n1", terminating=True),
        make_pod("default/plain", cpu="100m", created=at(0)),
        make_pod("default/gpu", cpu="0", requests={GPU: "1"}, priority=10, created=at(1)),
    ]
    snapshot = make_snapshot([node], pods)
    assert "default/plain" in solve_window(build_context(snapshot, CONFIG)).solution.placements
    assert "default/plain" in schedule(snapshot, CONFIG).assignment_map()


def test_affinity_anchored_by_a_window_pod_that_has_affinity_of_its_own():
    # The long property run's find, reduced: b starts its self-affine group (the seed); a needs
    # an app=b pod on its host. Only window pods without required affinity anchored others, so
    # the model left a out; b cannot need a (a does not match b's term), so b comes first.
    nodes = [make_node("n0", labels={ZONE: "z1"})]
    pods = [
        make_pod("default/b", cpu="100m", labels={"app": "b"}, pod_affinity=[term({"app": "b"}, ZONE)], created=at(0)),
        make_pod("default/a", cpu="100m", labels={"app": "a"}, pod_affinity=[term({"app": "b"}, "kubernetes.io/hostname")],
                 created=at(1)),
    ]
    check(make_snapshot(nodes, pods))


def test_affinity_pair_anchored_through_a_running_pod():
    # The next long run's find, reduced: c needs an app=a pod on its host and r (which stays)
    # is one; a needs c there. Each matches the other's term, but c needs no window pod: r
    # anchors it, so it may anchor a in turn.
    nodes = [make_node("n0")]
    pods = [
        make_pod("default/r", cpu="100m", node="n0", labels={"app": "a"}, priority=100),
        make_pod("default/c", cpu="100m", labels={"app": "c"}, pod_affinity=[term({"app": "a"}, "kubernetes.io/hostname")],
                 created=at(0)),
        make_pod("default/a", cpu="100m", labels={"app": "a"}, pod_affinity=[term({"app": "c"}, "kubernetes.io/hostname")],
                 created=at(1)),
    ]
    check(make_snapshot(nodes, pods))


def test_affinity_pair_anchored_through_a_running_pod_that_could_be_evicted():
    # A third long run's find, reduced: as above, but o could evict r (higher priority), so r
    # does not settle o's domain for good. Where r stays, o needs no window pod and may anchor c.
    nodes = [make_node("n0")]
    pods = [
        make_pod("default/r", cpu="100m", node="n0", labels={"app": "c"}, priority=10),
        make_pod("default/o", cpu="0", labels={"app": "a"}, priority=100,
                 pod_affinity=[term({"app": "c"}, "kubernetes.io/hostname")], created=at(0)),
        make_pod("default/c", cpu="0", labels={"app": "c"}, priority=0,
                 pod_affinity=[term({"app": "a"}, "kubernetes.io/hostname")], created=at(1)),
    ]
    check(make_snapshot(nodes, pods))


def test_terminating_lower_priority_pod_is_a_victim_as_in_kube_scheduler():
    # The node is full with a terminating pod of priority 0; kube-scheduler's DefaultPreemption
    # takes every lower-priority pod as a potential victim, terminating or not.
    snapshot = make_snapshot(
        [make_node("n0", cpu="2")],
        [make_pod("default/old", cpu="2", priority=0, node="n0", terminating=True),
         make_pod("default/new", cpu="1", priority=100)],
    )
    check(snapshot)
    plan = schedule(snapshot, CONFIG, engine="cpsat")
    assert plan.stats.engine == "cpsat" and not plan.stats.fallback
    assert plan.assignment_map() == {"default/new": "n0"}
    assert [v.pod for v in plan.preemptions] == ["default/old"]


HOST = "kubernetes.io/hostname"


@pytest.mark.parametrize("key", [HOST, ZONE])
def test_seed_then_a_class_that_leans_on_it(key):
    # The long run's windows 3,122 and 9,365, reduced. s (any pod, itself included) starts alone
    # by the self-affinity escape; p (app=a) arrives after it. The seed was ruled out by p, which
    # matches s's term though it cannot seed and comes after; and p, in s's support component,
    # could lean on s only through a running pod.
    nodes = [make_node("n0", labels={ZONE: "z0"})]
    pods = [
        make_pod("default/p", cpu="0", pod_affinity=[term({"app": "a"}, key)], created=at(0)),
        make_pod("default/s", cpu="0", labels={"app": "a"}, priority=1000, pod_affinity=[term({}, key)], created=at(1)),
    ]
    check(make_snapshot(nodes, pods))


def test_a_group_anchors_a_class_with_its_terms_that_does_not_match_them():
    # Window 3,122 once the above was fixed: p has the group's very term (app=a) but not its
    # label, so it is no member; the group's pods left it out though they anchor it as any would.
    nodes = [make_node("n0")]
    pods = [
        make_pod("default/p", cpu="0", pod_affinity=[term({"app": "a"}, HOST)], created=at(0)),
        make_pod("default/s", cpu="0", labels={"app": "a"}, priority=1000, pod_affinity=[term({"app": "a"}, HOST)],
                 created=at(1)),
    ]
    check(make_snapshot(nodes, pods))


def test_two_self_affine_groups_one_seed_anchors_the_other():
    # Window 7,049, reduced: h (by hostname) and z (by zone) both match every pod, each other's
    # terms included; only one of them may seed. Greedy seeds h, then z joins it in h's zone; the
    # model counted z's support from h only through a running pod, and under the same key only.
    nodes = [make_node("n0", labels={ZONE: "z0"})]
    pods = [
        make_pod("default/h", cpu="0", pod_affinity=[term({}, HOST)], created=at(0)),
        make_pod("default/z", cpu="0", pod_affinity=[term({}, ZONE)], created=at(1)),
    ]
    check(make_snapshot(nodes, pods))


def test_a_cycle_anchored_by_a_pod_without_affinity():
    # Window 7,049 once the above was fixed: c (app=c) needs an app=a pod on its host, z (app=a)
    # an app=c pod in its zone, so the two form a cycle; plain (app=a, no affinity) anchors c,
    # which then anchors z, as greedy places them in creation order.
    nodes = [make_node("n0", labels={ZONE: "z0"})]
    pods = [
        make_pod("default/plain", cpu="0", labels={"app": "a"}, created=at(0)),
        make_pod("default/c", cpu="0", labels={"app": "c"}, pod_affinity=[term({"app": "a"}, HOST)], created=at(1)),
        make_pod("default/z", cpu="0", labels={"app": "a"}, pod_affinity=[term({"app": "c"}, ZONE)], created=at(2)),
    ]
    check(make_snapshot(nodes, pods))


def test_zone_anti_affinity_lifted_by_a_preemption_in_another_component():
    # The long run's windows 6,983-6,984, reduced. hi fits only n0 (the GPU) and evicts r there
    # for room; r's required anti-affinity kept app=b pods out of zone z0, so b (which outranks
    # r too, but fits only n1) may go to n1 once r is gone. hi and b share no candidate node and
    # no rule, so the window split into two models, and b's never saw evict[r] (it lives in
    # hi's): r stayed in b's model for good. Greedy places both; the model's optimum, hi.
    nodes = [make_node("n0", cpu="1", extra={GPU: "1"}, labels={ZONE: "z0"}),
             make_node("n1", cpu="2", labels={ZONE: "z0"})]
    snapshot = make_snapshot(
        nodes,
        [make_pod("default/r", cpu="1", priority=0, node="n0", labels={"app": "c"},
                  pod_anti_affinity=[term({"app": "b"}, ZONE)]),
         make_pod("default/hi", cpu="1", requests={GPU: "1"}, priority=10, created=at(0)),
         make_pod("default/b", cpu="2", priority=10, labels={"app": "b"}, created=at(1))],
    )
    check(snapshot)
    assert set(schedule(snapshot, CONFIG).assignment_map()) == {"default/hi", "default/b"}


ROOM_FREED_BY_ANOTHER = {
    # hi (priority 10) evicts r; lo (priority 0, cannot evict r) then fits in what r freed.
    "cpu": ([make_pod("default/r", cpu="2", priority=0, node="n0", labels={"app": "a"})],
            dict(cpu="1"), dict(cpu="1")),
    "host-port": ([make_pod("default/r", cpu="1", priority=0, node="n0", labels={"app": "a"}, host_ports=[80])],
                  dict(cpu="1", pod_anti_affinity=[ANTI_A]), dict(cpu="1", host_ports=[80])),
    "anti-affinity": ([make_pod("default/r", cpu="1", priority=0, node="n0", labels={"app": "a"})],
                      dict(cpu="1", pod_anti_affinity=[ANTI_A]), dict(cpu="1", pod_anti_affinity=[ANTI_A])),
}


@pytest.mark.parametrize("rule", sorted(ROOM_FREED_BY_ANOTHER))
def test_pod_uses_room_another_window_pod_freed_by_preemption(rule):
    running, hi, lo = ROOM_FREED_BY_ANOTHER[rule]
    snapshot = make_snapshot(
        [make_node("n0", cpu="2" if rule == "cpu" else "4")],
        running + [make_pod("default/hi", priority=10, created=at(0), **hi),
                   make_pod("default/lo", priority=0, created=at(1), **lo)],
    )
    check(snapshot)


def test_pod_uses_a_zone_another_window_pod_freed_by_preemption():
    # The long property run's window 2,550, reduced. hi fits only n0 and evicts r there; r's
    # required anti-affinity kept app=a pods out of zone z0, so lo (app=a, of r's priority: it
    # cannot evict r) fits n1 only once r is gone. Greedy places both; the model's optimum, hi.
    nodes = [make_node("n0", cpu="2", labels={ZONE: "z0"}), make_node("n1", cpu="1", labels={ZONE: "z0"})]
    snapshot = make_snapshot(
        nodes,
        [make_pod("default/r", cpu="2", priority=0, node="n0", labels={"app": "a"},
                  pod_anti_affinity=[term({"app": "a"}, ZONE)]),
         make_pod("default/hi", cpu="2", priority=10, created=at(0)),
         make_pod("default/lo", cpu="1", priority=0, labels={"app": "a"}, created=at(1))],
    )
    check(snapshot)


def test_affinity_supported_by_a_pod_a_later_preemption_evicts():
    # The long run's window 3,055, reduced. p arrives while r (app=b) runs on n1 and is placed
    # beside it; q then evicts r for room and is supported by p. In the final state p and q
    # only support each other, which the validator accepts as the order p, q (r gone after p),
    # and the model, reading support on the final state, cannot express.
    snapshot = make_snapshot(
        [make_node("n1", cpu="1")],
        [make_pod("default/r", cpu="1", node="n1", labels={"app": "b"}, priority=0),
         make_pod("default/p", cpu="0", labels={"app": "a"}, priority=100,
                  pod_affinity=[term({"app": "b"}, "kubernetes.io/hostname")], created=at(0)),
         make_pod("default/q", cpu="1", labels={"app": "b"}, priority=10,
                  pod_affinity=[term({"app": "a"}, "kubernetes.io/hostname")], created=at(1))],
    )
    check(snapshot)


def test_a_pod_leans_on_a_victim_a_gang_later_in_the_queue_evicts():
    # The long run's window 2026-12-05-c, reduced. p (pod affinity to app=b) comes before the
    # gang g in the queue and is placed beside r; g's two members then need r's room (and the
    # node's last pod slots). kube-scheduler never checks p's affinity again. The model read the
    # gang's queue place as unknown, so r supported p only by staying.
    snapshot = make_snapshot(
        [make_node("n0", cpu="4", memory="4Gi", pods=3, labels={ZONE: "z0"})],
        [make_pod("default/r", cpu="1", memory="1Gi", node="n0", labels={"app": "b"}, priority=0),
         make_pod("default/p", cpu="0", memory="256Mi", labels={"app": "a"}, priority=10,
                  pod_affinity=[term({"app": "b"}, ZONE)], created=at(7)),
         make_pod("default/g-0", cpu="2", memory="512Mi", priority=10, group="g", created=at(10)),
         make_pod("default/g-1", cpu="2", memory="512Mi", priority=10, group="g", created=at(11))],
        pod_groups=[make_pod_group("default/g", 2)],
    )
    check(snapshot)
    assert set(schedule(snapshot, CONFIG).assignment_map()) == {"default/p", "default/g-0", "default/g-1"}


def test_a_class_s_pods_take_the_nodes_their_turns_allow():
    # The long run's window 2026-12-05-a, reduced. r's anti-affinity keeps app=c out of zone z0
    # until c-0 evicts it on n1, its own node; c-1 (one host port, so another node) then takes
    # n0. The model's counts (one c on each node) are that plan, but the decode gave n0 to c-0,
    # whose turn comes first: the replay refused it, and the cut on those counts left the model
    # one c short of greedy's plan.
    snapshot = make_snapshot(
        [make_node("n0", cpu="1", memory="8Gi", pods=3, labels={ZONE: "z0"}),
         make_node("n1", cpu="4", memory="4Gi", pods=3, labels={ZONE: "z0"})],
        [make_pod("default/r", cpu="500m", memory="2Gi", node="n1", labels={"app": "a"}, priority=10,
                  pod_anti_affinity=[term({"app": "c"}, ZONE)]),
         make_pod("default/s", cpu="100m", memory="256Mi", node="n0", labels={"app": "b"}, priority=10),
         *[make_pod(f"default/b-{i}", cpu="100m", memory="1Gi", labels={"app": "b"}, priority=100, created=at(i))
           for i in range(4)],
         *[make_pod(f"default/c-{i}", cpu="0", memory="256Mi", labels={"app": "c"}, priority=1000, host_ports=[80],
                    created=at(9 + i)) for i in range(2)]],
    )
    check(snapshot)
    assert {"default/c-0", "default/c-1"} <= set(schedule(snapshot, CONFIG).assignment_map())


def test_a_victim_supports_its_class_beyond_the_node_its_anti_affinity_keeps_it_from():
    # The long run's window 2026-12-05-b, reduced. t-0 and t-1 want an app=b pod in their zone
    # and no other app=b pod on their node. r (app=b) holds n0; s (app=b, in z0) keeps the
    # first pod of a group from starting anywhere. t-0 goes to n2, beside nothing, leaning on r;
    # t-1 evicts r on n0 and leans on t-0. r keeps the t pods off n0 only, but the model read
    # its anti-affinity as keeping them out of the whole zone: one t at most.
    snapshot = make_snapshot(
        [make_node("n0", cpu="8", labels={ZONE: "z1"}), make_node("n1", cpu="1", labels={ZONE: "z0"}),
         make_node("n2", cpu="8", labels={ZONE: "z1"})],
        [make_pod("default/r", cpu="1", node="n0", labels={"app": "b"}, priority=0),
         make_pod("default/s", cpu="500m", node="n1", labels={"app": "b"}, priority=10),
         *[make_pod(f"default/t-{i}", cpu="2", labels={"app": "b"}, priority=1000, created=at(i),
                    pod_affinity=[term({"app": "b"}, ZONE)], pod_anti_affinity=[term({"app": "b"}, HOST)])
           for i in range(2)]],
    )
    check(snapshot)
    assert set(schedule(snapshot, CONFIG).assignment_map()) == {"default/t-0", "default/t-1"}


def test_a_spread_class_s_pods_swap_so_the_victim_goes_at_the_turn_that_needs_it():
    # The long run's window 1,718 (twenty-seventh round), reduced. t pods (zone spread, maxSkew
    # 1, app=a) must each take a zone the skew allows: r (app=a) holds z1, s (app=b, which t's
    # hostname anti-affinity shuns) holds n1 in z2. kube-scheduler places t-0 on n0 evicting r
    # (the skew needs it gone), t-1 on n1 evicting s; then the u pods, which cannot preempt,
    # find room on n0 where r was. The spread rule hands the class's places out skew first
    # (t-0 to n1), at whose turn t-1 then fits n0 beside r: r stays, and the model's plan, whose
    # counts are greedy's, was refused and cut, one u short.
    nodes = [make_node("n0", cpu="2", memory="8Gi", pods=3, labels={ZONE: "z1"}),
             make_node("n1", cpu="8", memory="8Gi", labels={ZONE: "z2"})]
    snapshot = make_snapshot(
        nodes,
        [make_pod("default/r", cpu="1", memory="2Gi", node="n0", labels={"app": "a"}, priority=0, host_ports=[80]),
         make_pod("default/s", cpu="500m", memory="2Gi", node="n1", labels={"app": "b"}, priority=0),
         make_pod("default/k", cpu="250m", memory="2Gi", node="n0", labels={"app": "c"}, priority=10),
         *[make_pod(f"default/t-{i}", cpu="500m", memory="2Gi", labels={"app": "a"}, priority=10, created=at(4 + i),
                    pod_anti_affinity=[term({"app": "b"}, HOST)],
                    spread=[{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                             "labelSelector": {"matchLabels": {"app": "a"}}}])
           for i in range(3)],
         *[make_pod(f"default/u-{i}", cpu="500m", memory="512Mi", labels={"app": "a"}, priority=0, created=at(7 + i),
                    preemption_policy="Never", host_ports=[8080]) for i in range(2)]],
    )
    check(snapshot)
    assert len(schedule(snapshot, CONFIG).assignment_map()) == 5



def test_a_cut_on_a_node_reads_the_zone_a_victim_s_anti_affinity_holds():
    # The fuzzed window 700 (twenty-eighth round). run-1 (n2) and run-2 (n0) keep app=c out of
    # the one zone while they run. kube-scheduler places t1-0 on n0 evicting run-2, then t2-0 on
    # n2 evicting run-1 and the rest there. A plan with t2-0 on n2 but t1-0 left out was refused
    # (run-2 still runs at t2-0's turn), and the cut was keyed on n2's counts alone, which also
    # removed greedy's plan: a node's verdict reads the nodes where the anti-affinity between its
    # classes and the potential victims holds (``kube_victims._near``).
    nodes = [
        make_node("n0", cpu="2", memory="8Gi", pods=3, labels={ZONE: "z0"}),
        make_node("n1", cpu="1", memory="8Gi", pods=2, labels={ZONE: "z0"}),
        make_node("n2", cpu="1", memory="4Gi", pods=110, labels={ZONE: "z0"}),
    ]
    pods = [
        make_pod("default/run-0", node="n2", labels={"app": "b"}, priority=10, cpu="2", memory="256Mi"),
        make_pod("default/run-1", node="n2", labels={"app": "b"}, priority=10, cpu="100m", memory="1Gi", pod_anti_affinity=[term({'app': 'c'}, ZONE)], host_ports=[80]),
        make_pod("default/run-2", node="n0", labels={"app": "c"}, priority=0, cpu="100m", memory="1Gi", pod_anti_affinity=[term({'app': 'c'}, ZONE)]),
        make_pod("default/run-3", node="n0", labels={"app": "b"}, priority=10, cpu="1", memory="1Gi", pod_anti_affinity=[term({'app': 'b'}, HOST)]),
        make_pod("default/run-4", node="n2", labels={"app": "b"}, priority=0, cpu="500m", memory="256Mi"),
        make_pod("default/t0-0", labels={"app": "b"}, priority=1000, cpu="1", memory="0", created=at(0), pod_affinity=[term({'app': 'a'}, HOST)]),
        make_pod("default/t0-1", labels={"app": "b"}, priority=1000, cpu="1", memory="0", created=at(1), pod_affinity=[term({'app': 'a'}, HOST)]),
        make_pod("default/t0-2", labels={"app": "b"}, priority=1000, cpu="1", memory="0", created=at(2), pod_affinity=[term({'app': 'a'}, HOST)]),
        make_pod("default/t1-0", labels={"app": "a"}, priority=100, cpu="2", memory="0", created=at(3)),
        make_pod("default/t1-1", labels={"app": "a"}, priority=100, cpu="2", memory="0", created=at(4)),
        make_pod("default/t1-2", labels={"app": "a"}, priority=100, cpu="2", memory="0", created=at(5)),
        make_pod("default/t2-0", labels={"app": "c"}, priority=100, cpu="1", memory="0", created=at(6)),
        make_pod("default/t2-1", labels={"app": "c"}, priority=100, cpu="1", memory="0", created=at(7)),
        make_pod("default/fam0-0", labels={"app": "b"}, priority=1000, cpu="100m", memory="256Mi", created=at(8), pod_affinity=[term({'app': 'c'}, HOST)], group="fam0"),
        make_pod("default/fam1-0", labels={"app": "b"}, priority=1000, cpu="100m", memory="256Mi", created=at(9), pod_affinity=[term({'app': 'c'}, HOST)], group="fam1"),
    ]
    groups = [make_pod_group("default/fam0", 1), make_pod_group("default/fam1", 1)]
    check(make_snapshot(nodes, pods, pod_groups=groups))


def test_a_self_affine_group_s_place_passes_to_a_later_pod_of_its_class():
    # The fuzzed window 1,985. The t0 group (app=b, affine and anti-affine to app=b on its host)
    # may start only where no app=b pod runs anywhere: t0-2, first in the queue, finds run-0
    # still on n3; t0-0, after t2-0 has evicted run-0, starts on n1 by evicting run-4. The model
    # counts one t0 pod on n1 and the decode gave the place to t0-2: refused, cut, and greedy's
    # plan lost. The hand-out by turns now also gives a place to a later pod the plan leaves out.
    nodes = [
        make_node("n0", cpu="2", memory="8Gi", pods=2, labels={ZONE: "z1"}),
        make_node("n1", cpu="4", memory="4Gi", pods=110, labels={ZONE: "z1"}),
        make_node("n2", cpu="4", memory="2Gi", pods=110, labels={ZONE: "z0"}),
        make_node("n3", cpu="1", memory="8Gi", pods=110, labels={ZONE: "z0"}),
    ]
    pods = [
        make_pod("default/run-0", node="n3", labels={"app": "b"}, priority=0, cpu="1", memory="256Mi", host_ports=[80]),
        make_pod("default/run-1", node="n1", labels={"app": "c"}, priority=0, cpu="2", memory="1Gi", pod_anti_affinity=[term({'app': 'b'}, ZONE)]),
        make_pod("default/run-2", node="n1", labels={"app": "c"}, priority=10, cpu="1", memory="1Gi", pod_anti_affinity=[term({'app': 'b'}, HOST)]),
        make_pod("default/run-3", node="n3", labels={"app": "a"}, priority=0, cpu="2", memory="256Mi"),
        make_pod("default/run-4", node="n1", labels={"app": "b"}, priority=0, cpu="100m", memory="2Gi", host_ports=[80]),
        make_pod("default/t0-0", labels={"app": "b"}, priority=1000, cpu="2", memory="256Mi", created=at(29), pod_affinity=[term({'app': 'b'}, HOST)], pod_anti_affinity=[term({'app': 'b'}, HOST)]),
        make_pod("default/t0-1", labels={"app": "b"}, priority=1000, cpu="2", memory="256Mi", created=at(39), pod_affinity=[term({'app': 'b'}, HOST)], pod_anti_affinity=[term({'app': 'b'}, HOST)]),
        make_pod("default/t0-2", labels={"app": "b"}, priority=1000, cpu="2", memory="256Mi", created=at(6), pod_affinity=[term({'app': 'b'}, HOST)], pod_anti_affinity=[term({'app': 'b'}, HOST)]),
        make_pod("default/t1-0", labels={"app": "c"}, priority=1000, cpu="500m", memory="0", created=at(31), pod_affinity=[term({'app': 'a'}, HOST)], host_ports=[80]),
        make_pod("default/t1-1", labels={"app": "c"}, priority=1000, cpu="500m", memory="0", created=at(8), pod_affinity=[term({'app': 'a'}, HOST)], host_ports=[80]),
        make_pod("default/t2-0", labels={"app": "a"}, priority=1000, cpu="1", memory="1Gi", created=at(13), pod_affinity=[term({'app': 'a'}, HOST)]),
        make_pod("default/t2-1", labels={"app": "a"}, priority=1000, cpu="1", memory="1Gi", created=at(35), pod_affinity=[term({'app': 'a'}, HOST)]),
    ]
    groups = []
    check(make_snapshot(nodes, pods, pod_groups=groups))


def test_a_place_passes_to_a_later_pod_where_the_first_cannot_fit_at_its_turn():
    # The fuzzed window 1,326: as above, with zone affinity and host anti-affinity; t1's places
    # go to the pods whose turns come after what they need.
    nodes = [
        make_node("n0", cpu="1", memory="8Gi", pods=3, labels={ZONE: "z0"}),
        make_node("n1", cpu="2", memory="8Gi", pods=3, labels={ZONE: "z1"}),
    ]
    pods = [
        make_pod("default/run-0", node="n1", labels={"app": "b"}, priority=10, cpu="1", memory="2Gi"),
        make_pod("default/run-1", node="n0", labels={"app": "a"}, priority=0, cpu="100m", memory="1Gi"),
        make_pod("default/run-2", node="n1", labels={"app": "c"}, priority=0, cpu="100m", memory="2Gi"),
        make_pod("default/run-3", node="n1", labels={"app": "b"}, priority=0, cpu="1", memory="256Mi"),
        make_pod("default/run-4", node="n0", labels={"app": "b"}, priority=0, cpu="500m", memory="1Gi", pod_anti_affinity=[term({'app': 'a'}, HOST)]),
        make_pod("default/run-5", node="n0", labels={"app": "c"}, priority=0, cpu="100m", memory="256Mi"),
        make_pod("default/t0-0", labels={"app": "b"}, priority=100, cpu="1", memory="256Mi", created=at(26), pod_anti_affinity=[term({'app': 'b'}, HOST)]),
        make_pod("default/t0-1", labels={"app": "b"}, priority=100, cpu="1", memory="256Mi", created=at(35), pod_anti_affinity=[term({'app': 'b'}, HOST)]),
        make_pod("default/t1-0", labels={"app": "b"}, priority=1000, cpu="100m", memory="0", created=at(2), pod_affinity=[term({'app': 'b'}, ZONE)], pod_anti_affinity=[term({'app': 'a'}, HOST)]),
        make_pod("default/t1-1", labels={"app": "b"}, priority=1000, cpu="100m", memory="0", created=at(28), pod_affinity=[term({'app': 'b'}, ZONE)], pod_anti_affinity=[term({'app': 'a'}, HOST)]),
        make_pod("default/t1-2", labels={"app": "b"}, priority=1000, cpu="100m", memory="0", created=at(4), pod_affinity=[term({'app': 'b'}, ZONE)], pod_anti_affinity=[term({'app': 'a'}, HOST)]),
        make_pod("default/t2-0", labels={"app": "b"}, priority=1000, cpu="0", memory="0", created=at(6), host_ports=[80]),
        make_pod("default/fam0-0", labels={"app": "a"}, priority=100, cpu="1", memory="1Gi", created=at(34), host_ports=[80], group="fam0"),
        make_pod("default/fam1-0", labels={"app": "a"}, priority=100, cpu="1", memory="1Gi", created=at(32), host_ports=[80], group="fam1"),
        make_pod("default/fam2-0", labels={"app": "a"}, priority=100, cpu="1", memory="1Gi", created=at(27), host_ports=[80], group="fam2"),
    ]
    groups = [make_pod_group("default/fam0", 1), make_pod_group("default/fam1", 1), make_pod_group("default/fam2", 1)]
    check(make_snapshot(nodes, pods, pod_groups=groups))


def test_a_seed_on_a_node_without_the_zone_label_leaves_a_zone_group_its_own_seed():
    # The long run's window 2,764 (twenty-eighth round), reduced. t1 (app=a) is affine and
    # anti-affine to app=a on its host; its pod evicts run-2 (app=a) on n3, which has no zone
    # label, and starts its group there by the self-affinity escape. The t2 gang (app=a, affine
    # to app=a in its zone) then starts its own group in z2: the pod on n3 does not count for a
    # zone term (kube-scheduler counts matches only on nodes with the key). The model allowed one
    # seed for both groups (each matches the other's terms), so it placed the gang alone.
    nodes = [make_node("n1", cpu="4", memory="8Gi", labels={ZONE: "z2"}),
             make_node("n3", cpu="2", memory="8Gi")]
    t1 = dict(labels={"app": "a"}, priority=1000, cpu="0", memory="2Gi",
              pod_affinity=[term({"app": "a"}, HOST)], pod_anti_affinity=[term({"app": "a"}, HOST)])
    pods = [make_pod("default/run-2", node="n3", labels={"app": "a"}, priority=0, cpu="500m"),
            make_pod("default/t1-0", created=at(4), **t1),
            *[make_pod(f"default/t2-{i}", labels={"app": "a"}, priority=1000, cpu="500m", memory="256Mi",
                       created=at(7 + i), pod_affinity=[term({"app": "a"}, ZONE)], group="g1") for i in range(3)]]
    snapshot = make_snapshot(nodes, pods, pod_groups=[make_pod_group("default/g1", 3)])
    check(snapshot)
    assert len(schedule(snapshot, CONFIG).assignment_map()) == 4


def test_interchangeable_gangs_trade_places_when_the_first_needs_the_victim_that_opens_the_zone():
    # g and h are one-pod gangs of one kind. r on n1 keeps app=c out of zone z0 while it runs;
    # s fills n0. g (first in the queue) must take n1 and evict r, then h evicts s on n0. The
    # kind's deal hands n0 to g: refused, and the cut on the counts left the model one gang.
    nodes = [make_node("n0", cpu="1", memory="8Gi", pods=10, labels={ZONE: "z0"}),
             make_node("n1", cpu="4", memory="8Gi", pods=10, labels={ZONE: "z0"})]
    gang = dict(cpu="100m", memory="256Mi", labels={"app": "c"}, priority=1000, host_ports=[80])
    pods = [make_pod("default/r", cpu="500m", memory="1Gi", node="n1", labels={"app": "a"}, priority=0,
                     pod_anti_affinity=[term({"app": "c"}, ZONE)]),
            make_pod("default/s", cpu="950m", memory="1Gi", node="n0", labels={"app": "b"}, priority=0),
            make_pod("default/g-0", group="g", created=at(0), **gang),
            make_pod("default/h-0", group="h", created=at(1), **gang)]
    snapshot = make_snapshot(nodes, pods, pod_groups=[make_pod_group("default/g", 1), make_pod_group("default/h", 1)])
    check(snapshot)
    assert schedule(snapshot, CONFIG).assignment_map() == {"default/g-0": "n1", "default/h-0": "n0"}


def test_a_gang_s_pods_swap_nodes_with_another_gang_s_of_the_kind():
    # The long run's window 2026-12-06-a (twenty-ninth round), reduced: three two-pod gangs of
    # one kind (minMember 1). run-0 on n3 keeps app=a out of z0; n2 holds two pods at most. The
    # deal gave fam0 n0 and n2, fam1 n2 and n3: fam0's second pod cannot fit n2 at its turn, and
    # trading the gangs' places does not help. fam0 needs n0 and n3 (its second pod evicts
    # run-0), fam1 both places on n2 (evicting run-1 and run-2).
    nodes = [make_node("n0", cpu="4", memory="16Gi"),
             make_node("n2", cpu="8", memory="16Gi", pods=2, labels={ZONE: "z0"}),
             make_node("n3", cpu="4", memory="16Gi", labels={ZONE: "z0"})]
    pods = [make_pod("default/run-0", node="n3", labels={"app": "a"}, priority=0, cpu="1", memory="512Mi",
                     pod_anti_affinity=[term({"app": "a"}, ZONE)]),
            make_pod("default/run-1", node="n2", labels={"app": "c"}, priority=0, cpu="250m", memory="256Mi"),
            make_pod("default/run-2", node="n2", labels={"app": "b"}, priority=100, cpu="250m", memory="256Mi")]
    pods += [make_pod(f"default/fam{i}-{r}", labels={"app": "a"}, priority=1000, cpu="3", memory="512Mi",
                      created=at(2 * i + r), group=f"fam{i}") for i in range(3) for r in range(2)]
    groups = [make_pod_group(f"default/fam{i}", 1) for i in range(3)]
    snapshot = make_snapshot(nodes, pods, pod_groups=groups)
    check(snapshot)
    assert len(schedule(snapshot, CONFIG).assignment_map()) == 4


def test_a_gang_s_own_pods_swap_nodes_when_the_first_needs_the_victim_that_opens_the_zone():
    # The fuzzed window 13,655 (thirtieth round), reduced. fam0 and fam1 are two-pod gangs of one
    # kind (minMember 2); run-0 on n1 keeps app=c out of the zone, and n1 holds one pod. The deal
    # gave fam0's first pod n0 and its second n1: the first cannot fit at its turn (run-0 still
    # runs), and no other gang's pods help. fam0's own pods swap: the first evicts run-0 on n1,
    # the second run-1 on n0, where fam1 then fits.
    nodes = [make_node("n0", cpu="1", memory="4Gi", labels={ZONE: "z0"}),
             make_node("n1", cpu="1", memory="4Gi", pods=1, labels={ZONE: "z0"})]
    pods = [make_pod("default/run-0", node="n1", labels={"app": "a"}, priority=0, cpu="100m", memory="256Mi",
                     pod_anti_affinity=[term({"app": "c"}, ZONE)]),
            make_pod("default/run-1", node="n0", labels={"app": "b"}, priority=0, cpu="1", memory="256Mi")]
    pods += [make_pod(f"default/fam{i}-{r}", labels={"app": "c"}, priority=100, cpu="100m", memory="256Mi",
                      created=at(2 * i + r), group=f"fam{i}") for i in range(2) for r in range(2)]
    snapshot = make_snapshot(nodes, pods, pod_groups=[make_pod_group(f"default/fam{i}", 2) for i in range(2)])
    check(snapshot)
    assert schedule(snapshot, CONFIG).assignment_map()["default/fam0-0"] == "n1"

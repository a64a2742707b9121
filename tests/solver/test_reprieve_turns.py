"""The model's reprieve, preemptor by preemptor (``reprieve_encode._turns``): with a plan's
placements and evictions fixed, the model holds them exactly when kube-scheduler's own preemption
(the replay) makes those evictions, turn by turn.

Found by a review of the turns: a turn read the resources every preemptor of its priority asks
for (where a resource the turn's pod does not ask for is overcommitted, kube-scheduler's fit does
not read it) and the rules of every preemptor of the priority (a later pod's anti-affinity let a
victim go at an earlier turn, which made room that kept another pod kube-scheduler evicts).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ortools.sat.python import cp_model

from models.config import SchedulerConfig
from solver import validate
from solver.context import build_context
from solver.cpsat import solve as cpsat
from solver.cpsat.solve import tier_weights
from solver.filtering import StaticFilters
from solver.greedy import Victim
from solver.plugins.preemption import reprieve_encode
from solver.plugins.preemption.replay import replay
from solver.scoring import ScoreContext
from tests.builders import make_node, make_pod, make_snapshot, term
from tests.reliability.generators import at
from tests.reliability.test_preemption_optimum import _plan_of

CONFIG = SchedulerConfig().with_overrides(time_limit_seconds=20.0, workers=2, seed=1,
                                          preemption={"enabled": True, "pdb": "soft"})
HOST = "kubernetes.io/hostname"


def _model_holds(snapshot: Any, placements: dict[str, int], evicted: set[str]) -> bool:
    """Whether the window's model (greedy's plan not admitted) holds these placements with exactly
    these evictions."""
    ctx = build_context(snapshot, CONFIG)
    static = StaticFilters(ctx.nodes, ctx.window)
    candidates, ubs = cpsat.candidates(ctx, ctx.classes, static, {}, True)
    live = [c for c in ctx.classes if len(candidates[c.id])]
    wm = cpsat.build_component(cpsat.BuildInput(ctx, static, candidates, ubs, ScoreContext.of(ctx),
                                                tier_weights([p.priority for p in ctx.window]), True), live)
    counts: dict[tuple[int, int], int] = defaultdict(int)
    for key, n in placements.items():
        counts[ctx.pod(key).class_id, n] += 1
    for key, var in wm.x.items():
        wm.model.add(var == counts.get(key, 0))
    assert evicted <= set(wm.evict)
    for key, var in wm.evict.items():
        wm.model.add(var == int(key in evicted))
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_time_in_seconds = 10
    return solver.solve(wm.model) in (cp_model.OPTIMAL, cp_model.FEASIBLE)


def _kube_evicts(snapshot: Any, placements: dict[str, int]) -> dict[str, str]:
    """Victim -> the pod at whose turn kube-scheduler's preemption evicts it, on this plan."""
    ctx = build_context(snapshot, CONFIG)
    return replay(ctx, placements, set(placements.values()), StaticFilters(ctx.nodes, ctx.window)).evicted_by


def _valid(snapshot: Any, placements: dict[str, int], evicted_by: dict[str, str]) -> list[str]:
    ctx = build_context(snapshot, CONFIG)
    victims = [Victim(ctx.bound_by_key[v], placements[p], p) for v, p in evicted_by.items()]
    return validate(snapshot, _plan_of(ctx, placements, victims), CONFIG)


def _overcommitted_memory() -> Any:
    """Memory on n0 is overcommitted (12Gi of 10Gi). a asks for CPU only: at its turn kube reads
    CPU alone, puts v back (v's memory does not count for a) and evicts w; b (memory) then evicts
    v, and x (CPU, never preempts) fits."""
    return make_snapshot([make_node("n0", cpu="4", memory="10Gi", pods=110)], [
        make_pod("default/u", memory="3Gi", node="n0", priority=1000, start_time=at(0)),
        make_pod("default/v", cpu="1", memory="8Gi", node="n0", priority=0, start_time=at(0)),
        make_pod("default/w", cpu="2", memory="1Gi", node="n0", priority=0, start_time=at(1)),
        make_pod("default/a", cpu="2", priority=100, created=at(0)),
        make_pod("default/b", memory="5Gi", priority=100, created=at(1)),
        make_pod("default/x", cpu="2", priority=50, preemption_policy="Never", created=at(2))])


def _memory_held_for_a_nominated_pod() -> Any:
    """The same turns with no overcommit: another scheduler's pod nominated to n0 holds 4Gi that a
    terminating victim still uses, so memory is full at a's turn."""
    return make_snapshot([make_node("n0", cpu="4", memory="10Gi", pods=110)], [
        make_pod("default/t", memory="4Gi", node="n0", priority=0, start_time=at(0), preempted=True),
        make_pod("default/v", cpu="1", memory="5Gi", node="n0", priority=0, start_time=at(0)),
        make_pod("default/w", cpu="2", memory="512Mi", node="n0", priority=0, start_time=at(1)),
        make_pod("default/theirs", scheduler="default-scheduler", nominated="n0", memory="4Gi", priority=1000,
                 created=at(20)),
        make_pod("default/a", cpu="2", priority=100, created=at(0)),
        make_pod("default/b", memory="1Gi", priority=100, created=at(1)),
        make_pod("default/x", cpu="2", priority=50, preemption_policy="Never", created=at(2))])


def test_a_turn_reads_only_what_its_pod_asks_for() -> None:
    for snapshot in (_overcommitted_memory(), _memory_held_for_a_nominated_pod()):
        placements = {"default/a": 0, "default/b": 0, "default/x": 0}
        evicted_by = _kube_evicts(snapshot, placements)
        assert evicted_by == {"default/w": "default/a", "default/v": "default/b"}
        assert _valid(snapshot, placements, evicted_by) == []
        assert _model_holds(snapshot, placements, set(evicted_by))


def test_a_later_pod_s_anti_affinity_is_no_reason_at_an_earlier_turn() -> None:
    """a (2 CPUs) and b (1 CPU, anti-affinity to app=b) on n0 (5 CPUs), full with v (app=b), w and
    z. At a's turn kube puts v back, then z, and evicts w (3 CPUs); at b's, v goes for b's
    anti-affinity. Evicting v at a's turn for b's rule would keep w and evict z instead."""
    snapshot = make_snapshot([make_node("n0", cpu="5", memory="64Gi", pods=110)], [
        make_pod("default/v", cpu="1", node="n0", labels={"app": "b"}, priority=0, start_time=at(0)),
        make_pod("default/w", cpu="3", node="n0", labels={"app": "a"}, priority=0, start_time=at(1)),
        make_pod("default/z", cpu="1", node="n0", labels={"app": "a"}, priority=0, start_time=at(2)),
        make_pod("default/a", cpu="2", priority=100, labels={"app": "a"}, created=at(0)),
        make_pod("default/b", cpu="1", priority=100, labels={"app": "a"}, created=at(1),
                 pod_anti_affinity=[term({"app": "b"}, HOST)])])
    placements = {"default/a": 0, "default/b": 0}
    evicted_by = _kube_evicts(snapshot, placements)
    assert evicted_by == {"default/w": "default/a", "default/v": "default/b"}
    assert _model_holds(snapshot, placements, set(evicted_by))
    assert not _model_holds(snapshot, placements, {"default/v", "default/w", "default/z"})


def test_the_batch_reads_a_resource_only_where_a_pod_asking_for_it_is_placed(monkeypatch) -> None:
    """Where the priority's preemptors on a node are reprieved as one batch, a resource only some
    of them ask for (memory, overcommitted on n0) is no reason to evict unless one of those is
    placed there: a alone (CPU only) keeps v, as kube-scheduler's fit for a reads CPU alone, and
    evicts w. The batch once required v to fit back in memory too, and held only v's eviction."""
    monkeypatch.setattr(reprieve_encode, "MAX_TURNS", 1)
    snapshot = _overcommitted_memory()
    placements = {"default/a": 0}
    evicted_by = _kube_evicts(snapshot, placements)
    assert evicted_by == {"default/w": "default/a"}
    assert _valid(snapshot, placements, evicted_by) == []
    assert _model_holds(snapshot, placements, {"default/w"})
    assert not _model_holds(snapshot, placements, {"default/v"})


def _overcommitted_memory_with_affinity() -> Any:
    """``_overcommitted_memory`` with a and b needing app=s beside them: v (app=s, priority 0) is a
    lower pod their dry runs take off, so the model may say they come late on n0; u (app=s,
    priority 1000) stays and supports them, so they never do."""
    pods = []
    for pod in _overcommitted_memory().pods:
        name = pod.metadata.name
        if name in ("u", "v"):
            pod = pod.model_copy(update={"metadata": pod.metadata.model_copy(update={"labels": {"app": "s"}})})
        pods.append(pod)
    extra = {"default/a": make_pod("default/a", cpu="2", priority=100, created=at(0),
                                   pod_affinity=[term({"app": "s"}, HOST)]),
             "default/b": make_pod("default/b", memory="5Gi", priority=100, created=at(1),
                                   pod_affinity=[term({"app": "s"}, HOST)])}
    pods = [extra.get(f"{p.metadata.namespace}/{p.metadata.name}", p) for p in pods]
    return _overcommitted_memory().model_copy(update={"pods": tuple(pods)})


def test_a_level_that_may_come_late_keeps_its_turns_when_it_does_not() -> None:
    """Found by a review: where a level may come late on a node, its turns and the batch's reading
    of a resource by the pods asking for it were dropped even when it did not, so the model refused
    kube's evictions here (the turns of a and b; a alone reading only CPU)."""
    snapshot = _overcommitted_memory_with_affinity()
    for placements, expected in (({"default/a": 0, "default/b": 0, "default/x": 0},
                                  {"default/w": "default/a", "default/v": "default/b"}),
                                 ({"default/a": 0}, {"default/w": "default/a"})):
        evicted_by = _kube_evicts(snapshot, placements)
        assert evicted_by == expected
        assert _valid(snapshot, placements, evicted_by) == []
        assert _model_holds(snapshot, placements, set(evicted_by))


def _support_only_below(elsewhere: bool) -> Any:
    """p (priority 1000) needs app=c in its zone; on n0 (z1) the only app=c pod is v, a lower pod
    kube-scheduler's dry run for p takes off with w. ``elsewhere``: another app=c pod runs on n1,
    in the same zone."""
    nodes = [make_node("n0", cpu="4", labels={"zone": "z1"}), make_node("n1", cpu="1", labels={"zone": "z1"})]
    pods = [make_pod("default/v", cpu="500m", node="n0", priority=0, labels={"app": "c"}, start_time=at(0)),
            make_pod("default/w", cpu="2", node="n0", priority=0, start_time=at(1)),
            make_pod("default/p", cpu="3", priority=1000, created=at(0), pod_affinity=[term({"app": "c"}, "zone")])]
    if elsewhere:
        pods.append(make_pod("default/s", cpu="100m", node="n1", priority=0, labels={"app": "c"}, start_time=at(0)))
    return make_snapshot(nodes, pods)


def test_a_preemptor_whose_only_support_is_a_lower_pod_of_the_node_does_not_preempt_there() -> None:
    """The model's reprieve kept v (it fits back beside p) as p's support and evicted w; kube's dry
    run takes v off first, finds p's affinity unmet and never makes n0 a candidate. The replay then
    refused every such plan, and the cuts took one node configuration at a time: a fuzzed 14-pod
    window (``tests/reliability/windows/cut-rounds-without-end.jsonl``) cut until its time ran out."""
    snapshot = _support_only_below(elsewhere=False)
    assert _kube_evicts(snapshot, {"default/p": 0}) == {}
    assert _valid(snapshot, {"default/p": 0}, {"default/w": "default/p"}) != []
    assert not _model_holds(snapshot, {"default/p": 0}, {"default/w"})


def test_a_preemptor_with_support_beyond_the_lower_pods_of_the_node_still_preempts() -> None:
    """The same with app=c also on n1 (same zone): the dry run keeps that support, so kube evicts w
    for p, and the model holds it."""
    snapshot = _support_only_below(elsewhere=True)
    assert _kube_evicts(snapshot, {"default/p": 0}) == {"default/w": "default/p"}
    assert _valid(snapshot, {"default/p": 0}, {"default/w": "default/p"}) == []
    assert _model_holds(snapshot, {"default/p": 0}, {"default/w"})

"""Preemption's dry run through the filters' ``NodeDryRun`` (kube-scheduler's PreFilterExtensions:
PreFilter once, victims removed and reprieved incrementally) gives what the dry run on the state
gives (victims taken out of the state, a new cycle judged per step), on every node, for pods with
topology spread, pod (anti-)affinity and host ports against running pods that carry them too; and
it never changes the state."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import HealthCheck, given, settings, strategies as st

from models.config import SchedulerConfig
from solver.context import build_context
from solver.disruption import PdbBudgets
from solver.filtering import StaticFilters
from solver.plugins.preemption import postfilter
from tests.builders import T0, make_node, make_pdb, make_pod, make_snapshot, spread, term

ZONES = ("a", "b", "c")


@st.composite
def clusters(draw):
    """A few nodes in up to three zones, running pods of mixed priorities, labels and rules, and one
    preemptor with some of: zone or hostname spread, pod affinity, anti-affinity, a host port."""
    n = draw(st.integers(1, 5))
    nodes = [
        make_node(f"n{i}", cpu=str(draw(st.integers(1, 6))), pods=draw(st.sampled_from((3, 6, 110))),
                  labels={"zone": draw(st.sampled_from(ZONES))} if draw(st.integers(0, 5)) else {})
        for i in range(n)
    ]
    running = []
    for i in range(draw(st.integers(0, 12))):
        app = draw(st.sampled_from(("a", "b", "c")))
        rules: dict = {}
        if draw(st.integers(0, 4)) == 0:
            rules["pod_anti_affinity"] = [term({"app": draw(st.sampled_from(("a", "b")))}, draw(st.sampled_from(("zone", "kubernetes.io/hostname"))))]
        if draw(st.integers(0, 5)) == 0:
            rules["host_ports"] = [8080]
        running.append(make_pod(
            f"default/r{i}", cpu=f"{draw(st.sampled_from((0, 250, 500, 1000, 2000)))}m",
            priority=draw(st.sampled_from((0, 10, 100, 1000))), labels={"app": app},
            node=f"n{draw(st.integers(0, n - 1))}", created=T0 + timedelta(minutes=i),
            start_time=T0 + timedelta(minutes=draw(st.integers(0, 3))), **rules,
        ))
    rules = {}
    if draw(st.booleans()):
        rules["spread"] = [spread(draw(st.sampled_from(("zone", "kubernetes.io/hostname"))), {"app": "a"},
                                  max_skew=draw(st.integers(1, 2)), min_domains=draw(st.sampled_from((None, 2, 4))))]
    if draw(st.integers(0, 3)) == 0:
        rules["pod_affinity"] = [term({"app": draw(st.sampled_from(("a", "b")))}, "zone")]
    if draw(st.integers(0, 2)) == 0:
        rules["pod_anti_affinity"] = [term({"app": draw(st.sampled_from(("a", "b")))}, draw(st.sampled_from(("zone", "kubernetes.io/hostname"))))]
    if draw(st.integers(0, 4)) == 0:
        rules["host_ports"] = [8080]
    preemptor = make_pod("default/high", cpu=f"{draw(st.sampled_from((0, 500, 1500, 3000)))}m", priority=500,
                         labels={"app": draw(st.sampled_from(("a", "b")))}, **rules)
    pdbs = [make_pdb("default/b", {"app": "b"}, allowed=draw(st.integers(0, 1)))] if draw(st.booleans()) else []
    return make_snapshot(nodes, running + [preemptor], pdbs=pdbs), draw(st.booleans())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_the_dry_run_on_the_node_matches_the_dry_run_on_the_state(case):
    snap, hard = case
    ctx = build_context(snap, SchedulerConfig())
    static = StaticFilters(ctx.nodes, ctx.window)
    (pod,) = ctx.window
    budgets = PdbBudgets.of(ctx)
    state = ctx.state
    cycle = static.cycle(pod, state)
    removals, touched, where = state.removals, list(state.touched), dict(state.where)
    for node in range(len(ctx.nodes)):
        by_state = postfilter.select_victims(pod, node, state, static, budgets, "1.34", hard_pdb=hard)
        by_node = postfilter.select_victims(pod, node, state, static, budgets, "1.34", hard_pdb=hard, cycle=cycle)
        (slow, slow_status), (fast, fast_status) = by_state, by_node
        assert (slow is None) == (fast is None), node
        assert slow_status == fast_status, node
        if slow is not None:
            assert [v.key for v in fast.victims] == [v.key for v in slow.victims]
            assert fast.pdb_violations == slow.pdb_violations
    # Neither dry run leaves a trace: the caches keyed on removals and touched nodes stay valid.
    assert (state.removals, state.touched, state.where) == (removals, touched, where)


def test_a_spread_domain_emptied_by_the_victims_lowers_the_global_minimum() -> None:
    """Zone a holds the only matching pods (2, lower priority) and zone b none: with maxSkew 1 a
    third pod of the app fits in b, not in a, unless victims leave a. On a's node both running
    pods must go for the preemptor to fit (count 0 = min), and the dry run on the node sees the
    count and the global minimum move together."""
    nodes = [make_node("n0", labels={"zone": "a"}), make_node("n1", cpu="0", labels={"zone": "b"})]
    running = [make_pod(f"default/r{i}", cpu="100m", priority=0, labels={"app": "a"}, node="n0") for i in range(2)]
    pod = make_pod("default/high", cpu="100m", priority=10, labels={"app": "a"}, spread=[spread("zone", {"app": "a"})])
    ctx = build_context(make_snapshot(nodes, running + [pod]), SchedulerConfig())
    static = StaticFilters(ctx.nodes, ctx.window)
    (info,) = ctx.window
    cycle = static.cycle(info, ctx.state)
    assert not cycle.status(ctx.nodes[0]).ok
    candidate, status = postfilter.select_victims(info, 0, ctx.state, static, PdbBudgets.of(ctx), "1.34", cycle=cycle)
    assert status.ok and candidate is not None
    assert sorted(v.key for v in candidate.victims) == ["default/r0", "default/r1"]


def test_the_candidate_walk_starts_at_a_seeded_random_offset() -> None:
    """kube-scheduler walks the potential nodes from a random offset; here the offset is drawn from
    the tie-break seed (``tieBreakSeed``), so a seed fixes the plan, and without one the walk
    starts at the first node. Four equal nodes, each full with one low pod: every node is an
    equally good candidate, and the first one walked wins the tie."""
    import random

    from solver.greedy import schedule_greedy

    nodes = [make_node(f"n{i}", cpu="1") for i in range(4)]
    running = [make_pod(f"default/low{i}", cpu="1", priority=0, node=f"n{i}") for i in range(4)]
    snap = make_snapshot(nodes, running + [make_pod("default/high", cpu="1", priority=10)])
    for seed in (None, 0, 1, 2, 3, 5, 8):
        ctx = build_context(snap, SchedulerConfig(tie_break_seed=seed))
        chosen = {schedule_greedy(ctx).placements["default/high"] for _ in range(2)}
        expected = 0 if seed is None else random.Random(seed).randrange(4)
        assert chosen == {expected}, seed

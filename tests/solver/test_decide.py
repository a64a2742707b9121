"""``solver.decide``: one call per window decides, validates every plan it returns, falls back to
greedy's when it must and says so in typed fields; what it keeps between windows is the
caller's ``SolverMemory``, safe to share between threads deciding at once."""

from __future__ import annotations

import random
import sys
import threading

import pytest

import solver
import solver.api as api
from models import SchedulerConfig
from solver import Decision, PlanSource, ScheduleRequest, SolverMemory, decide
from tests.builders import make_node, make_pod, make_snapshot, term

CONFIG = SchedulerConfig().with_overrides(time_limit_seconds=2.0, workers=2)


def _cluster(seed: int, pending: int = 24):
    """Nodes in two zones, running pods, and a window with spread and anti-affinity (the
    model's kind of window: greedy runs beside the solve on its own thread)."""
    rng = random.Random(seed)
    nodes = [make_node(f"n{i}", cpu="4", labels={"zone": f"z{i % 2}", "kubernetes.io/hostname": f"n{i}"})
             for i in range(12)]
    pods = [make_pod(f"default/run-{i}", cpu=f"{rng.choice([250, 500, 1000])}m", node=f"n{rng.randrange(12)}",
                     labels={"app": rng.choice(["web", "db"])}) for i in range(30)]
    for i in range(pending):
        app = rng.choice(["web", "db", "cache"])
        pods.append(make_pod(f"default/new-{i}", cpu=f"{rng.choice([250, 500, 1500])}m", labels={"app": app},
                             pod_anti_affinity=[term({"app": app}, "kubernetes.io/hostname")] if app == "cache" else ()))
    return make_snapshot(nodes, pods)


def _placements(decision: Decision) -> dict[str, str]:
    return {a.pod: a.node for a in decision.plan.assignments}


def test_greedy_and_the_solve_share_one_memory_from_several_threads() -> None:
    """Decisions of several snapshots run at once on threads sharing one memory (and, inside
    each CP-SAT decision, greedy on its own thread beside the solve) give the plans each
    snapshot gets alone with a memory of its own."""
    snapshots = [_cluster(seed) for seed in range(3)]
    alone = {}
    for i, snapshot in enumerate(snapshots):
        for engine in ("greedy", "cpsat"):
            decision = decide(ScheduleRequest(snapshot, CONFIG, engine=engine, memory=SolverMemory()))
            assert decision.validated, decision.problems
            alone[i, engine] = (decision.source, _placements(decision))
    memory = SolverMemory()
    got: dict[tuple[int, str], list] = {key: [] for key in alone}
    errors: list[BaseException] = []

    def run(i: int, engine: str) -> None:
        try:
            for _ in range(2):
                decision = decide(ScheduleRequest(snapshots[i], CONFIG, engine=engine, memory=memory))
                assert decision.validated, decision.problems
                got[i, engine].append((decision.source, _placements(decision)))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=key) for key in alone]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    for (i, engine), results in got.items():
        assert len(results) == 2
        for source, placements in results:
            if engine == "greedy":  # deterministic: exactly the plan it makes alone
                assert (source, placements) == alone[i, engine]
            else:  # the model's plan may differ with the time it got; never worse than greedy's
                assert len(placements) >= len(alone[i, "greedy"][1])
    assert memory.contexts_built >= 2 * len(got)  # every decision built through the shared memory


def test_a_memory_is_its_callers_alone() -> None:
    """A decision without a memory keeps nothing; with one, only that one changes."""
    snapshot = _cluster(7)
    mine, other = SolverMemory(), SolverMemory()
    decide(ScheduleRequest(snapshot, CONFIG, engine="greedy", memory=mine))
    assert mine.assumed is not None and mine.contexts_built == 2  # the decision's and the validator's
    assert other.assumed is None and other.contexts_built == 0
    decide(ScheduleRequest(snapshot, CONFIG, engine="greedy"))
    assert mine.contexts_built == 2


def test_the_greedy_engine_is_validated_once() -> None:
    decision = decide(ScheduleRequest(_cluster(1), CONFIG, engine="greedy"))
    assert (decision.source, decision.validated, decision.solver_ran) == (PlanSource.GREEDY, True, False)
    assert (decision.greedy_runs, decision.validations, decision.fallback_reason) == (1, 1, None)
    assert decision.plan.stats.status == "GREEDY" and decision.plan.stats.plan_from == "greedy"


def test_the_solver_plan_is_validated_once() -> None:
    decision = decide(ScheduleRequest(_cluster(2), CONFIG, engine="cpsat"))
    assert decision.validated and decision.solver_ran and decision.validations == 1
    assert decision.source in (PlanSource.SOLVER, PlanSource.GREEDY)
    assert decision.plan.stats.plan_from == ("solver" if decision.source is PlanSource.SOLVER else "greedy")


def test_a_solver_plan_the_validator_refuses_gives_greedys_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    """The validator refuses every plan made of the model's (the model's own, then the pass that
    follows it by kube-scheduler's turns, ``guided.rescue``): greedy's is taken, replayed too, and
    the decision names the fallback and the refused plans; the JSON stats say the same as before
    (status FALLBACK, fallback true, plan_from greedy)."""
    module = sys.modules["solver.validate"]
    real = module.validate
    calls = []

    def refuse_the_solvers(*args, **kwargs):
        calls.append(args[1].stats.plan_from)
        return ["capacity: node n0 cpu over by 1m"] if calls[-1] == "solver" else real(*args, **kwargs)

    monkeypatch.setattr(module, "validate", refuse_the_solvers)
    # Greedy spreads the two small pods over both nodes and has no room left for a large one;
    # the model puts them together and places a large one too.
    nodes = [make_node(f"n{i}", cpu="2") for i in range(2)]
    pods = [make_pod("default/a1", cpu="1"), make_pod("default/a2", cpu="1"),
            make_pod("default/b1", cpu="2"), make_pod("default/b2", cpu="2")]
    decision = decide(ScheduleRequest(make_snapshot(nodes, pods), CONFIG, engine="cpsat"))
    # the model's plan, then the rescue (it places more than greedy's), then greedy's
    assert calls == ["solver", "solver", "greedy"]
    assert decision.source is PlanSource.FALLBACK and decision.validated
    assert decision.fallback_reason == "solver plan failed validation: capacity: node n0 cpu over by 1m"
    assert [r.source for r in decision.rejected] == [PlanSource.SOLVER, PlanSource.SOLVER]
    assert decision.validations == 3 and decision.greedy_instead_of_solver
    stats = decision.plan.stats
    assert (stats.status, stats.fallback, stats.plan_from, stats.engine) == ("FALLBACK", True, "greedy", "cpsat")
    assert stats.fallback_reason == decision.fallback_reason


def test_a_refused_solver_plan_followed_by_kube_turns_is_the_decision_when_it_passes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The same window with only the model's own plan refused: the pass that follows it by
    kube-scheduler's turns places what the model's plan did, passes, and is the decision."""
    module = sys.modules["solver.validate"]
    real = module.validate
    calls = []

    def refuse_first(*args, **kwargs):
        calls.append(args[1].stats.plan_from)
        return ["capacity: node n0 cpu over by 1m"] if len(calls) == 1 else real(*args, **kwargs)

    monkeypatch.setattr(module, "validate", refuse_first)
    nodes = [make_node(f"n{i}", cpu="2") for i in range(2)]
    pods = [make_pod("default/a1", cpu="1"), make_pod("default/a2", cpu="1"),
            make_pod("default/b1", cpu="2"), make_pod("default/b2", cpu="2")]
    decision = decide(ScheduleRequest(make_snapshot(nodes, pods), CONFIG, engine="cpsat"))
    assert calls == ["solver", "solver"]
    assert decision.source is PlanSource.SOLVER and decision.validated and decision.fallback_reason is None
    assert len(decision.plan.assignments) == 3  # greedy's places two
    assert decision.plan.stats.guided is not None and not decision.plan.stats.fallback
    assert [r.source for r in decision.rejected] == [PlanSource.SOLVER]


def test_a_failing_solver_falls_back_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(ctx, **_):
        raise RuntimeError("boom")

    monkeypatch.setattr(api, "solve_window", boom)
    snapshot = _cluster(4)
    with pytest.raises(RuntimeError):
        decide(ScheduleRequest(snapshot, CONFIG, engine="cpsat"))
    decision = decide(ScheduleRequest(snapshot, CONFIG, engine="cpsat", fall_back_on_error=True))
    assert decision.source is PlanSource.FALLBACK and decision.validated and decision.solver_ran
    assert decision.fallback_reason == "the solver failed: RuntimeError: boom"
    assert decision.plan.assignments  # greedy's plan, placed


def test_greedy_first_settles_a_window_it_places_whole() -> None:
    nodes = [make_node(f"n{i}", cpu="8") for i in range(4)]
    pods = [make_pod(f"default/p{i}", cpu="500m") for i in range(6)]
    decision = decide(ScheduleRequest(make_snapshot(nodes, pods), CONFIG, engine="cpsat", greedy_first=True))
    assert (decision.source, decision.solver_ran, decision.validated) == (PlanSource.GREEDY, False, True)
    assert (decision.greedy_runs, decision.validations) == (1, 1)
    assert decision.plan.stats.plan_reason == api.REASON_GREEDY_WHOLE
    assert len(decision.plan.assignments) == 6


def test_greedy_first_leaves_a_window_it_cannot_place_whole_to_the_model() -> None:
    nodes = [make_node(f"n{i}", cpu="2") for i in range(2)]
    pods = [make_pod(f"default/p{i}", cpu="1500m") for i in range(3)]  # one of three cannot fit
    decision = decide(ScheduleRequest(make_snapshot(nodes, pods), CONFIG, engine="cpsat", greedy_first=True))
    assert decision.solver_ran and decision.validated and decision.validations == 1
    assert len(decision.plan.assignments) == 2 and len(decision.plan.unschedulable) == 1


def test_the_old_form_returns_the_decisions_plan() -> None:
    snapshot = _cluster(5)
    old = solver.schedule(snapshot, CONFIG, engine="greedy")
    new = decide(ScheduleRequest(snapshot, CONFIG, engine="greedy")).plan
    assert old.assignments == new.assignments and old.unschedulable == new.unschedulable


def test_all_pending_is_passed_on_not_guessed() -> None:
    """With ``all_pending`` the gated pods of every scheduler are named, though no pod of
    another scheduler is in the window (the flag was once guessed from the window's pods)."""
    from models.objects import PodSchedulingGate

    ours = make_pod("default/ours", cpu="100m")
    theirs = make_pod("default/theirs", cpu="100m", scheduler="default-scheduler")
    theirs = theirs.model_copy(update={"spec": theirs.spec.model_copy(
        update={"scheduling_gates": [PodSchedulingGate(name="example.com/quota")]})})
    snapshot = make_snapshot([make_node("n1")], [ours, theirs])
    every = decide(ScheduleRequest(snapshot, CONFIG, engine="greedy", all_pending=True))
    assert [g.pod for g in every.plan.gated] == ["default/theirs"] and every.validated
    only_ours = decide(ScheduleRequest(snapshot, CONFIG, engine="greedy"))
    assert only_ours.plan.gated == () and only_ours.validated


def _one_preemption():
    """p (priority 1000) fits only where low runs and evicts it; q fits the other node."""
    nodes = [make_node("n-v", cpu="2"), make_node("n-f", cpu="1")]
    pods = [make_pod("default/low", cpu="2", node="n-v", priority=0),
            make_pod("default/p", cpu="2", priority=1000),
            make_pod("default/q", cpu="1", priority=1000)]
    return make_snapshot(nodes, pods)


def test_greedy_s_plan_refused_for_its_victims_names_is_named_by_the_replay(monkeypatch: pytest.MonkeyPatch) -> None:
    """Greedy's plan keeps the preemptor greedy evicted each victim for (the replay's own, as far
    as any window shows); were the validator to refuse one, the plan is named by the replay, as
    the other plans are, and validated again: the decision is still greedy's, valid, with the
    replay's names."""
    from solver.plugin_api import Victim

    real = api.schedule_greedy

    def misnamed(*args, **kwargs):
        result = real(*args, **kwargs)
        result.victims = [Victim(v.pod, v.node, "default/q") for v in result.victims]
        return result

    monkeypatch.setattr(api, "schedule_greedy", misnamed)
    decision = decide(ScheduleRequest(_one_preemption(), CONFIG, engine="greedy"))
    assert decision.validated and decision.source is PlanSource.GREEDY and decision.validations == 2
    assert [(v.pod, v.node, v.preemptor) for v in decision.plan.preemptions] == [("default/low", "n-v", "default/p")]


def test_greedy_s_preferred_plan_refused_gives_the_solvers_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    """Greedy's plan preferred over the model's (GREEDY_BETTER) but refused by the validator, by
    its own names and by the replay's: the model's plan, validated, is the decision, and greedy's
    is reported as refused (a bug in greedy), where the decision once had no plan to act on."""
    import dataclasses

    module = sys.modules["solver.validate"]
    real_validate, real_solve = module.validate, api.solve_window

    def refuse_greedys(*args, **kwargs):
        if args[1].stats.plan_from == "greedy":
            return ["capacity: node n0 cpu over by 1m"]
        return real_validate(*args, **kwargs)

    def greedy_preferred(*args, **kwargs):
        return dataclasses.replace(real_solve(*args, **kwargs), chose_solver=False, chosen_because="greedy's victims")

    monkeypatch.setattr(module, "validate", refuse_greedys)
    monkeypatch.setattr(api, "solve_window", greedy_preferred)
    decision = decide(ScheduleRequest(_one_preemption(), CONFIG, engine="cpsat"))
    assert decision.validated and decision.source is PlanSource.SOLVER
    assert [r.source for r in decision.rejected] == [PlanSource.GREEDY]
    assert decision.plan.stats.plan_from == "solver"
    assert decision.plan.stats.plan_reason.startswith("greedy's plan failed validation: capacity")
    assert sorted(_placements(decision)) == ["default/p", "default/q"]

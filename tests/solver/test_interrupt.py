"""A stop requested at any moment of a decision ends it, whatever the solver was doing.

CP-SAT's ``stop_search`` does nothing before ``solve()`` has begun, so a Ctrl-C landing between
the registration of a solver and the start of its solve used to be lost: the decision ran to its
time limit (two minutes in a user's report) before saying it was interrupted.
"""

from __future__ import annotations

import threading
import time

import pytest
from ortools.sat.python import cp_model

from models.errors import Interrupted
from solver import interrupt


def hard_model() -> cp_model.CpModel:
    """A model CP-SAT cannot finish in seconds: pigeons into one hole fewer, with symmetry
    breaking and presolve turned off by the solver settings below."""
    model = cp_model.CpModel()
    pigeons, holes = 40, 39
    x = [[model.new_bool_var(f"x{p}_{h}") for h in range(holes)] for p in range(pigeons)]
    for p in range(pigeons):
        model.add_bool_or(x[p])
    for h in range(holes):
        model.add_at_most_one(x[p][h] for p in range(pigeons))
    return model


def slow_solver() -> cp_model.CpSolver:
    solver = interrupt.new_solver()
    solver.parameters.max_time_in_seconds = 60
    solver.parameters.num_workers = 1
    solver.parameters.cp_model_presolve = False
    solver.parameters.symmetry_level = 0
    return solver


@pytest.fixture(autouse=True)
def fresh() -> None:
    interrupt.reset()
    yield
    interrupt.reset()


def test_a_stop_requested_before_the_solve_starts_is_not_lost() -> None:
    solver = slow_solver()
    began = time.monotonic()
    with interrupt.stoppable(solver):
        interrupt.request()  # registered, solve not yet started: stop_search alone is a no-op here
        solver.solve(hard_model())
    assert time.monotonic() - began < 10
    with pytest.raises(Interrupted):
        interrupt.check()


def test_a_solver_registered_after_the_request_never_starts() -> None:
    interrupt.request()
    ran = []
    with pytest.raises(Interrupted):
        with interrupt.stoppable(slow_solver()):
            ran.append(True)
    assert ran == []


def test_a_running_solve_stops_on_request() -> None:
    solver = slow_solver()
    threading.Timer(0.5, interrupt.request).start()
    began = time.monotonic()
    with interrupt.stoppable(solver):
        solver.solve(hard_model())
    assert time.monotonic() - began < 10


# -- the long passes of a decision outside CP-SAT look for the request between their steps ------


def _small_window():
    from tests.builders import make_node, make_pod, make_snapshot

    return make_snapshot([make_node("n1", cpu="4"), make_node("n2", cpu="4")],
                         [make_pod("default/run-1", node="n1", cpu="1"), make_pod("default/web-1", cpu="1")])


@pytest.mark.parametrize("engine", ["greedy", "cpsat"])
def test_ctrl_c_while_the_validator_replays_the_plan_stops_the_decision(monkeypatch, engine: str) -> None:
    """At 5,000 nodes the validator takes two seconds; a Ctrl-C that lands in it ends the decision
    there instead of letting it hand back a plan (which the command would print)."""
    from solver import decide, ScheduleRequest
    from solver.plugins import registry

    ran: list[str] = []

    def pressed(replay) -> None:  # Ctrl-C while the final state's checks run
        ran.append("check")
        interrupt.request()

    monkeypatch.setattr(registry, "FINAL_CHECKS", (pressed, *registry.FINAL_CHECKS))
    with pytest.raises(Interrupted):
        decide(ScheduleRequest(_small_window(), engine=engine))
    assert ran == ["check"]  # the request was looked for before the next check


def test_ctrl_c_while_the_bound_pods_are_assumed_stops_the_context_build(monkeypatch) -> None:
    from models.config import SchedulerConfig
    from solver.context import build_context
    from solver.state import ClusterState

    add_many = ClusterState.add_many

    def pressed(self, placed) -> None:
        add_many(self, placed)
        interrupt.request()

    monkeypatch.setattr(ClusterState, "add_many", pressed)
    with pytest.raises(Interrupted):
        build_context(_small_window(), SchedulerConfig())

"""A long greedy pass says how far it is to a person watching (``--progress``, or a terminal).

At 5,000 nodes greedy's pass over 30,000 pending pods takes 10-20 s, and the progress line used
to stay on "waiting for greedy's plan" all that time, whether greedy ran in the decision's own
thread (``--engine greedy``, the fallback) or beside the model (``GreedyRun``).
"""

from __future__ import annotations

import re
import time

import pytest

from models.config import SchedulerConfig
from solver import greedy, progress
from solver.context import build_context
from solver.cpsat import greedy_run
from solver.filtering import StaticFilters
from tests.builders import make_node, make_pod, make_snapshot

LINE = re.compile(r"greedy scheduleOne: ([\d,]+) of ([\d,]+) pod\(s\) decided")


def _context(pods: int = 600):
    nodes = [make_node(f"n{i}", cpu="16", memory="16Gi") for i in range(40)]
    pending = [make_pod(f"default/p{i}", cpu="100m", memory="128Mi") for i in range(pods)]
    return build_context(make_snapshot(nodes, pending), SchedulerConfig())


def _counts(lines: list[str]) -> list[tuple[int, int]]:
    found = [LINE.fullmatch(line) for line in lines]
    return [(int(m[1].replace(",", "")), int(m[2].replace(",", ""))) for m in found if m]


def test_a_pass_in_the_decision_s_thread_says_how_many_pods_it_decided(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(greedy, "PROGRESS_SECONDS", 0.0)  # every check is due: one line per 256 pods
    ctx = _context()
    lines: list[str] = []
    with progress.listening(lines.append):
        result = greedy.schedule_greedy(ctx, static=StaticFilters(ctx.nodes, ctx.window))
    assert _counts(lines) == [(256, 600), (512, 600)]
    assert len(result.placements) == 600


def test_nobody_listening_costs_no_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(greedy, "PROGRESS_SECONDS", 0.0)
    ctx = _context(300)
    assert not progress.Every(0.0).due()  # nobody listens in this thread
    result = greedy.schedule_greedy(ctx, static=StaticFilters(ctx.nodes, ctx.window))
    assert len(result.placements) == 300


def test_waiting_for_greedy_beside_the_model_says_how_far_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(greedy_run, "PROGRESS_SECONDS", 0.001)
    # Each pod's turn also sleeps a millisecond, out of the interpreter: the pass's thread could
    # otherwise hold the interpreter from its start to its end (3,000 pods in 0.2 s on 40 nodes)
    # and the waiting thread would find it done before it first looked.
    turn = greedy._Run.turn

    def slow_turn(self, pod):
        time.sleep(0.001)
        turn(self, pod)

    monkeypatch.setattr(greedy._Run, "turn", slow_turn)
    ctx = _context(3000)
    lines: list[str] = []
    with progress.listening(lines.append):
        run = greedy_run.GreedyRun(ctx, StaticFilters(ctx.nodes, ctx.window))
        result = run.plan()
    counts = _counts(lines)
    assert counts, lines  # 3,000 pods take far longer than a millisecond
    assert all(0 <= done < total == 3000 for done, total in counts)
    assert [done for done, _ in counts] == sorted(done for done, _ in counts)
    assert len(result.placements) == 3000

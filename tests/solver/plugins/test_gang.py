"""The coscheduling minMember rule (``plugins/gang/permit.py``); the plans it leads to are tested
in tests/solver/test_gang_*.py and test_preemption_gang.py."""

from __future__ import annotations

from tests.builders import make_pod_group


# -- minMember: one test, asked by greedy's Permit, the messages and the validator -------------


def test_reaches_min_member_counts_placed_and_running_less_evicted() -> None:
    from solver.plugins.gang.permit import Gang, reaches_min_member

    assert reaches_min_member(2, 1, 3) and not reaches_min_member(1, 1, 3)
    gang = Gang("default/g", make_pod_group("default/g", 3), running=4, existing=6)
    assert gang.need == 0
    assert gang.reaches(1) and gang.reaches(1, evicted=2)  # 1 + 4 - 2 = 3: spare members cover it
    assert not gang.reaches(1, evicted=3)
    assert not gang.reaches(0, evicted=2)  # with nothing placed, two evictions break it

"""DefaultPreemption's rule of who may preempt whom (``plugins/preemption/victim_room.py``); the
plans it leads to are tested in tests/solver/test_preemption_*.py."""

from __future__ import annotations

import pytest

from tests.builders import make_pod, pod_info


# -- who may preempt whom: one rule, its reasons and its yes/no agree -------------------------


@pytest.mark.parametrize("victim_priority", [0, 5, 10])
@pytest.mark.parametrize("policy", [None, "Never"])
@pytest.mark.parametrize("groups", [(None, None), ("g1", None), (None, "g1"), ("g1", "g1"), ("g1", "g2")])
def test_may_preempt_is_exactly_no_reason_against(victim_priority, policy, groups) -> None:
    from solver.plugins.shared.preemption_rule import may_preempt, why_not

    preemptor = pod_info(make_pod("default/p", cpu="1", priority=5, preemption_policy=policy, group=groups[0]))
    victim = pod_info(make_pod("default/v", cpu="1", priority=victim_priority, node="n1", group=groups[1]))
    reasons = why_not(preemptor, victim)
    assert may_preempt(preemptor, victim) == (not reasons)
    expected = (victim_priority >= 5) + (policy == "Never") + (groups[0] is not None and groups[0] == groups[1])
    assert len(reasons) == expected
    assert all(victim.key in r and preemptor.key in r for r in reasons)


@pytest.mark.parametrize("policy", [None, "Never"])
@pytest.mark.parametrize("group", [None, "g1"])
def test_evictable_is_may_preempt_over_the_pods_asked(policy, group) -> None:
    """The dry run's list of a node's possible victims asks the preemptor's own reasons once; it
    keeps exactly the pods ``may_preempt`` allows, less the excluded keys."""
    from solver.plugins.shared.preemption_rule import evictable, may_preempt

    preemptor = pod_info(make_pod("default/p", cpu="1", priority=5, preemption_policy=policy, group=group))
    pods = [pod_info(make_pod(f"default/v{i}", cpu="1", priority=prio, node="n1", group=g))
            for i, (prio, g) in enumerate((p, g) for p in (0, 4, 5, 9) for g in (None, "g1", "g2"))]
    excluded = {"default/v0"}
    assert evictable(preemptor, pods, excluded) == [
        v for v in pods if v.key not in excluded and may_preempt(preemptor, v)]

"""Re-packing keeps the backlog placeable (issue 23, item 4).

The pending pods that fit today must fit *together* after the plan — the rules between them
(anti-affinity, spread, ports, capacity) included — and a move may not make the backlog preempt
where it needs not today. Each check here is the one a user makes: schedule the pending pods on
the cluster as the plan leaves it (``solver.schedule``, the scheduler's own answer) and compare.
"""

from __future__ import annotations

from pathlib import Path

from adapters.snapshot_io import load_snapshot
from models.config import SchedulerConfig
from solver import schedule, validate
from solver.repack import RepackOptions, plan_repack
from solver.repack.pending import after_plan
from tests.builders import make_node, make_pod, make_snapshot, term
from tests.solver.test_repack import FAST, final_nodes, replay_ok, workload

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "snapshots" / "quickstart.yaml"
HOSTNAME = "kubernetes.io/hostname"


def backlog_after(snapshot, result):
    """The pending pods scheduled together on the cluster after the plan (greedy and CP-SAT alike)."""
    state = after_plan(snapshot, final_nodes(result), set(result.freed_nodes))
    plan = schedule(state, SchedulerConfig(), all_pending=True)
    assert validate(state, plan, SchedulerConfig(), all_pending=True) == []
    return plan


def test_quickstart_never_frees_the_node_an_anti_affine_replica_needs() -> None:
    """The web Deployment's replicas ask for different hosts; three are pending. Freeing
    worker-b-2 leaves one of them nowhere, which each pod checked alone did not see."""
    snapshot = load_snapshot(QUICKSTART)
    today = schedule(snapshot, SchedulerConfig(), all_pending=True)
    result = plan_repack(snapshot, options=FAST)
    after = backlog_after(snapshot, result)
    assert len(after.assignments) >= len(today.assignments)
    assert "worker-b-2" not in result.freed_nodes
    assert any("would leave 1 pending pod(s)" in n and "anti-affinity" in n for n in result.notes), result.notes
    replay_ok(snapshot, result)


def test_quickstart_allow_blocking_names_the_replica_and_why() -> None:
    snapshot = load_snapshot(QUICKSTART)
    result = plan_repack(snapshot, options=RepackOptions(time_limit=10, allow_blocking_pending=True))
    assert result.freed_nodes == ["worker-b-2"]
    assert len(result.blocked_pending) == 1 and result.blocked_pending[0].startswith("shop/web-")
    reason = result.blocked_pending_reasons[result.blocked_pending[0]]
    assert "didn't match pod anti-affinity rules" in reason


def spread_out(nodes: int = 14, pending: int = 16):
    """``nodes`` 4-CPU nodes, each running one 1.5-CPU pod of priority 0; ``pending`` 1-CPU pods of
    priority 1000 wait (kube-scheduler's). Today every pending pod fits without evicting anyone.
    Packing the running pods two to a node frees half the nodes and leaves 1 CPU on each node
    that stays: each pending pod still fits *alone*, but not all of them together."""
    running = [workload(f"default/batch-{i}", f"n{i:02d}", cpu="1500m", memory="1Gi", priority=0)
               for i in range(nodes)]
    waiting = [make_pod(f"default/urgent-{i}", cpu="1", memory="1Gi", priority=1000, scheduler="default-scheduler")
               for i in range(pending)]
    return make_snapshot([make_node(f"n{i:02d}", cpu="4", memory="16Gi") for i in range(nodes)], [*running, *waiting])


def test_a_plan_never_makes_the_backlog_preempt() -> None:
    snapshot = spread_out()
    today = schedule(snapshot, SchedulerConfig(), all_pending=True)
    assert len(today.assignments) == 16 and today.preemptions == ()
    result = plan_repack(snapshot, options=FAST)
    after = backlog_after(snapshot, result)
    assert len(after.assignments) == 16
    assert after.preemptions == ()
    # 21 CPU running and 16 pending need 10 of the 4-CPU nodes (two 1.5-CPU pods and a 1-CPU
    # one, or four 1-CPU ones, per node): the plan frees the 4 others, no fewer.
    assert len(result.freed_nodes) == 4
    assert any("keeps the place of every pending pod" in n for n in result.notes), result.notes
    assert result.blocked_pending == []
    replay_ok(snapshot, result)


def test_the_best_plan_with_allow_blocking_says_which_pods_would_preempt() -> None:
    snapshot = spread_out()
    result = plan_repack(snapshot, options=RepackOptions(time_limit=10, allow_blocking_pending=True))
    after = backlog_after(snapshot, result)
    assert after.preemptions or len(after.assignments) < 16  # the best plan does strand the backlog ...
    assert result.blocked_pending  # ... and says so
    assert all(key.startswith("default/urgent-") for key in result.blocked_pending)
    assert any("preempt" in why or "not after the plan" in why for why in result.blocked_pending_reasons.values())


def test_pending_pods_with_host_ports_keep_their_hosts() -> None:
    """Two pending pods want host port 9100; today three nodes have it free. A plan that frees
    two of them leaves one port for two pods."""
    running = [workload(f"default/app-{i}", f"n{i}", cpu="500m") for i in range(3)]
    waiting = [make_pod(f"monitoring/exporter-{i}", cpu="100m", host_ports=[9100], scheduler="default-scheduler")
               for i in range(2)]
    snapshot = make_snapshot([make_node(f"n{i}", cpu="4", memory="16Gi") for i in range(3)], [*running, *waiting])
    result = plan_repack(snapshot, options=FAST)
    after = backlog_after(snapshot, result)
    assert len(after.assignments) == 2
    assert len(result.freed_nodes) == 1
    replay_ok(snapshot, result)


def test_a_backlog_that_fits_nowhere_today_does_not_hold_the_plan_back() -> None:
    running = [workload(f"default/web-{i}", f"n{i}", cpu="1") for i in range(3)]
    huge = make_pod("default/huge", cpu="64", scheduler="default-scheduler",
                    pod_anti_affinity=[term({"app": "x"}, HOSTNAME)])
    snapshot = make_snapshot([make_node(f"n{i}", cpu="4", memory="16Gi") for i in range(3)], [*running, huge])
    result = plan_repack(snapshot, options=FAST)
    assert len(result.freed_nodes) == 2 and result.blocked_pending == []
    replay_ok(snapshot, result)


def test_a_backlog_that_preempts_today_may_not_preempt_more() -> None:
    """n0 is full of priority-0 pods, n1 and n2 half full; a priority-1000 pod of 3 CPU waits and
    today evicts one 2-CPU pod. Moving web-2 next to web-1 frees n2, after which it would have to
    evict both: the plan may not make it."""
    running = [workload(f"default/low-{i}", "n0", cpu="1", priority=0) for i in range(4)]
    running += [workload(f"default/web-{i}", f"n{i}", cpu="2", priority=0) for i in (1, 2)]
    urgent = make_pod("default/urgent", cpu="3", priority=1000, scheduler="default-scheduler")
    snapshot = make_snapshot([make_node(f"n{i}", cpu="4", memory="16Gi") for i in range(3)], [*running, urgent])
    today = schedule(snapshot, SchedulerConfig(), all_pending=True)
    result = plan_repack(snapshot, options=FAST)
    after = backlog_after(snapshot, result)
    assert len(after.assignments) == len(today.assignments) == 1
    assert len(after.preemptions) <= len(today.preemptions)
    replay_ok(snapshot, result)

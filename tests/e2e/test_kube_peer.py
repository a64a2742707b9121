"""The peer bench on contended snapshots (``tests/e2e/kube_peer.py``) and the peer table
(``tests/e2e/peer_table.py``): what they count, on small cases, then on a real server.

    pytest tests/e2e/test_kube_peer.py                          # e2e: 3 scenarios of 10 nodes
    CPSAT_PEER_SCENARIOS=100 pytest -m long tests/e2e/test_kube_peer.py
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import kube_peer, peer_table
from tests.e2e.controlplane import ControlPlane
from tests.e2e.kube_peer import Outcome, compare, prepare


def outcome(name: str, placed: dict[int, int], **more: Any) -> Outcome:
    return Outcome(name, placed_tiers=placed, **more)


@pytest.mark.parametrize("case, ours, theirs, want", [
    ("equal", {100: 3, 10: 2}, {100: 3, 10: 2}, 0),
    ("one more at the top outweighs any number below", {100: 4, 10: 0}, {100: 3, 10: 9}, 1),
    ("fewer at the top", {100: 2}, {100: 3, 10: 0}, -1),
    ("a tier only one of them placed", {100: 3, 10: 1}, {100: 3}, 1),
])
def test_plans_compare_by_tier_from_the_highest(case: str, ours: dict[int, int], theirs: dict[int, int], want: int) -> None:
    assert compare(outcome("a", ours), outcome("b", theirs)) == want, case


def test_a_proof_needs_optimal_and_the_whole_model() -> None:
    kube = outcome("kube-scheduler", {100: 3})
    assert peer_table.proves(outcome("schedule 10s", {100: 3}, solver_status="OPTIMAL"), kube)
    assert not peer_table.proves(outcome("schedule 10s", {100: 3}, solver_status="FEASIBLE"), kube)
    assert not peer_table.proves(outcome("schedule 10s", {100: 3}, solver_status="OPTIMAL", degraded="node classes"), kube)
    assert not peer_table.proves(outcome("schedule 10s", {100: 4}, solver_status="OPTIMAL"), kube)


def test_a_snapshot_is_made_loadable_and_counted() -> None:
    items = kube_peer.contended_window(10, 5)
    assert items == kube_peer.contended_window(10, 5)                 # seeded
    gang = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": "prod", "uid": "x"}, "spec": {"minMember": 2}}
    member = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "t0", "namespace": "prod", "uid": "y",
                                                               "labels": {kube_peer.GROUP_LABEL: "train"}},
              "spec": {"priority": 1000, "containers": [{"name": "c"}]}, "status": {"phase": "Pending"}}
    scenario = prepare("s", [*items, gang, member, {"kind": "Deployment", "metadata": {"name": "d"}}])
    assert not [o for o in scenario.objects if o["kind"] == "Deployment"]
    group = next(o for o in scenario.objects if o["kind"] == "PodGroup")
    assert group["apiVersion"] == "scheduling.k8s.io/v1alpha2"
    assert group["spec"] == {"schedulingPolicy": {"gang": {"minCount": 2}}}
    pod = next(o for o in scenario.objects if o["kind"] == "Pod" and o["metadata"]["name"] == "t0")
    assert pod["spec"]["schedulingGroup"] == {"podGroupName": "train"} and "uid" not in pod["metadata"]
    for p in scenario.pending():     # only the run's nodes are candidates, for kube-scheduler's profile
        assert p["spec"]["nodeSelector"][kube_peer.RUN_LABEL] == scenario.run
        assert p["spec"]["schedulerName"] == kube_peer.PROFILE
    # a gang placed in part is broken, whole at minCount; PDB budgets are read from the status
    counted = scenario.summarize(Outcome("x", placed={"prod/t0": "n"}))
    assert (counted.gangs_whole, counted.gangs_broken) == (0, 1)
    pdbs = [o for o in scenario.objects if o["kind"] == "PodDisruptionBudget"]
    assert pdbs, "the generated window has budgets"
    app = pdbs[0]["spec"]["selector"]["matchLabels"]["app"]
    victims = [kube_peer.key(p) for p in scenario.running() if p["metadata"]["labels"].get("app") == app]
    allowed = pdbs[0]["status"]["disruptionsAllowed"]
    assert scenario.summarize(Outcome("x", evicted=victims)).pdb_violations >= len(victims) - allowed > 0


def test_each_pods_replica_set_is_loaded_with_it() -> None:
    """kube-scheduler spreads a pod by default only when it finds the ReplicaSet its owner
    reference names; the project assumes it exists (issue 38)."""
    def pod(name: str, owner: str, **labels: str) -> dict[str, Any]:
        ref = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner, "uid": "u", "controller": True}
        return {"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [{"name": "c"}]},
                "metadata": {"name": name, "namespace": "prod", "labels": labels, "ownerReferences": [ref]}}
    kept = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web-2", "namespace": "prod", "uid": "v"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}}, "status": {"replicas": 1}}
    scenario = prepare("s", [pod("a", "web-1", app="web", hash="1"), pod("b", "web-1", app="web", hash="1", extra="x"),
                             pod("c", "web-2", app="web"), kept])
    sets = {o["metadata"]["name"]: o for o in scenario.objects if o["kind"] == "ReplicaSet"}
    assert sorted(sets) == ["web-1", "web-2"]
    made = sets["web-1"]
    want = {"app": "web", "hash": "1", kube_peer.RUN_LABEL: scenario.run}     # the labels both pods share
    assert made["spec"]["selector"] == {"matchLabels": want} and made["spec"]["template"]["metadata"]["labels"] == want
    assert made["spec"]["replicas"] == 0 and made["metadata"]["labels"] == {kube_peer.RUN_LABEL: scenario.run}
    assert "status" not in sets["web-2"] and "uid" not in sets["web-2"]["metadata"]      # the snapshot's own, kept


def test_the_attempt_order_is_each_pods_first_attempt() -> None:
    log = "\n".join([
        'I1202 14:40:19.786204 4846 schedule_one.go:117] "Attempting to schedule pod" pod="prod/b"',
        'I1202 14:40:19.786499 4846 dynamicresources.go:609] "pod resource claims" pod="prod/b" resourceclaims=[]',
        'I1202 14:40:19.787155 4846 schedule_one.go:117] "Attempting to schedule pod" pod="prod/a"',
        'I1202 14:40:19.806424 4846 schedule_one.go:117] "Attempting to schedule pod" pod="prod/b"',   # retried
        'I1202 14:40:19.824791 4846 schedule_one.go:117] "Attempting to schedule pod" pod="batch/c"',
    ])
    assert kube_peer.attempt_order(log) == ["prod/b", "prod/a", "batch/c"]
    assert kube_peer.attempt_order("") == []


def test_the_final_scores_are_a_pods_first_scoring() -> None:
    from tests.e2e.greedy_vs_kube import final_scores

    line = 'I1202 schedule_one.go:1012] "Calculated node\'s final score for pod" pod="{}" node="{}" score={}'
    log = "\n".join([line.format("prod/a", "n1", 586), line.format("prod/b", "n1", 9), line.format("prod/a", "n2", 586),
                     line.format("prod/a", "n1", 1)])         # its next attempt: not read
    assert final_scores(log, "prod/a") == {"n1": 586, "n2": 586}
    assert final_scores(log, "prod/c") == {}


def test_a_snapshot_that_is_not_json_is_one_line_and_status_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(SystemExit) as exited:
        kube_peer.main([str(bad)])
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad.json" in err[0]


def test_a_snapshot_the_server_refuses_is_skipped_and_named(control_plane: ControlPlane, tmp_path: Path) -> None:
    items = kube_peer.contended_window(10, 1)
    broken = next(o for o in items if o["kind"] == "Pod" and o["spec"].get("nodeName") and o["metadata"]["namespace"] == "prod")
    broken["metadata"]["name"] = "Not_A_Valid_Name"
    loader = kube_peer.Loader(control_plane)
    try:
        row, _ = peer_table.run_one(control_plane, loader, "refused", items, [1.0], tmp_path, 60.0)
    finally:
        loader.close()
    assert row.kube is None and row.refused.startswith("Pod prod/Not_A_Valid_Name: "), row.refused
    summary = peer_table.summarize([row], [1.0])
    assert summary["skipped_refused"] == [{"scenario": "refused", "refused": row.refused}]


def _table(control_plane: ControlPlane, out: Path, count: int, sizes: tuple[int, ...]) -> dict[str, Any]:
    summary = peer_table.run(control_plane, count, seed=0, sizes=sizes, out=out, command="pytest")
    data = json.loads((out / "peer-table.json").read_text())
    assert len(data["rows"]) == count and "| kube-scheduler leaves pods pending |" in (out / "peer-table.md").read_text()
    assert summary["kubelet_refusals"] == 0, [o["kubelet"] for r in data["rows"] for o in [r["kube"], *r["plans"]] if o]
    assert not summary["skipped_refused"], summary["skipped_refused"]
    assert not summary["kube_did_not_settle"], [r["kube"]["unsettled"] for r in data["rows"] if r["kube"]]
    assert summary["compared"] == count
    return summary


@pytest.fixture(scope="module")
def small_table(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    out = tmp_path_factory.mktemp("peer-table")
    return _table(control_plane, out, 3, (10,)), out


def test_the_peer_table_on_three_small_scenarios(small_table: tuple[dict[str, Any], Path]) -> None:
    summary, out = small_table
    assert summary["compared"] == 3 and (out / "peer-table.md").exists()


# The requirement: the run of record (100 scenarios, docs/kube-peer.md) has the project worse
# in none at 10 s, and no 10-node scenario has been worse at 10 s in its last three full runs.
def test_the_project_is_never_worse_than_kube_scheduler(small_table: tuple[dict[str, Any], Path]) -> None:
    summary, out = small_table
    worse = summary["by_limit"]["10"]["worse"]
    assert not worse, f"the project placed fewer high-priority pods than kube-scheduler in {worse} (snapshots in {out})"


@pytest.mark.long
def test_the_peer_table_long(control_plane: ControlPlane, tmp_path: Path) -> None:
    count = int(os.environ.get("CPSAT_PEER_SCENARIOS", "100"))
    out = Path(os.environ.get("CPSAT_PEER_OUT") or tmp_path)
    summary = _table(control_plane, out, count, peer_table.SIZES)
    assert not summary["by_limit"]["10"]["worse"], summary["by_limit"]["10"]["worse"]


def test_the_table_tells_a_shortfall_from_what_is_counted_apart() -> None:
    def row(name: str, kube_placed: int, ours: int, *, misdirected: bool = False, rule: str = "",
            pending: int = 9, status: str = "FEASIBLE") -> peer_table.Row:
        kube = Outcome("kube-scheduler", placed_tiers={100: kube_placed}, placed={f"p{i}": "n" for i in range(kube_placed)})
        kube.misdirected = [{"victim": "v"}] if misdirected else []
        kube.rule_breaks = [rule] if rule else ["preemption: who evicts whom, as kube's events name it"]
        plans = [outcome(f"schedule {t:g}s", {100: ours}, solver_status=status) for t in (1.0, 10.0)]
        return peer_table.Row(name, 3, 5, pending, kube=kube, plans=plans)

    rows = [row("more", 5, 6), row("equal-proven", 5, 5, status="OPTIMAL"), row("equal", 5, 5),
            row("misdirected", 6, 5, misdirected=True), row("rule", 6, 5, rule="spread: zone a exceeds maxSkew 1"),
            row("worse", 6, 5), row("all-placed", 9, 9)]
    summary = peer_table.summarize(rows, [1.0, 10.0])
    assert summary["compared"] == 7 and summary["kube_left_pending"] == 6
    ten = summary["by_limit"]["10"]
    assert (ten["more"], ten["equal"], ten["proves_kube_optimal"]) == (1, 2, 1)
    assert ten["worse"] == ["worse"]
    assert ten["fewer_with_misdirected"] == ["misdirected"]
    assert ten["fewer_where_kube_breaks_a_rule"] == ["rule"]
    text = peer_table.markdown(summary, rows, [1.0, 10.0], "cmd")
    assert "| ... of those, the project places more high-priority pods at 10 s | 1/6 (17%) | > 73% |" in text


def test_kube_scheduler_takes_the_pods_in_the_projects_queue_order(control_plane: ControlPlane, tmp_path: Path) -> None:
    """Issue 38: the pending pods exist before kube-scheduler starts; its queue must then break
    priority ties as the project's does (creation, then name), or greedy is compared with a
    scheduler that took the pods in another order (with the default watch-list informer,
    a new random one each run)."""
    scenario = prepare("order", kube_peer.contended_window(6, 11))
    loader = kube_peer.Loader(control_plane)
    try:
        loader.load(scenario)
        loader.pending(scenario)
        ours = kube_peer.project_queue_order(scenario, loader.read_back(scenario))
        kube_peer.kube_decides(control_plane, loader, scenario, tmp_path, limit=120.0, loaded=True, verbosity=3)
    finally:
        loader.clear(scenario)
        loader.close()
    tried = kube_peer.attempt_order((tmp_path / f"kube-scheduler-{scenario.run}.log").read_text())
    assert len(tried) == len(ours) == len(scenario.pending()) > 8
    assert tried == ours


def test_the_bench_runs_each_scheduler_on_one_snapshot(control_plane: ControlPlane, tmp_path: Path) -> None:
    scenario = prepare("bench", kube_peer.contended_window(6, 11))
    report = kube_peer.bench(control_plane, scenario, tmp_path, limits=(1.0,), live=True, limit=180.0)
    assert not report.refused, report.refused
    assert [o.scheduler for o in report.outcomes] == ["kube-scheduler", "schedule 1s", "run"]
    pending = {kube_peer.key(p) for p in scenario.pending()}
    for o in report.outcomes:
        assert o.settled, (o.scheduler, o.unsettled)
        assert o.kubelet == [], (o.scheduler, o.kubelet)
        assert set(o.placed) <= pending and sum(o.placed_tiers.values()) == len(o.placed) > 0, o.scheduler
    live = report.outcomes[-1]
    assert live.cpu_seconds and live.cpu_seconds > 0
    text = kube_peer.render(report)
    assert text.splitlines()[0] == f"bench: 6 nodes, {report.running} running pods, {report.pending} pending"
    assert all(f"\n{name}" in text for name in ("kube-scheduler ", "schedule 1s ", "run "))

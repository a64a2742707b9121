"""The ``dra`` bench workload (issue 27, point 7), run the way a user runs it:
``cpsat-scheduler bench -w dra --quick``, and its dump through ``schedule`` and ``validate``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from adapters.bench.dra_workload import DOMAIN_LABEL, dra, dra_figures
from adapters.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_bench_dra_quick_plans_are_valid_and_cpsat_places_at_least_greedy(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "bench", "-w", "dra", "--quick", "-o", "json")
    assert code == 0, err
    report: dict[str, Any] = json.loads(out)
    (workload,) = report["workloads"]
    assert workload["name"] == "dra" and workload["nodes"] == 16
    cpsat, greedy = workload["results"]["cpsat"], workload["results"]["greedy"]
    # Every plan passed the independent validator (the bench runs solver.validate on each).
    assert cpsat["valid"] and greedy["valid"] and report["ok"]
    # Pods with claims are placed at all (a bench cluster without the DRA objects placed none).
    assert greedy["placed"] > 0
    assert cpsat["placed"] >= greedy["placed"]
    assert cpsat["gangs"]["placed"] >= greedy["gangs"]["placed"] > 0
    for result in (cpsat, greedy):
        d = result["dra"]
        assert d["devices"] == 12 * 8 + 4 * 10  # 12 plain nodes of 8 GPUs, 4 partitioned (6 GPUs, 4 partitions)
        assert d["used"] + d["free"] == d["devices"] and 0 <= d["stranded"] <= d["free"]
        assert d["waiting_pods"] == workload["pods"] - result["placed"]
    assert "DEVICES (DRA" in run(capsys, "bench", "-w", "dra", "--quick", "--time-limit", "1")[1]


def test_dra_dump_schedules_and_validates_through_the_cli(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The generated cluster is a dump a user's reader accepts: ``schedule`` allocates devices
    to the claims of the placed pods, and ``validate`` accepts the plan."""
    code, _, err = run(capsys, "bench", "-w", "dra", "--quick", "--time-limit", "1", "--dump", str(tmp_path))
    assert code == 0, err
    (dump,) = tmp_path.glob("dra-quick-*.json")
    code, out, err = run(capsys, "schedule", "--time-limit", "2", "-o", "json", str(dump))
    assert code == 0, err
    plan = json.loads(out)
    assert plan["assignments"] and len(plan["allocations"]) == len(plan["assignments"])
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(out)
    code, out, err = run(capsys, "validate", str(dump), str(plan_file))
    assert code == 0, out + err


def test_gang_members_share_one_nvlink_domain_and_stranded_counts_free_devices_no_waiting_claim_fits() -> None:
    workload = dra("quick", 0)
    snapshot = workload.snapshot()
    domains = {n.metadata.name: n.metadata.labels[DOMAIN_LABEL] for n in snapshot.nodes}
    assert len(set(domains.values())) == 4
    # Nothing placed: every free device has a waiting claim that fits its node, so none is stranded.
    pending = [p for p in snapshot.pods if not p.spec.node_name]
    figures = dra_figures(snapshot, pending)
    assert figures is not None and figures["free"] == figures["devices"] and figures["stranded"] == 0
    # Only 8-GPU claims waiting: a partitioned node (6 GPUs) strands its devices, a plain one does not.
    eight = [p for p in pending if p.spec.resource_claims[0].resource_claim_template_name == "gpu-8"]
    figures = dra_figures(snapshot, eight)
    assert figures is not None and figures["stranded"] == 4 * 10 and figures["stranded_nodes"] == 4


def test_windows_carry_the_devices_earlier_windows_allocated() -> None:
    """Cut into windows, each later window is decided on a cluster whose claims hold what the
    earlier plans allocated: no device is given twice, every bound pod's claim is allocated."""
    from collections import Counter

    from adapters.bench.runner import cut_windows, queue_order, run_engine
    from models import SchedulerConfig

    snapshot = dra("quick", 0).snapshot()
    config = SchedulerConfig().with_overrides(time_limit_seconds=1.0)
    windows = cut_windows(queue_order(snapshot.pending_pods(config.scheduler_name)), 20)
    assert len(windows) == 3
    run = run_engine(snapshot, windows, "greedy", config)
    assert not run.invalid and len(run.placed) > 20
    claims = {c.key: c for c in run.final.resource_claims}
    held = Counter((r.pool, r.device) for c in claims.values() if c.status.allocation is not None
                   for r in c.status.allocation.devices.results)
    assert held and max(held.values()) == 1
    for pod in run.final.bound_pods():
        for pc in run.final.pod_claims(pod):
            assert pc.key in claims and claims[pc.key].status.allocation is not None

"""The live benchmark still runs end to end (a tiny cluster, a second of arrivals, one engine)."""

from __future__ import annotations

from adapters.live import bench


def test_tiny_benchmark_binds_every_pod_and_reports_latency() -> None:
    (result,) = bench.run(nodes=20, rate=20.0, duration=1.0, burst=30, engine="greedy", window_wait=20)
    assert result.engine == "greedy"
    assert (result.sustained.pods, result.sustained.bound) == (20, 20)
    assert result.sustained.p50 is not None and 0 < result.sustained.p50 <= result.sustained.p99 <= result.sustained.max
    assert result.burst is not None and result.burst.bound == 30 and result.burst.throughput
    assert result.windows >= 2 and result.solver_status == {"GREEDY": float(result.windows)}

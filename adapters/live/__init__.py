"""The live secondary scheduler: `cpsat-scheduler run`.

It runs beside kube-scheduler and places the pods whose `spec.schedulerName` names it, the
way kube-scheduler places its own, but a window of pods at a time through the CP-SAT
solver. One module per concern:

- `api_client.py` — every API call, through the official client (the only module of the
  scheduler that uses it), and `errors.py` — the adapter's own error classes;
- `informer.py` + `cache.py` + `convert.py` — list+watch into a cache of parsed models,
  with the scheduler's assumptions on top;
- `queue.py` + `handlers.py` — active, backoff and unschedulable pods, and which cluster
  events move which;
- `scheduler.py` — the loop: window → snapshot → decide → check → assume → bind/evict;
- `binder.py` — binds, evictions and gangs; `events.py` — events and pod conditions;
- `leader.py` — Lease-based leader election; `serving.py` + `metrics.py` — health and
  Prometheus metrics;
- `simulate.py` — the same loop against the in-memory API server (`run --simulate`);
  `window_cost.py` — what one window costs the loop. The live benchmark (latency, throughput,
  CPU) is beside the others, `adapters/bench/live.py`; `bench.py` here only forwards the
  command `python -m adapters.live.bench` to it, kept for scripts.

Nothing here is imported by `solver/` or `models/`.

The names below load on first use, so that the command line can read the defaults it shows
(`defaults.py`) without loading the client and the solver.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from models.lazy import lazy_names

if TYPE_CHECKING:
    from .options import LiveOptions
    from .scheduler import CycleResult, Scheduler

_WHERE = {"LiveOptions": "options", "CycleResult": "scheduler", "Scheduler": "scheduler"}

__all__ = ["CycleResult", "LiveOptions", "Scheduler"]


__getattr__ = lazy_names(__name__, _WHERE)

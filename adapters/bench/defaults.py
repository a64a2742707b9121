"""What ``cpsat-scheduler bench --help`` shows, in a module that imports nothing heavy: the
workload names and the runner's defaults. ``workloads.py`` checks its tables against the names,
``runner.py`` re-exports the defaults."""

from __future__ import annotations

from typing import Optional

# The default suite, in its order (``workloads.WORKLOADS``).
WORKLOAD_NAMES = (
    "basic", "node-affinity", "anti-affinity", "spread", "preemption", "gang", "topology-gang",
    "fragmentation", "gpu-pools", "mixed",
)
# The solver's scale targets, fixed sizes whatever the scale (``workloads.SCALE_TARGETS``).
SCALE_TARGET_NAMES = ("scale-3k", "scale-10k")
# Real-shaped clusters sized by --scale, run only when named (``workloads.REAL_SHAPED``).
REAL_SHAPED_NAMES = ("realistic", "dra", "contended")

# No cut by default: the whole queue is one decision, up to ``limits.maxWindowPods``. The model
# grows with the window's variety (classes x candidate nodes), not its pod count, so a pod-count
# cut buys no model size; what it costs is foresight. Cut a 14,625-pod gang queue into two
# windows and cpsat fills window one with the early 3.5-CPU training gangs (more pods than greedy
# places there, as its per-window guarantee says), leaving window two's small gangs 3 pods of
# room: 7,310 placed in all against greedy's 8,829. Decided as one window it places 12,137.
# ``--window-size N`` still cuts the queue, to imitate a live scheduler's windows.
DEFAULT_WINDOW_SIZE: Optional[int] = None
# CP-SAT time limit per window, by scale: quick keeps the whole suite near a minute on two cores.
DEFAULT_TIME_LIMITS = {"quick": 5.0, "medium": 10.0, "large": 10.0}

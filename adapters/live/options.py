"""Settings of one live scheduler, with the defaults and the reasons for them.

Scheduling behaviour (scheduler name, profile, scoring, solver time limit, preemption) stays
in `models.SchedulerConfig`, shared with `cpsat-scheduler schedule`; this holds what only a
running scheduler has: how windows are formed, how binds, leases and watches behave.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from .defaults import (  # the defaults the command line shows, kept where they load cheaply
    DEFAULT_WINDOW_SIZE as DEFAULT_WINDOW_SIZE,
    DEFAULT_WINDOW_WAIT_MS as DEFAULT_WINDOW_WAIT_MS,
    DEFAULT_BATCH_WAIT_MS as DEFAULT_BATCH_WAIT_MS,
    DEFAULT_QUICK_WINDOW as DEFAULT_QUICK_WINDOW,
    DEFAULT_BIND_CONCURRENCY as DEFAULT_BIND_CONCURRENCY,
    DEFAULT_PREEMPTION_TIMEOUT as DEFAULT_PREEMPTION_TIMEOUT,
    DEFAULT_UNCERTAIN_BIND_TTL as DEFAULT_UNCERTAIN_BIND_TTL,
    HOUSEKEEPING_SECONDS as HOUSEKEEPING_SECONDS,
    STALL_GRACE_SECONDS as STALL_GRACE_SECONDS,
    DEFAULT_SWITCH_INTERVAL as DEFAULT_SWITCH_INTERVAL,
)
from .informer import RECONNECT_BACKOFFS, WATCH_TIMEOUT_SECONDS
from .leader import LeaseSettings
from .queue import QueueSettings
from .retry import DEFAULT_BACKOFFS


@dataclass(frozen=True)
class LiveOptions:
    engine: str = "cpsat"
    window_size: int = DEFAULT_WINDOW_SIZE
    window_wait: float = DEFAULT_WINDOW_WAIT_MS / 1000.0  # seconds
    adaptive_window: bool = True  # wait only when a pod needs a joint decision (queue.needs_joint_decision)
    batch_wait: float = DEFAULT_BATCH_WAIT_MS / 1000.0  # seconds; see DEFAULT_BATCH_WAIT_MS
    quick_window: int = DEFAULT_QUICK_WINDOW  # pods; see DEFAULT_QUICK_WINDOW
    greedy_whole: bool = True  # see DEFAULT_QUICK_WINDOW; needs quick_window > 0
    dry_run: bool = False
    leader_elect: bool = True
    lease: LeaseSettings = field(default_factory=LeaseSettings)
    metrics_addr: Optional[tuple[str, int]] = None
    bind_concurrency: int = DEFAULT_BIND_CONCURRENCY
    preemption_timeout: float = DEFAULT_PREEMPTION_TIMEOUT
    uncertain_bind_ttl: float = DEFAULT_UNCERTAIN_BIND_TTL
    queue: QueueSettings = field(default_factory=QueueSettings)
    retry_backoffs: tuple[float, ...] = DEFAULT_BACKOFFS
    watch_backoffs: tuple[float, ...] = RECONNECT_BACKOFFS
    watch_timeout: int = WATCH_TIMEOUT_SECONDS
    housekeeping: float = HOUSEKEEPING_SECONDS
    stall_timeout: Optional[float] = None  # None: 3 x the solver's time limit + STALL_GRACE_SECONDS; 0: never
    # How long a thread may hold the interpreter while another waits for it (seconds;
    # `sys.setswitchinterval`, Python's default 5 ms; None: left as it is). A pod passes through
    # four threads (watch, loop, bind, events) and each hand-over can wait a whole interval
    # behind a thread that is parsing; a shorter one cuts that wait (see DEFAULT_SWITCH_INTERVAL).
    switch_interval: Optional[float] = DEFAULT_SWITCH_INTERVAL
    # Keep the cyclic collector off what lives for good (see `Scheduler.start`): the interpreter's
    # modules at start, the cluster as first listed, and collect the young less often.
    quiet_collector: bool = True

    def __post_init__(self) -> None:
        if self.window_size < 1:
            raise ValueError("window size must be at least 1")
        if self.quick_window < 0:
            raise ValueError("quick window must be >= 0")
        if self.window_wait < 0:
            raise ValueError("window wait must be >= 0")
        if self.batch_wait < 0:
            raise ValueError("batch wait must be >= 0")
        if self.stall_timeout is not None and self.stall_timeout < 0:
            raise ValueError("stall timeout must be >= 0")
        if self.switch_interval is not None and self.switch_interval <= 0:
            raise ValueError("switch interval must be > 0")
        if self.bind_concurrency < 1:
            raise ValueError("bind concurrency must be at least 1")

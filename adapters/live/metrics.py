"""Prometheus metrics of the live scheduler, on a registry of its own.

Named after kube-scheduler's where one exists (`schedule_attempts_total`,
`pending_pods`, `preemption_victims`, ...) with a `cpsat_scheduler_` prefix, plus what only
a window solver has: solver status and latency, fallbacks, window sizes. Each scheduler owns
its registry, so two instances in one process (the leader-election tests) do not collide,
and `/metrics` serves exactly this registry.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

PREFIX = "cpsat_scheduler"
# Latency buckets (seconds) from 10 ms to 2 minutes: a window's solve is bounded by its time
# limit, and end-to-end latency adds queueing, backoff and preemption waits.
LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0)
WINDOW_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)


class Metrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry(auto_describe=True)
        self.attempts = Counter(f"{PREFIX}_schedule_attempts_total",
                                "Scheduling attempts by result (scheduled, unschedulable, error).",
                                ["result"], registry=r)
        self.e2e_latency = Histogram(f"{PREFIX}_e2e_scheduling_duration_seconds",
                                     "From a pod entering the queue to its successful bind.",
                                     buckets=LATENCY_BUCKETS, registry=r)
        self.solver_latency = Histogram(f"{PREFIX}_solver_duration_seconds",
                                        "Wall time of one window's decision, by engine.", ["engine"],
                                        buckets=LATENCY_BUCKETS, registry=r)
        self.solver_status = Counter(f"{PREFIX}_solver_status_total",
                                     "Windows by solver status (OPTIMAL, FEASIBLE, FALLBACK, GREEDY, ...).",
                                     ["status"], registry=r)
        self.fallbacks = Counter(f"{PREFIX}_solver_fallbacks_total",
                                 "Windows decided by the greedy fallback instead of CP-SAT.", registry=r)
        self.invalid_plans = Counter(f"{PREFIX}_invalid_plans_total",
                                     "Plans the validator rejected; none of them was acted on.", registry=r)
        self.pending = Gauge(f"{PREFIX}_pending_pods", "Pods waiting, by queue.", ["queue"], registry=r)
        self.phase_latency = Histogram(f"{PREFIX}_cycle_phase_duration_seconds",
                                       "Wall time of each phase of a scheduling cycle (snapshot, decide, check, "
                                       "assume).", ["phase"], buckets=LATENCY_BUCKETS, registry=r)
        self.window_size = Histogram(f"{PREFIX}_window_size", "Pods per window.", buckets=WINDOW_BUCKETS,
                                     registry=r)
        self.binds = Counter(f"{PREFIX}_binds_total", "Bind calls by result.", ["result"], registry=r)
        self.preemption_attempts = Counter(f"{PREFIX}_preemption_attempts_total",
                                           "Preemptors that started evicting victims.", registry=r)
        self.preemption_victims = Counter(f"{PREFIX}_preemption_victims_total", "Pods evicted as victims.",
                                          registry=r)
        self.evictions = Counter(f"{PREFIX}_evictions_total", "Eviction calls by result.", ["result"],
                                 registry=r)
        self.gang_partial = Counter(f"{PREFIX}_gang_partial_binds_total",
                                    "Gangs of which some members bound and others failed to.", registry=r)
        self.assumed = Gauge(f"{PREFIX}_assumed_pods", "Pods assumed on a node, not yet seen bound.", registry=r)
        self.leader = Gauge(f"{PREFIX}_is_leader", "1 while this instance holds the lease.", registry=r)
        self.watch_restarts = Counter(f"{PREFIX}_watch_restarts_total", "Watches restarted, by reason.",
                                      ["resource", "reason"], registry=r)
        self.events_dropped = Counter(f"{PREFIX}_events_dropped_total",
                                      "Events and status updates not sent (queue full or API error).", registry=r)
        self.explanations = Counter(f"{PREFIX}_explanations_total",
                                    "live.explain: left-out pods and gangs explained, by result (answered, "
                                    "stopped: out of time or no longer waiting, failed).", ["result"], registry=r)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

"""The live scheduler's defaults that the command line shows in its help, in a module that
imports nothing, so that ``cpsat-scheduler --help`` needs neither the client nor the solver.
The modules that use them (``options``, ``leader``, ``simulate``) re-export them."""

from __future__ import annotations

# Pods per window: a burst of this many is decided jointly; more wait for the next window.
# Each window also pays a cost that grows with the cluster, not the window (snapshot, the
# solver's view of every bound pod, validation): under a backlog, large windows amortise it,
# while the pods of a few Deployments still make a small CP-SAT model (one class per spec).
DEFAULT_WINDOW_SIZE = 500
# How long the first pod of a window waits for company (milliseconds). Long enough that pods
# created together (a Deployment scaling, a Job's gang) share a window, short enough not to
# matter next to pod start-up. With the adaptive window (the default) only pods that need a
# joint decision (gangs, required inter-pod (anti-)affinity, hard spread) wait: waiting cannot
# improve the plan of a pod that is decided as well on its own, and it costs its latency.
DEFAULT_WINDOW_WAIT_MS = 200
# While pods stream in (each within this many milliseconds of the one before), a window of pods
# that need no joint decision may wait this long after its first pod, for the pods right behind
# it. Not for a better plan: every window has a fixed cost (snapshot, the solver's view of the
# cluster, validation, a bind batch), and on the in-memory server at 100 pods/s one window per pod
# spent 6.8 ms of CPU per pod where windows of ~4 pods spent 4.2. But every window's first pod
# pays the wait in latency, and at a steady 100 pods/s a pod arrives every 10 ms, so it is nearly
# every pod: against a real kube-apiserver 1.36 (500 nodes, `python -m adapters.bench.live
# --kubeconfig ... --burst 0 --backlog 0`), 10 ms gave a steady p50 of 15 ms (windows of 1.6 pods,
# 3.3 ms of CPU per pod) and 0 gave 5 ms (windows of 1.0, 4.2 ms/pod), where kube-scheduler 1.36
# took 2-8 ms in the same runs (the full peer bench, twice: 27 and 25 -> 5 ms; CPU 1.84x and 1.62x
# kube-scheduler's before, 1.64x and 1.80x after: the wait saved little CPU against a real
# server). So it is 0: a pod is decided the moment the loop is free; a burst or a backlog still
# makes large windows, because pods pile up while the previous window is decided. The CPU a
# window per pod costs is won back on the lone pod's path (docs/performance.md, "The steady CPU round, met":
# the binding and the event written straight on the client's pool, the solver's part in
# proportion to the pod, the snapshot made from what changed).
DEFAULT_BATCH_WAIT_MS = 0
# The interpreter's switch interval while the live scheduler runs (seconds; Python's default is
# 0.005). See `LiveOptions.switch_interval`.
DEFAULT_SWITCH_INTERVAL = 0.001
# Windows of at most this many pods, none of which needs a joint decision, are decided by
# scheduleOne whatever the engine (see `Scheduler.is_quick`). Under light load the adaptive
# window makes windows of a few pods, and a CP-SAT model would cost each of them a second (the
# time limit) of latency for little gain; a backlog (a burst, a stall) makes windows larger than
# this, and those are decided jointly. 0: every window goes to the configured engine.
DEFAULT_QUICK_WINDOW = 100
# Larger windows of pods that need no joint decision are first decided by scheduleOne too
# (`LiveOptions.greedy_whole`): when it places every pod without preempting, no model can place
# more, and its plan (kube-scheduler's own per-pod choice) is bound as it is; the model decides
# only windows where scheduleOne leaves pods out. Off with the quick window (0) or on its own.
# Concurrent binds: binding is one small POST per pod; sixteen keep an API server busy
# without flooding it (kube-scheduler binds each pod on its own goroutine, unbounded).
DEFAULT_BIND_CONCURRENCY = 16
# How long a preemptor waits for its victims to go (seconds). A victim gets its
# terminationGracePeriodSeconds (30 s by default) to stop; four times that covers slow
# kubelets, after which the room is given back and the preemptor tries again.
DEFAULT_PREEMPTION_TIMEOUT = 120.0
# How long a bind whose outcome is unknown keeps its node reserved (seconds), counted from the
# read-back. The watch shows a bound pod within moments; a request whose answer was lost was
# sent at least the client's read timeout (30 s) earlier, so with this it has had over a minute,
# past the API server's own request timeout (60 s by default), to land. Longer only wastes room.
DEFAULT_UNCERTAIN_BIND_TTL = 30.0
# Housekeeping period (seconds): backoff expiry, preemption timeouts, gauges.
HOUSEKEEPING_SECONDS = 0.5
# /healthz fails when one window has been in the loop longer than this (seconds): the loop is
# hung, and a restart (kubelet's liveness probe) is the way out. A window's work is bounded by
# the solver's time limit, plus greedy's fallback and the snapshot and validation, which grow
# with the cluster (some 10 s each at 5,000 nodes, measured), so the default is derived from the
# time limit: three times it, plus STALL_GRACE_SECONDS.
STALL_GRACE_SECONDS = 120.0

# client-go's (and kube-scheduler's) leader-election defaults, in seconds.
LEASE_DURATION_SECONDS = 15.0
RENEW_DEADLINE_SECONDS = 10.0
RETRY_PERIOD_SECONDS = 2.0
LEASE_NAME = "cpsat-scheduler"

# Default arrival rate of the snapshot's pending pods in ``run --simulate`` (pods per second):
# slow enough to watch.
DEFAULT_ARRIVAL_RATE = 10.0

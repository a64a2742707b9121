"""``cpsat-scheduler run``: the live secondary scheduler, in a cluster or simulated.

With a kubeconfig (``--kubeconfig``, else ``$KUBECONFIG`` or ``~/.kube/config``) or inside a
pod (``--in-cluster``, the default when ``KUBERNETES_SERVICE_HOST`` is set) it watches the
cluster and binds the pending pods whose ``spec.schedulerName`` is ours, until SIGTERM or
Ctrl-C, then finishes the binds in flight and releases its lease. With ``--simulate
SNAPSHOT`` it runs the same loop against a local in-memory API server made from the
snapshot and prints what it does. See ``adapters/live/`` for how it works.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from typing import Any, Optional

from adapters import gang_api
from models import InputError

from . import config_from_args, non_negative_float, non_negative_int, time_limit, worker_count

ENGINES = ("cpsat", "greedy")
# Exit status after Ctrl-C (128 + SIGINT), as every command: see adapters.cli.
EXIT_INTERRUPTED = 130
# Where /healthz, /readyz and /metrics are served unless --metrics-addr says otherwise:
# loopback only, so nothing is exposed by default (the Deployment names the pod's address).
DEFAULT_METRICS_ADDR = "127.0.0.1:10251"
# Loggers that must stay quiet even with --debug: the client's debug output includes request
# headers (the bearer token) and response bodies (pod specs, which may hold secrets).
QUIET_LOGGERS = ("kubernetes", "urllib3")
# urllib3 warns on each of its own connection retries ("Retrying (Retry(total=2, ...)) after
# connection broken"): against an unreachable API server that is three lines per request, on
# every watch and lease call, around our own back-off, which already says what failed and when
# it tries again. Only its errors are let through.
SILENT_RETRY_LOGGERS = ("urllib3.connectionpool", "urllib3.util.retry")


def positive_int(text: str) -> int:
    value = non_negative_int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def positive_float(text: str) -> float:
    value = non_negative_float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be > 0")
    return value


def address(text: str) -> tuple[str, int]:
    from adapters.live.serving import parse_addr

    try:
        return parse_addr(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def register(subparsers: argparse._SubParsersAction) -> None:
    from adapters.live import defaults  # the help shows them; the client and solver load in run()

    parser = subparsers.add_parser(
        "run",
        help="run as a live secondary scheduler (or --simulate one against a local API server)",
        description="Watch a cluster and bind the pending pods whose spec.schedulerName is ours, a window "
        "of pods at a time. Runs until SIGTERM; with --simulate SNAPSHOT, runs against a local in-memory "
        "API server preloaded from the snapshot and ends by itself.",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--kubeconfig", metavar="PATH", help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    where.add_argument("--in-cluster", action="store_true",
                       help="use the pod's service account (the default when KUBERNETES_SERVICE_HOST is set)")
    where.add_argument("--simulate", metavar="SNAPSHOT",
                       help="run against a local API server made from this snapshot file and print what happens")
    parser.add_argument("--context", metavar="NAME", help="kubeconfig context (default: the current one)")
    parser.add_argument("--gang-api", metavar="VERSION", default="auto",
                        help="the scheduling.k8s.io version to watch and write PodGroups in (v1beta1, v1alpha3,"
                             " v1alpha2; default auto: the newest the server serves; with --simulate, the one the"
                             " snapshot's PodGroups are served in)")
    parser.add_argument("--scheduler-name", metavar="NAME",
                        help="take pods whose spec.schedulerName is NAME (default: the config's, cpsat-scheduler)")
    parser.add_argument("--config", metavar="FILE", help="scheduler config, YAML or JSON (see examples/config/)")
    parser.add_argument("--leader-elect", action=argparse.BooleanOptionalAction, default=True,
                        help="elect a leader on a coordination.k8s.io Lease before scheduling (default: on)")
    parser.add_argument("--window-size", type=positive_int, default=defaults.DEFAULT_WINDOW_SIZE, metavar="N",
                        help=f"most pods decided together (default {defaults.DEFAULT_WINDOW_SIZE})")
    parser.add_argument("--window-wait", type=non_negative_int, default=defaults.DEFAULT_WINDOW_WAIT_MS,
                        metavar="MS", help="how long a window waits to fill after its first pod, in milliseconds "
                        f"(default {defaults.DEFAULT_WINDOW_WAIT_MS}); with the adaptive window only pods that need a "
                        "joint decision (gangs, required inter-pod (anti-)affinity, hard topology spread) wait")
    parser.add_argument("--adaptive-window", action=argparse.BooleanOptionalAction, default=True,
                        help="decide pods that need no joint decision at once, without the window wait "
                        "(default: on; --no-adaptive-window makes every window wait)")
    parser.add_argument("--batch-wait", type=non_negative_int, default=defaults.DEFAULT_BATCH_WAIT_MS, metavar="MS",
                        help="while pods stream in (each within MS of the one before), a window of pods that need no "
                        "joint decision waits MS milliseconds after its first pod for those right behind it: fewer "
                        "windows and less CPU per pod, for MS more latency; a lone pod never waits, "
                        f"and no window waits past --window-wait (default {defaults.DEFAULT_BATCH_WAIT_MS}; 0: never)")
    parser.add_argument("--quick-window", type=non_negative_int, default=defaults.DEFAULT_QUICK_WINDOW, metavar="N",
                        help="windows of at most N pods that need no joint decision are decided by scheduleOne "
                        f"whatever the engine, as under light load kube-scheduler would (default "
                        f"{defaults.DEFAULT_QUICK_WINDOW}; 0: never, and every window goes to the engine)")
    parser.add_argument("--greedy-whole-windows", action=argparse.BooleanOptionalAction, default=True,
                        help="a larger window of pods that need no joint decision is decided by scheduleOne first, "
                        "and bound as it decided when it places every pod without preempting: no model places more "
                        "(default: on; off with --quick-window 0 too)")
    parser.add_argument("--metrics-addr", type=address, metavar="HOST:PORT",
                        help=f"serve /healthz, /readyz and /metrics here (default {DEFAULT_METRICS_ADDR}; "
                        "with --simulate, not served unless given)")
    parser.add_argument("--dry-run", action="store_true",
                        help="decide and log, but bind, evict and write nothing (implies --no-leader-elect)")
    parser.add_argument("--engine", choices=ENGINES, default="cpsat",
                        help="cpsat (default) or greedy (kube-scheduler's scheduleOne, pod by pod)")
    parser.add_argument("--time-limit", type=time_limit, metavar="SECONDS",
                        help="each window's time limit, its context build and validation included (config solver.timeLimitSeconds)")
    parser.add_argument("--workers", type=worker_count, metavar="N",
                        help="CP-SAT worker threads (config solver.workers)")
    parser.add_argument("--bind-concurrency", type=positive_int, default=defaults.DEFAULT_BIND_CONCURRENCY,
                        metavar="N", help=f"binds in flight at once (default {defaults.DEFAULT_BIND_CONCURRENCY})")
    parser.add_argument("--lease-namespace", default="kube-system", metavar="NS",
                        help="namespace of the leader-election Lease (default kube-system)")
    parser.add_argument("--lease-name", default=defaults.LEASE_NAME, metavar="NAME",
                        help=f"name of the Lease (default {defaults.LEASE_NAME})")
    parser.add_argument("--lease-duration", type=positive_float, default=defaults.LEASE_DURATION_SECONDS,
                        metavar="SECONDS", help="how long a lease holds without renewal (default 15)")
    parser.add_argument("--renew-deadline", type=positive_float, default=defaults.RENEW_DEADLINE_SECONDS,
                        metavar="SECONDS", help="a leader that cannot renew for this long stops (default 10)")
    parser.add_argument("--retry-period", type=positive_float, default=defaults.RETRY_PERIOD_SECONDS,
                        metavar="SECONDS", help="how often the lease is renewed or tried (default 2)")
    parser.add_argument("--stall-timeout", type=non_negative_float, metavar="SECONDS",
                        help="/healthz fails when one window has been in the loop this long (default: 3 x the "
                        f"time limit + {defaults.STALL_GRACE_SECONDS:.0f}; 0: never)")
    parser.add_argument("--arrival-rate", type=non_negative_float, default=defaults.DEFAULT_ARRIVAL_RATE,
                        metavar="PODS_PER_S", help="with --simulate: the snapshot's pending pods arrive at this "
                        f"rate (default {defaults.DEFAULT_ARRIVAL_RATE:g}; 0: all there from the start)")
    parser.add_argument("--duration", type=positive_float, metavar="SECONDS",
                        help="stop after this long (with --simulate it also stops once everything is bound)")
    parser.add_argument("--verbose", "-v", action="store_true", help="log every decision (INFO level)")
    parser.set_defaults(handler=run)


def _live_options(args: argparse.Namespace, config: Any) -> Any:
    from adapters.live.leader import LeaseSettings
    from adapters.live.options import LiveOptions

    try:
        lease = LeaseSettings(namespace=args.lease_namespace, name=args.lease_name, duration=args.lease_duration,
                              renew_deadline=args.renew_deadline, retry_period=args.retry_period)
    except ValueError as exc:
        raise InputError("", "--lease-duration/--renew-deadline/--retry-period", str(exc)) from None
    metrics_addr = args.metrics_addr
    if metrics_addr is None and not args.simulate:
        from adapters.live.serving import parse_addr

        metrics_addr = parse_addr(DEFAULT_METRICS_ADDR)
    return LiveOptions(engine=args.engine, window_size=window_size(args.window_size, config),
                       window_wait=args.window_wait / 1000.0, adaptive_window=args.adaptive_window,
                       batch_wait=args.batch_wait / 1000.0,
                       quick_window=args.quick_window, greedy_whole=args.greedy_whole_windows,
                       dry_run=args.dry_run, leader_elect=args.leader_elect and not args.dry_run, lease=lease,
                       metrics_addr=metrics_addr, bind_concurrency=args.bind_concurrency,
                       stall_timeout=args.stall_timeout)


def window_size(asked: int, config: Any) -> int:
    """Pods per live window: as asked, but never past ``limits.maxWindowPods``. A larger window
    would be refused by the solver every time; a smaller one cuts the backlog into chunks."""
    from adapters.live.options import DEFAULT_WINDOW_SIZE

    cap = config.limits.max_window_pods
    if asked <= cap:
        return asked
    # Said loudly only when --window-size asked for more; the default shrinking is expected.
    level = logging.INFO if asked == DEFAULT_WINDOW_SIZE else logging.WARNING
    logging.getLogger("adapters.live").log(
        level, "window size %d is above limits.maxWindowPods=%d: windows take at most %d pods", asked, cap, cap)
    return cap


def _configure_logging(args: argparse.Namespace) -> None:
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    for name in SILENT_RETRY_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    live = logging.getLogger("adapters.live")
    if getattr(args, "debug", False):
        live.setLevel(logging.DEBUG)
    elif args.verbose or not args.simulate:
        live.setLevel(logging.INFO)  # a daemon's log says what it did; a simulation prints it instead
    # One line per successful bind only when asked: at full speed that is hundreds a second.
    verbose = args.verbose or getattr(args, "debug", False)
    logging.getLogger("adapters.live.binder.binds").setLevel(logging.NOTSET if verbose else logging.WARNING)


def _stop_on_signals(stop: threading.Event, interrupted: threading.Event) -> None:
    """SIGTERM and SIGINT both stop the scheduler in order (binds in flight finish, the lease is
    released); SIGINT — Ctrl-C — also marks the run ``interrupted``: it then exits 130 and a
    simulation prints no summary, as no command shows a result cut short."""
    if threading.current_thread() is not threading.main_thread():
        return  # signals can only be handled on the main thread (tests call run() elsewhere)

    def handler(signum: int, frame: Optional[Any]) -> None:
        logging.getLogger("adapters.live").info("received %s; shutting down", signal.Signals(signum).name)
        if signum == signal.SIGINT:
            interrupted.set()
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def run(args: argparse.Namespace, stop: Optional[threading.Event] = None) -> int:
    config = config_from_args(args, time_limit_seconds=args.time_limit, workers=args.workers)
    if config.preemption.free_devices:
        # The plan would bind the preemptor's claim as soon as the victims are deleted, before the
        # resourceclaim controller deallocates theirs: for a while two claims would name one device.
        raise InputError(args.config or "config", "preemption.freeDevices",
                         "true is for `schedule`/`validate` plans only: the live scheduler does not wait for "
                         "the resourceclaim controller to deallocate a victim's claim; leave it false for `run`")
    _configure_logging(args)
    options = _live_options(args, config)
    stop = stop or threading.Event()
    interrupted = threading.Event()
    _stop_on_signals(stop, interrupted)
    if args.simulate:
        status = _simulate(args, config, options, stop, interrupted)
    else:
        status = _run_cluster(args, config, options, stop)
    if interrupted.is_set():
        print(f"cpsat-scheduler: interrupted{': no summary printed' if args.simulate else ''}", file=sys.stderr)
        return EXIT_INTERRUPTED
    return status


def _run_cluster(args: argparse.Namespace, config: Any, options: Any, stop: threading.Event) -> int:
    from adapters.live import Scheduler
    from adapters.live.api_client import KubeApi, credentials_refused, load_api_client

    in_cluster = args.in_cluster or (not args.kubeconfig and bool(os.environ.get("KUBERNETES_SERVICE_HOST")))
    try:
        api_client = load_api_client(args.kubeconfig, in_cluster=in_cluster, context=args.context)
    except Exception as exc:  # noqa: BLE001 - the config loader's errors vary; none carries the file's content
        where = "in-cluster service account" if in_cluster else (args.kubeconfig or "default kubeconfig")
        raise credentials_refused(where, exc) from None
    api = KubeApi(api_client)
    try:
        api.gang_api = gang_api.parse_choice(args.gang_api)
        api.check_gang_api()        # a version asked for that the server does not serve: exit 2
    except InputError:            # (an InputError is a ValueError too: this comes first)
        api.close()
        raise
    except ValueError as exc:
        api.close()
        raise InputError(f"cluster {api_client.configuration.host}", "--gang-api", str(exc)) from None
    log = logging.getLogger("adapters.live")
    try:
        scheduler = Scheduler(api, config, options)
    except OSError as exc:
        api.close()
        print(f"cpsat-scheduler: error: cannot serve on {options.metrics_addr[0]}:{options.metrics_addr[1]}: "
              f"{exc.strerror or exc}", file=sys.stderr)
        return 1
    scheduler.start()
    if scheduler.status_address is not None:
        host, port = scheduler.status_address
        log.info("serving /healthz, /readyz and /metrics on %s:%d", host, port)
    log.info("scheduling pods with schedulerName %s (engine %s, window %d pods / %d ms%s%s)", config.scheduler_name,
             options.engine, options.window_size, round(options.window_wait * 1000),
             f" when pods couple, {round(options.batch_wait * 1000)} ms while pods stream in"
             if options.adaptive_window else "",
             ", dry run" if options.dry_run else "")
    try:
        stop.wait(args.duration) if args.duration else stop.wait()
    finally:
        scheduler.stop()
        api.close()
    return 0


def _simulate(args: argparse.Namespace, config: Any, options: Any, stop: threading.Event,
              interrupted: threading.Event) -> int:
    from adapters.apiserver import flatten
    from adapters.live.simulate import Simulation, check_gang_api
    from adapters.snapshot_io import read_documents, read_snapshot

    max_bytes = config.limits.max_snapshot_bytes
    # Bad input stops here, with the object and field named; so does a snapshot with nothing to
    # simulate (no Node, or no pending pod of ours): a run that binds nothing is no success.
    read_snapshot(args.simulate, max_bytes=max_bytes).require_pending(config.scheduler_name)
    objects = flatten(d for d in read_documents(args.simulate, max_bytes=max_bytes) if isinstance(d, dict))
    if interrupted.is_set():
        return EXIT_INTERRUPTED
    try:
        asked = gang_api.parse_choice(args.gang_api)
    except ValueError as exc:
        raise InputError(args.simulate, "--gang-api", str(exc)) from None
    simulation = Simulation(objects, config, options, arrival_rate=args.arrival_rate, duration=args.duration,
                            out=sys.stdout, stop=stop, gang_api=asked)
    check_gang_api(asked, simulation.gang_apis, args.simulate)  # before the server starts: nothing to undo
    result = simulation.run()
    if interrupted.is_set():
        return EXIT_INTERRUPTED  # what was decided is on stdout already; a summary of half a run is not
    out = sys.stdout
    out.write(f"\n{'would bind' if options.dry_run else 'bound'} {len(result.bound)} pod(s), evicted "
              f"{len(result.evicted)}, left {len(result.unschedulable)} unschedulable, in {result.elapsed:.1f}s "
              f"({result.ended})\n")
    for key, message in sorted(result.unschedulable.items()):
        out.write(f"  unschedulable {key}: {message}\n")
    for key, message in sorted(result.refused.items()):
        out.write(f"  not created {key}: {message}\n")
    if result.violations:
        out.write(f"the final state breaks {len(result.violations)} rule(s):\n")
        for line in result.violations:
            out.write(f"  {line}\n")
        return 1
    if not options.dry_run:
        out.write("final state replayed through the validator: no violations\n")
    return 0

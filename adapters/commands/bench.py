"""``cpsat-scheduler bench``: both engines on the same generated workloads, side by side.

Each workload is generated from its seed, parsed once, and decided by ``cpsat`` and by ``greedy``
(kube-scheduler's scheduleOne) window by window; every plan goes through the independent
validator. How windows are cut and what each figure means: ``adapters/bench/runner.py``.

``bench --live ...`` runs the live scheduler's benchmark instead (``adapters/bench/live.py``),
with every option after ``--live``.

Exit status: 0 when every plan is valid and cpsat's priority-weighted placement is at least
greedy's on every workload; 1 when a plan is invalid or cpsat falls below greedy (the quality
floor CI checks); 2 for bad usage, including ``--plot`` without matplotlib.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any, Optional

from adapters.interrupts import write_result
from models import InputError

from . import any_non_negative_int, non_negative_int, time_limit, worker_count

SCALES = ("quick", "medium", "large")
OUTPUTS = ("table", "json")
REPACK = "repack"
# Nodes of the re-packing cluster at each scale, and its default CP-SAT time limit.
REPACK_NODES = {"quick": 100, "medium": 1000, "large": 5000}
REPACK_TIME_LIMIT = {"quick": 5.0, "medium": 30.0, "large": 60.0}


def _repack_available() -> bool:
    try:
        return importlib.util.find_spec("adapters.bench.repack_bench") is not None
    except ImportError:
        return False


def workload_names() -> list[str]:
    from adapters.bench.defaults import REAL_SHAPED_NAMES, SCALE_TARGET_NAMES, WORKLOAD_NAMES

    names = [*WORKLOAD_NAMES, *SCALE_TARGET_NAMES, *REAL_SHAPED_NAMES]
    if _repack_available():
        names.append(REPACK)
    return names


def positive_int(text: str) -> int:
    value = non_negative_int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= 1")
    return value


def register(subparsers: argparse._SubParsersAction) -> None:
    from adapters.bench.defaults import DEFAULT_TIME_LIMITS, DEFAULT_WINDOW_SIZE, WORKLOAD_NAMES

    names = workload_names()
    parser = subparsers.add_parser(
        "bench",
        help="benchmark CP-SAT against greedy scheduleOne on generated workloads",
        description="Generate kube-scheduler-style workloads and run the cpsat and greedy engines on "
        "the same snapshot, side by side: pods placed against the bound, priority-weighted "
        "placement, nodes used, gap, spread skew, victims, decision latency p50/p99, model size, "
        "and throughput. Every plan is validated; an invalid plan, or cpsat placing less than "
        "greedy, exits 1.",
        epilog=f"workloads: {', '.join(names)}. The default suite is: {', '.join(WORKLOAD_NAMES)}. "
        "scale-3k and scale-10k are the solver's scale targets (fixed sizes, any --scale); realistic is a "
        "real-shaped cluster (3 zones, 40 running pods per node, 10,000 pending pods of 20 apps at "
        "medium: 1,000 nodes; large: 5,000); contended is a busy real-shaped cluster with more demand than room "
        "(node pools with a tainted GPU pool, ~30 running pods per node, pending pods of hundreds of Deployments "
        "in four priority classes with spread, anti-affinity, node affinity and gangs: quick 300 nodes and 3,000 "
        "pending, medium 1,000 and 10,000, large 5,000 and 30,000)."
        + (" repack compares re-packing with a descheduler-like baseline." if REPACK in names else ""),
    )
    parser.add_argument(
        "--workload", "-w", dest="workloads", action="extend", nargs="+", choices=names, metavar="NAME",
        help="workload(s) to run, repeatable (default: the whole suite)",
    )
    parser.add_argument("--scale", choices=SCALES, default="quick", help="quick (default; ~a minute for the suite), medium (~1,000 nodes) or large (~5,000 nodes)")
    parser.add_argument("--quick", dest="scale", action="store_const", const="quick", help="same as --scale quick")
    parser.add_argument(
        "--time-limit", type=time_limit, metavar="S",
        help="CP-SAT time limit per window, seconds (default: "
        + ", ".join(f"{s} {v:g}" for s, v in DEFAULT_TIME_LIMITS.items())
        + "; scale-3k 15, scale-10k 10; a --config file's solver.timeLimitSeconds is not used)",
    )
    parser.add_argument("--repeat", type=positive_int, default=1, metavar="N", help="runs of each engine per workload; times are pooled (default 1)")
    parser.add_argument("--seed", type=any_non_negative_int, default=0, metavar="N",
                        help="workload generator seed (default 0)")
    parser.add_argument(
        "--window-size", type=positive_int, default=DEFAULT_WINDOW_SIZE, metavar="N",
        help="at most N pods per decision; the queue is cut into equal consecutive windows (default: the whole "
        "queue is one decision, up to the config's limits.maxWindowPods, 50,000 unless set)",
    )
    parser.add_argument(
        "--max-windows", type=positive_int, metavar="N",
        help="decide only the first N windows of each workload (throughput on workloads too slow to finish; "
        "placed and bounds then cover those windows' pods)",
    )
    parser.add_argument("--workers", type=worker_count, metavar="N", help="CP-SAT worker threads (config solver.workers; default auto)")
    parser.add_argument("--config", metavar="FILE", help="scheduler config, YAML or JSON (see examples/config/)")
    parser.add_argument("--output", "-o", choices=OUTPUTS, default="table", help="table (default, for people) or json (for tools)")
    parser.add_argument("--plot", metavar="FILE.png", help="write a chart of placed vs bound and time per engine (needs matplotlib)")
    parser.add_argument(
        "--input-memory", action=argparse.BooleanOptionalAction, default=True,
        help="also write each workload as a compact JSON file and report the peak memory of reading it, "
        "against the file's size (default on; --no-input-memory skips it)",
    )
    parser.add_argument("--dump", metavar="DIR", help="also write each generated workload to DIR as a kubectl-style JSON List")
    parser.add_argument(
        "--live", nargs=argparse.REMAINDER, action=_Live, metavar="OPTION",
        help="benchmark the live scheduler instead: burst, backlog and steady arrival on the in-memory API "
        "server or, with --kubeconfig, a real one (--engine peer: beside the real kube-scheduler); every "
        "option after --live is the live bench's (`cpsat-scheduler bench --live --help` lists them)",
    )
    for action in parser._actions:  # each of bench's own options notes that it was given (see _Noted)
        if not isinstance(action, (argparse._HelpAction, _Live)):
            action.__class__ = type(f"Noted{type(action).__name__}", (_Noted, type(action)), {})
    parser.set_defaults(handler=run, decides=True)


class _Noted(argparse.Action):
    """Mixed into each of bench's own actions: the option, as given, is noted in
    ``bench_options``, so that one given before ``--live`` is refused even with its default value
    (``--quick``, ``--seed 0``), which a comparison with the defaults would let pass unused."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: Optional[str] = None) -> None:
        namespace.bench_options = [*getattr(namespace, "bench_options", []), option_string]
        super().__call__(parser, namespace, values, option_string)


class _Live(argparse.Action):
    """``--live ...``: the rest of the line goes to the live bench (``adapters/bench/live.py``),
    which runs a scheduler process and an API server's watches, not a decision in this process:
    Ctrl-C must reach it as itself, to stop the run and delete what it made on the server."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: Optional[str] = None) -> None:
        setattr(namespace, self.dest, list(values))
        namespace.decides = False


def _progress(message: str) -> None:
    print(f"cpsat-scheduler: bench: {message}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    if args.live is not None:
        return _run_live(args)
    from adapters.bench import WORKLOADS, dump
    from adapters.bench.report import PlotUnavailable, plot_report, report_table, require_matplotlib
    from adapters.bench.runner import run_suite

    if args.plot:
        try:
            require_matplotlib()
        except PlotUnavailable as exc:
            raise InputError("", "--plot", str(exc)) from None
    config = _config(args)
    names = list(dict.fromkeys(args.workloads or WORKLOADS))
    solver_names = [n for n in names if n != REPACK]

    dump_dir: Optional[Path] = None
    if args.dump:
        dump_dir = Path(args.dump)
        try:
            dump_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError("--dump", args.dump, f"cannot make the directory: {exc.strerror or exc}") from None

    inputs: list[dict[str, Any]] = []

    def save(workload) -> None:
        if dump_dir is not None:
            dump(workload, dump_dir / f"{workload.name}-{workload.metadata['scale']}-seed{args.seed}.json")
        if args.input_memory:
            from adapters.bench.input_memory import measure

            inputs.append({"workload": workload.name, **measure(workload.objects)})

    report = run_suite(
        solver_names,
        args.scale,
        seed=args.seed,
        config=config,
        time_limit=args.time_limit,
        window_size=args.window_size,
        repeat=args.repeat,
        max_windows=args.max_windows,
        progress=_progress,
        on_workload=save,
    )
    if inputs:
        report.extra.append({"name": "input", "result": inputs})
    if REPACK in names:
        report.extra.append(_repack(args))

    if args.output == "json":
        write_result(json.dumps(report.to_json(), indent=2) + "\n")
    else:
        write_result(report_table(report))
    if args.plot:
        plot_report(report, args.plot)
        _progress(f"chart written to {args.plot}")
    return 0 if report.ok else 1


def _run_live(args: argparse.Namespace) -> int:
    from adapters.bench import live

    given = list(dict.fromkeys(getattr(args, "bench_options", [])))
    if given:
        raise InputError("--live", "", f"{', '.join(given)} before --live: the live bench takes its own options, "
                         "after --live (`cpsat-scheduler bench --live --help`)")
    try:
        return live.main(args.live, prog="cpsat-scheduler bench --live")
    except SystemExit as exc:  # its own usage errors (2) and --help (0)
        return exc.code if isinstance(exc.code, int) else 2


def _config(args: argparse.Namespace):
    from models import SchedulerConfig

    if args.config:
        from adapters.snapshot_io import load_config

        config = load_config(args.config)
    else:
        config = SchedulerConfig()
    return config.with_overrides(workers=args.workers)


def _repack(args: argparse.Namespace) -> dict[str, Any]:
    """The re-packing benchmark: a CP-SAT plan against a descheduler-like baseline."""
    from adapters.bench.repack_bench import run_repack_bench

    nodes = REPACK_NODES[args.scale]
    limit = args.time_limit if args.time_limit is not None else REPACK_TIME_LIMIT[args.scale]
    _progress(f"repack: {nodes} nodes, time limit {limit:g}s")
    return {"name": REPACK, "scale": args.scale, "result": run_repack_bench(nodes, args.seed, limit)}

"""A benchmark report for people: tables in a terminal and a chart on request.

The JSON report (``BenchReport.to_json``) is the contract for tools; these renderings read the
same figures and may change at any time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

from .runner import ENGINES, BenchReport

__all__ = ["PlotUnavailable", "plot_report", "repack_table", "report_table", "require_matplotlib"]


def _num(value: Any, fmt: str = "{:,}") -> str:
    if value is None:
        return "-"
    return fmt.format(value)


def _seconds(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.2f}"


def _share(part: Optional[int], whole: Optional[int]) -> str:
    if part is None or not whole:
        return "-"
    return f"{100 * part / whole:.0f}%"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], numeric: set[int]) -> list[str]:
    """Columns two spaces apart; numeric columns right-aligned; blank trailing cells trimmed."""
    cells = [list(map(str, header))] + [list(map(str, r)) for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    out = []
    for row in cells:
        parts = [c.rjust(w) if i in numeric else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))]
        out.append(("  " + "  ".join(parts)).rstrip())
    return out


def input_table(rows: list[dict[str, Any]]) -> list[str]:
    """Reading each workload's snapshot file: its size and the reader's peak memory above the
    interpreter (``input_memory``)."""
    from .input_memory import MAX_RATIO

    out = [f"INPUT (each workload as a compact JSON List, read in a fresh process; target: peak at most {MAX_RATIO:g}x the file)",
           "  WORKLOAD              FILE MiB   PEAK MiB   x FILE   READ s"]
    for row in rows:
        if "error" in row:
            out.append(f"  {row['workload']:<20}  {row['file_mib']:>8}   failed: {' '.join(row['error'])}")
            continue
        seconds = row.get("read_s")
        out.append(f"  {row['workload']:<20}  {row['file_mib']:>8}   {row['growth_mib']:>8}   {row['ratio']:>6.1f}"
                   f"   {'-' if seconds is None else f'{seconds:6.2f}'}")
    return out


def report_table(report: BenchReport) -> str:
    s, m = report.settings, report.machine
    limits = sorted({w.time_limit for w in report.workloads})
    limit = "/".join(f"{v:g}" for v in limits) + "s" if limits else "-"
    lines = [
        f"cpsat-scheduler bench: scale {s.get('scale')}, seed {s.get('seed')}, CP-SAT time limit {limit} per window, "
        f"windows of at most {s.get('window_size'):,} pods, repeat {s.get('repeat')}"
        + (f"; only the first {s['max_windows']} window(s) of each workload" if s.get("max_windows") else ""),
        f"machine: {m.get('cpus')} CPUs, Python {m.get('python')}, OR-tools {m.get('ortools')}, {m.get('platform')}",
    ]
    if report.workloads:
        lines += _workload_tables(report)

    for extra in report.extra:
        if extra.get("name") == "repack":
            lines += ["", *repack_table(extra["result"])]
        elif extra.get("name") == "input":
            lines += ["", *input_table(extra["result"])]

    failures = report.failures()
    lines.append("")
    if failures:
        lines.append(
            f"!!! FAILED: {len(failures)} problem(s) — an invalid plan makes its figures worthless, and cpsat "
            "below greedy breaks the quality floor"
        )
        lines += [f"!!! {line}" for line in failures]
    else:
        lines.append("OK: every plan valid; cpsat placed at least greedy's priority-weighted count on every workload")
    return "\n".join(lines) + "\n"


def _workload_tables(report: BenchReport) -> list[str]:
    """Quality, time, the cpsat/greedy ratios and any fallbacks, one section each."""
    return (_quality_table(report) + _tier_table(report) + _time_table(report) + _gang_table(report)
            + _dra_table(report) + _ratio_table(report) + _fallback_notes(report))


def _quality_table(report: BenchReport) -> list[str]:
    """Per workload and engine: pods placed against the bound, nodes used, victims, gap, validity."""
    lines = [
        "",
        "QUALITY (bound: most pods any placement can place; min nodes: fewest nodes that could host every pod)",
    ]
    rows: list[tuple[str, ...]] = []
    for w in report.workloads:
        for k, (engine, result) in enumerate(w.results.items()):
            r = result.to_json()
            first = k == 0
            valid = "ok" if r["valid"] else f"INVALID x{r['invalid_plans']}"
            rows.append(
                (
                    w.name if first else "",
                    _num(w.nodes) if first else "",
                    _num(w.pods) if first else "",
                    _num(w.bound.get("max_placeable")) if first else "",
                    engine,
                    _num(r["placed"]),
                    _share(r["placed"], w.bound.get("max_placeable")),
                    _num(r["weighted"]),
                    f"{r['nodes_used']:,} (>={w.bound.get('min_nodes') or 0:,})",
                    _num(r.get("max_pods_per_node")),
                    _num(r.get("cpu_util_stddev"), "{:.1f}"),
                    _num(r["victims"]),
                    _num(r["spread_skew"]),
                    "-" if r["gap"] is None else f"{r['gap']:.2%}",
                    r["status"],
                    valid,
                )
            )
    lines += _table(
        ("WORKLOAD", "NODES", "PODS", "BOUND", "ENGINE", "PLACED", "OF BOUND", "WEIGHTED", "NODES USED",
         "MAX/NODE", "CPU SD %", "VICTIMS", "SKEW", "GAP", "STATUS", "VALID"),
        rows,
        numeric={1, 2, 3, 5, 6, 7, 9, 10, 11, 12, 13},
    )

    return lines


def _tier_table(report: BenchReport) -> list[str]:
    """Per workload and priority tier: pods of that priority and above each engine placed, against
    the most any plan can place there (the bound CP-SAT proves, tier_bounds.py)."""
    rows: list[tuple[str, ...]] = []
    engines = [e for e in ENGINES if any(e in w.results for w in report.workloads)]
    for w in report.workloads:
        tiers = (w.bound.get("tiers") or {}).get("at_or_above_priority") or {}
        placed = {e: r.placed_by_priority for e, r in w.results.items()}
        for k, (tier, bound) in enumerate(tiers.items()):
            cells: list[str] = []
            for e in engines:
                if e not in placed:
                    cells += ["-", "-"]
                    continue
                count = sum(n for p, n in placed[e].items() if p >= int(tier))
                cells += [_num(count), _num(bound - count)]
            rows.append((w.name if k == 0 else "", f">= {int(tier):,}", _num(bound), *cells))
    if not rows:
        return []
    header = ["WORKLOAD", "PRIORITY", "BOUND"]
    for e in engines:
        header += [e.upper(), "GAP"]
    return (["", "TIERS (pods of this priority and above: each engine's against the most any plan can place, "
             "a bound CP-SAT proves on a relaxation; GAP = bound - placed)"]
            + _table(header, rows, numeric=set(range(2, len(header)))))


def _time_table(report: BenchReport) -> list[str]:
    """Per workload and engine: decision latency, throughput, the model's size, peak memory."""
    lines: list[str] = []
    lines += ["", "TIME (decision = wall clock around one decide() call per window, its validation included; model size: largest window; "
              "GREEDY s on the cpsat row: the greedy engine's own decision on the same windows, for comparison, not greedy's pass "
              "inside the cpsat decision; "
              "peak RSS: the process's resident-memory high-water mark while the workload ran, both engines)"]
    rows: list[tuple[str, ...]] = []
    for w in report.workloads:
        for k, (engine, result) in enumerate(w.results.items()):
            r = result.to_json()
            rows.append(
                (
                    w.name if k == 0 else "",
                    engine,
                    _num(r["windows"]),
                    f"{w.time_limit:g}" if engine == "cpsat" else "-",
                    _num(r["p50_ms"], "{:,.0f}"),
                    _num(r["p99_ms"], "{:,.0f}"),
                    _seconds(r["decision_s"]),
                    _num(r["pods_per_s"], "{:,.0f}"),
                    _seconds(r["greedy_s"]),
                    _seconds(r["build_s"]),
                    _seconds(r["solve_s"]),
                    _seconds(r.get("validate_s")),
                    _num(r["classes"]),
                    _num(r["components"]),
                    _num(r["variables"]),
                    _num(r["constraints"]),
                    _num(w.peak_rss_mib, "{:,.0f}") if k == 0 else "",
                )
            )
    lines += _table(
        ("WORKLOAD", "ENGINE", "WINDOWS", "LIMIT s", "P50 ms", "P99 ms", "DECISION s", "PODS/s", "GREEDY s", "BUILD s",
         "SOLVE s", "VALIDATE s", "CLASSES", "COMPONENTS", "VARIABLES", "CONSTRAINTS", "PEAK RSS MiB"),
        rows,
        numeric=set(range(2, 17)),
    )

    return lines


def _ratio_table(report: BenchReport) -> list[str]:
    """cpsat against greedy, for workloads both engines ran."""
    lines: list[str] = []
    compared = [w for w in report.workloads if w.ratios()]
    if compared:
        lines += ["", "CPSAT / GREEDY (placed and weighted: higher is better; time: lower is better)"]
        rows: list[tuple[str, ...]] = []
        for w in compared:
            ratios = w.ratios()
            c, g = w.results["cpsat"], w.results["greedy"]
            rows.append(
                (
                    w.name,
                    f"{c.placed:,} / {g.placed:,}",
                    _num(ratios["placed"], "{:.3f}"),
                    _num(ratios["weighted"], "{:.3f}"),
                    _num(ratios["time"], "{:.2f}"),
                    f"{_share(c.placed, w.bound.get('max_placeable'))} / {_share(g.placed, w.bound.get('max_placeable'))}",
                    "BELOW GREEDY" if w.below_greedy() else ("more" if c.weighted > g.weighted else "equal"),
                )
            )
        lines += _table(
            ("WORKLOAD", "PLACED", "PLACED RATIO", "WEIGHTED RATIO", "TIME RATIO", "OF BOUND", "CPSAT VS GREEDY"),
            rows,
            numeric={1, 2, 3, 4, 5},
        )

    return lines


def _fallback_notes(report: BenchReport) -> list[str]:
    """The first reason per workload that cpsat returned greedy's plan."""
    lines: list[str] = []
    notes = [
        f"{w.name}: {engine}: {result.to_json()['fallback_reason']}"
        for w in report.workloads
        for engine, result in w.results.items()
        if result.to_json().get("fallback_reason")
    ]
    if notes:
        lines += ["", "FALLBACKS (cpsat returned the greedy plan; first reason per workload)"]
        lines += [f"  {n}" for n in notes]

    return lines


def _gang_table(report: BenchReport) -> list[str]:
    """Workloads with gangs: whole gangs placed, domains a placed gang spans per topology key,
    and partly used domains where no waiting gang of that key fits (``gangs.gang_figures``)."""
    rows: list[tuple[str, ...]] = []
    for w in report.workloads:
        for k, (engine, result) in enumerate(w.results.items()):
            g = result.gangs
            if g is None:
                continue
            spans = ", ".join(f"{key} {mean:.2f}" for key, mean in g["spans"].items()) or "-"
            frag = ", ".join(f"{key} {f['fragmented']} of {f['partly_used']} partly used ({f['domains']})"
                             for key, f in g["fragmented"].items()) or "-"
            rows.append((w.name if k == 0 else "", engine, f"{g['placed']:,} / {g['gangs']:,}",
                         _num(g["placed_pods_in_gangs"]), spans, frag))
    if not rows:
        return []
    return [
        "",
        "GANGS (placed: whole gangs; spans: mean domains per placed gang, per topology key; fragmented: "
        "partly used domains no waiting gang of that key fits in, of those partly used (all domains))",
        *_table(("WORKLOAD", "ENGINE", "GANGS PLACED", "PODS", "SPANS", "FRAGMENTED"), rows, numeric={2, 3}),
    ]


def _dra_table(report: BenchReport) -> list[str]:
    """Workloads with devices (DRA): devices in use, free, and stranded — free on nodes where no
    waiting pod's claims can be allocated (``dra_workload.dra_figures``)."""
    rows = []
    for w in report.workloads:
        for k, (engine, result) in enumerate(w.results.items()):
            d = result.dra
            if d is None:
                continue
            rows.append((w.name if k == 0 else "", engine, _num(d["devices"]), _num(d["used"]), _num(d["free"]),
                         _num(d["stranded"]), _num(d["stranded_nodes"]), _num(d["waiting_pods"])))
    if not rows:
        return []
    return [
        "",
        "DEVICES (DRA; stranded: free devices on nodes where no waiting pod's claims can be allocated)",
        *_table(("WORKLOAD", "ENGINE", "DEVICES", "USED", "FREE", "STRANDED", "ON NODES", "WAITING PODS"), rows,
                numeric={2, 3, 4, 5, 6, 7}),
    ]


def repack_table(result: dict[str, Any]) -> list[str]:
    """The re-packing benchmark (``repack_bench.run_repack_bench``): nodes freed by each planner."""
    cpsat, base = result.get("cpsat", {}), result.get("baseline", {})
    rows = [
        (_num(result.get("nodes")), _num(result.get("running_pods")), _num(result.get("movable_pods")),
         _num(result.get("active_before")), _num(result.get("lower_bound_nodes")), "cpsat", _num(cpsat.get("freed")),
         _num(cpsat.get("moves")), _num(cpsat.get("active_after")), _seconds(cpsat.get("wall_s")), str(cpsat.get("status", ""))),
        ("", "", "", "", "", "baseline", _num(base.get("freed")), _num(base.get("moves")), _num(base.get("active_after")),
         _seconds(base.get("wall_s")), ("safe" if base.get("safe") else "UNSAFE") + f" ({base.get('name', '')})"),
    ]
    return [
        "REPACK (nodes a re-packing plan frees; MIN ACTIVE: fewest nodes that can hold the pods)",
        *_table(
            ("NODES", "RUNNING", "MOVABLE", "ACTIVE", "MIN ACTIVE", "PLANNER", "FREED", "MOVES", "ACTIVE AFTER", "WALL s", "NOTE"),
            rows,
            numeric={0, 1, 2, 3, 4, 6, 7, 8, 9},
        ),
    ]


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed (it is the optional ``plot`` extra)."""


def require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise PlotUnavailable(
            "--plot needs matplotlib, which is not installed: pip install 'cpsat-scheduler[plot]'"
        ) from None


def plot_report(report: BenchReport, path: str) -> None:
    """Two panels: pods placed per workload as a share of the bound, per engine; and decision
    time per workload, per engine (log scale)."""
    require_matplotlib()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    workloads = report.workloads
    engines = [e for e in ("cpsat", "greedy") if any(e in w.results for w in workloads)]
    colors = {"cpsat": "#1f77b4", "greedy": "#ff7f0e"}
    names = [w.name for w in workloads]
    y = np.arange(len(workloads))
    height = 0.8 / max(len(engines), 1)
    fig, (quality, timing) = plt.subplots(1, 2, figsize=(13, 1.8 + 0.55 * len(workloads)), sharey=True)
    for k, engine in enumerate(engines):
        offset = (k - (len(engines) - 1) / 2) * height
        for i, w in enumerate(workloads):
            result = w.results.get(engine)
            if result is None:
                continue
            bound = w.bound.get("max_placeable") or 0
            share = 100 * result.placed / bound if bound else 0
            seconds = sum(r.decision_s for r in result.runs) / len(result.runs)
            # Hatched: the engine returned the greedy plan for some window (a fallback).
            hatch = "//" if any(win.plan.stats.fallback for win in result.first.windows) else None
            quality.barh(y[i] + offset, share, height, color=colors.get(engine), hatch=hatch,
                         edgecolor="white" if hatch else None)
            quality.text(share + 0.5, y[i] + offset, f"{result.placed:,}", va="center", fontsize=7)
            timing.barh(y[i] + offset, seconds, height, color=colors.get(engine))
            timing.text(seconds * 1.05, y[i] + offset, f"{seconds:.2f}s", va="center", fontsize=7)
    quality.axvline(100, color="black", linestyle="--", linewidth=1)
    quality.set_xlabel("pods placed, % of the bound (labels: pods placed)")
    quality.set_xlim(0, 118)
    quality.set_yticks(y, names)
    quality.invert_yaxis()
    quality.set_title("Quality: placed vs bound")
    timing.set_xscale("log")
    timing.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    timing.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    timing.xaxis.set_minor_formatter(NullFormatter())
    lo, hi = timing.get_xlim()
    timing.set_xlim(lo, hi * 2.5)  # room for the labels
    timing.set_xlabel("decision time per run, seconds (log scale)")
    timing.set_title("Time per engine")
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [Line2D([], [], color="black", linestyle="--", linewidth=1)]
    labels = ["bound (max placeable)"]
    for engine in engines:
        handles.append(Patch(facecolor=colors.get(engine)))
        labels.append(engine)
    if any(win.plan.stats.fallback for w in workloads for r in w.results.values() for win in r.first.windows):
        handles.append(Patch(facecolor=colors["cpsat"], hatch="//", edgecolor="white"))
        labels.append("hatched: fell back to the greedy plan")
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8, frameon=False)
    s, m = report.settings, report.machine
    fig.suptitle(
        f"cpsat-scheduler bench — scale {s.get('scale')}, seed {s.get('seed')}, {m.get('cpus')} CPUs", fontsize=10
    )
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)

"""The published comparison reproduced (issue 38, item 3): on generated contended scenarios, how
often the real kube-scheduler 1.36 leaves pods pending, and then how often the project's plan
places more high-priority pods, proves kube-scheduler's placement optimal, or is worse.

    python -m tests.e2e.peer_table --scenarios 100 [--seed 0] [--sizes 10,10,20,...] \\
        [--time-limit 1 --time-limit 10] [--out DIR]

(starts and stops its own control plane; writes ``DIR/peer-table.json`` and ``DIR/peer-table.md``
after every scenario, so a run stopped early still leaves its table; a scenario where the project
is worse is written whole to ``DIR/worse-<scenario>.json``.)

Scenario ``i`` is ``kube_peer.contended_window(size, seed + i)``, its size the ``i``-th of
``--sizes`` taken round (by default a cycle of 100 from 6 to 500 nodes, most of them small). Each
is loaded on the server with its pending pods; the project's plans (``solver.schedule`` at each
``--time-limit``) are computed on the objects read back, in a thread while the real
kube-scheduler, started then, decides and settles (the machine's CPU is shared by both, as it
would be by a scheduler and the rest of a control plane).

Comparison, as Christensen et al. (arXiv 2511.08373) count it: pending pods placed per priority
tier, lexicographic from the highest tier. "More" means the project places more pods in the
highest tier where the two differ; "proves optimal": equal tiers and CP-SAT's status OPTIMAL on
the whole (not degraded) model; "worse": fewer. Scenarios where kube-scheduler evicted a victim
whose preemptor did not end up on that node (its asynchronous preemption) are counted apart as
well as in the shares; a scenario the server refuses is skipped and counted with its message;
one where kube-scheduler does not settle within ``--settle-limit`` is counted and left out of the
shares.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

from tests.e2e.controlplane import ControlPlane
from tests.e2e.kube_peer import (
    Loader, Outcome, Refused, compare, contended_window, kube_decides, prepare, project_plans, rule_breaks,
)

# The sizes (nodes) of a cycle of 100 scenarios, most small, up to 500: 100 of them take about
# 45 min on a shared 2-core machine. Interleaved, so that a shorter run has some of each.
_COUNTS = ((6, 40), (10, 36), (20, 15), (40, 7), (100, 1), (500, 1))


def _cycle() -> tuple[int, ...]:
    """The sizes spread evenly over the cycle (largest placed first at its share's midpoint)."""
    slots: list[tuple[float, int]] = []
    for size, count in _COUNTS:
        slots += [((k + 0.5) / count, size) for k in range(count)]
    return tuple(size for _, size in sorted(slots))


SIZES = _cycle()
PUBLISHED = {"more_1s": "> 44%", "more_10s": "> 73%", "optimal": "> 19%"}
PAPER = "Christensen et al., arXiv 2511.08373"


@dataclass
class Row:
    """One scenario's result."""

    name: str
    nodes: int
    running: int
    pending: int
    kube: Optional[Outcome] = None
    plans: list[Outcome] = field(default_factory=list)
    refused: str = ""
    error: str = ""             # the bench itself failed on this scenario (counted, not compared)
    seconds: float = 0.0

    def verdicts(self) -> dict[str, int]:
        """Per plan (its scheduler name): +1 more, 0 equal, -1 worse than kube-scheduler."""
        assert self.kube is not None
        return {p.scheduler: compare(p, self.kube) for p in self.plans}


def worse_kind(row: Row) -> str:
    """Why kube-scheduler placed more: "misdirected" (it made an eviction whose room went to a
    pod that did not preempt for it), "rule" (its end state breaks a rule the project keeps, as
    the project's validator reads it: spread, affinity, capacity, ...; the validator's lines on
    which preemptor a victim belongs to are not such a rule: kube's own events name it), else
    "worse" (the project's own shortfall: must not be)."""
    assert row.kube is not None
    if row.kube.misdirected:
        return "misdirected"
    if _breaks(row.kube):
        return "rule"
    return "worse"


def _breaks(kube: Outcome) -> int:
    """kube's end state's breaks of the project's rules, beyond which preemptor a victim is for."""
    return sum(1 for line in kube.rule_breaks if not line.startswith("preemption:"))


def proves(plan: Outcome, kube: Outcome) -> bool:
    return (compare(plan, kube) == 0 and plan.solver_status == "OPTIMAL" and not plan.degraded)


def run_one(plane: ControlPlane, loader: Loader, name: str, items: list[dict[str, Any]], limits: list[float],
            workdir: Path, settle_limit: float) -> tuple[Row, list[dict[str, Any]]]:
    scenario = prepare(name, items)
    row = Row(name, sum(o["kind"] == "Node" for o in scenario.objects), len(scenario.running()),
              len(scenario.pending()))
    started = time.monotonic()
    read: list[dict[str, Any]] = []
    try:
        try:
            loader.load(scenario)
            loader.pending(scenario)
        except Refused as exc:
            row.refused = str(exc)
            return row, read
        read = loader.read_back(scenario)
        plans: list[Outcome] = []
        failed: list[BaseException] = []

        def solve() -> None:
            try:
                plans.extend(project_plans(scenario, read, limits))
            except BaseException as exc:   # reported in the row's place, not lost in the thread
                failed.append(exc)
        thread = threading.Thread(target=solve, name=f"plan-{name}")
        thread.start()
        row.kube = kube_decides(plane, loader, scenario, workdir, limit=settle_limit, loaded=True)
        row.kube.rule_breaks = rule_breaks(scenario, read, row.kube)
        thread.join()
        if failed:
            raise failed[0]
        row.plans = plans
    finally:
        loader.clear(scenario)
        row.seconds = round(time.monotonic() - started, 1)
    return row, read


def _share(count: int, total: int) -> str:
    return f"{count}/{total} ({100 * count / total:.0f}%)" if total else f"{count}/0"


def summarize(rows: list[Row], limits: list[float]) -> dict[str, Any]:
    done = [r for r in rows if r.kube is not None]
    settled = [r for r in done if r.kube is not None and r.kube.settled]
    left = [r for r in settled if r.kube is not None and len(r.kube.placed) < r.pending]
    out: dict[str, Any] = {
        "scenarios": len(rows), "skipped_refused": [{"scenario": r.name, "refused": r.refused} for r in rows if r.refused],
        "bench_errors": [{"scenario": r.name, "error": r.error} for r in rows if r.error],
        "kube_did_not_settle": [r.name for r in done if r.kube is not None and not r.kube.settled],
        "compared": len(settled), "kube_left_pending": len(left),
        "misdirected_scenarios": [r.name for r in settled if r.kube is not None and r.kube.misdirected],
        "kube_evicted_its_own_placements": [r.name for r in settled if r.kube is not None and r.kube.placed_then_evicted],
        "kubelet_refusals": sum(len(o.kubelet) for r in done for o in [r.kube, *r.plans] if o is not None),
        "by_limit": {},
    }
    for limit in limits:
        name = f"schedule {limit:g}s"
        more = [r for r in left if r.verdicts().get(name) == 1]
        worse_all = [r for r in settled if r.verdicts().get(name) == -1]
        apart = {kind: [r.name for r in worse_all if worse_kind(r) == kind] for kind in ("misdirected", "rule")}
        proven = [r for r in left if proves(next(p for p in r.plans if p.scheduler == name), r.kube)]  # type: ignore[arg-type]
        out["by_limit"][f"{limit:g}"] = {
            "more": len(more), "equal": sum(1 for r in left if r.verdicts().get(name) == 0),
            "proves_kube_optimal": len(proven), "worse": [r.name for r in worse_all if worse_kind(r) == "worse"],
            "fewer_with_misdirected": apart["misdirected"], "fewer_where_kube_breaks_a_rule": apart["rule"],
            "more_with_misdirected": sum(1 for r in more if r.kube is not None and r.kube.misdirected),
            "more_of_all_settled": sum(1 for r in settled if r.verdicts().get(name) == 1),
        }
    return out


def markdown(summary: dict[str, Any], rows: list[Row], limits: list[float], command: str) -> str:
    left = summary["kube_left_pending"]
    lines = [f"Measured by `{command}`.", "",
             f"{summary['scenarios']} scenarios; {len(summary['skipped_refused'])} refused by the server (skipped); "
             f"{len(summary['bench_errors'])} where the bench failed; "
             f"{len(summary['kube_did_not_settle'])} where kube-scheduler did not settle (left out); "
             f"{summary['compared']} compared.", "",
             "| | measured | published (" + PAPER + ") |", "|---|---|---|",
             f"| kube-scheduler leaves pods pending | {_share(left, summary['compared'])} | |"]
    for limit in limits:
        b = summary["by_limit"][f"{limit:g}"]
        lines.append(f"| ... of those, the project places more high-priority pods at {limit:g} s | {_share(b['more'], left)} "
                     f"| {PUBLISHED.get(f'more_{limit:g}s', '')} |")
    for limit in limits:
        b = summary["by_limit"][f"{limit:g}"]
        lines.append(f"| ... of those, it proves kube-scheduler's placement optimal at {limit:g} s "
                     f"| {_share(b['proves_kube_optimal'], left)} | {PUBLISHED['optimal'] if limit == max(limits) else ''} |")
    for limit in limits:
        b = summary["by_limit"][f"{limit:g}"]
        lines.append(f"| the project worse than kube-scheduler at {limit:g} s (all compared) "
                     f"| {len(b['worse'])} {', '.join(b['worse'])} | |")
        lines.append(f"| fewer at {limit:g} s, where kube's end state breaks a rule the project keeps (apart) "
                     f"| {len(b['fewer_where_kube_breaks_a_rule'])} {', '.join(b['fewer_where_kube_breaks_a_rule'])} | |")
        lines.append(f"| fewer at {limit:g} s, where kube made misdirected evictions (apart) "
                     f"| {len(b['fewer_with_misdirected'])} {', '.join(b['fewer_with_misdirected'])} | |")
    lines.append(f"| kube-scheduler evicted a victim whose preemptor ended elsewhere (counted apart) "
                 f"| {len(summary['misdirected_scenarios'])} scenarios | |")
    lines.append(f"| kube-scheduler evicted pods it had placed itself in the same run "
                 f"| {len(summary['kube_evicted_its_own_placements'])} scenarios | |")
    lines.append(f"| pods a kubelet would refuse (any plan) | {summary['kubelet_refusals']} | |")
    lines += ["", "By size (scenarios compared; kube leaves pods pending; of those, more / proves optimal / worse "
              "at each limit):", "", "| nodes | compared | kube leaves pending | "
              + " | ".join(f"{limit:g} s: more / proven / worse" for limit in limits) + " |",
              "|---|---|---|" + "---|" * len(limits)]
    for size in sorted({r.nodes for r in rows}):
        part = [r for r in rows if r.nodes == size]
        sub = summarize(part, limits)
        cells = [f"{b['more']} / {b['proves_kube_optimal']} / {len(b['worse'])}"
                 for b in (sub["by_limit"][f"{limit:g}"] for limit in limits)]
        lines.append(f"| {size} | {sub['compared']} | {sub['kube_left_pending']} | " + " | ".join(cells) + " |")
    lines += ["", "| scenario | nodes | running | pending | kube placed (rule breaks) | " +
              " | ".join(f"{limit:g} s placed (status)" for limit in limits) + " | kube evictions (misdirected) |",
              "|---|---|---|---|---|" + "---|" * len(limits) + "---|"]
    for r in rows:
        if r.kube is None:
            why = f"refused: {r.refused}" if r.refused else f"bench error: {r.error}"
            lines.append(f"| {r.name} | {r.nodes} | {r.running} | {r.pending} | {why} |" + " |" * (len(limits) + 1))
            continue
        cells = [f"{len(p.placed)} ({p.solver_status or p.status}{', ' + p.degraded if p.degraded else ''})" for p in r.plans]
        settled = "" if r.kube.settled else " (did not settle)"
        lines.append(f"| {r.name} | {r.nodes} | {r.running} | {r.pending} | {len(r.kube.placed)}{settled} ({_breaks(r.kube)}) | "
                     + " | ".join(cells) + f" | {len(r.kube.evicted)} ({len(r.kube.misdirected)}) |")
    return "\n".join(lines) + "\n"


def run(plane: ControlPlane, count: int, *, seed: int = 0, sizes: tuple[int, ...] = SIZES,
        limits: Optional[list[float]] = None, out: Path, settle_limit: float = 240.0,
        command: str = "", progress: bool = False) -> dict[str, Any]:
    limits = limits or [1.0, 10.0]
    out.mkdir(parents=True, exist_ok=True)
    rows: list[Row] = []
    loader = Loader(plane)
    summary: dict[str, Any] = {}
    try:
        for i in range(count):
            size = sizes[i % len(sizes)]
            name = f"contended-{size}n-s{seed + i}"
            try:
                row, read = run_one(plane, loader, name, contended_window(size, seed + i), limits, out, settle_limit)
            except Exception as exc:   # one scenario's failure is reported in its row; the others still run
                row, read = Row(name, size, 0, 0, error=f"{type(exc).__name__}: {str(exc)[:500]}"), []
            rows.append(row)
            if row.kube is not None and row.kube.settled and any(v < 0 for v in row.verdicts().values()):
                (out / f"{worse_kind(row)}-{name}.json").write_text(json.dumps(
                    {"apiVersion": "v1", "kind": "List", "items": read}, default=str))
            summary = summarize(rows, limits)
            (out / "peer-table.json").write_text(json.dumps(
                {"command": command, "summary": summary, "rows": [asdict(r) for r in rows]}, indent=1, default=str))
            (out / "peer-table.md").write_text(markdown(summary, rows, limits, command))
            if progress:
                verdicts = row.verdicts() if row.kube is not None else {}
                print(f"[{i + 1}/{count}] {name}: {row.seconds:.0f} s, kube placed "
                      f"{len(row.kube.placed) if row.kube else '-'}/{row.pending}, {verdicts or row.refused or row.error}",
                      file=sys.stderr, flush=True)
    finally:
        loader.close()
    return summary


def rows_from_json(data: dict[str, Any]) -> list[Row]:
    """The rows of a ``peer-table.json``, to render its table again."""
    def outcome(o: dict[str, Any]) -> Outcome:
        for tiers in ("tiers", "placed_tiers", "evicted_tiers"):
            o[tiers] = {int(t): n for t, n in (o.get(tiers) or {}).items()}
        return Outcome(**{k: v for k, v in o.items() if k in Outcome.__dataclass_fields__})
    rows = []
    for r in data["rows"]:
        kube = outcome(r["kube"]) if r.get("kube") else None
        rows.append(Row(r["name"], r["nodes"], r["running"], r["pending"], kube=kube,
                        plans=[outcome(p) for p in r.get("plans") or []], refused=r.get("refused", ""),
                        error=r.get("error", ""), seconds=r.get("seconds", 0.0)))
    return rows


def render_json(path: Path) -> str:
    """``--render``: the markdown table of a ``peer-table.json`` written earlier (no server)."""
    data = json.loads(path.read_text())
    rows = rows_from_json(data)
    limits = sorted({float(p.scheduler.split()[1].rstrip("s")) for r in rows for p in r.plans})
    return markdown(summarize(rows, limits), rows, limits, data.get("command", ""))


def _sizes(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--sizes: {text!r} is not a comma-separated list of node counts") from None
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError("--sizes: node counts must be positive")
    return values


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.e2e.peer_table", description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sizes", type=_sizes, default=SIZES, help="node counts, taken round (default: a cycle of 100 from 6 to 500)")
    parser.add_argument("--time-limit", dest="limits", type=float, action="append", help="seconds (default 1 and 10)")
    parser.add_argument("--settle-limit", type=float, default=240.0, help="seconds kube-scheduler may take to settle")
    parser.add_argument("--out", default="peer-table", help="folder for peer-table.json and peer-table.md")
    parser.add_argument("--render", metavar="JSON", help="print the table of a peer-table.json again, and stop")
    args = parser.parse_args(argv)
    if args.render:
        try:
            print(render_json(Path(args.render)), end="")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"peer_table: {args.render}: not a peer-table.json ({exc})", file=sys.stderr)
            return 2
        return 0
    if args.scenarios < 1 or args.settle_limit <= 0 or any(t <= 0 for t in args.limits or []):
        print("peer_table: --scenarios, --settle-limit and --time-limit must be positive", file=sys.stderr)
        return 2
    command = "python -m tests.e2e.peer_table " + " ".join(argv if argv is not None else sys.argv[1:])
    with tempfile.TemporaryDirectory(prefix="peer-table-") as tmp:
        plane = ControlPlane(Path(tmp) / "plane")
        try:
            plane.start()
            run(plane, args.scenarios, seed=args.seed, sizes=args.sizes, limits=args.limits, out=Path(args.out),
                settle_limit=args.settle_limit, command=command.strip(), progress=True)
        finally:
            plane.stop()
    print((Path(args.out) / "peer-table.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``firstAvailable`` as the model's objective level: a claim gets a less preferred subrequest
only when the better one cannot be had without placing fewer pods, and the plan names the
subrequest given (``request: <request>/<subrequest>``, as kube-scheduler writes it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from adapters.snapshot_io import load_snapshot
from models import SchedulerConfig
from solver.api import schedule
from solver.validate import validate

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples/snapshots/dra"
CLI = Path(sys.executable).with_name("cpsat-scheduler")


def run(engine: str, name: str, tmp_path: Path) -> tuple[dict, dict[str, list[tuple[str, str]]]]:
    out = subprocess.run([str(CLI), "schedule", "--engine", engine, "-o", "json", str(EXAMPLES / name)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    plan_path = tmp_path / f"{engine}-plan.json"
    plan_path.write_text(out.stdout)
    ok = subprocess.run([str(CLI), "validate", str(EXAMPLES / name), str(plan_path)], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    data = json.loads(out.stdout)
    given = {a["claim"]: [(r["request"], f"{r['pool']}/{r['device']}") for r in a["allocation"]["devices"]["results"]]
             for a in data["allocations"]}
    return {a["pod"]: a["node"] for a in data["assignments"]}, given


def test_first_subrequest_chosen_where_it_can_be_had(tmp_path: Path) -> None:
    """The T4 node scores higher (the A100 node is half busy), but the A100 is free: the
    solver sends the pod there with its first subrequest."""
    placed, given = run("cpsat", "first-available.yaml", tmp_path)
    assert placed == {"ml/infer": "a100-node"}
    assert given == {"ml/infer-gpu-": [("gpu/big", "a100-node/gpu-0")]}
    # greedy has no such preference across nodes: node scores send it to the T4
    placed, given = run("greedy", "first-available.yaml", tmp_path)
    assert placed == {"ml/infer": "t4-node"} and given == {"ml/infer-gpu-": [("gpu/small", "t4-node/gpu-0")]}


def test_pods_placed_outrank_the_preference(tmp_path: Path) -> None:
    """flex (first in the queue) would take the node's only A100 and leave train waiting; the
    solver gives flex its second choice so both run."""
    placed, given = run("cpsat", "first-available-contended.yaml", tmp_path)
    assert placed == {"ml/flex": "mixed", "ml/train": "mixed"}
    assert given == {"ml/flex-gpu-": [("gpu/small", "mixed/gpu-1")], "ml/train-gpu-": [("gpu", "mixed/gpu-0")]}
    placed, given = run("greedy", "first-available-contended.yaml", tmp_path)
    assert placed == {"ml/flex": "mixed"} and given == {"ml/flex-gpu-": [("gpu/big", "mixed/gpu-0")]}


def test_a_plan_naming_a_later_subrequest_is_still_valid_but_weighs_less(tmp_path: Path) -> None:
    """The validator checks the rules, not the preference: a plan giving infer its T4 is valid;
    the preference is an objective, which the engine's choice between plans reads too."""
    from solver.context import build_context
    from solver.cpsat.choose import plan_value, tier_weights

    snap = load_snapshot(EXAMPLES / "first-available.yaml")
    ctx = build_context(snap, SchedulerConfig())
    index = {n.name: n.index for n in ctx.nodes}
    weights = tier_weights([p.priority for p in ctx.window])
    on_a100 = plan_value(ctx, {"ml/infer": index["a100-node"]}, [], weights, {})
    on_t4 = plan_value(ctx, {"ml/infer": index["t4-node"]}, [], weights, {})
    assert on_a100 > on_t4 and on_a100[:4] == on_t4[:4]
    plan = schedule(snap, engine="greedy")
    assert validate(snap, plan, SchedulerConfig()) == []

"""The DRA examples through the command line, as a user runs them: `schedule -o json`, then
`validate` of the printed plan against the same snapshot (shared by the DRA test modules)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples/snapshots/dra"
CLI = Path(sys.executable).with_name("cpsat-scheduler")


def cli_plan(engine: str, name: str, tmp_path: Path) -> dict:
    """The plan `cpsat-scheduler schedule --engine ENGINE` prints for example ``name``, after
    asserting that it ran and that `cpsat-scheduler validate` accepts that plan."""
    out = subprocess.run([str(CLI), "schedule", "--engine", engine, "-o", "json", str(EXAMPLES / name)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    path = tmp_path / f"{engine}-plan.json"
    path.write_text(out.stdout)
    ok = subprocess.run([str(CLI), "validate", str(EXAMPLES / name), str(path)], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    return json.loads(out.stdout)

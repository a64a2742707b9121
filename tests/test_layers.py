"""The layering holds: adapters -> solver -> models, only adapters talk to a cluster, plugins never
import the engines that call them (solver/plugin_api.py is what they stand on), and in the
live scheduler only kube.py and errors.py touch the Kubernetes client. The contracts are in
pyproject.toml ([tool.importlinter]); import-linter checks them on every test run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_are_kept() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "Contracts: 4 kept, 0 broken." in done.stdout

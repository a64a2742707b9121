"""The whole package type-checks: mypy, configured in pyproject.toml ([tool.mypy]), finds no error
in ``solver``, ``models`` or ``adapters``. It runs with the tests, as import-linter does
(test_layers.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from mypy import api

ROOT = Path(__file__).resolve().parents[1]


def test_solver_models_and_adapters_type_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the paths below, and the modules mypy finds, are the project's
    stdout, stderr, status = api.run([
        "--config-file", os.fspath(ROOT / "pyproject.toml"),
        "--cache-dir", os.fspath(tmp_path / "mypy_cache"),
        "solver", "models", "adapters",
    ])
    assert status == 0, "mypy found type errors:\n" + stdout[-6000:] + stderr[-2000:]

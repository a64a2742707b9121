"""Kept for scripts: `python -m adapters.live.bench ...` runs the live benchmark, which lives
beside the other benchmarks as `adapters/bench/live.py` (`python -m adapters.bench.live ...`,
the same flags and output). Nothing imports this module and it imports nothing of the bench:
`adapters/bench` uses `adapters/live`, never the other way (an import-linter contract), so the
command is forwarded by module name when run, not by an import."""

from __future__ import annotations

import runpy

if __name__ == "__main__":
    runpy.run_module("adapters.bench.live", run_name="__main__", alter_sys=True)

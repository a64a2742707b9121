"""Kept for scripts: `python -m adapters.live.bench ...` runs the live benchmark, which lives
beside the other benchmarks as `adapters/bench/live.py` (`python -m adapters.bench.live ...`,
the same flags and output). Nothing imports this module; it only forwards the command."""

from __future__ import annotations

import sys

if __name__ == "__main__":
    from adapters.bench.live import main

    sys.exit(main())

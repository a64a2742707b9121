"""Peak memory of reading a snapshot file, against the file's size (issue 14: at most 5x).

Each workload is written as a compact kubectl-style JSON List (compact is the hard case: the
same objects in fewer bytes) and read by ``read_snapshot`` in a fresh interpreter, so the figure
is the reader's alone: the resident-set high-water mark above the interpreter with the reader
already imported. ``python -m adapters.bench.input_memory FILE`` prints one JSON line.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterable

# What issue 14 holds the reader to: peak memory at most this many times the file's size.
MAX_RATIO = 5.0


def measure(objects: Iterable[dict[str, Any]], *, yaml: bool = False) -> dict[str, Any]:
    """Write ``objects`` as a compact JSON List (or, with ``yaml``, as ``kubectl -o yaml`` would)
    and read it in a child interpreter."""
    from .parse import as_list, dump

    with tempfile.TemporaryDirectory(prefix="cpsat-bench-input-") as tmp:
        path = Path(tmp) / ("snapshot.yaml" if yaml else "snapshot.json")
        if yaml:
            dump(objects, path)
        else:
            with path.open("w", encoding="utf-8") as fh:
                json.dump(as_list(objects), fh, separators=(",", ":"))
        size = path.stat().st_size
        done = subprocess.run(
            [sys.executable, "-m", "adapters.bench.input_memory", str(path)],
            capture_output=True, text=True, check=False,
        )
    if done.returncode != 0:
        return {"file_mib": round(size / 2**20, 1), "error": done.stderr.strip().splitlines()[-1:]}
    figures = json.loads(done.stdout)
    growth = figures["peak_mib"] - figures["baseline_mib"]
    file_mib = size / 2**20
    return {
        "file_mib": round(file_mib, 1),
        "peak_mib": figures["peak_mib"],
        "growth_mib": round(growth, 1),
        "ratio": round(growth / file_mib, 2) if file_mib else None,
        "read_s": figures.get("read_s"),
    }


def _main(path: str) -> None:
    from adapters.snapshot_io import read_snapshot

    from .memory import peak_rss_mib, reset_peak

    import time

    reset_peak()
    baseline = peak_rss_mib()
    start = time.perf_counter()
    read_snapshot(path)
    seconds = round(time.perf_counter() - start, 2)
    print(json.dumps({"baseline_mib": baseline, "peak_mib": peak_rss_mib(), "read_s": seconds}))


if __name__ == "__main__":
    _main(sys.argv[1])

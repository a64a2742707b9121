"""Ctrl-C during a long decision: exit 130 at once, one line on stderr, no plan on stdout.

CP-SAT used to catch the SIGINT itself and hand back its incumbent, which the command printed
as an ordinary FEASIBLE plan with exit 0. The user pressed Ctrl-C: nothing cut short is a plan.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from adapters.bench import workloads

SCRIPT = Path(sys.executable).with_name("cpsat-scheduler")


def test_ctrl_c_during_a_solve_exits_130_without_a_plan(tmp_path: Path) -> None:
    # 1,000 nodes and 2,910 gang pods: about a minute to its limit, so the signal lands mid-decision.
    snapshot = tmp_path / "gangs.json"
    snapshot.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": workloads.gang("medium", 0).objects}))
    proc = subprocess.Popen([str(SCRIPT), "schedule", str(snapshot), "--time-limit", "120", "-o", "json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(6)
    assert proc.poll() is None, "the decision ended before the interrupt"
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert time.monotonic() - sent < 30  # stopped, not run to its 120 s limit
    assert out == b""
    lines = err.decode().strip().splitlines()
    assert lines == ["cpsat-scheduler: interrupted: no plan printed"], err.decode()

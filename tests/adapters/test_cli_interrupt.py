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


def _interrupt_at(snapshot: Path, stage: str, *extra: str) -> tuple[int, float, bytes, list[str]]:
    """Run `schedule --progress` on ``snapshot``, press Ctrl-C once the progress line ``stage``
    is out, and return (exit status, seconds from the signal to the exit, stdout, stderr lines)."""
    proc = subprocess.Popen([str(SCRIPT), "schedule", str(snapshot), "--progress", "-o", "json", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    lines = []
    for raw in proc.stderr:
        lines.append(raw.decode().rstrip())
        if stage in lines[-1]:
            break
    else:
        raise AssertionError(f"no progress line {stage!r}: {lines}")
    time.sleep(0.3)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    return proc.returncode, time.monotonic() - sent, out, lines + err.decode().splitlines()


def _dump(path: Path, objects: list) -> Path:
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}, separators=(",", ":")))
    return path


def test_ctrl_c_while_reading_stops_the_read(tmp_path: Path) -> None:
    """A dump of 45,000 pods takes seconds to read; Ctrl-C during the read ends the command
    there (no later stage starts), exit 130, nothing on stdout."""
    objects = workloads.realistic("quick", 0).objects
    pods = [o for o in objects if o["kind"] == "Pod"]
    copies = [{**o, "metadata": {**o["metadata"], "name": f"{o['metadata']['name']}-{k}"}} for k in range(8) for o in pods]
    status, seconds, out, lines = _interrupt_at(_dump(tmp_path / "big.json", objects + copies), "reading ")
    assert (status, out) == (130, b"")
    assert lines[-1] == "cpsat-scheduler: interrupted: no plan printed"
    assert not any("] read " in line for line in lines), lines  # stopped inside the read
    assert seconds < 10


def test_ctrl_c_while_building_the_model_stops_the_build(tmp_path: Path) -> None:
    """The model of 300 classes x 100 nodes takes seconds to build; Ctrl-C during the build
    ends the command before any solve starts, exit 130, nothing on stdout."""
    snapshot = _dump(tmp_path / "realistic.json", workloads.realistic("quick", 0).objects)
    status, seconds, out, lines = _interrupt_at(snapshot, "building the CP-SAT model")
    assert (status, out) == (130, b"")
    assert lines[-1] == "cpsat-scheduler: interrupted: no plan printed"
    assert not any("solving:" in line for line in lines), lines  # stopped inside the build
    assert seconds < 10

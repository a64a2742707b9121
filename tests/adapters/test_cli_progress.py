"""A long decision says where it is, on stderr only (issue 14, item 5).

One line per stage when stderr is a terminal or ``--progress`` is given; nothing extra when
stderr is a pipe (scripts); never a byte of it in ``-o json`` output.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(sys.executable).with_name("cpsat-scheduler")
STAGE = "cpsat-scheduler: ["


def run(*argv: str, stderr_terminal: bool = False) -> tuple[int, str, str]:
    if not stderr_terminal:
        done = subprocess.run([str(SCRIPT), *argv], capture_output=True, text=True, timeout=120)
        return done.returncode, done.stdout, done.stderr
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen([str(SCRIPT), *argv], stdout=subprocess.PIPE, stderr=follower)
        os.close(follower)
        err = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the terminal closed with the process
                break
            if not chunk:
                break
            err += chunk
        out = proc.stdout.read()
        proc.wait(timeout=120)
    finally:
        os.close(leader)
    return proc.returncode, out.decode(), err.decode().replace("\r\n", "\n")


def stages(err: str) -> list[str]:
    return [line.split("] ", 1)[1] for line in err.splitlines() if line.startswith(STAGE)]


def test_progress_goes_to_stderr_and_json_stays_clean() -> None:
    code, out, err = run("schedule", "--progress", "-o", "json")
    assert code == 0
    plan = json.loads(out)  # nothing but the plan on stdout
    assert plan["assignments"]
    seen = stages(err)
    assert seen[0].startswith("reading ") and seen[0].endswith("quickstart.yaml")
    assert any(s.startswith("solving: ") for s in seen)
    assert seen[-1] == "validating the plan"


def test_a_pipe_gets_no_progress_unless_asked() -> None:
    code, out, err = run("schedule", "-o", "json")
    assert code == 0
    assert json.loads(out)["assignments"]
    assert stages(err) == []


def test_a_terminal_gets_progress_by_default_and_no_progress_silences_it() -> None:
    code, out, err = run("schedule", "-o", "json", stderr_terminal=True)
    assert code == 0
    json.loads(out)
    assert "validating the plan" in stages(err)
    code, out, err = run("schedule", "-o", "json", "--no-progress", stderr_terminal=True)
    assert code == 0
    assert stages(err) == []

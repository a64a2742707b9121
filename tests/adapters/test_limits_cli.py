"""The ``limits`` section through the command line: too large is exit 2 with one named line.

Each limit is tried with a config whose limits are tiny, so the inputs stay small: one over the
limit is refused with ``cpsat-scheduler: error: <object>: <field>: ...`` and exit 2, one exactly
at the limit still runs. The refusals must come before the expensive part — no context built
for too many nodes or pods, no byte parsed of a too large file — which the tests check by making
those steps fail loudly if they are reached.
"""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from adapters.cli import main
from adapters.commands.run import window_size
from adapters.input_size import CONFIG_LIMIT, SizeLimit, read_bounded
from models import InputError, SchedulerConfig

SCRIPT = Path(sys.executable).with_name("cpsat-scheduler")
HINT = "raise it in the config's limits section"

NODE = "- {apiVersion: v1, kind: Node, metadata: {name: n%d}, status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}}\n"
PENDING = (
    "- {apiVersion: v1, kind: Pod, metadata: {name: web-%d, namespace: default}, spec: {schedulerName: %s, "
    "containers: [{name: web, image: nginx, resources: {requests: {cpu: 100m}}}]}}\n"
)
RUNNING = (
    "- {apiVersion: v1, kind: Pod, metadata: {name: run-%d, namespace: default, ownerReferences: [{apiVersion: apps/v1, "
    "kind: ReplicaSet, name: run, controller: true}]}, spec: {nodeName: n0, containers: [{name: c, image: nginx, "
    "resources: {requests: {cpu: 100m}}}]}, status: {phase: Running}}\n"
)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def cluster(tmp_path: Path, nodes: int, pending: int = 0, *, running: int = 0, others: int = 0) -> str:
    """``nodes`` nodes, ``pending`` pods of ours, ``others`` of another scheduler, ``running`` movable ones."""
    items = "".join(NODE % i for i in range(nodes))
    items += "".join(PENDING % (i, "cpsat-scheduler") for i in range(pending))
    items += "".join(PENDING % (pending + i, "default-scheduler") for i in range(others))
    items += "".join(RUNNING % i for i in range(running))
    path = tmp_path / "snap.yaml"
    path.write_text("apiVersion: v1\nkind: List\nitems:\n" + items)
    return str(path)


def config(tmp_path: Path, **limits: int) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"limits": limits}))
    return str(path)


def error(message: str) -> str:
    return f"cpsat-scheduler: error: {message}\n"


@pytest.fixture
def no_context(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail loudly (exit 1, not 2) if a refused snapshot gets as far as building node infos."""

    def boom(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a node info was built for a snapshot past the limits")

    monkeypatch.setattr("solver.context.NodeInfo.of", boom)


# --------------------------------------------------------------------------- nodes and pods


@pytest.mark.parametrize("command", ["schedule", "validate", "repack"])
def test_too_many_nodes_is_refused_before_the_context(command: str, tmp_path: Path, capsys, no_context) -> None:
    snap = cluster(tmp_path, nodes=3, pending=1)
    plan = tmp_path / "plan.json"
    plan.write_text('{"assignments": []}')
    argv = [command, snap, *([str(plan)] if command == "validate" else []), "--config", config(tmp_path, maxNodes=2)]
    code, out, err = run(capsys, *argv)
    assert (code, out, err) == (2, "", error(f"snapshot: nodes: 3 nodes exceed limits.maxNodes=2 ({HINT})"))


@pytest.mark.parametrize("command", ["schedule", "validate"])
def test_too_many_pending_pods_is_refused_before_the_context(command: str, tmp_path: Path, capsys, no_context) -> None:
    snap = cluster(tmp_path, nodes=1, pending=4)
    plan = tmp_path / "plan.json"
    plan.write_text('{"assignments": []}')
    argv = [command, snap, *([str(plan)] if command == "validate" else []), "--config", config(tmp_path, maxWindowPods=3)]
    code, out, err = run(capsys, *argv)
    assert (code, out, err) == (2, "", error(f"snapshot: pods: 4 pending pods exceed limits.maxWindowPods=3 ({HINT})"))


def test_at_the_limits_the_plan_is_made(tmp_path: Path, capsys) -> None:
    snap = cluster(tmp_path, nodes=2, pending=3)
    code, out, err = run(capsys, "schedule", snap, "-o", "json", "--config", config(tmp_path, maxNodes=2, maxWindowPods=3))
    assert (code, err) == (0, "")
    assert len(json.loads(out)["assignments"]) == 3


def test_other_schedulers_pods_count_only_when_taken(tmp_path: Path, capsys) -> None:
    snap = cluster(tmp_path, nodes=1, pending=3, others=2)
    cfg = config(tmp_path, maxWindowPods=3)
    code, out, err = run(capsys, "schedule", snap, "-o", "json", "--config", cfg)
    assert (code, err) == (0, "") and len(json.loads(out)["assignments"]) == 3
    code, _, err = run(capsys, "schedule", snap, "--all-pending", "--config", cfg)
    assert (code, err) == (2, error(f"snapshot: pods: 5 pending pods exceed limits.maxWindowPods=3 ({HINT})"))


def test_repack_refuses_too_many_movable_pods(tmp_path: Path, capsys, no_context) -> None:
    snap = cluster(tmp_path, nodes=2, running=4)
    code, out, err = run(capsys, "repack", snap, "--config", config(tmp_path, maxWindowPods=3))
    why = "repack places them all in one model"
    assert (code, out, err) == (2, "", error(f"snapshot: pods: 4 movable running pods exceed limits.maxWindowPods=3 ({why}; {HINT})"))


def test_repack_at_the_limit_runs(tmp_path: Path, capsys) -> None:
    snap = cluster(tmp_path, nodes=2, running=3)
    code, out, err = run(capsys, "repack", snap, "-o", "json", "--config", config(tmp_path, maxNodes=2, maxWindowPods=3))
    assert (code, err) == (0, "")
    assert json.loads(out)["before"]["active_nodes"] == 1


# --------------------------------------------------------------------------- bytes


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every text that reached the JSON or YAML parser (the config's, for these tests)."""
    import adapters.snapshot_io as io_module
    from adapters.reading import documents

    texts: list[str] = []
    # the parsers, where each reader calls them: documents (whole reading) and snapshot_io (streaming)
    for module, name in ((documents, "json_documents"), (documents, "yaml_documents"), (io_module, "yaml_documents")):
        original = getattr(module, name)

        def spy(text: str, *args: Any, _original: Any = original) -> Any:
            texts.append(text)
            return _original(text, *args)

        monkeypatch.setattr(module, name, spy)
    return texts


def only_config(texts: list[str]) -> bool:
    return all(text.startswith('{"limits"') for text in texts)


def test_too_large_snapshot_file_is_refused_unparsed(tmp_path: Path, capsys, parsed) -> None:
    snap = cluster(tmp_path, nodes=1, pending=1)
    size = os.path.getsize(snap)
    code, out, err = run(capsys, "schedule", snap, "--config", config(tmp_path, maxSnapshotBytes=size - 1))
    assert (code, out, err) == (2, "", error(f"{snap}: {size} bytes exceed limits.maxSnapshotBytes={size - 1} ({HINT})"))
    assert parsed and only_config(parsed)


def test_snapshot_file_at_the_byte_limit_runs(tmp_path: Path, capsys) -> None:
    snap = cluster(tmp_path, nodes=1, pending=1)
    code, _, err = run(capsys, "schedule", snap, "--config", config(tmp_path, maxSnapshotBytes=os.path.getsize(snap)))
    assert (code, err) == (0, "")


def test_default_bound_is_two_gibibytes(tmp_path: Path, capsys, parsed) -> None:
    """A sparse 3 GiB file: refused on its size alone, without reading it."""
    path = tmp_path / "huge.yaml"
    with path.open("wb") as f:
        f.truncate(3 * 1024**3)
    code, _, err = run(capsys, "schedule", str(path))
    assert (code, err) == (2, error(f"{path}: 3221225472 bytes exceed limits.maxSnapshotBytes=2147483648 (2 GiB; {HINT})"))
    assert parsed == []


def test_stdin_is_read_no_further_than_the_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, parsed) -> None:
    data = cluster(tmp_path, nodes=1, pending=1)
    stream = io.BytesIO(Path(data).read_bytes() + b"\n" * 100_000)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(stream))
    code, out, err = run(capsys, "schedule", "-", "--config", config(tmp_path, maxSnapshotBytes=1000))
    assert (code, out, err) == (2, "", error(f"<stdin>: more than 1000 bytes exceed limits.maxSnapshotBytes=1000 ({HINT})"))
    assert stream.tell() <= 1001  # stopped at the first byte past the bound
    assert only_config(parsed)


def test_validate_bounds_the_plan_too(tmp_path: Path, capsys) -> None:
    snap = cluster(tmp_path, nodes=1, pending=1)
    plan = tmp_path / "plan.json"
    plan.write_text('{"assignments": []}' + " " * 2000)
    cfg = config(tmp_path, maxSnapshotBytes=os.path.getsize(snap))
    code, _, err = run(capsys, "validate", snap, str(plan), "--config", cfg)
    size = os.path.getsize(plan)
    assert (code, err) == (2, error(f"{plan}: {size} bytes exceed limits.maxSnapshotBytes={os.path.getsize(snap)} ({HINT})"))


def test_config_file_has_a_fixed_bound(tmp_path: Path, capsys) -> None:
    path = tmp_path / "config.yaml"
    with path.open("wb") as f:
        f.truncate(CONFIG_LIMIT.max_bytes + 1)
    code, _, err = run(capsys, "schedule", "--config", str(path))
    size = CONFIG_LIMIT.max_bytes + 1
    assert (code, err) == (2, error(f"{path}: {size} bytes exceed 16777216 bytes (16 MiB; a scheduler config is a few kilobytes)"))


def test_a_pipe_is_read_in_bounded_chunks(tmp_path: Path) -> None:
    """A FIFO has no size to check first: reading stops one byte past the bound."""
    fifo = tmp_path / "snap.fifo"
    os.mkfifo(fifo)

    def writer() -> None:
        try:
            with fifo.open("wb") as f:
                f.write(b"x" * 5000)
        except BrokenPipeError:
            pass

    thread = threading.Thread(target=writer)
    thread.start()
    with pytest.raises(InputError) as info:
        read_bounded(fifo, "snap.fifo", SizeLimit(1000, "limits.maxSnapshotBytes"))
    thread.join(10)
    assert str(info.value) == f"snap.fifo: more than 1000 bytes exceed limits.maxSnapshotBytes=1000 ({HINT})"


def test_script_stdin_past_the_bound_exits_2(tmp_path: Path) -> None:
    cfg = config(tmp_path, maxSnapshotBytes=4096)
    done = subprocess.run([str(SCRIPT), "schedule", "-", "--config", cfg], input=b"# padding\n" * 1000,
                          capture_output=True, timeout=120, env={**os.environ, "CPSAT_DEBUG": "0"})
    assert done.returncode == 2
    assert done.stderr.decode() == error(f"<stdin>: more than 4096 bytes exceed limits.maxSnapshotBytes=4096 (4 KiB; {HINT})")


# --------------------------------------------------------------------------- the live scheduler


def test_live_windows_are_cut_at_the_window_limit(caplog: pytest.LogCaptureFixture) -> None:
    small = SchedulerConfig.model_validate({"limits": {"maxWindowPods": 100}})
    assert window_size(50, small) == 50
    with caplog.at_level(logging.INFO, logger="adapters.live"):
        assert window_size(800, small) == 100
    assert caplog.records[-1].levelno == logging.WARNING
    assert "window size 800 is above limits.maxWindowPods=100: windows take at most 100 pods" in caplog.text


def test_live_backlog_past_the_window_limit_is_bound_in_chunks(tmp_path: Path, capsys) -> None:
    """Seven pending pods, windows of at most two (the default window size is cut to the limit)."""
    snap = cluster(tmp_path, nodes=2, pending=7)
    status = main(["run", "--simulate", snap, "--arrival-rate", "0", "--engine", "greedy", "--no-leader-elect",
                   "--config", config(tmp_path, maxWindowPods=2)])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "bound 7 pod(s), evicted 0, left 0 unschedulable" in out

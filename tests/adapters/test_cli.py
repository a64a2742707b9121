"""The ``cpsat-scheduler`` command line: exit codes, error lines, output formats, stdin.

Most cases run in-process through ``main([...])``; a few run the installed console script in a
subprocess, which is what users run (real exit status, real pipes, no traceback on stderr).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from adapters.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
QUICKSTART = EXAMPLES / "snapshots" / "quickstart.yaml"
QUICKSTART_JSON = EXAMPLES / "snapshots" / "quickstart.json"
SCRIPT = Path(sys.executable).with_name("cpsat-scheduler")

CONTRACT_KEYS = {"assignments", "preemptions", "unschedulable", "stats"}
CONTRACT_STATS = {"engine", "status", "objective", "bound", "gap", "wall_time_s", "fallback", "fallback_reason"}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


NODE = "- {apiVersion: v1, kind: Node, metadata: {name: %s}, status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}}\n"


def snapshot(*items: str) -> str:
    return "apiVersion: v1\nkind: List\nitems:\n" + "".join(items)


def pod(spec: str = "", container: str = "", name: str = "web-1") -> str:
    return (
        f"- apiVersion: v1\n  kind: Pod\n  metadata: {{name: {name}, namespace: default}}\n"
        f"  spec: {{schedulerName: cpsat-scheduler, containers: [{{name: web, image: nginx{container}}}]{spec}}}\n"
    )


# --------------------------------------------------------------------------- bad input: exit 2


BAD_SNAPSHOTS = [
    pytest.param("kind: List\nitems:\n- a: b: c\n",
                 "{path}: invalid YAML: line 3, column 7: mapping values are not allowed in this context", id="malformed-yaml"),
    pytest.param('{"kind": "List", "items": [', "{path}: invalid JSON: line 1, column 28: Expecting value", id="malformed-json"),
    pytest.param("", "{path}: empty input: expected a List or Kubernetes objects", id="empty"),
    pytest.param("kind: List\nitems: {}\n", "{path}: items: expected a list, got a mapping", id="items-not-a-list"),
    pytest.param(snapshot("- {kind: Pod, metadata: {}, spec: {containers: [{name: a}]}}\n"),
                 "items[0] (Pod): metadata.name: required field is missing", id="missing-name"),
    pytest.param(snapshot("- {kind: Pod, metadata: {name: web-1}, spec: {}}\n"),
                 "pods/default/web-1: spec.containers: required field is missing", id="missing-containers"),
    pytest.param(snapshot(NODE % "n1", pod(container=", resources: {requests: {cpu: 12x}}")),
                 'pods/default/web-1: spec.containers[0].resources.requests.cpu: "12x" is not a quantity', id="malformed-quantity"),
    pytest.param(snapshot(pod(container=", resources: {requests: {memory: '-2Gi'}}")),
                 'pods/default/web-1: spec.containers[0].resources.requests.memory: "-2Gi" must be non-negative', id="negative-quantity"),
    pytest.param(snapshot(pod(", nodeSelector: {}, affinity: {podAffinity: {requiredDuringSchedulingIgnoredDuringExecution: "
                              "[{topologyKey: zone, labelSelector: {matchExpressions: [{key: app, operator: Equals}]}}]}}")),
                 "pods/default/web-1: spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector"
                 ".matchExpressions[0].operator: unknown value \"Equals\", expected 'In', 'NotIn', 'Exists' or 'DoesNotExist'",
                 id="unknown-operator"),
    pytest.param(snapshot("- {kind: Node, metadata: {name: n1}, spec: {taints: [{key: k, effect: NoScheduleAtAll}]}}\n"),
                 "nodes/n1: spec.taints[0].effect: unknown value \"NoScheduleAtAll\", expected 'NoSchedule', 'PreferNoSchedule' or 'NoExecute'",
                 id="unknown-taint-effect"),
    pytest.param(snapshot(pod(", priority: urgent")), 'pods/default/web-1: spec.priority: "urgent" is not an integer',
                 id="non-integer-priority"),
    pytest.param(snapshot(pod(", topologySpreadConstraints: [{maxSkew: 1, whenUnsatisfiable: DoNotSchedule}]")),
                 "pods/default/web-1: spec.topologySpreadConstraints[0].topologyKey: required field is missing",
                 id="spread-without-topology-key"),
    pytest.param(snapshot(NODE % "n1", NODE % "n1"), "nodes/n1: metadata.name: duplicate object in snapshot", id="duplicate-node"),
    pytest.param(snapshot(pod(), pod()), "pods/default/web-1: metadata.name: duplicate object in snapshot", id="duplicate-pod"),
    pytest.param(snapshot(pod(", priorityClassName: gold")), 'pods/default/web-1: spec.priorityClassName: priority class "gold" not found',
                 id="missing-priority-class"),
    pytest.param("a: &a [*a]\n", "{path}: invalid YAML: line 1, column 8: alias *a does not name a finished anchor", id="recursive-alias"),
]


@pytest.mark.parametrize(("text", "message"), BAD_SNAPSHOTS)
def test_bad_snapshot_exits_2_naming_object_and_field(text: str, message: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "snap.yaml", text)
    code, out, err = run(capsys, "schedule", path, "--engine", "greedy")
    assert (code, out) == (2, "")
    assert err == f"cpsat-scheduler: error: {message.format(path=path)}\n"


@pytest.mark.parametrize(("text", "message"), BAD_SNAPSHOTS[:3])
def test_validate_bad_snapshot_exits_2(text: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "snap.yaml", text)
    plan = write(tmp_path, "plan.json", '{"assignments": []}')
    code, _, err = run(capsys, "validate", path, plan)
    assert code == 2
    assert err == f"cpsat-scheduler: error: {message.format(path=path)}\n"


def test_missing_snapshot_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "no-such.yaml"
    code, _, err = run(capsys, "schedule", str(missing))
    assert (code, err) == (2, f"cpsat-scheduler: error: {missing}: cannot read: no such file\n")


BAD_CONFIGS = [
    pytest.param("solver: {timeLimitSeconds: -3}\n", "config: solver.timeLimitSeconds: -3 is below the minimum 0", id="negative-time-limit"),
    pytest.param("solver: {threads: 4}\n", "config: solver.threads: unknown key", id="unknown-key"),
    pytest.param("preemption: {pdb: sometimes}\n", "config: preemption.pdb: unknown value \"sometimes\", expected 'soft' or 'hard'",
                 id="unknown-pdb-mode"),
    pytest.param('solver: {parameters: "linearisation_level: 2"}\n',
                 'config: solver.parameters: not CP-SAT parameters: 1:1 : Message type "operations_research.sat.SatParameters" '
                 'has no field named "linearisation_level".', id="unknown-cpsat-parameter"),
    # a negative or endless node cost turned `repack --objective cost` into "cost -3 -> -3"
    pytest.param("repack: {instanceCost: {m5.xlarge: -1}}\n",
                 'config: repack.instanceCost["m5.xlarge"]: -1 is below the minimum 0', id="negative-instance-cost"),
    pytest.param("repack: {instanceCost: {m5.xlarge: .nan}}\n",
                 'config: repack.instanceCost["m5.xlarge"]: Input should be a finite number (got NaN)', id="nan-instance-cost"),
    # a string or a number where a boolean or an integer goes was taken ("no" turned preemption off)
    pytest.param('preemption: {enabled: "no"}\n', 'config: preemption.enabled: "no" is not a boolean', id="bool-as-string"),
    pytest.param("solver: {workers: true}\n", "config: solver.workers: true is not an integer", id="int-as-bool"),
    pytest.param("repack: {defaultNodeCost: .inf}\n",
                 "config: repack.defaultNodeCost: Input should be a finite number (got Infinity)", id="endless-node-cost"),
]


@pytest.mark.parametrize(("text", "message"), BAD_CONFIGS)
def test_bad_config_exits_2(text: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write(tmp_path, "config.yaml", text)
    code, _, err = run(capsys, "schedule", str(QUICKSTART), "--config", config)
    assert (code, err) == (2, f"cpsat-scheduler: error: {message}\n")


def test_expert_parameters_reach_the_solver(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # OR-tools 9.13+ wraps SatParameters in C++ (no protobuf DESCRIPTOR): the text must still apply.
    from models.config import SolverConfig
    from solver.cpsat.solve import _solver

    solver = _solver(SolverConfig(parameters="linearization_level: 0 symmetry_level: 3"), 1.0)
    assert (solver.parameters.linearization_level, solver.parameters.symmetry_level) == (0, 3)
    config = write(tmp_path, "config.yaml", 'solver: {parameters: "linearization_level: 0"}\n')
    code, out, _ = run(capsys, "schedule", str(QUICKSTART), "--config", config, "-o", "json")
    assert code == 0 and json.loads(out)["stats"]["engine"] == "cpsat"


def test_missing_config_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "schedule", "--config", str(tmp_path / "cfg.yaml"))
    assert (code, err) == (2, f"cpsat-scheduler: error: {tmp_path / 'cfg.yaml'}: cannot read: no such file\n")


def test_bad_plan_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = write(tmp_path, "plan.json", '{"assignments": [{"pod": "shop/x"}]}')
    code, _, err = run(capsys, "validate", str(QUICKSTART), plan)
    assert (code, err) == (2, "cpsat-scheduler: error: plan: assignments[0].node: required field is missing\n")


def test_validate_cannot_read_both_from_stdin(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "validate", "-", "-")
    assert (code, err) == (2, "cpsat-scheduler: error: PLAN: only one of SNAPSHOT and PLAN can be read from stdin\n")


def test_bad_stdin_is_named(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"kind: List\nitems: 3\n")))
    code, _, err = run(capsys, "schedule", "-")
    assert (code, err) == (2, "cpsat-scheduler: error: <stdin>: items: expected a list, got 3\n")


USAGE = [
    pytest.param(["schedule", "--engine", "quantum"], "invalid choice: 'quantum'", id="unknown-engine"),
    pytest.param(["schedule", "--output", "xml"], "invalid choice: 'xml'", id="unknown-output"),
    pytest.param(["schedule", "--time-limit", "-1"], "'-1' must be a finite number >= 0", id="negative-time-limit"),
    pytest.param(["schedule", "--time-limit", "soon"], "'soon' is not a number", id="time-limit-not-a-number"),
    pytest.param(["schedule", "--workers", "65"], "'65' must be at most 64", id="too-many-workers"),
    pytest.param(["schedule", "--seed", "1.5"], "'1.5' is not an integer", id="seed-not-an-integer"),
    pytest.param(["schedule", "a.yaml", "b.yaml"], "unrecognized arguments: b.yaml", id="two-snapshots"),
    pytest.param(["validate", "snap.yaml"], "the following arguments are required: PLAN", id="validate-without-plan"),
    pytest.param([], "the following arguments are required: COMMAND", id="no-command"),
    pytest.param(["reschedule"], "invalid choice: 'reschedule'", id="unknown-command"),
]


@pytest.mark.parametrize(("argv", "fragment"), USAGE)
def test_usage_errors_exit_2(argv: list[str], fragment: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, "")
    assert fragment in err and err.startswith("usage: cpsat-scheduler")


@pytest.mark.parametrize("argv", [["--help"], ["schedule", "--help"], ["validate", "--help"], ["--version"]],
                         ids=["help", "schedule-help", "validate-help", "version"])
def test_help_and_version_exit_0(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, *argv)
    assert code == 0 and "cpsat-scheduler" in out


# --------------------------------------------------------------------------- failures: 1, 130, 141


def raising(exc: BaseException):
    def schedule(*args: Any, **kwargs: Any) -> Any:
        raise exc
    return schedule


def test_internal_error_is_one_line_without_traceback(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("CPSAT_DEBUG", raising=False)
    monkeypatch.setattr("solver.decide", raising(RuntimeError("boom")))
    code, out, err = run(capsys, "schedule")
    assert (code, out, err) == (1, "", "cpsat-scheduler: internal error: RuntimeError: boom\n")


@pytest.mark.parametrize(("argv", "env"), [(["--debug", "schedule"], None), (["schedule", "--debug"], None), (["schedule"], "1")],
                         ids=["debug-flag", "debug-after-command", "debug-env"])
def test_debug_shows_the_traceback(argv: list[str], env: str | None, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    if env:
        monkeypatch.setenv("CPSAT_DEBUG", env)
    monkeypatch.setattr("solver.decide", raising(RuntimeError("boom")))
    code, _, err = run(capsys, *argv)
    assert code == 1
    assert "Traceback (most recent call last)" in err and err.endswith("cpsat-scheduler: internal error: RuntimeError: boom\n")


@pytest.mark.parametrize(
    ("exc", "code", "err"),
    [
        pytest.param(KeyboardInterrupt(), 130, "cpsat-scheduler: interrupted: no plan printed\n", id="ctrl-c"),
        pytest.param(BrokenPipeError(32, "Broken pipe"), 141, "", id="broken-pipe"),
    ],
)
def test_interrupt_and_broken_pipe(exc: BaseException, code: int, err: str, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("solver.decide", raising(exc))
    assert run(capsys, "schedule")[0::2] == (code, err)


def test_schedule_refuses_a_plan_the_validator_rejects(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import sys

    # The validator ``solver.decide`` replays every plan through.
    monkeypatch.setattr(sys.modules["solver.validate"], "validate",
                        lambda *a, **k: ["capacity: node worker-a-1 cpu over by 100m"])
    code, out, err = run(capsys, "schedule", "--engine", "greedy")
    assert (code, out) == (1, "")
    assert "refusing to print a plan that fails validation (1 violation(s))" in err
    assert "  capacity: node worker-a-1 cpu over by 100m\n" in err


# --------------------------------------------------------------------------- end to end (needs solver)


def plan_of(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    assert all(line.startswith("cpsat-scheduler: note: ") for line in err.splitlines()), err
    return json.loads(out)


@pytest.mark.parametrize("engine", ["greedy", "cpsat"])
def test_bundled_example_json_contract(engine: str, capsys: pytest.CaptureFixture[str]) -> None:
    plan = plan_of(capsys, "schedule", "--engine", engine, "--output", "json")
    assert CONTRACT_KEYS <= set(plan)
    assert CONTRACT_STATS <= set(plan["stats"])
    assert plan["stats"]["engine"] == engine
    assert all(set(a) >= {"pod", "node"} for a in plan["assignments"])
    assert all(set(p) >= {"pod", "node", "preemptor"} for p in plan["preemptions"])
    assert [u["pod"] for u in plan["unschedulable"]] == ["shop/search-indexer-0"]
    assert plan["unschedulable"][0]["message"].startswith("0/6 nodes are available: ")
    assert len(plan["assignments"]) == 10


def test_table_output_names_pods_and_stats(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "schedule", str(QUICKSTART), "--engine", "greedy")
    assert (code, err) == (0, "")
    assert out.startswith("ASSIGNED: 10 pods on 5 nodes\n")
    assert "ml/train-resnet-0-mcxj7" in out and "gpu-a-1" in out
    assert "UNSCHEDULABLE: 1 pod\n" in out and "shop/search-indexer-0  0/6 nodes are available:" in out
    assert out.rstrip().splitlines()[-1].startswith("engine greedy | status GREEDY | objective ")


def test_yaml_output_is_the_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    as_json = plan_of(capsys, "schedule", "--engine", "greedy", "-o", "json")
    code, out, _ = run(capsys, "schedule", "--engine", "greedy", "-o", "yaml")
    as_yaml = yaml.safe_load(out)
    assert code == 0
    for plan in (as_json, as_yaml):
        del plan["stats"]["wall_time_s"]
    assert as_yaml == as_json


def test_stdin_and_json_snapshot(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from_file = plan_of(capsys, "schedule", str(QUICKSTART), "--engine", "greedy", "-o", "json")
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(QUICKSTART_JSON.read_bytes())))
    from_stdin = plan_of(capsys, "schedule", "-", "--engine", "greedy", "-o", "json")
    assert from_stdin["assignments"] == from_file["assignments"]


@pytest.mark.parametrize(
    ("flags", "pending"),
    [
        pytest.param([], 11, id="ours"),
        pytest.param(["--all-pending"], 12, id="all-pending"),
        pytest.param(["--scheduler-name", "default-scheduler"], 1, id="other-scheduler-name"),
        pytest.param(["--scheduler-name", "nobody"], 0, id="nothing-pending"),
    ],
)
def test_which_pods_are_pending(flags: list[str], pending: int, capsys: pytest.CaptureFixture[str]) -> None:
    plan = plan_of(capsys, "schedule", "--engine", "greedy", "-o", "json", *flags)
    assert len(plan["assignments"]) + len(plan["unschedulable"]) == pending


def test_hint_when_only_other_schedulers_pods_wait(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "schedule", "--engine", "greedy", "--scheduler-name", "nobody")
    assert code == 0 and out.startswith("ASSIGNED: 0 pods on 0 nodes\n")
    assert err == (
        'cpsat-scheduler: note: no pending pod has schedulerName "nobody", but 12 pending pod(s) name another '
        "scheduler; --all-pending takes them\n"
    )


def test_flags_override_the_config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import solver

    seen = []
    real = solver.decide

    def spy(request: Any) -> Any:
        seen.append(request.config)
        return real(request)

    monkeypatch.setattr("solver.decide", spy)
    config = write(tmp_path, "c.yaml", "solver: {timeLimitSeconds: 7, workers: 2, seed: 3}\nschedulerName: nobody\n")
    plan_of(capsys, "schedule", "-o", "json", "--config", config)
    plan_of(capsys, "schedule", "-o", "json", "--config", config, "--time-limit", "1.5", "--workers", "1", "--seed", "9",
            "--scheduler-name", "cpsat-scheduler")
    file_only, flagged = seen
    assert (file_only.solver.time_limit_seconds, file_only.solver.workers, file_only.solver.seed, file_only.scheduler_name) == (
        7, 2, 3, "nobody")
    assert (flagged.solver.time_limit_seconds, flagged.solver.workers, flagged.solver.seed, flagged.scheduler_name) == (
        1.5, 1, 9, "cpsat-scheduler")


def test_validate_accepts_printed_plans_and_rejects_tampered_ones(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = plan_of(capsys, "schedule", "-o", "json")
    good = write(tmp_path, "plan.json", json.dumps(plan))
    code, out, err = run(capsys, "validate", str(QUICKSTART), good)
    assert (code, out, err) == (0, "OK: plan is valid (10 assignment(s), 0 preemption(s), 1 unschedulable)\n", "")

    # Every web replica onto the node where one already runs: required anti-affinity broken.
    for a in plan["assignments"]:
        if a["pod"].startswith("shop/web-"):
            a["node"] = "worker-b-1"
    bad = write(tmp_path, "bad.yaml", yaml.safe_dump(plan))
    code, out, err = run(capsys, "validate", str(QUICKSTART), bad)
    assert (code, err) == (1, "")
    assert out.count("\n") >= 3 and "worker-b-1" in out


# --------------------------------------------------------------------------- the installed script


def script(*argv: str, stdin: bytes | None = None, **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "CPSAT_DEBUG": "0"}
    return subprocess.run([str(SCRIPT), *argv], input=stdin, capture_output=True, env=env, timeout=120, **kwargs)


def test_script_bad_input_exit_2_without_traceback(tmp_path: Path) -> None:
    path = write(tmp_path, "snap.yaml", snapshot(pod(container=", resources: {requests: {cpu: 12x}}")))
    done = script("schedule", path)
    assert done.returncode == 2
    assert done.stderr.decode() == (
        'cpsat-scheduler: error: pods/default/web-1: spec.containers[0].resources.requests.cpu: "12x" is not a quantity\n'
    )


def test_script_usage_error_exit_2() -> None:
    done = script("schedule", "--engine", "quantum")
    assert done.returncode == 2 and b"invalid choice: 'quantum'" in done.stderr


def test_script_json_from_stdin() -> None:
    done = script("schedule", "-", "--engine", "greedy", "-o", "json", stdin=QUICKSTART_JSON.read_bytes())
    assert (done.returncode, done.stderr) == (0, b"")
    assert CONTRACT_KEYS <= set(json.loads(done.stdout))


@pytest.mark.parametrize("argv", [["schedule", "--engine", "greedy"], ["schedule", "-o", "json"]], ids=["table", "json"])
def test_script_closed_stdout_is_quiet(argv: list[str]) -> None:
    """Like `cpsat-scheduler ... | head` when head has already gone: no traceback, exit 141."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([str(SCRIPT), *argv], stdout=write_end, stderr=subprocess.PIPE, timeout=120)
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (141, b"")


def test_script_reader_gone_in_the_middle_of_a_large_result_exits_141(tmp_path: Path) -> None:
    """`schedule -o json | head -c 10` on a plan larger than a pipe holds: the reader goes after
    the first bytes, the write comes back short, and the command must not end 0 as if the whole
    plan had been delivered."""
    nodes = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}"},
              "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"}}} for i in range(20)]
    pods = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"web-{i:04d}", "namespace": "shop"},
             "spec": {"schedulerName": "cpsat-scheduler",
                      "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]},
             "status": {"phase": "Pending"}} for i in range(1500)]
    dump = tmp_path / "big.json"
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": nodes + pods}))
    read_end, write_end = os.pipe()
    try:
        proc = subprocess.Popen([str(SCRIPT), "schedule", str(dump), "--engine", "greedy", "-o", "json"],
                                stdout=write_end, stderr=subprocess.PIPE)
        os.close(write_end)
        assert os.read(read_end, 10)  # the result has begun
        os.close(read_end)
        _, err = proc.communicate(timeout=120)
    finally:
        for fd in (read_end, write_end):
            try:
                os.close(fd)
            except OSError:
                pass
    assert (proc.returncode, err) == (141, b"")


def test_python_dash_m_adapters() -> None:
    done = subprocess.run([sys.executable, "-m", "adapters", "--version"], capture_output=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith(b"cpsat-scheduler ")


# What only a decision needs: --version and --help must not pay for it at every start-up.
HEAVY_MODULES = ("ortools", "kubernetes", "pydantic", "numpy", "networkx", "solver", "yaml")


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["run", "--help"], ["bench", "--help"]])
def test_start_up_loads_no_solver_client_or_models(argv: list[str]) -> None:
    """`--version` and `--help` print without importing the solver, OR-tools, the Kubernetes client
    or the pydantic models (they once took ~4.5 s to start); the command still answers in full."""
    code = (
        "import sys\n"
        "from adapters.cli import main\n"
        f"status = main({argv!r})\n"
        f"heavy = sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY_MODULES!r}))\n"
        "print('STATUS', status, 'HEAVY', ','.join(heavy))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    last = done.stdout.decode().splitlines()[-1]
    assert last == "STATUS 0 HEAVY ", done.stdout.decode() + done.stderr.decode()
    if argv == ["--version"]:
        assert done.stdout.startswith(b"cpsat-scheduler ")
    else:
        assert b"usage: cpsat-scheduler" in done.stdout


# --------------------------------------------------------------------------- --bound


def test_bound_proves_how_far_the_plan_is_from_the_best_by_priority(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One 4-cpu node, full with a running pod of priority 0, and six 1-cpu pods: two of priority 10
    (they may evict it), four of priority 0 (they may not). No plan places more than four, two of
    them the priority-10 pods; the plan reaches both (the first evicts, the room left is anyone's),
    so the gap is 0 at each tier."""
    running = ("- apiVersion: v1\n  kind: Pod\n  metadata: {name: old, namespace: default}\n"
               "  spec: {nodeName: n1, priority: 0, containers: [{name: c, resources: {requests: {cpu: '4'}}}]}\n"
               "  status: {phase: Running}\n")
    pending = [pod(f", priority: {prio}", ", resources: {requests: {cpu: '1'}}", name=f"p{prio}-{i}")
               for prio, count in ((10, 2), (0, 4)) for i in range(count)]
    path = write(tmp_path, "s.yaml", snapshot(NODE % "n1", running, *pending))

    code, out, _ = run(capsys, "schedule", path, "-o", "json")
    assert code == 0 and json.loads(out)["stats"]["tier_bound"] is None  # only when asked

    code, out, _ = run(capsys, "schedule", path, "--bound", "-o", "json")
    assert code == 0
    plan = json.loads(out)
    placed = [a["pod"] for a in plan["assignments"]]
    assert plan["stats"]["tier_bound"] == {"10": 2, "0": 4}
    assert plan["stats"]["tier_gap"] == {"10": 2 - sum("p10" in p for p in placed), "0": 4 - len(placed)} == {"10": 0, "0": 0}

    code, out, _ = run(capsys, "schedule", path, "--bound")
    assert code == 0 and "placed by priority against CP-SAT's bound: >= 10: 2 of at most 2, >= 0: 4 of at most 4" in out

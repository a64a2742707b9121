"""Values past what a field can hold are bad input (exit 2, one line naming the object and the
field), not an internal error from deep in the solver."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.adapters.test_cli_mistakes import NODE, listing, run, write


def pod(spec_extra: str = "") -> str:
    return ("- {apiVersion: v1, kind: Pod, metadata: {name: web-1, namespace: default}, spec: {schedulerName: "
            f"cpsat-scheduler, {spec_extra}containers: [{{name: web, image: nginx}}]}}}}\n")


def test_a_pod_priority_past_int32_is_bad_input(capsys, tmp_path: Path) -> None:
    snap = write(tmp_path, "snap.yaml", listing(NODE, pod(f"priority: {10**30}, ")))
    code, out, err = run(capsys, "schedule", snap)
    assert code == 2 and out == ""
    assert err == [f"cpsat-scheduler: error: pods/default/web-1: spec.priority: {10**30} is above the maximum 2147483647"]


def test_a_max_skew_past_int32_is_bad_input(capsys, tmp_path: Path) -> None:
    spread = (f"topologySpreadConstraints: [{{maxSkew: {2**70}, topologyKey: kubernetes.io/hostname, "
              "whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: web}}}], ")
    node = NODE.replace("metadata: {name: n1}", "metadata: {name: n1, labels: {kubernetes.io/hostname: n1}}")
    code, out, err = run(capsys, "schedule", write(tmp_path, "snap.yaml", listing(node, pod(spread))))
    assert code == 2 and out == ""
    assert err == [f"cpsat-scheduler: error: pods/default/web-1: spec.topologySpreadConstraints[0].maxSkew: {2**70} "
                   "is above the maximum 2147483647"]


def test_a_solver_seed_past_int32_is_bad_input(capsys, tmp_path: Path) -> None:
    snap = write(tmp_path, "snap.yaml", listing(NODE, pod()))
    for command in ("schedule", "repack"):
        code, out, err = run(capsys, command, snap, "--seed", str(2**31))
        assert code == 2 and out == "", (command, err)
        assert err[-1] == f"cpsat-scheduler {command}: error: argument --seed: '{2**31}' must be at most 2147483647"
    config = write(tmp_path, "config.yaml", f"solver:\n  seed: {2**31}\n")
    code, out, err = run(capsys, "schedule", snap, "--config", config)
    assert code == 2 and out == ""
    assert err == [f"cpsat-scheduler: error: config: solver.seed: {2**31} is above the maximum 2147483647"]



@pytest.mark.parametrize("flag", ["--max-moves", "--target-free"])
def test_a_repack_count_past_int32_is_a_usage_error_not_an_internal_one(capsys, tmp_path, flag: str) -> None:
    """CP-SAT's bounds refused it as an internal error (exit 1) after the snapshot was read."""
    code, out, err = run(capsys, "repack", "examples/snapshots/quickstart.yaml", flag, "99999999999999999999")
    assert (code, out) == (2, "")
    assert err[-1] == f"cpsat-scheduler repack: error: argument {flag}: '99999999999999999999' must be at most 2147483647"

def test_a_time_limit_past_what_a_wait_can_take_is_bad_input(capsys, tmp_path: Path) -> None:
    snap = write(tmp_path, "snap.yaml", listing(NODE, pod()))
    code, out, err = run(capsys, "schedule", snap, "--time-limit", "1e12")
    assert code == 2 and out == ""
    assert err[-1] == "cpsat-scheduler schedule: error: argument --time-limit: '1e12' must be at most 1000000000 seconds"
    config = write(tmp_path, "config.yaml", "solver:\n  timeLimitSeconds: .inf\n")
    code, out, err = run(capsys, "schedule", snap, "--config", config)
    assert code == 2 and out == ""
    assert err == ["cpsat-scheduler: error: config: solver.timeLimitSeconds: Infinity is above the maximum 1000000000"]


# More digits than Python turns into an int (sys.get_int_max_str_digits, 4,300 by default).
HUGE = "9" * 5000


def _too_long(path: str, reader: str = "JSON") -> str:
    """The line a user sees for the number ``HUGE`` (its sign included) that ends the file at
    ``path``: any ``HUGE`` before it is in a string."""
    text = Path(path).read_text()
    at = text.rindex(HUGE)
    at -= text[at - 1] == "-"
    line = text.count("\n", 0, at) + 1
    column = at - text.rfind("\n", 0, at)
    return (f"cpsat-scheduler: error: {path}: invalid {reader}: line {line}, column {column}: "
            "an integer of 5000 digits is too long (at most 4300 are read)")


def test_an_integer_too_long_to_read_is_bad_input_in_every_json_input(capsys, tmp_path: Path) -> None:
    """The snapshot, a plan for validate, a shapes file and an --add-nodes file each give the file,
    the line and column of the number and its length, never its 5,000 digits nor exit 1."""
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n2"},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}
    snap = write(tmp_path, "snap.json", '{"apiVersion": "v1", "kind": "List", "items": [\n'
                 f'{json.dumps(node)},\n{{"apiVersion": "v1", "kind": "PriorityClass", "metadata": {{"name": "p"}}, '
                 f'"description": "{HUGE}", "value": {HUGE}}}]}}\n')
    plan = write(tmp_path, "plan.json", f'{{"assignments": [],\n "stats": {{"objective": {HUGE}}}}}\n')
    shapes = write(tmp_path, "shapes.json", f'[{{"name": "m5", "allocatable": {{"cpu": "4"}}, "cost": {HUGE}}}]\n')
    new_node = write(tmp_path, "node.json", json.dumps(node)[:-1] + f', "spec": {{"x": -{HUGE}}}}}\n')
    good = write(tmp_path, "good.yaml", listing(NODE, pod()))
    for argv, path in [
        (("schedule", snap), snap),
        (("validate", good, plan), plan),
        (("provision", good, "--shapes", shapes), shapes),
        (("what-if", good, "--add-nodes", f"2:@{new_node}"), new_node),
    ]:
        code, out, err = run(capsys, *argv)
        assert (code, out) == (2, ""), (argv, err)
        line = _too_long(path)
        if argv[0] == "what-if":  # the flag that read the file is named too
            line = line.replace(f"{path}: ", f"{path}: --add-nodes: does not read as one Node: ", 1)
        assert err == [line], argv


def test_a_yaml_integer_too_long_to_read_is_named_in_one_short_line(capsys, tmp_path: Path) -> None:
    """YAML refused it already, but its line repeated all 5,000 digits."""
    snap = write(tmp_path, "snap.yaml", listing(NODE, pod(f"priority: {HUGE}, ")))
    code, out, err = run(capsys, "schedule", snap)
    assert (code, out) == (2, "")
    assert err == [_too_long(snap, reader="YAML")]


def test_the_bench_generators_seed_takes_any_size(capsys) -> None:
    """Only Python's random reads it: the int32 bound of the flags CP-SAT reads does not apply."""
    code, _, err = run(capsys, "bench", "--seed", str(2**32), "--help")
    assert code == 0, err


def test_flag_values_of_thousands_of_digits_are_one_short_line(capsys, tmp_path: Path) -> None:
    """int() refuses past 4,300 digits: a --priority of 5,000 exited 1; a --dump seed of 300 made a
    file name too long; the lines quoted the whole number."""
    digits = "9" * 5000
    snap = write(tmp_path, "snap.yaml", listing(NODE, pod()))
    for argv in (("what-if", snap, "--priority", f"default/web-1={digits}"),
                 ("what-if", snap, "--relax-pdb", f"default/web={digits}%"),
                 ("what-if", snap, "--add-nodes", f"{digits}:n1"),
                 ("bench", "--seed", digits, "--help")):
        code, out, err = run(capsys, *argv)
        assert (code, out) == (2, ""), (argv[:3], err)
        assert len(err[-1]) < 500, argv[:3]  # (argparse's usage lines come first for a flag's own type)

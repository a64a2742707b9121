"""Parser fuzzing through the command line: mutated snapshots never end in a traceback.

Each example starts from a valid snapshot (a rich hand-written List touching most fields the
parser reads, or the bundled quickstart dump), applies one to three mutations — a value of the
wrong type at a random path, a missing field, a huge number, unicode (lone surrogates and
non-characters included), deep nesting, a duplicated object — serialises it as JSON, YAML or a
JSON stream, and may then damage the text itself (truncation, inserted or deleted bytes), or is
replaced by random bytes outright. The result goes through ``adapters.cli.main(["schedule", ...])``
with stdout and stderr encoded as a terminal's are (strict UTF-8 out, backslashreplace err), and:

* the exit status is 0 (the mutation left valid input, and a plan was printed) or 2;
* nothing on stderr looks like a traceback or an internal error;
* with status 2 there is exactly one ``cpsat-scheduler: error: ...`` line, and the same input read
  by ``read_snapshot`` raises an ``InputError`` naming the object — the file for syntax errors —
  and, for a named Kubernetes object, the field.

The default run tries a few hundred inputs; ``pytest -m long`` tries 20,000 and prints the counts.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import re
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from adapters.cli import main, one_line
from adapters.snapshot_io import read_snapshot
from models.snapshot import DEFAULT_SCHEDULER_NAME
from models import InputError

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "snapshots" / "quickstart.yaml"

DEFAULT_EXAMPLES = 300
LONG_EXAMPLES = 20_000

# A small cluster whose objects use most of what the parser reads: quantities of every kind,
# taints, tolerations, node and pod affinity, spread, ports, init and sidecar containers,
# overhead, priority classes, PDBs, pod groups and a namespace.
RICH: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "List",
    "items": [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "batch", "labels": {"team": "ml"}}},
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
         "value": 1000, "preemptionPolicy": "PreemptLowerPriority"},
        {"apiVersion": "v1", "kind": "Node",
         "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1", "topology.kubernetes.io/zone": "a"}},
         "spec": {"taints": [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]},
         "status": {"allocatable": {"cpu": "3920m", "memory": "15056736Ki", "pods": "110",
                                    "ephemeral-storage": "76224326324", "nvidia.com/gpu": "2"},
                    "images": [{"names": ["busybox:1"], "sizeBytes": 1234567}]}},
        {"apiVersion": "v1", "kind": "Node",
         "metadata": {"name": "n2", "labels": {"kubernetes.io/hostname": "n2", "topology.kubernetes.io/zone": "b"}},
         "spec": {"unschedulable": False},
         "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": 110}}},
        {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": "db-0", "namespace": "default", "labels": {"app": "db"},
                      "creationTimestamp": "2024-01-01T00:00:00Z"},
         "spec": {"nodeName": "n2", "priority": 100, "schedulerName": "default-scheduler",
                  "containers": [{"name": "db", "resources": {"requests": {"cpu": "1", "memory": "2Gi"}},
                                  "ports": [{"containerPort": 5432, "hostPort": 5432}]}]},
         "status": {"phase": "Running", "startTime": "2024-01-01T00:01:00Z"}},
        {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": "web-0", "namespace": "default", "labels": {"app": "web"},
                      "creationTimestamp": "2024-01-01T00:02:00Z",
                      "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "controller": True}]},
         "spec": {"schedulerName": "cpsat-scheduler", "priorityClassName": "high",
                  "nodeSelector": {"topology.kubernetes.io/zone": "b"},
                  "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
                  "affinity": {
                      "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                          {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a", "b"]}]}]},
                          "preferredDuringSchedulingIgnoredDuringExecution": [
                              {"weight": 10, "preference": {"matchExpressions": [{"key": "disk", "operator": "Exists"}]}}]},
                      "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                          {"weight": 5, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "db"}},
                                                            "topologyKey": "topology.kubernetes.io/zone"}}]},
                      "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                          {"labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]},
                           "topologyKey": "kubernetes.io/hostname"}]}},
                  "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                                 "whenUnsatisfiable": "DoNotSchedule", "minDomains": 2,
                                                 "labelSelector": {"matchLabels": {"app": "web"}}}],
                  "initContainers": [{"name": "init", "resources": {"requests": {"cpu": "2"}}},
                                     {"name": "proxy", "restartPolicy": "Always",
                                      "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}],
                  "containers": [{"name": "web", "image": "busybox:1",
                                  "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"cpu": "1"}},
                                  "ports": [{"containerPort": 8080, "hostPort": 8080, "protocol": "TCP"}]}],
                  "overhead": {"cpu": "10m"}},
         "status": {"phase": "Pending"}},
        {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": "train-0", "namespace": "batch",
                      "labels": {"app": "train", "scheduling.x-k8s.io/pod-group": "train"}},
         "spec": {"schedulerName": "cpsat-scheduler", "priority": 10, "preemptionPolicy": "Never",
                  "containers": [{"name": "t", "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "1"}}}],
                  "tolerations": [{"operator": "Exists"}]}},
        {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "db", "namespace": "default"},
         "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "db"}}}, "status": {"disruptionsAllowed": 0}},
        {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": {"name": "train", "namespace": "batch"},
         "spec": {"minMember": 1, "scheduleTimeoutSeconds": 60}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}},
    ],
}


def _load_seeds() -> dict[str, Any]:
    seeds = {"rich": RICH}
    if QUICKSTART.is_file():
        # Its first objects (nodes, then pods) keep each mutation cheap; the whole dump is 88 KB.
        dump = yaml.safe_load(QUICKSTART.read_text())
        seeds["quickstart"] = {**dump, "items": dump["items"][:16]}
    return seeds


SEEDS = _load_seeds()


# --------------------------------------------------------------------------- mutations


# Deepest path a mutation may target. Kubernetes objects stay far above it; what lies below is
# an earlier "nest" mutation, which a second one need not dig into.
MAX_PATH_DEPTH = 64


def _paths(node: Any) -> list[tuple]:
    """Every path into ``node`` down to MAX_PATH_DEPTH, in document order (iteratively: after a
    "nest" mutation the document is deeper than Python's recursion limit)."""
    out: list[tuple] = []
    pending: list[tuple[tuple, Any]] = [((), node)]
    while pending:
        prefix, value = pending.pop()
        out.append(prefix)
        if len(prefix) >= MAX_PATH_DEPTH:
            continue
        if isinstance(value, dict):
            children = [(prefix + (k,), v) for k, v in value.items()]
        elif isinstance(value, list):
            children = [(prefix + (i,), v) for i, v in enumerate(value)]
        else:
            continue
        pending.extend(reversed(children))
    return out


def _nest(depth: int, inner: Any, as_list: bool) -> Any:
    for _ in range(depth):
        inner = [inner] if as_list else {"a": inner}
    return inner


# Unicode that tends to break things: lone surrogates, non-characters, bidi controls, NUL.
NASTY_TEXT = st.one_of(
    st.text(max_size=20),
    st.sampled_from(["\ud800", "\udfff", "x\ud83d", "\ufffe", "\uffff", "\u202e", "\x00", "\u0000web",
                     "Ｗｅｂ", "\U0001f600", "é" * 300, "a" * 5000, "", " ", "\n", "---", "...", "*a", "&a", "!!str"]),
)
HUGE = st.one_of(
    st.integers(min_value=-(10**40), max_value=10**40),
    st.sampled_from([2**31, 2**62, 2**63, 2**64, -(2**63) - 1, 10**400]),
    st.builds(lambda k: f"1e{k}", st.integers(-400, 400)),
    st.builds(lambda k, s: f"{10**k}{s}", st.integers(0, 40), st.sampled_from(["", "m", "k", "Mi", "Gi", "Ei", "E", "n"])),
    st.sampled_from(["9" * 4000, "0." + "0" * 400 + "1", "1e999999999", "-1", "-0", "+5", ".5", "5.", "0x10", "1_000"]),
    st.floats(allow_nan=True, allow_infinity=True),
)
JUNK = st.one_of(
    st.none(), st.booleans(), HUGE, NASTY_TEXT,
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
    st.just([]), st.just({}), st.just([None]), st.just({"": None}),
)


@dataclass
class Input:
    kind: str  # which mutations made it, for the failure report
    data: bytes
    ops: tuple[str, ...] = ()  # the mutations, for the counts


@st.composite
def mutated_inputs(draw: Any) -> Input:
    if draw(st.integers(0, 19)) == 0:
        return Input("random-bytes", draw(st.binary(max_size=400)), ("random-bytes",))
    seed_name = draw(st.sampled_from(sorted(SEEDS)))
    doc = copy.deepcopy(SEEDS[seed_name])
    ops = []
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(doc) if p]
        path = paths[draw(st.integers(0, len(paths) - 1))]
        parent = doc
        for step in path[:-1]:
            parent = parent[step]
        last = path[-1]
        op = draw(st.sampled_from(("retype", "retype", "delete", "huge", "unicode", "unicode-key", "nest", "duplicate")))
        ops.append(op)
        if op == "retype":
            # A copy: st.just hands out the same list or dict every time, and a later mutation
            # of it would change what every later example draws (hypothesis calls that flaky).
            parent[last] = copy.deepcopy(draw(JUNK))
        elif op == "huge":
            parent[last] = draw(HUGE)
        elif op == "unicode":
            parent[last] = draw(NASTY_TEXT)
        elif op == "delete":
            if isinstance(parent, dict):
                del parent[last]
            else:
                parent.pop(last)
        elif op == "unicode-key" and isinstance(parent, dict):
            value = parent.pop(last)
            parent[draw(NASTY_TEXT)] = value
        elif op == "nest":
            parent[last] = _nest(draw(st.integers(1, 1200)), parent[last], draw(st.booleans()))
        elif op == "duplicate" and isinstance(parent, list):
            # A shallow copy: the duplicate is the point, and a deep copy of an earlier "nest"
            # would overflow Python's recursion limit.
            parent.insert(last, copy.copy(parent[last]))
    fmt = draw(st.sampled_from(("json", "yaml", "stream")))
    fmt, text = _serialise(doc, fmt)
    data = text.encode("utf-8", "surrogatepass")
    damage = draw(st.sampled_from(("none", "none", "truncate", "insert", "cut")))
    if damage == "truncate" and data:
        data = data[: draw(st.integers(0, len(data) - 1))]
    elif damage == "insert":
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.binary(min_size=1, max_size=8) | st.sampled_from([b"{", b"[", b"]", b":", b"\n- ", b"&a ", b"*a", b"\t", b"'", b'"'])) + data[at:]
    elif damage == "cut" and data:
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + data[at + draw(st.integers(1, 64)):]
    if damage != "none":
        ops.append(damage)
    return Input(f"{seed_name}:{'+'.join(ops)}:{fmt}:{damage}", data, tuple(ops))


# Deepest document handed to json.dumps and yaml.dump. Both recurse, and whether a deeper one
# fits under the recursion limit depends on how deep the stack already is, which differs
# between hypothesis's runs of one example (and the damage drawn next depends on the text).
# Deeper documents, which only "nest" makes, are written by _deep_json, which does not recurse.
SAFE_DEPTH = 200


def _serialise(doc: Any, fmt: str) -> tuple[str, str]:
    """``(format, text)``: the document as JSON, YAML or a JSON stream of its items."""
    if _depth(doc) > SAFE_DEPTH:
        return "deep-json", _deep_json(doc)
    try:
        if fmt == "json":
            return fmt, json.dumps(doc)
        if fmt == "yaml":
            return fmt, yaml.dump(doc, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), allow_unicode=True)
        items = doc.get("items") if isinstance(doc, dict) else None
        return fmt, "\n".join(json.dumps(i) for i in items) if isinstance(items, list) else json.dumps(doc)
    except (RecursionError, ValueError, yaml.YAMLError):
        return "json-fallback", json.dumps(doc, default=str) if _shallow(doc) else "[]"


def _depth(node: Any) -> int:
    """Nesting depth of a document (iteratively)."""
    deepest, pending = 0, [(node, 1)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, (dict, list)):
            deepest = max(deepest, depth)
            pending.extend((v, depth + 1) for v in (value.values() if isinstance(value, dict) else value))
    return deepest


def _deep_json(node: Any) -> str:
    """``json.dumps(node)`` without recursion, for documents deeper than SAFE_DEPTH."""
    out: list[str] = []
    pending: list[Any] = [node]
    while pending:
        value = pending.pop()
        if isinstance(value, _Text):
            out.append(value)
        elif isinstance(value, dict):
            parts: list[Any] = [_Text("{")]
            for i, (key, item) in enumerate(value.items()):
                parts += [_Text(("," if i else "") + json.dumps(str(key)) + ":"), item]
            pending.extend(reversed([*parts, _Text("}")]))
        elif isinstance(value, list):
            parts = [_Text("[")]
            for i, item in enumerate(value):
                parts += [_Text(",")] if i else []
                parts.append(item)
            pending.extend(reversed([*parts, _Text("]")]))
        else:
            out.append(json.dumps(value, default=str))
    return "".join(out)


class _Text(str):
    """Punctuation already written as JSON, told apart from string values on _deep_json's stack."""


def _shallow(doc: Any) -> bool:
    try:
        json.dumps(doc)
        return True
    except (RecursionError, ValueError):
        return False


# --------------------------------------------------------------------------- running the CLI


@dataclass
class Run:
    status: int
    out: str
    err: str


def run_cli(path: Path, output: str) -> Run:
    """``cpsat-scheduler schedule PATH -o OUTPUT`` in-process, with terminal-like encodings."""
    out_bytes, err_bytes = io.BytesIO(), io.BytesIO()
    out = io.TextIOWrapper(out_bytes, encoding="utf-8", errors="strict")
    err = io.TextIOWrapper(err_bytes, encoding="utf-8", errors="backslashreplace")
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(["schedule", str(path), "-o", output, "--time-limit", "2", "--workers", "1"])
        out.flush()
        err.flush()
    return Run(status, out_bytes.getvalue().decode("utf-8", "replace"), err_bytes.getvalue().decode("utf-8", "replace"))


@dataclass
class FuzzTally:
    examples: int = 0
    status: Counter = field(default_factory=Counter)
    mutations: Counter = field(default_factory=Counter)
    started: float = field(default_factory=time.monotonic)

    def line(self) -> str:
        ops = ", ".join(f"{k} {v}" for k, v in self.mutations.most_common())
        return (
            f"parser fuzzing: {self.examples} inputs through `cpsat-scheduler schedule`; exit 0: {self.status[0]}, "
            f"exit 2: {self.status[2]}, any other exit or traceback: 0; mutations: {ops}; "
            f"{time.monotonic() - self.started:.0f} s"
        )


ERROR_LINE = re.compile(r"^cpsat-scheduler: error: (?P<message>.+)$")
NAMED_OBJECT = re.compile(r"^(nodes|pods|poddisruptionbudgets|priorityclasses|podgroups|namespaces)/")
POSITION = re.compile(r"^(items|documents)\[\d+\]")


def check_input(sample: Input, path: Path, output: str, tally: FuzzTally) -> None:
    path.write_bytes(sample.data)
    note(f"mutation {sample.kind}; output {output}; input starts {sample.data[:300]!r}")
    result = run_cli(path, output)
    note(f"exit {result.status}; stderr {result.err[-2000:]!r}")
    assert "Traceback" not in result.err
    assert "internal error" not in result.err
    assert result.status in (0, 2), f"exit {result.status}"
    if result.status == 0:
        assert result.out, "exit 0 without a plan on stdout"
    else:
        lines = [ln for ln in result.err.splitlines() if ln.startswith("cpsat-scheduler: error:")]
        assert len(lines) == 1, result.err
        assert result.err.endswith(lines[0] + "\n"), "the error is not one line"
        assert ERROR_LINE.match(lines[0])
        with pytest.raises(InputError) as info:
            read_snapshot(path).decidable(DEFAULT_SCHEDULER_NAME)  # what `schedule` reads
        exc = info.value
        assert exc.obj, f"no object named: {exc}"
        assert exc.problem
        if NAMED_OBJECT.match(exc.obj) or POSITION.match(exc.obj):
            # An object that parsed far enough to be named: the field must be named too, unless
            # the object as a whole is what is wrong (not a mapping, nested too deeply).
            whole = exc.problem.startswith(("expected a Kubernetes object", "nested too deeply"))
            assert exc.field or whole, f"no field named: {exc}"
        else:
            assert exc.obj in (str(path), "snapshot"), f"unexpected object: {exc}"
        assert one_line(str(exc)).encode("utf-8", "backslashreplace").decode("utf-8") in lines[0]
    tally.examples += 1
    tally.status[result.status] += 1
    for op in sample.ops:
        tally.mutations[op] += 1


_SETTINGS = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)


@pytest.fixture
def fuzz_tally(capsys):
    t = FuzzTally()
    yield t
    with capsys.disabled():
        print("\n" + t.line())


def _fuzz(n: int, tally: FuzzTally, **extra: Any) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "snapshot.yaml"

        @settings(max_examples=n, **_SETTINGS, **extra)
        @given(mutated_inputs(), st.sampled_from(("json", "yaml", "table")))
        def run(sample: Input, output: str) -> None:
            check_input(sample, path, output, tally)

        run()


def test_mutated_snapshots_exit_0_or_2_with_a_named_field(fuzz_tally):
    _fuzz(DEFAULT_EXAMPLES, fuzz_tally)
    assert fuzz_tally.examples >= DEFAULT_EXAMPLES


@pytest.mark.long
def test_mutated_snapshots_long(fuzz_tally):
    _fuzz(LONG_EXAMPLES, fuzz_tally, database=None)
    assert fuzz_tally.examples >= LONG_EXAMPLES


def test_mutation_paths_survive_nesting_past_the_recursion_limit():
    # Two "nest" mutations on one path once made the generator itself overflow (the long run).
    doc = {"items": [_nest(sys.getrecursionlimit() * 2, {"kind": "Pod"}, as_list=True)]}
    paths = _paths(doc)
    assert paths[:3] == [(), ("items",), ("items", 0)]
    assert max(len(p) for p in paths) == MAX_PATH_DEPTH


def test_deep_documents_are_written_without_recursion():
    # json.dumps and yaml.dump recurse: past SAFE_DEPTH the text is written iteratively, so the
    # same draws always give the same bytes, whatever the stack depth at the time.
    depth = sys.getrecursionlimit() * 2
    fmt, text = _serialise({"items": [_nest(depth, {"kind": "Pod"}, as_list=True)]}, "yaml")
    assert fmt == "deep-json"
    assert text == '{"items":[' + "[" * depth + '{"kind":"Pod"}' + "]" * depth + "]}"
    assert json.loads(_deep_json(RICH)) == RICH


@pytest.mark.parametrize(
    "text",
    [
        pytest.param('{"kind": "Pod", "metadata": {"name": "\\ud800"}, "spec": {"containers": [{"name": "c"}], '
                     '"schedulerName": "cpsat-scheduler"}}', id="lone-surrogate-pod-name"),
        pytest.param('{"kind": "Node", "metadata": {"name": "n\\u202e"}, "status": {"allocatable": {"cpu": "1", "pods": "1"}}}',
                     id="bidi-node-name"),
    ],
)
@pytest.mark.parametrize("output", ["json", "yaml", "table"])
def test_odd_names_print_in_every_format(text, output, tmp_path):
    path = tmp_path / "snap.json"
    path.write_text(text, encoding="utf-8")
    result = run_cli(path, output)
    assert result.status in (0, 2), result.err
    assert "internal error" not in result.err and "Traceback" not in result.err


# Inputs the fuzzer found, reduced: each once broke the one-line, object-and-field contract.
FOUND = [
    pytest.param(
        b'{"kind": "Pod", "metadata": {"name": "web", "namespace": "default"}, "spec": {"schedulerName": '
        b'"cpsat-scheduler", "tolerations": [{"key": "\\ud800", "operator": "Exists"}], "containers": [{"name": "c"}]}}',
        "cpsat-scheduler: error: pods/default/web: spec.tolerations[0].key: not valid Unicode: a lone UTF-16 "
        "surrogate (\\ud800-\\udfff escape)",
        id="lone-surrogate-was-exit-1-at-plan-output",
    ),
    pytest.param(
        b'{"kind": "Node", "metadata": {"name": "n2"}, "status": {"allocatable": {"cpu": "\\ud800"}}}',
        "cpsat-scheduler: error: nodes/n2: status.allocatable.cpu: not valid Unicode: a lone UTF-16 "
        "surrogate (\\ud800-\\udfff escape)",
        id="lone-surrogate-was-cannot-be-read-without-field",
    ),
    pytest.param(
        b'{"kind": "Node", "metadata": {"name": "n2"}, "status": {"allocatable": {"cpu": "\\r\\nforged line"}}}',
        'cpsat-scheduler: error: nodes/n2: status.allocatable.cpu: "\\x0d\\x0aforged line" is not a quantity',
        id="control-characters-were-printed-raw",
    ),
    pytest.param(b"\x00", "cpsat-scheduler: error: {path}: not a YAML or JSON text: a NUL byte at offset 0",
                 id="nul-byte-was-a-two-line-error"),
]


@pytest.mark.parametrize(("data", "want"), FOUND)
def test_inputs_the_fuzzer_found(data, want, tmp_path):
    path = tmp_path / "snap.json"
    path.write_bytes(data)
    result = run_cli(path, "table")
    assert result.status == 2
    assert result.err == want.format(path=path) + "\n"

"""Nothing in ``solver/`` keeps state between calls at module level: what is kept between windows
lives in the caller's ``SolverMemory`` (``solver/memory.py``). A module-level name that some
function of its module writes (``global``, an item or attribute set on it, a mutating method
called on it) is such state; the few left are named here with the reason they may stay."""

from __future__ import annotations

import ast
from pathlib import Path

SOLVER = Path(__file__).resolve().parents[2] / "solver"
MUTATING = {"append", "add", "clear", "extend", "insert", "pop", "popitem", "remove", "setdefault", "update",
            "discard", "appendleft", "__setitem__", "__delitem__"}
ALLOWED = {
    # Ctrl-C is process-wide (one signal for the process): the registry of running solves it stops.
    ("interrupt.py", "_requested"), ("interrupt.py", "_solvers"), ("interrupt.py", "_cancels"),
    # The adapter's progress listener, per thread and only while its ``listening`` block runs.
    ("progress.py", "_local"),
}
# The plugin registry: the rules a process schedules with and the lists derived from them, set at
# import and again only by ``register``/``unregister`` (a plugin living outside the package, as
# the tests' proof plugin), never by a decision.
REGISTRY = "plugins/registry.py"


def _module_state(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        names |= {t.id for t in targets if isinstance(t, ast.Name)}
    written: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            written |= set(node.names)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for t in targets:
                if isinstance(t, (ast.Subscript, ast.Attribute)) and isinstance(t.value, ast.Name):
                    written.add(t.value.id)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATING \
                and isinstance(node.func.value, ast.Name):
            written.add(node.func.value.id)
    return names & written


def test_no_module_level_state_is_written_in_the_solver() -> None:
    found = {(str(path.relative_to(SOLVER)), name)
             for path in sorted(SOLVER.rglob("*.py")) for name in _module_state(path)}
    found = {(path, name) for path, name in found if path != REGISTRY}
    assert found - ALLOWED == set(), "module-level state written by the solver (keep it in SolverMemory)"


def test_the_check_sees_a_module_cache(tmp_path: Path) -> None:
    """The check itself: the shape the old ``context._assumed`` and ``info._spec_cache`` had."""
    module = tmp_path / "m.py"
    module.write_text("_kept = None\n_cache = {}\n\ndef f(x):\n    global _kept\n    _kept = x\n"
                      "    _cache[x] = 1\n    _cache.clear()\n")
    assert _module_state(module) == {"_kept", "_cache"}

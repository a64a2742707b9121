"""The layering holds: adapters -> solver -> models, only adapters talk to a cluster, plugins never
import the engines that call them (solver/plugin_api.py is what they stand on) nor another plugin
outside their family (solver/plugins/shared/ is what they share) and the basics under them import
no plugin, no import circle inside the solver (among the modules and packages of each package), in
the live scheduler only api_client.py and errors.py touch the Kubernetes client, and the
benchmarks use the live scheduler, never the other way.
The contracts are in pyproject.toml ([tool.importlinter]); import-linter checks them on every test
run."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_are_kept() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    declared = (ROOT / "pyproject.toml").read_text().count("[[tool.importlinter.contracts]]")
    assert declared >= 7  # layers, no cluster in solver/models, live's client, bench -> live, plugins, acyclic, basics
    assert f"Contracts: {declared} kept, 0 broken." in done.stdout


def test_every_plugin_package_exports_one_plugin_and_the_registry_lists_it() -> None:
    """Adding a rule is a folder and one registry line: every package under solver/plugins/ (or
    under a family of them, ``volumes/``) names what it implements in plugin.py, and the
    registry's list holds exactly those; ``shared/`` holds no plugin."""
    import importlib

    from solver.plugin_api import Plugin
    from solver.plugins import registry

    plugins_root = ROOT / "solver" / "plugins"
    for top in _plugin_packages():
        folder = plugins_root / top
        members = [p for p in folder.iterdir() if (p / "__init__.py").exists()]
        # a plugin package, or a family whose every package is a plugin
        assert (folder / "plugin.py").exists() != bool(members), top
        assert all((m / "plugin.py").exists() for m in members), top
    assert not [p for name in NOT_PLUGINS for p in (plugins_root / name).rglob("plugin.py")]
    exported = {}
    for folder in _plugin_dirs():
        name = ".".join(folder.relative_to(plugins_root).parts)
        module = importlib.import_module(f"solver.plugins.{name}.plugin")
        assert isinstance(module.PLUGIN, Plugin), name
        exported[name] = module.PLUGIN
    assert sorted(exported.values(), key=id) == sorted(registry.PLUGINS, key=id)
    assert len({p.name for p in registry.PLUGINS}) == len(registry.PLUGINS)  # one name, one plugin


def test_the_registry_lists_are_read_from_the_plugins() -> None:
    """What the engines loop over comes from the PLUGIN objects: the static filters prune, the
    encoders build the model in ENCODE_ORDER, the validator reports in CHECK_ORDER."""
    from solver.plugins import registry
    from solver.plugins.node_unschedulable import filter as node_unschedulable

    assert registry.STATIC_FILTERS[0] is node_unschedulable  # kube-scheduler's first filter
    assert {f.NAME for f in registry.STATIC_FILTERS} == {
        "NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity"}
    for plugin in registry.PLUGINS:
        assert all(e in registry.WINDOW_ENCODERS for e in (*plugin.encode, *plugin.window_encode)), plugin.name
        assert all(c in registry.FINAL_CHECKS for c in plugin.checks), plugin.name
        if plugin.score is not None:
            assert plugin.score in registry.SCORE_PLUGINS
        if plugin.prune is not None:
            assert plugin.prune in registry.PRUNES
    assert registry.FILTER_ENCODERS == registry.WINDOW_ENCODERS[:len(registry.FILTER_ENCODERS)]


# --------------------------------------------------------------------------- engines name no plugin

# The engines: everything under solver/ that runs the plugins rather than being one (the basics
# the plugins stand on included), and the adapters that run the solver (the live scheduler, the
# commands, the readers). Not the benchmarks: they build workloads for a rule on purpose.
ENGINE_GLOBS = ("solver/*.py", "solver/cpsat/*.py", "solver/scoring/*.py", "solver/repack/*.py", "solver/explain/*.py",
                "solver/provision/*.py", "solver/whatif/*.py", "adapters/*.py", "adapters/live/*.py",
                "adapters/commands/*.py", "adapters/reading/*.py", "adapters/apiserver/*.py")
# An engine module reaching a plugin package past the registry, with the reason it must (module,
# plugin package): keep this short; a new entry needs a reason a reviewer accepts, and an entry no
# longer used fails the test below.
ENGINE_PLUGIN_IMPORTS_ALLOWED: dict[tuple[str, str], str] = {}

# Packages under solver/plugins/ that are no plugin: the predicates plugins share (they import none).
NOT_PLUGINS = {"shared"}


def _plugin_packages() -> set[str]:
    """The packages directly under solver/plugins/ that hold plugins: a plugin's own, or a family
    of plugin packages (``volumes/``)."""
    return {p.name for p in (ROOT / "solver" / "plugins").iterdir()
            if (p / "__init__.py").exists() and p.name not in NOT_PLUGINS}


def _plugin_dirs() -> list[Path]:
    """Every plugin package, at any depth: a folder holding plugin.py."""
    return sorted(p.parent for p in (ROOT / "solver" / "plugins").rglob("plugin.py"))


def _imported_plugins(path: Path) -> set[str]:
    """The plugin packages a module imports, at any depth (functions and TYPE_CHECKING blocks too)."""
    import ast

    module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    package = module.rsplit(".", 1)[0] if path.name != "__init__.py" else module.removesuffix(".__init__")
    plugins = _plugin_packages()
    found: set[str] = set()

    def note(name: str) -> None:
        parts = name.split(".")
        if len(parts) >= 3 and parts[:2] == ["solver", "plugins"] and parts[2] in plugins:
            found.add(parts[2])

    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                note(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            note(base)
            for alias in node.names:
                note(f"{base}.{alias.name}")
    return found


def _engine_plugin_imports() -> set[tuple[str, str]]:
    out = set()
    for pattern in ENGINE_GLOBS:
        for path in sorted(ROOT.glob(pattern)):
            for plugin in _imported_plugins(path):
                out.add((str(path.relative_to(ROOT)), plugin))
    return out


def test_engines_reach_plugins_only_through_the_registry() -> None:
    """Greedy, CP-SAT, scoring, re-packing, the validator and the context loop over the
    registry's lists (plugins/registry.py) and the hooks of plugin_api.Plugin: an engine module
    importing a plugin package by name fails here unless the allow-list says why it must."""
    found = _engine_plugin_imports()
    unexplained = sorted(found - set(ENGINE_PLUGIN_IMPORTS_ALLOWED))
    assert not unexplained, f"engine modules importing a plugin by name (use a PLUGIN hook): {unexplained}"
    stale = sorted(set(ENGINE_PLUGIN_IMPORTS_ALLOWED) - found)
    assert not stale, f"allow-list entries no longer used (remove them): {stale}"


def _named_plugins(path: Path) -> set[str]:
    """The plugin packages a module's text names by path (``plugins/gang``, ``plugins.gang``),
    comments and docstrings included: an engine that must point at one plugin's code knows it."""
    import re

    pattern = re.compile(r"plugins[./](" + "|".join(sorted(_plugin_packages())) + r")\b")
    return set(pattern.findall(path.read_text()))


def test_no_engine_module_names_a_plugin_package() -> None:
    """The issue's number: engine modules naming a plugin package, by import or by path, 0. A new
    plugin (``tests/proof_plugin``) therefore needs no line in any of them."""
    named = sorted((str(path.relative_to(ROOT)), plugin) for pattern in ENGINE_GLOBS
                   for path in sorted(ROOT.glob(pattern))
                   for plugin in _named_plugins(path) | _imported_plugins(path)
                   if (str(path.relative_to(ROOT)), plugin) not in ENGINE_PLUGIN_IMPORTS_ALLOWED)
    assert named == [], f"engine modules naming a plugin package: {named}"


def test_the_naming_check_can_fail(tmp_path: Path) -> None:
    module = tmp_path / "engine.py"
    module.write_text('"""Runs ``plugins/gang/permit.py`` and solver.plugins.node_ports."""\nx = 1  # plugins.gangs\n')
    assert _named_plugins(module) == {"gang", "node_ports"}


# --------------------------------------------------------------------------- plugins import no other plugin

# A plugin module importing a plugin package outside its own family, with the reason it must
# ((module, plugin package) -> why): keep it empty; what two plugins share belongs in
# solver/plugins/shared/, where the owning plugin imports it from too.
PLUGIN_IMPORTS_ALLOWED: dict[tuple[str, str], str] = {}


def _sideways_imports() -> set[tuple[str, str]]:
    """(module, plugin package) for every module under solver/plugins/ importing a plugin package
    other than the one it lives in (a family, ``volumes/``, counts as one package; the modules
    beside the packages — registry.py, helper.py, static_check.py — are not plugins)."""
    plugins_root = ROOT / "solver" / "plugins"
    out = set()
    for path in sorted(plugins_root.rglob("*.py")):
        parts = path.relative_to(plugins_root).parts
        if len(parts) < 2:
            continue
        for plugin in _imported_plugins(path) - {parts[0]}:
            out.add((str(path.relative_to(ROOT)), plugin))
    return out


def test_no_plugin_imports_another_outside_its_family() -> None:
    """The issue's "plugins depend sideways": a plugin reaches another plugin's rule only through
    solver/plugins/shared/ (or the plugin API); inside a family (the four volume plugins) imports
    are the family's business. ``shared/`` itself imports no plugin."""
    found = _sideways_imports()
    unexplained = sorted(found - set(PLUGIN_IMPORTS_ALLOWED))
    assert not unexplained, f"plugin modules importing another plugin (use plugins/shared): {unexplained}"
    stale = sorted(set(PLUGIN_IMPORTS_ALLOWED) - found)
    assert not stale, f"allow-list entries no longer used (remove them): {stale}"


def test_the_sideways_check_can_fail() -> None:
    """An import across plugin packages is seen; one inside the volume family, or of shared/, is not."""
    cases = {
        ("gang", "from ..node_ports import filter\n"): {"node_ports"},
        ("gang", "def f():\n    from ..volumes.volume_zone import rules\n"): {"volumes"},
        ("volumes/volume_binding", "from ..volume_zone import rules\nfrom ...shared import resource_fit\n"): set(),
        ("shared", "from ..preemption import victim_room\n"): {"preemption"},
    }
    for (folder, text), expected in cases.items():
        where = ROOT / "solver" / "plugins" / folder
        with tempfile.NamedTemporaryFile("w", suffix=".py", dir=where, delete=False) as f:
            f.write(text)
        path = Path(f.name)
        try:
            assert _imported_plugins(path) - {folder.split("/")[0]} == expected, text
        finally:
            path.unlink()


def test_the_engine_import_check_sees_every_way_of_importing() -> None:
    """The check above can fail: absolute, relative, package-attribute and function-level imports
    of a plugin are all seen."""
    sources = {
        "import solver.plugins.gang.permit\n": {"gang"},
        "from .plugins.node_ports import filter\n": {"node_ports"},
        "from .plugins import dynamic_resources, registry\n": {"dynamic_resources"},
        "def f():\n    from ..plugins.preemption.nominated import hold\n": {"preemption"},
        "from .plugins.registry import PLUGINS\nfrom .plugins import helper\n": set(),
    }
    for text, expected in sources.items():
        folder = "cpsat" if text.startswith("def f") else ""
        with tempfile.NamedTemporaryFile("w", suffix=".py", dir=ROOT / "solver" / folder, delete=False) as f:
            f.write(text)
        path = Path(f.name)
        try:
            assert _imported_plugins(path) == expected, text
        finally:
            path.unlink()

"""The layering holds: adapters -> solver -> models, only adapters talk to a cluster, plugins never
import the engines that call them (solver/plugin_api.py is what they stand on) and the basics under
them import no plugin, no import circle inside the solver (among the modules and packages of each
package), and in the live scheduler only api_client.py and errors.py touch the Kubernetes client.
The contracts are in pyproject.toml ([tool.importlinter]); import-linter checks them on every test
run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_are_kept() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "Contracts: 6 kept, 0 broken." in done.stdout


def test_every_plugin_package_exports_one_plugin_and_the_registry_lists_it() -> None:
    """Adding a rule is a folder and one registry line: every package under solver/plugins/
    names what it implements in plugin.py, and the registry's list holds exactly those."""
    import importlib

    from solver.plugin_api import Plugin
    from solver.plugins import registry

    packages = sorted(p.name for p in (ROOT / "solver" / "plugins").iterdir() if (p / "__init__.py").exists())
    exported = {}
    for name in packages:
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


def test_preemption_reads_the_static_filters_the_registry_lists() -> None:
    """DefaultPreemption names the static filters itself (the registry lists it, so it cannot
    import the registry back): the two lists must stay one."""
    from solver.plugins.preemption import nominated
    from solver.plugins.registry import STATIC_FILTERS

    assert nominated.STATIC_FILTERS == STATIC_FILTERS

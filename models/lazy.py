"""Names a package loads on first use (PEP 562), so that a command pays only for what it uses:
``cpsat-scheduler --version`` imports neither pydantic, OR-tools nor the Kubernetes client.

A package maps each public name to the submodule that defines it and sets
``__getattr__ = lazy_names(__name__, where)``. Plain Python: importing this module loads nothing.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports ``package.<where[name]>`` on the first lookup of
    ``name`` and keeps the value in the package, so later lookups skip it."""

    def __getattr__(name: str) -> Any:
        submodule = where.get(name)
        if submodule is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{submodule}", package), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__

"""A kubeconfig's shape, checked before the Kubernetes client's loader reads it.

The loader indexes into the file as it goes, so a file of the wrong shape (a scalar, a list, a
context whose body is a string, a server that is a number) comes out of it as a ``TypeError`` or
``AttributeError`` about Python objects. Checked first, the same file gives one line naming the
file and the field. Values are never quoted, only their type: a kubeconfig holds credentials.
What the loader words well itself (a missing or empty file, invalid YAML, a context that is not
listed) is left to it.
"""

from __future__ import annotations

import datetime
import os
import stat
from typing import Any, Optional

import yaml

from models import InputError

__all__ = ["check_kubeconfig"]


# What reads as a string: Python's YAML makes an unquoted 2024-01-01 a date, where kubectl's keeps
# the text (a namespace may be named so).
_TEXT = (str, datetime.date)

# Each list of a kubeconfig and the key of its entries' body: clusters[].cluster, ...
_SECTIONS = {"clusters": "cluster", "contexts": "context", "users": "user"}


# The keys of each body that the loader uses as strings.
_STRINGS = {
    "cluster": ("server", "certificate-authority", "certificate-authority-data", "tls-server-name", "proxy-url"),
    "context": ("cluster", "user", "namespace"),
    "user": ("token", "tokenFile", "client-certificate", "client-certificate-data", "client-key", "client-key-data",
             "username", "password"),
}


def check_kubeconfig(kubeconfig: Optional[str]) -> None:
    """``InputError`` naming the file and field of the first kubeconfig (``kubeconfig``, else
    ``$KUBECONFIG``, else ``~/.kube/config``; a path list as the loader takes it) whose shape the
    loader cannot read."""
    for path in _files(kubeconfig):
        found = _shape_problem(_read(path))
        if found is not None:
            raise InputError(path, *found)


def _files(kubeconfig: Optional[str]) -> list[str]:
    listed = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
    return [os.path.expanduser(path) for path in listed.split(os.pathsep) if path]


def _read(path: str) -> Any:
    """The file's YAML, or None when there is nothing to check (the loader reports it). Only a
    regular file is read: a pipe (``--kubeconfig <(...)``, ``/dev/stdin``) read here would be
    empty when the loader reads it after."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
    except OSError:
        return None
    try:
        with open(path, encoding="utf-8") as file:
            return yaml.safe_load(file)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None


def _shape_problem(data: Any) -> Optional[tuple[str, str]]:
    """``(field, problem)`` for the first part of ``data`` of the wrong type, or None."""
    if data is None:
        return None
    if not isinstance(data, dict):
        return "", f"not a kubeconfig: expected a mapping (clusters, contexts, users, current-context), got {_what(data)}"
    current = data.get("current-context")
    if current is not None and not isinstance(current, _TEXT):
        return "current-context", f"expected a string, got {_what(current)}"
    for section, body in _SECTIONS.items():
        entries = data.get(section)
        if entries is None:
            continue
        if not isinstance(entries, list):
            return section, f"expected a list, got {_what(entries)}"
        for i, entry in enumerate(entries):
            found = _entry_problem(entry, body)
            if found is not None:
                field, problem = found
                return f"{section}[{i}]{field}", problem
    return None


def _entry_problem(entry: Any, body: str) -> Optional[tuple[str, str]]:
    """``(field under the entry, problem)`` for one entry of a list (``{name, cluster}``), or None."""
    if not isinstance(entry, dict):
        return "", f"expected a mapping with name and {body}, got {_what(entry)}"
    name = entry.get("name")
    if name is None:
        return ".name", "required field is missing"
    if not isinstance(name, _TEXT):
        return ".name", f"expected a string, got {_what(name)}"
    fields = entry.get(body)
    if fields is None:
        return None
    if not isinstance(fields, dict):
        return f".{body}", f"expected a mapping, got {_what(fields)}"
    for key in _STRINGS[body]:
        value = fields.get(key)
        if value is not None and not isinstance(value, _TEXT):
            return f".{body}.{key}", f"expected a string, got {_what(value)}"
    return None


def _what(value: Any) -> str:
    """The type of a kubeconfig value in words, never the value."""
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return type(value).__name__

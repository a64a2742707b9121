"""The one error type for bad input: it names the object and the field that are wrong."""

from __future__ import annotations


class InputError(ValueError):
    """Bad input, reported as ``<object>: <field>: <problem>`` (CLI exit status 2).

    ``obj`` is ``pods/default/web-1``-style (``<resource>/<namespace>/<name>``, or
    ``<resource>/<name>`` for cluster-scoped kinds, or a position such as ``items[3]`` when the
    object has no usable name); ``field`` is a JSON path such as
    ``spec.containers[0].resources.requests.cpu``.
    """

    def __init__(self, obj: str, field: str, problem: str) -> None:
        self.obj = obj
        self.field = field
        self.problem = problem
        parts = [p for p in (obj, field) if p]
        super().__init__(": ".join(parts + [problem]))


class Interrupted(Exception):
    """A decision stopped on the user's request (Ctrl-C): there is no plan (CLI exit status 130)."""

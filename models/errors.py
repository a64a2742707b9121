"""The one error type for bad input: it names the object and the field that are wrong; and how
its message quotes a value of the input (``clipped``)."""

from __future__ import annotations

# The most of one input value an error message quotes. A message is one line; a value of
# thousands of characters (a pasted blob, a 5,000-digit number) would bury the rest of it.
MAX_QUOTED = 80


def clipped(text: str, limit: int = MAX_QUOTED) -> str:
    """``text`` as an error message quotes it: whole when short, else its first ``limit`` - 3
    characters and ``...``, so the line still says which value it is about."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


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

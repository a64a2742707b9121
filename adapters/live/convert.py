"""API objects from the watch into models, through the same parser as snapshot files.

DESIGN.md asks for one conversion path: a Pod read from `kubectl get -o yaml` and the same
Pod delivered by a watch must become the same `models.Pod`, with the same errors naming the
object and field when something is wrong. So this module does not parse anything itself: it
hands each object to `adapters.snapshot_io`'s per-object step, which dispatches by kind and
validates through the models. Each watch event is parsed exactly once, here.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from models import InputError

# The per-object step of the file parser (kind table and validation with named errors).
from adapters.snapshot_io import _KINDS, _validate_object


def parse_object(obj: dict[str, Any], kind: str) -> BaseModel:
    """The model of one API object of `kind` (Pod, Node, ...); raises `InputError` naming it."""
    spec = _KINDS.get(kind)
    if spec is None:
        raise InputError(f"{kind} object", "kind", f"the scheduler does not read {kind} objects")
    return _validate_object(spec, obj, f"watched {kind}")

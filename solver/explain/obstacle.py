"""One obstacle: a named group of constraints between a left-out pod (or gang) and a node, the
thing an operator could change; ``obstacles`` and ``held`` find them and relax them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Obstacle:
    """One relaxable group of constraints. ``ref``: what ``relaxed`` needs to undo it (a node
    name, (node, taint index), a field and index of the targets, a pod or budget key)."""

    kind: str
    ref: Any
    text: str
    objects: tuple[str, ...]
    fields: tuple[str, ...]
    weight: int = 1  # how much relaxing it would disturb (tried for removal first when larger)
    short: str = ""  # a few words for a condition message ("node n3's room"); ``text`` when empty

    @property
    def brief(self) -> str:
        """The short form (``short``, else ``text``): what the live scheduler appends to a
        left-out pod's ``PodScheduled`` message."""
        return self.short or self.text

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": self.text, "objects": list(self.objects), "fields": list(self.fields)}

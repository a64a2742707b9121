"""DefaultPreemption: who may preempt whom, the victims' room, nominated pods (window-wide
encodings, final checks; greedy runs its PostFilter itself)."""

from __future__ import annotations

from ...plugin_api import Plugin
from . import check, nominated, victim_room

PLUGIN = Plugin(nominated.NAME, window_encode=(victim_room.encode, nominated.encode), checks=(check.check,
                nominated.check))

"""NodeVolumeLimits: CSINode attach limits (rules in the volume cycle, window-wide encoding,
final check)."""

from __future__ import annotations

from ....plugin_api import Plugin
from ....volume_catalog import uses_node_state
from . import check, encode, rules

PLUGIN = Plugin(rules.NAME, filter=rules, window_encode=(encode.encode,), checks=(check.check,),
                per_node_state=uses_node_state)

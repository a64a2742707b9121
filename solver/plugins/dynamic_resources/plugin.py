"""DynamicResources: devices for ResourceClaims (filter, encoding, final check)."""

from __future__ import annotations

from ...plugin_api import Plugin
from . import check, cycle, encode, filter

PLUGIN = Plugin(filter.NAME, filter=filter, cycle=cycle.cycle, encode=(encode.encode,), checks=(check.check,),
                per_node_state=filter.uses_node_state)

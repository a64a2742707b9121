"""VolumeZone: a bound volume's zone (rules in the volume cycle, final check; the volume
binding's encoding prunes by it)."""

from __future__ import annotations

from ....plugin_api import Plugin
from ....volume_catalog import uses_node_state
from . import check, rules

PLUGIN = Plugin(rules.NAME, filter=rules, checks=(check.check,), per_node_state=uses_node_state)

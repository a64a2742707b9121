"""NodeAffinity: nodeSelector and required node affinity (static), preferred terms (score)."""

from __future__ import annotations

from ...plugin_api import Plugin
from . import filter, score

PLUGIN = Plugin(filter.NAME, filter=filter, static=True, score=score)

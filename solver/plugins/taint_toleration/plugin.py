"""TaintToleration: NoSchedule/NoExecute taints (static) and PreferNoSchedule (score)."""

from __future__ import annotations

from ...plugin_api import Plugin
from . import filter, score
from .score_cache import TaintPart

PLUGIN = Plugin(filter.NAME, score_cache=TaintPart, filter=filter, static=True, score=score)

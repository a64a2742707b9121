"""NodeResourcesBalancedAllocation: score only."""

from __future__ import annotations

from ...plugin_api import Plugin
from . import score
from .score_cache import BalancePart

PLUGIN = Plugin(score.NAME, score_cache=BalancePart, score=score)

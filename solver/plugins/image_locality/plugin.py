"""ImageLocality: score only."""

from __future__ import annotations

from ...plugin_api import Plugin
from . import score

PLUGIN = Plugin(score.NAME, score=score)

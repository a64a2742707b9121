"""ImageLocality: score only."""

from __future__ import annotations

from ...plugin_api import Plugin
from . import score
from .score_cache import ImagePart

PLUGIN = Plugin(score.NAME, score_cache=ImagePart, score=score)

"""NodeResourcesFit: requests against allocatable (filter, encoding, check) and its score."""

from __future__ import annotations

from ...plugin_api import Plugin
from . import check, crowding, encode, filter, score
from .score_cache import FitPart

PLUGIN = Plugin(filter.NAME, score_cache=FitPart, crowding=crowding.crowding, cycle=filter.cycle, filter=filter, score=score, encode=(encode.encode,), checks=(check.check,),
                capacity=filter)

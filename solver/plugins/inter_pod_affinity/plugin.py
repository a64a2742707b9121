"""InterPodAffinity: required (anti-)affinity (filter, encoding, checks), preferred (score)."""

from __future__ import annotations

from ...plugin_api import Plugin
from . import check, encode, filter, score


def prune(pod, state, can_evict, gangs):
    return encode.prune(pod, state, can_evict)


PLUGIN = Plugin(filter.NAME, cycle=filter.cycle, prune=prune, filter=filter, score=score, encode=(encode.encode,),
                checks=(check.check_anti_affinity, check.check_affinity))

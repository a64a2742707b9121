"""PodTopologySpread: DoNotSchedule (filter, encoding, check) and ScheduleAnyway (score)."""

from __future__ import annotations

from ...plugin_api import Plugin
from . import check, encode, filter, score


def prune(pod, state, can_evict, gangs):
    return encode.prune(pod, state)


PLUGIN = Plugin(filter.NAME, cycle=filter.cycle, prune=prune, filter=filter, score=score, encode=(encode.encode,),
                checks=(check.check,))

"""PodTopologySpread: DoNotSchedule (filter, encoding, check) and ScheduleAnyway (score)."""

from __future__ import annotations

from ...plugin_api import Plugin
from . import check, crowding, encode, filter, score
from .score_cache import SpreadPart
from .window_guard import GuardPass


def prune(pod, state, can_evict, window):
    return encode.prune(pod, state)


def couples(x):
    """x's DoNotSchedule constraints count the pods of its namespace their selectors match."""
    hard = x.hard_spread
    if not hard:
        return None
    return lambda y: y.namespace == x.namespace and any(c.selector.matches(y.labels) for c in hard)


def greedy(ctx, state, static, trial):
    """Greedy's window guard: no pod breaks the spread of a window pod placed before it."""
    return GuardPass(state, static)


PLUGIN = Plugin(filter.NAME, score_cache=SpreadPart, crowding=crowding.crowding, greedy=greedy, cycle=filter.cycle, prune=prune, couples=couples, filter=filter, score=score, encode=(encode.encode,),
                checks=(check.check,))

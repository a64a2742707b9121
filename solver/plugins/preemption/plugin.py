"""DefaultPreemption: who may preempt whom, the victims' room, nominated pods (window-wide
encodings, final checks; greedy's PostFilter)."""

from __future__ import annotations

from models.config import version_at_least

from ...plugin_api import Plugin
from . import check, nominated, postfilter, victim_room



def prepare(snapshot, config, window, state):
    """Pods still waiting for their victims may not preempt: marked before classes are formed
    (it is part of a pod's signature)."""
    nominated.mark_waiting(window, state)


def nominations(snapshot, config, window, state):
    """The room pending pods outside the window are nominated to (``nominated.Claims``)."""
    return nominated.outside_claims(snapshot, window, state, snapshot.namespace_labels,
                                    sidecar_ports=version_at_least(config.kubernetes_version, "1.34"))


PLUGIN = Plugin(nominated.NAME, window_encode=(victim_room.encode, nominated.encode), checks=(check.check,
                nominated.check), prepare=prepare, nominations=nominations, postfilter=postfilter,
                may_preempt=victim_room.may_preempt)

"""DefaultPreemption: who may preempt whom, the victims' room, nominated pods (window-wide
encodings, final checks; greedy's PostFilter)."""

from __future__ import annotations

from models.config import version_at_least

from ...plugin_api import Plugin
from ..shared.preemption_rule import may_preempt
from . import check, nominated, postfilter, reprieve_encode
from . import replay as kube_replay


class _PostFilter:
    """DefaultPreemption's PostFilter as the engines ask it (``plugin_api.PostFilter``): greedy's
    preemption, and the replay of kube-scheduler's preemption on a plan."""

    default_preemption = staticmethod(postfilter.default_preemption)
    reprieve_level = staticmethod(postfilter.reprieve_level)
    REASON_TERMINATING = postfilter.REASON_TERMINATING
    replay = staticmethod(kube_replay.replay)
    kube_preemptors = staticmethod(kube_replay.kube_preemptors)


def prepare(snapshot, config, window, state, static):
    """Pods still waiting for their victims may not preempt: marked before classes are formed
    (it is part of a pod's signature)."""
    nominated.mark_waiting(window, state, static)


def nominations(snapshot, config, window, state):
    """The room pending pods outside the window are nominated to (``nominated.Claims``)."""
    return nominated.outside_claims(snapshot, window, state, snapshot.namespace_labels,
                                    sidecar_ports=version_at_least(config.kubernetes_version, "1.34"))


PLUGIN = Plugin(nominated.NAME, window_encode=(reprieve_encode.encode, nominated.encode), checks=(check.check,
                nominated.check), prepare=prepare, nominations=nominations, postfilter=_PostFilter(),
                may_preempt=may_preempt)

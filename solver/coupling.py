"""Whether a pod's placement is tied to where other pods go, for a caller holding the Kubernetes
Pod rather than the solver's ``PodInfo`` (the live queue deciding whether to wait for peers).

The answer is the rules' own (``registry.coupling``, each plugin's ``Reads.coupling``): a rule
reaching past the pod's node (a gang, required inter-pod terms, hard spread, a plugin added
later) makes a decision taken together with peers arriving soon worth waiting for.
"""

from __future__ import annotations

import threading

from models import Pod

from .info import PodInfo
from .plugin_api import Coupling
from .plugins import registry

# Answers kept per Pod object (the queue asks about the same pods again and again): bounded,
# and guarded, as the queue's threads ask at once.
_KEPT = 8192
_answers: dict[int, tuple[Pod, bool]] = {}
_lock = threading.Lock()


def reaches_other_nodes(pod: Pod) -> bool:
    """Whether some rule ties ``pod`` to pods on other nodes (``Coupling.DOMAIN`` or further)."""
    with _lock:
        hit = _answers.get(id(pod))
    if hit is not None and hit[0] is pod:
        return hit[1]
    answer = registry.coupling(PodInfo.of(pod, {})) >= Coupling.DOMAIN
    with _lock:
        if len(_answers) >= _KEPT:
            _answers.clear()
        _answers[id(pod)] = (pod, answer)
    return answer

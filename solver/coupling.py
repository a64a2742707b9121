"""Whether a pod's placement is tied to where other pods go, for a caller holding the Kubernetes
Pod rather than the solver's ``PodInfo`` (the live queue deciding whether to wait for peers).

The answer is the rules' own (``registry.coupling``, each plugin's ``Reads.coupling``): a rule
reaching past the pod's node (a gang, required inter-pod terms, hard spread, a plugin added
later) makes a decision taken together with peers arriving soon worth waiting for.
"""

from __future__ import annotations

from models import Pod

from .info import PodInfo
from .plugin_api import Coupling
from .plugins import registry


def reaches_other_nodes(pod: Pod) -> bool:
    """Whether some rule ties ``pod`` to pods on other nodes (``Coupling.DOMAIN`` or further)."""
    return registry.coupling(PodInfo.of(pod, {})) >= Coupling.DOMAIN

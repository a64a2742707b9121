"""What a new node made like an existing one keeps of its taints (``what-if --add-nodes``,
``provision``'s shapes from the cluster's nodes).

The taints under ``node.kubernetes.io/`` are put there by the node lifecycle controller and
``kubectl cordon`` (unschedulable, not-ready, unreachable, memory-pressure, ...): they say what
state that one node is in, not what kind of node it is. A new node of its kind comes up without
them, so a copy that kept them would refuse every pod for a reason the new node does not have.
The taints an operator or a node pool put there (``nvidia.com/gpu``, ``dedicated=infra``) are
the node's kind, and stay. The cloud provider's two of that kind, ``uninitialized`` (until its
controller has set the node up) and ``shutdown`` (its instance is stopped), go too, and so do
an autoscaler's marks on a node it is removing (cluster-autoscaler's ``ToBeDeletedByClusterAutoscaler``
and ``DeletionCandidateOfClusterAutoscaler``, Karpenter's ``karpenter.sh/disrupted``).
"""

from __future__ import annotations

from collections.abc import Iterable

from models.objects import Taint

STATE_TAINT_PREFIX = "node.kubernetes.io/"
CLOUD_STATE_TAINTS = frozenset({"node.cloudprovider.kubernetes.io/uninitialized",
                                "node.cloudprovider.kubernetes.io/shutdown",
                                # a node an autoscaler is removing (cluster-autoscaler, Karpenter)
                                "ToBeDeletedByClusterAutoscaler", "DeletionCandidateOfClusterAutoscaler",
                                "karpenter.sh/disrupted", "karpenter.sh/disruption"})


def is_state_taint(taint: Taint) -> bool:
    """Whether ``taint`` describes the node's state (see the module's docstring)."""
    return taint.key.startswith(STATE_TAINT_PREFIX) or taint.key in CLOUD_STATE_TAINTS


def kind_taints(taints: Iterable[Taint]) -> list[Taint]:
    """``taints`` less the ones that describe the node's state: what a new node like it carries."""
    return [t for t in taints if not is_state_taint(t)]

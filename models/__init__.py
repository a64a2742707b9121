"""Pure data: pydantic models of what the scheduler reads (Kubernetes objects, snapshots,
configuration) and writes (plans). Imports nothing else of this project."""

from .config import SchedulerConfig
from .errors import InputError
from .objects import (
    Affinity,
    Container,
    LabelSelector,
    Namespace,
    Node,
    NodeSelectorTerm,
    Pod,
    PodAffinityTerm,
    PodDisruptionBudget,
    PodGroup,
    PriorityClass,
    Taint,
    Toleration,
    TopologySpreadConstraint,
)
from .plan import Assignment, Gated, Nomination, Plan, PlanStats, Preemption, Unschedulable
from .quantity import QuantityError, format_quantity, parse_quantity, to_units
from .resources import pod_host_ports, pod_nonzero_requests, pod_requests
from .snapshot import DEFAULT_SCHEDULER_NAME, POD_GROUP_LABEL, ClusterSnapshot, pod_group_key

__all__ = [
    "Affinity", "Assignment", "ClusterSnapshot", "Container", "DEFAULT_SCHEDULER_NAME", "InputError",
    "Gated", "LabelSelector", "Namespace", "Node", "NodeSelectorTerm", "Nomination", "POD_GROUP_LABEL", "Plan",
    "PlanStats", "Pod", "PodAffinityTerm", "PodDisruptionBudget", "PodGroup", "Preemption",
    "PriorityClass", "QuantityError", "SchedulerConfig", "Taint", "Toleration",
    "TopologySpreadConstraint", "Unschedulable", "format_quantity", "parse_quantity",
    "pod_group_key", "pod_host_ports", "pod_nonzero_requests", "pod_requests", "to_units",
]

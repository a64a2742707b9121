"""Pure data: pydantic models of what the scheduler reads (Kubernetes objects, snapshots,
configuration) and writes (plans). Imports nothing else of this project.

The names below load on first use (PEP 562): ``from models.errors import InputError`` or
``from models import InputError`` costs nothing, while pydantic and the object models load
only for a command that reads input (``cpsat-scheduler --version`` never does).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .lazy import lazy_names

if TYPE_CHECKING:  # the eager imports, for type checkers and readers
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

# Public name -> the submodule that defines it.
_WHERE = {
    "SchedulerConfig": "config",
    "InputError": "errors",
    **dict.fromkeys(
        ("Affinity", "Container", "LabelSelector", "Namespace", "Node", "NodeSelectorTerm", "Pod",
         "PodAffinityTerm", "PodDisruptionBudget", "PodGroup", "PriorityClass", "Taint", "Toleration",
         "TopologySpreadConstraint"),
        "objects",
    ),
    **dict.fromkeys(
        ("Assignment", "Gated", "Nomination", "Plan", "PlanStats", "Preemption", "Unschedulable"), "plan"
    ),
    **dict.fromkeys(("QuantityError", "format_quantity", "parse_quantity", "to_units"), "quantity"),
    **dict.fromkeys(("pod_host_ports", "pod_nonzero_requests", "pod_requests"), "resources"),
    **dict.fromkeys(("DEFAULT_SCHEDULER_NAME", "POD_GROUP_LABEL", "ClusterSnapshot", "pod_group_key"), "snapshot"),
}

__all__ = [
    "Affinity", "Assignment", "ClusterSnapshot", "Container", "DEFAULT_SCHEDULER_NAME", "InputError",
    "Gated", "LabelSelector", "Namespace", "Node", "NodeSelectorTerm", "Nomination", "POD_GROUP_LABEL", "Plan",
    "PlanStats", "Pod", "PodAffinityTerm", "PodDisruptionBudget", "PodGroup", "Preemption",
    "PriorityClass", "QuantityError", "SchedulerConfig", "Taint", "Toleration",
    "TopologySpreadConstraint", "Unschedulable", "format_quantity", "parse_quantity",
    "pod_group_key", "pod_host_ports", "pod_nonzero_requests", "pod_requests", "to_units",
]


__getattr__ = lazy_names(__name__, _WHERE)


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])

"""Pod priority resolution: ``spec.priority``, else the named PriorityClass, else the global default."""

from __future__ import annotations

from .objects import Pod, PriorityClass


class PriorityResolutionError(ValueError):
    """A pod names a PriorityClass the snapshot does not contain."""


def global_default(classes: dict[str, PriorityClass]) -> PriorityClass | None:
    """The globalDefault class; with several, the one of lowest value (as admission does)."""
    defaults = [c for c in classes.values() if c.global_default]
    return min(defaults, key=lambda c: c.value) if defaults else None


def resolve_priority(pod: Pod, classes: dict[str, PriorityClass]) -> int:
    if pod.spec.priority is not None:
        return pod.spec.priority
    if pod.spec.priority_class_name:
        cls = classes.get(pod.spec.priority_class_name)
        if cls is None:
            raise PriorityResolutionError(
                f'spec.priorityClassName: priority class "{pod.spec.priority_class_name}" not found'
            )
        return cls.value
    default = global_default(classes)
    return default.value if default is not None else 0


def resolve_preemption_policy(pod: Pod, classes: dict[str, PriorityClass]) -> str:
    if pod.spec.preemption_policy is not None:
        return pod.spec.preemption_policy
    cls = classes.get(pod.spec.priority_class_name) if pod.spec.priority_class_name else None
    if cls is None and not pod.spec.priority_class_name and pod.spec.priority is None:
        cls = global_default(classes)
    if cls is not None and cls.preemption_policy is not None:
        return cls.preemption_policy
    return "PreemptLowerPriority"

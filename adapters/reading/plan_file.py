"""A plan as ``schedule --output json|yaml`` prints it, or any mapping with ``assignments``."""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any, Union

from pydantic import BaseModel

from models import Assignment, Gated, InputError, Nomination, Plan, PlanStats, Preemption, Unschedulable
from models.config import DEFAULT_MAX_SNAPSHOT_BYTES
from models.dra import AllocationResult
from models.plan import DeviceAllocation

from ..input_size import snapshot_limit
from .documents import single_mapping
from .errors import validate_model

__all__ = ["load_plan"]


def load_plan(path: Union[str, Path, IO[str], IO[bytes]], *, max_bytes: int = DEFAULT_MAX_SNAPSHOT_BYTES) -> Plan:
    """A plan as printed by ``schedule --output json|yaml``.

    Keys the contract may add later are ignored, and ``stats`` may be left out, so plans written
    by other tools (``{"assignments": [...]}``) can be checked too. A plan is bounded like the
    snapshot it is checked against (``max_bytes``).
    """
    data = single_mapping(path, what="plan", empty=None, limit=snapshot_limit(max_bytes))
    if "assignments" not in data:
        kind = data.get("kind")
        looks = f" (this looks like a snapshot, kind {kind!s}, not a plan)" if kind or "items" in data else ""
        raise InputError(
            "plan", "assignments",
            f"missing: a plan is what `cpsat-scheduler schedule -o json` prints, with at least "
            f"'assignments'{looks}",
        )
    data = {k: v for k, v in data.items() if k in Plan.model_fields}
    for key, model in _PLAN_ENTRIES.items():
        entries = data.get(key)
        if isinstance(entries, list):
            data[key] = [_known_keys(e, model) for e in entries]
    if data.get("stats") is None:
        data["stats"] = {"engine": "external", "status": "UNKNOWN"}
    data["stats"] = _known_keys(data["stats"], PlanStats)
    plan = validate_model(Plan, data, "plan")
    for i, entry in enumerate(plan.allocations):
        _check_allocation(i, entry.allocation)
    return plan


def _check_allocation(index: int, allocation: dict[str, Any]) -> None:
    """A plan's ``allocation`` body read as what it claims to be, a ResourceClaim's
    ``status.allocation``: one that is not (a result without its device, an unknown key) is a
    mistake in the file, reported like any other with its full path, not a rule of the
    snapshot the plan would break."""
    try:
        validate_model(AllocationResult, allocation, "plan")
    except InputError as exc:
        field = f"allocations[{index}].allocation"
        if exc.field:
            field += exc.field if exc.field.startswith("[") else f".{exc.field}"
        raise InputError("plan", field, exc.problem) from None


_PLAN_ENTRIES: dict[str, type[BaseModel]] = {
    "assignments": Assignment,
    "preemptions": Preemption,
    "unschedulable": Unschedulable,
    "nominations": Nomination,
    "gated": Gated,
    "allocations": DeviceAllocation,
}


def _known_keys(value: Any, model: type[BaseModel]) -> Any:
    """Drop keys a newer version of the contract may have added; anything else is left to fail."""
    if not isinstance(value, dict):
        return value
    return {k: v for k, v in value.items() if k in model.model_fields}

"""What a CP-SAT decision returns: the solver's ``Solution`` and the ``CpsatOutcome`` that pairs it
with greedy's plan and says which was chosen and why."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from ortools.sat.python import cp_model

from ..filtering import StaticFilters
from ..greedy import GreedyResult
from ..plugin_api import Victim

STATUS_NAMES = {
    cp_model.OPTIMAL: "OPTIMAL",
    cp_model.FEASIBLE: "FEASIBLE",
    cp_model.INFEASIBLE: "INFEASIBLE",
    cp_model.UNKNOWN: "UNKNOWN",
    cp_model.MODEL_INVALID: "MODEL_INVALID",
}


class ModelInvalidError(RuntimeError):
    """CP-SAT rejected the model: a bug in an encoding, never a user error."""


@dataclass
class Solution:
    placements: dict[str, int] = field(default_factory=dict)
    victims: list[Victim] = field(default_factory=list)
    nominations: dict[str, int] = field(default_factory=dict)
    status: str = "OPTIMAL"
    objective: Optional[float] = None
    bound: Optional[float] = None
    variables: int = 0
    constraints: int = 0
    build_time: float = 0.0
    solve_time: float = 0.0
    components: int = 0
    node_groups: int = 0  # groups of interchangeable nodes whose symmetry was broken
    greedy_components: int = 0  # components where the solver found nothing and greedy stood in
    hint_components: int = 0  # components where the packing hint beat what the solve found (or nothing)
    # The step the decision degraded to because the per-node model would overrun the limit
    # ("node classes"), how many node classes it used, pods decoding could not fit, and whether
    # the solve was skipped (the build used the whole limit).
    degraded: Optional[str] = None
    node_classes: Optional[int] = None
    decode_lost: int = 0
    greedy_rest: int = 0  # pods greedy placed on top of the node-class plan
    solve_skipped: bool = False
    # Rounds of cuts that took out victims kube-scheduler's preemption would keep (``kube_victims``).
    victim_cut_rounds: int = 0
    # The plan is a guided pass's (``guided.follow``): what was done.
    guided: Optional[str] = None
    # The large-neighbourhood search (``lns``), when the decision took it.
    lns: Optional[Any] = None
    gang_rejected: dict[str, str] = field(default_factory=dict)


@dataclass
class CpsatOutcome:
    greedy: Optional[GreedyResult]  # None: greedy was stopped, the solver's plan is chosen
    solution: Optional[Solution]
    chose_solver: bool
    fallback_reason: Optional[str]
    static: StaticFilters
    greedy_time: float
    chosen_because: Optional[str] = None  # why the returned plan was picked (``choose``)
    degraded: Optional[str] = None  # the step taken when the per-node model would overrun ("node classes", "greedy")
    # Seconds the solver's share of the limit lacked for a few neighbourhood rounds, when greedy's
    # plan left the search none (the decision names a limit that would: ``api``).
    search_lacked: Optional[float] = None
    # Greedy's plan is taken because no plan can be better on the model's levels (it places every
    # pod any node could hold and evicts none: ``lns.settled``), not as a fallback: no search ran.
    settled: bool = False

"""``SchedulerConfig``: every setting the scheduler reads, from a YAML/JSON file and the CLI.

Keys are camelCase like KubeSchedulerConfiguration (snake_case is accepted too); unknown keys
are an error, because a misspelt setting silently ignored is a scheduling surprise.
"""

from __future__ import annotations

from typing import Annotated, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, field_validator, model_validator
from pydantic.alias_generators import to_camel

from .snapshot import DEFAULT_SCHEDULER_NAME


class _ConfigModel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


class ResourceWeight(_ConfigModel):
    name: str
    weight: StrictInt = Field(default=1, ge=1, le=100)


class ShapePoint(_ConfigModel):
    utilization: StrictInt = Field(ge=0, le=100)
    score: StrictInt = Field(ge=0, le=10)


# The kube-scheduler releases whose behaviour differences can be followed (SEMANTICS.md §0), and
# the default: the release the project is tested against (tests/e2e builds a real 1.36).
KubernetesVersion = Literal["1.31", "1.33", "1.34", "1.36"]
DEFAULT_KUBERNETES_VERSION: KubernetesVersion = "1.36"


def version_at_least(version: str, release: str) -> bool:
    """Whether kube-scheduler ``version`` ("1.34") is ``release`` or newer: a behaviour that
    arrived in ``release`` is kept by every later one."""
    return tuple(int(part) for part in version.split(".")) >= tuple(int(part) for part in release.split("."))


DEFAULT_PLUGIN_WEIGHTS = {
    "TaintToleration": 3,
    "NodeAffinity": 2,
    "PodTopologySpread": 2,
    "InterPodAffinity": 2,
    "NodeResourcesFit": 1,
    "NodeResourcesBalancedAllocation": 1,
    "ImageLocality": 1,
}


class ScoringConfig(_ConfigModel):
    """kube-scheduler's score plugins: NodeResourcesFit strategy and the plugin weights."""

    strategy: Literal["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"] = "LeastAllocated"
    resources: tuple[ResourceWeight, ...] = (ResourceWeight(name="cpu"), ResourceWeight(name="memory"))
    shape: tuple[ShapePoint, ...] = ()
    balanced_resources: tuple[ResourceWeight, ...] = (ResourceWeight(name="cpu"), ResourceWeight(name="memory"))
    weights: dict[str, int] = Field(default_factory=lambda: dict(DEFAULT_PLUGIN_WEIGHTS))
    hard_pod_affinity_weight: StrictInt = Field(default=1, ge=0, le=100)

    @model_validator(mode="after")
    def _check(self) -> "ScoringConfig":
        unknown = set(self.weights) - set(DEFAULT_PLUGIN_WEIGHTS)
        if unknown:
            raise ValueError(f"unknown score plugin(s) in weights: {sorted(unknown)}")
        if any(w < 0 for w in self.weights.values()):
            raise ValueError("plugin weights must be non-negative")
        full = {**DEFAULT_PLUGIN_WEIGHTS, **self.weights}
        object.__setattr__(self, "weights", full)
        if self.strategy == "RequestedToCapacityRatio":
            if not self.shape:
                raise ValueError("strategy RequestedToCapacityRatio needs a shape")
            utils = [p.utilization for p in self.shape]
            if utils != sorted(set(utils)):
                raise ValueError("shape utilization values must be strictly increasing")
        return self


class SolverConfig(_ConfigModel):
    """CP-SAT settings. ``parameters`` is passed through verbatim in protobuf text format."""

    # Finite, and no longer than a wait on the decision's threads can take (past ~9.2e9 s: an
    # OverflowError from the thread join, an internal error).
    time_limit_seconds: float = Field(default=10.0, ge=0, le=1_000_000_000)
    workers: StrictInt = Field(default=0, ge=0, le=64)  # 0: auto (8 workers: CP-SAT's portfolio)
    seed: StrictInt = Field(default=0, ge=0, le=2**31 - 1)  # CP-SAT's random_seed is an int32
    relative_gap: float = Field(default=0.0, ge=0, le=1)
    parameters: str = ""
    # Order the counts on interchangeable nodes (lexicographic symmetry break). Off by default:
    # measured slower — CP-SAT's presolve finds these symmetries itself (3,000 pods x 1,000
    # nodes: optimal in 8.5 s without, not proven in 16 s with), and without presolve (large
    # windows) the chains stalled the search start.
    break_symmetry: StrictBool = False
    # The neighbourhood search may start from a second plan besides greedy's: greedy's pass with
    # the smaller pods first in each priority, made sound in kube-scheduler's order, computed in
    # a forked child beside greedy's pass (``solver/cpsat/small_first.py``). Off: greedy's plan
    # is always the start.
    small_first_start: StrictBool = True
    # With the start above: the child goes on to search from its plan (one CP-SAT worker a round)
    # while this process searches from greedy's plan, and the decision keeps the better of the two
    # (``solver/cpsat/small_first.py``). Off: the child gives only the start, and one search starts
    # from the better of the two plans.
    second_search: StrictBool = True

    @field_validator("parameters")
    @classmethod
    def _parameters_parse(cls, text: str) -> str:
        # Checked here, against the message's schema, so a typo is refused with the config
        # (exit 2) rather than at the first solve, and whatever OR-tools' own wrapper is.
        if text.strip():
            from google.protobuf import text_format
            from ortools.sat import sat_parameters_pb2

            try:
                text_format.Parse(text, sat_parameters_pb2.SatParameters())
            except text_format.ParseError as exc:
                raise ValueError(f"not CP-SAT parameters: {exc}") from None
        return text


class PreemptionConfig(_ConfigModel):
    enabled: StrictBool = True
    pdb: Literal["soft", "hard"] = "soft"
    # Whether evicting the pods a ResourceClaim is reserved for counts its devices free for the
    # preemptor. Off: kube-scheduler's rule (its DynamicResources plugin has no RemovePod, so a
    # victim's devices come back only after the resourceclaim controller deallocates the claim
    # of the deleted pod). On: a plan kube-scheduler would not make, in greedy, the model and
    # the validator alike.
    free_devices: StrictBool = False


class RepackConfig(_ConfigModel):
    """Which pods ``repack`` may move, and what nodes cost (by instance type)."""

    move_bare_pods: StrictBool = False
    move_local_storage: StrictBool = False
    # kube-system pods without a PodDisruptionBudget stay, as cluster-autoscaler's
    # --skip-nodes-with-system-pods keeps their nodes; true moves them like any other pod.
    move_system_pods: StrictBool = False
    node_cost_label: str = "node.kubernetes.io/instance-type"
    # What a node of each instance type costs (``repack --objective cost``): finite, never below 0.
    instance_cost: dict[str, Annotated[float, Field(ge=0, allow_inf_nan=False)]] = Field(default_factory=dict)
    default_node_cost: float = Field(default=1.0, ge=0, allow_inf_nan=False)


# Largest snapshot (or plan) file read by default, in bytes. Reading takes up to about 4 times the
# file's size in memory (``adapters/bench/input_memory.py`` measures it), so the size is checked
# before a byte is parsed. 2 GiB holds a dump at the node and window limits with some
# 200,000 running pods besides (~5 KB per object as kubectl prints it).
DEFAULT_MAX_SNAPSHOT_BYTES = 2 * 1024**3
# Said after every refusal by a limit: the limits are settings, not the scheduler's own bounds.
LIMITS_HINT = "raise it in the config's limits section"


class LimitsConfig(_ConfigModel):
    """Bounds that keep one decision from exhausting memory; larger inputs are refused clearly,
    before anything is built from them (``solver/limits.py``, ``adapters/input_size.py``)."""

    max_nodes: StrictInt = Field(default=20000, ge=1)
    max_window_pods: StrictInt = Field(default=50000, ge=1)
    max_snapshot_bytes: StrictInt = Field(default=DEFAULT_MAX_SNAPSHOT_BYTES, ge=1)


class ExplainConfig(_ConfigModel):
    """``live.explain``: the live scheduler appends ``why``'s short answer (a minimal set of
    obstacles) to a left-out pod's ``PodScheduled`` message. Off by default: each answer costs
    several one-target decisions of CPU beside the decision loop, and a condition message that
    differs from kube-scheduler's is a choice the operator makes."""

    enabled: StrictBool = False
    # Left-out pods or gangs explained per cycle at most (the others wait for a later cycle).
    max_per_cycle: StrictInt = Field(default=2, ge=1)
    # Time one explanation may take, feasibility checks included; past it, none is written.
    seconds_per_target: float = Field(default=5.0, gt=0)


class LiveConfig(_ConfigModel):
    """What only ``cpsat-scheduler run`` reads."""

    explain: ExplainConfig = ExplainConfig()


class SchedulerConfig(_ConfigModel):
    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    profile: Literal["default", "packing"] = "default"
    # kube-scheduler version whose small behaviour differences to follow (SEMANTICS.md §0).
    kubernetes_version: KubernetesVersion = DEFAULT_KUBERNETES_VERSION
    scoring: ScoringConfig = ScoringConfig()
    solver: SolverConfig = SolverConfig()
    preemption: PreemptionConfig = PreemptionConfig()
    repack: RepackConfig = RepackConfig()
    limits: LimitsConfig = LimitsConfig()
    live: LiveConfig = LiveConfig()
    # greedy's tie-break among equal best scores: None is deterministic (first in node order);
    # an integer seeds kube-scheduler's uniform random choice.
    tie_break_seed: Optional[StrictInt] = None
    percentage_of_nodes_to_score: StrictInt = Field(default=0, ge=0, le=100)

    def with_overrides(self, **changes: object) -> "SchedulerConfig":
        """A copy with nested ``solver``/top-level fields replaced (CLI flags win over the file)."""
        solver_keys = set(SolverConfig.model_fields)
        solver_updates = {k: v for k, v in changes.items() if k in solver_keys and v is not None}
        top = {k: v for k, v in changes.items() if k not in solver_keys and v is not None}
        data = self.model_dump()
        data["solver"].update(solver_updates)
        data.update(top)
        # Validated again, so an override obeys the same bounds as the file.
        return SchedulerConfig.model_validate(data)

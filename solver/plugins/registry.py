"""Every rule the scheduler knows, listed once: where greedy, CP-SAT, re-packing and the validator
find them. Adding a rule means a package in ``plugins/`` and a line here, nowhere else.

* ``STATIC_FILTERS`` / ``DYNAMIC_FILTERS``: filter plugins in kube-scheduler's default order (the
  first failure is a node's status); static ones read only pod and node, dynamic ones the state.
* ``SCORE_PLUGINS``: score plugins in kube-scheduler's order; their weights come from the
  configuration (``scoring.weights``, kube-scheduler's defaults unless set).
* ``FILTER_ENCODERS``: the dynamic filters as CP-SAT constraints on a ``WindowModel`` (the
  static ones only prune its variables); ``WINDOW_ENCODERS`` adds the window-wide rules a
  scheduling window has and a re-packing does not (gangs, their required and preferred topology,
  victims' room).
* ``FINAL_CHECKS``: the validator's final-state checks, in the order their lines are reported.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from . import static_check
from .balanced_allocation import score as balanced_allocation_score
from .dynamic_resources import check as dynamic_resources_check
from .dynamic_resources import encode as dynamic_resources_encode
from .dynamic_resources import filter as dynamic_resources
from .gang import check as gang_check
from .gang import min_resources as gang_min_resources
from .gang import permit as gang
from .gang import preferred as gang_preferred
from .gang import topology as gang_topology
from .image_locality import score as image_locality_score
from .inter_pod_affinity import check as inter_pod_affinity_check
from .inter_pod_affinity import filter as inter_pod_affinity
from .inter_pod_affinity import score as inter_pod_affinity_score
from .node_affinity import filter as node_affinity
from .node_affinity import score as node_affinity_score
from .node_name import filter as node_name
from .node_ports import check as node_ports_check
from .node_ports import filter as node_ports
from .node_resources_fit import check as node_resources_fit_check
from .node_resources_fit import filter as node_resources_fit
from .node_resources_fit import score as node_resources_fit_score
from .node_unschedulable import filter as node_unschedulable
from .pod_topology_spread import check as pod_topology_spread_check
from .pod_topology_spread import filter as pod_topology_spread
from .pod_topology_spread import score as pod_topology_spread_score
from .preemption import check as preemption_check
from .preemption import nominated
from .preemption import victim_room
from .taint_toleration import filter as taint_toleration
from .taint_toleration import score as taint_toleration_score
from .node_volume_limits import check as node_volume_limits_check
from .node_volume_limits import encode as node_volume_limits
from .volume_binding import check as volume_binding_check
from .volume_binding import encode as volume_binding
from .volume_restrictions import check as volume_restrictions_check
from .volume_restrictions import encode as volume_restrictions
from .volume_zone import check as volume_zone_check
from .node_volume_limits import rules as node_volume_limits_rules
from .volume_binding import rules as volume_binding_rules
from .volume_restrictions import rules as volume_restrictions_rules
from .volume_zone import rules as volume_zone_rules

if TYPE_CHECKING:
    from ..cpsat.model import WindowModel
    from ..validate import Replay

STATIC_FILTERS = (node_unschedulable, node_name, taint_toleration, node_affinity)
DYNAMIC_FILTERS = (node_ports, node_resources_fit, pod_topology_spread, inter_pod_affinity, dynamic_resources)
# The volume filters run between NodeResourcesFit and PodTopologySpread, as one cycle for a pod
# with claims (``volume_binding/filter.py``: VolumeCycle); their rules, in order:
VOLUME_FILTERS = (volume_restrictions_rules, node_volume_limits_rules, volume_binding_rules, volume_zone_rules)
FILTER_NAMES = tuple(m.NAME for m in (*STATIC_FILTERS, node_ports, node_resources_fit, *VOLUME_FILTERS,
                                      pod_topology_spread, inter_pod_affinity, dynamic_resources))

SCORE_PLUGINS = (
    taint_toleration_score,
    node_affinity_score,
    node_resources_fit_score,
    pod_topology_spread_score,
    inter_pod_affinity_score,
    balanced_allocation_score,
    image_locality_score,
)
SCORE_PLUGIN_NAMES = tuple(p.NAME for p in SCORE_PLUGINS)

Encoder = Callable[["WindowModel"], None]
FILTER_ENCODERS: tuple[Encoder, ...] = (
    node_resources_fit.encode,
    node_ports.encode,
    inter_pod_affinity.encode,
    pod_topology_spread.encode,
    dynamic_resources_encode.encode,
)
WINDOW_ENCODERS: tuple[Encoder, ...] = FILTER_ENCODERS + (
    # min_resources after gang: it orders the kinds' run counts gang.encode makes
    gang.encode, gang_min_resources.encode, gang_topology.encode, gang_preferred.encode, victim_room.encode,
    nominated.encode,
    # the volume plugins' window-wide parts (their node-local parts prune candidates)
    volume_restrictions.encode, node_volume_limits.encode, volume_binding.encode,
)

Check = Callable[["Replay"], None]
FINAL_CHECKS: tuple[Check, ...] = (
    static_check.check,
    node_resources_fit_check.check,
    node_ports_check.check,
    volume_restrictions_check.check,
    node_volume_limits_check.check,
    volume_binding_check.check,
    volume_zone_check.check,
    inter_pod_affinity_check.check_anti_affinity,
    inter_pod_affinity_check.check_affinity,
    pod_topology_spread_check.check,
    gang_check.check,
    gang_topology.check,
    preemption_check.check,
    nominated.check,
    dynamic_resources_check.check,
)

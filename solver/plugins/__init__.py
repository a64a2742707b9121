"""kube-scheduler's plugins, one package each, holding every use of its rule.

A plugin package keeps side by side what the rest of the solver needs of one rule:

- ``plugin.py``: ``PLUGIN``, the one object naming what the package implements (filter, prune,
  encode, score, final checks, whether it keeps state per node) — ``plugin_api.Plugin``;
- ``filter.py``: the Filter (and PreFilter) with kube-scheduler's reasons, vectorised over
  nodes, and the rule's one predicate (``pod_topology_spread.skew_floor``, ...);
- ``encode.py``: the same rule as CP-SAT constraints on the window model, beside its filter;
- ``score.py``: the Score (and PreScore/NormalizeScore) of the default profile;
- ``check.py``: the rule read on a plan's final state, for the independent validator.

``gang/`` is the all-or-nothing group rule (kube-scheduler's coscheduling Permit, with its one
minMember test ``reaches_min_member``) and ``preemption/`` the DefaultPreemption PostFilter:
who may preempt whom (``shared.preemption_rule``), which victims a plan may name,
and PodDisruptionBudgets. ``volumes/`` is a family of four plugin packages (VolumeBinding,
VolumeRestrictions, VolumeZone, NodeVolumeLimits) that may import one another. No other plugin
imports another: what several ask of one rule is in ``shared/`` (resource fit, host ports, node
inclusion, who may preempt whom, the amounts the resource scores read). ``static_check.py``
replays the four static filters for the validator and ``helper.py`` holds the arithmetic the
score plugins share.

``registry.py`` lists the ``PLUGIN`` objects once and derives from them what greedy's filtering,
the scoring, CP-SAT, re-packing and the validator read. A plugin imports its types from
``solver.plugin_api`` and the basics under it, never an engine that calls it (an import-linter
contract in pyproject.toml holds this, type-only imports included).
"""

"""kube-scheduler's plugins, one package each, holding every use of its rule.

A plugin package keeps side by side what the rest of the solver needs of one rule:

- ``filter.py``: the Filter (and PreFilter) with kube-scheduler's reasons, vectorised over
  nodes, the rule's one predicate (``node_resources_fit.fits``, ``pod_topology_spread.skew_floor``,
  ...) and its CP-SAT encoding as a hard constraint (``encode``);
- ``score.py``: the Score (and PreScore/NormalizeScore) of the default profile;
- ``check.py``: the rule read on a plan's final state, for the independent validator.

``gang/`` is the all-or-nothing group rule (kube-scheduler's coscheduling Permit, with its one
minMember test ``reaches_min_member``) and ``preemption/`` the DefaultPreemption PostFilter:
who may preempt whom (``victim_room.why_not``/``may_preempt``), which victims a plan may name,
and PodDisruptionBudgets. ``static_check.py`` replays the four static filters for the validator
and ``helper.py`` holds the arithmetic the score plugins share.

``registry.py`` lists them all once — filters in kube order, scores, CP-SAT encoders, final
checks — and is what greedy's filtering, the scoring, CP-SAT, re-packing and the validator read.
Nothing here imports the CP-SAT window model or the engines that call the plugins.
"""

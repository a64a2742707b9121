"""kube-scheduler's plugins, one package each, holding every use of its rule.

A plugin package keeps side by side what the rest of the solver needs of one rule:

- ``filter.py``: the Filter (and PreFilter) with kube-scheduler's reasons, vectorised over
  nodes, and the rule's CP-SAT encoding as a hard constraint (``encode``);
- ``score.py``: the Score (and PreScore/NormalizeScore) of the default profile.

``gang/`` is the all-or-nothing group rule (kube-scheduler's coscheduling Permit) and
``preemption/`` the DefaultPreemption PostFilter: who may preempt whom, which victims a plan
may name, and PodDisruptionBudgets. ``helper.py`` holds the arithmetic the score plugins share. Nothing here imports the CP-SAT
window model or the engines that call the plugins.
"""

"""What several plugins ask of one rule, offered once: the plugins import these, never another
plugin's module (``tests/test_layers.py`` fails on an import across plugin packages).

kube-scheduler's plugins share their arithmetic the same way (``noderesources.Fits``, the
``helper`` package); here each module holds one rule's predicate and the plugin that owns the rule
imports it from here too, so the rule is still written once:

- ``resource_fit``: a request against a node's room (NodeResourcesFit's ``fits``, ``copies`` and
  the status of a shortage), for preemption's dry run and gangs' topology counts;
- ``requested``: a node's allocatable and requested amounts as the resource scores read them
  (NodeResourcesFit, BalancedAllocation);
- ``host_ports``: when two host ports collide (NodePorts), for preemption and provisioning;
- ``node_inclusion``: the static verdicts topology spread's inclusion policies read (node
  affinity and selector, NoSchedule/NoExecute taints);
- ``preemption_rule``: who may preempt whom (DefaultPreemption), for the encodings that weigh
  evictions.

``helper.py`` beside this package holds the score plugins' shared arithmetic.
"""

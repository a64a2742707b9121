"""A plugin living only in the tests, to prove that a new rule is one package and one registry
line (``registry.register(PLUGIN)``): no edit of an engine, the registry or any other plugin.

CrewRack: pods annotated ``proof.example.com/crew: <name>`` (one crew per namespace and name)
must all run on nodes carrying the same value of the node label ``proof.example.com/rack``; a
node without the label takes no crew pod. It reads a pod field no built-in rule reads (an
annotation) and a node label no built-in rule reads, couples pods across nodes, keeps its own
state (how many of each crew's pods every rack holds), and writes an annotation at bind time
(``proof.example.com/placed-rack``).
"""

from .plugin import PLUGIN

__all__ = ["PLUGIN"]

"""DefaultPreemption (PostFilter): greedy's victim search (``postfilter.py``), who may preempt
whom and which victims a plan may name, with the CP-SAT room rule (``victim_room.py``),
PodDisruptionBudgets (``pdb.py``), and nominated pods: who waits for its victims instead of
preempting again, and the room a nominated pod outside the window keeps (``nominated.py``)."""

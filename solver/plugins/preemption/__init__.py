"""DefaultPreemption (PostFilter): greedy's victim search (``postfilter.py``), who may preempt
whom and which victims a plan may name, with the CP-SAT room rule (``victim_room.py``), and
PodDisruptionBudgets (``pdb.py``)."""

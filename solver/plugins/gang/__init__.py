"""Gangs: all-or-nothing pod groups (kube-scheduler's coscheduling Permit): who belongs to
which group, minMember, and the group's CP-SAT encoding (``permit.py``)."""

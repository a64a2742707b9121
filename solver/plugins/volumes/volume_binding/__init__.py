"""VolumeBinding: a pod's claims must be usable on the node (filter, CP-SAT encoding, final check)."""

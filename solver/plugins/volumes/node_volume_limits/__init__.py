"""NodeVolumeLimits: per CSI driver, a node attaches no more volumes than its CSINode allows
(filter, CP-SAT encoding, final check)."""

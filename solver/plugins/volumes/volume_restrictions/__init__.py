"""VolumeRestrictions: a ReadWriteOncePod claim serves one pod (filter, CP-SAT encoding, final check)."""

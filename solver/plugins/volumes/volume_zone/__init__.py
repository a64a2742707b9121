"""VolumeZone: a bound volume's zone and region labels must match the node's (filter, final check)."""

"""InterPodAffinity: required pod (anti-)affinity as a filter and its CP-SAT encoding,
preferred terms as a score."""

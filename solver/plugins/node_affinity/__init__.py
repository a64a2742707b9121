"""NodeAffinity: nodeSelector and required node affinity (filter), preferred terms (score)."""

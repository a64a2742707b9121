"""NodeName: a pod naming its node goes only there (filter)."""
